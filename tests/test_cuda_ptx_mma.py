"""Tensor cores through PTX: ``T.ptx_legacy.mma`` (``mma.sync``), ``T.ptx_legacy.ldmatrix``,
``T.cuda.mma_fill_legacy`` and ``T.cuda.mma_store_legacy`` in CUDA C (lowering/codegen/cuda_ptx.py),
against Apache TVM 0.27.

fixtures/ptx_mma (generate_with_tvm.py) holds three 512^3 matmuls TVM's own
test_tir_schedule_tensorize_ldmatrix_mma_numeric.py schedules with its PTX tensor intrinsics (float16
into float32, float16 with B transposed, int8 into int32, whose B tile is gathered: ldmatrix cannot
transpose 8-bit elements): scheduled, as TVM's device passes leave them, and the CUDA C TVM renders.
tvms renders TVM's device stage byte for byte; tvms's own lowering of the schedules (LowerWarpMemory
making the accumulators each lane's registers, as TVM's) gives the same instructions; NVRTC compiles
both for sm_80 and sm_90. The reference executor runs both kernels (one block of the grid over the first
steps of k) as numpy computes, with the PTX ISA's fragment layouts (runtime/reference_ptx.py), and
TVM's m16n8k8 test kernel (fragments loaded by hand) as that test expects. On a
machine with a CUDA GPU, the schedules run whole on the device (test_schedules_on_the_device).
"""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import assert_compiles, kernels_source

HERE = FIXTURES / "ptx_mma"
CASES = ("f16f16f32", "f16f16f16_trans_b", "i8i8i32")


def _module(case: str):
    return from_source((HERE / f"{case}.device.tvms").read_text())


def _lowered(case: str):
    return lower_for_cuda(from_source((HERE / f"{case}.input.tvms").read_text())[case]
                          .with_attr("global_symbol", "tvms_" + case), Target("cuda -arch=sm_80"))


def _computes_as_numpy(case: str, kernel, k_steps: int) -> None:
    """Run block 0 of ``kernel`` (the 512^3 matmul's 128 x 64 tile of C: 4 warps, each 4 x 2
    tiles of 16 x 16) over its first ``k_steps`` stages of k, read back from its script with the
    launch and the k loop cut short, and compare that tile with numpy's."""
    text = kernel.script()
    stages = 16 if case.startswith("f16") else 8
    for full, cut in (('T.launch_thread("blockIdx.y", 32)', 'T.launch_thread("blockIdx.y", 1)'),
                      (f"for k_0_0 in range({stages}):", f"for k_0_0 in range({k_steps}):")):
        assert text.count(full) == 1, full
        text = text.replace(full, cut)
    rng = np.random.default_rng(0)
    if case.startswith("i8"):
        a, b = (rng.integers(-128, 128, (512, 512)).astype(np.int8) for _ in range(2))
        c, depth = np.zeros((512, 512), np.int32), 64 * k_steps
    else:
        a, b = (rng.standard_normal((512, 512)).astype(np.float16) for _ in range(2))
        c, depth = np.zeros((512, 512), "float16" if "f16f16f16" in case else "float32"), 32 * k_steps
    run_prim_func(from_source(text), a.ravel(), b.ravel(), c.ravel())
    expected = a[:128, :depth].astype(np.float64) @ (b.T if "trans_b" in case else b)[:depth, :64].astype(np.float64)
    if c.dtype == np.float16:  # (rounded to float16 at each mma.sync: 2 k_steps of them)
        np.testing.assert_allclose(c[:128, :64], expected, rtol=0, atol=2 * k_steps * np.abs(expected).max() * 2 ** -11)
    elif c.dtype == np.float32:
        np.testing.assert_allclose(c[:128, :64], expected, rtol=1e-6, atol=1e-5)
    else:
        np.testing.assert_array_equal(c[:128, :64], expected)
    c[:128, :64] = 0
    assert not c.any()  # (nothing written outside the block's tile)


def test_tvm_kernels_compute_as_numpy():
    """TVM's own kernels (its device stage, the .cu's source): ldmatrix (.trans for B; a gather for
    int8's B) into each lane's fragments, mma.sync m16n8k16 and m16n8k32, the accumulators' fill and
    store, over one stage of k (two mma.sync steps)."""
    for case in CASES:
        _computes_as_numpy(case, _module(case)[f"{case}_kernel"], 1)


