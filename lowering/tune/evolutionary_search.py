"""EvolutionarySearch: TVM's search strategy of sampling, mutating and picking by a cost model.

Each round (``generate_measure_candidates``):

1. an initial population: the best measured traces of the database, replayed, and fresh samples
   of the design spaces (their decisions drawn again);
2. ``genetic_num_iters`` generations: the cost model scores the population; each member of the
   next one is a member drawn in proportion to its score, mutated (with ``genetic_mutate_prob``,
   a mutator drawn by the space's ``mutator_probs``) or kept; every candidate is replayed and
   post-processed, and those a post-processor rejects are dropped;
3. the best-scored candidates not measured yet, with an ``eps_greedy`` share of fresh samples,
   are the next batch. A module is measured at most once (modules are told apart by structural
   hash and equality).
"""
from __future__ import annotations

import heapq
import random
from typing import Any

import numpy as np

from ...ir.errors import TVMSError
from ...ir.module import IRModule
from ...ir.structural import structural_equal
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace
from .measure import MeasureCandidate, args_info_of, main_func
from .module_hash import module_hash
from .mutator import Mutator, as_mutator
from .postproc_verify_gpu_code import postprocs_precheck
from .search_strategy import SearchStrategy, decisions_key
from .tune_context import task_logger


REPLAY_CACHE_SIZE = 8192


class ModuleSet:
    """Modules told apart by structural hash (``module_hash``), then structural equality."""

    def __init__(self) -> None:
        self._by_hash: dict[int, list[IRModule]] = {}

    def add(self, mod: IRModule) -> bool:
        """Add ``mod``; False when an equal module is already in."""
        same = self._by_hash.setdefault(module_hash(mod), [])
        if any(structural_equal(mod, m) for m in same):
            return False
        same.append(mod)
        return True

    def __contains__(self, mod: IRModule) -> bool:
        return any(structural_equal(mod, m) for m in self._by_hash.get(module_hash(mod), []))

    def copy(self) -> "ModuleSet":
        other = ModuleSet()
        other._by_hash = {h: list(mods) for h, mods in self._by_hash.items()}
        return other


def apply_postproc(postproc: Any, sch: Schedule) -> bool:
    """A ``Postproc`` (its ``apply``) or a plain callable, on ``sch``."""
    return bool(postproc.apply(sch) if hasattr(postproc, "apply") else postproc(sch))


