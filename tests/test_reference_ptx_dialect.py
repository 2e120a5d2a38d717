"""The reference executor runs TVM 0.27's PTX dialect (``T.ptx.*``) with GPU semantics: kernels
written as TVM prints them, checked against numpy and values computed by hand from the PTX ISA
manual's definitions."""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.expr import Call
from tvms.ir.visitor import walk
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES


def kernel(params: str, body: str, threads: int = 1) -> str:
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return f"""
# from tvm.script import tirx as T

@T.prim_func
def kernel({params}):
    T.attr({{"tirx.device_entry": T.bool(True)}})
    v = T.cta_id([1])
    tx = T.thread_id([{threads}])
{lines}
"""


def run(params: str, body: str, *arrays: np.ndarray, threads: int = 1) -> None:
    run_prim_func(from_source(kernel(params, body, threads)), *arrays)


def u32(x: int) -> int:
    return x & 0xFFFFFFFF


def f32_bits(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


# ---------------------------------------------------------------- integers
def test_integer_arithmetic_wraps_saturates_and_widens_as_ptx() -> None:
    a = np.array([3, -7, 5, 100000, 2**31 - 10, 20, -17, 5], "int32")
    out = np.zeros(12, "int64")
    run('A: T.Buffer((8,), "int32"), O: T.Buffer((12,), "int64")', """
si: T.int32
sw: T.int64
cnt: T.uint32
T.ptx.add(si, A[0], A[1], "", "s32", "")
O[0] = T.Cast("int64", si)
T.ptx.mul(si, si, A[2], "lo", "s32", "")
T.ptx.mul(sw, si, A[3], "wide", "s32", "")
O[1] = sw
T.ptx.mad(sw, si, A[0], sw, "wide", "s32", "")
O[2] = sw
T.ptx.popc(cnt, si, "b32", "")
O[3] = T.Cast("int64", cnt)
T.ptx.add(si, A[4], A[5], "sat", "s32", "")
O[4] = T.Cast("int64", si)
T.ptx.add(si, A[4], A[5], "", "s32", "")
O[5] = T.Cast("int64", si)
T.ptx.mul(si, A[4], A[3], "hi", "s32", "")
O[6] = T.Cast("int64", si)
T.ptx.div(si, A[6], A[7], "s32", "")
O[7] = T.Cast("int64", si)
T.ptx.rem(si, A[6], A[7], "s32", "")
O[8] = T.Cast("int64", si)
T.ptx.abs(si, A[1], "s32", "")
O[9] = T.Cast("int64", si)
T.ptx.dp4a(si, A[1], A[1], A[0], "s32", "s32", "")
O[10] = T.Cast("int64", si)
T.ptx.min(si, A[1], A[0], "", "", "", "", "", "s32", "")
O[11] = T.Cast("int64", si)
""", a, out)
    lo = -4 * 5
    big = 2**31 - 10
    minus7 = np.array([-7], "int32").view("int8").astype(int).tolist()  # (its four bytes, signed)
    assert out.tolist() == [-4, lo * 100000, lo * 3 + lo * 100000, bin(u32(lo)).count("1"),
                            2**31 - 1, big + 20 - 2**32, (big * 100000) >> 32, -3, -2, 7,
                            3 + sum(x * x for x in minus7), -7]


def test_bit_instructions() -> None:
    a = np.array([0x12345678, 0x9ABCDEF0, 0xF0, 0x0000FF00, 5, 3210, 0x80000000, 0], "uint32")
    out = np.zeros(12, "uint32")
    run('A: T.Buffer((8,), "uint32"), O: T.Buffer((12,), "uint32")', """
d: T.uint32
s: T.int32
T.ptx.prmt(d, A[0], A[1], T.uint32(0x7351), "b32", "", "")
O[0] = d
T.ptx.prmt(d, A[0], A[1], T.uint32(1), "b32", "f4e", "")
O[1] = d
T.ptx.lop3(d, A[0], A[1], A[2], 0x96, "b32", "")
O[2] = d
T.ptx.shf(d, A[0], A[1], T.uint32(8), "l", "clamp", "b32", "")
O[3] = d
T.ptx.shf(d, A[0], A[1], T.uint32(40), "r", "wrap", "b32", "")
O[4] = d
T.ptx.clz(d, A[3], "b32", "")
O[5] = d
T.ptx.brev(d, A[2], "b32", "")
O[6] = d
T.ptx.bfe(d, A[0], T.uint32(4), T.uint32(8), "u32", "")
O[7] = d
T.ptx.bfe(s, A[6], T.uint32(28), T.uint32(8), "s32", "")
O[8] = T.Cast("uint32", s)
T.ptx.bfi(d, A[4], A[0], T.uint32(8), T.uint32(4), "b32", "")
O[9] = d
T.ptx.shr(s, A[6], T.uint32(4), "s32", "")
O[10] = T.Cast("uint32", s)
T.ptx.shl(d, A[0], T.uint32(33), "b32", "")
O[11] = d
""", a, out)
    x, y = 0x12345678, 0x9ABCDEF0
    raw = (y << 32 | x).to_bytes(8, "little")
    assert out.tolist() == [
        int.from_bytes(bytes([raw[1], raw[5], raw[3], raw[7]]), "little"),
        int.from_bytes(raw[1:5], "little"),
        x ^ y ^ 0xF0,  # (lop3's table 0x96: a ^ b ^ c)
        u32(((y << 32 | x) << 8) >> 32),
        u32((y << 32 | x) >> 8),
        16,
        0x0F000000,
        0x67,
        u32(-8),  # (bits 28..31 of 0x80000000, sign-extended from bit 31)
        (x & ~0xF00) | 0x500,
        u32(-(2**31) >> 4),
        0,
    ]


def test_logic_and_predicate_registers() -> None:
    out = np.zeros(6, "uint32")
    run('O: T.Buffer((6,), "uint32")', """
d: T.uint32 = T.uint32(12)
p: T.uint32 = T.uint32(0)
q: T.uint32 = T.uint32(7)
T.ptx.and_(p, q, d, "pred", "p1,p2")
O[0] = p
T.ptx.not_(p, p, "pred", "p1")
O[1] = p
T.ptx.xor(d, d, T.uint32(10), "b32", "")
O[2] = d
T.ptx.not_(d, d, "b32", "")
O[3] = d
T.ptx.cnot(d, d, "b32", "")
O[4] = d
T.ptx.lop3(d, p, d, d, d, 254, q, "or", "b32", "p6")
O[5] = p
""", out)
    assert out.tolist() == [1, 0, 0b0110, u32(~0b0110), 0, 1]


# ---------------------------------------------------------------- floats
def test_float_arithmetic_rounds_once_by_its_mode() -> None:
    a = np.array([1.0, 3.0, 0.1, 1e-45, 2.0, -0.5, 16.0, np.nan], "float32")
    out = np.zeros(14, "float32")
    run('A: T.Buffer((8,), "float32"), O: T.Buffer((14,), "float32")', """
f: T.float32
T.ptx.div(f, A[0], A[1], "rn", "", "f32", "")
O[0] = f
T.ptx.div(f, A[0], A[1], "rz", "", "f32", "")
O[1] = f
T.ptx.div(f, A[0], A[1], "rp", "", "f32", "")
O[2] = f
T.ptx.fma(f, A[2], A[1], A[2], "rn", "", "", "f32", "", "")
O[3] = f
T.ptx.add(f, A[3], A[3], "rn", "ftz", "", "f32", "", "")
O[4] = f
T.ptx.add(f, A[4], A[5], "rn", "", "sat", "f32", "", "")
O[5] = f
T.ptx.sqrt(f, A[4], "rn", "", "f32", "")
O[6] = f
T.ptx.sqrt(f, A[4], "rp", "", "f32", "")
O[7] = f
T.ptx.ex2(f, A[1], "approx", "ftz", "f32", "")
O[8] = f
T.ptx.lg2(f, A[6], "approx", "", "f32", "")
O[9] = f
T.ptx.rsqrt(f, A[6], "approx", "", "f32", "")
O[10] = f
T.ptx.max(f, A[7], A[1], "", "", "", "", "", "f32", "")
O[11] = f
T.ptx.neg(f, A[5], "", "f32", "")
O[12] = f
T.ptx.abs(f, A[5], "", "f32", "")
O[13] = f
""", a, out)
    third = np.float32(1) / np.float32(3)  # (rounded up: rz is below it, rp is it)
    exact_fma = float(np.float64(np.float32(0.1)) * 3 + np.float64(np.float32(0.1)))  # (exact in float64)
    assert out[0] == third and out[1] == np.nextafter(third, np.float32(0)) and out[2] == third
    assert out[3] == np.float32(exact_fma)
    assert out[4] == 0 and out[5] == 1
    assert out[6] == np.float32(np.sqrt(2.0)) and out[7] == np.nextafter(out[6], np.float32(2))
    assert out[8:11].tolist() == [8.0, 4.0, 0.25]
    assert out[11:].tolist() == [3.0, 0.5, 0.5]


def test_half_precision_and_packed_pairs() -> None:
    h = np.array([1.5, 2.25, -3.0, 0.5], "float16")
    out = np.zeros(4, "float16")
    run('H: T.Buffer((4,), "float16"), O: T.Buffer((4,), "float16")', """
x: T.uint32
y: T.uint32
r: T.float16
T.ptx.add(r, H[0], H[1], "rn", "", "", "f16", "")
O[0] = r
T.ptx.mov(x, H[0], H[1], "b32", "")
T.ptx.mov(y, H[2], H[3], "b32", "")
T.ptx.fma(x, x, y, x, "rn", "", "", "", "", "f16x2", "")
T.ptx.mov(O[1], O[2], x, "b32", "")
T.ptx.neg(r, H[2], "", "f16", "")
O[3] = r
""", h, out)
    assert out.tolist() == [3.75, 1.5 * -3.0 + 1.5, 2.25 * 0.5 + 2.25, 3.0]


def test_compare_and_select() -> None:
    a = np.array([-1, 2], "int32")
    f = np.array([1.0, np.nan], "float32")
    out = np.zeros(8, "uint32")
    run('A: T.Buffer((2,), "int32"), F: T.Buffer((2,), "float32"), O: T.Buffer((8,), "uint32")', """
p: T.uint32
q: T.uint32
d: T.uint32
T.ptx.setp(p, A[0], A[1], "lt", "", "s32", "")
O[0] = p
T.ptx.setp(p, A[0], A[1], "lo", "", "u32", "")
O[1] = p
T.ptx.setp(p, q, F[0], F[1], "ltu", "", "f32", "")
O[2] = p * T.uint32(10) + q
T.ptx.setp(p, F[0], F[1], "num", "", "f32", "")
O[3] = p
T.ptx.selp(d, T.uint32(7), T.uint32(9), q, "b32", "p3")
O[4] = d
T.ptx.set(d, A[0], A[1], "gt", "", "u32", "s32", "")
O[5] = d
T.ptx.slct(d, T.uint32(1), T.uint32(2), A[0], "", "u32", "s32", "")
O[6] = d
T.ptx.testp(p, F[1], "notanumber", "f32", "")
O[7] = p
""", a, f, out)
    assert out.tolist() == [1, 0, 10, 0, 9, 0, 2, 1]  # (setp p|q: q is the negation)


def test_conversions() -> None:
    f = np.array([2.5, -3.5, 1e10, np.nan, 0.1], "float32")
    out = np.zeros(7, "int32")
    half = np.zeros(2, "float16")
    run('F: T.Buffer((5,), "float32"), O: T.Buffer((7,), "int32"), H: T.Buffer((2,), "float16")', """
s: T.int32
d: T.uint32
h: T.float16
T.ptx.cvt(s, F[0], "rni", "", "", "", "", "s32", "f32", "")
O[0] = s
T.ptx.cvt(s, F[1], "rzi", "", "", "", "", "s32", "f32", "")
O[1] = s
T.ptx.cvt(s, F[2], "rni", "", "", "", "", "s32", "f32", "")
O[2] = s
T.ptx.cvt(s, F[3], "rni", "", "", "", "", "s32", "f32", "")
O[3] = s
T.ptx.cvt(d, T.int32(-5), "", "", "", "", "sat", "u8", "s32", "")
O[4] = T.Cast("int32", d)
T.ptx.cvt_pack(d, 70000, -2, "sat", "u16", "s32", "")
O[5] = T.Cast("int32", d)
T.ptx.cvt(s, T.int32(300), "", "", "", "", "", "s8", "s32", "")
O[6] = s
T.ptx.cvt(h, F[4], "rz", "", "", "", "", "f16", "f32", "")
H[0] = h
T.ptx.cvt(h, F[4], "rn", "", "", "", "", "f16", "f32", "")
H[1] = h
""", f, out, half)
    assert out.tolist() == [2, -3, 2**31 - 1, 0, 0, -(1 << 16), 44]  # (0xFFFF0000: 70000 clamped above -2 clamped)
    nearest = np.float16(np.float32(0.1))
    toward_zero = nearest if nearest < np.float32(0.1) else np.nextafter(nearest, np.float16(0))
    assert half[1] == nearest and half[0] == toward_zero


# ---------------------------------------------------------------- memory
def test_loads_and_stores_through_every_address_form() -> None:
    a = np.arange(64, dtype="float32")
    out = np.zeros(32, "float32")
    run('A: T.Buffer((64,), "float32"), O: T.Buffer((32,), "float32")', """
smem = T.alloc_shared((32,), "float32")
value: T.float32
x: T.float32
addr: T.uint64
T.ptx.ld(value, T.ptx.addr(A.data, tx * 4 + 128), "", "", "", "global", "", "", "", "", "", "f32", "")
T.ptx.st(T.cuda.cvta_generic_to_shared(T.address_of(smem[31 - tx])), value, "", "", "", "shared", "", "", "", "b32", "")
T.cuda.cta_sync()
T.ptx.ld(value, T.address_of(smem[tx]), "", "", "", "shared", "", "", "", "", "", "f32", "")
T.ptx.ldu(x, T.address_of(A[tx]), "global", "b32", "")
T.ptx.prefetch(T.address_of(A[0]), "global", "L2", "", "", "")
T.ptx.cvta(addr, smem.data, "to", "shared", "u64", "")
T.ptx.ld(x, T.ptx.addr(T.Cast("uint32", addr), tx * 4), "", "", "", "shared", "", "", "", "", "", "f32", "")
O[tx] = value * T.float32(100) + x
""", a, out, threads=32)
    np.testing.assert_array_equal(out, (63 - np.arange(32)) * 100 + (63 - np.arange(32)))


def test_vector_loads_and_stores_and_packing() -> None:
    a = np.arange(8, dtype="int32") * 3
    out = np.zeros(8, "int32")
    run('A: T.Buffer((8,), "int32"), O: T.Buffer((8,), "int32")', """
r0: T.int32
r1: T.int32
r2: T.int32
r3: T.int32
packed: T.uint64
hi: T.uint32
T.ptx.ld(r0, r1, r2, r3, A.data, "", "", "global", "", "nc", "", "", "", "v4", "s32", "")
T.ptx.st(T.ptx.addr(O.data, 16), r3, r2, r1, r0, "", "", "global", "", "", "", "v4", "b32", "")
T.ptx.mov(packed, A[6], A[7], "b64", "")
T.ptx.mov(hi, packed, "b64", "s0")
O[0] = T.Cast("int32", hi)
T.ptx.ld(r0, T.address_of(A[5]), "", "", "", "global", "", "", "", "", "", "s8", "")
O[1] = r0
""", a, out)
    assert out.tolist() == [21, 15, 0, 0, 9, 6, 3, 0]


def test_a_signed_byte_load_sign_extends() -> None:
    a = np.array([0xF0, 0, 0, 0], "uint8")
    out = np.zeros(2, "int32")
    run('A: T.Buffer((4,), "uint8"), O: T.Buffer((2,), "int32")', """
r: T.int32
T.ptx.ld(r, A.data, "", "", "", "global", "", "", "", "", "", "s8", "")
O[0] = r
T.ptx.ld(r, A.data, "", "", "", "global", "", "", "", "", "", "u8", "")
O[1] = r
""", a, out)
    assert out.tolist() == [-16, 0xF0]


def test_atomics_are_whole_per_thread() -> None:
    a = np.array([0, 5, 0, 0, 100, 0, 0, 0], "uint32")
    out = np.zeros(32, "uint32")
    run('A: T.Buffer((8,), "uint32"), O: T.Buffer((32,), "uint32")', """
smem = T.alloc_shared((1,), "uint32")
d: T.uint32
if tx == 0:
    smem[0] = T.uint32(0)
T.cuda.cta_sync()
T.ptx.atom(d, T.address_of(A[0]), T.uint32(1), "", "", "global", "add", "", "u32", "")
O[tx] = d
T.ptx.atom(d, T.address_of(A[1]), T.uint32(5), T.Cast("uint32", tx), "", "", "global", "cas", "b32", "")
T.ptx.atom(d, T.address_of(A[2]), T.Cast("uint32", tx), "", "", "global", "max", "", "u32", "")
T.ptx.atom(d, T.address_of(A[3]), T.uint32(3), "", "", "global", "inc", "", "u32", "")
T.ptx.red(T.address_of(A[4]), T.Cast("uint32", tx), "relaxed", "gpu", "global", "add", "", "u32", "")
T.ptx.red(T.cuda.cvta_generic_to_shared(smem.data), T.uint32(2), "", "", "shared", "add", "", "u32", "")
T.cuda.cta_sync()
if tx == 0:
    A[5] = smem[0]
""", a, out, threads=32)
    assert out.tolist() == list(range(32))
    assert a.tolist() == [32, 0, 31, 32 % 4, 100 + sum(range(32)), 64, 0, 0]


@pytest.mark.parametrize("address, message", [
    ("T.ptx.addr(A.data, 2)", "ld.global.b32 of 4 bytes at byte 2 is not aligned to 4 bytes"),
    ("T.ptx.addr(A.data, 16)", "ld.global.b32 of 4 bytes at byte 16 is out of the bounds of its memory (16 bytes)"),
    ("T.ptx.addr(A.data, -4)", "out of the bounds"),
    ("T.uint64(12345)", "the generic address 0x3039 is in no allocation"),
])
def test_a_bad_address_is_refused(address: str, message: str) -> None:
    with pytest.raises(TVMSError, match=re.escape(message)):
        run('A: T.Buffer((4,), "uint32")', f"""
d: T.uint32
T.ptx.ld(d, {address}, "", "", "", "global", "", "", "", "", "", "b32", "")
A[0] = d
""", np.zeros(4, "uint32"))


def test_a_shared_load_of_global_memory_is_refused() -> None:
    # (a pointer in a shared state space reads as TVM reads it, converted by cvta_generic_to_shared:
    # which refuses a pointer into global memory)
    with pytest.raises(TVMSError, match=re.escape("T.cuda.cvta_generic_to_shared of a pointer that is not into "
                                                  "shared memory")):
        run('A: T.Buffer((4,), "uint32")', """
d: T.uint32
T.ptx.ld(d, A.data, "", "", "", "shared", "", "", "", "", "", "b32", "")
A[0] = d
""", np.zeros(4, "uint32"))


def test_a_shared_store_races_as_a_buffer_store() -> None:
    with pytest.raises(TVMSError, match="data race"):
        run('A: T.Buffer((32,), "uint32")', """
smem = T.alloc_shared((32,), "uint32")
T.ptx.st(T.address_of(smem[tx]), T.Cast("uint32", tx), "", "", "", "shared", "", "", "", "b32", "")
A[tx] = smem[31 - tx]
""", np.zeros(32, "uint32"), threads=32)


# ---------------------------------------------------------------- warps and blocks
def test_warp_collectives_in_lock_step() -> None:
    out = np.zeros((9, 32), "uint32")
    run('O: T.Buffer((9, 32), "uint32")', """
d: T.uint32
p: T.uint32
m: T.uint32
FULL: T.uint32 = T.uint32(4294967295)
d = T.Cast("uint32", tx) * T.uint32(3)
T.ptx.shfl_sync(m, d, T.uint32(1), T.uint32(31), FULL, "down", "b32", "")
O[0, tx] = m
T.ptx.shfl_sync(m, p, d, T.uint32(2), T.uint32(0), FULL, "up", "b32", "")
O[1, tx] = m * T.uint32(10) + p
T.ptx.shfl_sync(m, d, T.uint32(5), T.uint32(31), FULL, "idx", "b32", "")
O[2, tx] = m
T.ptx.shfl_sync(m, d, T.uint32(1), T.uint32(31), FULL, "bfly", "b32", "")
O[3, tx] = m
p = T.Cast("uint32", tx % 3 == 0)
T.ptx.vote_sync(m, p, FULL, "ballot", "b32", "p1")
O[4, tx] = m
T.ptx.redux_sync(m, d, FULL, "add", "u32", "")
O[5, tx] = m
m = T.Cast("uint32", tx % 4)
T.ptx.match(m, m, FULL, "any", "sync", "b32", "")
O[6, tx] = m
T.ptx.elect_sync(d, p, FULL, "")
O[7, tx] = d * T.uint32(10) + p
T.ptx.vote_sync(p, T.uint32(1), FULL, "all", "pred", "p1")
T.ptx.activemask(m, "b32", "")
O[8, tx] = m + p
""", out, threads=32)
    lane = np.arange(32)
    d = lane * 3
    np.testing.assert_array_equal(out[0], np.where(lane < 31, d + 3, d))
    np.testing.assert_array_equal(out[1], np.where(lane >= 2, (d - 6) * 10 + 1, d * 10))
    np.testing.assert_array_equal(out[2], 15)
    np.testing.assert_array_equal(out[3], (lane ^ 1) * 3)
    np.testing.assert_array_equal(out[4], sum(1 << i for i in range(0, 32, 3)))
    np.testing.assert_array_equal(out[5], d.sum())
    np.testing.assert_array_equal(out[6], [0x11111111 << (i % 4) for i in range(32)])
    np.testing.assert_array_equal(out[7], [1] + [0] * 31)
    np.testing.assert_array_equal(out[8], 0)  # (0xFFFFFFFF + 1 wraps)


def test_barriers_and_their_votes() -> None:
    out = np.zeros(64, "uint32")
    run('O: T.Buffer((64,), "uint32")', """
smem = T.alloc_shared((64,), "uint32")
d: T.uint32
p: T.uint32
smem[tx] = T.Cast("uint32", tx)
T.ptx.bar(T.uint32(0), "", "sync", "")
p = T.Cast("uint32", tx % 16 == 0)
T.ptx.bar(d, T.uint32(0), p, "", "red", "popc", "u32", "p2")
T.ptx.barrier(T.uint32(0), "", "sync", "aligned", "")
O[tx] = smem[63 - tx] * T.uint32(100) + d
""", out, threads=64)
    np.testing.assert_array_equal(out, (63 - np.arange(64)) * 100 + 4)


@pytest.mark.parametrize("operands, message", [
    ("T.uint32(1)", "bar.sync 1: the reference executor runs barrier 0 only"),
    ("T.uint32(0), T.uint32(64)",
     "bar.sync 0, 64: the reference executor's barrier takes every thread of the block (32)"),
])
def test_a_named_or_partial_barrier_is_refused(operands: str, message: str) -> None:
    with pytest.raises(TVMSError, match=re.escape(message)):
        run('O: T.Buffer((32,), "uint32")', f"""
T.ptx.bar({operands}, "", "sync", "")
O[tx] = T.uint32(1)
""", np.zeros(32, "uint32"), threads=32)


def test_a_barrier_counting_every_thread_is_the_blocks() -> None:
    out = np.zeros(32, "uint32")
    run('O: T.Buffer((32,), "uint32")', """
d: T.uint32
T.ptx.bar(T.uint32(0), T.uint32(32), "", "sync", "")
T.ptx.barrier(d, T.uint32(0), T.uint32(32), T.Cast("uint32", tx < 5), "", "red", "popc", "", "u32", "p3")
O[tx] = d
""", out, threads=32)
    np.testing.assert_array_equal(out, 5)


# ---------------------------------------------------------------- predication and sinks
def test_a_false_predicate_skips_the_instruction_and_keeps_the_destination() -> None:
    text = (FIXTURES / "tvm027_printing" / "ptx_predicate_keep.tvms").read_text()
    a, out = np.array([3.0], "float32"), np.zeros(32, "float32")
    run_prim_func(from_source(text), a, out)
    assert out.tolist() == [8.0] + [0.0] * 31
    # without keep (TVM binds the destination write-only): the executor keeps it too
    out[:] = 0
    run_prim_func(from_source(text.replace('"pred,keep"', '"pred"')), a, out)
    assert out.tolist() == [8.0] + [0.0] * 31


def test_a_false_predicate_touches_no_memory() -> None:
    a = np.array([1, 2, 3, 4], "uint32")
    run('A: T.Buffer((4,), "uint32")', """
flag: T.uint32 = T.Cast("uint32", tx == 1)
T.ptx.red(T.address_of(A[0]), T.uint32(10), flag, "relaxed", "gpu", "global", "add", "", "u32", "pred")
T.ptx.st(T.ptx.addr(A.data, 1000), T.uint32(7), flag - flag, "", "", "", "global", "", "", "", "b32", "pred")
""", a, threads=4)
    assert a.tolist() == [11, 2, 3, 4]


def test_warp_golden_runs_as_computed_by_hand() -> None:
    """tests/fixtures/tvm027_printing/ptx_warp_atomics_barriers.tvms, lane by lane."""
    text = (FIXTURES / "tvm027_printing" / "ptx_warp_atomics_barriers.tvms").read_text()
    text = text.replace("A[tx % 8] = d + p + m + T.Cast(\"uint32\", h)", "A[tx % 8] = d + p * T.uint32(2)")
    a = np.zeros(8, "uint32")
    run_prim_func(from_source(text), a)
    # elect.sync makes lane 0 alone p = 1: bar.red.popc counts 1, bar.red.and is 0
    assert a.tolist() == [1] * 8


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize("call, text", [
    ('T.ptx.mbarrier(T.cuda.cvta_generic_to_shared(S.data), "inval", "shared", "b64", "")',
     "T.ptx.mbarrier (mbarrier.inval.shared.b64)"),
    ('T.ptx.isspacep(d, T.address_of(A[0]), "global", "")',
     "T.ptx.isspacep (isspacep.global): it does not tell global from local memory"),
    ('T.ptx.fence("proxy", "tensormap::generic", "release", "cta", "")',
     "T.ptx.fence (fence.proxy.tensormap::generic.release.cta)"),
    ('T.ptx.bar(T.uint32(0), T.uint32(64), "", "arrive", "")',
     "T.ptx.bar (bar.arrive): its barriers take every thread"),
    ('T.ptx.mbarrier(p, T.cuda.cvta_generic_to_shared(S.data), T.uint32(0), "test_wait", "parity", "", "", "", "shared", '
     '"b64", "")', "T.ptx.mbarrier (mbarrier.test_wait.parity.shared.b64): a non-blocking test that a thread spins on"),
])
def test_what_it_cannot_run_is_refused_by_name(call: str, text: str) -> None:
    body = f'S = T.alloc_shared((2,), "uint64")\nd: T.uint32\np: T.bool\n{call}\nA[0] = d\n'
    func = from_source(kernel('A: T.Buffer((4,), "uint32")', body))
    refused = f"the reference executor does not run TVM 0.27's PTX instruction {text}"
    with pytest.raises(TVMSError, match=re.escape(refused)):
        run_prim_func(func, np.zeros(4, "uint32"))


MBARRIER = "T.cuda.cvta_generic_to_shared(T.address_of(bar[0]))"


def test_mbarrier_arrive_returns_its_phase_and_try_wait_waits_for_it() -> None:
    """``mbarrier.arrive.shared.b64 state, [bar]{, count}`` (and ``.expect_tx``) return the state
    token of the phase they arrived in, its parity; ``mbarrier.try_wait.shared.b64 done, [bar],
    state`` (and ``.parity``) wait until that phase has completed, then answer true. Thread 31
    writes before it arrives, last: every thread reads what it wrote after its wait."""
    func = from_source(f"""
@T.prim_func
def f(G: T.Buffer((2,), "int32"), P: T.Buffer((3, 32), "int32"), R: T.Buffer((2, 32), "int32")):
    bar = T.alloc_buffer((1,), "uint64", scope="shared")
    state = T.alloc_buffer((1,), "uint64", scope="local")
    done = T.alloc_buffer((1,), "bool", scope="local")
    tx = T.launch_thread("threadIdx.x", 32)
    if tx == 0:
        T.ptx.mbarrier({MBARRIER}, T.uint32(32), "init", "", "shared", "b64", "")
    T.tvm_storage_sync("shared")
    if tx == 31:
        G[0] = 1
    T.ptx.mbarrier(state[0], {MBARRIER}, "arrive", "", "", "shared", "b64", "")
    P[0, tx] = T.Cast("int32", state[0])
    T.ptx.mbarrier(done[0], {MBARRIER}, state[0], "try_wait", "", "", "", "shared", "b64", "")
    R[0, tx] = G[0]
    if tx == 31:
        G[1] = 2
        T.ptx.mbarrier(state[0], {MBARRIER}, T.uint32(31), "arrive", "", "", "shared", "b64", "")
        P[1, tx] = T.Cast("int32", state[0])
        T.ptx.mbarrier(state[0], {MBARRIER}, T.uint32(0), "arrive", "expect_tx", "", "", "shared", "b64", "")
        P[2, tx] = T.Cast("int32", state[0])
    T.ptx.mbarrier(done[0], {MBARRIER}, T.uint32(1), "try_wait", "parity", "", "", "", "shared", "b64", "")
    R[1, tx] = G[1] * T.Cast("int32", done[0])
""")
    names = [c.op.name for c in walk(func.body) if isinstance(c, Call) and c.op.name.startswith("tirx.ptx.mb")]
    assert names == ["tirx.ptx.mbarrier_init", "tirx.ptx.mbarrier_arrive_state", "tirx.ptx.mbarrier_try_wait",
                     "tirx.ptx.mbarrier_arrive_count_state", "tirx.ptx.mbarrier_arrive_expect_tx_state",
                     "tirx.ptx.mbarrier_try_wait_parity_no_hint"]
    g, p, r = np.zeros(2, "int32"), np.full((3, 32), -1, "int32"), np.zeros((2, 32), "int32")
    run_prim_func(func, g, p, r)
    assert (p[0] == 0).all() and p[1:, 31].tolist() == [1, 1]  # (phase 0, then phase 1)
    assert (r[0] == 1).all() and (r[1] == 2).all()
    stuck = func.script().replace('T.uint32(31), "arrive"', 'T.uint32(30), "arrive"')  # (one arrival short)
    with pytest.raises(TVMSError, match=r"waits at .* for an mbarrier phase that never completes"):
        run_prim_func(from_source(stuck), g, p, r)


def _one_barrier(expected: int) -> str:
    """The start of a kernel body: one mbarrier expecting ``expected`` arrivals, initialised by
    thread 0 before a barrier, a shared S of 4 int32, and the scalars its calls write."""
    return f"""bar = T.alloc_shared((1,), "uint64")
S = T.alloc_shared((4,), "int32")
state: T.uint64
done: T.uint32
if tx == 0:
    T.ptx.mbarrier({MBARRIER}, T.uint32({expected}), "init", "", "shared", "b64", "")
T.tvm_storage_sync("shared")"""


PRODUCERS_AND_CONSUMERS = f"""
{_one_barrier(2)}
if tx < 2:
    WRITE_BEFORE
    T.ptx.mbarrier(state, {MBARRIER}, "arrive", "", "", "shared", "b64", "")
    WRITE_AFTER
else:
    WAIT
    R[tx] = S[tx - 2]
"""
WAIT_FORMS = {
    "try_wait.parity": f'T.ptx.mbarrier(done, {MBARRIER}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")',
    "T.cuda.mbarrier_wait": "T.cuda.mbarrier_wait(T.address_of(bar[0]), 0)",
}


@pytest.mark.parametrize("wait", sorted(WAIT_FORMS))
def test_an_mbarrier_orders_what_its_arrivals_wrote_before_what_its_waiters_read(wait: str) -> None:
    """Threads 0 and 1 write shared memory, then arrive; threads 2 and 3 wait for the phase, then
    read it: PTX's arrive releases and the wait acquires, so there is no race (it had been
    reported as one). A write after the arrive is not ordered: still a race."""
    body = PRODUCERS_AND_CONSUMERS.replace("WAIT\n", WAIT_FORMS[wait] + "\n")
    r = np.zeros(4, "int32")
    run('R: T.Buffer((4,), "int32")', body.replace("WRITE_BEFORE", "S[tx] = tx + 10").replace("WRITE_AFTER", ""),
        r, threads=4)
    assert r.tolist() == [0, 0, 10, 11]
    late = body.replace("WRITE_BEFORE", "").replace("WRITE_AFTER", "S[tx] = tx + 10")
    with pytest.raises(TVMSError, match=r"data race on the shared buffer 'S' .* thread \(threadIdx.x=2\) of block "
                                        r"\(blockIdx.x=0\) reads element 0, which thread \(threadIdx.x=0\) wrote since "
                                        r"the last barrier, and no mbarrier orders the two"):
        run('R: T.Buffer((4,), "int32")', late, r, threads=4)


def test_a_wait_orders_only_the_arrivals_of_the_phase_it_saw_complete() -> None:
    """Threads 0 and 1 complete phase 0; thread 0 then writes and arrives in phase 1. Thread 2
    waited for phase 0 alone: its read of thread 0's later write is a race."""
    r = np.zeros(4, "int32")
    with pytest.raises(TVMSError, match=r"thread \(threadIdx.x=2\) of block \(blockIdx.x=0\) reads element 0, which "
                                        r"thread \(threadIdx.x=0\) wrote"):
        run('R: T.Buffer((4,), "int32")', f"""
{_one_barrier(2)}
if tx < 2:
    T.ptx.mbarrier(state, {MBARRIER}, "arrive", "", "", "shared", "b64", "")
if tx == 0:
    T.ptx.mbarrier(done, {MBARRIER}, state, "try_wait", "", "", "", "shared", "b64", "")
    S[0] = 10
    T.ptx.mbarrier(state, {MBARRIER}, "arrive", "", "", "shared", "b64", "")
if tx == 2:
    T.ptx.mbarrier(done, {MBARRIER}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")
    R[tx] = S[0]
""", r, threads=4)


def test_mbarrier_order_is_transitive() -> None:
    """Thread 0 writes, then arrives on barrier 0; thread 1 waits for it and arrives on barrier 1;
    thread 2 waits for barrier 1 and reads thread 0's write: ordered through thread 1."""
    second = MBARRIER.replace("bar[0]", "bar[1]")
    r = np.zeros(4, "int32")
    run('R: T.Buffer((4,), "int32")', f"""
bar = T.alloc_shared((2,), "uint64")
S = T.alloc_shared((4,), "int32")
done: T.uint32
if tx == 0:
    T.ptx.mbarrier({MBARRIER}, T.uint32(1), "init", "", "shared", "b64", "")
    T.ptx.mbarrier({second}, T.uint32(1), "init", "", "shared", "b64", "")
T.tvm_storage_sync("shared")
if tx == 0:
    S[0] = 42
    T.ptx.mbarrier({MBARRIER}, "arrive", "", "", "shared", "b64", "")
elif tx == 1:
    T.ptx.mbarrier(done, {MBARRIER}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")
    T.ptx.mbarrier({second}, "arrive", "", "", "shared", "b64", "")
elif tx == 2:
    T.ptx.mbarrier(done, {second}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")
    R[2] = S[0]
""", r, threads=4)
    assert r[2] == 42



def test_a_reader_no_mbarrier_orders_still_races_with_a_write_after_a_later_ordered_reader() -> None:
    """Threads 0 and 1 read S[0]; only thread 1 arrives, and thread 2 writes S[0] after its wait:
    the write is ordered after thread 1's read, not after thread 0's (which the executor had
    forgotten once thread 1 read after it)."""
    r = np.zeros(4, "int32")
    with pytest.raises(TVMSError, match=r"thread \(threadIdx.x=2\) of block \(blockIdx.x=0\) overwrites element 0, "
                                        r"which thread \(threadIdx.x=0\) accessed since the last barrier"):
        run('R: T.Buffer((4,), "int32")', f"""
bar = T.alloc_shared((1,), "uint64")
S = T.alloc_shared((4,), "int32")
done: T.uint32
if tx == 0:
    T.ptx.mbarrier({MBARRIER}, T.uint32(1), "init", "", "shared", "b64", "")
    S[0] = 1
T.tvm_storage_sync("shared")
if tx == 0:
    R[0] = S[0]
if tx == 1:
    R[1] = S[0]
    T.ptx.mbarrier({MBARRIER}, "arrive", "", "", "shared", "b64", "")
if tx == 2:
    T.ptx.mbarrier(done, {MBARRIER}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")
    S[0] = 5
""", r, threads=4)

ARRIVE_DROP = f"""
{_one_barrier(4)}
if tx == 3:
    T.ptx.mbarrier({MBARRIER}, "arrive_drop", "", "", "shared", "b64", "")
else:
    T.ptx.mbarrier(state, {MBARRIER}, "arrive", "", "", "shared", "b64", "")
    T.ptx.mbarrier(done, {MBARRIER}, state, "try_wait", "", "", "", "shared", "b64", "")
    S[tx] = tx + 20
    T.ptx.mbarrier(state, {MBARRIER}, "arrive", "", "", "shared", "b64", "")
    T.ptx.mbarrier(done, {MBARRIER}, state, "try_wait", "", "", "", "shared", "b64", "")
    R[tx] = S[2 - tx] + T.Cast("int32", state) * 100
"""


def test_mbarrier_arrive_drop_arrives_and_leaves_the_later_phases() -> None:
    """Thread 3 arrives_drop in phase 0 (it had been refused): phase 0 completes with its three
    fellows' arrivals, and phase 1 with theirs alone (it expects 3). Each reads, after phase 1
    (parity 1), what another wrote between the phases."""
    func = from_source(kernel('R: T.Buffer((4,), "int32")', ARRIVE_DROP, 4))
    assert "tirx.ptx.mbarrier_arrive_drop_nocount" in {c.op.name for c in walk(func.body) if isinstance(c, Call)}
    r = np.zeros(4, "int32")
    run_prim_func(func, r)
    assert r.tolist() == [122, 121, 120, 0]
    plain = ARRIVE_DROP.replace('"arrive_drop"', '"arrive"')  # (phase 1 waits for thread 3 for ever)
    with pytest.raises(TVMSError, match=r"for an mbarrier phase that never completes"):
        run('R: T.Buffer((4,), "int32")', plain, r, threads=4)


@pytest.mark.parametrize("form, result", [
    ('T.ptx.mbarrier(state, {bar}, "arrive_drop", "", "", "shared", "b64", "")', 0),
    ('T.ptx.mbarrier(state, {bar}, T.uint32(2), "arrive_drop", "", "", "shared", "b64", "")', 0),
    ('T.ptx.mbarrier(state, {bar}, T.uint32(0), "arrive_drop", "expect_tx", "", "", "shared", "b64", "")', 0),
    ('T.ptx.mbarrier({bar}, T.uint32(2), "arrive_drop", "", "", "shared", "b64", "")', None),
    ('T.ptx.mbarrier({bar}, T.uint32(0), "arrive_drop", "expect_tx", "", "", "shared", "b64", "")', None),
])
def test_the_forms_of_arrive_drop(form: str, result: int | None) -> None:
    """The count and expect_tx forms, with and without the state token (the phase it arrived in):
    one thread drops the two arrivals of a barrier of 2 (or 1 of 1): the phase completes, and the
    barrier expects none after."""
    count = 2 if "T.uint32(2)" in form else 1
    a = np.full(4, 7, "uint32")
    run('A: T.Buffer((4,), "uint32")', f"""
bar = T.alloc_shared((1,), "uint64")
state: T.uint64 = T.uint64(9)
done: T.uint32
T.ptx.mbarrier({MBARRIER}, T.uint32({count}), "init", "", "shared", "b64", "")
{form.format(bar=MBARRIER)}
T.ptx.mbarrier(done, {MBARRIER}, T.uint32(0), "try_wait", "parity", "", "", "", "shared", "b64", "")
A[0] = T.Cast("uint32", state)
A[1] = done
""", a)
    assert a.tolist() == [9 if result is None else result, 1, 7, 7]


@pytest.mark.parametrize("before, count, message", [
    ("", 3, "mbarrier.arrive_drop of 3 arrivals on an mbarrier that expects 2 per phase"),
    (f'T.ptx.mbarrier({MBARRIER}, "arrive", "", "", "shared", "b64", "")', 2,
     "more arrivals on an mbarrier than its expected count (2) in one phase"),
])
def test_an_arrive_drop_of_more_arrivals_than_expected_is_refused(before: str, count: int, message: str) -> None:
    with pytest.raises(TVMSError, match=re.escape(message)):
        run('A: T.Buffer((4,), "uint32")', f"""
bar = T.alloc_shared((1,), "uint64")
T.ptx.mbarrier({MBARRIER}, T.uint32(2), "init", "", "shared", "b64", "")
{before}
T.ptx.mbarrier({MBARRIER}, T.uint32({count}), "arrive_drop", "", "", "shared", "b64", "")
""", np.zeros(4, "uint32"))


def test_division_by_zero_is_refused() -> None:
    with pytest.raises(TVMSError, match=re.escape("PTX's div/rem.u32 by zero is undefined")):
        run('A: T.Buffer((4,), "uint32")', """
d: T.uint32
T.ptx.div(d, A[0], A[1], "u32", "")
A[0] = d
""", np.zeros(4, "uint32"))


def test_bfloat16_registers_are_read_as_their_bits() -> None:
    """A bfloat16 operand is a 16-bit register (the executor's float32 computation of bfloat16
    arithmetic, LegalizeNarrowFloat's, does not reach into a PTX instruction)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = np.array([1.0, 2.0078125, 3.0, 0.0], ml_dtypes.bfloat16)
    out = np.zeros(5, "float32")
    run('B: T.Buffer((4,), "bfloat16"), O: T.Buffer((5,), "float32")', """
r: T.bfloat16
f: T.float32
T.ptx.add(r, B[0], B[1], "rn", "", "", "bf16", "")
O[0] = T.Cast("float32", r)
T.ptx.cvt(r, T.float32(3.0078125), "rn", "", "", "", "", "bf16", "f32", "")
O[1] = T.Cast("float32", r)
T.ptx.cvt(r, T.float32(3.0078125), "rp", "", "", "", "", "bf16", "f32", "")
O[2] = T.Cast("float32", r)
T.ptx.fma(f, B[0], B[2], T.float32(0.5), "rn", "", "", "f32", "bf16", "")
O[3] = f
T.ptx.add(f, B[2], T.float32(0.25), "", "", "", "f32", "bf16", "")
O[4] = f
""", b, out)
    # (3.0078125 is half-way between the bfloat16 values 3 and 3.015625: to the even one)
    assert out.tolist() == [3.0, 3.0, 3.015625, 3.5, 3.25]


def test_a_call_recorded_by_its_family_only_is_refused() -> None:
    """Where TVM's table leaves a call between entries, ir/ptx.py records the family (op
    tirx.ptx.family.*): the executor cannot tell which instruction it is."""
    import dataclasses

    from tvms.ir import ptx
    from tvms.ir.expr import Call
    from tvms.ir.op import get_op
    from tvms.ir.visitor import Mutator

    class FamilyOnly(Mutator):
        def visit_Call(self, e: Call) -> Call:
            if ptx.family_of(e.op.name) == "mov":
                return dataclasses.replace(e, op=get_op(ptx.family_op_name("mov")))
            return self.generic_visit(e)

    func = from_source(kernel('A: T.Buffer((4,), "uint32")', """