@pytest.mark.slow
def test_tvms_lowering_computes_as_numpy():
    """tvms's lowering of the three schedules (its pointers T.tvm_access_ptr, where TVM's stage has
    T.address_of) over two stages of k: the shared tiles reloaded behind the barriers."""
    for case in CASES:
        _computes_as_numpy(case, _lowered(case)[f"tvms_{case}_kernel"], 2)


@pytest.mark.skipif(not tvms.cuda(0).exist, reason="needs a CUDA GPU")
def test_schedules_on_the_device():
    """The three schedules built by tvms for sm_80 and run whole (512^3) on the GPU, against numpy."""
    rng = np.random.default_rng(0)
    device = tvms.cuda(0)
    for case in CASES:
        lib = tvms.build(from_source((HERE / f"{case}.input.tvms").read_text())[case].with_attr("global_symbol", "main"),
                         target="cuda -arch=sm_80")
        if case.startswith("i8"):
            a, b = (rng.integers(-128, 128, (512, 512)).astype(np.int8) for _ in range(2))
        else:
            a, b = (rng.standard_normal((512, 512)).astype(np.float16) for _ in range(2))
        out = "int32" if case.startswith("i8") else "float16" if "f16f16f16" in case else "float32"
        args = [tvms.nd.array(v, device=device) for v in (a, b, np.zeros((512, 512), out))]
        lib["main"](*args)
        expected = a.astype(np.float64) @ (b.T if "trans_b" in case else b).astype(np.float64)
        tolerance = {"float16": 0.05 * np.abs(expected).max(), "float32": 1e-3, "int32": 0}[out]
        np.testing.assert_allclose(args[2].numpy(), expected, rtol=0, atol=tolerance, err_msg=case)


def test_source_is_tvms_byte_for_byte_and_compiles():
    modules = [_module(case) for case in CASES]
    for case, mod in zip(CASES, modules):
        assert cuda_source(kernels_of(mod)) == (HERE / f"{case}.cu").read_text(), case
    theirs = kernels_source(modules)
    assert theirs.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2
    assert theirs.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 2
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in theirs
    ours = kernels_source([_lowered(case) for case in CASES])
    for needle in ("mma.sync.aligned", "ldmatrix.sync.aligned.m8n8.x4.shared", "ldmatrix.sync.aligned.m8n8.x4.trans",
                   "for (int i = 0; i < 16; ++i)", "for (int local_id = 0;", "float C_warp_ptr[64];"):
        assert ours.count(needle) == theirs.count(needle), needle
    signatures = [line for line in theirs.splitlines() if line.startswith('extern "C"')]
    assert [line for line in ours.splitlines() if line.startswith('extern "C"')] == [
        line.replace(") f", ") tvms_f").replace(") i8", ") tvms_i8") for line in signatures]
    assert_compiles(theirs + ours[ours.index('extern "C"'):])  # (one compile: TVM's kernels and tvms's)


def test_operand_names_are_written_as_they_are():
    """An operand whose name holds another operand's letter (B, C, D) is written once, as it is."""
    def renamed(path):
        return path.read_text().replace("A_shared_warp", "Data_BC_warp")
    got = cuda_source(kernels_of(from_source(renamed(HERE / "f16f16f32.device.tvms"))))
    assert "Data_BC_warp_ptr + ((i_0_3 * 256)" in got and got == renamed(HERE / "f16f16f32.cu")


KERNEL = '''
# from tvm.script import tir as T

@T.prim_func
def k(A_ptr: T.handle("float16", "global")):
    T.func_attr({"calling_conv": 2, "target": T.target({"arch": "sm_80", "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "", "thread_warp_size": 32}), "tirx.is_global_func": True, "tirx.kernel_launch_params": ["threadIdx.x"], "tirx.noalias": True})
    threadIdx_x = T.launch_thread("threadIdx.x", 32)
    A_shared = T.alloc_shared((256,), "float16")
    A_warp = T.alloc_buffer((256,), "float16", scope="warp")
    C_warp = T.alloc_local((8,))
    CALL
'''


