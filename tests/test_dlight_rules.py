"""The default CPU rules of tvms.dlight (lowering/dlight/cpu_*.py): GEMV, Reduction, Elementwise
and Fallback. Each scheduled function is compiled and checked against the function it came from
(or numpy), on hypothesis-drawn shapes; its printed text re-parses to the same text; every
legalized fixture module is scheduled and still computes what it computed before."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
import tvms.dlight as dl  # noqa: E402
from tvms.ir.arith import Analyzer  # noqa: E402
from tvms.ir.analysis import substitute  # noqa: E402
from tvms.ir.expr import IntImm, Var, const  # noqa: E402
from tvms.ir.function import PrimFunc  # noqa: E402
from tvms.ir.node import FrozenDict  # noqa: E402
from tvms.ir.visitor import collect  # noqa: E402
from tvms.lowering.relax.legalize import LegalizeOps  # noqa: E402
from tvms.runtime.reference import run_prim_func  # noqa: E402
from tvms.runtime.tir_values import numpy_dtype  # noqa: E402
from tvms.script import from_source  # noqa: E402

LEGALIZED = sorted((Path(__file__).parent / "fixtures" / "legalize").glob("*_legalized.tvms"))
# functions whose buffers' sizes follow from scalar arguments in a way random arguments do not
# respect: they are scheduled and re-parsed, not run
NOT_RUN_ON_RANDOM_ARGUMENTS = {
    "math_create3_dyn_legalized": "arange's output length is (end - start) / step of its scalars",
}
ALL_RULES = (dl.cpu.GEMV(), dl.cpu.Reduction(), dl.cpu.Elementwise(), dl.cpu.Fallback())


# ---------------------------------------------------------------- running functions
def random_arguments(func: PrimFunc, rng: np.random.Generator, sizes: dict | None = None, low: int = 0) -> list:
    """Arrays (and scalars) for ``func``'s parameters; a symbolic size ``n`` takes ``sizes[n]``,
    else 3. Integers are ``low`` or 1, so that they are valid indices (take, gather) of any axis."""
    values: dict = {}
    args = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            args.append(1 if param.dtype.is_int or param.dtype.is_uint else 0.5)
            continue
        shape = []
        for dim in buffer.shape:
            for var in (v for v in _vars(dim) if v not in values):
                values[var] = (sizes or {}).get(var.name, 3)
            shape.append(_evaluate(dim, values))
        args.append(_random_array(buffer.dtype, shape, rng, low))
    return args


def _vars(e) -> list:
    return collect(e, Var)


def _evaluate(dim, values: dict) -> int:
    value = Analyzer().simplify(substitute(dim, {v: const(n, v.dtype) for v, n in values.items()}))
    assert isinstance(value, IntImm), dim
    return value.value


def _random_array(dtype, shape: list, rng: np.random.Generator, low: int) -> np.ndarray:
    np_dtype = numpy_dtype(dtype)
    if np_dtype.kind == "f":
        return rng.uniform(0.5, 2.0, shape).astype(np_dtype)
    if np_dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(low, 2, shape).astype(np_dtype)


def run_compiled(func: PrimFunc, args: list) -> list:
    """Copies of ``args`` after running ``func`` compiled with LLVM on them."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tvms.build(func, target="llvm")(*copies)
    return copies