class EvolutionarySearch(SearchStrategy):
    """``EvolutionarySearch(population_size=512, init_measured_ratio=0.2, init_min_unmeasured=50,
    max_fail_count=5, genetic_num_iters=4, genetic_mutate_prob=0.85, genetic_max_fail_count=10,
    eps_greedy=0.05)`` as TVM's."""

    def __init__(self, *, population_size: int = 512, init_measured_ratio: float = 0.2,
                 init_min_unmeasured: int = 50, max_fail_count: int = 5, genetic_num_iters: int = 4,
                 genetic_mutate_prob: float = 0.85, genetic_max_fail_count: int = 10,
                 eps_greedy: float = 0.05) -> None:
        for name, p in (("init_measured_ratio", init_measured_ratio), ("genetic_mutate_prob", genetic_mutate_prob),
                        ("eps_greedy", eps_greedy)):
            if not 0.0 <= p <= 1.0:
                raise TVMSError(f"EvolutionarySearch: {name} is within [0, 1], got {p}")
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = eps_greedy
        self.num_empty_iters_before_early_stop = 5
        self.context = None
        self.postprocs: list = []
        self.mutator_probs: dict = {}
        self.rng = random.Random()
        self._state = None

    # ------------------------------------------------------------ the SearchStrategy interface
    def _initialize_with_tune_context(self, context: Any) -> None:
        """Take the postprocessors and mutator probabilities of the context's space generator
        (mutators or their class names; the target's defaults when it gives none) and a seed of
        the context's."""
        space = context.space_generator
        if space is None:
            raise TVMSError("EvolutionarySearch needs a TuneContext with a space generator")
        self.context = context
        self.postprocs = list(getattr(space, "postprocs", None) or [])
        probs = getattr(space, "mutator_probs", None)
        if not isinstance(probs, dict):  # none given (or "from-target" left unresolved)
            probs = Mutator.create(context.target.kind if context.target is not None else "llvm")
        self.mutator_probs = {as_mutator(m): float(p) for m, p in probs.items()}
        for mutator in self.mutator_probs:
            mutator._initialize_with_tune_context(context)
        self.rng = random.Random(context.fork_seed())
        self._state = None
        self._replayed: dict[str, Schedule | None] = {}  # decisions_key -> replayed and post-processed

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list,
                   database: Any = None, cost_model: Any = None) -> None:
        if self.context is None:
            raise TVMSError("EvolutionarySearch: initialize it with a TuneContext first")
        if not design_spaces:
            raise TVMSError("EvolutionarySearch: no design spaces to search")
        if database is None:
            raise TVMSError("EvolutionarySearch samples from the measured population: give it a database "
                            "(MemoryDatabase when nothing is to be kept)")
        if cost_model is None:
            raise TVMSError("EvolutionarySearch filters candidates with a cost model: give it one "
                            "(RandomModel when none is to be learned)")
        if self._state is not None:
            raise TVMSError("EvolutionarySearch: pre_tuning was called twice without post_tuning")
        self._replayed = {}
        self._state = _State(self, max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        return self._need_state().generate_measure_candidates()

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self._need_state().trials_done += len(results)

    def post_tuning(self) -> None:
        self._need_state()
        self._state = None

    def clone(self) -> "EvolutionarySearch":
        other = EvolutionarySearch(
            population_size=self.population_size, init_measured_ratio=self.init_measured_ratio,
            init_min_unmeasured=self.init_min_unmeasured, max_fail_count=self.max_fail_count,
            genetic_num_iters=self.genetic_num_iters, genetic_mutate_prob=self.genetic_mutate_prob,
            genetic_max_fail_count=self.genetic_max_fail_count, eps_greedy=self.eps_greedy)
        other.context, other.postprocs = self.context, list(self.postprocs)
        other.mutator_probs = {m.clone(): p for m, p in self.mutator_probs.items()}
        other.rng.setstate(self.rng.getstate())
        return other

    def _need_state(self) -> "_State":
        if self._state is None:
            raise TVMSError("EvolutionarySearch: call pre_tuning first")
        return self._state

    # ------------------------------------------------------------ the steps, on a given population
    def candidates(self, schedules: list[Schedule]) -> list[MeasureCandidate]:
        args_info = args_info_of(main_func(self.context.mod))
        return [MeasureCandidate(sch, list(args_info)) for sch in schedules]

    def replay(self, trace: Trace) -> Schedule | None:
        """``trace`` replayed on the task's module (decisions it lacks drawn afresh) and
        post-processed; None when the replay fails or a postprocessor rejects it."""
        sch = Schedule(self.context.mod, seed=self.rng.randrange(1 << 31))
        try:
            # (VerifyGPUCode's checks run during the replay, where it is a postprocessor)
            check = postprocs_precheck(self.postprocs, sch)
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=check)
            sch.enter_postproc()
            if all(apply_postproc(p, sch) for p in self.postprocs):
                return sch
        except TVMSError:
            pass
        return None

    def replay_decided(self, trace: Trace) -> Schedule | None:
        """``replay`` of a trace that carries all its decisions, once per tuning run: mutations
        often give a trace met before (a quarter of one round's, on a 64x64 matmul), and the
        replay and postprocessors are most of a round's cost."""
        key = decisions_key(trace)
        if key not in self._replayed:
            if len(self._replayed) >= REPLAY_CACHE_SIZE:
                self._replayed.pop(next(iter(self._replayed)))
            self._replayed[key] = self.replay(trace)
        return self._replayed[key]

    def sample_init_population(self, design_spaces: list[Trace], num: int) -> list[Schedule]:
        """Up to ``num`` fresh samples of the spaces; rounds of ``num`` tries go on while fewer than
        ``init_min_unmeasured`` came out, until ``max_fail_count`` rounds gave nothing."""
        found: list[Schedule] = []
        fails = 0
        while len(found) < self.init_min_unmeasured and fails < self.max_fail_count:
            new = [sch for sch in (self.replay(Trace(self.rng.choice(design_spaces).insts, {}))
                                   for _ in range(num)) if sch is not None]
            found.extend(new)
            fails += not new
        return found

    def evolve_with_cost_model(self, population: list[Schedule], num: int, cost_model: Any,
                               measured: ModuleSet, recorded: frozenset = frozenset()) -> list[Schedule]:
        """The ``num`` best-scored candidates seen over the generations, best first, leaving out
        the modules in ``measured`` and the traces in ``recorded`` (``decisions_key``s)."""
        seen = measured.copy()
        best: list = []  # a min-heap of (score, tiebreak, schedule): the worst kept on top
        mutators = list(self.mutator_probs)
        total = sum(self.mutator_probs.values())
        weights = ([1.0 - self.genetic_mutate_prob] +
                   [self.genetic_mutate_prob * p / total for p in self.mutator_probs.values()]
                   if total > 0 else [1.0] + [0.0] * len(mutators))
        for generation in range(self.genetic_num_iters + 1):
            scores = np.maximum(0.0, np.asarray(cost_model.predict(self.context, self.candidates(population)),
                                                dtype="float64"))
            for sch, score in zip(population, scores):
                if seen.add(sch.mod) and decisions_key(sch.trace) not in recorded:
                    item = (float(score), self.rng.random(), sch)
                    if len(best) < num:
                        heapq.heappush(best, item)
                    elif item > best[0]:
                        heapq.heapreplace(best, item)
            if generation == self.genetic_num_iters:
                break
            population = self._next_generation(population, scores, mutators, weights)
        return [sch for _, _, sch in sorted(best, key=lambda item: item[:2], reverse=True)]

    def _next_generation(self, population: list[Schedule], scores: np.ndarray, mutators: list,
                         weights: list) -> list[Schedule]:
        parent_weights = scores if scores.sum() > 0 else None  # all zero: draw uniformly
        kept: set[int] = set()  # a member is carried over unmutated once at most
        offspring = []
        for _ in range(self.population_size):
            child = None
            for _ in range(self.genetic_max_fail_count + 1):
                parent = self.rng.choices(range(len(population)), weights=parent_weights)[0]
                mutator = self.rng.choices([None] + mutators, weights=weights)[0]
                if mutator is None:
                    if parent not in kept:
                        kept.add(parent)
                        child = population[parent]
                        break
                    continue
                trace = mutator.apply(population[parent].trace, self.rng)
                child = None if trace is None else self.replay_decided(trace)
                if child is not None:
                    break
            offspring.append(child if child is not None else population[parent])
        return offspring

    def pick_with_eps_greedy(self, unmeasured: list[Schedule], bests: list[Schedule], num: int,
                             measured: ModuleSet) -> list[Schedule]:
        """``num`` picks: the best first, an ``eps_greedy`` share of random fresh samples last,
        each module not measured yet (and marked measured)."""
        num_bests = num - int(num * self.eps_greedy)
        rands = self.rng.sample(unmeasured, len(unmeasured))
        picks = []
        for i in range(num):
            first, second = (bests, rands) if i < num_bests else (rands, bests)
            source = first if first else second
            if not source:
                break
            sch = source.pop(0)
            if measured.add(sch.mod):
                picks.append(sch)
        return picks


