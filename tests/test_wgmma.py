"""Hopper's warpgroup matrix multiply (``T.ptx.wgmma``) and its descriptors
(``T.cuda.wgmma.encode_matrix_descriptor``): the reference executor runs them as the PTX ISA defines
them (runtime/reference_wgmma.py), and the float16 matmul of benchmarks/wgmma_gemm.py, written with
them, computes as numpy there, compiles for sm_90a with NVRTC, and (on a Hopper GPU) runs."""
from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import ROOT
from cuda_support import ptxas_usage

sys.path.insert(0, str(ROOT / "benchmarks"))
from wgmma_gemm import kernel_text  # noqa: E402

SM90A = {"kind": "cuda", "arch": "sm_90a"}
M, N, K = 128, 256, 384  # (one block, six tiles of K: the prologue's three, then stages used again)


def _inputs(m: int, n: int, k: int) -> tuple:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((n, k)).astype("float16")
    return a, b, a.astype("float32") @ b.astype("float32").T


@pytest.mark.parametrize("overlap", [False, True])
def test_the_wgmma_matmul_computes_as_numpy_on_the_reference_executor(overlap: bool) -> None:
    a, b, want = _inputs(M, N, K)
    c = np.zeros((M, N), "float16")
    run_prim_func(from_source(kernel_text(M, N, K, overlap)), a, b, c)
    np.testing.assert_allclose(c.astype("float32"), want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("overlap", [False, True])
def test_reading_a_stage_before_its_copies_land_is_caught(overlap: bool) -> None:
    """Waiting for one group fewer than the pipeline needs: wgmma reads a stage still in flight."""
    text = kernel_text(M, N, K, overlap).replace('T.ptx.cp(2, "async", "wait_group", "")', 'T.ptx.cp(3, "async", "wait_group", "")')
    a, b, _ = _inputs(M, N, K)
    with pytest.raises(TVMSError, match="while a cp.async copy into it is in flight"):
        run_prim_func(from_source(text), a, b, np.zeros((M, N), "float16"))


@pytest.mark.parametrize("overlap", [False, True])
def test_it_compiles_for_sm_90a_without_spilling(overlap: bool) -> None:
    source = tvms.build(from_source(kernel_text(M, N, K, overlap)), target=SM90A).imported_modules[0].get_source()
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in source
    assert "cp.async.cg.shared.global" in source
    registers, spilled = ptxas_usage(source, arch="sm_90a")["wgmma_gemm_kernel"]
    assert spilled == 0 and registers <= 255


# one wgmma m64n8k16 of operands laid out by hand, each in its own layout
ONE = """
# from tvm.script import tirx as T

@T.prim_func
def one(A: T.Buffer((64, 16), "float16"), B: T.Buffer((8, 16), "float16"), D: T.Buffer((64, 8), "float32")):
    T.attr({{"tirx.device_entry": T.bool(True)}})
    v = T.cta_id([1])
    tx = T.thread_id([128])
    S = T.alloc_buffer((4096,), "float16", scope="shared")
    acc = T.alloc_local((4,))
    desc_a: T.uint64 = T.uint64(0)
    desc_b: T.uint64 = T.uint64(0)
    if tx == 0:
        for r, k in T.grid(64, 16):
            S[{a_at}] = A[r, k]
        for r, k in T.grid(8, 16):
            S[2048 + {b_at}] = B[r, k]
    for i in range(4):
        acc[i] = T.float32(1.0)
    T.cuda.cta_sync()
    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a), T.address_of(S[0]), {lbo}, {sbo}, {swizzle})
    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b), T.address_of(S[2048]), {lbo}, {sbo}, {swizzle})
    T.ptx.wgmma("fence", "sync", "aligned", "")
    T.ptx.wgmma(acc[0], acc[1], acc[2], acc[3], desc_a, desc_b, T.uint32({scale_d}), 1, {scale_b}, 0, 0, "mma_async", "sync", "aligned", "m64n8k16", "f32", "f16", "f16", "p6")
    T.ptx.wgmma("commit_group", "sync", "aligned", "")
    T.ptx.wgmma(0, "wait_group", "sync", "aligned", "")
    for i in range(4):
        D[tx // 32 * 16 + tx % 32 // 4 + i // 2 * 8, tx % 4 * 2 + i % 2] = acc[i]
"""
# where element (r, k) of a K-major operand sits, in halves: 8 x 8 core matrices of 128 bytes, the
# two along K 256 bytes apart (LBO 16) and 8-row groups 512 bytes apart (SBO 32); or 64-byte rows
# whose 16-byte chunks are XORed with (row % 8) / 2 (the 64-byte swizzle: SBO 512 bytes = 32)
LAYOUTS = {
    "no swizzle": dict(a_at="r // 8 * 256 + k // 8 * 128 + r % 8 * 8 + k % 8",
                       b_at="r // 8 * 256 + k // 8 * 128 + r % 8 * 8 + k % 8", lbo=16, sbo=32, swizzle=0),
    "64-byte swizzle": dict(a_at="r // 8 * 256 + r % 8 * 32 + T.bitwise_xor(k // 8, r % 8 // 2) * 8 + k % 8",
                            b_at="r // 8 * 256 + r % 8 * 32 + T.bitwise_xor(k // 8, r % 8 // 2) * 8 + k % 8",
                            lbo=1, sbo=32, swizzle=2),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("scale_d, scale_b", [(1, 1), (0, -1)])
def test_one_wgmma_reads_its_operands_through_their_descriptors(layout: str, scale_d: int, scale_b: int) -> None:
    """D (+)= A B^T, the accumulators where the PTX ISA puts them; scale-d 0 drops D, imm-scale-b -1
    negates B."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 16)).astype("float16")
    b = rng.standard_normal((8, 16)).astype("float16")
    d = np.zeros((64, 8), "float32")
    func = from_source(ONE.format(**LAYOUTS[layout], scale_d=scale_d, scale_b=scale_b))
    run_prim_func(func, a, b, d)
    want = scale_b * (a.astype("float64") @ b.astype("float64").T) + scale_d
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)


def test_float16_accumulators_are_packed_two_a_register() -> None:
    """wgmma's f16 accumulators: N / 4 registers of two halves, element 2 r in register r's low half."""
    text = ONE.format(**LAYOUTS["no swizzle"], scale_d=1, scale_b=1)
    text = text.replace('D: T.Buffer((64, 8), "float32")', 'D: T.Buffer((64, 4), "uint32")')
    text = text.replace("    acc = T.alloc_local((4,))", '    acc = T.alloc_local((2,), "uint32")')
    text = text.replace("    for i in range(4):\n        acc[i] = T.float32(1.0)",
                        "    for i in range(2):\n        acc[i] = T.uint32(0x3C003C00)")  # (1.0 in both halves)
    text = text.replace('T.ptx.wgmma(acc[0], acc[1], acc[2], acc[3], desc_a', "T.ptx.wgmma(acc[0], acc[1], desc_a")
    text = text.replace('"f32", "f16", "f16", "p6")', '"f16", "f16", "f16", "p4")')
    text = text.replace("""    for i in range(4):
        D[tx // 32 * 16 + tx % 32 // 4 + i // 2 * 8, tx % 4 * 2 + i % 2] = acc[i]""", """    for r in range(2):
        D[tx // 32 * 16 + tx % 32 // 4 + r * 8, tx % 4] = acc[r]""")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 16)).astype("float16")
    b = rng.standard_normal((8, 16)).astype("float16")
    d = np.zeros((64, 4), "uint32")
    run_prim_func(from_source(text), a, b, d)
    want = a.astype("float64") @ b.astype("float64").T + 1
    np.testing.assert_allclose(d.view("float16").astype("float64"), want, rtol=2e-3, atol=2e-3)


def test_bfloat16_operands() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    text = ONE.format(**LAYOUTS["no swizzle"], scale_d=0, scale_b=1).replace('"float16"), B', '"bfloat16"), B')
    text = text.replace('B: T.Buffer((8, 16), "float16")', 'B: T.Buffer((8, 16), "bfloat16")')
    text = text.replace('S = T.alloc_buffer((4096,), "float16"', 'S = T.alloc_buffer((4096,), "bfloat16"')
    text = text.replace('"f32", "f16", "f16", "p6")', '"f32", "bf16", "bf16", "p6")')
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((8, 16)).astype(ml_dtypes.bfloat16)
    d = np.zeros((64, 8), "float32")
    run_prim_func(from_source(text), a, b, d)
    np.testing.assert_allclose(d, a.astype("float64") @ b.astype("float64").T, rtol=1e-5, atol=1e-5)


def test_the_descriptor_holds_its_fields_where_the_isa_puts_them() -> None:
    text = ONE.format(**LAYOUTS["no swizzle"], scale_d=1, scale_b=1).replace(
        "    T.ptx.wgmma(\"fence\"", "    E[0] = desc_a\n    E[1] = desc_b\n    T.ptx.wgmma(\"fence\"").replace(
        'D: T.Buffer((64, 8), "float32")):', 'D: T.Buffer((64, 8), "float32"), E: T.Buffer((2,), "uint64")):')
    e = np.zeros(2, "uint64")
    run_prim_func(from_source(text), np.zeros((64, 16), "float16"), np.zeros((8, 16), "float16"),
                  np.zeros((64, 8), "float32"), e)
    start = int(e[0]) & 0x3FFF
    assert int(e[1]) & 0x3FFF == start + 4096 // 16  # (S[2048] is 4096 bytes on)
    assert [int(e[0]) >> 16 & 0x3FFF, int(e[0]) >> 32 & 0x3FFF, int(e[0]) >> 62] == [16, 32, 0]


@pytest.mark.parametrize("imms, operands, message", [
    ("1, 1, 1, 0", "desc_a", "with a transposed operand (imm-trans 1)"),  # (A transposed)
    ("1, 1, 0, 1", "desc_a", "with a transposed operand (imm-trans 1)"),  # (B transposed)
    # (A from registers: wgmma's _rs form)
    ("1, 1, 0", "u[0], u[1], u[2], u[3]", "does not run TVM 0.27's PTX instruction T.ptx.wgmma "
                                          "(wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16)"),
])
def test_what_it_does_not_model_is_refused_by_name(imms: str, operands: str, message: str) -> None:
    text = ONE.format(**LAYOUTS["no swizzle"], scale_d=1, scale_b=1)
    text = text.replace("desc_a, desc_b, T.uint32(1), 1, 1, 0, 0,", f"{operands}, desc_b, T.uint32(1), {imms},")
    if operands != "desc_a":
        text = text.replace('"p6")', '"p9")').replace("    acc = T.alloc_local((4,))",
                                                       '    acc = T.alloc_local((4,))\n    u = T.alloc_local((4,), "uint32")')
    with pytest.raises(TVMSError, match=re.escape(message)):
        run_prim_func(from_source(text), np.zeros((64, 16), "float16"), np.zeros((8, 16), "float16"),
                      np.zeros((64, 8), "float32"))


def _hopper() -> bool:
    dev = tvms.cuda(0)
    return dev.exist and dev.compute_version == "9.0"


@pytest.mark.skipif(not _hopper(), reason="needs a Hopper GPU (sm_90)")
@pytest.mark.parametrize("overlap", [False, True])
def test_on_a_hopper_gpu_it_computes_as_numpy(overlap: bool) -> None:
    m, n, k = 256, 512, 512
    a, b, want = _inputs(m, n, k)
    lib = tvms.build(from_source(kernel_text(m, n, k, overlap)), target=SM90A)
    dev = tvms.cuda(0)
    c = tvms.nd.array(np.zeros((m, n), "float16"), device=dev)
    lib(tvms.nd.array(a, device=dev), tvms.nd.array(b, device=dev), c)
    np.testing.assert_allclose(c.numpy().astype("float32"), want, rtol=2e-3, atol=5e-2)


def test_a_descriptor_into_no_shared_memory_names_the_thread() -> None:
    text = ONE.format(**LAYOUTS["no swizzle"], scale_d=1, scale_b=1).replace(
        "    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a), T.address_of(S[0]), 16, 32, 0)\n", "")
    with pytest.raises(TVMSError, match=r"its descriptor's start: the shared address 0x0 is in no allocation .*"
                                        r"\(by thread \(threadIdx.x=0\)"):
        run_prim_func(from_source(text), np.zeros((64, 16), "float16"), np.zeros((8, 16), "float16"),
                      np.zeros((64, 8), "float32"))
