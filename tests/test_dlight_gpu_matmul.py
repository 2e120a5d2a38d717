"""The DLight GPU rules for products (lowering/dlight/gpu_matmul.py, gpu_gemv.py,
gpu_low_batch_gemv.py): each gives TVM 0.27's schedule, printed byte for byte, on the legalized
operators of tests/fixtures/dlight_gpu/mm_* (made by generate_mm_with_tvm.py there) and on the
corpus MLP; declines, without an exception, every other legalized operator; and the scheduled
functions compute what they computed before (the reference executor, on exact integer data)."""
from __future__ import annotations

from pathlib import Path

import re

import numpy as np
import pytest

from tvms.ir.function import PrimFunc
from tvms.ir.module import IRModule
from tvms.ir.target import Target
from tvms.lowering.dlight.base import ApplyDefaultSchedule
from tvms.lowering.dlight.gpu_gemv import GEMV
from tvms.lowering.dlight.gpu_low_batch_gemv import LowBatchGEMV
from tvms.lowering.dlight.gpu_matmul import Matmul
from tvms.lowering.tir.gpu.lower_cross_thread_reduction import lower_cross_thread_reduction
from tvms.runtime.reference import run_prim_func
from tvms.runtime.tir_values import numpy_dtype
from tvms.script import from_source

HERE = Path(__file__).parent
GOLDENS = HERE / "fixtures" / "dlight_gpu"
CORPUS = HERE / "fixtures" / "corpus"  # (the copies of ../shared/corpus, see conftest.py)


def rules() -> tuple:
    return (Matmul(), GEMV(), LowBatchGEMV())


CASES = ["matmul_static", "matmul_dyn", "batch_matmul", "matmul_broadcast", "batch_matmul_dyn", "matmul_fp16",
         "matmul_nt", "matmul_nt_fp16", "linear_bias_dyn", "gemv_matmul_vector", "gemv", "gemv_batched",
         "gemv_dyn_rows", "gemv_bias", "small"]


def schedule(mod: IRModule, target: str = "cuda", only: tuple | None = None) -> IRModule:
    with Target(target):
        return ApplyDefaultSchedule(*(only or rules()))(mod)


def read(name: str) -> IRModule:
    return from_source((GOLDENS / name).read_text(), name)


@pytest.mark.parametrize("case", CASES)
def test_schedule_is_tvms(case):
    got = schedule(read(f"mm_{case}_before.tvms")).script(dialect="tvm-0.27")
    assert got + "\n" == (GOLDENS / f"mm_{case}_after.tvms").read_text()


# TVM's simplifier writes the guard of the unpadding block's rows, ``x < b`` (``x >= 0`` holds),
# as ``(ax0_0 - (b + 3) // 4 < 0 or x == 0) and x < b`` (the first clause is always true, as
# ``ax0_0`` runs over ``(b + 3) // 4``); tvms writes ``x < b``. Everything else is TVM's text.
TVM_ROW_GUARD = re.compile(r"T\.where\(\(ax0_0 - \(b \+ T\.int64\(3\)\) // T\.int64\(4\) < T\.int64\(0\) or "
                           r"(ax0_0 \* T\.int64\(4\) \+ ax0) == T\.int64\(0\)\) and \1 < b\)")


@pytest.mark.parametrize("case", ["low_batch_gemv_dyn", "low_batch_gemv_small"])
def test_low_batch_schedule_is_tvms(case):
    got = schedule(read(f"mm_{case}_before.tvms"), only=(LowBatchGEMV(),)).script(dialect="tvm-0.27")
    want, count = TVM_ROW_GUARD.subn(r"T.where(\1 < b)", (GOLDENS / f"mm_{case}_after.tvms").read_text())
    assert count == 1
    assert got + "\n" == want


@pytest.mark.parametrize("path", sorted(CORPUS.glob("relax_op_*_legalized.tvms")), ids=lambda p: p.stem)
def test_corpus_operators_are_tvms(path):
    """TVM's result on each corpus operator: the conv2d scheduled as a matmul, the others declined."""
    got = schedule(from_source(path.read_text(), str(path))).script(dialect="tvm-0.27")
    assert got + "\n" == (GOLDENS / f"mm_corpus_{path.name.replace('_legalized', '_after')}").read_text()