@pytest.mark.parametrize("call, message", [
    ('T.ptx_legacy.mma("m16n8k16", "row", "col", "fp17", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, T.bool(False))',
     "'fp17' is not a PTX matrix type"),
    ('T.ptx_legacy.mma("16x8x16", "row", "col", "fp16", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, T.bool(False))',
     "'16x8x16' is not an MMA shape"),
    ('T.ptx_legacy.mma(16, "row", "col", "fp16", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, T.bool(False))',
     "T.ptx_legacy.mma: its shape argument is a constant string, not 16"),
    ('T.ptx_legacy.mma("m16n8k16", "row", "col", "fp16", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, threadIdx_x > 0)',
     "T.ptx_legacy.mma: its saturate argument is a constant integer, not threadIdx_x > 0"),
    ('T.ptx_legacy.ldmatrix(T.bool(False), 3, ".b16", A_warp.data, 0, T.address_of(A_shared[0]), 0)',
     "ldmatrix loads 1, 2 or 4 matrices, not 3"),
    ('T.ptx_legacy.ldmatrix(T.bool(False), threadIdx_x, ".b16", A_warp.data, 0, T.address_of(A_shared[0]), 0)',
     "T.ptx_legacy.ldmatrix: its matrices argument is a constant integer, not threadIdx_x"),
    ('T.cuda.mma_store_legacy(16, 8, T.address_of(A_shared[0]), C_warp.data, 0, 16)', "16 x 16 tiles only"),
    ("A_warp[threadIdx_x] = A_shared[threadIdx_x]", "the warp buffer 'A_warp' is accessed element by element"),
])
def test_what_ptx_cannot_do_is_refused(call: str, message: str):
    with pytest.raises(TVMSError, match=message):
        cuda_source([("k", from_source(KERNEL.replace("CALL", call)))])


def test_a_fill_of_no_constant_size_is_refused():
    """LowerWarpMemory takes the elements each lane holds from T.cuda.mma_fill_legacy's size."""
    text = (HERE / "f16f16f32.input.tvms").read_text().replace(
        "T.cuda.mma_fill_legacy(8, C_warp_1.data", "T.cuda.mma_fill_legacy(C_warp_1.elem_offset, C_warp_1.data")
    with pytest.raises(TVMSError, match="T.cuda.mma_fill_legacy's size .* must be a constant integer, not "):
        lower_for_cuda(from_source(text)["f16f16f32"], Target("cuda -arch=sm_80"))


LDMATRIX = '''
# from tvm.script import tir as T

@T.prim_func
def NAME(S_ptr: T.handle("float16", "global"), Out_ptr: T.handle("float16", "global")):
    T.func_attr({"calling_conv": 2, "target": T.target({"arch": "sm_80", "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "", "thread_warp_size": 32}), "tirx.is_global_func": True, "tirx.kernel_launch_params": ["threadIdx.x"], "tirx.noalias": True})
    S = T.decl_buffer((256,), "float16", data=S_ptr)
    Out = T.decl_buffer((256,), "float16", data=Out_ptr)
    threadIdx_x = T.launch_thread("threadIdx.x", 32)
    S_shared = T.alloc_shared((256,), "float16")
    R = T.alloc_local((8,), "float16")
    for i in range(8):
        S_shared[threadIdx_x * 8 + i] = S[threadIdx_x * 8 + i]
    T.tvm_storage_sync("shared")
    T.ptx_legacy.ldmatrix(T.bool(TRANS), NUM, ".b16", R.data, 0, T.address_of(S_shared[0]), threadIdx_x * 8)
    for i in range(NUM * 2):
        Out[threadIdx_x * 8 + i] = R[i]
'''


