"""Target-specific LLVM intrinsics (``T.call_llvm_pure_intrin("int32", "llvm.amdgcn.sdot4", ...)``)
checked before LLVM sees them, since LLVM ends the process on some instead of reporting an error.

- One of another architecture than the host's (``llvm.amdgcn.*``, ``llvm.nvvm.*`` on x86) is
  refused by name: LLVM's instruction selection aborts on it ("Cannot select: intrinsic").
- One of the host's architecture is compiled first in a process of its own (``probe``), once per
  module text and CPU: LLVM aborts on some calls of them instead of reporting them, an old name
  that it upgrades called with other types than the upgrade expects (an assertion) or an
  instruction the CPU's features lack. A probe that LLVM ends (a signal, an "LLVM ERROR", an
  assertion) is a TVMSError with LLVM's last words; one that cannot run leaves the build unprobed.
Target-independent intrinsics (``llvm.fmuladd``, ``llvm.sqrt``) need neither.

A name LLVM does not know as an intrinsic (``llvm.getpid``) compiles without complaint: LLVM
leaves the call as one of an outside function of that name, which nothing defines. So the
object code is asked (``refuse_unknown_intrinsics``): a symbol ``llvm.*`` it leaves undefined is
a name that is no intrinsic, refused when the function is built, not when it is loaded.
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.errors import ScriptError, TVMSError
from ...ir.function import PrimFunc
from ...ir.object_symbols import undefined_symbols
from ...ir.visitor import collect

# LLVM's target prefixes of intrinsic names (``llvm.<prefix>.<name>``)
TARGET_PREFIXES = ("aarch64", "amdgcn", "arm", "bpf", "dx", "hexagon", "loongarch", "mips", "nvvm", "ppc",
                   "r600", "riscv", "s390", "spv", "ve", "wasm", "x86", "xcore")
# the prefix of the host's intrinsics by the first part of its triple
_HOST_PREFIX = (("x86_64", "x86"), ("i386", "x86"), ("i686", "x86"), ("aarch64", "aarch64"), ("arm64", "aarch64"),
                ("arm", "arm"), ("thumb", "arm"), ("powerpc", "ppc"), ("riscv", "riscv"), ("s390x", "s390"),
                ("loongarch", "loongarch"), ("mips", "mips"), ("wasm", "wasm"))
_DECLARED = re.compile(r'^declare [^@]*@"?(llvm\.(' + "|".join(TARGET_PREFIXES) + r')\.[\w.]+)"?\(', re.M)
PROBE_SECONDS = 60


def target_prefix(symbol: str) -> str | None:
    """The architecture prefix of an intrinsic's name (``x86`` of ``llvm.x86.avx2.pmadd.wd``), or None."""
    parts = symbol.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "llvm" and parts[1] in TARGET_PREFIXES else None


def host_prefix(triple: str) -> str | None:
    arch = triple.split("-", 1)[0]
    return next((prefix for start, prefix in _HOST_PREFIX if arch.startswith(start)), None)


def refuse_foreign_intrinsic(symbol: str) -> None:
    """Refuse ``symbol`` when it is an intrinsic of another architecture than the host's (the
    llvm target compiles for the host only)."""
    prefix = target_prefix(symbol)
    if prefix is None:
        return
    import llvmlite.binding as llvm  # (a dependency; imported where the code generator runs)

    triple = llvm.get_process_triple()
    if prefix != host_prefix(triple):
        raise TVMSError(f"the LLVM intrinsic {symbol} is one of the {prefix} target; the llvm target compiles "
                        f"for this machine ({triple}), whose instructions have no such intrinsic")