d: T.uint32
T.ptx.mov(d, A[1], "b32", "")
A[0] = d
"""))
    func = func.with_changes(body=FamilyOnly().visit(func.body))
    with pytest.raises(TVMSError, match=re.escape("T.ptx.mov (mov.b32): its call leaves TVM's table between entries")):
        run_prim_func(func, np.zeros(4, "uint32"))


def test_warp_sync_and_a_vector_store_aligned_to_its_whole_size() -> None:
    out = np.zeros(4, "uint32")
    run('O: T.Buffer((4,), "uint32")', """
T.ptx.bar(T.uint32(4294967295), "warp", "sync", "")
T.ptx.st(T.ptx.addr(O.data, 8), T.uint32(5), T.uint32(6), "", "", "global", "", "", "", "v2", "b32", "")
""", out, threads=32)
    assert out.tolist() == [0, 0, 5, 6]
    with pytest.raises(TVMSError, match=re.escape("st.global.v2.b32 of 8 bytes at byte 4 is not aligned to 8 bytes")):
        run('O: T.Buffer((4,), "uint32")', """
T.ptx.st(T.ptx.addr(O.data, 4), T.uint32(5), T.uint32(6), "", "", "global", "", "", "", "v2", "b32", "")
""", out)


def test_addresses_as_numbers_round_trip() -> None:
    """cvta and a pointer in a register give numbers in the executor's windows (generic from
    2**40, shared from 1024) that address operands follow back."""
    a = np.arange(8, dtype="uint32") * 11
    out = np.zeros(6, "uint64")
    run('A: T.Buffer((8,), "uint32"), O: T.Buffer((6,), "uint64")', """
