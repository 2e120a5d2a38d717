"""The "tiles" tuning space under cuda (MatmulTiles: one candidate per shape of the large matmul
plans, ``simt_variants`` and ``warp_variants``): which shapes, that each computes what numpy
computes (lowered for cuda, in the reference executor), and that the branches replay from their
traces, pass the cuda postprocessors and compile with NVRTC."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dlight_gpu_matmul_large import (SM90, assert_computes_as_numpy, by_rule, forced_plan, kernel_source,
                                          matmul, module)

from cuda_support import assert_compiles, ptxas_usage
from tune_standins import Future

from tvms.ir.errors import TVMSError
from tvms.ir.stmt import DeclBuffer
from tvms.ir.visitor import walk
from tvms.ir.module import IRModule
from tvms.ir.structural import structural_equal
from tvms.ir.target import Target
from tvms.lowering.dlight.gpu_matmul_large import LargeMatmul, SimtTiles, simt_variants
from tvms.lowering.dlight.gpu_matmul_tensorcore import (LARGE_F16_WARP_TILES, TVM_WARP_TILES, WIDE_F16_WARP_TILES, WarpTiles,
                                                        warp_variants)
from tvms.lowering.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.lowering.tune.measure import BuilderResult, RunnerResult
from tvms.lowering.tune.postproc_verify_gpu_code import shared_memory_bytes
from tvms.lowering.tune.rule_conv_register_tile import ConvRegisterTile
from tvms.lowering.tune.rule_matmul_tiles import MatmulTiles
from tvms.lowering.tune.tile_space import tile_space
from tvms.lowering.tune.tune import tune_tir
from tvms.lowering.tune.tune_context import TuneContext
from tvms.lowering.transform import PassContext

# (a GPU's limits, as Target.from_device gives them; 48 KiB of shared memory, as TVM reads it)
GPU = SM90 + " -max_threads_per_block=1024 -max_shared_memory_per_block=49152 -thread_warp_size=32"


def test_simt_variants_start_with_dlights_plan_and_copy_whole_vectors():
    variants = simt_variants(LargeMatmul("float32", "float32", 4096, 4096, 4096))
    assert variants[0] == SimtTiles() and SimtTiles().tile == (64, 128) and len(set(variants)) == len(variants) == 36
    assert all(v.copies_evenly and max(v.tile) <= 256 for v in variants)
    assert max(v.virtual[0] * v.virtual[1] for v in variants) == 8  # (8 x 16 outputs a thread at most)
    # rows and columns in whole tiles: 17 tiles of 128 rows take none of 256
    assert all(v.tile[0] <= 128 for v in simt_variants(LargeMatmul("float32", "float32", 4096, 2176, 4096)))
    assert {v.k_step for v in simt_variants(LargeMatmul("float32", "float32", 8))} == {8}
    assert simt_variants(LargeMatmul("float16", "float16", 4096)) == []


def test_warp_variants_start_with_the_large_plans_and_bound_the_accumulators():
    half, single = warp_variants("float16"), warp_variants("float32")
    assert half[0] == WIDE_F16_WARP_TILES and single[0] == TVM_WARP_TILES and WIDE_F16_WARP_TILES.block_tile == (128, 256)
    narrow = warp_variants("float16", cols=384)  # (columns not in whole 256s: 4 warps of 64 x 64 first)
    assert narrow[0] == LARGE_F16_WARP_TILES and sorted(map(repr, narrow)) == sorted(map(repr, half))
    assert len(half) == 15 and len(single) == 10  # (float32: at most 8 accumulators a warp)
    # (16 warps may have 128 registers a thread: 4 x 4 float16 tiles, or 4 x 2 float32 ones, would spill)
    assert WarpTiles((4, 4), (4, 2)) in half and WarpTiles((4, 4), (4, 4)) not in half
    assert WarpTiles((4, 4), (2, 2)) in single and WarpTiles((4, 4), (4, 2)) not in single
    assert all(v.tiles[0] * v.tiles[1] <= 8 for v in single) and LARGE_F16_WARP_TILES.block_tile == (128, 128)
    assert not any(v.async_copy for v in half + single)
    both = warp_variants("float16", async_copy=True)
    assert both[::2] == half and both[1::2] == [replace(v, async_copy=True) for v in half]


@pytest.mark.parametrize("shape, out", [
    (SimtTiles(), "float32"), (SimtTiles((16, 16), (2, 4), 16), "float32"), (SimtTiles((8, 16), (4, 2)), "float32"),
    (WIDE_F16_WARP_TILES, "float16"), (LARGE_F16_WARP_TILES, "float16"), (WarpTiles((4, 4), (4, 2)), "float16"),
    (WarpTiles((2, 2), (4, 2)), "float32"),
], ids=str)
def test_the_largest_shapes_keep_their_accumulators_in_registers(shape, out):
    """DLight's plans and the largest of their neighbours (8 x 16 outputs a thread; 16 warps of 4 x
    2 float16 tiles, at the 128 registers a thread of 512 may have) compile for sm_90 without
    spilling to local memory, as ptxas assembles the 4096^3 kernels: a spill would cost a memory
    round trip inside the loop of multiply-adds."""
    dtype = "float32" if isinstance(shape, SimtTiles) else "float16"
    scheduled = forced_plan(matmul(4096, 4096, 4096, dtype=dtype, out_dtype=out), dtype, shape)
    (_, spilled), = ptxas_usage(kernel_source(scheduled)).values()
    assert spilled == 0


# (each shape with the type it accumulates in)
SHAPES = [(s, "float32") for s in simt_variants(LargeMatmul("float32", "float32", 64, 256, 256))] \
    + [(w, out) for out in ("float16", "float32") for w in warp_variants(out, async_copy=True)]
ASYNC_COPY = {"tirx.use_async_copy": True}


@settings(max_examples=8, deadline=None)
@given(shape_out=st.sampled_from(SHAPES), b_layout=st.sampled_from(["kn", "nk"]), k_steps=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_drawn_shapes_compute_as_numpy(shape_out, b_layout, k_steps, seed):
    """A shape forced on a matmul of one or two of its blocks (two pipelined steps or more along
    k), lowered for cuda and run in the reference executor (virtual threads, the pipeline, WMMA)."""
    shape, out = shape_out
    if isinstance(shape, SimtTiles):
        dtype = "float32"
        (m, n), k = shape.tile, shape.k_step * (k_steps + 1)
    else:
        dtype = "float16"
        (m, n), k = shape.block_tile, 64 * k_steps
    n *= 2 if max(m, n) <= 128 else 1
    scheduled = forced_plan(matmul(m, n, k, b_layout, dtype, out_dtype=out), dtype, shape)
    with PassContext(config=ASYNC_COPY if getattr(shape, "async_copy", False) else {}):
        assert_computes_as_numpy(scheduled, m, n, k, b_layout, dtype, 0, "mk", out, seed, lowered_only=True)


@pytest.mark.parametrize("shape", [SimtTiles((16, 16), (2, 4), 16), SimtTiles((8, 16), (4, 2))],
                         ids=lambda s: f"{s.tile}_{s.threads}_k{s.k_step}")
@pytest.mark.parametrize("b_layout", ["kn", "nk"])
def test_shapes_of_8_by_16_outputs_a_thread_compute_as_numpy(shape, b_layout):
    """The float32 shapes with 4 x 2 (2 x 4) virtual threads of 4 x 4 outputs, lowered for cuda
    and run in the reference executor, two pipelined steps along k."""
    (m, n), k = shape.tile, 2 * shape.k_step
    scheduled = forced_plan(matmul(m, n, k, b_layout), "float32", shape)
    assert_computes_as_numpy(scheduled, m, n, k, b_layout, "float32", 0, "mk", "float32", 5, lowered_only=True)


# the commit groups, waits and barriers of the async plan's 128 x 256 x 192 kernel, as TVM 0.27
# lowers the same scheduled function for sm_90 under tirx.use_async_copy (its CUDA source, in
# order): two steps ahead, then one wait a step; no wait is left for the last step's negative count
TVM_ASYNC_SEQUENCE = "commit commit wait_1 sync sync commit wait_1 sync wait_0 sync sync sync"


@pytest.mark.parametrize("b_layout", ["kn", "nk"])
def test_the_async_plan_copies_with_cp_async_as_tvm_pipelines_it(b_layout):
    """Under ``tirx.use_async_copy`` the plan's copies of A and B are 16-byte ``cp.async``,
    committed and waited for where TVM does; NVRTC compiles the kernel for sm_80 and sm_90 and
    the lowered kernel computes what numpy computes. Without the option the copies are ordinary
    loads and stores (in the same commit groups, which then wait for nothing, as in TVM)."""
    shape = replace(LARGE_F16_WARP_TILES, async_copy=True)
    scheduled = forced_plan(matmul(128, 256, 192, b_layout, "float16"), "float16", shape)
    with PassContext(config=ASYNC_COPY):
        source = kernel_source(scheduled)
        assert_computes_as_numpy(scheduled, 128, 256, 192, b_layout, "float16", 0, "mk", "float16", 3,
                                 lowered_only=True)
    kernel = source[source.index("__global__"):]
    calls = re.findall(r"(ptx_cp_async_legacy_cg_16_2_2|async_commit_group|async_wait_group_-?\d+|__syncthreads)\(", kernel)
    words = {"async_commit_group": "commit", "__syncthreads": "sync", "ptx_cp_async_legacy_cg_16_2_2": "copy"}
    sequence = [words.get(c, c.replace("async_wait_group_", "wait_")) for c in calls]
    assert sequence.count("copy") == 3 * 2  # (A and B: the two steps ahead, then the loop's)
    assert " ".join(c for c in sequence if c != "copy") == TVM_ASYNC_SEQUENCE
    assert_compiles(source)
    assert "ptx_cp_async_legacy" not in kernel_source(scheduled)


def replays(ctx: TuneContext, sch: Schedule) -> bool:
    """Whether ``sch``'s trace, through its JSON form (as a database keeps it), rebuilds it."""
    trace = Trace.from_json(json.loads(json.dumps(sch.trace.as_json(remove_postproc=False))))
    replay = Schedule(ctx.mod)
    trace.apply_to_schedule(replay, remove_postproc=False)
    return structural_equal(replay.mod["main"], sch.mod["main"])


