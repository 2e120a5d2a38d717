"""MultiLevelTilingTensorCore (WMMA and mma.sync) and RewriteTensorize against Apache TVM 0.27
(fixtures/meta_schedule/generate_tensor_core_with_tvm.py): on a 128^3 float16 matmul
accumulating in float32, the sketches with TVM's decisions print TVM's traces and modules, the
post-processed candidates print TVM's; the WMMA ones compute the matmul in the reference executor
(WMMA semantics) and compile with NVRTC; a 127^3 one is padded as TVM pads it."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_meta_schedule_space import GOLDEN, DIALECT, base, cuda_target, golden, parsed, replayed

import tvms
from tvms import meta_schedule as ms
from tvms.ir.errors import TVMSError
from tvms.lowering.schedule.schedule import Schedule
from tvms.lowering.schedule.tensor_intrin_cuda import get_wmma_intrin_group
from tvms.lowering.schedule.tensor_intrin_mma import get_mma_m16n8k8_intrin_group
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.postproc_verify_gpu_code import VerifyGPUCode, shared_memory_bytes
from tvms.lowering.tune.tune_context import TuneContext
from tvms.runtime.reference import run_prim_func

DECISIONS = json.loads((GOLDEN / "tc_decisions.json").read_text())
MMA_DECISIONS = json.loads((GOLDEN / "tc_mma_decisions.json").read_text())
VERDICTS = json.loads((GOLDEN / "tc_verify_gpu_code.json").read_text())  # (TVM's VerifyGPUCode)
GROUPS = [get_wmma_intrin_group("shared.dyn", "shared.dyn", "float16", "float32", trans_b) for trans_b in (False, True)]
REUSE = {"reuse_read": {"req": "must", "levels": [4], "scope": "shared.dyn"},
         "reuse_write": {"req": "must", "levels": [2], "scope": "shared.dyn"}}


def rule(**changes) -> ms.schedule_rule.MultiLevelTilingTensorCore:
    """The rule as TVM's default cuda-tensorcore space has it (its float16 into float32 groups)."""
    args = {"intrin_groups": GROUPS, "structure": "SSSRRSRS", "tile_binds": ["blockIdx.y", "blockIdx.x", "threadIdx.y"],
            "max_innermost_factor": 4, "vector_load_lens": [1, 2, 3, 4, 8, 16], **REUSE, **changes}
    return ms.schedule_rule.MultiLevelTilingTensorCore(**args)


def mma_rule() -> ms.schedule_rule.MultiLevelTilingTensorCore:
    """The second rule of TVM's default cuda-tensorcore space (its float16 into float32 group)."""
    return rule(intrin_groups=[get_mma_m16n8k8_intrin_group("float32")], use_software_pipeline=True,
                reuse_write={"req": "no", "levels": [2], "scope": "shared.dyn"})


def sketches(workload: str = "tc_matmul", the_rule: "ms.schedule_rule.MultiLevelTilingTensorCore | None" = None,
             ) -> tuple[dict, list]:
    """The sketches by their product intrinsic, and the cuda-tensorcore postprocessors."""
    generator = PostOrderApply(sch_rules=[the_rule or rule()], postprocs="cuda-tensorcore", mutator_probs={})
    found = TuneContext(base(workload), cuda_target("sm_86"), generator, rand_state=0).generate_design_space()
    by_intrin = {}
    for sch in found:
        text = sch.trace.script(DIALECT)
        intrin = next(name for name in (*DECISIONS, *MMA_DECISIONS) if f'"{name}"' in text)
        by_intrin[intrin] = sch
    return by_intrin, generator.postprocs


def postprocessed(sch: Schedule, postprocs: list, name: str, counted: list | None = None) -> bool:
    """Run the postprocessors on ``sch`` (all but VerifyGPUCode must pass); VerifyGPUCode's
    verdict, which the caller compares with TVM's (VERDICTS, by ``<workload>_<intrin>``). The
    shared memory VerifyGPUCode counts goes to ``counted``."""
    sch.enter_postproc()
    verdict = None
    for postproc in postprocs:
        ok = postproc.apply(sch)
        if isinstance(postproc, VerifyGPUCode):
            verdict = ok
            if counted is not None:
                counted.append(shared_memory_bytes(sch.mod["main"]))
        else:
            assert ok, (name, type(postproc).__name__)
    return verdict


