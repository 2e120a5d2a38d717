"""The CPU, feature and triple names a target may give, checked before LLVM sees them.

LLVM does not refuse a bad name: ``-mcpu=skylakee`` (or ``native``, which LLVM itself does not
know) makes it generate for a CPU without 64-bit mode and exit the process ("LLVM ERROR: 64-bit
code requested on a subtarget that doesn't support it!"), a feature without its ``+``/``-`` trips
an assertion (SIGABRT), and an unknown one is ignored with a warning. llvmlite lists the host's
CPU name and features but not every CPU, so the names live in ``llvm_names.json``: for x86_64
and aarch64, the CPUs and features LLVM's ``-mcpu=help`` lists (through llvmlite's
``create_target_machine(cpu="help")``), each CPU and each ``+feature``/``-feature`` then tried
alone by generating a small function in a child process, and only those that generated code kept.
``python -m tvms.lowering.codegen.llvm_names`` writes the table again for the installed LLVM
(``llvm_version`` in the file says which one made it; a test compares it with llvmlite's).
"""
from __future__ import annotations

import difflib
import functools
import json
import os
import subprocess
import sys

from ...ir.errors import TVMSError

TABLE = os.path.join(os.path.dirname(__file__), "llvm_names.json")
TRIPLES = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}


@functools.lru_cache(maxsize=None)
def table() -> dict:
    with open(TABLE, encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=256)  # (targets are parsed for every function compiled)
def check_names(text: str, mcpu: str, mattr: tuple, mtriple: str) -> None:
    """Refuse a ``-mcpu``, ``-mattr`` or ``-mtriple`` of the target ``text`` that LLVM does not
    know or cannot generate code for on this machine, naming the close valid ones."""
    from .llvm_target import require_llvm

    llvm = require_llvm()
    host = llvm.get_triple_parts(llvm.get_process_triple())
    if mtriple:
        _check_triple(text, mtriple, host, llvm)
    arch = host.Arch  # (the only one a triple may name)
    names = table()["arches"].get(arch, {"cpus": [], "known_cpus": [], "features": {}})
    host_cpu = llvm.get_host_cpu_name()
    if mcpu and mcpu not in ("native", host_cpu) and mcpu not in names["cpus"]:
        if mcpu in names["known_cpus"]:
            raise TVMSError(f"target {text!r}: LLVM cannot generate {arch} code for -mcpu={mcpu} "
                            f"(a CPU without {arch}'s 64-bit mode){_close(mcpu, names['cpus'])}")
        raise TVMSError(f"target {text!r}: unknown -mcpu {mcpu!r} for {arch}"
                        f"{_close(mcpu, names['cpus'] + ['native'])}")
    host_features = {name for name in llvm.get_host_cpu_features()}
    for feature in mattr:
        sign, name = feature[:1], feature[1:]
        if sign not in ("+", "-"):
            raise TVMSError(f"target {text!r}: -mattr feature {feature!r} must start with '+' (enable) "
                            f"or '-' (disable){_close('+' + feature, _signed(names['features']))}")
        allowed = names["features"].get(name, "+-" if name in host_features else "")
        if sign not in allowed:
            problem = (f"LLVM cannot generate {arch} code with {feature!r}" if name in names["features"]
                       else f"unknown -mattr feature {feature!r} for {arch}")
            raise TVMSError(f"target {text!r}: {problem}{_close(feature, _signed(names['features']))}")


def _check_triple(text: str, mtriple: str, host, llvm) -> None:
    """``mtriple`` must name this machine's architecture and OS: tvms runs the code it generates
    here, and links libraries with the host's C compiler."""
    parts = llvm.get_triple_parts(mtriple)
    host_triple = llvm.get_process_triple()
    if parts.Arch == host.Arch and parts.OS in (host.OS, "unknown"):
        return
    known = [host_triple, f"{host.Arch}-pc-{host.OS}-gnu", f"{host.Arch}-{host.OS}-gnu"]
    if parts.Arch == "unknown":
        problem = f"LLVM knows no architecture in -mtriple {mtriple!r} (a triple is arch-vendor-os)"
    else:
        problem = (f"-mtriple {mtriple!r} is {parts.Arch} for {parts.OS}; tvms generates code for "
                   f"this machine only ({host_triple})")
    raise TVMSError(f"target {text!r}: {problem}{_close(mtriple, known)}")


def _signed(features: dict) -> list:
    return [sign + name for name, signs in features.items() for sign in signs]


def _close(word: str, names: list) -> str:
    close = difflib.get_close_matches(word, names, n=4, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


# --------------------------------------------------------------------------- writing the table

_PROBE = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
triple, kind = sys.argv[1], sys.argv[2]
target = llvm.Target.from_triple(triple)
if kind == "help":
    target.create_target_machine(cpu="help")
    sys.exit(0)
code = '''
define float @f(float %x, double %y, <4 x float> %v) {
  %d = fptrunc double %y to float
  %s = fadd float %x, %d
  %e = extractelement <4 x float> %v, i32 1
  %r = fmul float %s, %e
  ret float %r
}
'''
for line in sys.stdin:
    name = line.strip()
    cpu, features = (name, "") if kind == "cpu" else ("", name)
    module = llvm.parse_assembly(code)
    module.triple = triple
    machine = target.create_target_machine(cpu=cpu, features=features, opt=0)
    machine.emit_object(module)
    print(name, flush=True)
"""


def _child(triple: str, kind: str, names: list) -> tuple[list, str]:
    """Run the probe on ``names``; the names that generated code, and the child's stderr."""
    done = subprocess.run([sys.executable, "-c", _PROBE, triple, kind], input="".join(n + "\n" for n in names),
                          capture_output=True, text=True)
    return done.stdout.split(), done.stderr


def _usable(triple: str, kind: str, names: list) -> list:
    """The names that generate code alone: the probe runs until one kills it, then goes on after it."""
    good, left = [], list(names)
    while left:
        passed, _ = _child(triple, kind, left)
        good += passed
        left = left[len(passed) + 1:]  # (the name after the last passed one killed the child)
    return good


def _listed(help_text: str, heading: str) -> list:
    lines = help_text.split(heading, 1)[1].split("\n\n", 2)[1].splitlines()
    return [line.split()[0] for line in lines if line.startswith("  ")]


def build_table() -> dict:
    from .llvm_target import require_llvm

    arches = {}
    for arch, triple in TRIPLES.items():
        help_text = _child(triple, "help", [])[1]
        known_cpus = _listed(help_text, "Available CPUs for this target:")
        features = _listed(help_text, "Available features for this target:")
        signed = _usable(triple, "feature", [s + f for f in features for s in "+-"])
        arches[arch] = {
            "cpus": _usable(triple, "cpu", known_cpus),
            "known_cpus": known_cpus,
            "features": {f: "".join(s for s in "+-" if s + f in signed) for f in features},
        }
    version = ".".join(map(str, require_llvm().llvm_version_info))
    return {"llvm_version": version, "source": "llvmlite create_target_machine(cpu='help'), each name "
            "probed alone (python -m tvms.lowering.codegen.llvm_names)", "arches": arches}


if __name__ == "__main__":
    with open(TABLE, "w", encoding="utf-8") as out:
        json.dump(build_table(), out, indent=1, sort_keys=True)
        out.write("\n")
