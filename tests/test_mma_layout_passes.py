"""InjectPermutedLayout and TransformMmaBufferLayout against Apache TVM 0.27
(fixtures/mma_layout/generate_with_tvm.py): each pass on TVM's own test inputs (InjectPermutedLayout's
five) and on the mma.sync candidate at the stage where TVM's cuda pipeline runs it, printing TVM's
output byte for byte."""
from __future__ import annotations

import pathlib

import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.tir.gpu import pipeline

GOLDEN = pathlib.Path(__file__).parent / "fixtures" / "mma_layout"
DIALECT = "tvm-0.27"


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def after(pass_name: str, text: str) -> str:
    """``text`` (a module of one PrimFunc) through the pass registered as ``pass_name``."""
    parsed = tvms.script.from_source(text)
    mod = parsed if isinstance(parsed, tvms.IRModule) else tvms.IRModule({"main": parsed})
    return get_pass(pass_name)(mod).script(dialect=DIALECT)


@pytest.mark.parametrize("case", sorted(p.name[:-len("_before.tvms")] for p in GOLDEN.glob("*_before.tvms")))
def test_prints_what_tvm_prints(case: str) -> None:
    """TVM's tests of InjectPermutedLayout (rows of 32 and of 64+, int32 and int64 indices,
    ldmatrix pointers, an fp32 accumulator through shared memory) and both passes on the 128^3
    mma.sync candidate: the fragments become per-thread registers, the accumulator re-indexed."""
    pass_name = "TransformMmaBufferLayout" if "TransformMma" in case else "InjectPermutedLayout"
    assert after(pass_name, golden(f"{case}_before.tvms")) == golden(f"{case}_after.tvms")


def test_the_cuda_pipeline_runs_them_where_tvm_does() -> None:
    steps = pipeline.BEFORE_ENTRY
    at = steps.index
    assert at(pipeline.stmt_simplify) + 1 == at(pipeline.inject_permuted_layout)
    assert at(pipeline.inject_software_pipeline) + 1 == at(pipeline.transform_mma_buffer_layout)
    assert at(pipeline.transform_mma_buffer_layout) + 1 == at(pipeline.lower_opaque_block)


def copy_into(scope: str, rows: int, cols: int, dtype: str = "float16", permuted: bool = False) -> str:
    """A function copying A element by element into a buffer of ``scope``."""
    attr = '\n            T.sblock_attr({"permuted_layout": 1})' if permuted else ""
    return f"""
@T.prim_func(s_tir=True)
def main(A: T.Buffer(({rows}, {cols}), "{dtype}")):
    F = T.sblock_alloc_buffer(({rows}, {cols}), "{dtype}", scope="{scope}")
    for i, j in T.grid({rows}, {cols}):
        with T.sblock("copy"):{attr}
            F[i, j] = A[i, j]
"""


def test_refusals() -> None:
    """Shapes the layouts do not take are refused with the reason, and so is an element-wise
    access to an operand fragment (a schedule not tensorized), as TVM refuses it."""
    with pytest.raises(TVMSError, match="divisible by 32"):
        after("InjectPermutedLayout", copy_into("shared", 16, 48, permuted=True))
    with pytest.raises(TVMSError, match=r"multiples of \(16, 8\)"):
        after("TransformMmaBufferLayout", copy_into("m16n8k8.matrixC", 24, 8, "float32"))
    with pytest.raises(TVMSError, match="explicit BufferStore of 'F'"):
        after("TransformMmaBufferLayout", copy_into("m16n8k8.matrixA", 32, 8))


@pytest.mark.slow
def test_the_lowered_mma_candidate_computes_and_compiles() -> None:
    """The 128^3 mma.sync candidate as TVM's pipeline has it before InjectPermutedLayout (TVM's
    stage, so that the passes after it start from TVM's very input), lowered on by tvms's cuda pipeline with
    asynchronous copies -- InjectPermutedLayout, InjectSoftwarePipeline (fragment pointers of each
    version), TransformMmaBufferLayout, ... -- computes the matmul exactly in the reference executor
    (ldmatrix, m16n8k8 mma.sync, cp.async), and its kernel compiles with NVRTC for sm_80 and sm_90."""
    import numpy as np
    from cuda_support import assert_compiles

    from tvms.ir.target import Target
    from tvms.lowering.codegen.cuda import cuda_source, kernels_of
    from tvms.lowering.transform import PassContext
    from tvms.runtime.reference import run_prim_func

    func = tvms.script.from_source(golden("mma_InjectPermutedLayout_before.tvms"))["main"]
    with PassContext(config={"tirx.use_async_copy": True}):
        split = pipeline.split_for_cuda(func, Target("cuda -arch=sm_80"), start=pipeline.inject_permuted_layout)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-2, 3, (128, 128)).astype("float16") for _ in range(2))  # (exact sums)
    c = np.zeros((128, 128), "float32")
    run_prim_func(split, a, b, c)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))
    source = cuda_source(kernels_of(pipeline.finalize_kernels(split)))
    assert "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" in source and "cp.async" in source
    assert_compiles(source)


def test_the_pipeline_refuses_to_start_at_a_pass_it_does_not_run() -> None:
    from tvms.ir.target import Target

    func = tvms.script.from_source(golden("mma_InjectPermutedLayout_before.tvms"))["main"]
    with pytest.raises(TVMSError, match=r"start=lower_cuda_intrin is none of .*inject_permuted_layout, "):
        pipeline.split_for_cuda(func, Target("cuda -arch=sm_80"), start=pipeline.lower_cuda_intrin)