def run_reference(func: PrimFunc, args: list) -> list:
    """Copies of ``args`` after running ``func`` in the reference executor (numpy)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_prim_func(func, *copies)
    return copies


def assert_same_results(got: list, want: list) -> None:
    for a, b in zip(got, want):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=2e-3 if a.dtype == np.float16 else 1e-4, atol=1e-5)
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


def assert_reparses(func: PrimFunc) -> None:
    text = func.script()
    assert from_source(text).script() == text


def schedule_all(mod):
    with tvms.target.Target("llvm"):
        return dl.ApplyDefaultSchedule(*ALL_RULES)(mod)


# ---------------------------------------------------------------- every legalized fixture
@pytest.mark.parametrize("path", LEGALIZED, ids=lambda p: p.stem)
def test_default_schedule_keeps_what_every_legalized_function_computes(path):
    mod = from_source(path.read_text())
    scheduled = schedule_all(mod)
    rng = np.random.default_rng(0)
    for name in mod:
        before = mod[name]
        if not isinstance(before, PrimFunc):
            continue
        after = scheduled[name]
        # (a kernel written with loops already, such as the extern scatter kernels, is left as it is)
        assert dl.is_scheduled(before) or after.attrs["tir.is_scheduled"], name
        if path.stem in NOT_RUN_ON_RANDOM_ARGUMENTS:
            continue
        args = random_arguments(before, rng)
        try:
            want = run_reference(before, args)
        except tvms.TVMSError as err:  # an integer division by one of the zeros: divide by ones
            assert "division by zero" in str(err)
            args = random_arguments(before, rng, low=1)
            want = run_reference(before, args)
        assert_same_results(run_compiled(after, args), want)
    assert schedule_all(scheduled).script() == scheduled.script()  # a second run changes nothing
    text = scheduled.script()
    assert from_source(text).script() == text


# ---------------------------------------------------------------- building functions to schedule
RELAX_HEADER = "# from tvm.script import ir as I\n# from tvm.script import relax as R\n\n@I.ir_module\nclass M:\n"
TIR_HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
TARGET = tvms.target.Target("llvm")
AVX2 = tvms.target.Target("llvm -mcpu=haswell -mattr=+avx2,+fma -num-cores=2")  # 8 fp32 lanes, 2 threads


def legalized(params: str, expr: str) -> PrimFunc:
    """The PrimFunc LegalizeOps makes of ``y = expr`` for a Relax function with ``params``."""
    src = (RELAX_HEADER + f"    @R.function\n    def main({params}):\n        with R.dataflow():\n"
           f"            y = {expr}\n            R.output(y)\n        return y\n")
    mod = LegalizeOps()(from_source(src))
    (func,) = [mod[name] for name in mod if isinstance(mod[name], PrimFunc)]
    return func


def tensor(shape: tuple, dtype: str = "float32") -> str:
    dims = ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in shape)
    return f'R.Tensor(({dims}{"," if len(shape) == 1 else ""}), "{dtype}")'


def check_rule(rule, func: PrimFunc, args: list, expected: np.ndarray) -> PrimFunc:
    """``rule`` schedules ``func``; the compiled schedule writes ``expected`` into the last
    argument, and the scheduled function prints text that parses back to the same text."""
    sch = rule.apply(func, TARGET, False)
    assert sch is not None, f"{type(rule).__name__} declined"
    scheduled = sch.mod["main"]
    out = run_compiled(scheduled, args)[-1]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    assert_reparses(scheduled)
    return scheduled


def floats(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 48, 64, 100])


# ---------------------------------------------------------------- GEMV
def gemv_source(k: int, n: "int | str", weight_nk: bool, epilogue: bool) -> str:
    """``C = relu(A @ W + bias)`` (or just ``A @ W``) for ``A`` of shape (1, K) and ``W`` of
    shape (K, N), or (N, K) read transposed."""
    w_shape, w_index = ((n, k), "W[vj, vk]") if weight_nk else ((k, n), "W[vk, vj]")
    n_text = f"T.int64({n})" if isinstance(n, int) else n
    w_dims = ", ".join(f"T.int64({d})" if isinstance(d, int) else d for d in w_shape)
    result = "Y" if epilogue else "C"
    symbolic = "" if isinstance(n, int) else f"        {n} = T.int64()\n"
    body = (f"    @T.prim_func\n"
            f"    def main(a: T.handle, w: T.handle, bias: T.handle, c: T.handle):\n"
            f'        T.func_attr({{"tir.noalias": True}})\n{symbolic}'
            f"        A = T.match_buffer(a, (T.int64(1), T.int64({k})))\n"
            f"        W = T.match_buffer(w, ({w_dims}))\n"
            f"        B = T.match_buffer(bias, ({n_text},))\n"
            f"        C = T.match_buffer(c, (T.int64(1), {n_text}))\n")
    if epilogue:
        body += (f"        Y = T.alloc_buffer((T.int64(1), {n_text}))\n"
                 f"        Z = T.alloc_buffer((T.int64(1), {n_text}))\n")
    body += (f"        for i, j, k in T.grid(T.int64(1), {n_text}, T.int64({k})):\n"
             f'            with T.block("matmul"):\n'
             f'                vi, vj, vk = T.axis.remap("SSR", [i, j, k])\n'
             f"                with T.init():\n"
             f"                    {result}[vi, vj] = T.float32(0)\n"
             f"                {result}[vi, vj] = {result}[vi, vj] + A[vi, vk] * {w_index}\n")
    if epilogue:
        for name, dst, value in (("bias", "Z", "Y[vi, vj] + B[vj]"), ("relu", "C", "T.max(Z[vi, vj], T.float32(0))")):
            body += (f"        for i, j in T.grid(T.int64(1), {n_text}):\n"
                     f'            with T.block("{name}"):\n'
                     f'                vi, vj = T.axis.remap("SS", [i, j])\n'
                     f"                {dst}[vi, vj] = {value}\n")
    return TIR_HEADER + body


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=SIZES, n=SIZES.filter(lambda n: n > 1), weight_nk=st.booleans(), epilogue=st.booleans())
def test_gemv_computes_the_matrix_vector_product(k, n, weight_nk, epilogue):
    """(An output of one element is a dot product: the Reduction rule's.)"""
    rng = np.random.default_rng(k * 1000 + n)
    a, w, bias = floats(rng, 1, k), floats(rng, *((n, k) if weight_nk else (k, n))), floats(rng, n)
    product = a @ (w.T if weight_nk else w)
    expected = np.maximum(product + bias, 0) if epilogue else product
    func = from_source(gemv_source(k, n, weight_nk, epilogue))["main"]
    check_rule(dl.cpu.GEMV(), func, [a, w, bias, np.zeros((1, n), np.float32)], expected)


def test_gemv_with_a_symbolic_output_size():
    func = from_source(gemv_source(64, "n", weight_nk=True, epilogue=True))["main"]
    rng = np.random.default_rng(5)
    for n in (1, 7, 40):
        a, w, bias = floats(rng, 1, 64), floats(rng, n, 64), floats(rng, n)
        check_rule(dl.cpu.GEMV(), func, [a, w, bias, np.zeros((1, n), np.float32)],
                   np.maximum(a @ w.T + bias, 0))


def test_gemv_schedules_both_layouts_for_the_vector_unit():
    """[1, K] x [K, N]: the k loop outside vectorized runs of n, one chunk of n per thread;
    [1, K] x [N, K]: per-lane partial sums (rfactor) vectorized along k, parallel over n."""
    kn = dl.cpu.GEMV().apply(from_source(gemv_source(4096, 4096, False, True))["main"], AVX2, False)
    text = kn.mod.script()
    assert "for i_j_0_fused in T.parallel(T.int64(2)):" in text
    assert re.search(r"for k, j_1 in T.grid\(T.int64\(4096\), T.int64\(64\)\):\n\s+"
                     r"for j_2 in T.vectorized\(T.int64\(32\)\):", text)
    nk = dl.cpu.GEMV().apply(from_source(gemv_source(4096, 4096, True, False))["main"], AVX2, False)
    text = nk.mod.script()
    assert "for i_j_fused in T.parallel(T.int64(4096)):" in text
    assert re.search(r"for k_0 in range\(T.int64\(512\)\):\n\s+for k_1 in T.vectorized\(T.int64\(8\)\):\n"
                     r'\s+with T.block\("matmul_rf_update"\):', text)


def test_gemv_leaves_a_tiny_product_on_one_thread():
    sch = dl.cpu.GEMV().apply(from_source(gemv_source(16, 16, False, False))["main"], TARGET, False)
    assert "T.parallel" not in sch.mod.script()


def test_gemv_declines_what_is_not_a_matrix_vector_product():
    matmul = legalized(f"x: {tensor((8, 16))}, w: {tensor((16, 8))}", "R.matmul(x, w)")
    softmax = legalized(f"x: {tensor((8, 16))}", "R.nn.softmax(x, axis=-1)")
    add = legalized(f"x: {tensor((8, 16))}", "R.add(x, x)")
    for func in (matmul, softmax, add):
        assert dl.cpu.GEMV().apply(func, TARGET, False) is None


# ---------------------------------------------------------------- Reduction
def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


ROW_OPS = {  # name: (Relax expression, extra parameters of shape (cols,), numpy)
    "sum": ("R.sum(x, axis=[-1])", 0, lambda x: x.sum(-1)),
    "mean": ("R.mean(x, axis=[-1])", 0, lambda x: x.mean(-1)),
    "max": ("R.max(x, axis=[-1])", 0, lambda x: x.max(-1)),
    "min": ("R.min(x, axis=[-1])", 0, lambda x: x.min(-1)),
    "softmax": ("R.nn.softmax(x, axis=-1)", 0, _softmax),
    "log_softmax": ("R.nn.log_softmax(x, axis=-1)", 0, lambda x: np.log(_softmax(x))),
    "layer_norm": ("R.nn.layer_norm(x, g, b, axes=[-1])", 2, _layer_norm),
    "rms_norm": ("R.nn.rms_norm(x, g, axes=[-1])", 1,
                 lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g),
}


def row_function(op: str, rows: tuple, cols: int) -> tuple[PrimFunc, int]:
    expr, extra, _ = ROW_OPS[op]
    params = [f"x: {tensor(rows + (cols,))}"] + [f"{name}: {tensor((cols,))}" for name in "gb"[:extra]]
    return legalized(", ".join(params), expr), extra


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(ROW_OPS)), rows=st.lists(SIZES, min_size=1, max_size=2).map(tuple),
       cols=SIZES, symbolic=st.booleans())
