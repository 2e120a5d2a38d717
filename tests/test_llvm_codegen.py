"""LLVM codegen and ``tvms.build``: compiled results equal numpy and the reference executor."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.runtime.reference import run_prim_func  # noqa: E402
from tvms.script import from_source  # noqa: E402

from conftest import CORPUS_COPY  # noqa: E402

HERE = Path(__file__).parent
FIXTURE_MATMUL = CORPUS_COPY / "lower_matmul_sched_cpu_03_FlattenBuffer.tvms"
HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"


def prim_func(body: str):
    """The ``main`` PrimFunc of a module written as the indented text of its functions."""
    return from_source(HEADER + body)["main"]


def check_against_reference(func, *arrays, rtol=1e-5, atol=1e-6):
    """Run ``func`` compiled and in the reference executor on copies of ``arrays``; compare all."""
    compiled = [a.copy() for a in arrays]
    expected = [a.copy() for a in arrays]
    tvms.build(func)(*compiled)
    run_prim_func(func, *expected)
    for got, want in zip(compiled, expected):
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
    return compiled


# ---------------------------------------------------------------- programs
ELEMENTWISE = """
    @T.prim_func
    def main(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32"), C: T.Buffer((1000,), "float32")):
        for i_0 in T.parallel(125):
            for i_1 in T.vectorized(8):
                C[i_0 * 8 + i_1] = A[i_0 * 8 + i_1] * T.float32(2.0) + B[i_0 * 8 + i_1]
"""

SYMBOLIC = """
    @T.prim_func
    def main(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in T.parallel(n):
            B[i] = T.max(A[i], T.float32(0.0))
"""

ROW_SUM = """
    @T.prim_func
    def main(A: T.Buffer((64, 33), "float32"), B: T.Buffer((64,), "float32")):
        for i in T.parallel(64):
            acc = T.allocate([1], "float32", "local")
            acc_1 = T.decl_buffer((1,), data=acc, scope="local")
            acc_1[0] = T.float32(0.0)
            for k in range(33):
                acc_1[0] = acc_1[0] + A[i, k]
            B[i] = acc_1[0]
"""

CASTS = """
    @T.prim_func
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "int32"), C: T.Buffer((16,), "int8"), D: T.Buffer((16,), "float64"), E: T.Buffer((16,), "bool")):
        for i in range(16):
            B[i] = T.Cast("int32", A[i])
            C[i] = T.Cast("int8", B[i] * 37)
            D[i] = T.Cast("float64", C[i]) + T.Cast("float64", A[i])
            E[i] = A[i] > T.float32(0.0)
"""

MATH = """
    @T.prim_func
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((13, 64), "float32"), C: T.Buffer((64,), "float64")):
        for i_0 in range(8):
            for i_1 in T.vectorized(8):
                B[0, i_0 * 8 + i_1] = T.exp(A[i_0 * 8 + i_1])
                B[1, i_0 * 8 + i_1] = T.sqrt(T.fabs(A[i_0 * 8 + i_1]))
                B[2, i_0 * 8 + i_1] = T.tanh(A[i_0 * 8 + i_1])
                B[3, i_0 * 8 + i_1] = T.sigmoid(A[i_0 * 8 + i_1])
                B[4, i_0 * 8 + i_1] = T.log(T.fabs(A[i_0 * 8 + i_1]) + T.float32(1.0))
                B[5, i_0 * 8 + i_1] = T.floor(A[i_0 * 8 + i_1])
                B[6, i_0 * 8 + i_1] = T.round(A[i_0 * 8 + i_1])
                B[7, i_0 * 8 + i_1] = T.pow(T.fabs(A[i_0 * 8 + i_1]), T.float32(1.5))
        for i in range(64):
            B[8, i] = T.erf(A[i])
            B[9, i] = T.sin(A[i]) + T.cos(A[i])
            B[10, i] = T.rsqrt(T.fabs(A[i]) + T.float32(1.0))
            B[11, i] = T.ceil(A[i])
            B[12, i] = T.atan2(A[i], T.float32(0.5))
            C[i] = T.exp(T.Cast("float64", A[i]))
"""

CONDITIONALS = """
    @T.prim_func
    def main(A: T.Buffer((30,), "float32"), B: T.Buffer((34,), "float32"), C: T.Buffer((30,), "float32")):
        for i in range(34):
            B[i] = T.if_then_else(2 <= i and i < 32, A[i - 2], T.float32(-1.0))
        for i in range(30):
            if A[i] > T.float32(0.5):
                C[i] = T.Select(A[i] > T.float32(0.75), A[i], T.float32(1.0))
            else:
                C[i] = T.float32(0.0) - A[i]
"""

INTEGERS = """
    @T.prim_func
    def main(A: T.Buffer((40,), "int32"), B: T.Buffer((40,), "int32"), C: T.Buffer((6, 40), "int32"), D: T.Buffer((40,), "int64"), E: T.Buffer((40,), "uint8")):
        for i in range(40):
            x: T.int32 = A[i]
            C[0, i] = T.floordiv(x, B[i])
            C[1, i] = T.floormod(x, B[i])
            C[2, i] = T.truncdiv(x, B[i])
            C[3, i] = T.truncmod(x, B[i])
            C[4, i] = T.min(x, B[i]) * 3 - T.max(x, B[i])
            C[5, i] = T.Select(x < 0 or B[i] < 0, 1, 0)
            D[i] = T.Cast("int64", x) * T.int64(100000000)
            E[i] = T.Cast("uint8", x + 300)
