"""Tensor cores through PTX: ``T.ptx_legacy.mma`` (``mma.sync``), ``T.ptx_legacy.ldmatrix``,
``T.cuda.mma_fill_legacy`` and ``T.cuda.mma_store_legacy`` in CUDA C (lowering/codegen/cuda_ptx.py),
against Apache TVM 0.27.

fixtures/ptx_mma (generate_with_tvm.py) holds three 512^3 matmuls TVM's own
test_tir_schedule_tensorize_ldmatrix_mma_numeric.py schedules with its PTX tensor intrinsics (float16
into float32, float16 with B transposed, int8 into int32, whose B tile is gathered: ldmatrix cannot
transpose 8-bit elements): scheduled, as TVM's device passes leave them, and the CUDA C TVM renders.
tvms renders TVM's device stage byte for byte; tvms's own lowering of the schedules (LowerWarpMemory
making the accumulators each lane's registers, as TVM's) gives the same instructions; NVRTC compiles
both for sm_80 and sm_90. Nothing runs on a GPU (the reference executor refuses these calls by name).
"""
from __future__ import annotations

import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import assert_compiles, kernels_source

HERE = FIXTURES / "ptx_mma"
CASES = ("f16f16f32", "f16f16f16_trans_b", "i8i8i32")


def _module(case: str):
    return from_source((HERE / f"{case}.device.tvms").read_text())


def test_source_is_tvms_byte_for_byte_and_compiles():
    modules = [_module(case) for case in CASES]
    for case, mod in zip(CASES, modules):
        assert cuda_source(kernels_of(mod)) == (HERE / f"{case}.cu").read_text(), case
    theirs = kernels_source(modules)
    assert theirs.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2
    assert theirs.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 2
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in theirs
    ours = kernels_source([lower_for_cuda(from_source((HERE / f"{case}.input.tvms").read_text())[case]
                                          .with_attr("global_symbol", "tvms_" + case), Target("cuda -arch=sm_80"))
                           for case in CASES])
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
