"""The tuning loop: which task gets the next trials, and the trip of a batch of candidates through
the builder, the runner and the measure callbacks (TVM's ``TaskScheduler``).

``TaskScheduler.tune`` repeats: pick a task (``next_task_id``), ask its search strategy for a batch
of candidates, build them and send the built ones to the runner; the runner answers with futures,
so the loop goes on to the next task while they are measured. A task whose batch is out is joined
(``join_running_task``: wait for its results, tell its strategy, run the callbacks) before it is
given another batch. Within a batch, building and measuring overlap: the batch is built in chunks,
and each chunk goes to the runner as soon as it is built, while the next chunk builds.

``RoundRobin`` takes the tasks in turn; ``GradientBased`` gives the trials to the task whose
weighted best latency is falling fastest (TVM's gradient-based scheduling).
"""
from __future__ import annotations

import json
import logging
import random
import statistics
from typing import Any

from ...ir.errors import TVMSError
from ...ir.module import IRModule
from ...ir.structural import structural_equal
from ..dlight.base import apply_rules
from ..relax.split_layout_rewrite_preproc import CannotSplit, split_prim_func
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace
from ..targets import target_kind
from .database import FAILED_RUN_SECS, TuningRecord, trace_key
from .flops import estimate_tir_flops
from .measure import BuilderInput, MeasureCandidate, RunnerInput, RunnerResult, args_info_of, main_func
from .measure_callback import remove_artifacts, removes_artifacts
from .tune_context import task_logger

_FAILED_MS = FAILED_RUN_SECS * 1e3
# when a tuned schedule is checked against the default one: measurements of each, and the most
# tuned schedules checked per task
CONFIRM_ROUNDS, CONFIRM_LIMIT = 3, 4
_LOG = logging.getLogger("tvms.meta_schedule")


class _Failed:
    """The runner future of a candidate that did not build: done, with the build's error."""

    def __init__(self, error_msg: str) -> None:
        self.error_msg = error_msg

    def done(self) -> bool:
        return True

    def result(self) -> RunnerResult:
        return RunnerResult(None, self.error_msg)


def _median_ms(result: RunnerResult) -> float:
    secs = sorted(float(s) for s in result.run_secs or ())
    if not secs:
        return _FAILED_MS
    mid = len(secs) // 2
    return 1e3 * (secs[mid] if len(secs) % 2 else (secs[mid - 1] + secs[mid]) / 2)


class TaskRecord:
    """What the scheduler knows of one task: its context and weight, its FLOP count, the latency
    of each trial (ms; failures count as 1e13), and the batch in flight."""

    def __init__(self, ctx: Any, task_weight: float) -> None:
        missing = [part for part in ("mod", "target", "space_generator", "search_strategy")
                   if getattr(ctx, part) is None]
        if missing:
            raise TVMSError(f"task {ctx.task_name!r}: a TuneContext to tune needs {', '.join(missing)}")
        self.ctx = ctx
        self.task_weight = float(task_weight)
        self.flop = max(1.0, estimate_tir_flops(ctx.mod))
        self.is_terminated = False
        self.build_error_count = 0
        self.run_error_count = 0
        self.latency_ms: list[float] = []
        self.trials_before = 0  # trials found in the database when tuning started (a resumed run)
        self.baseline_done = False  # its default schedule was measured (or has none)
        self.baseline_in_flight = False
        self.measure_candidates: list | None = None
        self.builder_results: list | None = None
        self.runner_futures: list | None = None

    @property
    def best_ms(self) -> float:
        return min(self.latency_ms, default=_FAILED_MS)

    @property
    def gflops(self) -> float | None:
        """The best speed so far, or None before a trial succeeded."""
        return None if self.best_ms >= _FAILED_MS else self.flop / self.best_ms / 1e6


def _device(target: Any) -> str:
    return "cpu" if target.kind == "llvm" else target.kind


def timed_kernel(candidate: MeasureCandidate, constant_params: frozenset = frozenset()) -> tuple:
    """What a trial builds and times, and its arguments: the candidate's kernel without its weight
    repacking blocks (``meta_schedule.layout_rewrite_preproc``, as the default conv schedule writes
    them) when they all repack ``constant_params`` (weights the model passes as constants, which a
    compiled model repacks once: ``prepack_constant_weights``); else the whole kernel, as the
    model runs it at each call."""
    mod = candidate.sch.mod
    try:
        split = split_prim_func(main_func(mod), "main")
    except CannotSplit:
        split = None
    if split is None or any(index not in constant_params for index, *_ in split[2]):
        return mod, candidate.args_info
    return IRModule({"main": split[1]}), args_info_of(split[1])