def candidate(intrin: str) -> tuple[Schedule, list]:
    found, postprocs = sketches()
    return replayed("tc_matmul", found[intrin], DECISIONS[intrin]), postprocs


def test_sketches_match_tvm() -> None:
    """One sketch per WMMA group the matmul matches (B as [k, n] and, relaid out, as [n, k]), each
    with TVM's decisions printing TVM's trace -- the accumulator layout's index map over the
    sampled warp tiles included -- and, for the [k, n] one, TVM's module byte for byte."""
    found, _ = sketches()
    assert sorted(found) == sorted(DECISIONS)
    for intrin in DECISIONS:
        sch = replayed("tc_matmul", found[intrin], DECISIONS[intrin])
        assert sch.trace.script(DIALECT) + "\n" == golden(f"tc_matmul_{intrin}.trace.py")
        # (a database's JSON form keeps the index map over the sampled integers)
        again = Schedule(base("tc_matmul"))
        Trace.from_json(json.loads(json.dumps(sch.trace.as_json()))).apply_to_schedule(again, remove_postproc=True)
        assert again.mod.script(dialect=DIALECT) == sch.mod.script(dialect=DIALECT)
    sch = replayed("tc_matmul", found["wmma_sync_16x16x16_f16f16f32"], DECISIONS["wmma_sync_16x16x16_f16f16f32"])
    assert sch.mod.script(dialect=DIALECT) == golden("tc_matmul_wmma_sync_16x16x16_f16f16f32.tvms")


def computes_and_compiles(func: "tvms.PrimFunc", shape: tuple, b_shape: "tuple | None" = None) -> None:
    """The candidate, lowered for the GPU, computes the (batched) matmul of A of ``shape`` and B
    of ``b_shape`` (else ``shape``) in the reference executor, and its kernel (wmma:: calls)
    compiles with NVRTC for sm_80 and sm_90."""
    from cuda_support import assert_compiles

    from tvms.lowering.codegen.cuda import cuda_source, kernels_of
    from tvms.lowering.tir.gpu.pipeline import finalize_kernels, split_for_cuda

    split = split_for_cuda(func, cuda_target("sm_80"))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype("float16") for s in (shape, b_shape or shape))
    c = np.zeros((*shape[:-1], (b_shape or shape)[-1]), "float32")
    run_prim_func(split, a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-4)
    source = cuda_source(kernels_of(finalize_kernels(split)))
    assert all(f"wmma::{call}" in source for call in ("fill_fragment", "load_matrix_sync", "mma_sync",
                                                       "store_matrix_sync"))
    assert_compiles(source)


@pytest.mark.slow
def test_postprocessed_candidate_prints_computes_and_compiles() -> None:
    """The [k, n] candidate through the cuda-tensorcore postprocessors (RewriteReductionBlock
    handing the fill intrinsic to the init block, RewriteTensorize) is TVM's module byte for byte,
    every auto_tensorize block tensorized; it computes and compiles (computes_and_compiles)."""
    intrin = "wmma_sync_16x16x16_f16f16f32"
    sch, postprocs = candidate(intrin)
    assert postprocessed(sch, postprocs, f"tc_matmul_{intrin}") == VERDICTS[f"tc_matmul_{intrin}"]
    assert sch.mod.script(dialect=DIALECT) == golden(f"tc_matmul_{intrin}_post.tvms")
    computes_and_compiles(parsed(f"tc_matmul_{intrin}_post.tvms")["main"], (128, 128))


def fp16_matmul(out_dtype: str) -> tvms.IRModule:
    """``tc_matmul`` (128^3, float16 operands) into ``out_dtype``."""
    text = golden("tc_matmul.tvms")
    if out_dtype == "float16":
        text = text.replace('T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])', "A[vi, vk] * B[vk, vj]")
        text = text.replace("float32", "float16")
    return tvms.IRModule({"main": tvms.script.from_source(text)})


