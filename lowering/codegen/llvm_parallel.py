"""Parallel loops on all cores, without Python: outlined tasks run by a persistent thread pool.

A ``T.parallel`` loop becomes a task function ``task(closure*, t, tasks)``: it takes the ``t``-th
contiguous chunk of iterations and runs the loop body, with the values the body uses from
outside read from the closure. On libgomp's pool the caller calls
``GOMP_parallel(task', closure, n, 0)``: one task per thread of libgomp's team, which asks OpenMP
which task it is (``omp_get_thread_num`` of ``omp_get_num_threads``); exported libraries always
use it. On tvms's pool it calls ``tvms_parallel_run(task, closure, tasks, threads)``
(``runtime/thread_pool_ir.py``: TASKS_PER_THREAD tasks per thread, claimed one by one, the caller
never waiting for a worker that has not started; its threads wait for the next loop a little
before they sleep, where libgomp's, passive, sleep at once) and falls back to libgomp where that
weak symbol is not defined. The default is tvms's pool for every loop; ``TVMS_THREAD_POOL=gomp``
picks libgomp's, and ``mixed`` runs loops of less than ``POOL_WORK`` stores on tvms's pool and
larger ones on libgomp's (in a forked child, where libgomp may hang, every loop on tvms's pool).

Why persistent threads: a parallel region then costs microseconds (threads created per call
would cost tens), and the whole launch happens in native code: the Python caller has released
the GIL (ctypes does for the entry call) and no Python callback is ever involved.

Where libgomp is missing (or ``TVMS_THREAD_POOL=pthread``), the caller instead starts tasks
1..n-1 on threads it creates with libc's ``pthread_create``, runs task 0 itself and joins them.

The thread count is the global ``__tvms_num_threads``, which the runtime sets before each call
(from ``TVM_NUM_THREADS`` or the target's ``-num-cores``), clamped to the loop's extent and to the
loop's work: each task gets at least ``MIN_TASK_WORK`` stores (the body's stores per iteration,
each weighed by its float operations, estimated at compile time: ``iteration_work``, times the
extent). Waking a sleeping worker costs 27-60 us here (more
when the machine is loaded: the woken thread waits for a core, and the caller waits for it), so a
loop with less work than two tasks' worth calls its task function directly, in the caller's
thread, without touching the thread pool.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.dtype import DataType
from ...ir.registry import get_global_func
from ...ir.visitor import children, collect
from . import llvm_types as T
from .llvm_intrinsics import declare as declare_c

NUM_THREADS_SYMBOL = "__tvms_num_threads"
MAX_THREADS = 256
TASKS_PER_THREAD = 4  # on tvms's pool: shares of a late or preempted thread go to the others
MIN_TASK_WORK = 1 << 17  # (weighed) stores per task below which another thread costs more than it saves
UNKNOWN_WORK = 1 << 40  # a body with loops of symbolic extent: assume it is worth the threads
# On the "mixed" pool (not the default), loops of fewer stores than this run on tvms's pool,
# larger ones on libgomp's.
POOL_WORK = 1 << 21


def thread_pool_kind() -> str:
    """The thread pool the runtime runs parallel loops on (``"mixed"``, ``"tvms"``, ``"gomp"`` or ``"pthread"``):
    the runtime decides (``runtime/thread_pool.py``), the launch code follows."""
    return get_global_func("runtime.thread_pool_kind")()


def num_threads_global(module: ir.Module) -> ir.GlobalVariable:
    existing = module.globals.get(NUM_THREADS_SYMBOL)
    if existing is not None:
        return existing
    g = ir.GlobalVariable(module, T.I32, NUM_THREADS_SYMBOL)
    g.initializer = ir.Constant(T.I32, 1)
    return g


def parallel_loop(cg: Any, loop: Any) -> None:
    """Emit ``loop`` (a ``T.parallel`` For) as a task run on the thread pool; ``cg`` is the
    function codegen whose builder sits where the loop belongs."""
    bld = cg.builder
    captured, seen = [], set()
    for v in collect(loop, E.Var):
        if v is not loop.loop_var and v in cg.env and id(v) not in seen:
            seen.add(id(v))
            captured.append(v)
    name = cg.fresh(f"{bld.function.name}.parallel")
    impl = cg.kernel(f"{name}.impl", captured, lambda task, ntasks: _task_body(cg, loop, task, ntasks),
                     leading=((T.I32, "task"), (T.I32, "num_tasks")))

    closure_type = ir.LiteralStructType([T.scalar_type(v.dtype) for v in captured] or [T.I8])
    closure = cg.entry_alloca(closure_type, 1, f"{name}.closure")
    extent = T.cast(bld, cg.expr(loop.extent), loop.extent.dtype, DataType("int64"))
    per_iteration = iteration_work(loop.body)
    n = _task_count(bld, cg.module, extent, per_iteration)
    run_task = (lambda tb, closure_ptr, tid, nt:
                tb.call(impl, [tid, nt, *_unpack(tb, closure_ptr, closure_type, len(captured))]))
    one = ir.Constant(T.I32, 1)
    with bld.if_else(bld.icmp_signed("==", n, one)) as (serial, threaded):
        with serial:  # too little work (or one thread): run it here, no thread pool involved
            bld.call(impl, [ir.Constant(T.I32, 0), one, *(cg.env[v] for v in captured)])
        with threaded:
            for k, v in enumerate(captured):
                slot = bld.gep(closure, [ir.Constant(T.I32, 0), ir.Constant(T.I32, k)], source_etype=closure_type)
                bld.store(cg.env[v], slot)
            kind = thread_pool_kind()
            if kind == "pthread":
                _launch_pthreads(cg, name, run_task, closure, n)
            else:
                _launch_gomp(cg, name, run_task, closure, n, kind, extent, per_iteration)


def _task_count(bld: ir.IRBuilder, module: ir.Module, extent: ir.Value, per_iteration: int,
                per_thread: int = 1) -> ir.Value:
    """``min(extent, threads * per_thread, extent * per_iteration // MIN_TASK_WORK)`` in
    ``[1, MAX_THREADS]`` (``extent`` an i64, ``per_iteration`` an iteration's ``iteration_work``)."""
    threads = bld.sext(bld.load(num_threads_global(module), typ=T.I32), T.I64)
    if per_thread > 1:
        threads = bld.mul(threads, ir.Constant(T.I64, per_thread))
    n = _smaller(bld, extent, threads)
    if per_iteration < MIN_TASK_WORK:  # (else each iteration is worth a task: no limit, no overflow)
        tasks_worth = bld.sdiv(bld.mul(extent, ir.Constant(T.I64, per_iteration)), ir.Constant(T.I64, MIN_TASK_WORK))
        n = _smaller(bld, n, tasks_worth)
    return bld.trunc(_clamp(bld, n, MAX_THREADS), T.I32)


def iteration_work(body: Any) -> int:
    """Elements one iteration of a loop body stores (inner loops' constant extents multiplied in, a
    vector store its lanes, a store of many float operations as several: ``store_weight``;
    ``UNKNOWN_WORK`` when an inner loop's extent is symbolic, or a while loop or a call is inside)."""
    if isinstance(body, S.BufferStore):  # (a vector store counts its lanes: the elements it writes)
        return max(1, getattr(body.value.dtype, "lanes", 1)) * store_weight(body.value)
    if isinstance(body, S.While) or (isinstance(body, S.Evaluate) and isinstance(body.value, E.Call)):
        return UNKNOWN_WORK  # (a call may be a whole library routine)
    if isinstance(body, S.For):
        if not isinstance(body.extent, E.IntImm):
            return UNKNOWN_WORK
        return min(UNKNOWN_WORK, body.extent.value * iteration_work(body.body))
    if isinstance(body, S.IfThenElse):  # the costlier branch, as if always taken
        return max(iteration_work(body.then_case), iteration_work(body.else_case) if body.else_case else 0)
    if isinstance(body, S.SeqStmt):
        return min(UNKNOWN_WORK, sum(iteration_work(s) for s in body.seq))
    inner = getattr(body, "body", None)  # lets, attributes, allocations: what they wrap
    return iteration_work(inner) if isinstance(inner, S.Stmt) else 0


def store_weight(value: Any) -> int:
    """How many plain stores one store of ``value`` is worth: one per 4 float operations in its
    expression tree (loads' indices aside), at least one. A copy, an add and relu, an accumulator
    update count one; a Winograd transform's store (16-30 operations) counts 4-7: without the
    weight, ResNet-50's 14 x 14 input transform (64 parallel iterations of 2,304 elements, 0.23 ms)
    ran on one thread."""
    ops, stack = 0, [value]
    while stack:
        node = stack.pop()
        if isinstance(node, E.BufferLoad):
            continue
        if isinstance(node, (E.BinaryOp, E.Call)) and node.dtype.is_float:
            ops += 1
        stack.extend(c for c in children(node) if isinstance(c, E.PrimExpr))
    return max(1, ops // 4)


def _smaller(bld: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    return bld.select(bld.icmp_signed("<", a, b), a, b)


def _clamp(bld: ir.IRBuilder, n: ir.Value, most: int) -> ir.Value:
    """``n`` limited to ``[1, most]``."""
    lowest, highest = ir.Constant(n.type, 1), ir.Constant(n.type, most)
    n = bld.select(bld.icmp_signed("<", n, lowest), lowest, n)
    return bld.select(bld.icmp_signed(">", n, highest), highest, n)


def _unpack(tb: ir.IRBuilder, closure: ir.Value, closure_type: ir.Type, count: int) -> list:
    return [tb.load(tb.gep(closure, [ir.Constant(T.I32, 0), ir.Constant(T.I32, k)], source_etype=closure_type),
                    typ=closure_type.elements[k]) for k in range(count)]


def _launch_gomp(cg: Any, name: str, run_task, closure: ir.Value, n: ir.Value, kind: str,
                 extent: ir.Value, per_iteration: int) -> None:
    """``GOMP_parallel(task, closure, n, 0)``, each task asking OpenMP for its number; on the
    ``"tvms"`` pool (and on the ``"mixed"`` one for a loop of less than POOL_WORK stores, or any
    loop in a forked child, whose libgomp may hang),
    ``tvms_parallel_run(task, closure, tasks, n)`` instead where the runtime defines it
    (``runtime/thread_pool_ir.py``: TASKS_PER_THREAD tasks per thread claimed one by one, so that
    a thread that starts late or is preempted leaves its share to the others, and the caller never
    waits for a worker that has not started; its threads wait for the next loop a little before
    they sleep)."""
    module, bld = cg.module, cg.builder
    task = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR]), name)
    task.linkage = "internal"
    tb = ir.IRBuilder(task.append_basic_block("entry"))
    tid = tb.call(declare_c(module, "omp_get_thread_num", T.I32, []), [])
    nt = tb.call(declare_c(module, "omp_get_num_threads", T.I32, []), [])
    run_task(tb, task.args[0], tid, nt)
    tb.ret_void()
    launch = declare_c(module, "GOMP_parallel", ir.VoidType(), [T.PTR, T.PTR, T.I32, T.I32])
    if kind == "gomp":
        bld.call(launch, [task, closure, n, ir.Constant(T.I32, 0)])
        return
    symbol, run_type, task_type, forked_symbol = get_global_func("runtime.thread_pool_entry")()  # (defined there, once)
    pool_task = ir.Function(module, task_type, f"{name}.pooled")
    pool_task.linkage = "internal"
    tb = ir.IRBuilder(pool_task.append_basic_block("entry"))
    run_task(tb, *pool_task.args)
    tb.ret_void()
    pool = module.globals.get(symbol) or ir.Function(module, run_type, symbol)
    pool.linkage = "extern_weak"  # (absent from an exported library: libgomp's there)
    defined = bld.icmp_unsigned("!=", bld.ptrtoint(pool, T.I64), ir.Constant(T.I64, 0))
    use_pool = defined
    if kind == "mixed":  # extent * per_iteration < POOL_WORK (without overflow), or in a forked child
        forked = module.globals.get(forked_symbol) or ir.GlobalVariable(module, T.I32, forked_symbol)
        forked.linkage = "extern_weak"  # (defined with the pool: read only where that is)
        child = cg.entry_alloca(T.I32, 1, f"{name}.forked")
        bld.store(ir.Constant(T.I32, 0), child)
        with bld.if_then(defined):
            bld.store(bld.load(forked, typ=T.I32), child)
        small = bld.icmp_signed("<", extent, ir.Constant(T.I64, -(-POOL_WORK // max(1, per_iteration))))
        use_pool = bld.and_(defined, bld.or_(small, bld.icmp_signed("!=", bld.load(child, typ=T.I32),
                                                                     ir.Constant(T.I32, 0))))
    with bld.if_else(use_pool) as (ours, gomp):
        with ours:
            tasks = _task_count(bld, module, extent, per_iteration, TASKS_PER_THREAD)
            bld.call(pool, [pool_task, closure, tasks, n])
        with gomp:
            bld.call(launch, [task, closure, n, ir.Constant(T.I32, 0)])


JOB = ir.LiteralStructType([T.PTR, T.I32, T.I32])  # pthreads: (closure, task, number of tasks)


def _launch_pthreads(cg: Any, name: str, run_task, closure: ir.Value, n: ir.Value) -> None:
    """Tasks 1..n-1 on threads made for this loop, task 0 on the caller; then join them all.
    (The fallback where libgomp is missing: creating threads per loop costs tens of microseconds.)"""
    module, bld = cg.module, cg.builder
    task = ir.Function(module, ir.FunctionType(T.PTR, [T.PTR]), name)
    task.linkage = "internal"
    tb = ir.IRBuilder(task.append_basic_block("entry"))
    job = _unpack(tb, task.args[0], JOB, 3)
    run_task(tb, job[0], job[1], job[2])
    tb.ret(ir.Constant(T.PTR, None))
    jobs = cg.entry_alloca(JOB, MAX_THREADS, f"{name}.jobs")
    handles = cg.entry_alloca(T.I64, MAX_THREADS, f"{name}.threads")
    create = declare_c(module, "pthread_create", T.I32, [T.PTR, T.PTR, T.PTR, T.PTR])
    join = declare_c(module, "pthread_join", T.I32, [T.I64, T.PTR])

    def job_at(t: ir.Value) -> ir.Value:
        return bld.gep(jobs, [t], source_etype=JOB)

    def start(t: ir.Value) -> None:
        for k, value in enumerate((closure, t, n)):
            bld.store(value, bld.gep(job_at(t), [ir.Constant(T.I32, 0), ir.Constant(T.I32, k)], source_etype=JOB))
        handle = bld.gep(handles, [t], source_etype=T.I64)
        failed = bld.icmp_signed("!=", bld.call(create, [handle, ir.Constant(T.PTR, None), task, job_at(t)]),
                                 ir.Constant(T.I32, 0))
        with bld.if_then(failed):  # no thread to be had: run the task here, nothing to join
            bld.call(task, [job_at(t)])
            bld.store(ir.Constant(T.I64, 0), handle)

    def finish(t: ir.Value) -> None:
        handle = bld.load(bld.gep(handles, [t], source_etype=T.I64), typ=T.I64)
        with bld.if_then(bld.icmp_unsigned("!=", handle, ir.Constant(T.I64, 0))):
            bld.call(join, [handle, ir.Constant(T.PTR, None)])

    one = ir.Constant(T.I32, 1)
    _count(bld, one, n, start)
    for k, value in enumerate((closure, ir.Constant(T.I32, 0), n)):
        bld.store(value, bld.gep(job_at(ir.Constant(T.I32, 0)), [ir.Constant(T.I32, 0), ir.Constant(T.I32, k)],
                                 source_etype=JOB))
    bld.call(task, [job_at(ir.Constant(T.I32, 0))])
    _count(bld, one, n, finish)


def _count(bld: ir.IRBuilder, lo: ir.Value, hi: ir.Value, emit) -> None:
    """``for t in [lo, hi): emit(t)`` (i32)."""
    pre = bld.block
    head, body, done = (bld.append_basic_block(n) for n in ("count", "count.body", "count.end"))
    bld.branch(head)
    bld.position_at_end(head)
    t = bld.phi(T.I32)
    t.add_incoming(lo, pre)
    bld.cbranch(bld.icmp_signed("<", t, hi), body, done)
    bld.position_at_end(body)
    emit(t)
    t.add_incoming(bld.add(t, ir.Constant(T.I32, 1)), bld.block)
    bld.branch(head)
    bld.position_at_end(done)


def _task_body(cg: Any, loop: Any, task: ir.Value, ntasks: ir.Value) -> None:
    """Iterations ``[lo, hi)`` of task ``task``: contiguous chunks of ceil(extent / ntasks)."""
    bld = cg.builder
    vt = T.scalar_type(loop.loop_var.dtype)
    lo0 = cg.loop_start(loop)
    extent = T.cast(bld, cg.expr(loop.extent), loop.extent.dtype, loop.loop_var.dtype)
    task, ntasks = bld.sext(task, vt) if vt != T.I32 else task, bld.sext(ntasks, vt) if vt != T.I32 else ntasks
    chunk = bld.sdiv(bld.sub(bld.add(extent, ntasks), ir.Constant(vt, 1)), ntasks)
    lo = bld.add(lo0, bld.mul(task, chunk))
    end = bld.add(lo0, extent)
    hi = bld.add(lo, chunk)
    hi = bld.select(bld.icmp_signed("<", end, hi), end, hi)
    cg.in_parallel = True
    try:
        cg.serial_loop(loop.loop_var, lo, hi, loop.body)
    finally:
        cg.in_parallel = False
