"""EvolutionarySearch with stand-ins for the space, the postprocessors and the cost model: a fixed
seed gives the same batches, every candidate is valid and new (never one the database holds or
one picked before), and the picks lean to what the cost model scores high."""
from __future__ import annotations

import numpy as np
import pytest
from tune_search_space import computes_matmul_relu, matmul_relu, replay, stochastic_space

from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.tune.database import MemoryDatabase, TuningRecord
from tvms.lowering.tune.evolutionary_search import EvolutionarySearch
from tvms.lowering.tune.measure import RunnerResult
from tvms.lowering.tune.tune_context import TuneContext
from tvms.lowering.tune.xgb_model import XGBModel


def unroll_depth(sch: Schedule) -> int:
    inst = next(i for i in sch.trace.insts if i.kind == "SampleCategorical")
    return inst.attrs[0][sch.trace.decisions[inst]]


def j_inner_tile(sch: Schedule) -> int:
    return [sch.trace.decisions[i] for i in sch.trace.insts if i.kind == "SamplePerfectTile"][1][-1]


class Space:
    """A ScheduleFn stand-in: the stochastic schedule (the scaling left at the root, to keep
    replays quick), a postprocessor that rejects unroll depth 512, the llvm mutators."""

    mutator_probs = {"MutateTileSize": 0.9, "MutateComputeLocation": 0.05, "MutateUnroll": 0.03,
                     "MutateParallel": 0.02}  # by name, as the default space gives them

    def __init__(self) -> None:
        self.postprocs = [lambda sch: unroll_depth(sch) != 512]

    def generate_design_space(self, mod):
        return [stochastic_space(Schedule(mod, seed=0), place_scaling=False)]


class InnerTileModel:
    """A cost-model stand-in that prefers a wide innermost j tile."""

    def predict(self, context, candidates):
        return np.array([float(j_inner_tile(c.sch)) for c in candidates])


def search_batches(seed: int, database: MemoryDatabase, rounds: int = 2) -> list[list[Schedule]]:
    strategy = EvolutionarySearch(population_size=10, init_min_unmeasured=8, genetic_num_iters=2, eps_greedy=0.25)
    ctx = TuneContext(matmul_relu(), "llvm -num-cores=2", Space(), strategy, rand_state=seed)
    ctx.pre_tuning(max_trials=4 * rounds, num_trials_per_iter=4, database=database, cost_model=InnerTileModel())
    batches = []
    while (candidates := ctx.generate_measure_candidates()) is not None:
        batches.append([c.sch for c in candidates])
        ctx.notify_runner_results(candidates, [RunnerResult([1e-3]) for _ in candidates])
    ctx.post_tuning()
    return batches


def test_evolutionary_search_gives_new_valid_candidates_reproducibly() -> None:
    database = MemoryDatabase()
    workload = database.commit_workload(matmul_relu())
    old = []
    for seed in range(3):  # measured in an earlier run: not to be measured again
        sch = stochastic_space(Schedule(matmul_relu(), seed=100 + seed), place_scaling=False)
        old.append(sch)
        database.commit_tuning_record(TuningRecord(sch.trace, workload, [1e-3]))
    batches = search_batches(seed=1, database=database)
    assert [len(b) for b in batches] == [4, 4]
    picked = [sch for batch in batches for sch in batch]
    scripts = [sch.mod.script() for sch in picked]
    assert len(set(scripts)) == len(scripts)  # never the same module twice
    assert not set(scripts) & {sch.mod.script() for sch in old}
    for sch in picked:  # each is its trace replayed and post-processed, and it passed the postprocessor
        assert sch.trace.insts[-1].kind == "EnterPostproc" and unroll_depth(sch) != 512
        assert replay(sch.trace).mod.script() == sch.mod.script()
    assert computes_matmul_relu(picked[0].mod)
    # the model's favourites come first: the best-scored picks have wide inner tiles
    assert np.mean([j_inner_tile(s) for s in batches[0][:3]]) >= 8
    # the same seed, the same batches
    again = search_batches(seed=1, database=database, rounds=1)
    assert [s.mod.script() for s in again[0]] == scripts[:4]


def test_too_few_valid_samples_stop_the_search_with_a_warning(caplog) -> None:
    """As TVM's: when the spaces give fewer valid samples than ``init_min_unmeasured`` (here the
    postprocessor rejects all), the search stops, and the task's log says why."""
    space = Space()
    space.postprocs = [lambda sch: False]
    strategy = EvolutionarySearch(population_size=4, init_min_unmeasured=2, max_fail_count=1)
    ctx = TuneContext(matmul_relu(), "llvm -num-cores=2", space, strategy, rand_state=0)
    ctx.pre_tuning(max_trials=4, num_trials_per_iter=4, database=MemoryDatabase(), cost_model=InnerTileModel())
    assert ctx.generate_measure_candidates() is None
    assert "Cannot sample enough initial population (0 valid candidate(s), 2 wanted)" in caplog.text


@pytest.mark.slow
def test_search_with_the_learned_model_finds_what_the_timer_rewards() -> None:
    """Measure (synthetically: time falls with the inner j tile), record, update the model, and
    again: after one batch the XGBModel steers the search to the widest tile."""
    strategy = EvolutionarySearch(population_size=32, init_min_unmeasured=16)
    ctx = TuneContext(matmul_relu(), "llvm -num-cores=2", Space(), strategy, rand_state=0)
    model, database = XGBModel(num_warmup_samples=8, backend="numpy"), MemoryDatabase()
    workload = database.commit_workload(matmul_relu())
    ctx.pre_tuning(max_trials=48, num_trials_per_iter=16, database=database, cost_model=model)
    widths, scripts = [], set()
    while (candidates := ctx.generate_measure_candidates()) is not None:
        scripts |= {c.sch.mod.script() for c in candidates}
        results = [RunnerResult([1e-3 / j_inner_tile(c.sch)]) for c in candidates]
        model.update(ctx, candidates, results)
        for c, r in zip(candidates, results):
            database.commit_tuning_record(TuningRecord(c.sch.trace, workload, r.run_secs))
        ctx.notify_runner_results(candidates, results)
        widths.append(np.mean([j_inner_tile(c.sch) for c in candidates]))
    assert len(widths) == 3 and widths[0] < 8 and widths[2] >= 12
    assert len(scripts) == 48  # and never one module twice
