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
from tvms.lowering.tune.postproc_verify_gpu_code import shared_memory_bytes
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


def reference_run(name: str) -> tuple[list, list]:
    """Random arguments of a workload, and what the reference executor makes of them."""
    func = base(name)["main"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([d.value for d in func.buffer_map[p].shape]).astype("float32")
            for p in func.params]
    want = [a.copy() for a in args]
    run_prim_func(func, *want)
    return args, want


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
    args, want = reference_run(name)
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


CUDA_SPACES = json.loads((GOLDEN / "cuda_decisions.json").read_text())
CUDA_VERDICTS = json.loads((GOLDEN / "cuda_verdicts.json").read_text())
CUDA_SHARED_BYTES = json.loads((GOLDEN / "cuda_shared_bytes.json").read_text())  # as TVM's VerifyGPUCode counts


def cuda_target(arch: str) -> tvms.target.Target:
    """The attributes of TVM's GPU tags (nvidia/geforce-rtx-2080 is sm_75)."""
    return tvms.target.Target({"kind": "cuda", "arch": arch, "max_threads_per_block": 1024, "thread_warp_size": 32,
                               "max_shared_memory_per_block": 49152})


def cuda_space(stem: str) -> tuple[list, list]:
    """The sketches of the default cuda space (rules, postprocessors) on a workload, and the
    postprocessors."""
    space = CUDA_SPACES[stem]
    generator = PostOrderApply(mutator_probs={})
    ctx = TuneContext(base(space["workload"]), cuda_target(space["arch"]), generator, rand_state=0)
    return ctx.generate_design_space(), generator.postprocs


@pytest.mark.parametrize("stem", sorted(CUDA_SPACES))
def test_cuda_space_matches_tvm(stem: str) -> None:
    """TVM's cuda defaults (MultiLevelTiling SSSRRSRS bound to blockIdx.x / vthread.x /
    threadIdx.x with shared read caches and a local write cache, software pipelines on sm_86,
    CrossThreadReduction, AutoBind, the GPU AutoInline and unroll) on a matmul and reductions:
    each sketch with the decisions TVM replayed prints as TVM's; the postprocessors (cooperative
    fetch bound to the threads, unbound blocks bound, unroll, reduction init, VerifyGPUCode)
    reject what TVM's reject, and what they accept prints as TVM's, trace included. The shared
    memory VerifyGPUCode counts on the scheduled TensorIR is, to the byte, what TVM's counts on
    the kernels its lowering makes (cuda_shared_bytes.json)."""
    sketches, postprocs = cuda_space(stem)
    decisions = CUDA_SPACES[stem]["decisions"]
    assert len(sketches) == len(decisions)
    for k, (sketch, chosen) in enumerate(zip(sketches, decisions)):
        sch = replayed(CUDA_SPACES[stem]["workload"], sketch, chosen)
        assert_prints(sch, f"{stem}_sketch{k}", trace=False)
        sch.enter_postproc()
        # (sm_75 and later: TVM's cuda-tensorcore postprocessors, RewriteTensorize after VerifyGPUCode)
        at = [type(p).__name__ for p in postprocs].index("VerifyGPUCode")
        rejected = next((type(p).__name__ for p in postprocs[:at] if not p.apply(sch)), None)
        if rejected is None:
            assert shared_memory_bytes(sch.mod["main"]) == CUDA_SHARED_BYTES[stem][k]
            rejected = next((type(p).__name__ for p in postprocs[at:] if not p.apply(sch)), None)
        assert rejected == CUDA_VERDICTS[stem][k]
        if rejected is None:
            assert_prints(sch, f"{stem}_sketch{k}_post")


@pytest.mark.parametrize("arch, kind, stages", [("sm_70", "cuda", []), ("sm_75", "cuda-tensorcore", []),
                                                ("sm_80", "cuda-tensorcore", [4, 5]),
                                                ("sm_90a", "cuda-tensorcore", [4, 5]), ("sm_x", "cuda", [])])
