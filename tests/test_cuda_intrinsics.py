"""TVM 0.27's CUDA device intrinsics (``T.cuda.*``): read and printed as TVM prints them (the
texts fixtures/tvm027_printing/cuda_intrinsics_*.tvms, checked by test_tvm027_printing), rendered
as TVM's CUDA code generator renders them (fixtures/cuda_intrinsics: kernels and the CUDA C TVM
wrote for them, generate_with_tvm.py) and compiled by NVRTC, run on the reference executor, and
refused by name where tvms has no form for them."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import CHECK_ARCHS, assert_compiles

GOLDEN = FIXTURES / "cuda_intrinsics"


def rendered(case: str) -> str:
    return cuda_source(kernels_of(from_source((GOLDEN / f"{case}.tvms").read_text(), f"{case}.tvms")))


def helpers_and_kernels(source: str) -> tuple[str, set[str], str]:
    """The preamble, the helper definitions (TVM writes them in the order of a hash table: compared
    as a set) and the kernels of a CUDA source."""
    kernels = source.index('extern "C"')
    first = source.index("\n__", source.index("#define ushort"))
    return source[:first], set(source[first:kernels].strip("\n").split("\n\n")), source[kernels:]


CASES = sorted(p.stem for p in GOLDEN.glob("*.tvms"))


@pytest.mark.parametrize("case", CASES)
def test_cuda_source_is_tvms(case: str) -> None:
    assert helpers_and_kernels(rendered(case)) == helpers_and_kernels((GOLDEN / f"{case}.cu").read_text())


def test_nvrtc_compiles_them() -> None:
    for case in CASES:  # (elect.sync and the cluster's registers and barrier are sm_90's)
        assert_compiles(rendered(case), archs=("sm_90",) if case.startswith("sm90") else CHECK_ARCHS)


def test_a_uint64_constant_is_written_with_its_suffix() -> None:
    # (TVM writes (uint64_t)1ULL; without the suffix a constant above 2**63 is out of range)
    assert "tvm_builtin_cuda_nano_sleep((uint64_t)1ULL);" in rendered("sm80")


REFERENCE = """
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "uint64"), C: T.Buffer((64,), "float32")):
    bx = T.launch_thread("blockIdx.x", 2)
    tx = T.launch_thread("threadIdx.x", 32)
    smem = T.alloc_shared((32,))
    smem[tx] = A[bx * 32 + tx]
    T.cuda.cta_sync()
    T.cuda.thread_fence()
    B[bx * 32 + tx] = T.cuda.make_float2(smem[31 - tx], smem[tx])
    C[bx * 32 + tx] = T.cuda.float2_x(B[bx * 32 + tx]) - T.cuda.uint_as_float(T.cuda.float_as_uint(T.cuda.float2_y(B[bx * 32 + tx])))