"""

VECTOR_FALLBACK = """
    @T.prim_func
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i_0 in range(8):
            for i_1 in T.vectorized(8):
                B[i_1 * 8 + i_0] = T.if_then_else(i_1 < 4, A[i_0 * 8 + i_1], T.float32(0.0)) + A[i_1 * 8 + i_0]
"""

UNROLLED = """
    @T.prim_func
    def main(A: T.Buffer((20,), "float32"), B: T.Buffer((20,), "float32")):
        for i_0 in range(5):
            for i_1 in T.unroll(4):
                B[i_0 * 4 + i_1] = A[i_0 * 4 + i_1] + T.Cast("float32", i_1)
"""


# ---------------------------------------------------------------- results
def test_corpus_matmul_with_parallel_and_vectorized_loops_equals_numpy():
    func = from_source(FIXTURE_MATMUL.read_text())["main"]
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), dtype=np.float32), rng.random((128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    lib = tvms.build(func, target="llvm")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    c[...] = 0
    lib(a, b, c)  # the module itself calls main
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_vectorized_loop_becomes_ymm_vector_instructions():
    func = from_source(FIXTURE_MATMUL.read_text())["main"]
    asm = tvms.build(func).get_source("asm")
    ymm_ops = {line.split()[0] for line in asm.splitlines() if "%ymm" in line}
    assert ymm_ops & {"vfmadd213ps", "vfmadd231ps", "vfmadd132ps", "vmulps"}, ymm_ops
    assert ymm_ops & {"vmovups", "vmovaps"}, ymm_ops


def test_parallel_loop_calls_the_thread_pool():
    lib = tvms.build(prim_func(ELEMENTWISE))
    assert "GOMP_parallel" in lib.get_source("ll")


def test_elementwise_parallel_vectorized():
    rng = np.random.default_rng(1)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    (_, _, c) = check_against_reference(prim_func(ELEMENTWISE), a, b, np.zeros(1000, np.float32))
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_parallel_results_do_not_depend_on_the_thread_count(monkeypatch, threads):
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    a = np.linspace(-3, 3, 7, dtype=np.float32)  # 7 iterations: chunks of unequal size
    b = np.zeros(7, np.float32)
    tvms.build(prim_func(SYMBOLIC))(a, b)
    np.testing.assert_array_equal(b, np.maximum(a, 0))


def test_symbolic_sizes_are_bound_from_the_arguments():
    lib = tvms.build(prim_func(SYMBOLIC))
    for n in (1, 5, 1003):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        b = np.zeros(n, np.float32)
        lib(a, b)
        np.testing.assert_array_equal(b, np.maximum(a, 0))


def test_reduction_with_a_local_allocation():
    a = np.random.default_rng(2).random((64, 33), dtype=np.float32)
    (_, b) = check_against_reference(prim_func(ROW_SUM), a, np.zeros(64, np.float32))
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_casts():
    a = np.array([-3.7, -0.5, 0.0, 0.4, 2.9, 100.2, -100.9, 5.5] * 2, np.float32)
    out = check_against_reference(prim_func(CASTS), a, np.zeros(16, np.int32), np.zeros(16, np.int8),
                                  np.zeros(16, np.float64), np.zeros(16, np.bool_))
    np.testing.assert_array_equal(out[1], np.trunc(a).astype(np.int32))
    np.testing.assert_array_equal(out[4], a > 0)


OUT_OF_RANGE_FLOATS = """
    @T.prim_func
    def main(A: T.Buffer((3,), "float32"), H: T.Buffer((3,), "float16")):
        A[0] = T.Cast("float32", T.float64(1e300))
        A[1] = T.Cast("float32", T.float64(-1e300))
        A[2] = T.Cast("float32", T.float16(65504.0))
        H[0] = T.Cast("float16", T.float32(70000.0))
        H[1] = T.Cast("float16", T.float32(-1000000.0))
        H[2] = T.Cast("float16", T.float32(65519.0))
"""


def test_float_constants_cast_out_of_their_range_round_to_infinity():
    """A literal beyond its type's range is refused (test_errors), but a cast of a wider constant
    stays a cast (TVM refuses to fold it) and rounds as IEEE says. (Code generation had failed with
    "OverflowError: float too large to pack with e format".)"""
    text = HEADER + OUT_OF_RANGE_FLOATS
    assert 'T.Cast("float16", T.float32(70000.0))' in from_source(text).script()  # printed as written
    out = check_against_reference(prim_func(OUT_OF_RANGE_FLOATS), np.zeros(3, np.float32),
                                  np.zeros(3, np.float16))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out[0], [np.float32(1e300), np.float32(-1e300), 65504.0])
        np.testing.assert_array_equal(out[1], np.array([70000.0, -1e6, 65519.0]).astype(np.float16))
    assert list(out[1]) == [np.inf, -np.inf, 65504.0]  # IEEE rounding: 65519 is still the largest


def test_a_relax_fill_value_beyond_float16_is_refused_by_legalize():
    """TVM 0.27's LegalizeOps refuses it too ("Literal value 3e+38 exceeds maximum of float16");
    tvms had compiled it to infinity, through a constant it printed as text it refuses."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float16")) -> R.Tensor((2,), "float16"):
        with R.dataflow():
            c = R.full((2,), R.const(3.0e38, "float32"), "float16")
            y = R.add(x, c)
            R.output(y)
        return y
