"""clip, tril/triu, arange, eye/eye_like, one_hot, outer, meshgrid, hamming_window, cumsum/cumprod, size, bucketize: LegalizeOps byte for byte as
Apache TVM 0.27 prints it (goldens math_create3*, math_window, made by fixtures/legalize/generate_math_with_tvm.py),
the operators' text as TVM prints it in both dialects, the ``relax.op`` functions' defaults, TVM's
errors, and the compiled module against the reference executor."""
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
FIXTURES_CREATE = ["math_create3", "math_create3_dyn", "math_window", "math_scan", "math_size", "math_bucketize"]
# bindings the numeric check leaves out: meshgrid "xy" (TVM infers its struct info in "ij" order)
# and ewise_fma (which TVM lowers nowhere)
NOT_COMPILED = {"math_create3": "s", "math_scan": "h"}


@pytest.mark.parametrize("name", FIXTURES_CREATE)
def test_legalized_prints_as_tvm(name: str) -> None:
    out = LegalizeOps()(from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text()))
    golden = (LEGALIZE_DIR / f"{name}_legalized.tvms").read_text().rstrip("\n")
    assert out.script(dialect="tvm-0.27") == golden


def test_scans_dispatch_as_tvm() -> None:
    """cumsum/cumprod: LegalizeOps leaves them (math_scan_legalized) and the CPU backend's
    DispatchSortScan makes them calls of topi's generic scan kernel, printed as TVM prints it
    (an input buffer with an element offset of its own, a module TypeVar)."""
    from tvms.relax.backend import DispatchSortScan

    out = DispatchSortScan()(from_source((LEGALIZE_DIR / "math_scan_before.tvms").read_text()))
    golden = (LEGALIZE_DIR / "math_scan_dispatched.tvms").read_text().rstrip("\n")
    assert out.script(dialect="tvm-0.27") == golden
    assert from_source(golden).script(dialect="tvm-0.27") == golden


@pytest.mark.parametrize("name", FIXTURES_CREATE)
def test_tvm_text_reads_back_in_both_dialects(name: str) -> None:
    """TVM prints the scalar arguments bare (``R.arange(0, 6, 1, dtype="int64")``); the classic
    dialect writes them ``R.prim_value(...)`` and reads them back to the same module."""
    golden = (LEGALIZE_DIR / f"{name}_printed_by_tvm.tvms").read_text().rstrip("\n")
    mod = from_source(golden)
    assert mod.script(dialect="tvm-0.27") == golden
    classic = mod.script()
    assert ("R.prim_value(" in classic or name in ("math_scan", "math_size", "math_bucketize"))
    assert from_source(classic).script() == classic
    assert from_source(classic).script(dialect="tvm-0.27") == golden


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
    ("R.ewise_fma(x, x, v)", "same number of dimensions"),
    ("R.meshgrid((v, i))", "one dtype"),
    ("R.clip(x, v, v)", "must be a scalar"),
    ("R.hamming_window(R.prim_value(4), R.prim_value(1), R.prim_value(T.float32(0.5)), "
     "R.prim_value(T.float32(0.5)), dtype=\"int32\")", "float type"),
    ("R.arange(R.prim_value(0), R.prim_value(4), R.prim_value(0))", "step must not be zero"),
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
    equals the reference executor's."""
    import tvms

    text = (LEGALIZE_DIR / f"{name}_before.tvms").read_text()
    left_out = NOT_COMPILED.get(name)
    if left_out:
        text = re.sub(rf"\n *{left_out} = .*", "", text).replace(f", {left_out})", ")")
    mod = from_source(_returning_all_outputs(text))
    args = _random_args(mod, "forward", 5, np.random.default_rng(11))
    if name == "math_bucketize":  # (boundaries must be sorted; sorting the other values does no harm)
        args = [np.sort(a) if a.ndim == 1 else a for a in args]
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    got, want = vm["forward"](*args), run_relax(mod, "forward", *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for gg, ww in zip(g if isinstance(w, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            ww = np.asarray(ww)
            assert gg.numpy().dtype == ww.dtype
            tol = 1e-3 if ww.dtype == np.float16 else 1e-6  # (hamming_window: float32 against numpy's float64)
            np.testing.assert_allclose(gg.numpy(), ww, rtol=tol, atol=tol)