@pytest.mark.slow
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_first_trials_build_compile_and_compute_as_a_builder_sends_them(out_dtype: str) -> None:
    """The first trials of an fp16 matmul's tuning under an H200's target (sm_90): the default
    schedule (DLight's tensor-core Matmul, its copies staged through registers) and a sample of
    the space (the WMMA sketch), each as a builder's worker gets it (its text, read back), build
    for cuda; NVRTC compiles the kernels and the reference executor computes the matmul. (The
    default's text once read back as TVM 0.27's and its build failed: issue 16.)"""
    from cuda_support import assert_compiles

    from tvms.lowering.tir.gpu.pipeline import split_for_cuda
    from tvms.lowering.tune.builder import _module_text, default_build
    from tvms.lowering.tune.evolutionary_search import EvolutionarySearch
    from tvms.lowering.tune.task_scheduler import replayed_default

    mod, target = fp16_matmul(out_dtype), cuda_target("sm_90")
    _, default = replayed_default(mod, target)
    assert "manifest_shared_memory_local_stage" in default.mod.script()
    search = EvolutionarySearch()
    search._initialize_with_tune_context(TuneContext(mod, target, PostOrderApply(), search, rand_state=0))
    intrin = f'"wmma_sync_16x16x16_f16f16f{out_dtype[-2:]}"'  # (B as [k, n])
    (space,) = [s for s in search.context.generate_design_space() if intrin in s.trace.script(DIALECT)]
    sample = next(filter(None, (search.replay(Trace(space.trace.insts, {})) for _ in range(20))))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype("float16") for _ in range(2))
    expected = (a.astype("float32") @ b.astype("float32")).astype(out_dtype)
    for sch in (default, sample):
        sent = tvms.script.from_source(_module_text(sch.mod))
        assert_compiles(default_build(sent, target, None).get_source())
        c = np.zeros((128, 128), out_dtype)
        run_prim_func(split_for_cuda(sent["main"], target), a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-2, atol=5e-2)


def test_a_block_no_group_matches_is_left_alone() -> None:
    """A float32 matmul matches no float16 group: the rule gives the schedule back untouched."""
    func = base("tc_matmul")["main"]
    text = func.script(dialect=DIALECT).replace('"float16"', '"float32"').replace('T.Cast("float32", A[vi, vk])', "A[vi, vk]")
    text = text.replace('T.Cast("float32", B[vk, vj])', "B[vk, vj]")
    mod = tvms.IRModule({"main": tvms.script.from_source(text)})
    generator = PostOrderApply(sch_rules=[rule()], postprocs=[], mutator_probs={})
    (sch,) = TuneContext(mod, cuda_target("sm_86"), generator, rand_state=0).generate_design_space()
    assert sch.mod.script(dialect=DIALECT) == mod.script(dialect=DIALECT)


BATCHED = golden("tc_bmm.tvms")


TWO_REDUCTIONS = """
@T.prim_func
def main(A: T.Buffer((32, 2, 16), "float16"), B: T.Buffer((2, 16, 32), "float16"), C: T.Buffer((32, 32), "float32")):
    for i, j, k0, k1 in T.grid(32, 32, 2, 16):
        with T.block("C"):
            vi, vj, vk0, vk1 = T.axis.remap("SSRR", [i, j, k0, k1])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk0, vk1]) * T.Cast("float32", B[vk0, vk1, vj])
"""


def assert_left_alone(caplog, text: str, the_rule: ms.schedule_rule.MultiLevelTilingTensorCore, reason: str) -> None:
    """The rule gives the schedule of ``text`` back untouched, logging why."""
    mod = tvms.IRModule({"main": tvms.script.from_source(text)})
    generator = PostOrderApply(sch_rules=[the_rule], postprocs=[], mutator_probs={})
    with caplog.at_level("INFO", logger="tvms.meta_schedule"):
        (sch,) = TuneContext(mod, cuda_target("sm_86"), generator, rand_state=0).generate_design_space()
    assert sch.mod.script(dialect=DIALECT) == mod.script(dialect=DIALECT)
    assert caplog.messages == [f"MultiLevelTilingTensorCore leaves block 'C' untiled: {reason}"]


def test_a_product_of_two_reductions_is_left_alone_with_a_reason(caplog) -> None:
    """The rule tiles matmuls (i, j, k after any batch): a product summed over two iterators, as a
    convolution is, gets the schedule back untouched, and the reason is logged."""
    assert_left_alone(caplog, TWO_REDUCTIONS, rule(), "its iterators are SSRR, not the i, j, k (SSR) of a matmul, "
                      "batched or not: convolutions are not taken")