def test_reduction_computes_row_reductions_and_normalizations(op, rows, cols, symbolic):
    func, extra = row_function(op, (("n",) + rows[1:]) if symbolic else rows, cols)
    rng = np.random.default_rng(cols)
    x = floats(rng, *rows, cols)
    params = [floats(rng, cols) for _ in range(extra)]
    expected = ROW_OPS[op][2](x, *params)
    check_rule(dl.cpu.Reduction(), func, [x, *params, np.zeros(expected.shape, np.float32)], expected)


def test_reduction_keeps_each_row_in_the_cache_and_uses_the_vector_unit():
    """softmax over rows of 1024: one parallel loop over the rows holds every block; the max and
    the sum accumulate 8 lanes at a time (rfactor); exp is computed once per element, 8 lanes at
    a time (the code generator's vector exp)."""
    func, _ = row_function("softmax", (256,), 1024)
    text = dl.cpu.Reduction().apply(func, AVX2, False).mod.script()
    assert text.count("T.parallel(") == 1 and "for i0 in T.parallel(T.int64(256)):" in text
    assert text.count("T.exp(") == 1
    for block in ("T_softmax_maxelem_rf_update", "T_softmax_expsum_rf_update"):
        assert re.search(r"for ax0 in T.vectorized\(T.int64\(8\)\):\n\s+with T.block\(\"" + block, text), block
    assert re.search(r"for ax0_1 in T.vectorized\(T.int64\(8\)\):\n\s+with T.block\(\"T_softmax_exp\"\)", text)
    assert re.search(r"for i1_1 in T.vectorized\(T.int64\(8\)\):\n\s+with T.block\(\"T_softmax_norm\"\)", text)


