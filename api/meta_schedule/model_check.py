"""``tvms.meta_schedule.model_check``: a tuned schedule kept only when it is faster where it runs,
in the compiled model.

A trial times one kernel alone, in a loop: its weights and input stay in the caches from one
call to the next. In the model the kernel's weights come from memory (ResNet-50's 100 MB of
weights do not fit a 32 MB L3) and its input from the kernel before it, so a schedule that won
its trials can lose in the model (ShuffleNet tuned at 8 trials a task ran 9% behind its default
program though every tuned schedule had won its check in turns against the default).
``check_in_model`` times every tuned task's kernels in the model compiled with the database and
in the model compiled with the default schedules, in turns, and records both times (on the
trials' scale, ``record_check``): the database ranks a schedule by its latest record, so a
tuned schedule slower in the model gives way to the next tuned one, checked the same way, or to
the default one.
"""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from typing import Any, Iterator

from ..lowering.build import compile as compile_module, run_relax_pipeline
from ..lowering.dlight.base import apply_rules
from ..lowering.targets import target_kind
from ..lowering.schedule import Schedule
from ..lowering.tune.database import MemoryDatabase, TuningRecord
from ..lowering.tune.measure import args_info_of, main_func
from ..lowering.tune.relax_integration import compile_relax, extract_tasks
from ..lowering.tune.task_scheduler import replayed_default
from ..ir.errors import TVMSError
from ..ir.structural import structural_equal
from ..ir.target import as_target
from ..runtime.device import cpu
from ..runtime.vm import VirtualMachine


@contextmanager
def clocked_kernels(executable: Any) -> Iterator[dict]:
    """``{kernel: its seconds in each call of main}`` while inside: each kernel's ``run`` wrapped
    with a clock that adds to its list's last entry (append a 0.0 to each list before a call),
    its own ``run`` back on leaving (``tvms.compile`` hands out one cached executable: a wrapper
    left on it would time every later use of it, and be wrapped again at the next timing)."""
    functions = executable.kernels().functions
    own = {name: fn.run for name, fn in functions.items()}
    spent: dict = {name: [] for name in functions}
    for name, fn in functions.items():
        def timed(values: Any, run: Any = own[name], times: list = spent[name]) -> None:
            start = time.perf_counter()
            run(values)
            times[-1] += time.perf_counter() - start
        fn.run = timed
    try:
        yield spent
    finally:
        for name, fn in functions.items():
            fn.run = own[name]


def kernel_seconds(executable: Any, inputs: list, calls: int = 5) -> tuple:
    """``(seconds of each call of main, {kernel: its seconds in each call})``: ``calls`` calls of
    ``main`` after a warm-up call, each kernel timed (``clocked_kernels``; an executable compiled
    with ``exec_mode="bytecode"``, whose interpreter calls each kernel through ``run``)."""
    vm = VirtualMachine(executable, cpu())
    whole = []
    with clocked_kernels(executable) as spent:
        for _ in range(calls + 1):
            for times in spent.values():
                times.append(0.0)
            start = time.perf_counter()
            vm["main"](*inputs)
            whole.append(time.perf_counter() - start)
    return whole[1:], {name: times[1:] for name, times in spent.items() if max(times)}


def default_is_best(database: Any, task: Any, default: Any = None) -> bool:
    """Whether the database's best schedule of ``task`` is its default one (or it has none);
    ``default``: the task's default schedule when the caller has it (else made here)."""
    best = database.query_ir_module(task.mod, task.target)
    if best is None:
        return True
    if default is None:
        with task.target:
            default = apply_rules(task.mod["main"], task.target, target_kind(task.target).default_rules())
    return default is None or structural_equal(best["main"], default.mod["main"])


CANDIDATES = 3  # the tuned schedules of a task timed in the model at most, fastest in trials first


