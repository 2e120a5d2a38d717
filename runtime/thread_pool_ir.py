"""tvms's own thread pool, in LLVM IR: ``tvms_parallel_run(task, closure, n, threads)`` runs
``task(closure, t, n)`` for ``t`` in ``[0, n)`` on the caller and ``threads - 1`` of the pool's.

Why not libgomp's ``GOMP_parallel`` alone: it gives each thread of its team a fixed share and
returns when every thread has done its share, so the caller waits for each worker to wake up.
On a machine whose other cores are busy, a sleeping worker is scheduled late (0.2-0.5 ms
measured here with two other processes running), and a 2-thread call of the seed MLP's first
layer at batch 16 took 0.32 ms against 0.14 ms on one thread. Here the tasks are claimed one
by one: the caller claims the next task as soon as it is done with one, so a task no worker has
started by then is run by the caller, and the call returns when all tasks are done, never
waiting for a worker that has not started. A late worker finds nothing left and sleeps again.

One mutex guards the job (task, closure, count, next task, tasks left, workers that may still
join it, generation); claiming a task takes it for a moment, which is nothing next to a task's
work (a parallel loop has a few tasks per thread). Workers are created on first need (detached,
``threads - 1`` of them). Between jobs a worker first waits by yielding the CPU (SPIN_ROUNDS
rounds of ``sched_yield``, ~0.1 ms), watching for the next job, then sleeps on a condition
variable, so an idle pool takes no CPU: waking a sleeping thread cost 11-45 us a loop here, as
much as a small kernel's loop saves on the second core, and the next loop of a model's call
comes within microseconds. The caller waits for the workers' last tasks spinning on its core
(``pause``), then sleeps. A job wakes at most ``min(threads, tasks) - 1`` workers and no more
join it, however many an earlier call with more threads created. One job at a time: a call
made while a job runs (another Python thread, or a task's own parallel loop) runs its tasks in
the calling thread.

``thread_pool.py`` compiles this module once per process and makes the symbol visible to the
JIT (and has libc reset the pool in every forked child: ``tvms_parallel_reset``, as the child
has none of the workers and may have forked while a thread held the lock); kernels reference it weakly (``lowering/codegen/llvm_parallel.py`` emits the call), so code
linked into an exported library, where the symbol is absent, falls back to libgomp.
"""
from __future__ import annotations

import platform

from llvmlite import ir

I8, I32, I64, PTR = ir.IntType(8), ir.IntType(32), ir.IntType(64), ir.PointerType()

# The pool's entry as the kernels call it (lowering/codegen/llvm_parallel.py asks for these by
# name, ``runtime.thread_pool_entry``: the layers below the runtime do not import it).
POOL_SYMBOL = "tvms_parallel_run"
POOL_TASK = ir.FunctionType(ir.VoidType(), [PTR, I32, I32])  # task(closure, t, n)
POOL_RUN = ir.FunctionType(ir.VoidType(), [PTR, PTR, I32, I32])  # tvms_parallel_run
RESET_SYMBOL = "tvms_parallel_reset"
# An i32, 1 once tvms_parallel_reset ran: in a forked child, whose libgomp (not fork-safe once the
# parent used it) may hang, the kernels run every parallel loop on this pool.
FORKED_SYMBOL = "tvms_parallel_forked"
SPIN_SYMBOL = "tvms_parallel_spin"  # tvms_parallel_spin(rounds) -> the rounds it replaces
# How long a thread of the pool waits by yielding before it sleeps: rounds of sched_yield(), each
# ~0.3 us with nothing else to run (so ~0.1 ms; much longer when other threads take the core).
SPIN_ROUNDS = 256
PAUSES_PER_ROUND = 8  # the caller's wait: 2048 x86 pauses, ~50-100 us here
SYNC_BYTES = 64  # room for a pthread mutex or condition variable (40 / 48 bytes on glibc)
MAX_WORKERS = 255


def pool_module_ir() -> str:
    """The pool as LLVM IR text: the state, ``tvms_parallel_run`` and the workers' loop."""
    module = ir.Module("tvms_thread_pool")
    state = _State(module)
    drain = _drain_function(module, state)
    worker = _worker_function(module, state, drain)
    _run_function(module, state, drain, worker)
    _reset_function(module, state)
    _spin_setter(module, state)
    return str(module)


