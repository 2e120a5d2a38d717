"""The operators of ir/relax_ops_create.py (clip, tril/triu, arange, eye/eye_like, one_hot, outer,
meshgrid, hamming_window, cumsum/cumprod, size, bucketize, multinomial_from_uniform): LegalizeOps
and the CPU backend's dispatch passes byte for byte as Apache TVM 0.27 prints them (goldens
FIXTURES_CREATE, made by fixtures/legalize/generate_math_with_tvm.py), the operators' text as
TVM prints it in both dialects, the ``relax.op`` functions' defaults, TVM's errors, and the
compiled module against the reference executor."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import FIXTURES
from test_legalize_math import _random_args, _returning_all_outputs
from tvms.ir import TVMSError
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

LEGALIZE_DIR = FIXTURES / "legalize"
FIXTURES_CREATE = ["math_create3", "math_create3_dyn", "math_window", "math_scan", "math_size", "math_bucketize",
                   "math_sample"]
# bindings the numeric check leaves out: meshgrid "xy" (TVM infers its struct info in "ij" order)
# and float ranges of symbolic length (the VM's size expressions have no ceil). ewise_fma, which
# TVM lowers nowhere, is checked: the VM runs an operator left unlowered by its reference.
NOT_COMPILED = {"math_create3": ("s",), "math_create3_dyn": ("l", "m")}


@pytest.mark.parametrize("name", FIXTURES_CREATE)
def test_legalized_prints_as_tvm(name: str) -> None:
    out = LegalizeOps()(from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text()))
    golden = (LEGALIZE_DIR / f"{name}_legalized.tvms").read_text().rstrip("\n")
    assert out.script(dialect="tvm-0.27") == golden


@pytest.mark.parametrize("name, dispatch", [("math_scan", "DispatchSortScan"), ("math_sample", "DispatchSampling")])
def test_backend_dispatch_as_tvm(name: str, dispatch: str) -> None:
    """cumsum/cumprod and multinomial_from_uniform: LegalizeOps leaves them (the _legalized
    goldens) and the CPU backend's dispatch passes lower them as TVM's do: topi's generic scan
    kernel (an input buffer with an element offset of its own, a module TypeVar), the cumulative
    probabilities and TVM's generic get_sample_index."""
    from tvms.relax import backend

    out = getattr(backend, dispatch)()(from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text()))
    golden = (LEGALIZE_DIR / f"{name}_dispatched.tvms").read_text().rstrip("\n")
    assert out.script(dialect="tvm-0.27") == golden
    assert from_source(golden).script(dialect="tvm-0.27") == golden


@pytest.mark.parametrize("name", FIXTURES_CREATE)
def test_tvm_text_reads_back_in_both_dialects(name: str) -> None:
    """The operators' text and the kernels as TVM prints them read back and print byte for byte;
    the classic dialect writes the scalar arguments TVM prints bare (``R.arange(0, 6, 1, ...)``)
    as ``R.prim_value(...)`` and reads them back to the same module."""
    for kind in ("printed_by_tvm", "legalized", "dispatched"):
        path = LEGALIZE_DIR / f"{name}_{kind}.tvms"
        if not path.exists():
            continue
        golden = path.read_text().rstrip("\n")
        mod = from_source(golden)
        assert mod.script(dialect="tvm-0.27") == golden
        classic = mod.script()
        assert from_source(classic).script() == classic
        assert from_source(classic).script(dialect="tvm-0.27") == golden
        if kind == "printed_by_tvm" and name.startswith("math_create3"):
            assert "R.prim_value(" in classic


def test_op_functions_fill_defaults_as_tvm() -> None:
    from tvms import relax
    from tvms.ir.struct_info import TensorStructInfo

    x = relax.Var("x", TensorStructInfo((3, 4), "float32"))
    op = relax.op
    assert op.arange(5).struct_info.dims[0].value == 5
    assert str(op.arange(5).struct_info.dtype) == "int64"
    assert str(op.arange(0, 2.0, 0.5).struct_info.dtype) == "float32"  # (a float argument: float32)
    assert op.arange(0, 2.0, 0.5).struct_info.dims[0].value == 4
    assert str(op.arange(0, 2.0, 0.5).args[1].value.dtype) == "float64"  # (Python floats are float64)
    eye = op.eye(3)
    assert [a.value.value for a in eye.args] == [3, 3, 0] and str(eye.attrs["dtype"]) == "float32"
    assert [d.value for d in op.eye(2, 5, 1, "int32").struct_info.dims] == [2, 5]
    assert [a.value.value for a in op.eye(3, k=1).args] == [3, 3, 1]  # (m left out by keyword: n)
    assert [a.value.value for a in op.arange(4, step=2).args] == [0, 4, 2]
    assert op.tril(x).args[1].value.value == 0 and op.triu(x, 1).args[1].value.value == 1
    assert str(op.eye_like(x, dtype="int8").struct_info.dtype) == "int8"
    clip = op.clip(x, 0.0, 6.0)
    assert str(clip.args[1].value.dtype) == "float64" and clip.struct_info is x.struct_info
    i = relax.Var("i", TensorStructInfo((3,), "int32"))
    hot = op.one_hot(i, 1.0, 0.0, 4)
    assert [d.value for d in hot.struct_info.dims] == [3, 4] and str(hot.struct_info.dtype) == "float64"
    assert str(op.meshgrid([i, i]).attrs["indexing"]) == "ij"