def refuse_unknown_intrinsics(func: PrimFunc, object_code: bytes) -> None:
    """Refuse the code of ``func`` where it calls an ``llvm.*`` name that LLVM does not know as an
    intrinsic (the object code leaves it undefined); a ScriptError at the statement that calls it
    where the function has a span there."""
    import llvmlite.binding as llvm  # (a dependency; imported where the code generator runs)

    unknown = [name for name in undefined_symbols(llvm.ObjectFileRef.from_data(object_code))
               if name.startswith("llvm.")]
    if not unknown:
        return
    call = _call_of(func, unknown[0])
    if call is None:  # (not a name the function wrote: the code generator's own)
        raise TVMSError(f"the generated code calls {unknown[0]}, which is not an LLVM intrinsic")
    version = ".".join(map(str, llvm.llvm_version_info))
    takes = ", ".join(str(a.dtype) for a in call.args[1:]) or "no arguments"
    message = (f"T.{call.op.name.removeprefix('tir.')}: LLVM {version} has no intrinsic {call.args[0].value!r} "
               f"of {takes} returning {call.dtype}: the code would call a function of that name, "
               f"which nothing defines")
    span = _innermost_span(func, call)
    raise ScriptError(message, span) if span is not None else TVMSError(message)


def _call_of(func: PrimFunc, symbol: str) -> E.Call | None:
    """The first ``T.call_llvm_intrin`` of ``func`` that names ``symbol``."""
    for call in collect(func.body, E.Call):
        if getattr(call.op, "name", "") in ("tir.call_llvm_intrin", "tir.call_llvm_pure_intrin") and \
                call.args and isinstance(call.args[0], E.StringImm) and call.args[0].value == symbol:
            return call
    return None


def _innermost_span(func: PrimFunc, call: E.Call):
    """The span of the innermost statement with one that holds ``call`` (None where none has)."""
    holding = [s for s in collect(func.body, S.Stmt)
               if s.span is not None and any(c is call for c in collect(s, E.Call))]
    innermost = holding[0] if holding else None
    for stmt in holding[1:]:  # (pre-order: those inside the one found so far come next)
        if not any(inner is stmt for inner in collect(innermost, S.Stmt)):
            break
        innermost = stmt
    return innermost.span if innermost is not None else None


# (run by a fresh interpreter: only llvmlite, the IR on stdin; exit 0 when it compiles, 3 when
# LLVM reports an error, which the build then reports itself, 4 when the probe cannot start)
_PROBE = """
import sys
try:
    import llvmlite.binding as llvm
    llvm.initialize_native_target(); llvm.initialize_native_asmprinter()
except Exception:
    sys.exit(4)
triple, cpu, features = sys.argv[1:4]
try:
    module = llvm.parse_assembly(sys.stdin.read())
    module.verify()
except RuntimeError:
    sys.exit(3)
module.triple = triple
machine = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=0)
machine.emit_object(module)
"""


def probe(ir_text: str, triple: str, cpu: str, features: str) -> None:
    """Compile ``ir_text`` in a process of its own when it declares target-specific intrinsics;
    a TVMSError when LLVM ends that process (see the module docstring)."""
    declared = sorted({m.group(1) for m in _DECLARED.finditer(ir_text)})
    if declared:
        _probe(ir_text, triple, cpu, features, tuple(declared))


@functools.lru_cache(maxsize=64)
def _probe(ir_text: str, triple: str, cpu: str, features: str, declared: tuple) -> None:
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, triple, cpu, features], input=ir_text,
                              capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        raise TVMSError(f"LLVM did not finish compiling the calls of {', '.join(declared)} in "
                        f"{PROBE_SECONDS} s") from None
    except OSError:  # (no interpreter to run it: an embedded one; the build goes on unprobed)
        return
    said = [line.strip() for line in done.stderr.splitlines() if "LLVM ERROR" in line or "Assertion" in line]
    if done.returncode in (0, 3) or (done.returncode > 0 and not said):
        return  # (compiled, reported, or the probe itself could not run: not LLVM's abort)
    last = said[-1] if said else (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    last = last[last.find("Assertion"):] if "Assertion" in last else last  # (not the source file's path)
    raise TVMSError(f"LLVM cannot compile the calls of {', '.join(declared)} for {cpu} ({triple}): it "
                    f"ended with {last[:300]} (check the intrinsic's argument types and the CPU's features)")