class _State:
    """The pool's globals (written with ``lock`` held; ``left``, ``generation`` and ``spin`` are
    also read without it, atomically, by a thread spinning before it sleeps)."""

    def __init__(self, module: ir.Module) -> None:
        def var(name: str, typ: ir.Type, init: ir.Constant) -> ir.GlobalVariable:
            g = ir.GlobalVariable(module, typ, f"pool.{name}")
            g.linkage, g.initializer = "internal", init
            return g

        sync = ir.ArrayType(I8, SYNC_BYTES)
        self.lock, self.work, self.done = (var(n, sync, ir.Constant(sync, None)) for n in ("lock", "work", "done"))
        for g in (self.lock, self.work, self.done):
            g.align = 64  # (zeros are glibc's static initializers of both types)
        self.task, self.closure = (var(n, PTR, ir.Constant(PTR, None)) for n in ("task", "closure"))
        self.count, self.next, self.left, self.joining, self.busy, self.workers = (
            var(n, I32, ir.Constant(I32, 0)) for n in ("count", "next", "left", "joining", "busy", "workers"))
        self.generation = var("generation", I64, ir.Constant(I64, 0))
        self.spin = var("spin", I32, ir.Constant(I32, SPIN_ROUNDS))
        self.forked = ir.GlobalVariable(module, I32, FORKED_SYMBOL)  # (external: the kernels read it)
        self.forked.initializer = ir.Constant(I32, 0)
        self.module = module

    def call(self, b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
        """``pthread_<name>(args)`` (mutex_lock, cond_wait, ...), returning its i32."""
        name = f"pthread_{name}"
        fn = self.module.globals.get(name) or ir.Function(self.module, ir.FunctionType(I32, [a.type for a in args]), name)
        return b.call(fn, list(args))


def _drain_function(module: ir.Module, s: _State) -> ir.Function:
    """``drain()``, called and returning with the lock held: claim and run tasks of the job until
    none is left to claim; the one who finishes the last task wakes the caller."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "pool.drain")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    head, claim, out = (fn.append_basic_block(n) for n in ("head", "claim", "out"))
    b.branch(head)
    b.position_at_end(head)
    t = b.load(s.next, typ=I32)
    count = b.load(s.count, typ=I32)
    b.cbranch(b.icmp_signed("<", t, count), claim, out)
    b.position_at_end(claim)
    b.store(b.add(t, ir.Constant(I32, 1)), s.next)
    task, closure = b.load(s.task, typ=PTR), b.load(s.closure, typ=PTR)
    s.call(b, "mutex_unlock", s.lock)
    b.call(_callable(b, task), [closure, t, count])
    s.call(b, "mutex_lock", s.lock)
    left = b.sub(b.load(s.left, typ=I32), ir.Constant(I32, 1))
    b.store_atomic(left, s.left, "monotonic", 4)
    with b.if_then(b.icmp_signed("==", left, ir.Constant(I32, 0))):
        s.call(b, "cond_signal", s.done)
    b.branch(head)
    b.position_at_end(out)
    b.ret_void()
    return fn


def _worker_function(module: ir.Module, s: _State, drain: ir.Function) -> ir.Function:
    """A worker's thread: sleep until a new job is posted, take part in it if it still wants a
    worker, sleep again."""
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), "pool.worker")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    seen = b.alloca(I64)
    b.store(ir.Constant(I64, 0), seen)  # (a new worker joins the job that made it)
    s.call(b, "mutex_lock", s.lock)
    head, wait, join = (fn.append_basic_block(n) for n in ("head", "wait", "join"))
    b.branch(head)
    b.position_at_end(head)
    generation = b.load(s.generation, typ=I64)
    b.cbranch(b.icmp_unsigned("==", generation, b.load(seen, typ=I64)), wait, join)
    b.position_at_end(wait)
    s.call(b, "mutex_unlock", s.lock)
    _spin_while(b, s, lambda: b.icmp_unsigned("==", b.load_atomic(s.generation, "monotonic", 8, typ=I64),
                                              b.load(seen, typ=I64)))
    s.call(b, "mutex_lock", s.lock)
    with b.if_then(b.icmp_unsigned("==", b.load(s.generation, typ=I64), b.load(seen, typ=I64))):
        s.call(b, "cond_wait", s.work, s.lock)
    b.branch(head)
    b.position_at_end(join)
    b.store(generation, seen)
    joining = b.load(s.joining, typ=I32)
    with b.if_then(b.icmp_signed(">", joining, ir.Constant(I32, 0))):
        b.store(b.sub(joining, ir.Constant(I32, 1)), s.joining)
        b.call(drain, [])
    b.branch(head)
    return fn


def _run_function(module: ir.Module, s: _State, drain: ir.Function, worker: ir.Function) -> None:
    """``tvms_parallel_run(task, closure, n, threads)``: post the job, wake ``min(threads, n) - 1``
    workers (creating those missing), run tasks until none is left to claim, wait for those still
    running."""
    fn = ir.Function(module, POOL_RUN, POOL_SYMBOL)
    task, closure, n, threads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    s.call(b, "mutex_lock", s.lock)
    with b.if_else(b.icmp_signed("!=", b.load(s.busy, typ=I32), ir.Constant(I32, 0))) as (taken, free):
        with taken:  # a job is running: this one runs here, whole
            s.call(b, "mutex_unlock", s.lock)
            _serially(b, task, closure, n)
        with free:
            b.store(ir.Constant(I32, 1), s.busy)
            wanted = b.sub(_smaller(b, threads, n), ir.Constant(I32, 1))
            for g, v in ((s.task, task), (s.closure, closure), (s.count, n), (s.next, ir.Constant(I32, 0)),
                         (s.joining, wanted)):
                b.store(v, g)
            b.store_atomic(n, s.left, "monotonic", 4)  # (these two are read without the lock too)
            generation = b.add(b.load(s.generation, typ=I64), ir.Constant(I64, 1))
            b.store_atomic(generation, s.generation, "monotonic", 8)
            _start_workers(b, s, worker, wanted)
            _loop_while(b, lambda t: b.icmp_signed("<", t, wanted), lambda _t: s.call(b, "cond_signal", s.work) and None)
            b.call(drain, [])
            _wait_until_done(b, s)
            b.store(ir.Constant(I32, 0), s.busy)
            s.call(b, "mutex_unlock", s.lock)
    b.ret_void()


def _reset_function(module: ir.Module, s: _State) -> None:
    """``tvms_parallel_reset()``, for a forked child (its only thread): no workers, no job, the
    lock and conditions as new (a thread of the parent may have held the lock), and ``forked``
    set."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), RESET_SYMBOL)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for g in (s.lock, s.work, s.done):
        b.store(g.initializer, g)
    for g in (s.joining, s.busy, s.workers):
        b.store(ir.Constant(I32, 0), g)
    b.store(ir.Constant(I32, 1), s.forked)
    b.ret_void()


def _spin_setter(module: ir.Module, s: _State) -> None:
    """``tvms_parallel_spin(rounds)``: the rounds a thread yields before it sleeps (0: sleep at
    once); returns the previous setting."""
    fn = ir.Function(module, ir.FunctionType(I32, [I32]), SPIN_SYMBOL)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.atomic_rmw("xchg", s.spin, fn.args[0], "monotonic"))


