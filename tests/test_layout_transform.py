"""R.layout_transform: index maps as TVM prints them (T.index_map(lambda ...)), LegalizeOps against
Apache TVM 0.27 (golden math_layout_transform made by generate_math_with_tvm.py), the compiled
module against the reference executor, and the reference against numpy's own reshaping."""
from __future__ import annotations

import numpy as np
import pytest

from test_legalize_index import _compiled_equals_reference, _text
from tvms.ir import TVMSError
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source


def test_legalized_as_tvm_and_printed_back() -> None:
    out = LegalizeOps()(from_source(_text("math_layout_transform", "before")))
    assert out.script(dialect="tvm-0.27") == _text("math_layout_transform", "legalized")
    printed = _text("math_layout_transform", "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed


def test_layout_transform_compiled_equals_reference() -> None:
    rng = np.random.default_rng(6)
    args = (rng.standard_normal((4, 6)).astype("float32"), np.arange(8, dtype="int32"),
            rng.standard_normal((2, 3, 4)).astype("float16"))
    _compiled_equals_reference("math_layout_transform", args, 5)


def test_layout_transform_reference_matches_numpy() -> None:
    """Splits, permutations and fusions against reshape/transpose; padding filled with pad_value."""
    import tvms

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def forward(x: R.Tensor((5, 6), "float32"), y: R.Tensor(("n", 8), "float32")):
        a = R.layout_transform(x, index_map=lambda i, j: (i // 2, j, i % 2), pad_value=-1.0)
        b = R.layout_transform(x, index_map=lambda i, j: (j, i))
        c = R.layout_transform(y, index_map=lambda i, j: (j // 4, i, j % 4))
        d = R.layout_transform(x, index_map=lambda i, j: (i * 6 + j,))
        return (a, b, c, d)
""")
    x, y = np.arange(30, dtype="float32").reshape(5, 6), np.arange(24, dtype="float32").reshape(3, 8)
    padded = np.concatenate([x, np.full((1, 6), -1, "float32")]).reshape(3, 2, 6).transpose(0, 2, 1)
    want = (padded, x.T, y.reshape(3, 2, 4).transpose(1, 0, 2), x.reshape(-1))
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x, y)
    for g, r, w in zip(got, run_relax(mod, "forward", x, y), want):
        np.testing.assert_array_equal(np.asarray(r), w)
        np.testing.assert_array_equal(g.numpy(), w)


def test_layout_transform_from_python() -> None:
    import tvms
    from tvms import relax

    x = relax.Var("x", relax.TensorStructInfo((4, 6), "int32"))
    call = relax.op.layout_transform(x, index_map=lambda i, j: (j // 3, i, j % 3), pad_value=5)
    assert str(call.struct_info.dims) == str(tvms.relax.TensorStructInfo((2, 4, 3), "int32").dims)
    assert call.attrs["pad_value"].dtype == tvms.ir.dtype.DataType("int32")


def test_layout_transform_errors_name_the_operator() -> None:
    for body, message in (("R.layout_transform(x, index_map=lambda i: (i,))", "the index map takes 1 indices"),
                          ("R.layout_transform(x, index_map=lambda i, j: (i * j,))", "cannot find the extent"),
                          ("R.layout_transform(x, index_map=lambda i, j: (i // j,))", "cannot find the extent")):
        with pytest.raises(TVMSError, match=r"R\.layout_transform: " + message):
            from_source(f"""
@R.function
def f(x: R.Tensor((4, 6), "float32")):
    a = {body}
    return a
""")