smem = T.alloc_shared((4,), "uint32")
g: T.uint64
s: T.uint64
w: T.uint32
d: T.uint32
T.ptx.cvta(g, T.address_of(A[2]), "to", "global", "u64", "")
O[0] = g
T.ptx.ld(d, g, "", "", "", "global", "", "", "", "", "", "b32", "")
O[1] = T.Cast("uint64", d)
smem[1] = T.uint32(77)
w = T.cuda.cvta_generic_to_shared(T.address_of(smem[1]))
O[2] = T.Cast("uint64", w)
T.ptx.cvta(s, T.Cast("uint64", w), "shared", "u64", "")
T.ptx.ld(d, s, "", "", "", "", "", "", "", "", "", "b32", "")
O[3] = T.Cast("uint64", d)
T.ptx.mov(s, A.data, "b64", "")
O[4] = s
T.ptx.ld(d, T.ptx.addr(T.reinterpret("handle", s), 28), "", "", "", "global", "", "", "", "", "", "b32", "")
O[5] = T.Cast("uint64", d)
""", a, out)
    assert out.tolist() == [2**40 + 8, 22, 1024 + 4, 77, 2**40, 77]
    with pytest.raises(TVMSError, match=re.escape("cvta.to.shared.u64 of an address that is not in shared memory (by "
                                                  "thread (threadIdx.x=0) of block (blockIdx.x=0) at `T.ptx.cvta(")):
        run('A: T.Buffer((8,), "uint32")', """