def _smaller(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _serially(b: ir.IRBuilder, task: ir.Value, closure: ir.Value, n: ir.Value) -> None:
    _loop_while(b, lambda t: b.icmp_signed("<", t, n), lambda t: b.call(_callable(b, task), [closure, t, n]) and None)


def _callable(b: ir.IRBuilder, task: ir.Value) -> ir.Value:
    return b.inttoptr(b.ptrtoint(task, I64), POOL_TASK.as_pointer())  # (llvmlite calls typed pointers)


def _start_workers(b: ir.IRBuilder, s: _State, worker: ir.Function, wanted: ir.Value) -> None:
    """Create workers (detached) until there are ``wanted`` (at most MAX_WORKERS), or one fails."""
    handle = b.alloca(I64)
    most = _smaller(b, wanted, ir.Constant(I32, MAX_WORKERS))

    def start(_t: ir.Value) -> ir.Value:
        made = s.call(b, "create", handle, ir.Constant(PTR, None), worker, ir.Constant(PTR, None))
        ok = b.icmp_signed("==", made, ir.Constant(I32, 0))
        with b.if_then(ok):
            s.call(b, "detach", b.load(handle, typ=I64))
            b.store(b.add(b.load(s.workers, typ=I32), ir.Constant(I32, 1)), s.workers)
        return ok

    _loop_while(b, lambda _t: b.icmp_signed("<", b.load(s.workers, typ=I32), most), start)


def _wait_until_done(b: ir.IRBuilder, s: _State) -> None:
    """With the lock held: a short spin (the lock let go) for the workers' last tasks, then sleep
    until the one who finishes the last wakes this thread."""
    with b.if_then(b.icmp_signed("!=", b.load(s.left, typ=I32), ir.Constant(I32, 0))):
        s.call(b, "mutex_unlock", s.lock)
        _spin_while(b, s, lambda: b.icmp_signed("!=", b.load_atomic(s.left, "monotonic", 4, typ=I32),
                                                ir.Constant(I32, 0)), on_cpu=True)
        s.call(b, "mutex_lock", s.lock)
    _loop_while(b, lambda _t: b.icmp_signed("!=", b.load(s.left, typ=I32), ir.Constant(I32, 0)),
                lambda _t: s.call(b, "cond_wait", s.done, s.lock) and None)


def _spin_while(b: ir.IRBuilder, s: _State, waiting, on_cpu: bool = False) -> None:
    """While ``waiting()`` (an atomic read) holds: up to ``pool.spin`` rounds of ``sched_yield()``,
    or when ``on_cpu`` PAUSES_PER_ROUND times as many x86 ``pause`` instructions (the caller
    waiting for a task a worker is running: yielding gave its core away for a whole time slice
    on a loaded machine, and ResNet-50 ran 1.5x slower). Waking a sleeping thread costs tens of
    microseconds here (a virtual CPU that went idle), more than many kernels' share of a loop."""
    rounds = b.load_atomic(s.spin, "monotonic", 4, typ=I32)
    if on_cpu:
        most = ir.Constant(I32, (1 << 31) // PAUSES_PER_ROUND - 1)  # (no overflow)
        rounds = b.mul(_smaller(b, rounds, most), ir.Constant(I32, PAUSES_PER_ROUND))
        x86 = platform.machine().lower() in ("x86_64", "amd64")
        name = "llvm.x86.sse2.pause" if x86 else "llvm.donothing"
        wait = s.module.globals.get(name) or ir.Function(s.module, ir.FunctionType(ir.VoidType(), []), name)
    else:
        wait = s.module.globals.get("sched_yield") or ir.Function(s.module, ir.FunctionType(I32, []), "sched_yield")
    _loop_while(b, lambda t: b.and_(b.icmp_signed("<", t, rounds), waiting()), lambda _t: b.call(wait, []) and None)


def _loop_while(b: ir.IRBuilder, condition, body) -> None:
    """``t = 0; while condition(t): if body(t) is false: break; t += 1`` (``t`` an i32; a body
    returning None goes on)."""
    pre = b.block
    head, inner, done = (b.append_basic_block(n) for n in ("while", "while.body", "while.end"))
    b.branch(head)
    b.position_at_end(head)
    t = b.phi(I32)
    t.add_incoming(ir.Constant(I32, 0), pre)
    b.cbranch(condition(t), inner, done)
    b.position_at_end(inner)
    going = body(t)
    if going is None:
        going = ir.Constant(ir.IntType(1), 1)
    t.add_incoming(b.add(t, ir.Constant(I32, 1)), b.block)
    b.cbranch(going, head, done)
    b.position_at_end(done)


__all__ = ["FORKED_SYMBOL", "POOL_RUN", "POOL_SYMBOL", "POOL_TASK", "RESET_SYMBOL", "SPIN_ROUNDS", "SPIN_SYMBOL",
           "pool_module_ir"]
