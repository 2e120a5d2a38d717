"""The thread pool that runs compiled parallel loops: tvms's own (over libgomp's, where the
code has no access to it), or threads made with pthreads.

``thread_pool_kind()`` says which one this process runs (the code generator asks it by name,
``runtime.thread_pool_kind``, and emits the matching launch code); ``load_thread_pool()`` makes
tvms's pool (``thread_pool_ir.py``, compiled here once per process) and libgomp's
symbols visible to the JIT, with idle workers sleeping. Code linked into an exported library
does not see tvms's pool and runs its loops on libgomp's.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import threading

from ..ir.registry import register_func

_loaded = False
_load_lock = threading.Lock()
_pool_engine = None


@functools.lru_cache(maxsize=None)
def _libgomp() -> str | None:
    return ctypes.util.find_library("gomp")  # (runs ldconfig: once)


def thread_pool_kind() -> str:
    """``"tvms"`` when libgomp is installed (tvms's pool, libgomp's in exported libraries);
    ``"gomp"`` (libgomp's only) or ``"pthread"`` (threads created per parallel loop with libc's
    pthreads, also where libgomp is missing) when ``TVMS_THREAD_POOL`` says so."""
    chosen = os.environ.get("TVMS_THREAD_POOL", "")
    if chosen == "pthread" or _libgomp() is None:
        return "pthread"
    return "gomp" if chosen == "gomp" else "tvms"


def load_thread_pool() -> None:
    """Make tvms's pool and libgomp's symbols visible to the JIT (once per process)."""
    global _loaded
    with _load_lock:
        if not _loaded:
            _load()
            _loaded = True


def _load() -> None:
    import llvmlite.binding as llvm

    _compile_pool(llvm)
    path = _libgomp()
    if path is not None:
        # Held open by a handle that is never closed (and RTLD_NODELETE): at exit llvmlite
        # dlcloses what it loaded, and unmapping libgomp under its idle workers crashed the process.
        with _passive_waiting():
            ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NODELETE)
        llvm.load_library_permanently(path)


def _compile_pool(llvm) -> None:
    """JIT-compile tvms's pool and define its entry for the kernels' code. Its engine is never
    freed: a sleeping worker returns into the pool's code when woken."""
    global _pool_engine
    from .thread_pool_ir import POOL_SYMBOL, pool_module_ir

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault")
    _pool_engine = llvm.create_mcjit_compiler(llvm.parse_assembly(pool_module_ir()), machine)
    _pool_engine.finalize_object()
    llvm.add_symbol(POOL_SYMBOL, _pool_engine.get_function_address(POOL_SYMBOL))
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_pool_engine))  # (kept past the interpreter's teardown)


@contextlib.contextmanager
def _passive_waiting():
    """``OMP_WAIT_POLICY=passive`` while libgomp loads (it reads its settings then), unless the user
    set a policy or a spin count; the variable is not left behind for child processes.

    By default libgomp's idle threads spin for milliseconds before sleeping. On a shared machine
    a spinning thread holds a core another process needs, and a caller that waits for a preempted
    worker spins too: a tiny parallel region called every millisecond took 11 ms per call that way
    (a 0.1 ms one, 15 ms), and 0.06 ms (0.2 ms) with sleeping workers."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        yield
    finally:
        del os.environ["OMP_WAIT_POLICY"]


register_func("runtime.thread_pool_kind", thread_pool_kind)

__all__ = ["load_thread_pool", "thread_pool_kind"]
