"""The tuning task: one module, one target, the space to search and the strategy searching it."""
from __future__ import annotations

import logging
import random
from typing import Any

from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.target import Target, as_target, thread_count


def task_logger(ctx: Any) -> logging.Logger:
    """Where a task's tuning logs: its context's logger (the task's log file), else tvms's."""
    return ctx.logger if isinstance(ctx.logger, logging.Logger) else logging.getLogger("tvms.meta_schedule")


class TuneContext:
    """``TuneContext(mod, target, space_generator, search_strategy, task_name="main",
    rand_state=-1, num_threads="physical", logger=None)`` as TVM's.

    It owns the task's random generator (``rand_state`` -1: a fresh seed), from which every
    sampling, mutation and pick of the task draws, so that one seed replays a whole tuning run.
    The space generator and the search strategy are told the context when it is made
    (``_initialize_with_tune_context``), as TVM does, so they can read the target and the module.
    """

    def __init__(self, mod: "IRModule | PrimFunc | None" = None, target: "Target | str | None" = None,
                 space_generator: Any = None, search_strategy: Any = None, task_name: str = "main",
                 rand_state: int = -1, num_threads: "int | str" = "physical", logger: Any = None,
                 constant_params: frozenset = frozenset()) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if mod is not None and not isinstance(mod, IRModule):
            raise TVMSError(f"TuneContext takes an IRModule or a PrimFunc, got {type(mod).__name__}")
        self.mod = mod
        self.target = None if target is None else as_target(target)
        self.task_name = task_name
        if rand_state is None or rand_state < 0:
            rand_state = random.randrange(1 << 31)
        self.rand_state = int(rand_state)
        self.rng = random.Random(self.rand_state)
        if num_threads == "physical":
            num_threads = thread_count(self.target.num_cores if self.target is not None else None)
        if not isinstance(num_threads, int) or num_threads < 1:
            raise TVMSError(f"num_threads is a positive integer or 'physical', got {num_threads!r}")
        self.num_threads = num_threads
        self.logger = logger
        # the parameters the model passes as constants: their repacking runs once, untimed (timed_kernel)
        self.constant_params = frozenset(constant_params)
        self.space_generator = space_generator
        self.search_strategy = search_strategy
        for part in (space_generator, search_strategy):
            if part is not None and hasattr(part, "_initialize_with_tune_context"):
                part._initialize_with_tune_context(self)

    def fork_seed(self) -> int:
        """A seed for something random of its own (a schedule, a worker), drawn from the task's."""
        return self.rng.randrange(1 << 31)

    def _need(self, part: str) -> Any:
        value = getattr(self, part)
        if value is None:
            raise TVMSError(f"this TuneContext has no {part}")
        return value

    def generate_design_space(self) -> list:
        """The design spaces of the task's module: schedules whose traces hold sampling decisions."""
        return self._need("space_generator").generate_design_space(self._need("mod"))

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int = 64, design_spaces: list | None = None,
                   database: Any = None, cost_model: Any = None) -> None:
        if design_spaces is None:
            design_spaces = self.generate_design_space()
        self._need("search_strategy").pre_tuning(max_trials, num_trials_per_iter, design_spaces,
                                                 database, cost_model)

    def post_tuning(self) -> None:
        self._need("search_strategy").post_tuning()

    def generate_measure_candidates(self) -> list | None:
        """The next batch of candidates to measure; None when the search is over."""
        return self._need("search_strategy").generate_measure_candidates()

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self._need("search_strategy").notify_runner_results(measure_candidates, results)

    def clone(self) -> "TuneContext":
        """A context for the same task, with clones of its space and strategy and a seed forked."""
        def copy(part: Any) -> Any:
            return part.clone() if part is not None and hasattr(part, "clone") else part

        return TuneContext(self.mod, self.target, copy(self.space_generator), copy(self.search_strategy),
                           self.task_name, self.fork_seed(), self.num_threads, self.logger, self.constant_params)