@pytest.mark.parametrize("expr, reference", [("R.sum(x)", np.sum), ("R.mean(x)", np.mean), ("R.max(x)", np.max)])
def test_reduction_of_a_whole_tensor_accumulates_vector_lanes(expr, reference):
    func = legalized(f"x: {tensor((37, 64))}", expr)
    x = floats(np.random.default_rng(7), 37, 64)
    scheduled = check_rule(dl.cpu.Reduction(), func, [x, np.zeros((), np.float32)], reference(x))
    assert "T.vectorized(T.int64(" in scheduled.script()


def test_reduction_leaves_few_rows_on_one_thread():
    func, _ = row_function("sum", (4,), 16)
    assert "T.parallel" not in dl.cpu.Reduction().apply(func, AVX2, False).mod.script()


def test_reduction_declines_other_computations():
    for func in (legalized(f"x: {tensor((8, 16))}", "R.sum(x, axis=[0])"),  # along a strided axis
                 legalized(f"x: {tensor((8, 16))}, w: {tensor((16, 8))}", "R.matmul(x, w)"),
                 legalized(f"x: {tensor((8, 16))}", "R.add(x, x)"),
                 legalized(f"x: {tensor((8, 16))}", "R.nn.softmax(x, axis=0)")):
        assert dl.cpu.Reduction().apply(func, TARGET, False) is None