def context(text: str, target: str = GPU) -> TuneContext:
    return TuneContext(IRModule({"main": module(text)["mm"]}), Target(target), tile_space(target), "replay-trace", "mm", 1)


def design_space(text: str) -> tuple[TuneContext, list]:
    ctx = context(text)
    return ctx, ctx.space_generator.generate_design_space(ctx.mod)


@pytest.mark.parametrize("shape", [LARGE_F16_WARP_TILES, WIDE_F16_WARP_TILES, replace(LARGE_F16_WARP_TILES, async_copy=True)],
                         ids=str)
def test_verify_gpu_code_counts_the_staging_the_float16_plan_allocates(shape):
    """The shared memory VerifyGPUCode counts for a float16 tiling is what the cuda lowering
    places in dynamic shared memory, buffer by buffer: the staging read by the tensorized
    fragment loads (whole, not what one copy writes), its padded rows and its pipeline's
    versions (two, or three with cp.async), and the write-back stage. (The lowering then lets the
    write-back share the staging's memory, which the count leaves out: an upper bound.)"""
    scheduled = forced_plan(matmul(4096, 4096, 4096, dtype="float16"), "float16", shape)
    with PassContext(config=ASYNC_COPY if shape.async_copy else {}):
        lowered = lower_for_cuda(scheduled.with_attr("global_symbol", "main"), Target(SM90))
    placed = [n.buffer for name in lowered for n in walk(lowered[name].body) if isinstance(n, DeclBuffer)
              and n.buffer.scope == "shared.dyn" and str(n.buffer.dtype) == "float16"]
    assert len(placed) == 3
    assert shared_memory_bytes(scheduled) == sum(b.shape[0].value * 2 for b in placed)


