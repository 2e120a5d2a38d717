"""The host CPU as an LLVM target: the target's machine, O3 optimization, assembly.

``parse_llvm_target("llvm -mcpu=znver3 -num-cores=2")`` reads the target and refuses names LLVM
would abort on (``llvm_names``); ``optimize`` runs llvmlite's new pass manager at O3 tuned for
that CPU (the runtime links the object code into the process: ``runtime/llvm_jit.py``).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from ...ir.errors import TVMSError
from ...ir.target import Target, as_target, thread_count
from .llvm_half import support_module
from .llvm_intrinsic_check import probe
from .llvm_names import check_names

try:
    import llvmlite.binding as llvm
except ImportError:  # pragma: no cover - llvmlite is a dependency; the message says what to do
    llvm = None

_INIT_LOCK = threading.Lock()
_initialized = False


def require_llvm():
    """llvmlite's binding, initialized once (native target, asm printer)."""
    global _initialized
    if llvm is None:
        raise TVMSError("the llvm target needs llvmlite: pip install llvmlite")
    with _INIT_LOCK:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True
    return llvm


@dataclass(frozen=True)
class LLVMTarget:
    """A parsed ``llvm ...`` target string; unspecified fields mean "the host"."""

    mcpu: str = ""
    mattr: tuple = ()
    mtriple: str = ""
    num_cores: int = 0
    text: str = "llvm"

    @property
    def cpu(self) -> str:
        return self.mcpu or require_llvm().get_host_cpu_name()

    @property
    def triple(self) -> str:
        return self.mtriple or require_llvm().get_process_triple()

    @property
    def features(self) -> str:
        if self.mattr:
            return ",".join(self.mattr)
        return require_llvm().get_host_cpu_features().flatten() if not self.mcpu else ""

    @property
    def threads(self) -> int:
        """Threads for parallel loops: TVM_NUM_THREADS, else ``-num-cores``, else all cores."""
        return thread_count(self.num_cores)


def parse_llvm_target(target: object) -> LLVMTarget:
    """An ``LLVMTarget`` from a ``Target`` of kind ``llvm`` (or the text of one, such as
    ``"llvm -mcpu=... -mattr=+avx2 -num-cores=4"``), refusing CPU and feature names LLVM would
    abort on (``llvm_names``). The options are read by ``Target``, the one target parser."""
    parsed = as_target("llvm" if target is None else target if isinstance(target, (Target, dict)) else str(target))
    if parsed.kind != "llvm":
        raise TVMSError(f"the LLVM code generator takes the target 'llvm' (the host CPU), not {str(parsed)!r}")
    mcpu = parsed.mcpu or ""
    llvm_target = LLVMTarget(mcpu="" if mcpu == "native" else mcpu,  # (TVM's name for the host CPU)
                             mattr=parsed.mattr, mtriple=parsed.attrs.get("mtriple", ""),
                             num_cores=parsed.num_cores or 0, text=parsed.text)
    check_names(parsed.text, llvm_target.mcpu, llvm_target.mattr, llvm_target.mtriple)
    return llvm_target


def target_machine(target: LLVMTarget, reloc: str = "default", opt: int = 3):
    """The machine ``target`` names; its code is for the JIT, or position-independent for a
    shared library with ``reloc="pic"``; ``opt``: the code generator's optimization level."""
    binding = require_llvm()
    return binding.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=opt, reloc=reloc,
        codemodel="jitdefault" if reloc == "default" else "default")


def optimize(ir_text: str, target: LLVMTarget):
    """Parse, verify and optimize LLVM IR at O3 for ``target``; returns the binding module (with
    ``llvm_half``'s float16 conversions where the IR uses half)."""
    binding = require_llvm()
    probe(ir_text, target.triple, target.cpu, target.features)  # (LLVM aborts on some target intrinsics)
    try:
        module = binding.parse_assembly(ir_text)
        module.verify()
        if "half" in ir_text:  # (the float16 conversions LLVM would call compiler-rt for)
            module.link_in(binding.parse_assembly(support_module()))
    except RuntimeError as err:  # a codegen bug: show the IR's complaint, not a crash
        raise TVMSError(f"generated LLVM IR is invalid: {err}") from None
    tm = target_machine(target)
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    options = binding.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = True
    options.loop_unrolling = True
    builder = binding.create_pass_builder(tm, options)
    builder.getModulePassManager().run(module, builder)
    return module


# A 512-bit vector sum: the register names in its code tell the width LLVM computes it at
_WIDTH_PROBE = """define void @probe(ptr %p, ptr %q) {
  %a = load <16 x float>, ptr %p
  %b = load <16 x float>, ptr %q
  %c = fadd <16 x float> %a, %b
  store <16 x float> %c, ptr %p
  ret void
}"""


@functools.lru_cache(maxsize=None)
def named_cpu_vector_bits(cpu: str, features: str = "") -> int:
    """The vector width (bits) LLVM computes a 512-bit vector operation at for the x86 CPU ``cpu``
    with ``features`` (``-mattr``'s, added to or taken from the CPU's): its code's registers, zmm,
    ymm or xmm, asked of LLVM itself, which knows each CPU name's features. (The llvm target
    takes the host's architecture only: ``parse_llvm_target`` refuses another triple.)"""
    mattr = tuple(f for f in features.split(",") if f)
    code = assembly(require_llvm().parse_assembly(_WIDTH_PROBE), LLVMTarget(mcpu=cpu, mattr=mattr))
    return 512 if "%zmm" in code else 256 if "%ymm" in code else 128


def assembly(module, target: LLVMTarget) -> str:
    """The machine code of an optimized module as assembly text."""
    return target_machine(target).emit_assembly(module)