@pytest.mark.slow
def test_a_batched_matmul_is_tiled_as_tvm_tiles_it() -> None:
    """Batched matmuls: as TVM 0.27, the batch stays one outer loop, fused with the first tiles
    onto blockIdx.y, the accumulator and operand caches keep it as their first axis. With TVM's
    decisions both sketches print TVM's traces, on a 4 x 32^3 one (tc_bmm) and on a legalized
    R.matmul of (2, 72, 128) x (2, 128, 80) (tc_bmm_legalized: int64 extents, i padded to 80).
    tc_bmm's sketches print TVM's modules and post-processed modules byte for byte, and so does the
    legalized one's [k, n] sketch. (The legalized [n, k] one's padded write-back predicate puts a
    unit iterator's ``T.Mul(0, 16)`` after the term TVM puts it before.) The legalized [n, k]
    candidate computes and compiles (computes_and_compiles)."""
    for workload in ("tc_bmm", "tc_bmm_legalized"):
        decisions = json.loads((GOLDEN / f"{workload}_decisions.json").read_text())
        found, postprocs = sketches(workload)
        assert sorted(found) == sorted(decisions)
        for intrin in decisions:
            sch = replayed(workload, found[intrin], decisions[intrin])
            assert sch.trace.script(DIALECT) + "\n" == golden(f"{workload}_{intrin}.trace.py")
            for suffix in ("", "_post"):
                if suffix:  # (TVM's VerifyGPUCode refuses tc_bmm's [n, k] candidate: B gathered 8 lanes wide)
                    assert postprocessed(sch, postprocs, f"{workload}_{intrin}") == VERDICTS[f"{workload}_{intrin}"]
                if workload == "tc_bmm" or "trans" not in intrin:
                    assert sch.mod.script(dialect=DIALECT) == golden(f"{workload}_{intrin}{suffix}.tvms")
    computes_and_compiles(sch.mod["main"], (2, 72, 128), (2, 128, 80))  # (the last: the legalized [n, k] one)


@pytest.mark.slow
def test_extents_not_multiples_of_16_are_padded_as_tvm_pads_them() -> None:
    """A 127^3 matmul: as TVM 0.27's TileWithTensorIntrin, the rule pads the block to 128
    (PadEinsum) and inlines the reindex stages into the pad blocks; the write-back stores only what
    C has (a predicate, which keeps fuse's ``fused % 256 // 16`` as TVM's does). With TVM's
    decisions each sketch prints TVM's trace, and the [k, n] one TVM's module byte for byte. (The
    [n, k] one drops a unit iterator's term, ``v0 * 128``, that TVM's store keeps.) Post-processed
    and lowered, the [k, n] candidate computes the 127^3 matmul in the reference executor and its
    kernel compiles with NVRTC."""
    decisions = json.loads((GOLDEN / "tc_127_decisions.json").read_text())
    found, postprocs = sketches("tc_matmul_127")
    assert sorted(found) == sorted(decisions)
    for intrin in decisions:
        sch = replayed("tc_matmul_127", found[intrin], decisions[intrin])
        assert sch.trace.script(DIALECT) + "\n" == golden(f"tc_matmul_127_{intrin}.trace.py")
    intrin = "wmma_sync_16x16x16_f16f16f32"
    sch = replayed("tc_matmul_127", found[intrin], decisions[intrin])
    assert sch.mod.script(dialect=DIALECT) == golden(f"tc_matmul_127_{intrin}.tvms")
    assert postprocessed(sch, postprocs, f"tc_matmul_127_{intrin}") == VERDICTS[f"tc_matmul_127_{intrin}"]
    computes_and_compiles(sch.mod["main"], (127, 127))


def test_refusals() -> None:
    with pytest.raises(TVMSError, match="threadIdx.x"):
        rule(tile_binds=["blockIdx.x", "threadIdx.x"])
    with pytest.raises(TVMSError, match="write reuse"):
        rule(reuse_write={"req": "no", "levels": [2], "scope": "shared.dyn"})
    with pytest.raises(TVMSError, match="names no store"):
        rule(intrin_groups=[{k: v for k, v in GROUPS[0].items() if k != "store"}])
    with pytest.raises(TVMSError):
        rule(intrin_groups=[{**GROUPS[0], "compute": "no_such_intrinsic"}])
    with pytest.raises(TVMSError, match="WMMA .* or an mma.sync"):
        rule(intrin_groups=[{**GROUPS[0], "compute": "mma_store_m16n8k8_f32_global"}])