s: T.uint64
T.ptx.cvta(s, A.data, "to", "shared", "u64", "")
""", a)


def test_bar_sync_is_the_blocks_barrier() -> None:
    """Threads that skip it leave the others waiting: the divergent barrier reported as
    T.cuda.cta_sync's is."""
    with pytest.raises(TVMSError, match="divergent barrier"):
        run('O: T.Buffer((64,), "uint32")', """
if tx < 32:
    T.ptx.bar(T.uint32(0), "", "sync", "")
O[tx] = T.uint32(1)
""", np.zeros(64, "uint32"), threads=64)


def test_rounding_agrees_with_numpy_and_brackets_the_exact_value() -> None:
    """numpy's float32 +, *, / and sqrt round to nearest, as PTX's .rn: equal on values of every
    magnitude; .rz and .rp are the neighbours below and above the exact quotient."""
    rng = np.random.default_rng(7)
    n = 64
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 38, n)).astype("float32")
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 38, n)).astype("float32")
    out = np.zeros((7, n), "float32")
    run('A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), O: T.Buffer((7, 64), "float32")', """
f: T.float32
T.ptx.add(f, A[tx], B[tx], "rn", "", "", "f32", "", "")
O[0, tx] = f
T.ptx.mul(f, A[tx], B[tx], "rn", "", "", "f32", "")
O[1, tx] = f
T.ptx.div(f, A[tx], B[tx], "rn", "", "f32", "")
O[2, tx] = f
T.ptx.sqrt(f, T.fabs(A[tx]), "rn", "", "f32", "")
O[3, tx] = f
T.ptx.sub(f, A[tx], B[tx], "rn", "", "", "f32", "", "")
O[4, tx] = f
T.ptx.div(f, A[tx], B[tx], "rz", "", "f32", "")
O[5, tx] = f
T.ptx.div(f, A[tx], B[tx], "rp", "", "f32", "")
O[6, tx] = f
""", a, b, out, threads=n)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out[:5], [a + b, a * b, a / b, np.sqrt(np.abs(a)), a - b])
    checked = 0
    for x, y, rz, rp in zip(a, b, out[5], out[6]):
        q = Fraction(float(x)) / Fraction(float(y))
        if not (np.isfinite(rz) and np.isfinite(rp)):
            continue
        checked += 1
        if q > 0:  # (toward zero is down, toward plus infinity up: the two neighbours of q, or q)
            assert Fraction(float(rz)) <= q <= Fraction(float(rp))
            assert rp == rz or rp == np.nextafter(rz, np.float32(np.inf))
        else:  # (both toward zero)
            assert rz == rp and Fraction(float(rp)) >= q
    assert checked > n // 2