def test_corpus_mlp_matmuls_are_tvms():
    """The MLP's two fused matmuls of ``mlp_bias_dyn_05_dlight_cuda`` (its transposes are the
    Transpose rule's)."""
    before = from_source((CORPUS / "mlp_bias_dyn_04_zero_pipeline.tvms").read_text())
    after = from_source((CORPUS / "mlp_bias_dyn_05_dlight_cuda.tvms").read_text())
    got = schedule(before)
    names = [name for name in after if name.startswith("fused_matmul")]
    assert len(names) == 2
    for name in names:
        assert got[name].script(dialect="tvm-0.27") == after[name].script(dialect="tvm-0.27")


def test_rules_are_for_gpu_targets_only():
    mod = read("mm_matmul_static_before.tvms")
    assert schedule(mod, "llvm").script() == read("mm_matmul_static_before.tvms").script()


TENSOR_CORE_CASES = ["matmul_f16", "matmul_f16_f32", "matmul_f16_dyn", "batch_matmul_f16",
                     "batch_matmul_f16_f32_small", "linear_bias_f16_dyn", "matmul_s8", "matmul_f16_small_k"]


@pytest.mark.parametrize("case", TENSOR_CORE_CASES)
def test_tensor_core_schedule_is_tvms(case):
    """On sm_80, float16 and int8 matmuls get TVM's WMMA schedule (tc_* goldens, made by
    generate_tc_with_tvm.py): float16 accumulating in float16 or float32, int8 in int32, symbolic
    rows padded, a bias epilogue inlined; a k of 64 keeps the SIMT schedule."""
    got = schedule(read(f"tc_{case}_before.tvms"), "cuda -arch=sm_80", only=(Matmul(),)).script(dialect="tvm-0.27")
    assert got + "\n" == (GOLDENS / f"tc_{case}_after.tvms").read_text()


@pytest.mark.slow
def test_batched_tensor_core_matmul_computes_and_compiles():
    """The WMMA schedule of a legalized batched R.matmul ((2, 72, 128) x (2, 128, 80), i and j
    padded to 128, the batch on blockIdx.z), as scheduled and as lowered for cuda, computes what
    numpy computes in the reference executor; its kernel compiles with NVRTC for sm_80 and sm_90."""
    from cuda_support import assert_compiles

    from tvms.lowering.codegen.cuda import cuda_source, kernels_of
    from tvms.lowering.tir.gpu.pipeline import lower_for_cuda

    target = Target("cuda -arch=sm_80")
    mod = schedule(read("tc_batch_matmul_f16_f32_small_before.tvms"), "cuda -arch=sm_80", only=(Matmul(),))
    (name,) = list(mod)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 72, 128)).astype(np.float16), rng.standard_normal((2, 128, 80)).astype(np.float16)
    want = x.astype(np.float64) @ w.astype(np.float64)
    lowered = lower_for_cuda(mod[name].with_attr("global_symbol", "main"), target)
    for runnable in (mod[name], lowered):
        y = np.zeros((2, 72, 80), np.float32)
        run_prim_func(runnable, x, w, y)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
    source = cuda_source(kernels_of(lowered))
    assert "nvcuda::wmma::mma_sync" in source and "blockIdx.z" in source
    assert_compiles(source)


def test_tensor_cores_need_sm70_and_can_be_turned_off():
    before = read("tc_matmul_f16_f32_before.tvms")
    simt = schedule(before, "cuda", only=(Matmul(),))
    assert "wmma" not in simt.script()
    assert schedule(before, "cuda -arch=sm_61", only=(Matmul(),)).script() == simt.script()
    (name,) = list(before)
    off = IRModule({name: before[name].with_attr("dlight.do_not_tensorize", True)})
    assert "wmma" not in schedule(off, "cuda -arch=sm_80", only=(Matmul(),)).script()


# ---------------------------------------------------------------- every legalized operator
LEGALIZED = sorted((HERE / "fixtures" / "legalize").glob("*_legalized.tvms"))
# Functions TVM schedules and tvms declines: block layouts fusing an iterator under one of
# symbolic extent (a convolution of symbolic width), an einsum of symbolic sizes, and a GEMV whose
# reduction (4) is shorter than its threads (the ragged tiles' guards through rfactor)
NOT_BUILT = {("math_nn_symbolic", "conv1d"), ("math_nn_symbolic", "conv1d_transpose"), ("math_sum_dyn", "einsum"),
             ("ops1", "matmul2"), ("ops2", "matmul2")}