@pytest.mark.parametrize("dtype, out_dtype, branches", [
    ("float32", "float32", 36), ("float16", "float16", 15), ("float16", "float32", 10)])
def test_a_large_matmul_gets_one_candidate_per_shape(dtype, out_dtype, branches):
    """Under cuda the tiles space branches a 4096^3 matmul into its plan's shapes, DLight's own
    among them, all distinct, left alone by TVM's rules; one replays from its trace's JSON (as
    the database keeps it; every one: the slow test below). Under the target's 48 KiB the cuda
    postprocessors pass every float32 one, of the float16 ones accumulating in float16 only the
    64 x 64 block's (its two staging buffers and its write-back stage take 45056 bytes), none
    accumulating in float32; under an H200's opted-in limit, all."""
    text = matmul(4096, 4096, 4096, dtype=dtype, out_dtype=out_dtype)
    ctx, spaces = design_space(text)
    assert len(spaces) == branches
    scripts = [s.mod["main"].script() for s in spaces]
    assert all('"schedule_rule": "None"' in s for s in scripts)
    assert not any(structural_equal(a.mod["main"], b.mod["main"]) for i, a in enumerate(spaces) for b in spaces[:i])
    assert kernel_source(by_rule(text)) in [kernel_source(s.mod["main"]) for s in spaces]
    assert replays(ctx, spaces[0])
    passed = [all(p.apply(s.copy()) for p in ctx.space_generator.postprocs) for s in spaces]
    assert sum(passed) == {("float32", "float32"): 36, ("float16", "float16"): 1, ("float16", "float32"): 0}[
        dtype, out_dtype]
    opted_in = context(text, GPU.replace("49152", "232448")).space_generator.postprocs
    assert all(all(p.apply(s.copy()) for p in opted_in) for s in spaces)