def test_a_zero_result_has_ieee_sign() -> None:
    out = np.zeros(3, "float32")
    run('O: T.Buffer((3,), "float32")', """
f: T.float32
T.ptx.mul(f, T.float32(-1.0), T.float32(0.0), "rn", "", "", "f32", "")
O[0] = T.float32(1) / f
T.ptx.add(f, T.float32(-0.0), T.float32(-0.0), "rn", "", "", "f32", "", "")
O[1] = T.float32(1) / f
T.ptx.fma(f, T.float32(2.0), T.float32(3.0), T.float32(-6.0), "rn", "", "", "f32", "", "")
O[2] = T.float32(1) / f
""", out)
    assert out.tolist() == [-np.inf, -np.inf, np.inf]


def test_more_bit_and_sign_instructions() -> None:
    out = np.zeros(8, "uint32")
    run('O: T.Buffer((8,), "uint32")', """
d: T.uint32
f: T.float32
s: T.int32
T.ptx.copysign(f, T.float32(-1.0), T.float32(2.5), "f32", "")
O[0] = T.reinterpret("uint32", f)
T.ptx.bfind(d, T.uint32(0x00F00000), "", "u32", "")
O[1] = d
T.ptx.bfind(d, T.uint32(0x00F00000), "shiftamt", "u32", "")
O[2] = d
T.ptx.bfind(d, T.int32(-1), "", "s32", "")
O[3] = d
T.ptx.dp2a(s, T.int32(0x0003FFFE), T.int32(0x04030201), T.int32(100), "hi", "s32", "s32", "")
O[4] = T.Cast("uint32", s)
T.ptx.cvt_pack(d, 300, -5, T.uint32(0xABCD), "sat", "u8", "s32", "b32", "")
O[5] = d
T.ptx.testp(d, T.float32(1e-40), "subnormal", "f32", "")
O[6] = d
T.ptx.mov(s, T.int32(-1), "s32", "")
O[7] = T.Cast("uint32", s)
""", out)
    # dp2a.hi: a's halves (-2, 3) times b's bytes 2 and 3 (3, 4), plus 100
    assert out.tolist() == [f32_bits(-2.5), 23, 8, 0xFFFFFFFF, 100 - 2 * 3 + 3 * 4,
                            0xABCD << 16 | 255 << 8 | 0, 1, 0xFFFFFFFF]