def test_mma_sync_sketch_matches_tvm() -> None:
    """TVM's mma.sync rule (m16n8k8 intrinsics, software pipelined) gives one sketch on the 128^3
    matmul: with TVM's decisions (partitioned spatial tiles) it prints TVM's trace and module --
    accumulators in m16n8k8.matrixC fragments written out by a write_at copy, operands read_at into
    swizzled (permuted_layout) shared memory with 16-byte asynchronous copies, both reduction tiles
    pipelined -- and, through the cuda-tensorcore postprocessors (RewriteReductionBlock, then
    RewriteTensorize putting in the mma_init, ldmatrix and mma.sync implementations), TVM's
    post-processed module byte for byte; VerifyGPUCode refuses it for its shared memory, as
    TVM's does."""
    # (TVM counts 123904 bytes: the operand tiles in three versions of the nested pipeline,
    # 122880 bytes, and the 1024-byte shared stage LowerAutoCopy writes the accumulator out through)
    mma_sketch_matches_tvm("tc_matmul", MMA_DECISIONS, shared_bytes=123904)


def test_lower_auto_copys_stage_decides_verify_gpu_codes_verdict() -> None:
    """The mma.sync candidate as VerifyGPUCode sees it (the postprocessors before it run): its
    operand tiles alone (122880 bytes) fit a GPU allowing 123000 bytes a block, the 1024-byte
    stage LowerAutoCopy adds does not, and the candidate is refused there; it is taken where
    123904 bytes are allowed."""
    (intrin,) = MMA_DECISIONS
    found, postprocs = sketches("tc_matmul", mma_rule())
    sch = replayed("tc_matmul", found[intrin], MMA_DECISIONS[intrin])
    sch.enter_postproc()
    for postproc in postprocs[:next(k for k, p in enumerate(postprocs) if isinstance(p, VerifyGPUCode))]:
        assert postproc.apply(sch)
    verify = VerifyGPUCode()
    for max_shared, verdict in (123000, False), (123904, True):
        verify.limits = {"max_threads_per_block": 1024, "max_shared_memory_per_block": max_shared,
                         "thread_warp_size": 32}
        assert verify.apply(sch) is verdict


def mma_sketch_matches_tvm(workload: str, decisions: dict, shared_bytes: int | None = None) -> Schedule:
    """The mma.sync rule's one sketch of ``workload`` with TVM's ``decisions`` prints TVM's trace
    and module, and post-processed TVM's module (VerifyGPUCode counting TVM's ``shared_bytes``
    where given); the post-processed schedule."""
    (intrin,) = decisions
    found, postprocs = sketches(workload, mma_rule())
    assert list(found) == [intrin]
    sch = replayed(workload, found[intrin], decisions[intrin])
    assert sch.trace.script(DIALECT) + "\n" == golden(f"{workload}_{intrin}.trace.py")
    assert sch.mod.script(dialect=DIALECT) == golden(f"{workload}_{intrin}.tvms")
    # (both refuse it for its shared memory, over the target's 49152 bytes)
    counted: list = []
    assert postprocessed(sch, postprocs, f"{workload}_{intrin}", counted) is VERDICTS[f"{workload}_{intrin}"] is False
    assert shared_bytes is None or counted == [shared_bytes]
    assert sch.mod.script(dialect=DIALECT) == golden(f"{workload}_{intrin}_post.tvms")
    return sch


def computes_exactly(func: "tvms.PrimFunc", n: int) -> None:
    """``func``, split for the GPU, computes the n x n x n matmul in the reference executor (small
    integers: exact sums)."""
    from tvms.lowering.tir.gpu.pipeline import split_for_cuda

    split = split_for_cuda(func, cuda_target("sm_80"))
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-2, 3, (n, n)).astype("float16") for _ in range(2))
    c = np.zeros((n, n), "float32")
    run_prim_func(split, a, b, c)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))


