"""LegalizeOps against Apache TVM 0.27 (the MLP corpus golden) and against numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import CORPUS_COPY, FIXTURES
from tvms.ir import IntImm, IRModule, first_mismatch
from tvms.ir import relax as rx
from tvms.ir.function import PrimFunc
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.relax.legalize import LEGALIZE, LegalizeOps
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

EXPORTED = CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms"
LEGALIZED = CORPUS_COPY / "mlp_bias_dyn_02_legalized.tvms"
SEEDS = FIXTURES / "seeds_relax"
LEGALIZE_DIR = FIXTURES / "legalize"


def _call_tirs(mod: IRModule) -> list:
    calls = []
    for _, f in mod.functions_items():
        if isinstance(f, rx.Function):
            for block in f.body.blocks:
                calls += [b.value for b in block.bindings if isinstance(b.value, rx.Call)]
    return calls


# ---------------------------------------------------------------- goldens
def test_mlp_golden_prints_as_tvm() -> None:
    out = LegalizeOps()(from_source(EXPORTED.read_text()))
    assert out.script(dialect="tvm-0.27") == LEGALIZED.read_text().rstrip("\n")
    assert [gv.name_hint for gv in out.get_global_vars()] == [
        "add", "add1", "matmul", "matmul1", "relu", "transpose", "transpose1", "forward"]
    assert all(f.is_private for _, f in out.functions_items() if isinstance(f, PrimFunc))


def test_registered_by_name_and_text_parses_back() -> None:
    out = get_pass("LegalizeOps")(from_source(EXPORTED.read_text()))
    text = out.script(dialect="tvm-0.27")
    assert from_source(text).script(dialect="tvm-0.27") == text


def test_seed003_classic_golden() -> None:
    """The seed was printed by an older TVM, whose ``tir.noalias`` was an IntImm bool
    (``T.bool(True)``); TVM 0.27 stores a Python bool, printed ``True``, and so does tvms.
    Everything else matches the seed byte for byte."""
    out = LegalizeOps()(from_source((SEEDS / "seed003_relax_mlp_exported.tvms").read_text()))
    golden = (SEEDS / "seed003_mixed_legalized.tvms").read_text().rstrip("\n")
    assert golden.count('T.func_attr({"tir.noalias": T.bool(True)})') == 7
    assert out.script() == golden.replace('{"tir.noalias": T.bool(True)}', '{"tir.noalias": True}')
    path, _, _ = first_mismatch(out, from_source(golden))
    assert "attrs" in path


def test_mlp_same_numbers_before_and_after() -> None:
    mod = from_source(EXPORTED.read_text())
    out = LegalizeOps()(mod)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32")
            for s in [(3, 784), (256, 784), (256,), (10, 256), (10,)]]
    want = run_relax(mod, "forward", *args)
    got = run_relax(out, "forward", *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    x, w1, b1, w2, b2 = args
    np.testing.assert_allclose(got, np.maximum(x @ w1.T + b1, 0) @ w2.T + b2, rtol=1e-4, atol=1e-4)


OPS_FIXTURES = ["ops1", "ops2", "ops3", "ops4"]


@pytest.mark.parametrize("name", OPS_FIXTURES)
def test_ops_print_as_tvm(name: str) -> None:
    """Goldens printed by TVM 0.27's ``relax.transform.LegalizeOps()`` (fixtures/legalize): the
    broadcast binary ops (float and int, scalar constant operands on either side), nn.relu,
    nn.gelu (float32 and float16), permute_dims with axes, matmul (batched, broadcast,
    matrix-vector, out_dtype)."""
    before = from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text())
    out = LegalizeOps()(before)
    golden = (LEGALIZE_DIR / f"{name}_legalized.tvms").read_text().rstrip("\n")
    assert out.script(dialect="tvm-0.27") == golden


@pytest.mark.parametrize("name", OPS_FIXTURES)
def test_ops_same_numbers_before_and_after(name: str) -> None:
    mod = from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text())
    out = LegalizeOps()(mod)
    (fname,) = [gv.name_hint for gv, f in mod.functions_items() if isinstance(f, rx.Function)]
    rng = np.random.default_rng(3)
    args = []
    for p in mod[fname].params:
        shape = tuple(d.value if isinstance(d, IntImm) else 3 for d in p.struct_info.dims)
        dtype = str(p.struct_info.dtype)
        if dtype.startswith("int"):
            args.append(rng.integers(1, 9, shape).astype(dtype))
        else:
            args.append(rng.uniform(0.5, 2.0, shape).astype(dtype))
    want, got = run_relax(mod, fname, *args), run_relax(out, fname, *args)
    want, got = (want if isinstance(want, (list, tuple)) else [want]), \
        (got if isinstance(got, (list, tuple)) else [got])
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g, "float64"), np.asarray(w, "float64"), rtol=2e-3)


# ---------------------------------------------------------------- one operator at a time
def _module(params: list[tuple[str, str]], expr: str, ret: str) -> IRModule:
    sig = ", ".join(f'{name}: R.Tensor({shape}, dtype="float32")' for name, shape in params)
    return from_source(f"""@I.ir_module