def check_in_model(database: Any, mod: Any, target: Any, inputs: list, calls: int = 5, rounds: int = 3,
                   tasks: list | None = None) -> dict:
    """Time the kernels of every task whose best record in ``database`` is a tuned schedule, in
    ``mod`` (a Relax program, lowered here as ``tvms.compile`` lowers it) compiled with the
    database and compiled with the default schedules, run on ``inputs``: ``rounds`` turns of
    ``calls`` calls each, one measurement a round per task and side (its least time per call of
    its kernel). A task whose tuned schedule loses there has its next one (``_candidates``: up to
    ``CANDIDATES`` distinct schedules faster than the default in their trials) timed the same way,
    in a program compiled with it, until one wins; all is recorded as ``record_check`` does.
    ``tasks``: the lowered module's tasks (``extract_tasks``) when the caller has them. Returns
    {task name: (default ms, tuned ms)}, the means of the rounds in the model, the tuned one that
    of the fastest candidate, on the scale of the default's first rounds (the tuned schedule is
    kept when the second is the smaller)."""
    target = as_target(target)
    lowered = run_relax_pipeline(mod, "zero", True, target)
    tasks = extract_tasks(lowered, target) if tasks is None else tasks
    pending = []
    for task in tasks:
        if database.query_tuning_record(task.mod, target) is None:
            continue  # (nothing tuned to check: its default schedule is not needed)
        default, replay = replayed_default(task.mod, target)
        candidates = _candidates(database, task, target, default) if replay is not None else []
        if candidates:
            pending.append((task, replay, candidates))
    if not pending:
        return {}
    default_program = compile_module(lowered, target, exec_mode="bytecode")
    timed: dict = {task.task_name: [] for task, _, _ in pending}  # per candidate: (default's secs, its secs)
    for k in range(CANDIDATES):
        turn = [(task, cands[k]) for task, _, cands in pending  # (those whose k candidates all lost)
                if k < len(cands) and len(timed[task.task_name]) == k
                and all(statistics.fmean(t) >= statistics.fmean(d) for d, t in timed[task.task_name])]
        if not turn:
            break
        # (each task's k-th candidate, the first too: a top record whose trace fails is not one)
        chosen = _with_schedules(database, tasks, target, {id(t): c for t, c in turn})
        programs = (default_program, compile_relax(chosen, lowered, target, exec_mode="bytecode"))
        sides: list = [[], []]  # per side, per round: {kernel: its seconds in each call of main}
        for _ in range(rounds):  # (in turns: a load that comes and goes hits both)
            for ex, spent in zip(programs, sides):
                spent.append(kernel_seconds(ex, inputs, calls)[1])
        for task, _ in turn:
            kernels = {name for n in task.names for name in (n, n + "_prepacked")}
            per_call = [[_task_seconds(spent, kernels, task.weight) for spent in side] for side in sides]
            if None not in per_call[0] + per_call[1]:
                timed[task.task_name].append(tuple(per_call))
    result: dict = {}
    for task, replay, cands in pending:
        checks = timed[task.task_name]
        if checks:
            (default_secs, tuned_secs), *later = checks
            record_check(database, task, cands[0], replay.trace, default_secs, tuned_secs,
                         [(c, d, t) for c, (d, t) in zip(cands[1:], later)])
            base = statistics.fmean(default_secs)
            result[task.task_name] = (base * 1e3, min(statistics.fmean(t) * base / statistics.fmean(d)
                                                      for d, t in checks) * 1e3)
    return result


def _candidates(database: Any, task: Any, target: Any, default: Any) -> list:
    """The task's records for ``target`` of up to ``CANDIDATES`` distinct tuned schedules ranked
    ahead of its ``default`` one, fastest first (none when the default ranks first)."""
    workload = database.commit_workload(task.mod) if database.has_workload(task.mod) else None
    found, funcs = [], []
    for record in database.get_top_k(workload, len(database)) if workload is not None else ():
        if record.target is not None and record.target.kind != target.kind:
            continue
        sch = Schedule(task.mod)
        try:
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except TVMSError:
            continue
        func = sch.mod["main"]
        if default is None or structural_equal(func, default.mod["main"]):
            break  # (the rest are slower in their trials than the default)
        if not any(structural_equal(func, f) for f in funcs):
            found.append(record)
            funcs.append(func)
            if len(found) == CANDIDATES:
                break
    return found


def _with_schedules(database: Any, tasks: list, target: Any, chosen: dict) -> MemoryDatabase:
    """A database that gives each of ``tasks`` its record in ``chosen`` ({id(task): record}), else
    its best in ``database``."""
    picked = MemoryDatabase()
    for task in tasks:
        record = chosen.get(id(task)) or database.query_tuning_record(task.mod, target)
        if record is not None:
            picked.commit_tuning_record(TuningRecord(record.trace, picked.commit_workload(task.mod), record.run_secs,
                                                     record.target, record.args_info))
    return picked


def record_check(database: Any, task: Any, top: Any, default_trace: Any, default_secs: list,
                 tuned_secs: list, others: list = ()) -> None:
    """Record a check in the model of ``top`` (the task's best record, a tuned schedule) against
    the default schedule (``default_trace``), each side's seconds a round in the model, so that
    the database ranks as the check decided. A kernel runs slower in the model than in a trial
    (cold caches): its times in the model, ranked beside the other records' times in trials,
    would put every tuned schedule not checked ahead of both. So both are recorded on the
    trial's scale, their times in the model times ``top``'s in its trial over its in the model:
    a tuned schedule that wins keeps its time (the fastest: still the best), and a default one
    that wins is recorded faster than ``top``, so faster than every record not checked.
    ``others``: the next tuned schedules checked, each ``(record, the default's seconds, its
    seconds)`` in its own rounds against the default; each is recorded by its time over the
    default's in those rounds, on the same scale (the default's rounds mapped onto the first)."""
    scale = top.mean_secs() / statistics.fmean(tuned_secs)
    workload = database.commit_workload(task.mod)
    info = args_info_of(main_func(task.mod))
    checked = [(default_trace, default_secs, scale), (top.trace, tuned_secs, scale)]
    checked += [(record.trace, secs, scale * statistics.fmean(default_secs) / statistics.fmean(base))
                for record, base, secs in others]
    for trace, secs, by in checked:
        database.commit_tuning_record(TuningRecord(trace, workload, [s * by for s in secs], top.target, info,
                                                   confirmation=True))


def _task_seconds(spent: dict, kernels: set, weight: int) -> float | None:
    """A task's seconds per call of its kernel in one round: the least over the round's calls of
    main of its kernels' time in that call over its ``weight`` calls (the least: what a shared
    machine's load disturbs least); None when the model ran none of its kernels."""
    found = [spent[k] for k in kernels if k in spent]
    return min(sum(call) / weight for call in zip(*found)) if found else None


__all__ = ["check_in_model", "clocked_kernels", "default_is_best", "kernel_seconds", "record_check"]