"""


def test_the_reference_executor_runs_them_as_a_gpu_does() -> None:
    a = np.random.default_rng(0).standard_normal(64).astype("float32")
    b, c = np.zeros(64, "uint64"), np.zeros(64, "float32")
    run_prim_func(from_source(REFERENCE), a, b, c)
    reversed_a = a.reshape(2, 32)[:, ::-1].reshape(64)
    np.testing.assert_array_equal(b.view("float32").reshape(64, 2), np.stack([reversed_a, a], axis=1))
    np.testing.assert_array_equal(c, reversed_a - a)


VOTES = """
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64,), "float32"), V: T.Buffer((64,), "uint32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "uint32")):
    tx = T.launch_thread("threadIdx.x", 64)
    B[tx] = T.cuda.warp_reduce(A[tx], "sum", 32) + T.cuda.warp_reduce(A[tx], "max", 8)
    C[tx] = T.cuda.ballot_sync(T.uint32(4294967295), T.Cast("int32", V[tx] % T.uint32(3) == T.uint32(0))) + T.Cast("uint32", T.cuda.any_sync(T.uint32(4294967295), T.Cast("int32", V[tx] == T.uint32(100)))) + T.cuda.reduce_add_sync_u32(T.uint32(4294967295), V[tx]) + T.cuda.reduce_min_sync_u32(T.uint32(65535), V[tx])
"""


def test_warp_votes_and_reductions_on_the_reference_executor() -> None:
    rng = np.random.default_rng(1)
    a, v = rng.integers(-8, 8, 64).astype("float32"), rng.integers(0, 1000, 64).astype("uint32")
    v[5] = 100  # (warp 0 has a lane that votes yes to any_sync; warp 1 none)
    b, c = np.zeros(64, "float32"), np.zeros(64, "uint32")
    run_prim_func(from_source(VOTES), a, v, b, c)
    np.testing.assert_array_equal(b, np.repeat(a.reshape(2, 32).sum(1), 32) + np.repeat(a.reshape(8, 8).max(1), 8))
    warps = v.reshape(2, 32).astype("uint64")
    ballot = [sum(1 << i for i in range(32) if w[i] % 3 == 0) for w in warps]
    expected = [(ballot[g] + int((w == 100).any()) + int(w.sum()) + int(w[:16].min())) & 0xFFFFFFFF  # (mask: lanes 0-15)
                for g, w in enumerate(warps)]
    np.testing.assert_array_equal(c, np.repeat(np.array(expected, "uint32"), 32))


def test_syncthreads_and_or_are_barriers_that_vote() -> None:
    func = from_source("""
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64,), "int32"), C: T.Buffer((64,), "int64")):
    bx = T.launch_thread("blockIdx.x", 2)
    tx = T.launch_thread("threadIdx.x", 32)
    C[bx * 32 + tx] = T.cuda.syncthreads_and(A[bx * 32 + tx]) * T.int64(2) + T.cuda.syncthreads_or(A[bx * 32 + tx] - 1)
""")
    a, c = np.ones(64, "int32"), np.zeros(64, "int64")
    a[40] = 0  # (block 1: not all non-zero, and one A - 1 is)
    run_prim_func(func, a, c)
    np.testing.assert_array_equal(c, np.repeat([2, 1], 32))


def test_thread_rank_is_the_threads_number_in_its_block() -> None:
    func = from_source("""
# from tvm.script import tirx as T

@T.prim_func
def main(out: T.Buffer((2, 32), "int32")):
    bx = T.launch_thread("blockIdx.x", 2)
    ty = T.launch_thread("threadIdx.y", 2)
    tx = T.launch_thread("threadIdx.x", 16)
    out[bx, tx * 2 + ty] = T.cuda.thread_rank()
""")
    out = np.zeros((2, 32), "int32")
    run_prim_func(func, out)  # (threadIdx.x runs fastest: thread (x, y) is y * 16 + x)
    np.testing.assert_array_equal(out, np.tile(np.arange(32).reshape(2, 16).T.reshape(32), (2, 1)))


ATOMICS = """# from tvm.script import tirx as T

@T.prim_func
def main(C: T.Buffer((4,), "int32"), won: T.Buffer((64,), "int32")):
    bx = T.launch_thread("blockIdx.x", 2)
    tx = T.launch_thread("threadIdx.x", 32)
    count = T.alloc_shared((1,), "int32")
    if tx == 0:
        count[0] = 0
    T.cuda.cta_sync()
    T.evaluate(T.cuda.atomic_add(T.address_of(count[0]), 1))
    T.evaluate(T.cuda.atomic_add(T.address_of(C[0]), tx))
    won[bx * 32 + tx] = T.cuda.atomic_cas(T.address_of(C[1]), 0, bx * 32 + tx + 1)
    T.cuda.cta_sync()
    if tx == 0:
        C[2 + bx] = count[0]
