"""The thread pools that run compiled parallel loops: tvms's own (libgomp's where the code has no
access to tvms's, or where ``TVMS_THREAD_POOL`` says so), or threads made with pthreads.

``thread_pool_kind()`` says which one this process runs (the code generator asks it by name,
``runtime.thread_pool_kind``, and emits the matching launch code); ``load_thread_pool()`` makes
tvms's pool (``thread_pool_ir.py``, compiled here once per process) and libgomp's
symbols visible to the JIT, with idle workers sleeping (tvms's after a short wait for more
work). Code linked into an exported library does not see tvms's pool and runs its loops on
libgomp's (loading one loads only libgomp).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import sys
import threading

from ..ir.errors import TVMSError
from ..ir.registry import register_func

POOL_KINDS = ("", "mixed", "tvms", "gomp", "pthread")  # TVMS_THREAD_POOL's values
_loaded: set = set()  # what load_thread_pool has loaded: "pool", "gomp"
_load_lock = threading.Lock()
_pool_engine = None


@functools.lru_cache(maxsize=None)
def _libgomp() -> str | None:
    return ctypes.util.find_library("gomp")  # (runs ldconfig: once)


def thread_pool_kind() -> str:
    """``"tvms"``, the default on Linux where libgomp is installed: every loop on tvms's pool,
    whose threads wait for the next loop a little before they sleep (libgomp's sleep at once,
    and waking one cost 11-45 us a loop here). In one process, interleaved, on a quiet 2-core
    machine, models ran 3-30% faster than on ``"mixed"`` (ResNet-50 39.0 against 41.1 ms,
    Inception v2 19.9 against 22.2, ShuffleNet 2.40 against 3.36), and a 1024 matmul as fast.
    ``"mixed"`` (loops with little work on tvms's pool, the others on libgomp's, except in a
    forked child, where libgomp is not fork-safe), ``"gomp"`` (libgomp's alone, also the default
    off Linux), or ``"pthread"`` (threads created per parallel loop with libc's pthreads, also
    where libgomp is missing) when ``TVMS_THREAD_POOL`` says so (another value: TVMSError)."""
    chosen = os.environ.get("TVMS_THREAD_POOL", "")
    if chosen not in POOL_KINDS:
        raise TVMSError(f"TVMS_THREAD_POOL={chosen!r}: expected one of {', '.join(POOL_KINDS[1:])} "
                        f"(or unset: tvms)")
    if chosen == "pthread" or _libgomp() is None:
        return "pthread"
    # (tvms's pool starts its mutex and conditions as zeros: glibc's and musl's static
    # initializers, not macOS's)
    if not sys.platform.startswith("linux") or chosen == "gomp":
        return "gomp"
    return "mixed" if chosen == "mixed" else "tvms"


def load_thread_pool(own_pool: bool = True) -> None:
    """Make tvms's pool (unless not ``own_pool``: a loaded library, which cannot call it) and
    libgomp's symbols visible to the JIT (each once per process)."""
    import llvmlite.binding as llvm

    with _load_lock:
        if own_pool and "pool" not in _loaded:
            _compile_pool(llvm)
            _loaded.add("pool")
        if "gomp" not in _loaded:
            _load_libgomp(llvm)
            _loaded.add("gomp")


def _load_libgomp(llvm) -> None:
    path = _libgomp()
    if path is not None:
        # Held open by a handle that is never closed (and RTLD_NODELETE): at exit llvmlite
        # dlcloses what it loaded, and unmapping libgomp under its idle workers crashed the process.
        with _passive_waiting():
            ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NODELETE)
        llvm.load_library_permanently(path)


def _compile_pool(llvm) -> None:
    """JIT-compile tvms's pool and define its entry for the kernels' code. Its engine is never
    freed: a sleeping worker returns into the pool's code when woken. A forked child resets the
    pool first thing (``_reset_in_forked_children``): it inherits the parent's count of workers
    but none of their threads, and maybe a lock a thread of the parent held."""
    global _pool_engine
    from .thread_pool_ir import FORKED_SYMBOL, POOL_SYMBOL, RESET_SYMBOL, pool_module_ir

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault")
    _pool_engine = llvm.create_mcjit_compiler(llvm.parse_assembly(pool_module_ir()), machine)
    _pool_engine.finalize_object()
    llvm.add_symbol(POOL_SYMBOL, _pool_engine.get_function_address(POOL_SYMBOL))
    llvm.add_symbol(FORKED_SYMBOL, _pool_engine.get_global_value_address(FORKED_SYMBOL))
    _reset_in_forked_children(_pool_engine.get_function_address(RESET_SYMBOL))
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_pool_engine))  # (kept past the interpreter's teardown)


def _reset_in_forked_children(reset: int) -> None:
    """Have libc call ``reset`` in the child of every ``fork()``, Python's ``os.fork`` and a C
    library's alike: glibc's ``__register_atfork`` (what its ``pthread_atfork`` calls, which it
    links statically into each caller, so neither ctypes nor the JIT finds that name) or musl's
    ``pthread_atfork``. Elsewhere only Python's forks run it (``os.register_at_fork``). Children
    made without libc's ``fork`` (``_Fork``, ``vfork``, a raw clone system call) reset nothing."""
    libc, handler = ctypes.CDLL(None), ctypes.c_void_p(reset)
    glibc, musl = getattr(libc, "__register_atfork", None), getattr(libc, "pthread_atfork", None)
    # (no DSO handle for glibc: never unregistered, as the pool's code is never freed)
    if glibc is not None and glibc(None, None, handler, None) == 0:
        return
    if musl is not None and musl(None, None, handler) == 0:
        return
    os.register_at_fork(after_in_child=ctypes.CFUNCTYPE(None)(reset))


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


def set_pool_spin(rounds: int) -> int:
    """How many rounds of ``sched_yield()`` a worker of tvms's pool waits for the next job before
    it sleeps (the caller waits for the workers' last tasks as many times PAUSES_PER_ROUND
    ``pause`` instructions), 0 to sleep at once (compiling the pool first if need be); returns
    the previous setting."""
    from .thread_pool_ir import SPIN_SYMBOL

    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 0 <= rounds < 1 << 31:
        raise TVMSError(f"set_pool_spin: expected an int in [0, 2**31), got {rounds!r}")
    load_thread_pool()
    setter = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(_pool_engine.get_function_address(SPIN_SYMBOL))
    return setter(rounds)


def thread_pool_entry() -> tuple:
    """(name, function type, task type) of tvms's pool's entry, and the name of its i32 flag set
    in forked children, for the code that calls it."""
    from .thread_pool_ir import FORKED_SYMBOL, POOL_RUN, POOL_SYMBOL, POOL_TASK

    return POOL_SYMBOL, POOL_RUN, POOL_TASK, FORKED_SYMBOL


register_func("runtime.thread_pool_kind", thread_pool_kind, internal=True)
register_func("runtime.thread_pool_entry", thread_pool_entry, internal=True)

__all__ = ["load_thread_pool", "set_pool_spin", "thread_pool_kind"]
