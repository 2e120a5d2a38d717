"""Seed 002's schedules (schedule_mm, stochastic_schedule_mm, and the step-by-step walk) give the
seed's printed modules and traces; the traces it printed replay."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms.runtime.reference import run_prim_func
from tvms.tir import Schedule, apply_trace_text

SEEDS = FIXTURES / "seeds"
GOLDEN = FIXTURES / "schedule"


def my_module() -> tvms.IRModule:
    return tvms.script.from_source((SEEDS / "input" / "seed002_mymodule_matmul.tvms").read_text())


def legacy(name: str) -> str:
    """The seed's printed module, in tvms's canonical classic text."""
    return tvms.script.from_source((SEEDS / "legacy" / f"seed002_{name}.tvms").read_text()).script()


def schedule_mm(sch: Schedule, jfactor: int = 4) -> Schedule:  # as written in the seed
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_0, j_1 = sch.split(loop=j, factors=[None, jfactor])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def stochastic_schedule_mm(sch: Schedule) -> Schedule:  # as written in the seed
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def test_schedule_mm_prints_the_seeds_module_and_trace() -> None:
    sch = schedule_mm(Schedule(my_module()))
    assert sch.mod.script() == legacy("matmul_scheduled")
    assert str(sch.trace) == (GOLDEN / "seed002_schedule_mm.trace.py").read_text()


@pytest.mark.parametrize("trace", ["seed002_schedule_mm", "seed002_stochastic_schedule_mm"])
def test_the_seeds_printed_trace_replays_to_its_module(trace: str) -> None:
    text = (GOLDEN / f"{trace}.trace.py").read_text()
    sch = Schedule(my_module())
    apply_trace_text(text, sch)
    assert sch.mod.script() == legacy("matmul_scheduled")
    assert str(sch.trace) == text


def test_step_by_step_walk_of_the_seed() -> None:
    sch = Schedule(my_module())
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2, decision=[8, 16])
    assert str(sch.trace) == (GOLDEN / "seed002_sampled.trace.py").read_text()
    assert sch.mod.script() == legacy("matmul_sampled_unchanged")
    assert [sch.get(v) for v in j_factors] == [8, 16]
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    assert str(sch.trace) == (GOLDEN / "seed002_sampled_split_reorder.trace.py").read_text()
    assert sch.mod.script() == legacy("matmul_split_reorder")
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    assert sch.mod.script() == legacy("matmul_split_reorder_decomposed")


def test_stochastic_schedule_mm_draws_perfect_tiles_and_keeps_the_result() -> None:
    rng = np.random.default_rng(2)
    a = rng.random((128, 128), dtype=np.float32)
    b = rng.random((128, 128), dtype=np.float32)
    decisions = set()
    for seed in range(12):
        sch = stochastic_schedule_mm(Schedule(my_module(), seed=seed))
        outer, inner = sch.trace.decisions[sch.trace.insts[2]]
        assert outer * inner == 128 and inner <= 16
        decisions.add((outer, inner))
        again = stochastic_schedule_mm(Schedule(my_module(), seed=seed))  # same seed, same draw
        assert again.mod.script() == sch.mod.script()
        assert f"decision=[{outer}, {inner}]" in str(sch.trace)
        if seed < 3:
            c = np.zeros((128, 128), dtype=np.float32)
            run_prim_func(sch.mod["main"], a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    assert len(decisions) > 1


def test_seed004_te_matmul_binds_threads() -> None:
    """Seed 004 builds its matmul with TE, then splits and binds it to GPU threads."""
    from tvms import te

    n = 16
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    mod = tvms.IRModule({"main": te.create_prim_func([A, B, C])})
    assert mod.script(dialect="tvm-0.27") == (GOLDEN / "te_matmul_00_base.tvms").read_text()
    sch = Schedule(mod)
    block = sch.get_block("C", func_name="main")
    i, j = sch.get_loops(block)[:2]
    io, ii = sch.split(i, factors=[None, 4])
    jo, ji = sch.split(j, factors=[None, 4])
    for loop, axis in ((io, "blockIdx.x"), (jo, "blockIdx.y"), (ii, "threadIdx.x"), (ji, "threadIdx.y")):
        sch.bind(loop, axis)
    assert sch.mod.script(dialect="tvm-0.27") == (GOLDEN / "te_seed004_bind.tvms").read_text()
    a, b = np.random.default_rng(0).random((2, n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    run_prim_func(sch.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
