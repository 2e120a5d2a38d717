"""Search strategies: which candidates to measure next (TVM's ``SearchStrategy`` interface).

A strategy is told the task (``_initialize_with_tune_context``), then for each tuning run:
``pre_tuning`` with the design spaces, a loop of ``generate_measure_candidates`` (None: done)
and ``notify_runner_results``, and ``post_tuning``. ``ReplayTrace`` replays the design spaces'
traces with fresh random decisions; ``ReplayFunc`` runs the space generator again.

Every candidate goes through the space's postprocessors (after ``enter_postproc``, so that
``remove_postproc`` finds where they begin); one that a postprocessor rejects, that fails to
schedule, or whose decisions were already drawn in this run or are in the database (a resumed
run) is drawn again, at most ``max_fail_count`` times per candidate. TVM's replay does not skip
repeats: measuring the same schedule twice only spends a trial.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from ...ir.errors import TVMSError
from ..schedule.schedule import Schedule
from ..schedule.trace import SAMPLING_KINDS, Trace
from .measure import MeasureCandidate, args_info_of, main_func
from .postproc_verify_gpu_code import postprocs_precheck


class SearchStrategy:
    """The interface; subclasses override every method."""

    def _initialize_with_tune_context(self, context: Any) -> None:
        raise NotImplementedError

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list,
                   database: Any = None, cost_model: Any = None) -> None:
        raise NotImplementedError

    def post_tuning(self) -> None:
        raise NotImplementedError

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        raise NotImplementedError

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        raise NotImplementedError

    def clone(self) -> "SearchStrategy":
        raise NotImplementedError

    @staticmethod
    def create(kind: Any = "evolutionary", *args: Any, **kwargs: Any) -> "SearchStrategy":
        """A strategy from ``tune_tir``'s ``strategy=``: an instance, or ``"evolutionary"``,
        ``"replay-trace"``, ``"replay-func"``."""
        if isinstance(kind, SearchStrategy):
            return kind
        if kind == "replay-trace":
            return ReplayTrace(*args, **kwargs)
        if kind == "replay-func":
            return ReplayFunc(*args, **kwargs)
        if kind == "evolutionary":
            from .evolutionary_search import EvolutionarySearch

            return EvolutionarySearch(*args, **kwargs)
        raise TVMSError(f"unknown search strategy {kind!r} (evolutionary, replay-trace, replay-func)")


def decisions_key(trace: Trace) -> str:
    """What tells two candidates of one design space apart: their trace with its decisions."""
    return json.dumps(trace.as_json(remove_postproc=True), separators=(",", ":"))


class _Replay(SearchStrategy):
    """What both replays share: the task, the trial counts, postprocessing, skipping repeats."""

    def __init__(self, max_fail_count: int = 100) -> None:
        if max_fail_count < 1:
            raise TVMSError(f"max_fail_count is at least 1, got {max_fail_count}")
        self.max_fail_count = max_fail_count
        self.context: Any = None
        self._state: dict | None = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        if context.mod is None:
            raise TVMSError(f"{type(self).__name__}: the TuneContext has no module")
        if context.space_generator is None:
            raise TVMSError(f"{type(self).__name__}: the TuneContext has no space generator")
        self.context = context
        self._state = None

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list,
                   database: Any = None, cost_model: Any = None) -> None:
        if self._state is not None:
            raise TVMSError(f"{type(self).__name__}: pre_tuning was called twice without post_tuning")
        if self.context is None:
            raise TVMSError(f"{type(self).__name__} is not part of a TuneContext yet")
        if not design_spaces:
            raise TVMSError(f"{type(self).__name__}: no design space to search")
        seen = set()
        if database is not None and database.has_workload(self.context.mod):
            workload = database.commit_workload(self.context.mod)
            seen = {decisions_key(r.trace) for r in database.get_all_tuning_records() if r.workload == workload}
        self._state = {"spaces": [s.trace for s in design_spaces], "max_trials": max_trials,
                       "per_iter": num_trials_per_iter, "done": 0, "seen": seen,
                       "live": list(range(len(design_spaces)))}

    def post_tuning(self) -> None:
        self._state = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        state = self._need_state()
        count = min(state["per_iter"], state["max_trials"] - state["done"])
        if count <= 0:
            return None
        candidates = []
        for _ in range(count):
            sch = self._draw(state)
            if sch is None:  # (max_fail_count draws found nothing new: the space is spent)
                break
            candidates.append(MeasureCandidate(sch, args_info_of(main_func(sch.mod))))
        return candidates or None

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self._need_state()["done"] += len(results)

    def _draw(self, state: dict) -> Schedule | None:
        """A new candidate, or None after ``max_fail_count`` failed draws."""
        for _ in range(self.max_fail_count):
            try:
                sch = self._sample(state)
            except TVMSError:  # (a schedule primitive refused the drawn decisions)
                continue
            if sch is None:
                continue
            key = decisions_key(sch.trace)
            if key in state["seen"]:
                continue
            state["seen"].add(key)
            return sch
        return None

    def _sample(self, state: dict) -> Schedule | None:
        raise NotImplementedError

    def _postprocess(self, sch: Schedule) -> Schedule | None:
        """``sch`` after the space's postprocessors, or None if one rejects it."""
        sch.enter_postproc()
        for postproc in self.context.space_generator.postprocs:
            if not postproc.apply(sch):
                return None
        return sch

    def _need_state(self) -> dict:
        if self._state is None:
            raise TVMSError(f"{type(self).__name__}: call pre_tuning first")
        return self._state

    def clone(self) -> "_Replay":
        other = copy.copy(self)
        other.context, other._state = None, None
        return other


class ReplayTrace(_Replay):
    """``ReplayTrace(max_fail_count=100)``: each candidate is a design space's trace (without
    its post-processing) replayed with every sampling decision drawn afresh."""

    def _sample(self, state: dict) -> Schedule | None:
        ctx = self.context
        live = state["live"]  # (the spaces that may still replay to something new)
        if not live:
            return None
        index = live[ctx.rng.randrange(len(live))]
        trace = state["spaces"][index]
        if not any(inst.kind in SAMPLING_KINDS for inst in trace.insts):
            live.remove(index)  # (no decision to draw afresh: it replays to one candidate, this one)
        fresh = Trace(_without_postproc(trace.insts), {}, trace.dialect)
        sch = Schedule(ctx.mod, seed=ctx.fork_seed())
        # (VerifyGPUCode's checks as soon as the trace binds the threads and places the caches)
        fresh.apply_to_schedule(sch, remove_postproc=True,
                                decision_provider=postprocs_precheck(ctx.space_generator.postprocs, sch))
        return self._postprocess(sch)


class ReplayFunc(_Replay):
    """``ReplayFunc()``: each candidate is a design space the space generator makes anew
    (its own random decisions), one of them picked at random."""

    def _sample(self, state: dict) -> Schedule | None:
        spaces = self.context.space_generator.generate_design_space(self.context.mod)
        if not spaces:
            return None
        return self._postprocess(spaces[self.context.rng.randrange(len(spaces))])


def _without_postproc(insts: list) -> list:
    """The instructions before ``EnterPostproc`` (what the space generator made)."""
    kinds = [inst.kind for inst in insts]
    return list(insts[:kinds.index("EnterPostproc")] if "EnterPostproc" in kinds else insts)
