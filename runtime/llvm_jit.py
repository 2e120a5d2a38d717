"""Loading the llvm code generator's artifacts: their object code linked into this process by
MCJIT, ready to call through ctypes.

``load_kernel(artifact)`` gives a ``JitKernel``: the artifact (function, slots, target, sources)
with the ``address`` of its entry and of its thread-count global. The same artifact loads once
per process (the code generator returns the same artifact for an unchanged function).
"""
from __future__ import annotations

import ctypes.util
import threading
from dataclasses import dataclass
from typing import Any

from ..ir.errors import TVMSError
from ..ir.object_symbols import undefined_symbols
from .thread_pool import load_thread_pool

_LOCK = threading.Lock()
_LOADED: dict[int, tuple] = {}  # id of an artifact -> (it, its JitKernel)
_binding: Any = None


def _llvm() -> Any:
    """llvmlite's binding, set up once for the JIT: the native target, and libm's functions
    (tanhf, erff, ...) for the code to link against."""
    global _binding
    with _LOCK:
        if _binding is None:
            try:
                import llvmlite.binding as llvm
            except ImportError:  # pragma: no cover - llvmlite is a dependency
                raise TVMSError("running llvm code needs llvmlite: pip install llvmlite") from None
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            libm = ctypes.util.find_library("m")
            if libm:
                llvm.load_library_permanently(libm)
            _binding = llvm
    return _binding


@dataclass(frozen=True)
class JitKernel:
    """A loaded artifact: ``address`` of ``void entry(i64 *slots)``, ``num_threads_address``
    of its thread-count global (0 without parallel loops), and the engine that owns the code
    (kept alive with it). Other attributes are the artifact's (``func``, ``slots``, ``target``,
    ``llvm_ir``, ``assembly()``, ...)."""

    artifact: Any
    address: int
    num_threads_address: int
    engine: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.artifact, name)


def load_kernel(artifact: Any) -> JitKernel:
    """``artifact``'s object code linked into this process (once per artifact)."""
    with _LOCK:
        entry = _LOADED.get(id(artifact))
    if entry is not None and entry[0] is artifact:
        return entry[1]
    from .thread_pool_ir import POOL_SYMBOL  # (imports llvmlite)

    llvm = _llvm()
    obj = llvm.ObjectFileRef.from_data(artifact.object_code)
    undefined = undefined_symbols(obj)
    if artifact.thread_pool and artifact.thread_pool != "pthread":
        # (its symbols must be visible before the code is linked; tvms's pool only for code that calls it)
        load_thread_pool(own_pool=POOL_SYMBOL in undefined)
    target = artifact.target
    machine = llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="default", codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    missing = [name for name in undefined if not llvm.address_of_symbol(name)]
    if missing:  # (MCJIT would link the calls to address 0, and the first call would crash)
        raise TVMSError(f"cannot load the code of {artifact.symbol!r}: it needs {', '.join(missing)}, "
                        f"which this process does not define")
    engine.add_object_file(obj)
    engine.finalize_object()
    threads = engine.get_global_value_address(artifact.threads_symbol) if artifact.thread_pool else 0
    kernel = JitKernel(artifact, engine.get_function_address(artifact.symbol), threads, engine)
    with _LOCK:
        _LOADED[id(artifact)] = (artifact, kernel)
    return kernel


__all__ = ["JitKernel", "load_kernel", "undefined_symbols"]