# ---------------------------------------------------------------- Elementwise
def add_relu_source(m: int, n: int) -> str:
    """The fused add + relu of FuseOps: two blocks, the first inlinable."""
    return TIR_HEADER + f'''    @T.prim_func
    def main(A: T.Buffer(({m}, {n}), "float32"), B: T.Buffer(({n},), "float32"), C: T.Buffer(({m}, {n}), "float32")):
        T.func_attr({{"tir.noalias": True}})
        D = T.alloc_buffer(({m}, {n}))
        for i, j in T.grid({m}, {n}):
            with T.block("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = A[vi, vj] + B[vj]
        for i, j in T.grid({m}, {n}):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(D[vi, vj], T.float32(0))
'''


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=SIZES, n=SIZES)
def test_elementwise_inlines_and_vectorizes_add_relu(m, n):
    rng = np.random.default_rng(m * 100 + n)
    a, b = floats(rng, m, n), floats(rng, n)
    scheduled = check_rule(dl.cpu.Elementwise(), from_source(add_relu_source(m, n))["main"],
                           [a, b, np.zeros((m, n), np.float32)], np.maximum(a + b, 0))
    assert len(re.findall(r"^\s+with T.block\(", scheduled.script(), re.M)) == 1  # add inlined into relu


def test_rules_asking_in_turn_get_schedules_of_their_own():
    """flat_schedule inlines a function once for the rules that ask for it in turn: each still
    gets its own schedule, starting from the inlining (its trace), which the others' steps do not
    touch."""
    from tvms.lowering.dlight.analysis import flat_schedule

    func = from_source(add_relu_source(8, 16))["main"]
    (first, infos), (second, again) = flat_schedule(func), flat_schedule(func)
    assert first is not second and [i.name for i in infos] == [i.name for i in again] == ["relu"]
    first.split(first.get_loops(infos[0].rv)[0], [2, 4])
    assert len(second.trace.insts) == len(flat_schedule(func)[0].trace.insts) < len(first.trace.insts)
    assert "for i_0, i_1" not in second.mod.script() and "for i_0, i_1" in first.mod.script()


INJECTIVE_OPS = {  # name: (parameters, Relax expression, numpy) over an (m, n) input x
    "broadcast_add": ("x: {mn}, y: {n1}", "R.add(x, y)", lambda x, y: x + y),
    "transpose": ("x: {mn}", "R.permute_dims(x)", lambda x: x.T),
    "permute3": ("x: {mn2}", "R.permute_dims(x, axes=[2, 0, 1])", lambda x: x.transpose(2, 0, 1)),
    "reshape": ("x: {mn}", "R.reshape(x, R.shape([{n}, {m}]))", lambda x: x.reshape(x.shape[::-1])),
    "concat": ("x: {mn}, y: {mn}", "R.concat((x, y), axis=1)", lambda x, y: np.concatenate([x, y], 1)),
    "take": ("x: {mn}, i: {idx}", "R.take(x, i, axis=1)", lambda x, i: np.take(x, i, axis=1)),
    "sigmoid": ("x: {mn}", "R.sigmoid(x)", lambda x: 1 / (1 + np.exp(-x))),
    "gelu": ("x: {mn}", "R.nn.gelu(x)", lambda x: x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2),
    "gelu_tanh": ("x: {mn}", "R.nn.gelu_tanh(x)",
                  lambda x: x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) / 2),
}


def injective_function(op: str, m: "int | str", n: int) -> PrimFunc:
    params, expr, _ = INJECTIVE_OPS[op]
    shapes = {"mn": tensor((m, n)), "n1": tensor((n,)), "mn2": tensor((m, n, 2)), "idx": tensor((3,), "int64"),
              "m": m, "n": n}
    return legalized(params.format(**shapes), expr.format(**shapes))


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(INJECTIVE_OPS)), m=SIZES, n=SIZES, symbolic=st.booleans())
def test_elementwise_schedules_injective_operators(op, m, n, symbolic):
    symbolic = symbolic and op != "reshape"  # a reshape's target shape is written out
    func = injective_function(op, "m" if symbolic else m, n)
    rng = np.random.default_rng(m + n)
    inputs = [floats(rng, m, n * 2 if op == "permute3" else n)]
    if op == "permute3":
        inputs = [floats(rng, m, n, 2)]
    if op in ("broadcast_add", "concat"):
        inputs.append(floats(rng, n) if op == "broadcast_add" else floats(rng, m, n))
    if op == "take":
        inputs.append(rng.integers(0, n, 3).astype(np.int64))
    expected = np.ascontiguousarray(INJECTIVE_OPS[op][2](*inputs)).astype(np.float32)
    check_rule(dl.cpu.Elementwise(), func, [*inputs, np.zeros(expected.shape, np.float32)], expected)