def test_every_atomic_operation_and_local_memory() -> None:
    a = np.array([12, 12, 12, 5, 7, 0, 0, 0], "uint32")
    f = np.zeros(2, "float32")
    out = np.zeros(8, "uint32")
    run('A: T.Buffer((8,), "uint32"), F: T.Buffer((2,), "float32"), O: T.Buffer((8,), "uint32")', """
local = T.alloc_local((2,), "uint32")
d: T.uint32
x: T.float32
T.ptx.atom(d, T.address_of(A[0]), T.uint32(10), "", "", "global", "and", "", "b32", "")
T.ptx.atom(d, T.address_of(A[1]), T.uint32(10), "", "", "global", "or", "", "b32", "")
T.ptx.atom(d, T.address_of(A[2]), T.uint32(10), "", "", "global", "xor", "", "b32", "")
T.ptx.atom(d, T.address_of(A[3]), T.uint32(9), "", "", "global", "dec", "", "u32", "")
T.ptx.atom(d, T.address_of(A[4]), T.int32(-3), "", "", "global", "min", "", "s32", "")
T.ptx.atom(d, T.address_of(A[5]), T.uint32(42), "", "", "global", "exch", "", "b32", "")
T.ptx.atom(x, T.address_of(F[0]), T.float32(0.25), "", "", "global", "add", "", "f32", "")
T.ptx.st(T.address_of(local[1]), T.uint32(99), "", "", "", "local", "", "", "", "b32", "")
T.ptx.ld(d, T.address_of(local[1]), "", "", "", "local", "", "", "", "", "", "b32", "")
O[tx] = d
""", a, f, out, threads=3)
    # (three threads: xor twice more is xor once; dec 5 to 2; min with -3 as signed)
    assert a.tolist() == [12 & 10, 12 | 10, 12 ^ 10, 2, u32(-3), 42, 0, 0]
    assert f[0] == 0.75 and out.tolist() == [99, 99, 99, 0, 0, 0, 0, 0]


