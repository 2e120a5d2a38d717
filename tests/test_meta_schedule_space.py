"""The llvm design space (PostOrderApply with TVM's default rules) and its postprocessors against
Apache TVM 0.27: for each workload, the sketches' traces with TVM's sampled decisions replayed give
the module and trace TVM printed (fixtures/meta_schedule/generate_with_tvm.py), byte for byte,
before and after the postprocessors; and every candidate computes what the unscheduled function
computes."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms import meta_schedule as ms
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.trace import SAMPLING_KINDS, Trace
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.tune_context import TuneContext
from tvms.runtime.reference import run_prim_func

GOLDEN = FIXTURES / "meta_schedule"
TARGET = "llvm -num-cores=4"
DIALECT = "tvm-0.27"
# the decisions TVM's goldens were replayed with, per sketch
DECISIONS = json.loads((GOLDEN / "decisions.json").read_text())


def golden(file: str) -> str:
    return (GOLDEN / file).read_text()


def base(name: str) -> tvms.IRModule:
    return tvms.IRModule({"main": tvms.script.from_source(golden(f"{name}.tvms"))})


def parsed(file: str) -> tvms.IRModule:
    return tvms.script.from_source(golden(file))


def design_space(name: str, seed: int = 0, postprocs: list | None = None) -> list[Schedule]:
    space = PostOrderApply(postprocs=[] if postprocs is None else postprocs, mutator_probs={})
    return TuneContext(base(name), TARGET, space, task_name=name, rand_state=seed).generate_design_space()


def with_decisions(trace: Trace, decisions: list) -> Trace:
    sampled = [inst for inst in trace.insts if inst.kind in SAMPLING_KINDS]
    assert len(sampled) == len(decisions)
    return Trace(list(trace.insts), dict(zip(sampled, decisions)), trace.dialect)


def replayed(mod: "str | tvms.IRModule", sketch: Schedule, decisions: list) -> Schedule:
    """The sketch's trace replayed on ``mod`` (a workload's name or a module) with ``decisions``."""
    sch = Schedule(base(mod) if isinstance(mod, str) else mod)
    with_decisions(sketch.trace, decisions).apply_to_schedule(sch, remove_postproc=True)
    return sch


def assert_prints(sch: Schedule, stem: str, trace: bool = True) -> None:
    """The module is ``<stem>.tvms`` and the trace ``<stem>.trace.py``, byte for byte."""
    assert sch.mod.script(dialect=DIALECT) == golden(f"{stem}.tvms")
    if trace:
        assert sch.trace.script(DIALECT) + "\n" == golden(f"{stem}.trace.py")


def sketch_matches(mod: tvms.IRModule, sketch: Schedule, stem: str) -> None:
    """The sketch with the decisions of the golden trace (sample_categorical only) prints as TVM's."""
    decisions = [int(d) for d in re.findall(r"decision=(\d+)", golden(f"{stem}.trace.py"))]
    assert_prints(replayed(mod, sketch, decisions), stem)


def postprocessed(sch: Schedule) -> Schedule:
    sch = sch.copy()
    sch.enter_postproc()
    assert all(postproc.apply(sch) for postproc in ms.Postproc.create("llvm"))
    return sch


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_sketches_match_tvm(name: str) -> None:
    sketches = design_space(name)
    assert len(sketches) == len(DECISIONS[name])
    for k, (sketch, decisions) in enumerate(zip(sketches, DECISIONS[name])):
        sch = replayed(name, sketch, decisions)
        assert_prints(sch, f"{name}_sketch{k}", trace=False)
        post = postprocessed(sch)
        assert_prints(post, f"{name}_sketch{k}_post", trace=False)
        trace = golden(f"{name}_sketch{k}_post.trace.py")
        assert post.trace.script(DIALECT) + "\n" == trace
        assert sch.trace.script(DIALECT) == trace.split("\n  sch.enter_postproc()")[0]