@pytest.mark.slow
@pytest.mark.parametrize("path", LEGALIZED, ids=lambda p: p.stem)
def test_every_legalized_operator_is_scheduled_as_tvm_does(path):
    """Each function of a legalization fixture is scheduled as TVM 0.27 schedules it (the
    mm_legalize_* goldens hold the modules where TVM scheduled something), or left as it is; no
    rule fails on any of them."""
    name = path.name.replace("_legalized.tvms", "")
    got = schedule(from_source(path.read_text(), str(path)))
    golden = GOLDENS / f"mm_legalize_{name}_after.tvms"
    want = from_source(golden.read_text()) if golden.exists() else from_source(path.read_text(), str(path))
    for func in want:
        if isinstance(want[func], PrimFunc) and (name, func) not in NOT_BUILT:
            assert got[func].script(dialect="tvm-0.27") == want[func].script(dialect="tvm-0.27"), func


# ---------------------------------------------------------------- semantics
def _arguments(func: PrimFunc, sizes: dict, rng: np.random.Generator) -> list:
    values = {}
    args = []
    for param in func.params:
        buffer = func.buffer_map[param]
        shape = []
        for dim in buffer.shape:
            shape.append(dim.value if hasattr(dim, "value") else sizes[dim.name])
            values.setdefault(dim, shape[-1])
        dtype = numpy_dtype(buffer.dtype)
        high = 2 if dtype == np.float16 else 4  # (sums of 512 products stay exact in float16)
        args.append(rng.integers(1 - high, high, size=shape).astype(dtype))
    return args


@pytest.mark.slow
def test_scheduled_functions_compute_the_same():
    """Small integer inputs: every sum is exact, so the comparison is exact too (the reference
    executor runs the kernels with GPU semantics: barriers, shared memory per block)."""
    rng = np.random.default_rng(0)
    for file, only in (("mm_small_before.tvms", None), ("mm_low_batch_gemv_small_before.tvms", (LowBatchGEMV(),))):
        before = read(file)
        after = schedule(read(file), only=only)
        for name in before:
            _check_same_results(before[name], after[name], rng)
    # a conv2d (a matmul to the Matmul rule), a broadcast batch matmul of symbolic rows
    for path, func in ((CORPUS / "relax_op_nn_conv2d_static_1_legalized.tvms", "conv2d"),
                       (HERE / "fixtures" / "legalize" / "ops1_legalized.tvms", "matmul")):
        _check_same_results(from_source(path.read_text())[func], schedule(from_source(path.read_text()))[func], rng)


def _check_same_results(original: PrimFunc, scheduled: PrimFunc, rng: np.random.Generator) -> None:
    assert scheduled.attrs.get("tir.is_scheduled")
    args = _arguments(original, {"n": 3, "b": 3}, rng)
    expected = [a.copy() for a in args]
    run_prim_func(original, *expected)
    got = [a.copy() for a in args]
    # (a reduction across threads into per-thread registers runs as the GPU lowering makes it)
    run_prim_func(lower_cross_thread_reduction(scheduled), *got)
    np.testing.assert_array_equal(got[-1], expected[-1])


def test_target_limits_are_tvms_defaults_unless_given():
    from tvms.lowering.dlight import gpu_utils as U

    cuda = Target("cuda")
    assert (U.max_num_threads(cuda), U.thread_warp_size(cuda), U.max_shared_memory_per_block(cuda)) == (1024, 32, 49152)
    assert U.sm_version(cuda) == -1 and U.sm_version(Target("cuda -arch=sm_80")) == 80
    given = Target("cuda -max_num_threads=512 -max_threads_per_block=256 -thread_warp_size=16")
    assert (U.max_num_threads(given), U.max_threads_per_block(given), U.thread_warp_size(given)) == (512, 256, 16)
    assert U.max_threads_per_block(Target("rocm")) == 256 and U.thread_warp_size(Target("rocm")) == 64
    assert not Matmul().is_target_available(Target("llvm")) and GEMV().is_target_available(Target("vulkan"))
