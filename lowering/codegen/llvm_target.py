"""The host CPU as an LLVM target: target strings, the target machine, O3 optimization, MCJIT.

``parse_llvm_target("llvm -mcpu=znver3 -num-cores=2")`` reads the target and refuses names LLVM
would abort on (``llvm_names``); ``optimize`` runs llvmlite's new pass manager at O3 tuned for
that CPU; ``jit`` hands optimized IR to MCJIT.
"""
from __future__ import annotations

import ctypes.util
import os
import threading
from dataclasses import dataclass

from ...ir.errors import TVMSError
from .llvm_names import check_names

try:
    import llvmlite.binding as llvm
except ImportError:  # pragma: no cover - llvmlite is a dependency; the message says what to do
    llvm = None

_INIT_LOCK = threading.Lock()
_CPU_COUNT = os.cpu_count() or 1
_initialized = False


def require_llvm():
    """llvmlite's binding, initialized once (native target, asm printer, process symbols)."""
    global _initialized
    if llvm is None:
        raise TVMSError("the llvm target needs llvmlite: pip install llvmlite")
    with _INIT_LOCK:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            libm = ctypes.util.find_library("m")
            if libm:  # libm's functions (tanhf, erff, ...) for the JIT to link against
                llvm.load_library_permanently(libm)
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
        env = os.environ.get("TVM_NUM_THREADS", "")
        if env.strip().isdigit() and int(env) > 0:
            return int(env)
        return self.num_cores or _CPU_COUNT


def parse_llvm_target(target: object) -> LLVMTarget:
    """An ``LLVMTarget`` from ``"llvm -mcpu=... -mattr=+avx2 -num-cores=4"`` (or an object whose
    ``str()`` gives such a string, as a ``Target`` does)."""
    text = str(target).strip() if target is not None else "llvm"
    words = text.split()
    if not words or words[0] != "llvm":
        raise TVMSError(f"build supports the target 'llvm' (the host CPU), not {text!r}")
    fields: dict = {}
    for word in words[1:]:
        key, eq, value = word.lstrip("-").partition("=")
        if not eq:
            continue  # flags such as -keys are not needed to generate host code
        if key == "mcpu":
            fields["mcpu"] = "" if value == "native" else value  # (TVM's name for the host CPU)
        elif key == "mattr":
            fields["mattr"] = tuple(v for v in value.split(",") if v)
        elif key == "mtriple":
            fields["mtriple"] = value
        elif key == "num-cores":
            if not value.isdigit() or int(value) < 1:
                raise TVMSError(f"target {text!r}: -num-cores needs a positive integer")
            fields["num_cores"] = int(value)
    parsed = LLVMTarget(text=text, **fields)
    check_names(text, parsed.mcpu, parsed.mattr, parsed.mtriple)
    return parsed


def target_machine(target: LLVMTarget):
    binding = require_llvm()
    return binding.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="default", codemodel="jitdefault")


def optimize(ir_text: str, target: LLVMTarget):
    """Parse, verify and optimize LLVM IR at O3 for ``target``; returns the binding module."""
    binding = require_llvm()
    try:
        module = binding.parse_assembly(ir_text)
        module.verify()
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


def assembly(module, target: LLVMTarget) -> str:
    """The machine code of an optimized module as assembly text."""
    return target_machine(target).emit_assembly(module)