def test_ldmatrix_gives_each_lane_its_rows_as_ptx_documents():
    """ldmatrix.x1/.x2/.x4, with and without .trans, from 8 x 8 matrices whose rows lane 8j + r
    addresses: lane l's register j holds elements (l / 4, 2 (l % 4) + h) of matrix j, or of its
    transpose (PTX ISA, ldmatrix: "fragment layout" of each matrix). The kernels compile."""
    s = np.arange(256).astype(np.float16)
    matrices = s.reshape(4, 8, 8)
    funcs = []
    for num in (1, 2, 4):
        for trans in (False, True):
            name = f"ldmatrix_x{num}{'_trans' if trans else ''}"
            func = from_source(LDMATRIX.replace("NAME", name).replace("TRANS", str(trans)).replace("NUM", str(num)))
            out = np.zeros(256, np.float16)
            run_prim_func(func, s, out)
            for lane in range(32):
                for j in range(num):
                    m = matrices[j].T if trans else matrices[j]
                    assert list(out[lane * 8 + 2 * j:lane * 8 + 2 * j + 2]) == list(m[lane // 4, 2 * (lane % 4):][:2]), (name, lane, j)
            funcs.append((name, func))
    assert_compiles(cuda_source(funcs))


REFUSED = [
    ('T.ptx_legacy.ldmatrix(T.bool(False), 4, ".b16", A_warp.data, threadIdx_x * 8, T.address_of(A_shared[4]), threadIdx_x * 8)',
     "lane 0 gives a row 8 bytes into its shared memory, which is not 16-byte aligned"),
    ('T.ptx_legacy.mma("m8n8k4", "row", "col", "fp16", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, T.bool(False))',
     "runs mma.sync m16n8k16, m16n8k8, m16n8k32 only, not 'm8n8k4'"),
    ('if threadIdx_x < 16:\n        T.ptx_legacy.mma("m16n8k16", "row", "col", "fp16", "fp16", "fp32", A_warp.data, 0, A_warp.data, 0, C_warp.data, 0, T.bool(False))',
     "mma at .* is executed by 16 lanes of a warp"),
]


def test_what_the_executor_refuses():
    """A misaligned ldmatrix row, an mma.sync shape the executor does not model, a warp
    instruction some lanes skip: each a TVMSError (the kernels are valid CUDA: they compile)."""
    funcs = [(f"k{i}", from_source(KERNEL.replace("CALL", call))) for i, (call, _) in enumerate(REFUSED)]
    assert_compiles(cuda_source(funcs), archs=("sm_80",))
    for (_, func), (_, message) in zip(funcs, REFUSED):
        with pytest.raises(TVMSError, match=message):
            run_prim_func(func, np.zeros(256, np.float16))


# TVM's own m16n8k8 test kernel (test_tir_ptx_mma.py's gemm_mma_m16n8k8_row_col_fp16fp16fp32: C = A B^T,
# each lane loading its fragments by hand), as a device kernel; its B loop is cut to the 2 elements
# a lane holds (TVM's loads 4, the last two out of B's and the fragment's bounds)
M16N8K8 = '''
# from tvm.script import tir as T

@T.prim_func
def m16n8k8(A_ptr: T.handle("float16", "global"), B_ptr: T.handle("float16", "global"), C_ptr: T.handle("float32", "global")):
    T.func_attr({"calling_conv": 2, "target": T.target({"arch": "sm_80", "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "", "thread_warp_size": 32}), "tirx.is_global_func": True, "tirx.kernel_launch_params": ["threadIdx.x"], "tirx.noalias": True})
    A = T.decl_buffer((128,), "float16", data=A_ptr)
    B = T.decl_buffer((64,), "float16", data=B_ptr)
    C = T.decl_buffer((128,), data=C_ptr)
    tx = T.launch_thread("threadIdx.x", 32)
    MultiA = T.alloc_local((4,), "float16")
    MultiB = T.alloc_local((2,), "float16")
    Accum = T.alloc_local((4,))
    for i in range(4):
        Accum[i] = T.float32(0.0)
    for i in range(4):
        MultiA[i] = A[(tx // 4 + i // 2 * 8) * 8 + tx % 4 * 2 + i % 2]
    for i in range(2):
        MultiB[i] = B[tx // 4 * 8 + tx % 4 * 2 + i]
    T.ptx_legacy.mma("m16n8k8", "row", "col", "float16", "float16", "float32", MultiA.data, 0, MultiB.data, 0, Accum.data, 0, T.bool(False))
    for i in range(4):
        C[(tx // 4 + i // 2 * 8) * 8 + tx % 4 * 2 + i % 2] = Accum[i]
'''


def test_m16n8k8_computes_as_tvms_own_kernel_expects():
    """mma.sync m16n8k8 (float16 into float32) with TVM's test kernel's fragments computes A B^T, as
    that test expects of the GPU, and the kernel compiles."""
    func = from_source(M16N8K8)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 8)).astype(np.float16), rng.standard_normal((8, 8)).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    run_prim_func(func, a.ravel(), b.ravel(), c.ravel())
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-6, atol=1e-6)
    from tvms.lowering.tir.gpu.pipeline import finalize_kernels

    source = cuda_source(kernels_of(finalize_kernels(tvms.IRModule({"m16n8k8": func}))))
    assert "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" in source
    assert_compiles(source)