def test_async_copies_double_the_float16_shapes_where_asked_for_and_possible():
    """Under ``tirx.use_async_copy`` and on sm_80 or later, each float16 shape comes with
    asynchronous copies as well; those replay, and pass the cuda postprocessors under an H200's
    opted-in shared memory."""
    text = matmul(4096, 4096, 4096, dtype="float16")
    with PassContext(config=ASYNC_COPY):
        ctx, spaces = design_space(text)
        asynchronous = [s for s in spaces if '"software_pipeline_async_stages"' in s.mod["main"].script()]
        assert len(spaces) == 30 and len(asynchronous) == 15
        assert all(replays(ctx, s) for s in asynchronous[:2])
        opted_in = context(text, GPU.replace("49152", "232448")).space_generator.postprocs
        assert all(all(p.apply(s.copy()) for p in opted_in) for s in asynchronous)
        turing = context(text, GPU.replace("sm_90", "sm_75"))
        assert len(turing.space_generator.generate_design_space(turing.mod)) == 15
        assert len(design_space(matmul(4096, 4096, 4096))[1]) == 36  # (float32: its copies go through registers)


@pytest.mark.parametrize("text, target", [
    (matmul(1024, 1024, 64), GPU),  # (below the large size)
    (matmul(4096, 4096, 64, dtype="float16"), GPU),  # (k of 64: TVM's rule leaves it to SIMT)
    (matmul(4096, 4096, 4096, dtype="float16"), GPU.replace("sm_90", "sm_60")),  # (no tensor cores)
], ids=["small", "float16-k64", "float16-sm60"])
def test_other_functions_get_tvms_sketches(text, target):
    """A matmul that none of the large plans takes gets TVM's cuda sketches (sampled decisions),
    not a branch per shape of a plan it would not use."""
    ctx = context(text, target)
    spaces = ctx.space_generator.generate_design_space(ctx.mod)
    assert spaces and not any('"schedule_rule": "None"' in s.mod["main"].script() for s in spaces)
    assert all(any(i.kind.startswith("Sample") for i in s.trace.insts) for s in spaces)


@pytest.mark.slow
def test_every_candidate_replays_and_compiles():
    with PassContext(config=ASYNC_COPY):  # (float16's shapes with asynchronous copies too)
        for dtype in ("float32", "float16"):
            ctx, spaces = design_space(matmul(4096, 4096, 4096, dtype=dtype))
            for sch in spaces:
                assert replays(ctx, sch)
                assert_compiles(kernel_source(sch.mod["main"]))


def test_the_tile_rules_by_target_kind():
    assert isinstance(tile_space("cuda").sch_rules[1], MatmulTiles)
    assert isinstance(tile_space("llvm").sch_rules[1], ConvRegisterTile)
    with pytest.raises(TVMSError, match="no rule for target kind 'rocm'; it has for llvm and cuda"):
        tile_space("rocm")


class ByOrder:
    """A builder and runner in one (no GPU needed): keeps each candidate's module, and times the
    ``fastest``-th distinct candidate it is given at 1 ms (each time), the others at 2 ms."""

    def __init__(self, fastest: int) -> None:
        self.mods: list = []
        self.distinct: list = []
        self.fastest = fastest

    def build(self, inputs):
        self.mods.extend(i.mod for i in inputs)
        for i in inputs:
            if i.mod["main"].script() not in self.distinct:
                self.distinct.append(i.mod["main"].script())
        return [BuilderResult(f"mem://{n}") for n in range(len(self.mods) - len(inputs), len(self.mods))]

    def run(self, inputs):
        fastest = self.distinct[self.fastest:self.fastest + 1]
        return [Future(RunnerResult([1e-3 if self.mods[int(i.artifact_path[6:])]["main"].script() in fastest else 2e-3]))
                for i in inputs]


def test_tuning_in_the_tiles_space_measures_each_shape_and_keeps_the_fastest(tmp_path):
    """tune_tir with the tiles space under cuda: the default schedule and each of the 36 shapes
    is measured (the space has no sampled decision: then the task ends, but for the best one
    timed again beside the default); the database's best is the shape measured fastest."""
    func = module(matmul(2048, 2048, 64))["mm"]
    target = Target(GPU)
    measured = ByOrder(fastest=7)
    db = tune_tir(func, target, str(tmp_path), 64, num_trials_per_iter=8, space=tile_space(target),
                  strategy="replay-trace", builder=measured, runner=measured, database="memory", progress=None)
    assert len(measured.distinct) == 37 and len(measured.mods) < 48
    best = db.query_ir_module(IRModule({"main": func}), target)
    assert best["main"].script() == measured.distinct[7]