""")
    with pytest.raises(TVMSError, match=r"LegalizeOps.*3\.0+\d*e\+38 is out of the range of float16 literals"):
        tvms.compile(mod, target="llvm")


def test_math_intrinsics():
    a = np.linspace(-4, 4, 64, dtype=np.float32)
    check_against_reference(prim_func(MATH), a, np.zeros((13, 64), np.float32), np.zeros(64, np.float64),
                            rtol=2e-6, atol=1e-6)


def test_conditionals_and_padding_loads_stay_in_bounds():
    a = np.random.default_rng(3).random(30, dtype=np.float32)
    out = check_against_reference(prim_func(CONDITIONALS), a, np.zeros(34, np.float32), np.zeros(30, np.float32))
    np.testing.assert_array_equal(out[1], np.concatenate([[-1, -1], a, [-1, -1]]).astype(np.float32))


def test_integer_arithmetic_follows_tvm_semantics():
    rng = np.random.default_rng(4)
    a = rng.integers(-50, 50, 40).astype(np.int32)
    b = rng.choice([-7, -3, -1, 1, 2, 5, 9], 40).astype(np.int32)
    out = check_against_reference(prim_func(INTEGERS), a, b, np.zeros((6, 40), np.int32),
                                  np.zeros(40, np.int64), np.zeros(40, np.uint8))
    np.testing.assert_array_equal(out[2][0], a // b)  # floordiv rounds toward minus infinity
    np.testing.assert_array_equal(out[2][1], a % b)
    np.testing.assert_array_equal(out[2][2], np.trunc(a / b).astype(np.int32))


def test_vectorized_loop_that_cannot_be_vector_code_runs_as_a_loop():
    a = np.random.default_rng(5).random(64, dtype=np.float32)
    check_against_reference(prim_func(VECTOR_FALLBACK), a, np.zeros(64, np.float32))


GUARDED_SCATTER = """
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((1,), "float32")):
        for i in range(2):
            v: T.int32x4 = T.Ramp(i * 4, 1, 4)
            if v < T.Broadcast(6, 4):
                B[v * T.Broadcast(2, 4)] = A[v]
                C[0] = A[i * 4]
"""


def test_guarded_scatter_and_scalar_stores_write_only_the_guarded_lanes():
    """Under a vector guard a strided store (a scatter) and a scalar store are masked too: lanes
    v = 6, 7 write nothing (B[12] and B[14] keep their value)."""
    lib = tvms.build(prim_func(GUARDED_SCATTER))
    a, b, c = np.arange(1, 9, dtype=np.float32), np.full(16, -1, np.float32), np.zeros(1, np.float32)
    lib(a, b, c)
    expected = np.full(16, -1, np.float32)
    expected[0:12:2] = a[:6]
    np.testing.assert_array_equal(b, expected)
    assert c[0] == a[4]  # some lane of the second row is in the guard
    assert "llvm.masked.scatter" in lib.get_source("ll")


STRIDED_TAIL = """
    @T.prim_func
    def main(A: T.Buffer((40,), "float32"), B: T.Buffer((20,), "float32"), s: T.Buffer((1,), "float32")):
        for i in range(2):
            for j in T.vectorized(16):
                if T.likely(i * 16 + j < 20):
                    B[i * 16 + j] = A[(i * 16 + j) * 2] + s[0]
