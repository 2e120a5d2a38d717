"""The llvm target's code generator: a lowered PrimFunc -> native code for the host CPU, cached
by content.

``compile_prim_func(func, target)`` takes loop-level code (the build driver has run the TIR
pipeline), generates LLVM IR, optimizes it at O3 for the target CPU and JIT-compiles it with
MCJIT. The result is cached under a hash of the
printed function and the target, so building an unchanged function again is a dictionary lookup;
the object code is also kept on disk (``object_cache.py``), so a new process loads it instead of
generating it again.
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
from .llvm import codegen_llvm, entry_slots
from .llvm_target import LLVMTarget, assembly, optimize, parse_llvm_target


@dataclass(frozen=True)
class CompiledFunction:
    """A JIT-compiled PrimFunc: ``address`` of ``void entry(i64 *slots)``, the variables each slot
    holds, and the engine that owns the code (kept alive with it)."""

    func: PrimFunc
    target: LLVMTarget
    address: int
    slots: tuple
    num_threads_address: int
    llvm_ir: str
    optimized_ir: str
    engine: Any

    def assembly(self) -> str:
        """The machine code as assembly (generated on demand: it takes a moment)."""
        return assembly(_parse(self.optimized_ir), self.target)


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


def compile_prim_func(func: PrimFunc, target: object = "llvm", name: str = "main") -> CompiledFunction:
    if not isinstance(func, PrimFunc):
        raise TVMSError(f"compile_prim_func takes a PrimFunc, got {type(func).__name__}")
    llvm_target = target if isinstance(target, LLVMTarget) else parse_llvm_target(target)
    lowered = func
    key = content_key(lowered, llvm_target)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    uses_threads = any(s.kind == S.PARALLEL for s in collect(lowered.body, S.For))
    if uses_threads:
        llvm_parallel.load_thread_pool()
    on_disk_key = object_cache.disk_key(key, name)
    cached = object_cache.load(on_disk_key)
    if cached is not None:  # made by an earlier process: load its object code, generate nothing
        text, optimized = cached.llvm_ir, cached.optimized_ir
        engine, _ = object_cache.jit_with_cache(_parse(optimized), llvm_target, cached.object_code)
    else:
        text = codegen_llvm(lowered, name)
        module = optimize(text, llvm_target)
        optimized = str(module)
        engine, object_code = object_cache.jit_with_cache(module, llvm_target, None)
        if object_code:
            object_cache.store(on_disk_key, object_cache.CachedKernel(text, optimized, object_code))
    compiled = CompiledFunction(
        lowered, llvm_target, engine.get_function_address(name), tuple(entry_slots(lowered)),
        engine.get_global_value_address(llvm_parallel.NUM_THREADS_SYMBOL) if uses_threads else 0,
        text, optimized, engine)
    with _LOCK:
        _CACHE[key] = compiled
    return compiled