def test_cuda_space_kind_and_pipelines_follow_the_arch(arch: str, kind: str, stages: list) -> None:
    """The default space has tensor cores from sm_75, and MultiLevelTiling tries software
    pipelines (4 or 5 stages) from sm_80, the GPUs with async copies: as TVM, both read the
    number that starts the arch, so sm_90a counts as 90."""
    from tvms.lowering.tune.space_generator import space_kind

    target = cuda_target(arch)
    assert space_kind(target) == kind
    rule = ms.schedule_rule.MultiLevelTiling("SSSRRSRS")
    rule._initialize_with_tune_context(TuneContext(base("row_sum"), target, PostOrderApply(mutator_probs={})))
    assert rule.stages == stages


def test_verify_gpu_code_agrees_with_tvm() -> None:
    """The modules of TVM's own VerifyGPUCode tests (generate_verify_gpu_with_tvm.py), scheduled
    TensorIR and lowered kernels, and a copy vectorized by 4 and by 8 float32 lanes: accepted or
    rejected as TVM's postprocessor does (too many threads, too much shared memory, a block's
    thread count outside its marked range, a vector of more than 16 bytes)."""
    from tvms.lowering.tune.postproc_verify_gpu_code import VerifyGPUCode, gpu_code_errors

    expected = json.loads((GOLDEN / "verify_gpu.json").read_text())
    postproc = VerifyGPUCode()
    TuneContext(base("row_sum"), tvms.target.Target(expected["target"]),
                PostOrderApply(sch_rules=[], postprocs=[postproc], mutator_probs={}))
    for name, accepted in expected["verdicts"].items():
        assert postproc.apply(Schedule(parsed(f"verify_{name}.tvms"))) == accepted, name
    errors = gpu_code_errors(parsed("verify_Conv2dCuda3.tvms")["main"], 1024, 49152)
    assert any("threads per block, more than the target's 1024" in e for e in errors)
    errors = gpu_code_errors(parsed("verify_Conv2dCuda2.tvms")["main"], 1024, 49152)
    assert any("bytes of shared memory per block, more than the target's 49152" in e for e in errors)
    assert gpu_code_errors(parsed("verify_vector8.tvms")["main"], 1024, 49152) == \
        ["a vector access to B of 8 x float32 is more than 16 bytes",
         "a vector access to A of 8 x float32 is more than 16 bytes"]
    # a shared buffer of symbolic size that its accesses do not bound has no safe verdict
    symbolic = tvms.script.from_source("""
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "int32")
    B = T.match_buffer(b, (n,), "int32")
    S = T.alloc_buffer((n * 100000,), "int32", scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in range(n):
                with T.block("copy"):
                    v = T.axis.spatial(n, i)
                    S[A[v]] = A[v]
            for i in range(n):
                with T.block("out"):
                    v = T.axis.spatial(n, i)
                    B[v] = S[v]
""")
    assert "shared buffer S has a size that is not a constant" in gpu_code_errors(symbolic, 1024, 49152)


@pytest.mark.parametrize("c_buffer, rows, factor, accepted", [
    ("(T.int64(4), T.int64(1024))", 1024, 32, True),
    ("(T.int64(4), T.int64(2147483648))", 1024, 32, False),
    ("(T.int64(4), T.int64(536870912))", 536870912, 1024, True),  # (the last index 2^31 - 1)
    ("(T.int64(4), T.int64(536870913))", 536870913, 1, False),
    ("(T.int64(4), T.int64(1024)), strides=(T.int64(536870912), T.int64(1))", 1024, 32, True),
    ("(T.int64(4), T.int64(1024)), strides=(T.int64(1073741824), T.int64(1))", 1024, 32, False),
], ids=["small", "2^33-elements", "last-index-2^31-1", "last-index-past-int32", "strided-view", "strided-view-past-int32"])
def test_an_int64_gather_counts_its_index_as_tvm_narrows_it(c_buffer: str, rows: int, factor: int,
                                                            accepted: bool) -> None:
    """A transposing copy vectorized by 4 (a gather, its lanes a row of ``c`` apart) indexed in
    int64: TVM's lowering narrows the index to int32 where its range over the loops fits
    (NarrowDataType(32)), a 16-byte ramp, accepted; else it stays int64, 32 bytes, rejected.
    The range is of the flat index by the buffer's strides where it has them (a view of a larger
    tensor). TVM 0.27's verdicts on the same schedules."""
    from tvms.lowering.tune.postproc_verify_gpu_code import gpu_code_errors

    sch = Schedule(tvms.script.from_source(f"""
@T.prim_func
def main(a: T.Buffer((T.int64({rows}), T.int64(4)), "float32"), c: T.Buffer({c_buffer}, "float32")):
    for i, k in T.grid(T.int64({rows}), T.int64(4)):
        with T.block("copy"):
            vi, vk = T.axis.remap("SS", [i, k])
            c[vk, vi] = a[vi, vk]
"""))
    i, k = sch.get_loops(sch.get_block("copy"))
    bx, tx = sch.split(i, [None, factor])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(k)
    errors = gpu_code_errors(sch.mod["main"], 1024, 49152)
    assert not errors if accepted else errors and "has an index vector of more than 16 bytes" in errors[0]


