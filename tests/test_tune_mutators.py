"""Mutators change one sampling decision of a trace into another the sampler could have made:
every mutated trace replays on the task's module and still computes relu((2 * A) @ B)."""
from __future__ import annotations

import random
from math import prod

import pytest
from conftest import FIXTURES

from tune_search_space import computes_matmul_relu, design_space, matmul_relu, replay

import tvms
from tvms.ir.errors import TVMSError
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune.mutate_compute_location import MutateComputeLocation
from tvms.lowering.tune.mutate_parallel import MutateParallel, fused_loops
from tvms.lowering.tune.mutate_thread_binding import MutateThreadBinding
from tvms.lowering.tune.mutate_tile_size import MutateTileSize, move_factor
from tvms.lowering.tune.mutate_unroll import MutateUnroll
from tvms.lowering.tune.mutator import Mutator, as_mutator
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.rule_auto_bind import AutoBind
from tvms.lowering.tune.rule_cross_thread_reduction import CrossThreadReduction
from tvms.lowering.tune.tune_context import TuneContext


def decisions(trace, kind):
    return [trace.decisions[i] for i in trace.insts if i.kind == kind]


def annotated_parallel(trace):
    return [i.inputs[1] for i in trace.insts if i.kind == "Annotate" and i.attrs[0] == "meta_schedule.parallel"]


def test_mutated_traces_change_one_decision_replay_and_compute() -> None:
    """The four mutators in turn on one trace of the space, each on the previous one's result."""
    ctx = TuneContext(matmul_relu(), "llvm -num-cores=2", rand_state=3)
    rng = random.Random(7)
    changed = {  # what each mutator changes, read off a trace
        MutateTileSize: lambda t: decisions(t, "SamplePerfectTile"),
        MutateComputeLocation: lambda t: decisions(t, "SampleComputeLocation"),
        MutateUnroll: lambda t: decisions(t, "SampleCategorical"),
        MutateParallel: annotated_parallel,
    }
    mutators = [cls() for cls in changed]
    for mutator in mutators:
        mutator._initialize_with_tune_context(ctx)
    trace, modules, mutated_by = design_space(seed=5).trace, set(), set()
    for step in range(16):
        mutator = mutators[step % 4]
        mutated = mutator.apply(trace, rng)
        if mutated is None:  # e.g. a picked tiling [1, 16] with nowhere to move a factor
            continue
        read = changed[type(mutator)]
        assert read(mutated) != read(trace)
        sch = replay(mutated, seed=step)  # replays with the mutated decisions, none drawn again
        assert {(i.kind, str(d)) for i, d in sch.trace.decisions.items()} == \
            {(i.kind, str(d)) for i, d in mutated.decisions.items()}
        for inst in mutated.insts:
            if inst.kind == "SamplePerfectTile":
                tiles = mutated.decisions[inst]
                assert prod(tiles) == 64 and tiles[-1] <= inst.attrs[1]
        modules.add(sch.mod.script())
        mutated_by.add(type(mutator))
        trace = mutated
    assert mutated_by == set(changed) and len(modules) > 8
    assert computes_matmul_relu(sch.mod)


def test_mutators_return_none_when_the_trace_has_nothing_to_mutate() -> None:
    ctx = TuneContext(matmul_relu(), "llvm -num-cores=2", rand_state=0)
    bare = Trace()
    for mutator in Mutator.create("llvm"):
        mutator._initialize_with_tune_context(ctx)
        assert mutator.apply(bare, random.Random(0)) is None


def test_move_factor_keeps_the_product_and_the_innermost_limit() -> None:
    rng = random.Random(1)
    for _ in range(200):
        tiles = move_factor([4, 4, 4], 8, rng)
        assert prod(tiles) == 64 and tiles[-1] <= 8 and tiles != [4, 4, 4]
    assert move_factor([16, 1], 1, rng) is None  # nothing fits into the innermost
    # TVM's plan rule: the loops whose product stays within the limit, and one more
    assert fused_loops([[4, 64, 4096]], 64) == (2,)
    assert fused_loops([[4, 64, 4096]], 100) == (3,)
    assert fused_loops([[4, 64]], 4096) == (2,)