@pytest.mark.parametrize("name", ["matmul_relu", "matmul_bias_relu", "row_sum",  # (gmm: as matmul_relu)
                                  pytest.param("sfm", marks=pytest.mark.slow)])  # (9 sketches)
def test_every_candidate_computes_what_the_function_computes(name: str) -> None:
    """Each sketch, with the decisions tvms sampled, post-processed and compiled, against the
    reference executor on the unscheduled function."""
    func = base(name)["main"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([d.value for d in func.buffer_map[p].shape]).astype("float32")
            for p in func.params]
    want = [a.copy() for a in args]
    run_prim_func(func, *want)
    for sketch in design_space(name, seed=1):
        got = [a.copy() for a in args]
        tvms.build(postprocessed(sketch).mod["main"], target=TARGET)(*got)
        np.testing.assert_allclose(got[-1], want[-1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["move", "dense", "matmul", "add"])
def test_rewrite_parallel_vectorize_unroll_matches_tvm(case: str) -> None:
    """The inputs of TVM's own RewriteParallelVectorizeUnroll tests (generate_postproc_with_tvm.py)."""
    from tvms.lowering.tune.postproc_rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll

    sch = Schedule(parsed(f"pvu_{case}.tvms"))
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert_prints(sch, f"pvu_{case}_after")


def test_c1d_candidates_compute_the_convolution() -> None:
    """TVM's C1D (padding computed at a sampled place by RandomComputeLocation) against numpy."""
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((1, 256, 64)).astype("float32")
    weight = rng.standard_normal((3, 64, 128)).astype("float32")
    padded = np.pad(inputs, ((0, 0), (1, 1), (0, 0)))
    windows = np.stack([padded[:, rl:rl + 256:2, :] for rl in range(3)], axis=2)  # n, l, rl, rc
    want = np.einsum("nlrc,rco->nlo", windows, weight)
    for sketch in design_space("c1d", seed=3):
        got = np.zeros((1, 128, 128), dtype="float32")
        tvms.build(postprocessed(sketch).mod["main"], target=TARGET)(inputs, weight, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_grp_padding_computed_inside_the_group_loop_is_correct() -> None:
    """TVM's GRP sketches with TVM's decisions (the padding computed at a reduction loop, its
    channel range co_0 // 8 * 16 found through the group division), compiled, against the
    unscheduled function compiled."""
    func = base("grp")["main"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([d.value for d in func.buffer_map[p].shape]).astype("float32")
            for p in func.params]
    tvms.build(func, target=TARGET)(*args)
    for sketch, decisions in zip(design_space("grp"), DECISIONS["grp"]):
        got = [a.copy() for a in args[:-1]] + [np.zeros_like(args[-1])]
        tvms.build(postprocessed(replayed("grp", sketch, decisions)).mod["main"], target=TARGET)(*got)
        np.testing.assert_allclose(got[-1], args[-1], rtol=1e-4, atol=1e-4)


def test_gpu_space_matches_tvm() -> None:
    """GMM on TVM's cuda rules and postprocessors (decisions VerifyGPUCode accepts): MultiLevelTiling
    SSSRRSRS bound to blockIdx.x / vthread.x / threadIdx.x, shared read caches fetched
    cooperatively, a local write cache; then the caches' fetch bound to the threads and vectorized,
    the unroll mark and the reduction's init. (TVM's VerifyGPUCode, which tvms lacks, accepts it.)"""
    from tvms.meta_schedule import postproc as pp
    from tvms.meta_schedule import schedule_rule as sr

    rules = [sr.ApplyCustomRule(),
             sr.MultiLevelTiling("SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                                 max_innermost_factor=64, vector_load_lens=[1, 2, 3, 4, 8, 16],
                                 reuse_read=sr.ReuseType("must", [4], "shared"),
                                 reuse_write=sr.ReuseType("must", [3], "local")),
             sr.InlineConstantScalars(),
             sr.AutoInline(True, True, True, False, False, False, []),
             sr.CrossThreadReduction([4, 8, 16, 32, 64, 128, 256, 512]),
             sr.ParallelizeVectorizeUnroll(-1, -1, [0, 16, 32, 64, 128, 256, 512, 1024], True),
             sr.AutoBind(256, [32, 64, 128, 256, 512, 1024])]
    postprocs = [pp.DisallowDynamicLoop(), pp.RewriteCooperativeFetch(), pp.RewriteUnboundBlock(256),
                 pp.RewriteParallelVectorizeUnroll(), pp.RewriteReductionBlock()]
    space = PostOrderApply(sch_rules=rules, postprocs=postprocs, mutator_probs={})
    target = "cuda -arch=sm_75 -max_threads_per_block=1024 -thread_warp_size=32"
    (sketch,) = TuneContext(base("gmm"), target, space, rand_state=0).generate_design_space()
    sch = replayed("gmm", sketch, [[1, 1, 1, 1, 1], [1, 4, 8, 2, 2], [1, 1, 4, 32, 1], [16, 2, 4], 1, 0, 7])
    assert_prints(sch, "gmm_cuda_sketch0", trace=False)
    sch.enter_postproc()
    assert all(postproc.apply(sch) for postproc in postprocs)
    assert_prints(sch, "gmm_cuda_sketch0_post")


@pytest.mark.parametrize("case", ["element_wise", "reduction_loop_only", "zero_dim_add"])
def test_auto_bind_matches_tvm(case: str) -> None:
    """The inputs of TVM's own AutoBind tests (generate_auto_bind_with_tvm.py); the sampled
    thread count replayed as TVM drew it."""
    from tvms.meta_schedule.schedule_rule import AutoBind

    mod = parsed(f"bind_{case}.tvms")
    space = PostOrderApply(sch_rules=[AutoBind()], postprocs=[], mutator_probs={})
    (sketch,) = TuneContext(mod, "cuda -max_threads_per_block=1024", space, rand_state=0).generate_design_space()
    sketch_matches(mod, sketch, f"bind_{case}_sketch")


@pytest.mark.parametrize("case", ["norm_bmn", "reshape", "reshape_large", "unrolled"])
def test_rewrite_unbound_block_matches_tvm(case: str) -> None:
    """The inputs of TVM's own RewriteUnboundBlock tests (generate_auto_bind_with_tvm.py)."""
    from tvms.meta_schedule.postproc import RewriteUnboundBlock

    mod = parsed(f"unbound_{case}.tvms")
    postproc = RewriteUnboundBlock()
    TuneContext(mod, "cuda -max_threads_per_block=1024", PostOrderApply(sch_rules=[], postprocs=[postproc],
                                                                        mutator_probs={}))
    sch = Schedule(mod)
    assert postproc.apply(sch)
    assert_prints(sch, f"unbound_{case}_after", trace=False)


@pytest.mark.parametrize("case", ["softmax", "softmax_inlined", "argmax"])
def test_cross_thread_reduction_matches_tvm(case: str) -> None:
    """The workloads of TVM's own CrossThreadReduction tests (generate_cross_thread_with_tvm.py):
    every sketch, with TVM's sampled thread counts, module and trace byte for byte."""
    from tvms.meta_schedule.schedule_rule import CrossThreadReduction

    mod = parsed(f"xthread_{case}.tvms")
    rule = CrossThreadReduction([4, 8, 16, 32, 64, 128, 256, 512])
    space = PostOrderApply(sch_rules=[rule], postprocs=[], mutator_probs={})
    target = "cuda -max_threads_per_block=1024 -thread_warp_size=32"
    sketches = TuneContext(mod, target, space, rand_state=0).generate_design_space()
    assert len(sketches) == len(list(GOLDEN.glob(f"xthread_{case}_sketch*.tvms")))
    for k, sketch in enumerate(sketches):
        sketch_matches(mod, sketch, f"xthread_{case}_sketch{k}")
