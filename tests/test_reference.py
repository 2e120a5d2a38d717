"""The TensorIR reference executor (runtime/reference.py): the corpus PrimFuncs against numpy,
and the semantics of each statement and expression on small programs."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from tvms import TVMSError
from tvms.ir.function import PrimFunc
from tvms.runtime.reference import prim_func_source, run_prim_func
from tvms.script import from_source

from conftest import CORPUS, CORPUS_COPY, corpus_manifest

RNG = np.random.default_rng(7)


def load(text_or_path: str) -> PrimFunc:
    text = open(text_or_path).read() if text_or_path.endswith(".tvms") else text_or_path
    mod = from_source(text)
    return mod if isinstance(mod, PrimFunc) else mod["main"]


def shape_of(buf) -> tuple:
    return tuple(int(d.value) for d in buf.shape)


def random_args(func: PrimFunc) -> list:
    out = []
    for p in func.params:
        buf = func.buffer_map[p]
        out.append(RNG.standard_normal(shape_of(buf)).astype(str(buf.dtype)))
    return out


def conv2d_nchw(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for r in range(kh):
        for s in range(kw):
            out += np.einsum("nchw,oc->nohw", x[:, :, r:r + out.shape[2], s:s + out.shape[3]], w[:, :, r, s])
    return out


def expected(name: str, args: list) -> tuple[int, np.ndarray]:
    """(index of the output argument, what numpy says it holds) for a corpus file."""
    if "matmul" in name:
        a, b, c = args
        want = a @ b
        if c.ndim == 4:  # transform_layout: C[i // 16, j // 16, i % 16, j % 16]
            want = want.reshape(8, 16, 8, 16).transpose(0, 2, 1, 3)
        return 2, want
    if "conv2d" in name:
        return 2, conv2d_nchw(args[0], args[1], 1)
    if "reduce" in name:
        return 1, args[0].sum(axis=1)
    if "thread_launch" in name:
        return 1, np.exp(args[0]) + 1
    raise AssertionError(f"no numpy oracle for {name}")


STATIC = [row["file"] for row in corpus_manifest() if row.get("static_tir_builds")]


@pytest.mark.parametrize("name", sorted(STATIC))
def test_corpus_prim_func_matches_numpy(name: str) -> None:
    func = load(str(CORPUS / name))
    args = random_args(func)
    out, want = expected(name, [a.copy() for a in args])
    args[out][...] = np.nan  # the program must write every element
    run_prim_func(func, *args)
    np.testing.assert_allclose(args[out], want, rtol=1e-4, atol=1e-4)


def test_corpus_if_select_let_assert() -> None:
    func = load(str(CORPUS_COPY / "tir_script_if_select_let_assert.tvms"))
    a = np.arange(-8, 8, dtype="int32")
    b = np.zeros(16, "int32")
    run_prim_func(func, a, b, 5)
    x = a * 3
    want = np.where(np.arange(16) < 5, np.where(x > 10, x, 10),
                    np.where(x % 2 == 0, x // 2, x * 3 + 1))
    np.testing.assert_array_equal(b, want)
    b2 = np.zeros(16, "int32")
    run_prim_func(func, a, b2, n=16)  # the scalar by name
    np.testing.assert_array_equal(b2, np.where(x > 10, x, 10))
    with pytest.raises(TVMSError, match="n must be positive"):
        run_prim_func(func, a, b, 0)


MATMUL_64 = """
@T.prim_func
def mm(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def test_matmul_64_is_fast_enough() -> None:
    func = load(MATMUL_64)
    a, b, c = (RNG.standard_normal((64, 64)).astype("float32") for _ in range(3))
    start = time.perf_counter()
    run_prim_func(func, a, b, c)
    assert time.perf_counter() - start < 5
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert "for " in prim_func_source(func)


def run1(text: str, *args, **scalars):
    func = load(text)
    run_prim_func(func, *args, **scalars)
    return args


def test_integer_division_semantics() -> None:
    a = np.array([7, -7, 7, -7], "int32")
    b = np.array([2, 2, -2, -2], "int32")
    out = np.zeros((4, 4), "int32")
    run1("""
@T.prim_func
def f(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32"), C: T.Buffer((4, 4), "int32")):
    for i in range(4):
        C[0, i] = A[i] // B[i]
        C[1, i] = A[i] % B[i]
        C[2, i] = T.truncdiv(A[i], B[i])
        C[3, i] = T.truncmod(A[i], B[i])
""", a, b, out)
    np.testing.assert_array_equal(out[0], [3, -4, -4, 3])
    np.testing.assert_array_equal(out[1], [1, 1, -1, -1])
    np.testing.assert_array_equal(out[2], [3, -3, -3, 3])
    np.testing.assert_array_equal(out[3], [1, -1, 1, -1])


def test_casts_wrap_and_float32_precision() -> None:
    out_i = np.zeros(2, "int8")
    out_f = np.zeros(2, "float32")
    run1("""
@T.prim_func
def f(I: T.Buffer((2,), "int8"), F: T.Buffer((2,), "float32")):
    I[0] = T.Cast("int8", 200)
    I[1] = T.Cast("int8", T.float32(-3.7))
    F[0] = T.float32(16777216.0) + T.float32(1.0)
    F[1] = T.Cast("float32", 7) / T.float32(2.0)
""", out_i, out_f)
    np.testing.assert_array_equal(out_i, [-56, -3])
    np.testing.assert_array_equal(out_f, [16777216.0, 3.5])  # float32 addition loses the 1


def test_intrinsics() -> None:
    x = np.array([0.5, -1.25, 2.0, 0.0], "float32")
    out = np.zeros((14, 4), "float32")
    run1("""
@T.prim_func
def f(X: T.Buffer((4,), "float32"), Y: T.Buffer((14, 4), "float32")):
    for i in range(4):
        Y[0, i] = T.exp(X[i])
        Y[1, i] = T.log(T.fabs(X[i]) + T.float32(1))
        Y[2, i] = T.sqrt(T.fabs(X[i]))
        Y[3, i] = T.rsqrt(T.fabs(X[i]) + T.float32(1))
        Y[4, i] = T.tanh(X[i])
        Y[5, i] = T.sigmoid(X[i])
        Y[6, i] = T.erf(X[i])
        Y[7, i] = T.floor(X[i])
        Y[8, i] = T.ceil(X[i])
        Y[9, i] = T.round(X[i])
        Y[10, i] = T.trunc(X[i])
        Y[11, i] = T.pow(T.fabs(X[i]), T.float32(2))
        Y[12, i] = T.Select(T.isnan(X[i]), T.float32(1), T.float32(0)) + T.max_value("float32") * T.float32(0)
        Y[13, i] = T.min(X[i], T.float32(0)) + T.max(X[i], T.float32(1))
""", x, out)
    x64 = x.astype("float64")
    np.testing.assert_allclose(out[0], np.exp(x64), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.log(np.abs(x64) + 1), rtol=1e-6)
    np.testing.assert_allclose(out[2], np.sqrt(np.abs(x64)), rtol=1e-6)
    np.testing.assert_allclose(out[3], 1 / np.sqrt(np.abs(x64) + 1), rtol=1e-6)
    np.testing.assert_allclose(out[4], np.tanh(x64), rtol=1e-6)
    np.testing.assert_allclose(out[5], 1 / (1 + np.exp(-x64)), rtol=1e-6)
    np.testing.assert_allclose(out[6], [math.erf(v) for v in x64], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(out[7], np.floor(x))
    np.testing.assert_array_equal(out[8], np.ceil(x))
    np.testing.assert_array_equal(out[9], [0.0, -1.0, 2.0, 0.0])  # half to even
    np.testing.assert_array_equal(out[10], np.trunc(x))
    np.testing.assert_allclose(out[11], x64 ** 2)
    np.testing.assert_array_equal(out[12], 0)
    np.testing.assert_array_equal(out[13], np.minimum(x, 0) + np.maximum(x, 1))


def test_limits_and_reinterpret() -> None:
    out = np.zeros(3, "int32")
    f = np.zeros(1, "float32")
    run1("""
@T.prim_func
def f(I: T.Buffer((3,), "int32"), F: T.Buffer((1,), "float32")):
    I[0] = T.max_value("int32")
    I[1] = T.min_value("int32")
    I[2] = T.reinterpret("int32", T.float32(1.0))
    F[0] = T.min_value("float32")
""", out, f)
    np.testing.assert_array_equal(out, [2**31 - 1, -2**31, 0x3F800000])
    assert f[0] == np.finfo(np.float32).min


def test_if_then_else_is_lazy() -> None:
    a = np.arange(4, dtype="float32")
    b = np.zeros(4, "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.if_then_else(i < 3, A[i + 1], T.float32(-1))
""", a, b)  # A[4] would be out of bounds: only the chosen branch runs
    np.testing.assert_array_equal(b, [1, 2, 3, -1])


def test_symbolic_sizes_are_bound_from_shapes() -> None:
    func = load("""
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 2), "float32")
    B = T.match_buffer(b, (n * 2,), "float32")
    for i, j in T.grid(n, 2):
        B[i * 2 + j] = A[i, j] * T.float32(3)
""")
    a = RNG.standard_normal((5, 2)).astype("float32")
    b = np.zeros(10, "float32")
    run_prim_func(func, a, b)
    np.testing.assert_allclose(b, a.reshape(-1) * 3)
    with pytest.raises(TVMSError, match="dimension 0"):
        run_prim_func(func, a, np.zeros(9, "float32"))


def test_while_allocate_and_decl_buffer_alias() -> None:
    out = np.zeros(6, "int32")
    run1("""
@T.prim_func
def f(O: T.Buffer((6,), "int32")):
    p = T.allocate([6], "int32", "global")
    P = T.decl_buffer((2, 3), "int32", data=p)
    Q = T.decl_buffer((6,), "int32", data=p)
    for i, j in T.grid(2, 3):
        P[i, j] = i * 10 + j
    k = T.alloc_buffer((1,), "int32", scope="local")
    k[0] = 0
    while k[0] < 6:
        O[k[0]] = Q[k[0]]
        k[0] = k[0] + 1
""", out)
    np.testing.assert_array_equal(out, [0, 1, 2, 10, 11, 12])


def test_vector_ramp_and_broadcast() -> None:
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(2):
        B[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4, 1, 4)] + T.Broadcast(T.float32(1), 4)
""", a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_a_shuffle_of_one_lane_is_a_scalar() -> None:
    """(``T.Shuffle([...], [1])`` had been a one-element array: a raw numpy error where stored)"""
    a, b = np.arange(8, dtype="float32"), np.zeros(4, "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.Shuffle([A[i * 2:i * 2 + 2]], [1])
""", a, b)
    np.testing.assert_array_equal(b, [1, 3, 5, 7])


def test_block_predicate_init_and_alloc() -> None:
    a = RNG.standard_normal((10, 6)).astype("float32")
    b = np.full(10, np.nan, "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((10, 6), "float32"), B: T.Buffer((10,), "float32")):
    for io, ii, k in T.grid(3, 4, 6):
        with T.block("B"):
            vi = T.axis.spatial(10, io * 4 + ii)
            vk = T.axis.reduce(6, k)
            T.where(io * 4 + ii < 10)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""", a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_match_buffer_is_a_view_of_the_region() -> None:
    a = np.arange(16, dtype="float32").reshape(4, 4)
    b = np.zeros((4, 4), "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(2, 2):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 2:vi * 2 + 2, vj * 2:vj * 2 + 2])
            T.writes(B[vi * 2:vi * 2 + 2, vj * 2:vj * 2 + 2])
            As = T.match_buffer(A[vi * 2:vi * 2 + 2, vj * 2:vj * 2 + 2], (2, 2))
            Bs = T.match_buffer(B[vi * 2:vi * 2 + 2, vj * 2:vj * 2 + 2], (2, 2))
            for x, y in T.grid(2, 2):
                Bs[x, y] = As[y, x]
""", a, b)
    want = np.block([[a[0:2, 0:2].T, a[0:2, 2:4].T], [a[2:4, 0:2].T, a[2:4, 2:4].T]])
    np.testing.assert_array_equal(b, want)


def test_thread_binding_loops_run_serially() -> None:
    a = RNG.standard_normal(64).astype("float32")
    b = np.zeros(64, "float32")
    run1("""
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            B[bx * 32 + tx] = A[bx * 32 + tx] * T.float32(2)
""", a, b)
    np.testing.assert_allclose(b, a * 2)


def test_unknown_intrinsic_is_named() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = T.call_extern("float32", "my_fn", A[i])
""")
    with pytest.raises(TVMSError, match="tir.call_extern"):
        run_prim_func(func, np.zeros(4, "float32"))


def test_argument_errors() -> None:
    func = load(str(CORPUS_COPY / "tir_script_thread_launch_gpu.tvms"))
    with pytest.raises(TVMSError, match="float32"):
        run_prim_func(func, np.zeros(1024, "float64"), np.zeros(1024, "float32"))
    with pytest.raises(TVMSError, match="no value"):
        run_prim_func(func, np.zeros(1024, "float32"))


@pytest.mark.parametrize("index", ["i - 1", "i + 1"])
def test_out_of_bounds_access_is_an_error(index: str) -> None:
    func = load(f"""
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[{index}]
""")
    with pytest.raises(TVMSError, match="out-of-bounds"):
        run_prim_func(func, np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_integer_division_by_zero_is_an_error() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
    for i in range(4):
        B[i] = A[i] // A[3 - i]
""")
    with pytest.raises(TVMSError, match="integer division by zero"):
        run_prim_func(func, np.array([1, 2, 0, 4], "int32"), np.zeros(4, "int32"))


INT_OPS = load("""
@T.prim_func
def f(A: T.Buffer((1,), "int32"), B: T.Buffer((1,), "int32"), C: T.Buffer((6,), "int32")):
    C[0] = A[0] // B[0]
    C[1] = A[0] % B[0]
    C[2] = T.truncdiv(A[0], B[0])
    C[3] = T.truncmod(A[0], B[0])
    C[4] = T.min(A[0], B[0]) + T.max(A[0], B[0])
    C[5] = T.Select(A[0] < B[0], A[0] - B[0], A[0] * 2)
""")


def test_integer_semantics_property() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    small = st.integers(-1000, 1000)

    @settings(max_examples=100, deadline=None)
    @given(small, small.filter(lambda v: v != 0))
    def check(a: int, b: int) -> None:
        out = np.zeros(6, "int32")
        run_prim_func(INT_OPS, np.array([a], "int32"), np.array([b], "int32"), out)
        q = int(a / b)  # truncation toward zero
        assert out.tolist() == [a // b, a % b, q, a - q * b, min(a, b) + max(a, b),
                                a - b if a < b else a * 2]

    check()


def test_let_expression_and_likely() -> None:
    from tvms.ir import expr as E
    from tvms.ir import stmt as S
    from tvms.ir.buffer import decl_buffer
    from tvms.ir.dtype import handle
    from tvms.ir.node import FrozenDict
    from tvms.ir.op import get_op
    from tvms.runtime.reference import compile_expr

    buf = decl_buffer((4,), "int32", "B")
    param = E.Var("b", handle)
    i, v = E.Var("i"), E.Var("v")
    value = E.Let(v, E.Mul(i, E.IntImm(E.int32, 3)), E.Add(v, v))  # let v = 3 i in v + v
    cond = E.Call(E.boolean, get_op("tir.likely"), (E.LT(i, E.IntImm(E.int32, 2)),))
    body = S.For(i, E.IntImm(E.int32, 0), E.IntImm(E.int32, 4), "serial",
                 S.IfThenElse(cond, S.BufferStore(buf, value, (i,)),
                              S.BufferStore(buf, E.IntImm(E.int32, -1), (i,))))
    func = PrimFunc((param,), FrozenDict({param: buf}), body)
    out = np.zeros(4, "int32")
    run_prim_func(func, out)
    np.testing.assert_array_equal(out, [0, 6, -1, -1])
    assert compile_expr(value)({i: 5}) == 30


def test_reinterpret_reads_the_bits_of_its_arguments_own_type():
    """A constant argument arrives as a plain number (its width was lost: a raw numpy ValueError)."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((2,), "float32"), B: T.Buffer((3,), "int32")):
    A[0] = T.reinterpret("float32", T.uint32(1065353216))
    A[1] = T.reinterpret("float32", B[0])
    B[1] = T.reinterpret("int32", A[0])
    B[2] = T.reinterpret("int32", T.float32(-0.0))
''')
    a, b = np.zeros(2, "float32"), np.array([1073741824, 0, 0], "int32")
    run_prim_func(func, a, b)
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [1073741824, 1065353216, -2147483648]


def test_reinterpret_into_lanes_and_of_a_wrapped_integer():
    """A scalar into two lanes; a uint64 product beyond 2**64 (a Python number until stored)."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((2,), "int32"), B: T.Buffer((1,), "float64"), C: T.Buffer((1,), "uint64"), D: T.Buffer((1,), "float64")):
    A[0:2] = T.reinterpret("int32x2", B[0])
    D[0] = T.reinterpret("float64", C[0] * T.uint64(3))
''')
    a, d = np.zeros(2, "int32"), np.zeros(1)
    c = np.array([2 ** 63 + 5], "uint64")
    run_prim_func(func, a, np.array([1.0]), c, d)
    assert a.tolist() == np.array([1.0]).view("int32").tolist()
    assert d.view("uint64")[0] == (2 ** 63 + 5) * 3 % 2 ** 64


def test_a_size_no_dimension_gives_is_asked_for():
    """``A: T.Buffer((n * 32 - 1,))``: n is not read from the array (it was a KeyError)."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer(("n * 32 - 1",), "float32")):
    n = T.int32()
    A[0] = T.float32(1.0)
''')
    with pytest.raises(TVMSError, match=r"dimension 0 is n \* 32 - 1: .* and n is bound by none"):
        run_prim_func(func, np.zeros(31, "float32"))


def test_a_shift_by_a_negative_count_is_refused():
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((4,), "int32")):
    for i in range(4):
        A[i] = T.shift_left(16, 1 - i)
''')
    with pytest.raises(TVMSError, match=r"a shift by a negative count \(-1\): undefined, as in C"):
        run_prim_func(func, np.zeros(4, "int32"))


def test_a_negative_shift_in_a_lane_a_select_drops_is_no_error():
    """The executor computes both sides of a lane-wise select: the lanes it drops take a value
    (as the compiled code's do), and only a scalar shift by a negative count is refused."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((4,), "int32"), K: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
    B[0:4] = T.if_then_else(K[0:4] > 0, T.shift_left(A[0:4], K[0:4] - 1), T.Broadcast(0, 4))
''')
    b = np.zeros(4, "int32")
    run_prim_func(func, np.full(4, 16, "int32"), np.arange(4, dtype="int32"), b)
    assert b.tolist() == [0, 16, 32, 64]


def test_reinterpret_of_elements_narrower_than_a_byte_is_refused():
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((1,), "int8"), B: T.Buffer((2,), "int8")):
    B[0:2] = T.Cast("int8x2", T.reinterpret("int4x2", A[0]))
''')
    with pytest.raises(TVMSError, match="does not reinterpret elements narrower than a byte"):
        run_prim_func(func, np.array([0x12], "int8"), np.zeros(2, "int8"))


def test_a_scalar_of_a_vector_type_holds_its_lanes():
    """``v: T.uint8x4 = A[T.Ramp(0, 1, 4)]`` (TVM's VNNI tensor intrinsics): its one element is
    four lanes (storing them into one array element was a raw numpy error)."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((4,), "uint8"), B: T.Buffer((1,), "int32")):
    A_u8x4: T.uint8x4 = A[T.Ramp(0, 1, 4)]
    A_i32: T.int32 = T.reinterpret("int32", A_u8x4)
    B[0] = A_i32
''')
    a, b = np.array([1, 2, 3, 4], "uint8"), np.zeros(1, "int32")
    run_prim_func(func, a, b)
    assert b[0] == a.view("int32")[0]


def test_an_allocation_of_a_negative_extent_is_refused():
    """TVM's webgpu codegen test allocates ``T.alloc_local((-1,))`` (a raw numpy error here before)."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((1,), "float32")):
    scratch = T.alloc_local((-1,))
    A[0] = T.float32(1.0)
''')
    with pytest.raises(TVMSError, match="an allocation of extents -1: a negative extent"):
        run_prim_func(func, np.zeros(1, "float32"))