"""


def test_atomics_on_the_reference_executor_and_through_the_build() -> None:
    """Each thread adds to a shared counter and to a global sum; one thread of the grid wins the
    compare-and-swap (in the reference's thread order, the first: a GPU picks any)."""
    func = from_source(ATOMICS)
    c, won = np.zeros(4, "int32"), np.zeros(64, "int32")
    run_prim_func(func, c, won)
    assert list(c) == [2 * sum(range(32)), 1, 32, 32] and list(won[:2]) == [0, 1] and (won == 0).sum() == 1
    source = tvms.build(func, target="cuda -arch=sm_80").get_source()
    assert "tvm_builtin_cuda_atomic_cas((&(C_ptr[1])), 0, (((((int)blockIdx.x) * 32) + ((int)threadIdx.x)) + 1))" in source
    # ThreadSync, as TVM's, sees no access in T.address_of(count[0]) (nor a barrier in T.cuda.cta_sync):
    # its one barrier goes before the read of count[0] that follows its write by thread 0
    assert ("  tvm_builtin_cuda_cta_sync();\n  tvm_builtin_cuda_atomic_add((&(count_ptr[0])), 1);\n" in source
            and "  tvm_builtin_cuda_cta_sync();\n  __syncthreads();\n  if (((int)threadIdx.x) == 0) {\n    C_ptr[" in source
            and source.count("__syncthreads();") == 2)  # (the other: in the helper)
    assert_compiles(source)


def test_a_kernel_with_cta_sync_still_gets_threadsyncs_barriers() -> None:
    """TVM's ThreadSync does not see T.cuda.cta_sync and adds its own barriers all the same: the
    executor adds them too (a kernel that writes the shared array again after others read it
    is race-free once built), and the build writes them where TVM 0.27 writes them."""
    racy = from_source(REFERENCE.replace("    C[bx", "    smem[tx] = T.float32(0)\n    C[bx"))
    a = np.random.default_rng(0).standard_normal(64).astype("float32")
    b, c = np.zeros(64, "uint64"), np.zeros(64, "float32")
    run_prim_func(racy, a, b, c)
    np.testing.assert_array_equal(c, a.reshape(2, 32)[:, ::-1].reshape(64) - a)
    source = tvms.build(racy, target="cuda -arch=sm_80").get_source()
    kernel = source[source.index("  smem_ptr[((int)threadIdx.x)] = A_ptr"):]
    assert kernel.startswith(  # (TVM 0.27's, less the kernel's head)
        "  smem_ptr[((int)threadIdx.x)] = A_ptr[((((int)blockIdx.x) * 32) + ((int)threadIdx.x))];\n"
        "  tvm_builtin_cuda_cta_sync();\n  tvm_builtin_cuda_thread_fence();\n  __syncthreads();\n"
        "  B_ptr[((((int)blockIdx.x) * 32) + ((int)threadIdx.x))] = tvm_builtin_make_float2(smem_ptr[(31 - "
        "((int)threadIdx.x))], smem_ptr[((int)threadIdx.x)]);\n  __syncthreads();\n"
        "  smem_ptr[((int)threadIdx.x)] = 0x0p+0f/*0.000000e+00*/;\n")


WARP_REDUCTIONS = """
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64,), "{dtype}"), B: T.Buffer((3, 64), "{dtype}"), V: T.Buffer((64,), "uint32"), C: T.Buffer((64,), "uint32")):
    tx = T.launch_thread("threadIdx.x", 64)
    B[0, tx] = T.cuda.warp_sum(A[tx], 4)
    B[1, tx] = T.cuda.warp_max(A[tx], 8)
    B[2, tx] = T.cuda.warp_min(A[tx], 16)
    C[tx] = T.cuda.reduce_min_sync_u32(T.uint32(4294967295), V[tx])
"""


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_warp_reductions_over_fewer_lanes_than_a_warp(dtype: str) -> None:
    """Each reduction over its own width, of negative values too (T.cuda.warp_min and the vote
    reduce_min_sync_u32 are not the same reduction)."""
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(64) * 100).astype(dtype)
    v = rng.integers(5, 2**32, 64, dtype="uint64").astype("uint32")
    b, c = np.zeros((3, 64), dtype), np.zeros(64, "uint32")
    run_prim_func(from_source(WARP_REDUCTIONS.format(dtype=dtype)), a, b, v, c)
    np.testing.assert_allclose(b[0], np.repeat(a.reshape(16, 4).sum(1), 4), rtol=1e-6)
    np.testing.assert_array_equal(b[1], np.repeat(a.reshape(8, 8).max(1), 8))
    np.testing.assert_array_equal(b[2], np.repeat(a.reshape(4, 16).min(1), 16))
    np.testing.assert_array_equal(c, np.repeat(v.reshape(2, 32).min(1), 32))