# ---------------------------------------------------------------- the edges of IEEE 754 and PTX's modifiers
def test_overflow_is_an_infinity_or_the_largest_finite_value_by_the_rounding_mode() -> None:
    """Beyond the largest finite value (also beyond float64's, as 1e300 * 1e300), rn and the mode
    rounding away from zero give an infinity, the others the largest finite value."""
    out = np.zeros(8, "float64")
    run('O: T.Buffer((8,), "float64")', """
f: T.float64
T.ptx.mul(f, T.float64(1e300), T.float64(1e300), "rn", "", "", "f64", "")
O[0] = f
T.ptx.mul(f, T.float64(1e300), T.float64(-1e300), "rz", "", "", "f64", "")
O[1] = f
T.ptx.fma(f, T.float64(1e300), T.float64(1e300), T.float64(1.0), "rn", "", "", "f64", "", "")
O[2] = f
T.ptx.add(f, T.float64(1.7e308), T.float64(1.7e308), "rn", "", "", "f64", "", "")
O[3] = f
T.ptx.add(f, T.float64(1.7e308), T.float64(1.7e308), "rz", "", "", "f64", "", "")
O[4] = f
T.ptx.add(f, T.float64(1.7e308), T.float64(1.7e308), "rm", "", "", "f64", "", "")
O[5] = f
T.ptx.add(f, T.float64(-1.7e308), T.float64(-1.7e308), "rm", "", "", "f64", "", "")
O[6] = f
T.ptx.add(f, T.float64(-1.7e308), T.float64(-1.7e308), "rp", "", "", "f64", "", "")
O[7] = f
""", out)
    big = np.finfo(np.float64).max
    assert out.tolist() == [np.inf, -big, np.inf, np.inf, big, big, -np.inf, -big]


def test_satfinite_saturates_to_the_largest_finite_value_and_keeps_nan() -> None:
    f = np.array([1e6, -np.inf, np.nan, 65520.0, np.nextafter(np.float32(65520), np.float32(0))], "float32")
    half = np.zeros(5, "float16")
    out = np.zeros(2, "uint32")
    run('F: T.Buffer((5,), "float32"), H: T.Buffer((5,), "float16"), O: T.Buffer((2,), "uint32")', """
h: T.float16
d: T.uint32
b: T.uint16
T.ptx.cvt(h, F[0], "rn", "", "satfinite", "", "", "f16", "f32", "")
H[0] = h
T.ptx.cvt(h, F[1], "rn", "", "satfinite", "", "", "f16", "f32", "")
H[1] = h
T.ptx.cvt(h, F[2], "rn", "", "satfinite", "", "", "f16", "f32", "")
H[2] = h
T.ptx.cvt(h, F[3], "rn", "", "", "", "", "f16", "f32", "")
H[3] = h
T.ptx.cvt(h, F[4], "rn", "", "", "", "", "f16", "f32", "")
H[4] = h
T.ptx.cvt(d, F[0], F[1], "rz", "", "satfinite", "f16x2", "f32", "")
O[0] = d
T.ptx.cvt(b, F[1], "rn", "", "satfinite", "", "", "bf16", "f32", "")
O[1] = T.Cast("uint32", b)
""", f, half, out)
    # (65520 is halfway between float16's largest, 65504, and 2**16: rn's tie goes to the infinity)
    assert half[:2].tolist() == [65504.0, -65504.0] and np.isnan(half[2])
    assert half[3] == np.inf and half[4] == 65504.0
    assert out.tolist() == [0x7BFF << 16 | 0xFBFF, 0xFF7F]  # (a's in the high half; bfloat16's -largest)


def test_set_of_a_packed_source_compares_each_half_into_its_own() -> None:
    one, two, five = (int(np.float16(x).view(np.uint16)) for x in (1.0, 2.0, 5.0))
    a, b = five << 16 | one, two << 16 | one  # (the low halves equal, the high ones not)
    out = np.zeros(4, "uint32")
    run('O: T.Buffer((4,), "uint32")', f"""
d: T.uint32
s: T.int32
T.ptx.set(d, T.uint32({a}), T.uint32({b}), "eq", "", "u32", "f16x2", "")
O[0] = d
T.ptx.set(s, T.uint32({a}), T.uint32({b}), "ge", "", "s32", "f16x2", "")
O[1] = T.Cast("uint32", s)
T.ptx.set(d, T.uint32({a}), T.uint32({b}), "eq", "", "f16x2", "f16x2", "")
O[2] = d
T.ptx.set(d, T.uint32({a}), T.uint32({b}), T.bool(True), "ne", "and", "", "u32", "f16x2", "p3")
O[3] = d
""", out)
    assert out.tolist() == [0x0000FFFF, 0xFFFFFFFF, one, 0xFFFF0000]


def test_integer_min_and_max_relu_clamp_each_element_at_zero() -> None:
    out = np.zeros(4, "uint32")
    run('O: T.Buffer((4,), "uint32")', """
s: T.int32
d: T.uint32
T.ptx.max(s, T.int32(-5), T.int32(-3), "", "", "", "", "relu", "s32", "")
O[0] = T.Cast("uint32", s)
T.ptx.min(s, T.int32(4), T.int32(7), "", "", "", "", "relu", "s32", "")
O[1] = T.Cast("uint32", s)
T.ptx.max(d, T.uint32(0xFFFBFFFB), T.uint32(0xFFFD0002), "", "", "", "", "relu", "s16x2", "")
O[2] = d
T.ptx.max(d, T.uint32(0xFFFBFFFB), T.uint32(0xFFFD0002), "", "", "", "", "", "s16x2", "")
O[3] = d
""", out)
    assert out.tolist() == [0, 4, 0x00000002, 0xFFFD0002]


def test_ftz_flushes_the_operand_of_neg_and_the_selector_of_slct() -> None:
    tiny = np.array([1, 0x80000001], "uint32").view("float32")  # (the smallest subnormals, + and -)
    half = np.array([1], "uint16").view("float16")
    out = np.zeros(6, "uint32")
    run('F: T.Buffer((2,), "float32"), H: T.Buffer((1,), "float16"), O: T.Buffer((6,), "uint32")', """
d: T.uint32
f: T.float32
h: T.float16
T.ptx.neg(f, F[0], "ftz", "f32", "")
O[0] = T.reinterpret("uint32", f)
T.ptx.neg(f, F[0], "", "f32", "")
O[1] = T.reinterpret("uint32", f)
T.ptx.neg(h, H[0], "ftz", "f16", "")
O[2] = T.Cast("uint32", T.reinterpret("uint16", h))
T.ptx.slct(d, T.uint32(1), T.uint32(2), F[1], "ftz", "u32", "f32", "")
O[3] = d
T.ptx.slct(d, T.uint32(1), T.uint32(2), F[1], "", "u32", "f32", "")
O[4] = d
T.ptx.slct(d, T.uint32(1), T.uint32(2), T.float32(-0.0), "", "u32", "f32", "")
O[5] = d
""", tiny, half, out)
    # (neg.ftz of the smallest subnormal: +0 negated; slct.ftz of -1e-45: -0 >= 0 picks a)
    assert out.tolist() == [0x80000000, 0x80000001, 0x8000, 1, 2, 1]


