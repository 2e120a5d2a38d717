"""The thread pool that runs compiled parallel loops: libgomp's, or threads made with pthreads.

``thread_pool_kind()`` says which one this process runs (the code generator asks it by name,
``runtime.thread_pool_kind``, and emits the matching launch code); ``load_thread_pool()`` makes
libgomp's symbols visible to the JIT, once per process, with its idle workers sleeping.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os

from ..ir.registry import register_func

_loaded = False


@functools.lru_cache(maxsize=None)
def _libgomp() -> str | None:
    return ctypes.util.find_library("gomp")  # (runs ldconfig: once)


def thread_pool_kind() -> str:
    """``"gomp"`` when libgomp is installed (and ``TVMS_THREAD_POOL`` does not say ``pthread``),
    else ``"pthread"``: threads created per parallel loop with libc's pthreads."""
    if os.environ.get("TVMS_THREAD_POOL", "") == "pthread" or _libgomp() is None:
        return "pthread"
    return "gomp"


def load_thread_pool() -> None:
    """Make libgomp's symbols visible to the JIT (once per process)."""
    global _loaded
    if _loaded:
        return
    import llvmlite.binding as llvm

    path = _libgomp()
    if path is not None:
        # Held open by a handle that is never closed (and RTLD_NODELETE): at exit llvmlite
        # dlcloses what it loaded, and unmapping libgomp under its idle workers crashed the process.
        with _passive_waiting():
            ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NODELETE)
        llvm.load_library_permanently(path)
    _loaded = True


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