@pytest.mark.parametrize("text, message", [
    ("R.tril(v)", "at least two dimensions"),
    ("R.eye_like(v)", "2-dimensional"),
    ("R.one_hot(x, R.prim_value(1), R.prim_value(T.float32(0)), depth=2)", "same dtype"),
    ("R.one_hot(x, R.prim_value(1), R.prim_value(0), depth=2)", "integer dtype"),
    ("R.one_hot(i, R.prim_value(1), R.prim_value(0), depth=0)", "depth must be positive"),
    ("R.outer(x, v)", "1-d tensors"),
    ("R.bucketize(v, x)", "boundaries must be a 1-d tensor"),
    ("R.multinomial_from_uniform(x, x, R.astype(x, \"int64\"))", "shape \\(n, 1\\)"),
    ("R.multinomial_from_uniform(x, v, R.astype(v, \"int64\"))", "2-d tensor"),
    ("R.ewise_fma(x, x, v)", "same number of dimensions"),
    ("R.meshgrid((v, i))", "one dtype"),
    ("R.clip(x, v, v)", "must be a scalar"),
    ("R.hamming_window(R.prim_value(4), R.prim_value(1), R.prim_value(T.float32(0.5)), "
     "R.prim_value(T.float32(0.5)), dtype=\"int32\")", "float type"),
    ("R.arange(R.prim_value(0), R.prim_value(4), R.prim_value(0))", "step must not be zero"),
    ("R.arange(R.prim_value(0), R.prim_value(T.float64(1e308)), R.prim_value(T.float64(1e-308)))",
     "no finite length"),
    ("R.eye(R.prim_value(T.float32(2)))", "must be an integer"),
    ("R.cumsum(x, axis=2)", "out of range"),
])
def test_tvm_errors(text: str, message: str) -> None:
    src = f"""@I.ir_module
class M:
    @R.function
    def f(x: R.Tensor((2, 3), "float32"), v: R.Tensor((3,), "float32"), i: R.Tensor((3,), "int32")):
        a = {text}
        return a
"""
    with pytest.raises(TVMSError, match=message):
        from_source(src)


@pytest.mark.parametrize("name", FIXTURES_CREATE)
def test_compiled_equals_reference(name: str) -> None:
    """Every output of the fixture (but NOT_COMPILED), compiled by tvms.compile and run on the VM,
    equals the reference executor's; every operator but ewise_fma runs as a compiled kernel."""
    import tvms
    from tvms.ir.expr import Op
    from tvms.ir.relax import Call, Function
    from tvms.ir.visitor import collect
    from tvms.relax.backend import DispatchSampling, DispatchSortScan

    text = (LEGALIZE_DIR / f"{name}_before.tvms").read_text()
    for left_out in NOT_COMPILED.get(name, ()):
        text = re.sub(rf"\n *{left_out} = .*", "", text)
        text = re.sub(rf"(R\.output\([^)]*), {left_out}\b", r"\1", text)
    mod = from_source(_returning_all_outputs(text))
    args = _random_args(mod, "forward", 5, np.random.default_rng(11))
    if name == "math_bucketize":  # (boundaries must be sorted; sorting the other values does no harm)
        args = [np.sort(a) if a.ndim == 1 else a for a in args]
    if name == "math_sample":  # (sample_indices pick rows: 0 or 1)
        args = [a % 2 if a.dtype.kind == "i" else a for a in args]
    lowered = tvms.relax.get_pipeline("zero")(DispatchSortScan()(DispatchSampling()(mod)))  # (as compile runs them)
    ops = {c.op.name for f in lowered.functions.values() if isinstance(f, Function) for c in collect(f, Call)
           if isinstance(c.op, Op)}
    assert ops <= {"relax.call_tir", "relax.ewise_fma"}
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    got, want = vm["forward"](*args), run_relax(mod, "forward", *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for gg, ww in zip(g if isinstance(w, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            ww = np.asarray(ww)
            assert gg.numpy().dtype == ww.dtype
            tol = 1e-3 if ww.dtype == np.float16 else 1e-6  # (hamming_window: float32 against numpy's float64)
            np.testing.assert_allclose(gg.numpy(), ww, rtol=tol, atol=tol)


@pytest.mark.parametrize("dispatch", ["DispatchSortScan", "DispatchSampling"])
def test_dispatch_passes_leave_other_operators_alone(dispatch: str) -> None:
    """(review) only LegalizeOps makes the operators it has no kernel for calls of their runtime
    packed functions; the dispatch passes rewrite their own operators and nothing else, so
    R.shape_to_tensor of a known shape still reaches its legalization in tvms.compile."""
    import tvms.relax.backend as backend

    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        s = R.shape_to_tensor(R.shape([2, 3]))
        return s
''')
    out = getattr(backend, dispatch)()(mod)
    assert "R.shape_to_tensor(R.shape([2, 3]))" in out.script()
    assert "R.call_packed(\"relax.run.print\"" in LegalizeOps()(from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32")):
        s = R.print(x, format="{}")
        return x
''')).script()