def replayed_default(mod: IRModule, target: Any, via_json: bool = True) -> tuple:
    """``(default schedule, its replay)`` of ``mod``'s function: the schedule the default rules
    give it (None when they give none, or an empty trace) and its trace (``via_json``: written as
    a record and read back) replayed on ``mod``, None when that does not reproduce the schedule
    (a rule that rewrote the function outside the schedule; or, through JSON, what the record's
    form loses)."""
    try:
        sch = apply_rules(main_func(mod), target, target_kind(target).default_rules())
    except TVMSError:
        return None, None
    if sch is None or not sch.trace.insts:
        return None, None
    try:
        trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json(remove_postproc=False)))) if via_json \
            else sch.trace
        replay = Schedule(mod)
        trace.apply_to_schedule(replay, remove_postproc=False)
    except (TVMSError, TypeError, ValueError):  # e.g. an index map the JSON form cannot hold
        return sch, None
    return sch, replay if structural_equal(replay.mod["main"], sch.mod["main"]) else None


class TaskScheduler:
    """The loop every scheduler shares; subclasses decide ``next_task_id``.

    ``build_chunk``: how many candidates are built before they are sent to the runner, so that
    the runner measures them while the next ones build; None: as many as the builder builds at
    once (its ``max_workers``). A chunk as large as a batch builds it all first, as TVM does.
    ``progress``: what watches the loop (``progress.Progress``); None shows nothing.
    ``measure_default``: in the built-in space (``PostOrderApply``), a task's first trial is its
    default schedule (``tvms.dlight``'s rule, as ``tvms.compile`` would schedule it), so the best
    a tuning finds is never behind the default (TVM starts from its space only).
    """

    def __init__(self, build_chunk: int | None = None, progress: Any = None, measure_default: bool = True) -> None:
        if build_chunk is not None and build_chunk < 1:
            raise TVMSError(f"build_chunk is a positive number of candidates or None, got {build_chunk!r}")
        self.build_chunk = build_chunk
        self.progress = progress
        self.measure_default = measure_default
        self.tasks_: list[TaskRecord] = []
        self.measure_callbacks_: list = []
        self.database_: Any = None
        self.cost_model_: Any = None
        self.remaining_tasks_ = 0

    @staticmethod
    def create(kind: str = "gradient", **kwargs: Any) -> "TaskScheduler":
        """``"round-robin"`` or ``"gradient"``."""
        kinds = {"round-robin": RoundRobin, "gradient": GradientBased}
        if kind not in kinds:
            raise TVMSError(f"unknown task scheduler {kind!r}; known: {', '.join(kinds)}")
        return kinds[kind](**kwargs)

    # -- the loop
    def tune(self, tasks: list, task_weights: list, max_trials_global: int, max_trials_per_task: int,
             num_trials_per_iter: int, builder: Any, runner: Any, measure_callbacks: list,
             database: Any, cost_model: Any) -> None:
        if len(tasks) != len(task_weights):
            raise TVMSError(f"{len(tasks)} task(s) but {len(task_weights)} weight(s)")
        self.measure_callbacks_ = list(measure_callbacks or [])
        self.database_, self.cost_model_ = database, cost_model
        self.tasks_ = [TaskRecord(ctx, w) for ctx, w in zip(tasks, task_weights)]
        self.remaining_tasks_ = len(self.tasks_)
        self._builder, self._runner = builder, runner
        done_before = 0
        for task_id, task in enumerate(self.tasks_):
            ctx = task.ctx
            task_logger(ctx).info("Initializing Task #%d: %s\n%s", task_id, ctx.task_name, ctx.mod.script())
            task.latency_ms = self._measured_before(task)
            task.trials_before = len(task.latency_ms)
            done_before += task.trials_before
            spaces = ctx.space_generator.generate_design_space(ctx.mod)
            task_logger(ctx).info("Total %d design space(s) generated", len(spaces))
            for i, sch in enumerate(spaces):
                task_logger(ctx).info("Design space #%d:\n%s", i, sch.trace)
            ctx.search_strategy.pre_tuning(max(0, max_trials_per_task - task.trials_before),
                                           num_trials_per_iter, spaces, database, cost_model)
        if self.progress is not None:
            self.progress.start(self, max_trials_global, done_before)
        trials = done_before
        try:
            while trials < max_trials_global:
                task_id = self.next_task_id()
                if task_id < 0:
                    break
                task = self.tasks_[task_id]
                _LOG.debug("TaskScheduler picks Task #%d: %s", task_id, task.ctx.task_name)
                if len(task.latency_ms) >= max_trials_per_task:
                    self.terminate_task(task_id)
                    continue
                baseline = self._baseline(task) if not task.latency_ms and not task.baseline_done else None
                if baseline is not None:
                    trials += 1
                    self._send(task_id, [baseline])
                    continue
                candidates = task.ctx.search_strategy.generate_measure_candidates()
                if not candidates:
                    self.terminate_task(task_id)
                    continue
                candidates = candidates[:min(max_trials_global - trials, max_trials_per_task - len(task.latency_ms))]
                trials += len(candidates)
                self._send(task_id, candidates)
            for task_id, task in enumerate(self.tasks_):
                if not task.is_terminated:
                    if task.runner_futures is not None:
                        self.join_running_task(task_id)
                    self.terminate_task(task_id)
            if self.measure_default:
                for task in self.tasks_:
                    self._confirm_best(task)
        finally:
            self._drop_batches_in_flight()
            for task in self.tasks_:
                task.ctx.search_strategy.post_tuning()
            if self.progress is not None:
                self.progress.finish(self)

    def _drop_batches_in_flight(self) -> None:
        """After the loop ended early (an error, Ctrl-C): the artifacts of the batches no one
        joined, which the callbacks would have removed, are removed now (a runner still reading
        one fails that trial, which is not recorded anyway)."""
        if not removes_artifacts(self.measure_callbacks_):
            return
        for task in self.tasks_:
            if task.runner_futures is not None:
                remove_artifacts(task.builder_results or [])
                task.measure_candidates = task.builder_results = task.runner_futures = None

    def _measured_before(self, task: TaskRecord) -> list[float]:
        """The latencies of the records the database already holds for the task's module and
        target: a second run on the same database resumes, counting them against the budget
        (trials measured for another target are not this run's; the records of
        ``_confirm_best`` count too)."""
        db = self.database_
        if db is None or not db.has_workload(task.ctx.mod):
            return []
        workload, target = db.commit_workload(task.ctx.mod), str(task.ctx.target)
        return [r.mean_secs() * 1e3 for r in db.get_all_tuning_records()
                if r.workload == workload and (r.target is None or str(r.target) == target)]

    def _send(self, task_id: int, candidates: list) -> None:
        """Build the batch chunk by chunk, handing each built chunk to the runner at once."""
        task = self.tasks_[task_id]
        target = task.ctx.target
        device = _device(target)
        task.measure_candidates, task.builder_results, task.runner_futures = list(candidates), [], []
        chunk = self.build_chunk or getattr(self._builder, "max_workers", None) or len(candidates)
        for start in range(0, len(candidates), chunk):
            part = candidates[start:start + chunk]
            if self.progress is not None:
                self.progress.building(task_id, len(part))
            timed = [timed_kernel(c, task.ctx.constant_params) for c in part]
            built = self._builder.build([BuilderInput(mod, target) for mod, _ in timed])
            if len(built) != len(part):
                raise TVMSError(f"the builder gave {len(built)} result(s) for {len(part)} candidate(s)")
            errors = sum(r.error_msg is not None for r in built)
            if errors:
                _LOG.info("Build errors: %d sample(s)", errors)
            ok = [(info, r) for (_, info), r in zip(timed, built) if r.error_msg is None]
            task.builder_results += built  # (before the runner: whatever stops the loop, they are removed)
            futures = iter(self._runner.run([RunnerInput(r.artifact_path, device, info) for info, r in ok]))
            task.runner_futures += [next(futures) if r.error_msg is None else _Failed(r.error_msg) for r in built]
            if self.progress is not None:
                self.progress.built(task_id, len(part), len(ok))

    def _baseline(self, task: TaskRecord) -> MeasureCandidate | None:
        """The task's default schedule as its first trial (``default_candidate``)."""
        task.baseline_done = True
        candidate = self.default_candidate(task.ctx)
        task.baseline_in_flight = candidate is not None
        return candidate

    def default_candidate(self, ctx: Any) -> MeasureCandidate | None:
        """The task's default schedule as a candidate, when the scheduler measures it and its
        trace, written as a record and read back, replays to it on the task's module (the record
        must reproduce what was timed)."""
        from .post_order_apply import PostOrderApply

        if not self.measure_default or not isinstance(ctx.space_generator, PostOrderApply):
            return None  # a space of the user's own is searched alone
        _, replay = replayed_default(ctx.mod, ctx.target)
        return None if replay is None else MeasureCandidate(replay, args_info_of(main_func(ctx.mod)))

    def _confirm_best(self, task: TaskRecord) -> None:
        """While the best record of a task is a tuned schedule not timed again yet (at most
        ``CONFIRM_LIMIT`` of them), time it and the default schedule again in turns,
        ``CONFIRM_ROUNDS`` each in one batch, and record both: the database ranks a schedule by
        its latest measurement (``Database.get_top_k``), so a tuned schedule that won by one lucky
        measurement on a loaded machine gives way (ResNet-50 after 8 trials a task, unconfirmed:
        20 of 25 tasks had replaced their default schedule, and the model was 2% slower)."""
        db, ctx = self.database_, task.ctx
        default = self.default_candidate(ctx)
        if db is None or default is None or not db.has_workload(ctx.mod):
            return
        workload = db.commit_workload(ctx.mod)
        confirmed = {trace_key(default.sch.trace),  # (and what this database timed again earlier)
                     *(r.schedule_key()[0] for r in db.get_all_tuning_records() if r.confirmation and r.workload == workload)}
        for _ in range(CONFIRM_LIMIT):
            top = db.query_tuning_record(ctx.mod, ctx.target)  # (this target's best)
            if top is None or trace_key(top.trace) in confirmed:
                return
            confirmed.add(trace_key(top.trace))
            pair = [default, top.as_measure_candidate()]
            timed = [timed_kernel(c, ctx.constant_params) for c in pair]
            built = self._builder.build([BuilderInput(mod, ctx.target) for mod, _ in timed])
            try:
                if any(r.error_msg for r in built):
                    return
                inputs = [RunnerInput(r.artifact_path, _device(ctx.target), info) for (_, info), r in zip(timed, built)]
                results = [f.result() for f in self._runner.run(inputs * CONFIRM_ROUNDS)]
            finally:  # (no callback sees these builds: removed here when the run removes its artifacts)
                if removes_artifacts(self.measure_callbacks_):
                    remove_artifacts(built)
            if any(r.error_msg for r in results):
                return
            secs = [[s for r in results[k::2] for s in r.run_secs] for k in (0, 1)]
            for candidate, times in zip(pair, secs):
                db.commit_tuning_record(TuningRecord(candidate.sch.trace, workload, times, ctx.target,
                                                     candidate.args_info, confirmation=True))
            task_logger(ctx).info("Timed again in turns: the default schedule %.4f us, the best tuned one %.4f us",
                                  *(statistics.median(times) * 1e6 for times in secs))

    def join_running_task(self, task_id: int) -> list[RunnerResult]:
        """Wait for the task's batch, tell its strategy and the callbacks, and record the trials."""
        task = self.tasks_[task_id]
        if task.runner_futures is None:
            raise TVMSError(f"task #{task_id} has no batch in flight")
        results = [f.result() for f in task.runner_futures]
        candidates, built = task.measure_candidates, task.builder_results
        if task.baseline_in_flight:  # not the strategy's candidate: it learns of it from the database
            task.baseline_in_flight = False
        else:
            task.ctx.search_strategy.notify_runner_results(candidates, results)
        for callback in self.measure_callbacks_:
            callback.apply(self, task_id, candidates, built, results)
        log = task_logger(task.ctx)
        name = task.ctx.task_name
        for sch_built, candidate, result in zip(built, candidates, results):
            error = sch_built.error_msg or result.error_msg
            if sch_built.error_msg:
                task.build_error_count += 1
            elif result.error_msg:
                task.run_error_count += 1
            run_ms = _FAILED_MS if error else _median_ms(result)
            task.latency_ms.append(run_ms)
            trial = len(task.latency_ms)
            if error:
                log.info("[Task #%d: %s] Trial #%d: Error in %s:\n%s\n%s\n%s", task_id, name, trial,
                         "building" if sch_built.error_msg else "running", error,
                         candidate.sch.mod.script(), candidate.sch.trace)
            else:
                log.info("[Task #%d: %s] Trial #%d: GFLOPs: %.4f. Time: %.4f us. Best GFLOPs: %.4f",
                         task_id, name, trial, task.flop / run_ms / 1e6, run_ms * 1e3, task.gflops)
            if self.progress is not None:
                self.progress.trial(self, task_id, sch_built.error_msg is None)
        task.measure_candidates = task.builder_results = task.runner_futures = None
        return results

    def touch_task(self, task_id: int) -> None:
        """Join the task if its whole batch is measured (without waiting)."""
        task = self.tasks_[task_id]
        if not task.is_terminated and task.runner_futures is not None \
                and all(f.done() for f in task.runner_futures):
            self.join_running_task(task_id)

    def terminate_task(self, task_id: int) -> None:
        task = self.tasks_[task_id]
        if task.is_terminated:
            raise TVMSError(f"task #{task_id} is already terminated")
        task.is_terminated = True
        self.remaining_tasks_ -= 1
        _LOG.info("Task #%d has finished. Remaining task(s): %d", task_id, self.remaining_tasks_)

    def next_task_id(self) -> int:
        raise NotImplementedError

    def print_tuning_statistics(self) -> None:
        from .progress import tuning_statistics

        _LOG.info("\n%s", tuning_statistics(self))


