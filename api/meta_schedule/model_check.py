"""``tvms.meta_schedule.model_check``: a tuned schedule kept only when it is faster where it runs,
in the compiled model.

A trial times one kernel alone, in a loop: its weights and input stay in the caches from one
call to the next. In the model the kernel's weights come from memory (ResNet-50's 100 MB of
weights do not fit a 32 MB L3) and its input from the kernel before it, so a schedule that won
its trials can lose in the model (ShuffleNet tuned at 8 trials a task ran 9% behind its default
program though every tuned schedule had won its check in turns against the default).
``check_in_model`` times every tuned task's kernels in the model compiled with the database and
in the model compiled with the default schedules, in turns, and records both times: the
database ranks a schedule by its latest record, so a tuned schedule slower in the model gives
way to the default one.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from ..lowering.build import compile as compile_module, run_relax_pipeline
from ..lowering.dlight.base import apply_rules
from ..lowering.targets import target_kind
from ..lowering.tune.database import TuningRecord, trace_key
from ..lowering.tune.measure import args_info_of, main_func
from ..lowering.tune.relax_integration import compile_relax, extract_tasks
from ..lowering.tune.task_scheduler import replayed_default
from ..lowering.tune.tune import normalize_mod
from ..ir.function import PrimFunc
from ..ir.structural import structural_equal
from ..ir.target import as_target
from ..runtime.device import cpu
from ..runtime.vm import VirtualMachine


def kernel_seconds(executable: Any, inputs: list, calls: int = 5) -> tuple:
    """``(seconds of each call of main, {kernel: its seconds in each call})``: ``calls`` calls of
    ``main`` after a warm-up call, each kernel's ``run`` wrapped with a clock (an executable
    compiled with ``exec_mode="bytecode"``, whose interpreter calls each kernel through ``run``)."""
    spent: dict = {}
    for name, fn in executable.kernels().functions.items():
        def timed(values: Any, run: Any = fn.run, times: list = spent.setdefault(name, [])) -> None:
            start = time.perf_counter()
            run(values)
            times[-1] += time.perf_counter() - start
        fn.run = timed
    vm = VirtualMachine(executable, cpu())
    whole = []
    for _ in range(calls + 1):
        for times in spent.values():
            times.append(0.0)
        start = time.perf_counter()
        vm["main"](*inputs)
        whole.append(time.perf_counter() - start)
    return whole[1:], {name: times[1:] for name, times in spent.items() if max(times)}


def default_is_best(database: Any, task: Any) -> bool:
    """Whether the database's best schedule of ``task`` is its default one (or it has none)."""
    best = database.query_ir_module(task.mod, task.target)
    with task.target:
        default = apply_rules(task.mod["main"], task.target, target_kind(task.target).default_rules())
    return best is None or default is None or structural_equal(best["main"], default.mod["main"])


def check_in_model(database: Any, mod: Any, target: Any, inputs: list, calls: int = 5, rounds: int = 3,
                   passes: int = 3) -> dict:
    """Time the kernels of every task whose best record in ``database`` is a tuned schedule, in
    ``mod`` (a Relax program, lowered here as ``tvms.compile`` lowers it) compiled with the
    database and compiled with the default schedules, run on ``inputs``: ``rounds`` turns of
    ``calls`` calls each; record, per task, each schedule's time per call of its kernel (one
    measurement a round: its least).
    When a tuned schedule loses, the database's next best may be another tuned schedule: it is
    checked in the next pass (at most ``passes``). Returns {task name: (default ms, tuned ms)}
    of the last check of each task, the means of its rounds (as the database ranks them: the
    tuned schedule is kept when the second is the smaller)."""
    target = as_target(target)
    lowered = run_relax_pipeline(mod, "zero", True)
    tasks = extract_tasks(lowered, target)
    names = {id(t): [gv.name_hint for gv, f in lowered.functions_items() if isinstance(f, PrimFunc)
                     and structural_equal(normalize_mod(f), t.mod)] for t in tasks}
    checked: set = set()
    result: dict = {}
    default_ex = None
    for _ in range(passes):
        pending = []
        for task in tasks:
            top = database.query_tuning_record(task.mod, target)
            if top is None or default_is_best(database, task) or trace_key(top.trace) in checked:
                continue
            _, replay = replayed_default(task.mod, target)
            if replay is not None:
                pending.append((task, top, replay))
        if not pending:
            break
        if default_ex is None:
            default_ex = compile_module(lowered, target, exec_mode="bytecode")
        tuned_ex = compile_relax(database, lowered, target, exec_mode="bytecode")
        sides: list = [[], []]  # per side, per round: {kernel: its seconds in each call of main}
        for _ in range(rounds):  # (in turns: a load that comes and goes hits both)
            for ex, spent in zip((default_ex, tuned_ex), sides):
                spent.append(kernel_seconds(ex, inputs, calls)[1])
        for task, top, replay in pending:
            checked.add(trace_key(top.trace))
            kernels = {k for n in names[id(task)] for k in (n, n + "_prepacked")}
            per_call = [[_task_seconds(spent, kernels, task.weight) for spent in side] for side in sides]
            if None in per_call[0] + per_call[1]:
                continue
            workload = database.commit_workload(task.mod)
            info = args_info_of(main_func(task.mod))
            for trace, secs in zip((replay.trace, top.trace), per_call):
                database.commit_tuning_record(TuningRecord(trace, workload, secs, target, info, confirmation=True))
            result[task.task_name] = tuple(statistics.fmean(secs) * 1e3 for secs in per_call)
    return result


def _task_seconds(spent: dict, kernels: set, weight: int) -> float | None:
    """A task's seconds per call of its kernel in one round: the least over the round's calls of
    main of its kernels' time in that call over its ``weight`` calls (the least: what a shared
    machine's load disturbs least); None when the model ran none of its kernels."""
    found = [spent[k] for k in kernels if k in spent]
    return min(sum(call) / weight for call in zip(*found)) if found else None


__all__ = ["check_in_model", "default_is_best", "kernel_seconds"]