class Module:
    @R.function
    def forward({sig}) -> R.Tensor({ret}, dtype="float32"):
        with R.dataflow():
            y: R.Tensor({ret}, dtype="float32") = {expr}
            R.output(y)
        return y
""")


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum}

# (name, params (shape text with n), relax expression, result shape text, numpy reference)
CASES = [(op, [("a", "(n, 4)"), ("b", "(4,)")], f"R.{op}(a, b)", "(n, 4)", f)
         for op, f in BINARY.items()] + [
    ("add_bcast", [("a", "(n, 1, 4)"), ("b", "(3, 1)")], "R.add(a, b)", "(n, 3, 4)", np.add),
    ("relu", [("a", "(n, 5)")], "R.nn.relu(a)", "(n, 5)", lambda a: np.maximum(a, 0)),
    ("gelu", [("a", "(n, 5)")], "R.nn.gelu(a)", "(n, 5)",
     lambda a: a * (0.5 + np.vectorize(math.erf)(a * 0.5 ** 0.5) * 0.5)),
    ("permute_dims", [("a", "(n, 5)")], "R.permute_dims(a, axes=None)", "(5, n)", lambda a: a.T),
    ("permute_dims3", [("a", "(2, n, 5)")], "R.permute_dims(a, axes=[2, 0, 1])", "(5, 2, n)",
     lambda a: a.transpose(2, 0, 1)),
    ("matmul", [("a", "(n, 4)"), ("b", "(4, 3)")], "R.matmul(a, b, out_dtype=\"void\")", "(n, 3)",
     np.matmul),
    ("matmul_batched", [("a", "(2, n, 4)"), ("b", "(2, 4, 3)")], "R.matmul(a, b, out_dtype=\"void\")",
     "(2, n, 3)", np.matmul),
    ("matmul_bcast", [("a", "(1, n, 4)"), ("b", "(2, 4, 3)")], "R.matmul(a, b, out_dtype=\"void\")",
     "(2, n, 3)", np.matmul),
    ("matmul_vec", [("a", "(n, 4)"), ("b", "(4,)")], "R.matmul(a, b, out_dtype=\"void\")", "(n,)",
     np.matmul),
]


@pytest.mark.parametrize("sym", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_numpy(case: tuple, sym: bool) -> None:
    name, params, expr, ret, ref = case
    n = 3
    if not sym:
        params = [(p, s.replace("n", str(n))) for p, s in params]
        ret = ret.replace("n", str(n))
    else:
        params = [(p, s.replace("n", '"n"')) for p, s in params]
        ret = ret.replace("n", '"n"')
    mod = _module(params, expr, ret)
    out = LegalizeOps()(mod)
    (prim,) = [f for _, f in out.functions_items() if isinstance(f, PrimFunc)]
    assert any(b.shape and any(not isinstance(d, IntImm) for d in b.shape)
               for b in prim.buffer_map.values()) == sym
    calls = _call_tirs(out)
    assert len(calls) == 1 and calls[0].op.name == "relax.call_tir"
    assert sum(isinstance(f, PrimFunc) for _, f in out.functions_items()) == 1
    rng = np.random.default_rng(1)
    shapes = [eval(s.replace('"n"', str(n))) for _, s in params]  # noqa: S307
    args = [rng.standard_normal(s).astype("float32") + (2.0 if name == "divide" else 0.0)
            for s in shapes]
    got = run_relax(out, "forward", *args)
    np.testing.assert_allclose(got, ref(*args), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, run_relax(mod, "forward", *args), rtol=1e-5, atol=1e-5)


def test_scalar_constant_operand_is_inlined() -> None:
    mod = from_source("""@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            y: R.Tensor((n, 4), dtype="float32") = R.add(x, R.const(1.5, "float32"))
            R.output(y)
        return y
""")
    out = LegalizeOps()(mod)
    text = out.script(dialect="tvm-0.27")
    assert "def add(x: T.Buffer((n, T.int64(4)), \"float32\"), T_add: T.Buffer(" in text
    assert "T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + T.float32(1.5)" in text
    x = np.ones((3, 4), "float32")
    np.testing.assert_allclose(run_relax(out, "forward", x), x + 1.5)


def test_ops_without_legalization_are_left_alone(monkeypatch) -> None:
    mod = from_source("""@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor((2, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        with R.dataflow():
            a: R.Tensor((2, 4), dtype="float32") = R.nn.softmax(x, axis=-1)
            b: R.Tensor((2, 4), dtype="float32") = R.nn.relu(a)
            R.output(b)
        return b
""")
    monkeypatch.delitem(LEGALIZE, "relax.nn.softmax", raising=False)
    out = LegalizeOps()(mod)
    names = [c.op.name for c in _call_tirs(out)]
    assert names == ["relax.nn.softmax", "relax.call_tir"]
    assert [gv.name_hint for gv in out.get_global_vars()] == ["relu", "forward"]
    x = np.random.default_rng(2).standard_normal((2, 4)).astype("float32")
    np.testing.assert_allclose(run_relax(out, "forward", x), run_relax(mod, "forward", x), rtol=1e-6)


def test_module_without_legalizable_ops_is_unchanged() -> None:
    mod = from_source("""@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor((2, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        return x
""")
    out = LegalizeOps()(mod)
    assert out["forward"] is mod["forward"]