def test_default_mutators_are_tvms() -> None:
    probs = {type(m).__name__: p for m, p in Mutator.create("llvm").items()}
    assert probs == {"MutateTileSize": 0.9, "MutateComputeLocation": 0.05, "MutateUnroll": 0.03,
                     "MutateParallel": 0.02}
    probs = {type(m).__name__: p for m, p in Mutator.create("cuda").items()}
    assert probs == {"MutateTileSize": 0.9, "MutateUnroll": 0.08, "MutateThreadBinding": 0.02}
    assert isinstance(as_mutator("MutateUnroll"), MutateUnroll)
    with pytest.raises(TVMSError, match="unknown mutator 'MutateThreads'"):
        as_mutator("MutateThreads")
    with pytest.raises(TVMSError, match="no default mutators for target kind 'rocm'"):
        Mutator.create("rocm")


def test_thread_binding_mutator_draws_another_sampled_thread_count() -> None:
    """On the CrossThreadReduction sketch of a row sum (the reduction split by a sampled thread
    count bound to threadIdx.x): only that count changes, to another candidate, and the trace
    replays to a schedule with that many threads; a trace without such a binding gives None."""
    row_sum = tvms.script.from_source((FIXTURES / "meta_schedule" / "row_sum.tvms").read_text())
    space = PostOrderApply(sch_rules=[CrossThreadReduction([4, 8, 16, 32, 64, 128, 256, 512])], postprocs=[],
                           mutator_probs={})
    target = "cuda -max_threads_per_block=1024 -thread_warp_size=32"
    sketch = TuneContext(tvms.IRModule({"main": row_sum}), target, space, rand_state=0).generate_design_space()[-1]
    (sample,) = [i for i in sketch.trace.insts if i.kind == "SampleCategorical"]
    mutator, rng = MutateThreadBinding(), random.Random(0)
    seen = set()
    for _ in range(12):
        mutated = mutator.apply(sketch.trace, rng)
        assert mutated.decisions[sample] != sketch.trace.decisions[sample]
        assert {i: d for i, d in mutated.decisions.items() if i is not sample} == \
            {i: d for i, d in sketch.trace.decisions.items() if i is not sample}
        threads = sample.attrs[0][mutated.decisions[sample]]
        sch = Schedule(tvms.IRModule({"main": row_sum}))
        mutated.apply_to_schedule(sch, remove_postproc=True)
        assert f'T.thread_binding({threads}, thread="threadIdx.x")' in sch.mod.script()
        seen.add(threads)
    assert len(seen) > 3
    assert mutator.apply(design_space(seed=5).trace, rng) is None  # (the llvm space binds no threads)
    # TVM's own case: AutoBind's blockIdx.x / threadIdx.x split of an element-wise loop, drawn
    # at 256 (decision 3), goes to each of the other five counts
    element_wise = tvms.script.from_source((FIXTURES / "meta_schedule" / "bind_element_wise.tvms").read_text())
    space = PostOrderApply(sch_rules=[AutoBind()], postprocs=[], mutator_probs={})
    (sketch,) = TuneContext(element_wise, "cuda -max_threads_per_block=1024", space, rand_state=0).generate_design_space()
    (sample,) = [i for i in sketch.trace.insts if i.kind == "SampleCategorical"]
    trace = sketch.trace.with_decision(sample, 3, remove_postproc=True)
    assert {mutator.apply(trace, rng).decisions[sample] for _ in range(100)} == {0, 1, 2, 4, 5}


def test_compute_location_moves_to_places_numbered_as_the_sampler_does() -> None:
    """B's places are inlined, the root, and C's loops i (0) and j (2): the unit loop (1) is none."""
    mod = tvms.script.from_source('''
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8))
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, u, j in T.grid(16, 1, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
''')
    sch = Schedule(mod, seed=0)
    block = sch.get_block("B")
    assert list(sch.compute_location_places(block)) == [-2, -1, 0, 2]
    sch.compute_at(block, sch.sample_compute_location(block, decision=2))
    mutator = MutateComputeLocation()
    mutator._initialize_with_tune_context(TuneContext(mod, "llvm -num-cores=2", rand_state=0))
    rng = random.Random(0)
    moved = {decisions(mutator.apply(sch.trace, rng), "SampleComputeLocation")[0] for _ in range(40)}
    assert moved == {-2, -1, 0}