class _State:
    """One tuning run of the strategy, between pre_tuning and post_tuning."""

    def __init__(self, search: EvolutionarySearch, max_trials: int, num_trials_per_iter: int,
                 design_spaces: list, database: Any, cost_model: Any) -> None:
        self.search = search
        self.max_trials = max_trials
        self.num_trials_per_iter = num_trials_per_iter
        self.trials_done = 0
        self.num_empty_iters = 0
        self.design_spaces = [Trace(sch.trace._kept(remove_postproc=True), {}) if isinstance(sch, Schedule)
                              else sch for sch in design_spaces]
        self.database = database
        self.cost_model = cost_model
        self.workload = database.commit_workload(search.context.mod)
        # modules measured in this run, and traces the database holds (from earlier runs: resumed
        # tuning measures none of them again)
        self.measured = ModuleSet()
        self.recorded = {decisions_key(r.trace) for r in database.get_all_tuning_records()
                         if r.workload == self.workload}

    def replay_record(self, record: Any) -> Schedule | None:
        """A measured record's trace replayed, its module marked measured."""
        sch = self.search.replay_decided(record.trace)
        if sch is not None:
            self.measured.add(sch.mod)
        return sch

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        search = self.search
        if self.trials_done >= self.max_trials:
            return None
        num = min(self.num_trials_per_iter, self.max_trials - self.trials_done)
        pop = search.population_size
        measured = [sch for sch in map(self.replay_record, self.database.get_top_k(
            self.workload, int(pop * search.init_measured_ratio))) if sch is not None]
        unmeasured = search.sample_init_population(self.design_spaces, pop - len(measured))
        if len(unmeasured) < search.init_min_unmeasured:  # (the spaces give too few valid samples to search)
            task_logger(search.context).warning(
                "Cannot sample enough initial population (%d valid candidate(s), %d wanted): the evolutionary "
                "search stops", len(unmeasured), search.init_min_unmeasured)
            return None
        bests = search.evolve_with_cost_model(measured + unmeasured, num, self.cost_model, self.measured,
                                              self.recorded)
        fresh = [sch for sch in unmeasured if decisions_key(sch.trace) not in self.recorded]
        picks = search.pick_with_eps_greedy(fresh, bests, num, self.measured)
        if not picks:
            self.num_empty_iters += 1
            if self.num_empty_iters >= search.num_empty_iters_before_early_stop:
                return None
        return search.candidates(picks)