def test_an_exact_zero_sum_toward_minus_infinity_is_negative() -> None:
    """IEEE 754: an exact zero sum is +0 in every rounding mode but rm's, where it is -0 unless
    both terms are +0 (products and quotients take their operands' signs in every mode)."""
    out = np.zeros(9, "uint32")
    run('O: T.Buffer((9,), "uint32")', """
f: T.float32
g: T.float64
T.ptx.add(f, T.float32(1.0), T.float32(-1.0), "rm", "", "", "f32", "", "")
O[0] = T.reinterpret("uint32", f)
T.ptx.add(f, T.float32(1.0), T.float32(-1.0), "rz", "", "", "f32", "", "")
O[1] = T.reinterpret("uint32", f)
T.ptx.add(f, T.float32(1.0), T.float32(-1.0), "rp", "", "", "f32", "", "")
O[2] = T.reinterpret("uint32", f)
T.ptx.sub(f, T.float32(2.0), T.float32(2.0), "rm", "", "", "f32", "", "")
O[3] = T.reinterpret("uint32", f)
T.ptx.fma(f, T.float32(2.0), T.float32(3.0), T.float32(-6.0), "rm", "", "", "f32", "", "")
O[4] = T.reinterpret("uint32", f)
T.ptx.add(f, T.float32(0.0), T.float32(0.0), "rm", "", "", "f32", "", "")
O[5] = T.reinterpret("uint32", f)
T.ptx.add(f, T.float32(0.0), T.float32(-0.0), "rm", "", "", "f32", "", "")
O[6] = T.reinterpret("uint32", f)
T.ptx.mul(f, T.float32(-1.0), T.float32(-0.0), "rm", "", "", "f32", "")
O[7] = T.reinterpret("uint32", f)
T.ptx.add(g, T.float64(0.5), T.float64(-0.5), "rm", "", "", "f64", "", "")
O[8] = T.Cast("uint32", T.reinterpret("uint64", g) >> T.uint64(32))
""", out)
    minus = 0x80000000
    assert out.tolist() == [minus, 0, 0, minus, minus, 0, minus, 0, minus]


def test_a_conversion_keeps_the_sign_of_a_zero() -> None:
    """IEEE 754: converting a zero, or rounding to an integral value that is zero, keeps the
    operand's sign."""
    f = np.array([-0.0, -0.5, -0.3], "float32")
    out = np.zeros(4, "uint32")
    run('F: T.Buffer((3,), "float32"), O: T.Buffer((4,), "uint32")', """
f: T.float32
h: T.float16
g: T.float64
T.ptx.cvt(h, F[0], "rn", "", "", "", "", "f16", "f32", "")
O[0] = T.Cast("uint32", T.reinterpret("uint16", h))
T.ptx.cvt(g, F[0], "", "", "", "", "", "f64", "f32", "")
O[1] = T.Cast("uint32", T.reinterpret("uint64", g) >> T.uint64(32))
T.ptx.cvt(f, F[1], "rzi", "", "", "", "", "f32", "f32", "")
O[2] = T.reinterpret("uint32", f)
T.ptx.cvt(f, F[2], "rpi", "", "", "", "", "f32", "f32", "")
O[3] = T.reinterpret("uint32", f)
""", f, out)
    assert out.tolist() == [0x8000, 0x80000000, 0x80000000, 0x80000000]


@pytest.mark.parametrize("call", [
    'T.ptx.ld(d, T.uint64(12345), "", "", "", "global", "", "", "", "", "", "b32", "")',
    'T.ptx.ld(d, T.ptx.addr(T.uint64(12345), 4), "", "", "", "global", "", "", "", "", "", "b32", "")',
    'T.ptx.st(T.uint32(5000), T.uint32(1), "", "", "", "shared", "", "", "", "b32", "")',
])
def test_an_address_number_in_no_allocation_names_the_thread_and_statement(call: str) -> None:
    with pytest.raises(TVMSError, match=r"address 0x[0-9a-f]+ is in no allocation .* \(by thread \(threadIdx.x=0\) "
                                        r"of block \(blockIdx.x=0\) at `T\.ptx\.(ld|st)\("):
        run('A: T.Buffer((4,), "uint32")', f"""
d: T.uint32
{call}
A[0] = d
""", np.zeros(4, "uint32"), threads=2)


def test_a_float32_atomic_add_flushes_subnormals_in_global_memory_only() -> None:
    """PTX: atom/red .add.f32 on global memory flush subnormal inputs and results to zero of
    their sign; on shared memory, with .noftz, and at .f16 they keep them."""
    tiny = np.float32(1e-40)
    f = np.array([tiny, -tiny, tiny], "float32")
    h = np.array([6e-8], "float16")
    out = np.zeros(1, "float32")
    run('F: T.Buffer((3,), "float32"), H: T.Buffer((1,), "float16"), O: T.Buffer((1,), "float32")', """
smem = T.alloc_shared((1,), "float32")
x: T.float32
y: T.float16
smem[0] = T.float32(1e-40)
T.ptx.atom(x, T.address_of(F[0]), T.float32(1e-40), "", "", "global", "add", "", "f32", "")
T.ptx.red(T.address_of(F[1]), T.float32(-1e-40), "", "", "global", "add", "", "f32", "")
T.ptx.atom(x, T.address_of(F[2]), T.float32(1e-40), "", "", "global", "add", "noftz", "", "f32", "")
T.ptx.atom(x, T.address_of(smem[0]), T.float32(1e-40), "", "", "shared", "add", "", "f32", "")
T.ptx.atom(y, T.address_of(H[0]), T.float16(6e-8), "", "", "global", "add", "noftz", "", "f16", "")
O[0] = smem[0]
""", f, h, out)
    assert f.view("uint32").tolist()[:2] == [0, 0x80000000]  # (flushed: zeros of their signs)
    assert f[2] == 2 * tiny and out[0] == 2 * tiny and h[0] == np.float16(6e-8) * 2


def test_a_number_made_a_pointer_is_found_in_its_window() -> None:
    """``T.reinterpret("handle", g)`` of a generic address, as a register operand (it crashed:
    the number was not looked up before being given a number again)."""
    a = np.arange(8, dtype="uint32") * 11
    out = np.zeros(2, "uint64")
    run('A: T.Buffer((8,), "uint32"), O: T.Buffer((2,), "uint64")', """
g: T.uint64
s: T.uint64
T.ptx.cvta(g, T.address_of(A[2]), "to", "global", "u64", "")
O[0] = g
T.ptx.mov(s, T.reinterpret("handle", g), "b64", "")
O[1] = s
""", a, out)
    assert out[0] == out[1] and out[0] >= 1 << 40



def test_a_number_in_no_allocation_moves_into_a_register_as_it_is() -> None:
    """A generic address is a number: one in no allocation (a null pointer) moves as it is."""
    out = np.zeros(2, "uint64")
    run('O: T.Buffer((2,), "uint64")', """
s: T.uint64
T.ptx.mov(s, T.reinterpret("handle", T.uint64(0)), "b64", "")
O[0] = s
T.ptx.mov(s, T.reinterpret("handle", T.uint64(12345)), "b64", "")
O[1] = s
""", out)
    assert out.tolist() == [0, 12345]


def test_an_access_pointer_to_bfloat16_counts_in_its_elements() -> None:
    """``T.type_annotation("bfloat16")`` stays bfloat16 (it was widened to float32: 4-byte elements)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(8, dtype="float32").astype(ml_dtypes.bfloat16)
    out = np.zeros(2, "uint32")
    run('A: T.Buffer((8,), "bfloat16"), O: T.Buffer((2,), "uint32")', """
d: T.uint16
T.ptx.ld(d, T.tvm_access_ptr(T.type_annotation("bfloat16"), A.data, 3, 1, 1), "", "", "", "global", "", "", "", "", "", "b16", "")
O[0] = T.Cast("uint32", d)
T.ptx.ld(d, T.address_of(A[3]), "", "", "", "global", "", "", "", "", "", "b16", "")
O[1] = T.Cast("uint32", d)
""", a, out)
    assert out.tolist() == [int(a.view("uint16")[3])] * 2