"""


def test_tail_with_a_likely_guard_and_strided_loads_is_vector_code():
    """A guard in ``T.likely`` and loads of stride 2 and 0 still vectorize: masked gathers read
    only the guarded lanes (A holds 40 elements, the lanes past 20 would read past it)."""
    lib = tvms.build(prim_func(STRIDED_TAIL))
    ll = lib.get_source("ll")
    assert "llvm.masked.gather" in ll and "llvm.masked.store" in ll
    a, b, s = np.arange(40, dtype=np.float32), np.full(20, -1, np.float32), np.array([0.5], np.float32)
    lib(a, b, s)
    np.testing.assert_array_equal(b, a[::2] + 0.5)


STRIDED_SPAN = """
    @T.prim_func
    def main(A: T.Buffer((46,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        for j in T.vectorized(16):
            B[j] = A[j * 3]
            C[j] = A[j * 2 + 15]
"""


def _at_page_end(values: np.ndarray):
    """``values`` copied to the end of a page whose next page is unreadable (a read past them
    faults), and the mapping, which must outlive them."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    memory = mmap.mmap(-1, 2 * page)
    start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mprotect(ctypes.c_void_p(start + page), ctypes.c_size_t(page), 0) == 0  # PROT_NONE
    placed = np.frombuffer(memory, values.dtype, count=values.size, offset=page - values.nbytes)
    placed[...] = values
    return placed, memory


def test_strided_loads_are_one_span_and_a_shuffle():
    """Lanes 2 or 3 apart load their span at once (a masked load that stops at the last lane) and
    pick every 2nd or 3rd element: right up to the last element of A, which ends a page whose
    next page is unreadable (a load past the last lane would fault)."""
    lib = tvms.build(prim_func(STRIDED_SPAN))
    ll = lib.get_source("ll")
    assert ll.count("shufflevector") >= 2 and "llvm.masked.load.v48f32" in ll and "llvm.masked.load.v32f32" in ll
    assert "llvm.masked.gather" not in ll
    a, mapping = _at_page_end(np.arange(46, dtype=np.float32))
    b, c = np.zeros(16, np.float32), np.zeros(16, np.float32)
    lib(a, b, c)
    np.testing.assert_array_equal(b, np.arange(46, dtype=np.float32)[::3])
    np.testing.assert_array_equal(c, np.arange(46, dtype=np.float32)[15::2])


GUARDED_ROW_VALUE = """
    @T.prim_func
    def main(A: T.Buffer((32,), "float32"), s: T.Buffer((1,), "float32"), B: T.Buffer((32,), "float32")):
        for i in range(2):
            for j in T.vectorized(16):
                if T.likely(i * 16 + j < 16):
                    B[i * 16 + j] = A[i * 16 + j] + s[i]
"""


def test_a_guarded_vector_loads_a_value_of_all_lanes_once():
    """Under a vector guard, ``s[i]`` (the same address in every lane: a bias per row) is one
    scalar load, broadcast, not a gather of 16 lanes; and with no lane in the guard (``i = 1``)
    it is not loaded at all: ``s`` ends a page whose next page is unreadable."""
    lib = tvms.build(prim_func(GUARDED_ROW_VALUE))
    ll = lib.get_source("ll")
    assert "llvm.masked.gather" not in ll and "llvm.vector.reduce.or.v16i1" in ll and "llvm.masked.load.v1f32" in ll
    s, mapping = _at_page_end(np.array([0.5], np.float32))
    a, b = np.arange(32, dtype=np.float32), np.full(32, -1, np.float32)
    lib(a, s, b)
    np.testing.assert_array_equal(b, np.concatenate([a[:16] + 0.5, np.full(16, -1, np.float32)]))


def test_unrolled_loop():
    a = np.arange(20, dtype=np.float32)
    (_, b) = check_against_reference(prim_func(UNROLLED), a, np.zeros(20, np.float32))
    np.testing.assert_array_equal(b, a + np.tile(np.arange(4), 5))


def test_tensor_like_arguments_with_an_array_attribute():
    class Holder:
        def __init__(self, array):
            self.array = array

    a = np.linspace(-1, 1, 9, dtype=np.float32)
    b = Holder(np.zeros(9, np.float32))
    tvms.build(prim_func(SYMBOLIC))(Holder(a), b)
    np.testing.assert_array_equal(b.array, np.maximum(a, 0))


def test_time_evaluator_reports_seconds_per_call():
    lib = tvms.build(prim_func(ELEMENTWISE))
    a, b, c = (np.ones(1000, np.float32) for _ in range(3))
    result = lib.time_evaluator("main", tvms.cpu(0) if hasattr(tvms, "cpu") else None, number=5, repeat=3)(a, b, c)
    assert len(result.results) == 3
    assert 0 < result.mean < 0.1 and 0 < result.median < 0.1
    np.testing.assert_array_equal(c, np.full(1000, 3, np.float32))


def test_building_an_unchanged_function_again_hits_the_cache():
    source = HEADER + ELEMENTWISE.replace("2.0", "2.5")
    first = tvms.build(from_source(source)["main"])
    start = time.perf_counter()
    second = tvms.build(from_source(source)["main"])  # a new object with the same text
    assert second["main"].compiled is first["main"].compiled
    assert time.perf_counter() - start < 0.5


# ---------------------------------------------------------------- bad calls
@pytest.fixture(scope="module")
def elementwise_lib():
    return tvms.build(prim_func(ELEMENTWISE))


@pytest.mark.parametrize("args, message", [
    (lambda a: (a, a), "takes 3 arguments"),
    (lambda a: (a, a, a.astype(np.float64)), "expected dtype float32, got float64"),
    (lambda a: (a, a, np.zeros(999, np.float32)), "expected extent 1000, got 999"),
    (lambda a: (a, a, a.reshape(10, 100)), "expected 1 dimensions"),
    (lambda a: (a, a, [0.0] * 1000), "expected an array, got list"),
    (lambda a: (a, a, np.zeros(2000, np.float32)[::2]), "C-contiguous"),
])
def test_bad_calls_raise_clear_errors(elementwise_lib, args, message):
    a = np.zeros(1000, np.float32)
    with pytest.raises(TVMSError, match=re.escape(message)):
        elementwise_lib(*args(a))


def test_symbolic_size_mismatch_between_arguments_is_an_error():
    with pytest.raises(TVMSError, match="expected extent 4, got 5"):
        tvms.build(prim_func(SYMBOLIC))(np.zeros(4, np.float32), np.zeros(5, np.float32))


def test_unknown_function_and_target_are_errors(elementwise_lib):
    with pytest.raises(TVMSError, match="no function 'nope'"):
        elementwise_lib["nope"]
    with pytest.raises(TVMSError, match="no code generator for target kind 'rocm'.*compiles for: cuda, llvm"):
        tvms.build(prim_func(ELEMENTWISE), target="rocm")
    with pytest.raises(TVMSError, match="IRModule or a PrimFunc"):
        tvms.build("not a function")


def test_function_with_blocks_is_lowered_or_refused_clearly():
    func = from_source((CORPUS_COPY / "lower_matmul_sched_cpu_00_input.tvms").read_text())["main"]
    try:
        import tvms.lowering.tir.pipeline  # noqa: F401  (lower_for_codegen)
    except ImportError:
        with pytest.raises(TVMSError, match="lower_for_codegen"):
            tvms.build(func)
        return
    a, b = np.random.default_rng(6).random((2, 128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    tvms.build(func)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_thread_count_comes_from_the_target_when_the_environment_says_nothing(monkeypatch):
    from tvms.lowering.codegen.llvm_target import parse_llvm_target

    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    assert parse_llvm_target("llvm -num-cores=3").threads == 3
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    assert parse_llvm_target("llvm -num-cores=3").threads == 2
    assert os.cpu_count() is None or parse_llvm_target("llvm").threads == 2
    with pytest.raises(TVMSError, match="num-cores"):
        parse_llvm_target("llvm -num-cores=zero")


SCALAR_PARAMS = """
    @T.prim_func
    def main(A: T.Buffer((10,), "float32"), alpha: T.float32, shift: T.int32, B: T.Buffer((10,), "int64")):
        for i in range(10):
            A[i] = A[i] * alpha
            B[i] = T.Cast("int64", i + shift) * T.int64(3000000000)
"""


def test_scalar_parameters():
    a = np.arange(10, dtype=np.float32)
    lib = tvms.build(prim_func(SCALAR_PARAMS))
    b = np.zeros(10, np.int64)
    lib(a, 0.5, -4, b)
    np.testing.assert_array_equal(a, np.arange(10, dtype=np.float32) * 0.5)
    np.testing.assert_array_equal(b, (np.arange(10) - 4) * 3000000000)
    with pytest.raises(TVMSError, match="expected a int32 scalar"):
        lib(a, 0.5, 1.5, b)


NAIVE_MATMUL = """
    @T.prim_func
    def main(A: T.Buffer((160000,), "float32"), B: T.Buffer((160000,), "float32"), C: T.Buffer((160000,), "float32")):
        for i, j in T.grid(400, 400):
            C[i * 400 + j] = T.float32(0.0)
            for k in range(400):
                C[i * 400 + j] = C[i * 400 + j] + A[i * 400 + k] * B[k * 400 + j]
"""


def test_native_calls_release_the_gil():
    import threading

    lib = tvms.build(prim_func(NAIVE_MATMUL))
    a, b, c = (np.ones(160000, np.float32) for _ in range(3))
    worker = threading.Thread(target=lambda: [lib(a, b, c) for _ in range(3)])
    ticks = 0
    worker.start()
    while worker.is_alive():  # Python runs here only if the native calls let go of the GIL
        ticks += 1
    worker.join()
    assert ticks > 100
    np.testing.assert_array_equal(c, np.full(160000, 400, np.float32))


# ---------------------------------------------------------------- drawn programs
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

INT_LEAVES = st.sampled_from(["A[i]", "B[i]", "T.int64(3)", "T.int64(-5)", "T.Cast(\"int64\", i)"])
DIVISORS = st.sampled_from(["T.int64(7)", "T.int64(-3)", "D[i]"])  # D holds no zeros


def _int_node(children):
    binary = st.tuples(st.sampled_from(["+", "-", "*"]), children, children).map(lambda t: f"({t[1]} {t[0]} {t[2]})")
    division = st.tuples(st.sampled_from(["T.floordiv", "T.floormod", "T.truncdiv", "T.truncmod"]),
                         children, DIVISORS).map(lambda t: f"{t[0]}({t[1]}, {t[2]})")
    extreme = st.tuples(st.sampled_from(["T.min", "T.max"]), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})")
    select = st.tuples(st.sampled_from(["<", "<=", "==", "!="]), children, children, children, children).map(
        lambda t: f"T.Select({t[1]} {t[0]} {t[2]}, {t[3]}, {t[4]})")
    return st.one_of(binary, division, extreme, select)


INT_EXPRS = st.recursive(INT_LEAVES, _int_node, max_leaves=8)
DRAWN = """
    @T.prim_func
    def main(A: T.Buffer((64,), "int64"), B: T.Buffer((64,), "int64"), D: T.Buffer((64,), "int64"), C: T.Buffer((64,), "int64")):
        for i_0 in {outer}(8):
            for i_1 in {inner}(8):
                with_i: T.int32 = i_0 * 8 + i_1
                C[i_0 * 8 + i_1] = {expr}
"""


@settings(max_examples=40, deadline=None)
@given(expr=INT_EXPRS, outer=st.sampled_from(["range", "T.parallel"]),
       inner=st.sampled_from(["range", "T.vectorized", "T.unroll"]))
def test_drawn_integer_expressions_equal_the_reference(expr, outer, inner):
    rng = np.random.default_rng(7)
    a, b = (rng.integers(-40, 40, 64) for _ in range(2))
    d = rng.choice([-9, -2, 1, 3, 8], 64)
    body = DRAWN.format(outer=outer, inner=inner, expr=expr.replace("[i]", "[i_0 * 8 + i_1]")
                        .replace(", i)", ", i_0 * 8 + i_1)"))
    check_against_reference(prim_func(body), a, b, d, np.zeros(64, np.int64))


def test_pthread_fallback_runs_parallel_loops(monkeypatch):
    monkeypatch.setenv("TVMS_THREAD_POOL", "pthread")
    monkeypatch.setenv("TVM_NUM_THREADS", "3")
    lib = tvms.build(prim_func(ELEMENTWISE))
    assert "pthread_create" in lib.get_source("ll") and "GOMP_parallel" not in lib.get_source("ll")
    a, b = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    c = np.zeros(1000, np.float32)
    lib(a, b, c)
    np.testing.assert_array_equal(c, a * 2 + 1)


DIVIDE = """
    @T.prim_func
    def main(A: T.Buffer((4,), "int32"), D: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int32")):
        for i in range(4):
            C[i] = T.floordiv(A[i], D[i]) + T.truncmod(A[i], D[i])
"""


def test_integer_division_by_a_zero_value_does_not_trap():
    a, d = np.array([7, -7, 9, 5], np.int32), np.array([2, 2, 0, -3], np.int32)
    c = np.zeros(4, np.int32)
    tvms.build(prim_func(DIVIDE))(a, d, c)  # element 2 is undefined; the process must survive
    np.testing.assert_array_equal(c[[0, 1, 3]], [3 + 1, -4 - 1, -2 + 2])


def test_device_other_than_the_cpu_is_an_error(elementwise_lib):
    class CudaTensor:
        device = tvms.cuda(0)
        array = np.zeros(1000, np.float32)

    a = np.zeros(1000, np.float32)
    with pytest.raises(TVMSError, match="runs on the CPU"):
        elementwise_lib(a, a, CudaTensor())
    with pytest.raises(TVMSError, match="runs on the CPU"):
        elementwise_lib.time_evaluator("main", tvms.cuda(0))


def test_tvms_tensors_are_arguments():
    if not hasattr(tvms, "nd"):
        pytest.skip("tvms.nd is not available")
    a = tvms.nd.array(np.linspace(-1, 1, 9).astype(np.float32))
    b = tvms.nd.empty((9,), "float32")
    tvms.build(prim_func(SYMBOLIC))(a, b)
    np.testing.assert_array_equal(b.numpy(), np.maximum(a.numpy(), 0))


def test_matmul_benchmark_runs_and_checks_its_results():
    import subprocess
    import sys

    root = HERE.parent
    done = subprocess.run([sys.executable, "benchmarks/matmul_cpu.py", "--n", "64", "--repeat", "1", "--no-tvm"],
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tvms corpus (32x8 tile)" in done.stdout and "tvms register-tiled (4x16 tile)" in done.stdout
    assert "numpy (BLAS)" in done.stdout


UNIFORM_CONDITION = """
    @T.prim_func
    def main(A: T.Buffer((32,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((48,), "float32"),
             D: T.Buffer((48,), "float32")):
        for i in range(3):
            C[i * 16:i * 16 + 16] = T.if_then_else(T.Broadcast(2 <= i, 16), B[T.Ramp(i * 16 - 32, 1, 16)],
                                                   A[T.Ramp(i * 16, 1, 16)])
            if T.Broadcast(i < 2, 16):
                D[i * 16:i * 16 + 16] = A[T.Ramp(i * 16, 1, 16)] * T.Broadcast(T.float32(2), 16)
"""


def test_a_condition_the_same_in_every_lane_is_a_branch_not_masked_loads():
    """A concatenation's ``if_then_else(2 <= i, B[.. - 32], A[..])``, vectorized along j: its
    condition is one broadcast, so one side is loaded and the other not at all. As masks, the
    B side's masked-off loads reached 128 bytes before B, and below a buffer's start the page
    may be unmapped: a masked load there costs a microcode assist (DenseNet-121's
    concatenations ran about 20 times slower with its buffers in separate mappings)."""
    lib = tvms.build(prim_func(UNIFORM_CONDITION))
    ll = lib.get_source("ll")
    assert "llvm.masked" not in ll
    a, b = np.arange(32, dtype=np.float32), np.arange(100, 116, dtype=np.float32)
    c, d = np.zeros(48, np.float32), np.full(48, -1, np.float32)
    lib(a, b, c, d)
    np.testing.assert_array_equal(c, np.concatenate([a, b]))
    np.testing.assert_array_equal(d, np.concatenate([a * 2, np.full(16, -1, np.float32)]))
    # the reference executor takes such conditions too: the chosen side only (B[-32:-16] would
    # be out of bounds), and an if statement whose lanes agree
    check_against_reference(prim_func(UNIFORM_CONDITION), a, b, np.zeros(48, np.float32),
                            np.full(48, -1, np.float32))


LANE_VARYING_BROADCASTS = """
    @T.prim_func
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"),
             D: T.Buffer((4,), "float32"), E: T.Buffer((8,), "float32")):
        for j in T.vectorized(16):
            C[j] = T.if_then_else(T.Broadcast(j < 5, 16), A[j], B[j])
        m: T.boolx4 = T.Ramp(0, 1, 4) < T.Broadcast(2, 4)
        D[0:4] = T.if_then_else(T.Broadcast(m, 4), A[0:4], B[0:4])
        for i in range(2):
            E[i * 4:i * 4 + 4] = T.if_then_else(T.Broadcast(i < 1, 4), A[i * 4:i * 4 + 4], T.float32(-1))
"""


def test_a_broadcast_that_differs_by_lane_stays_a_mask_and_a_scalar_side_is_repeated():
    """Only a broadcast of a scalar that no vectorized loop variable reaches is one branch: of
    ``j < 5`` in a loop the code generator vectorizes, or of a vector, each lane picks its own
    side; a branch whose other side is a scalar repeats it in every lane."""
    lib = tvms.build(prim_func(LANE_VARYING_BROADCASTS))
    a, b = np.arange(16, dtype=np.float32), np.arange(100, 116, dtype=np.float32)
    c, d, e = np.zeros(16, np.float32), np.zeros(4, np.float32), np.zeros(8, np.float32)
    lib(a, b, c, d, e)
    np.testing.assert_array_equal(c, np.where(np.arange(16) < 5, a, b))
    np.testing.assert_array_equal(d, [0, 1, 102, 103])
    np.testing.assert_array_equal(e, [0, 1, 2, 3, -1, -1, -1, -1])
    check_against_reference(prim_func(LANE_VARYING_BROADCASTS), a, b, c, d, e)


def test_the_reference_executor_refuses_an_if_statement_whose_lanes_disagree():
    func = prim_func("""
    @T.prim_func
    def main(A: T.Buffer((4,), "float32")):
        if T.Ramp(0, 1, 4) < T.Broadcast(2, 4):
            A[0:4] = T.Broadcast(T.float32(1), 4)
""")
    with pytest.raises(TVMSError, match="differs between lanes"):
        run_prim_func(func, np.zeros(4, np.float32))


def test_a_guarded_vector_copy_of_handles_compiles():
    """Masked loads and stores of a vector of handles name their intrinsic by the pointer type
    (``llvm.masked.load.v16p0.p0``); the name had no pointer case (a KeyError traceback)."""
    func = tvms.script.from_source('''
@T.prim_func
def f(a: T.Buffer((10,), "handle"), b: T.Buffer((10,), "handle")):
    for i in T.vectorized(16):
        if i < 10:
            b[i] = a[i]
''')
    lib = tvms.build(func, target="llvm")
    assert "llvm.masked.load.v16p0.p0" in lib.get_source("ll")


def test_a_zero_dimensional_buffer_is_its_one_element():
    """``B[()]`` reached the llvm code generator with no index (a crash: IndexError)."""
    text = """
# from tvm.script import tirx as T

@T.prim_func(private=True)
def main(A: T.Buffer((1024,), "int32"), B: T.Buffer((), "int32")):
    for x_value in range(10):
        B[()] = A[128] + x_value
"""
    lib = tvms.build(from_source(text), target="llvm")
    b = tvms.nd.array(np.zeros((), "int32"))
    lib(tvms.nd.array(np.arange(1024, dtype="int32")), b)
    assert int(b.numpy()) == 137


def test_a_number_as_a_condition_is_true_when_not_zero():
    """``if i:``, ``while k[0]:`` and ``T.Select(i % 2, ...)`` on an int32 or a float32 (TVM's
    parser takes them; a TVM test prints ``if i:``) branch on the value compared with zero, as
    C, Python and the reference executor do: LLVM IR that branched on an i32 was invalid."""
    func = prim_func('''
    @T.prim_func
    def main(A: T.Buffer((12,), "int32"), B: T.Buffer((12,), "float32")):
        for i in range(10):
            if i % 3:
                A[i] = A[i] + 1
            B[i] = T.Select(i % 2, B[i] + T.float32(1), B[i])
            if B[i]:
                A[i] = A[i] + 10
        k = T.alloc_buffer((1,), "int32")
        k[0] = 3
        while k[0]:
            A[11] = A[11] + 1
            k[0] = k[0] - 1
''')
    a, b = np.zeros(12, "int32"), np.zeros(12, "float32")
    check_against_reference(func, a, b)
    tvms.build(func)(a, b)
    np.testing.assert_array_equal(a, [0, 11, 1, 10, 1, 11, 0, 11, 1, 10, 0, 3])
    np.testing.assert_array_equal(b, [0, 1] * 5 + [0, 0])


def test_a_function_that_returns_a_value_is_refused_by_llvm_and_runs_in_the_reference():
    """``return x`` (``T.ret``, which TVM's tests print) is named in llvm's refusal, not reported
    as an intrinsic the target lacks; the reference executor returns the value."""
    func = from_source('''
@T.prim_func
def func(N: T.int32, M: T.int32) -> T.int32:
    return N * M
''')
    with pytest.raises(TVMSError, match=r"does not compile a PrimFunc that returns a value \(return x, T.ret\)"):
        tvms.build(func)
    assert run_prim_func(func, 6, 7) == 42


def _intrinsic_call(result: str, symbol: str, args: str, dtype: str = "int32") -> str:
    store = "C[0:4]" if result.endswith("x4") else "C[0]"  # (a store takes the value's lanes)
    return f'''
@T.prim_func
def main(A: T.Buffer((8,), "{dtype}"), C: T.Buffer((4,), "int32")):
    {store} = T.call_llvm_pure_intrin("{result}", "{symbol}", {args})
'''


def test_an_intrinsic_of_another_architecture_is_refused_not_an_llvm_abort():
    """``llvm.amdgcn.sdot4`` on this machine (a TVM test's tensor intrinsic): LLVM's instruction
    selection ended the process ("Cannot select"); it is refused by name before LLVM sees it."""
    import llvmlite.binding as llvm

    host = llvm.get_process_triple()
    for symbol, prefix in (("llvm.amdgcn.sdot4", "amdgcn"), ("llvm.nvvm.read.ptx.sreg.tid.x", "nvvm")):
        if host.startswith(prefix):
            continue
        func = from_source(_intrinsic_call("int32", symbol, "A[0], A[1], A[2], T.bool(True)"))
        with pytest.raises(TVMSError, match=rf"the LLVM intrinsic {re.escape(symbol)} is one of the {prefix} target"):
            tvms.build(func)


@pytest.mark.skipif(not __import__("platform").machine() in ("x86_64", "AMD64"), reason="x86 intrinsics")
def test_a_host_intrinsic_that_llvm_would_abort_on_is_an_error_and_a_right_one_runs():
    """An x86 intrinsic LLVM upgrades from an old name, called with other types than the upgrade
    expects, ended the process in an assertion; such modules compile first in a process of their
    own, so it is an error here. A rightly typed one (SSE2's pmaddwd) runs."""
    wrong = from_source(_intrinsic_call("int32x4", "llvm.x86.avx512.vpdpbusd.512", "A[0], A[1], A[2]", "int32"))
    with pytest.raises(TVMSError):
        tvms.build(wrong)
    func = from_source(_intrinsic_call("int32x4", "llvm.x86.sse2.pmadd.wd", "A[0:8], A[0:8]", "int16"))
    a = np.arange(1, 9, dtype="int16")
    c = np.zeros(4, "int32")
    tvms.build(func)(a, c)
    np.testing.assert_array_equal(c, [1 + 4, 9 + 16, 25 + 36, 49 + 64])


def test_reinterpret_may_change_the_lanes_keeping_the_bits():
    """``T.reinterpret("int32", A[0:4])`` of four int8 lanes (AMD's sdot4 operands in a TVM
    test) is one int32, and back: llvm bitcast to four int32 lanes, which LLVM refused."""
    func = from_source('''
@T.prim_func
def main(A: T.Buffer((8,), "int8"), C: T.Buffer((2,), "int32"), D: T.Buffer((8,), "int8"), F: T.Buffer((2,), "float32")):
    C[0] = T.reinterpret("int32", A[0:4])
    C[1] = T.reinterpret("int32", A[4:8]) + 1
    D[0:4] = T.reinterpret("int8x4", C[0])
    F[0] = T.reinterpret("float32", A[0:4])
''')
    a = np.arange(1, 9, dtype="int8")
    _, c, d, f = check_against_reference(func, a, np.zeros(2, "int32"), np.zeros(8, "int8"), np.zeros(2, "float32"))
    np.testing.assert_array_equal(c, a.view("int32") + [0, 1])
    np.testing.assert_array_equal(d, [1, 2, 3, 4, 0, 0, 0, 0])
    assert f[0] == a[:4].view("float32")[0]
    bad = from_source('''
@T.prim_func
def main(A: T.Buffer((8,), "int8"), F: T.Buffer((2,), "float32")):
    F[0] = T.reinterpret("float32", A[0:2])
''')
    with pytest.raises(TVMSError, match=r"T.reinterpret of int8x2 as float32: the sizes differ \(16 and 32 bits\)"):
        tvms.build(bad)


def test_a_vectorized_loop_of_vector_expressions_runs_each_iteration_whole():
    """A T.vectorized loop whose body already holds vectors (here four int8 lanes read as one
    int32 each iteration) has no vector form of lanes of lanes: it runs serially. Its vector form
    had read the nested ramp's lanes diagonally (A[0], A[5], A[10], A[15]): silently wrong."""
    func = from_source('''
@T.prim_func
def main(A: T.Buffer((16,), "int8"), C: T.Buffer((4,), "int32")):
    for i in T.vectorized(4):
        C[i] = T.reinterpret("int32", A[i * 4:i * 4 + 4])
''')
    a = np.arange(16, dtype="int8")
    expected, got = np.zeros(4, "int32"), np.zeros(4, "int32")
    run_prim_func(func, a, expected)
    tvms.build(func, "llvm")["main"](a, got)
    np.testing.assert_array_equal(expected, a.view("int32"))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not __import__("platform").machine() in ("x86_64", "AMD64"), reason="x86 intrinsics")
@pytest.mark.parametrize("executable", ["", "/no/such/python", "/bin/false"])
def test_a_probe_that_cannot_run_leaves_a_right_module_to_build(executable, monkeypatch):
    """No interpreter to run the probe in (an embedded one), or one that cannot import llvmlite:
    that is not LLVM's abort, and the module builds unprobed (it had been a raw OSError, or a
    refusal blaming the intrinsic)."""
    from tvms.lowering.codegen import llvm_intrinsic_check

    llvm_intrinsic_check._probe.cache_clear()
    monkeypatch.setattr(llvm_intrinsic_check.sys, "executable", executable)
    name = f"unprobed_{len(executable)}"  # (a text of its own: a build of a text built before is a cache hit)
    func = from_source(_intrinsic_call("int32x4", "llvm.x86.sse2.pmadd.wd", "A[0:8], A[0:8]", "int16")
                       .replace("def main(", f"def {name}("))
    a, c = np.arange(8, dtype="int16"), np.zeros(4, "int32")
    tvms.build(func)["main"](a, c)
    np.testing.assert_array_equal(c, (a.astype("int32") ** 2).reshape(4, 2).sum(axis=1))
    llvm_intrinsic_check._probe.cache_clear()