@pytest.mark.parametrize("call, message", [
    ('A[tx] = T.cuda.warp_reduce(A[tx], "avg", 32)', "reduces by sum, max or min, not 'avg'"),
    ('A[tx] = T.cuda.warp_reduce(A[tx], "sum", 3)', "width is a constant power of two from 2 to 32, not 3"),
    ('A[tx] = T.cuda.warp_reduce(A[tx], "sum", 64)', "width is a constant power of two from 2 to 32, not 64"),
    ('A[tx] = T.cuda.warp_reduce(A[tx], "sum", 0)', "width is a constant power of two from 2 to 32, not 0"),
    # (the build's lowering names the thread's variable after its thread)
    ("A[tx] = T.cuda.warp_sum(A[tx], width=tx)", "width is a constant power of two from 2 to 32, not (tx|threadIdx_x)"),
])
def test_a_warp_reduction_the_code_generator_refuses_the_executor_refuses_so(call: str, message: str) -> None:
    func = from_source(KERNEL_64.format(call))
    with pytest.raises(TVMSError, match=message):
        tvms.build(func, target="cuda -arch=sm_80")
    with pytest.raises(TVMSError, match=message):
        run_prim_func(func, np.zeros(64, "float32"), np.zeros(64, "int32"))


KERNEL_64 = """
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "int32")):
    tx = T.launch_thread("threadIdx.x", 64)
    {}
"""


@pytest.mark.parametrize("call, message", [
    ("C[tx] = T.Cast(\"int32\", T.cuda.reduce_min_sync_u32(T.uint32(0), T.uint32(tx)))",
     r"lane 0 votes at `.*reduce_min_sync_u32.*` \(.*\) with the mask 0x0, which names no lane"),
    ("C[tx] = T.cuda.atomic_add(T.if_then_else(tx < 3, T.address_of(C[0]), T.address_of(C[1])), 1)",
     r"pointer of T.cuda.atomic_add only as a buffer's data, T.address_of\(...\) or T.tvm_access_ptr\(...\), "
     r"not T.if_then_else"),
])
def test_what_the_executor_cannot_run_is_refused_by_name(call: str, message: str) -> None:
    with pytest.raises(TVMSError, match=message):
        run_prim_func(from_source(KERNEL_64.format(call)), np.zeros(64, "float32"), np.zeros(64, "int32"))


def test_func_calls_lazy_args_out_of_range_is_refused_as_tvm_refuses_it() -> None:
    with pytest.raises(TVMSError, match=r"lazy_args index 1 is out of range \(it passes 1 argument\)"):
        from_source(KERNEL.format('T.cuda.func_call("f", tx, source_code="", lazy_args=(0, 1))'))


KERNEL = """
# from tvm.script import tirx as T

@T.prim_func
def main(out: T.Buffer((32,), "int32")):
    tx = T.launch_thread("threadIdx.x", 32)
    {}
"""


def test_intrinsics_without_a_form_are_refused_by_name() -> None:
    func = from_source(KERNEL.format('T.cuda.iket.mark("start")'))
    with pytest.raises(TVMSError, match=r"T\.cuda\.iket\.mark"):
        run_prim_func(func, np.zeros(32, "int32"))
    with pytest.raises(TVMSError, match=r"the cuda code generator does not compile T\.cuda\.iket\.mark"):
        tvms.build(func, target="cuda -arch=sm_80")


def test_result_types_follow_tvm() -> None:
    func = from_source(KERNEL.format('out[tx] = T.Cast("int32", T.cuda.mov_sreg(64, "globaltimer") + '
                                     'T.cuda.func_call("f", tx, source_code="", return_type="int64"))'))
    value = func.body.body.value.value  # (the store's cast's operand)
    assert str(value.dtype) == "int64" and str(value.a.dtype) == "int64" and str(value.b.dtype) == "int64"