def test_elementwise_splits_large_outputs_into_parallel_vector_chunks():
    """A broadcast read (B[j]) keeps the row loop: rows in parallel, each row in vectors; tiny
    outputs stay on one thread."""
    text = dl.cpu.Elementwise().apply(from_source(add_relu_source(4096, 4096))["main"], AVX2, False).mod.script()
    assert re.search(r"for i in T.parallel\(4096\):\n\s+for j_0 in range\(512\):\n\s+"
                     r"for j_1 in T.vectorized\(8\):", text)
    small = dl.cpu.Elementwise().apply(from_source(add_relu_source(16, 16))["main"], AVX2, False).mod.script()
    assert "T.parallel" not in small and "T.vectorized(8)" in small


def test_elementwise_vectorizes_exp_and_erf_of_float32_only():
    """GELU's erf and the sigmoid's exp of float32 have vector code; of float64 they are libm
    calls, one per lane, which run faster as a scalar loop."""
    for expr in ("R.nn.gelu(x)", "R.sigmoid(x)"):
        narrow, wide = (legalized(f"x: {tensor((64, 64), dtype)}", expr) for dtype in ("float32", "float64"))
        assert "T.vectorized(T.int64(8))" in dl.cpu.Elementwise().apply(narrow, AVX2, False).mod.script()
        assert "T.vectorized" not in dl.cpu.Elementwise().apply(wide, AVX2, False).mod.script()


def test_elementwise_fuses_the_loops_of_a_same_shape_computation():
    """x + x over (1000, 3): every access is at the written place, so the loops fuse into one
    contiguous run of 3000 that vectorizes by 8, although 3 is no multiple of 8."""
    text = dl.cpu.Elementwise().apply(legalized(f"x: {tensor((1000, 3))}", "R.add(x, x)"), AVX2, False).mod.script()
    assert re.search(r"for ax0_ax1_fused_0 in range\(T.int64\(375\)\):\n\s+"
                     r"for ax0_ax1_fused_1 in T.vectorized\(T.int64\(8\)\):", text), text


def test_elementwise_pads_rows_in_whole_vectors_and_a_guarded_last_one():
    """A padded image's rows of 22 pixels: no vector wider than 2 divides them, so they run in
    vectors of 8 (AVX2's fp32 lanes), the last guarded (masked loads and stores), and equal
    numpy's padding; a reshape's row, whose index would not stay contiguous under the guard,
    keeps the widest vector that divides it."""
    func = legalized(f"x: {tensor((1, 3, 20, 20))}", "R.nn.pad(x, pad_width=[0, 0, 0, 0, 1, 1, 1, 1])")
    sch = dl.cpu.Elementwise().apply(func, AVX2, False)
    text = sch.mod.script()
    assert "T.vectorized(T.int64(8))" in text and "T.where" in text, text
    x = floats(np.random.default_rng(5), 1, 3, 20, 20)
    out = run_compiled(sch.mod["main"], [x, np.zeros((1, 3, 22, 22), np.float32)])[-1]
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))))
    scalar = legalized(f"x: {tensor((3, 22))}, s: R.Tensor((), \"float32\")", "R.add(x, s)")  # (a 0-d operand)
    sch = dl.cpu.Elementwise().apply(scalar, AVX2, False)
    assert "T.where" in sch.mod.script()
    rows, s = floats(np.random.default_rng(6), 3, 22), floats(np.random.default_rng(7), 1).reshape(())
    out = run_compiled(sch.mod["main"], [rows, s, np.zeros((3, 22), np.float32)])[-1]
    np.testing.assert_allclose(out, rows + s, rtol=1e-6)
    reshape = legalized(f"x: {tensor((3, 44, 11))}", "R.reshape(x, R.shape([3, 22, 22]))")
    text = dl.cpu.Elementwise().apply(reshape, AVX2, False).mod.script()
    assert "T.vectorized(T.int64(2))" in text and "T.where" not in text, text


def test_elementwise_tiles_a_transpose():
    """32 rows of the result by one vector of columns per tile; tiles of rows in parallel."""
    func = injective_function("transpose", 1024, 1024)
    text = dl.cpu.Elementwise().apply(func, AVX2, False).mod.script()
    assert re.search(r"for ax0_0 in T.parallel\(T.int64\(32\)\):\n\s+for ax1_0, ax0_1 in T.grid\("
                     r"T.int64\(128\), T.int64\(32\)\):\n\s+"
                     r"for ax1_1 in T.vectorized\(T.int64\(8\)\):", text), text