@pytest.mark.parametrize("name", ["gmm", "t2d"])
def test_cuda_postprocessors_reject_the_samples_tvm_rejects(name: str) -> None:
    """The cuda sketch of GMM and of T2D with the decisions TVM sampled at 24 and 12 seeds (most
    outside the thread range MultiLevelTiling marks on the block; T2D's shared fetch of a size
    that varies with an outer loop, a dynamic loop): the same verdicts."""
    samples = json.loads((GOLDEN / "cuda_sampled_verdicts.json").read_text())[name]
    generator = PostOrderApply(mutator_probs={})
    (sketch,) = TuneContext(base(name), cuda_target("sm_75"), generator, rand_state=0).generate_design_space()
    verdicts = []
    for sample in samples:
        sch = replayed(name, sketch, sample["decisions"])
        sch.enter_postproc()
        verdicts.append(next((type(p).__name__ for p in generator.postprocs if not p.apply(sch)), None))
    assert verdicts == [sample["rejected"] for sample in samples]
    assert len(set(verdicts)) > 1


def test_gpu_space_needs_the_targets_limits() -> None:
    """As TVM 0.27's: plain "cuda" names no thread limit, so the default space cannot bind
    threads; VerifyGPUCode needs the shared-memory limit too."""
    from tvms.meta_schedule.postproc import VerifyGPUCode

    with pytest.raises(tvms.TVMSError, match="max_threads_per_block"):
        TuneContext(base("row_sum"), "cuda", PostOrderApply(mutator_probs={}), rand_state=0).generate_design_space()
    with pytest.raises(tvms.TVMSError, match='"max_shared_memory_per_block" is not defined in the target'):
        TuneContext(base("row_sum"), "cuda -max_threads_per_block=1024 -thread_warp_size=32",
                    PostOrderApply(sch_rules=[], postprocs=[VerifyGPUCode()], mutator_probs={}))
    # the warp size is the cuda kind's (32), as TVM fills it in: the two limits are enough
    context = TuneContext(base("row_sum"), "cuda -max_threads_per_block=1024 -max_shared_memory_per_block=49152",
                          PostOrderApply(sch_rules=[], postprocs=[VerifyGPUCode()], mutator_probs={}))
    assert context.space_generator.postprocs[0].limits["thread_warp_size"] == 32


