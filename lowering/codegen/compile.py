"""The llvm target's code generator: a lowered PrimFunc -> native code for the host CPU, cached
by content.

``compile_prim_func(func, target)`` takes loop-level code (the build driver has run the TIR
pipeline), generates LLVM IR, optimizes it at O3 for the target CPU and emits its object code:
a ``KernelArtifact``, which the runtime loads (``runtime/llvm_jit.py``). The result is cached
under a hash of the printed function, the target and the entry symbol, so building an unchanged
function again is a dictionary lookup; the object code is also kept on disk (``object_cache.py``),
so a new process loads it instead of generating it again.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from ...ir import stmt as S
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from . import llvm_parallel, object_cache
from .extern_functions import check_extern_calls
from .llvm import codegen_llvm, entry_slots
from .llvm_intrinsic_check import refuse_unknown_intrinsics
from .llvm_target import LLVMTarget, assembly, optimize, parse_llvm_target, target_machine


@dataclass(frozen=True)
class KernelArtifact:
    """What the llvm code generator makes of a lowered PrimFunc, for the runtime to load: the
    object code of ``void symbol(i64 *slots)``, the variables each slot holds, the function
    (its signature: what a call checks) and the thread pool its parallel loops launch on (None
    without parallel loops). ``threads_symbol`` names the thread-count global the runtime sets."""

    func: PrimFunc
    target: LLVMTarget
    symbol: str
    slots: tuple
    object_code: bytes  # relocatable code for the JIT (``runtime/llvm_jit.py``)
    thread_pool: str | None
    llvm_ir: str
    optimized_ir: str
    threads_symbol: str = llvm_parallel.NUM_THREADS_SYMBOL

    def assembly(self) -> str:
        """The machine code as assembly (generated on demand: it takes a moment)."""
        return assembly(_parse(self.optimized_ir), self.target)

    def shared_object(self, threads_symbol: str | None) -> bytes:
        """The code as position-independent object code, for a shared library; its
        thread-count global renamed ``threads_symbol`` (each function of a library has its own)."""
        module = _parse(self.optimized_ir)
        if threads_symbol is not None:
            module.get_global_variable(self.threads_symbol).name = threads_symbol
        return target_machine(self.target, reloc="pic").emit_object(module)


def _parse(text: str) -> Any:
    from .llvm_target import require_llvm

    return require_llvm().parse_assembly(text)


_CACHE: dict = {}
_LOCK = threading.Lock()


def content_key(func: PrimFunc, target: LLVMTarget) -> str:
    """A hash of the printed function and the target (the cache key)."""
    text = func.script()
    pool = llvm_parallel.thread_pool_kind()  # the code differs with the thread pool
    return hashlib.sha256(f"{target.text}\n{target.cpu}\n{target.features}\n{pool}\n{text}".encode()).hexdigest()


def compile_prim_func(func: PrimFunc, target: object = "llvm", name: str = "main") -> KernelArtifact:
    """The artifact of the lowered ``func`` with the entry symbol ``name``: from the in-process
    cache, else from the disk cache (no code generated), else generated and optimized at O3."""
    if not isinstance(func, PrimFunc):
        raise TVMSError(f"compile_prim_func takes a PrimFunc, got {type(func).__name__}")
    llvm_target = target if isinstance(target, LLVMTarget) else parse_llvm_target(target)
    check_extern_calls(func)
    # (the symbol too: the code defines it, and a private function prints no name, so two with
    # one body, as ConcatInPlace makes for two concatenations alike, would share one symbol and
    # a shared library linking both would define it twice)
    key = (content_key(func, llvm_target), name)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    on_disk_key = object_cache.disk_key(*key)
    cached = object_cache.load(on_disk_key)
    generated = cached is None
    if generated:
        text = codegen_llvm(func, name)
        module = optimize(text, llvm_target)
        cached = object_cache.CachedKernel(text, str(module), target_machine(llvm_target).emit_object(module))
    refuse_unknown_intrinsics(func, cached.object_code)  # (on disk too: one cached before it was refused)
    if generated:
        object_cache.store(on_disk_key, cached)
    uses_threads = any(s.kind == S.PARALLEL for s in collect(func.body, S.For))
    artifact = KernelArtifact(func, llvm_target, name, tuple(entry_slots(func)), cached.object_code,
                              llvm_parallel.thread_pool_kind() if uses_threads else None,
                              cached.llvm_ir, cached.optimized_ir)
    with _LOCK:
        _CACHE[key] = artifact
    return artifact