class RoundRobin(TaskScheduler):
    """The tasks in turn, each given a batch when its previous one is joined."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task_id = -1

    def tune(self, *args: Any, **kwargs: Any) -> None:
        self.task_id = -1
        super().tune(*args, **kwargs)

    def next_task_id(self) -> int:
        n = len(self.tasks_)
        for task_id in range(n):
            self.touch_task(task_id)
        for _ in range(n):
            self.task_id = (self.task_id + 1) % n
            task = self.tasks_[self.task_id]
            if not task.is_terminated:
                if task.runner_futures is not None:
                    self.join_running_task(self.task_id)
                return self.task_id
        return -1


class GradientBased(TaskScheduler):
    """TVM's gradient-based scheduler: after one round over every task, the next batch goes to
    the live task with the largest ``weight * (alpha * g1 + (1 - alpha) * g2)``, where ``g1`` is
    how fast its best latency fell over the last ``window_size`` joins and ``g2`` is its best
    latency divided by the number of joins (what one more round could still win). Ties (and
    tasks without a valid trial yet) are broken at random."""

    def __init__(self, alpha: float = 0.2, window_size: int = 3, seed: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha, self.window_size = float(alpha), int(window_size)
        self.rng = random.Random(None if seed is None or seed < 0 else seed)
        self.round_robin_rounds_ = 0
        self.best_latency_history_: list[list[float]] = []

    def tune(self, tasks: list, *args: Any, **kwargs: Any) -> None:
        self.round_robin_rounds_ = 0
        self.best_latency_history_ = [[] for _ in tasks]
        super().tune(tasks, *args, **kwargs)

    def next_task_id(self) -> int:
        n = len(self.tasks_)
        if self.round_robin_rounds_ < n:  # first, one batch each
            self.round_robin_rounds_ += 1
            return self.round_robin_rounds_ - 1
        if self.round_robin_rounds_ == n:
            for task_id, task in enumerate(self.tasks_):
                if task.runner_futures is not None:
                    self.join_running_task(task_id)
            self.round_robin_rounds_ += 1
        alive = []
        for task_id in range(n):
            self.touch_task(task_id)
            if not self.tasks_[task_id].is_terminated:
                alive.append(task_id)
        if not alive:
            return -1
        grads = [self._gradient(task_id) for task_id in alive]
        if max(grads) == min(grads):
            task_id = alive[self.rng.randrange(len(alive))]
        else:
            task_id = alive[grads.index(max(grads))]
        if self.tasks_[task_id].runner_futures is not None:
            self.join_running_task(task_id)
        return task_id

    def _gradient(self, task_id: int) -> float:
        history = self.best_latency_history_[task_id]
        n, w = len(history), self.window_size
        if n == 0 or history[-1] >= 1e9:
            return -1e9  # no valid trial yet: nothing to extrapolate from
        best = history[-1]
        g1 = (history[-1 - w] - best) / w if n >= 1 + w else 0.0
        g2 = best / n
        return (self.alpha * g1 + (1 - self.alpha) * g2) * self.tasks_[task_id].task_weight

    def join_running_task(self, task_id: int) -> list[RunnerResult]:
        results = super().join_running_task(task_id)
        latencies = self.tasks_[task_id].latency_ms
        if latencies:
            self.best_latency_history_[task_id].append(min(latencies))
        return results