@pytest.mark.parametrize("name", ["row_sum", "nrm", pytest.param("sfm", marks=pytest.mark.slow)])
def test_sampled_cuda_candidates_compute_what_the_function_computes(name: str) -> None:
    """The default cuda space's sketches with the decisions tvms samples, post-processed: those
    VerifyGPUCode accepts run in the reference executor (GPU semantics: the threads of a block
    together, shared memory per block, races reported) and give what the unscheduled function
    gives."""
    args, want = reference_run(name)
    checked = 0
    for seed in range(2):
        generator = PostOrderApply(mutator_probs={})
        for sketch in TuneContext(base(name), cuda_target("sm_75"), generator, rand_state=seed).generate_design_space():
            sch = sketch.copy()
            sch.enter_postproc()
            if not all(postproc.apply(sch) for postproc in generator.postprocs):
                continue
            got = [a.copy() for a in args]
            run_prim_func(sch.mod["main"], *got)
            np.testing.assert_allclose(got[-1], want[-1], rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked >= 2


@pytest.mark.slow
def test_accepted_gmm_cuda_candidate_computes_the_matmul() -> None:
    """The post-processed GMM candidate (tvms prints it as TVM, test_cuda_space_matches_tvm) in
    the reference executor against numpy: shared caches fetched by the threads, a local
    accumulator, virtual threads. (The sm_86 candidates fetch per virtual thread too: minutes.)"""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((1, 128, 128)).astype("float32") for _ in range(2))
    z = np.zeros((1, 128, 128), "float32")
    run_prim_func(parsed("gmm_cuda_sketch0_post.tvms")["main"], x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-4, atol=1e-4)


# the accepted candidates of test_cuda_space_matches_tvm; the row sum's run without --runslow
ACCEPTED = [pytest.param(stem, k, id=f"{stem}{k}", marks=[] if stem == "row_sum_cuda" else [pytest.mark.slow])
            for stem, verdicts in sorted(CUDA_VERDICTS.items()) for k, rejected in enumerate(verdicts) if rejected is None]


@pytest.mark.parametrize("stem, k", ACCEPTED)
def test_accepted_cuda_candidates_lower_compute_and_compile(stem: str, k: int) -> None:
    """Each candidate the cuda postprocessors accept, through tvms's cuda pipeline: its
    SplitHostDevice module (barriers placed, cross-thread reductions lowered, the kernel launched
    by the host) computes in the reference executor what the unscheduled function computes, and
    its kernels compile with NVRTC for sm_80 and sm_90."""
    from cuda_support import assert_compiles

    from tvms.lowering.codegen.cuda import cuda_source, kernels_of
    from tvms.lowering.tir.gpu.pipeline import finalize_kernels, split_for_cuda

    split = split_for_cuda(parsed(f"{stem}_sketch{k}_post.tvms")["main"], cuda_target("sm_80"))
    args, want = reference_run(CUDA_SPACES[stem]["workload"])
    run_prim_func(split, *args)
    np.testing.assert_allclose(args[-1], want[-1], rtol=1e-4, atol=1e-4)
    assert_compiles(cuda_source(kernels_of(finalize_kernels(split))))


@pytest.mark.slow
def test_tune_tir_on_cuda_reaches_the_builder(tmp_path) -> None:
    """tune_tir under a cuda target (evolutionary search with the cuda mutators) samples,
    post-processes and verifies candidates and hands them to the builder; each trial is recorded,
    built (the cuda row: GPU lowering, CUDA C, NVRTC) or failed with the builder's reason."""
    from tvms.lowering.tune.builder import Builder, LocalBuilder
    from tvms.lowering.tune.postproc_verify_gpu_code import gpu_code_errors

    class Recording(Builder):
        def __init__(self) -> None:
            self.inner, self.inputs, self.results = LocalBuilder(max_workers=1), [], []

        def build(self, build_inputs: list) -> list:
            results = self.inner.build(build_inputs)
            self.inputs += build_inputs
            self.results += results
            return results

    builder = Recording()
    scheduler = ms.task_scheduler.GradientBased(measure_default=False)  # (the space's candidates only)
    database = ms.tune_tir(base("row_sum"), cuda_target("sm_75"), str(tmp_path), max_trials_global=4,
                           num_trials_per_iter=4, builder=builder, cost_model="random", task_scheduler=scheduler,
                           progress=None)
    builder.inner.shutdown()
    assert len(builder.inputs) == 4 and len(database.get_all_tuning_records()) == 4
    for given, result in zip(builder.inputs, builder.results):
        assert given.target.kind == "cuda" and not gpu_code_errors(given.mod["main"], 1024, 49152)
        assert 'thread="threadIdx.x"' in given.mod.script()
        assert (result.artifact_path is None) != (result.error_msg is None)  # (built, or why not)


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