def test_elementwise_declines_reductions():
    assert dl.cpu.Elementwise().apply(row_function("sum", (4,), 16)[0], TARGET, False) is None


# ---------------------------------------------------------------- Fallback
FALLBACK_CASES = {  # functions no other rule takes: (parameters, Relax expression)
    "matmul": ("x: {mk}, w: {kn}", "R.matmul(x, w)"),
    "argmax": ("x: {mk}", "R.argmax(x, axis=1)"),
    "sum_axis0": ("x: {mk}", "R.sum(x, axis=[0])"),
    "conv2d": ("x: {image}, w: {kernel}", "R.nn.conv2d(x, w, padding=[1, 1])"),
}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(FALLBACK_CASES)), m=SIZES, k=SIZES)
def test_fallback_keeps_what_other_functions_compute(case, m, k):
    params, expr = FALLBACK_CASES[case]
    m = max(m, 2)  # (one row times a matrix is a GEMV)
    shapes = {"mk": tensor((m, k)), "kn": tensor((k, 5)), "image": tensor((1, 2, m % 9 + 1, k % 9 + 1)),
              "kernel": tensor((3, 2, 3, 3))}
    func = legalized(params.format(**shapes), expr)
    for rule in (dl.cpu.GEMV(), dl.cpu.Reduction(), dl.cpu.Elementwise()):
        assert rule.apply(func, TARGET, False) is None, rule
    sch = dl.cpu.Fallback().apply(func, TARGET, False)
    args = random_arguments(func, np.random.default_rng(m * k))
    assert_same_results(run_compiled(sch.mod["main"], args), run_reference(func, args))
    assert_reparses(sch.mod["main"])


def test_fallback_runs_large_spatial_loops_in_parallel():
    func = legalized(f"x: {tensor((256, 256))}, w: {tensor((256, 256))}", "R.matmul(x, w)")
    text = dl.cpu.Fallback().apply(func, AVX2, False).mod.script()
    assert "for i0 in T.parallel(T.int64(256)):" in text


def test_fallback_leaves_blocks_inside_blocks_alone():
    sch = tvms.tir.Schedule(from_source(add_relu_source(64, 64))["main"])
    sch.blockize(sch.get_loops(sch.get_block("relu"))[1])
    nested = sch.mod["main"]
    assert dl.cpu.Fallback().apply(nested, TARGET, False).mod["main"].script() == nested.script()
    for rule in (dl.cpu.GEMV(), dl.cpu.Reduction(), dl.cpu.Elementwise()):
        assert rule.apply(nested, TARGET, False) is None


# ---------------------------------------------------------------- the namespace and the pass
def test_dlight_namespace_reads_like_tvm():
    import importlib

    assert importlib.import_module("tvms.dlight.cpu") is dl.cpu
    rules = dl.cpu.default_rules()
    assert [type(r).__name__ for r in rules][-7:] == ["GEMV", "Reduction", "Pool", "ChannelBlocks", "PlaneCopy",
                                                      "Elementwise", "Fallback"]
    assert all(isinstance(r, dl.ScheduleRule) for r in rules)


def test_apply_default_schedule_needs_a_target():
    mod = from_source(add_relu_source(8, 8))
    with pytest.raises(tvms.TVMSError, match="needs a target"):
        dl.ApplyDefaultSchedule(*ALL_RULES)(mod)


def test_vector_width_follows_the_target():
    func = from_source(add_relu_source(64, 64))["main"]
    avx512 = tvms.target.Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx2")
    assert "T.vectorized(16)" in dl.cpu.Elementwise().apply(func, avx512, False).mod.script()
    assert "T.vectorized(8)" in dl.cpu.Elementwise().apply(func, AVX2, False).mod.script()


# ---------------------------------------------------------------- fixes the rules needed
def test_compute_at_under_a_loop_over_a_symbolic_row_count():
    """compute_at used to read the constant value of a symbolic iterator domain (AttributeError):
    the row loop of a layer norm over ``n`` rows binds the rows directly, with no guard."""
    func, _ = row_function("layer_norm", ("n",), 16)
    text = dl.cpu.Reduction().apply(func, TARGET, False).mod.script()
    assert "T.where" not in text
    rng = np.random.default_rng(3)
    x, g, b = floats(rng, 5, 16), floats(rng, 16), floats(rng, 16)
    got = run_compiled(from_source(text)["main"], [x, g, b, np.zeros((5, 16), np.float32)])[-1]
    np.testing.assert_allclose(got, _layer_norm(x, g, b), rtol=1e-4, atol=1e-5)