@pytest.mark.slow
def test_mma_sync_candidate_lowers_computes_and_compiles() -> None:
    """The post-processed mma.sync candidate (TVM's, which tvms's rule prints byte for byte) goes
    through tvms's whole cuda pipeline from its scheduled form: LowerAutoCopy makes its
    ``read_at`` copies coalesced 16-byte copies and its ``write_at`` copy an m16n8k8 store into a
    shared stage then a coalesced copy out; it computes the 128^3 matmul exactly in the reference
    executor (ldmatrix, mma.sync, cp.async) and its kernel compiles with NVRTC (sm_80, sm_90)."""
    from cuda_support import assert_compiles

    from tvms.lowering.codegen.cuda import cuda_source, kernels_of
    from tvms.lowering.tir.gpu.pipeline import finalize_kernels, split_for_cuda

    func = parsed("tc_matmul_mma_sync_m16n8k8_f16f16f32_post.tvms")["main"]
    computes_exactly(func, 128)
    source = cuda_source(kernels_of(finalize_kernels(split_for_cuda(func, cuda_target("sm_80")))))
    assert "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" in source and "cp.async" in source
    assert_compiles(source)


def test_mma_sync_sketch_is_not_lowered_before_tensorization() -> None:
    """TVM's mma.sync sketch before the tensor intrinsics replace its blocks cannot be lowered: its
    operand fragments are read element by element, and TransformMmaBufferLayout (making them each
    thread's registers) refuses that, as TVM 0.27's does. (The post-processed candidate lowers and
    computes: tests/test_mma_layout_passes.py.)"""
    from tvms.lowering.tir.gpu.pipeline import split_for_cuda

    with pytest.raises(TVMSError, match="m16n8k8.matrixA buffers to be accessed through opaque ldmatrix"):
        split_for_cuda(parsed("tc_matmul_mma_sync_m16n8k8_f16f16f32.tvms")["main"], cuda_target("sm_80"))


@pytest.mark.slow
def test_mma_sync_sketch_of_a_padded_matmul_writes_back_only_the_result() -> None:
    """On the 127^3 matmul (padded to 128) the mma.sync sketch reverse-inlines the write-back of
    the padded result into the write_at copy block, bounded as TVM 0.27 bounds it: a predicate
    over the copy's own loops (``ax0 < 127 and ... * 32 + ax1 < 127``, which TVM prints as free
    variables before the block). With TVM's decisions it prints TVM's trace and module, and
    post-processed TVM's module, byte for byte; the post-processed candidate, lowered by tvms's
    whole cuda pipeline (LowerAutoCopy moving the bound inside the copy's loops, where TVM's
    leaves it over variables its rewrite removed), computes the 127^3 matmul in the reference
    executor, writing nothing outside C."""
    decisions = json.loads((GOLDEN / "tc_127_mma_decisions.json").read_text())
    computes_exactly(mma_sketch_matches_tvm("tc_matmul_127", decisions).mod["main"], 127)


def test_mma_sync_rule_leaves_a_batched_matmul_alone(caplog) -> None:
    """TVM's mma.sync tiling takes the i, j, k loops of a 2-D matmul only (the reason logged)."""
    assert_left_alone(caplog, BATCHED, mma_rule(), "its mma.sync tiling takes the i, j, k loops of a 2-D matmul only")


def test_default_tensor_core_space_has_both_rules() -> None:
    """TVM 0.27's cuda-tensorcore rules: WMMA (six groups, shared write-back), then mma.sync (two
    groups, no write reuse, software pipelined), then the cuda rules but their ApplyCustomRule."""
    rules = ms.ScheduleRule.create("cuda-tensorcore")
    wmma, mma = rules[1:3]
    assert [type(r).__name__ for r in rules] == ["ApplyCustomRule", "MultiLevelTilingTensorCore",
                                                 "MultiLevelTilingTensorCore", "MultiLevelTiling",
                                                 "InlineConstantScalars", "AutoInline", "CrossThreadReduction",
                                                 "ParallelizeVectorizeUnroll", "AutoBind"]
    assert len(wmma.intrin_groups) == 6 and not wmma.use_software_pipeline
    assert [g["compute"] for g in mma.intrin_groups] == ["mma_sync_m16n8k8_f16f16f16", "mma_sync_m16n8k8_f16f16f32"]
    assert mma.use_software_pipeline and mma.reuse_write.req == "no"
