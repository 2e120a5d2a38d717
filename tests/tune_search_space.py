"""A small tuning task for the search tests: relu((2 * A) @ B) on 64x64 matrices, and a stochastic
schedule of it that samples every kind of decision the mutators change (tilings, where the
scaling goes, an unroll depth) and carries a ``meta_schedule.parallel`` annotation."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import tvms
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.runtime.reference import run_prim_func

MATMUL_RELU = '''
# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), D: T.Buffer((64, 64), "float32")):
    P = T.alloc_buffer((64, 64))
    C = T.alloc_buffer((64, 64))
    for i, k in T.grid(64, 64):
        with T.block("P"):
            vi, vk = T.axis.remap("SS", [i, k])
            P[vi, vk] = A[vi, vk] * T.float32(2)
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + P[vi, vk] * B[vk, vj]
    for i, j in T.grid(64, 64):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
'''


@lru_cache(maxsize=None)
def matmul_relu() -> tvms.IRModule:
    return tvms.script.from_source(MATMUL_RELU)


def stochastic_space(sch: Schedule, place_scaling: bool = True) -> Schedule:
    """Tile the matmul i/j in three and k in two, place the scaling by sample_compute_location,
    and annotate the root as the CPU rules do (parallel extent, sampled unroll depth).
    ``place_scaling=False`` leaves the scaling at the root (sample_compute_location is the
    slowest instruction to replay)."""
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, sch.sample_perfect_tile(i, n=3, max_innermost_factor=16))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=16))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    if place_scaling:
        p = sch.get_block("P")
        sch.compute_at(p, sch.sample_compute_location(p))
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", 64)
    sch.annotate(root, "meta_schedule.unroll_explicit", sch.sample_categorical([0, 16, 64, 512], [0.25] * 4))
    return sch


def design_space(seed: int = 0, place_scaling: bool = True) -> Schedule:
    return stochastic_space(Schedule(matmul_relu(), seed=seed), place_scaling)


def replay(trace: Trace, seed: int = 0) -> Schedule:
    """``trace`` replayed on the task's module (post-processing left out)."""
    sch = Schedule(matmul_relu(), seed=seed)
    trace.apply_to_schedule(sch, remove_postproc=True)
    return sch


def inputs(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    return a, b, np.maximum((2 * a) @ b, 0)


def computes_matmul_relu(mod: tvms.IRModule) -> bool:
    """Whether ``mod``'s main gives relu((2 * A) @ B) on the reference executor."""
    a, b, expected = inputs()
    d = np.zeros((64, 64), "float32")
    run_prim_func(mod["main"], a, b, d)
    return np.allclose(d, expected, rtol=1e-4, atol=1e-4)