def test_half_precision_math_in_a_vectorized_loop_compiles():
    """log_softmax over axis 0 in float16: its last block's vectorized loop reads the statistics at
    ``i % 8``, so the code generator (not the vectorizer) makes it vector code, calling
    ``llvm.log`` on vectors: the call's type must be the vector's (it was the scalar's)."""
    mod = from_source((LEGALIZED[0].parent / "math_nn_legalized.tvms").read_text())
    sch = tvms.tir.Schedule(mod["log_softmax1"])
    sch.vectorize(sch.fuse(*sch.get_loops(sch.get_block("compute_1"))))
    func = sch.mod["main"]
    h = np.random.default_rng(0).uniform(0.5, 2, (2, 8)).astype(np.float16)
    got = run_compiled(func, [h, np.zeros((2, 8), np.float16)])[-1]
    want = h - np.log(np.exp(h.astype(np.float32) - h.max(0)).sum(0)) - h.max(0)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_a_target_in_the_function_attributes_is_used_without_a_current_target():
    """A function carrying ``T.func_attr({"target": T.target({...})})`` is scheduled for that
    target (the dictionary became a target string), no ``with target:`` needed."""
    mod = from_source((LEGALIZED[0].parent.parent / "tir_lowering" / "tile_copy_00_input.tvms").read_text())
    out = dl.ApplyDefaultSchedule(*ALL_RULES)(mod)
    assert out["main"].attrs["tir.is_scheduled"]
    attrs = FrozenDict({key: value for key, value in mod["main"].attrs.items() if key != "target"})
    untargeted = mod["main"].with_changes(attrs=attrs)
    with pytest.raises(tvms.TVMSError, match="needs a target"):
        dl.ApplyDefaultSchedule(*ALL_RULES)(tvms.IRModule({"main": untargeted}))
    args = random_arguments(mod["main"], np.random.default_rng(0))
    assert_same_results(run_compiled(out["main"], args), run_reference(mod["main"], args))


def test_cpu_rules_are_skipped_for_other_targets():
    """Under a CUDA target no CPU rule is offered the function: it stays unscheduled."""
    mod = from_source(add_relu_source(64, 64))
    with tvms.target.Target("cuda"):
        out = dl.ApplyDefaultSchedule(*ALL_RULES)(mod)
    assert out.script() == mod.script()
    assert all(rule.is_target_available(TARGET) for rule in ALL_RULES)


def test_default_schedule_of_a_function_with_assumption_blocks() -> None:
    """A PrimFunc whose first block states T.assume facts (it writes nothing, as TVM's
    buffer_*_assumptions blocks): the CPU rules decline what needs an output block, the module
    compiles and computes (an IndexError had escaped the default schedule)."""
    from tvms.runtime.reference_relax import run_relax
    from tvms.script import from_source

    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def sub(a: T.Buffer((T.int64(4), T.int64(8)), "int32"), b: T.Buffer((T.int64(4), T.int64(8)), "int32"), compute: T.Buffer((T.int64(4), T.int64(8)), "int32")):
        T.func_attr({"tir.noalias": True})
        for i, j in T.grid(T.int64(4), T.int64(8)):
            with T.block("buffer_a_assumptions"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(a[vi, vj])
                T.writes()
                T.assume(a[vi, vj] >= 0)
        for i, j in T.grid(T.int64(4), T.int64(8)):
            with T.block("compute"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(a[vi, vj], b[vi, vj])
                T.writes(compute[vi, vj])
                compute[vi, vj] = a[vi, vj] - b[vi, vj]

    @R.function
    def main(a: R.Tensor((4, 8), dtype="int32"), b: R.Tensor((4, 8), dtype="int32")) -> R.Tensor((4, 8), dtype="int32"):
        cls = Module
        out = R.call_tir(cls.sub, (a, b), out_sinfo=R.Tensor((4, 8), dtype="int32"))
        return out''')
    a, b = np.arange(32, dtype="int32").reshape(4, 8), np.ones((4, 8), "int32")
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_array_equal(vm["main"](a, b).numpy(), a - b)
    np.testing.assert_array_equal(run_relax(mod, "main", a, b), a - b)
