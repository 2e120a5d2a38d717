"""sort, argsort, topk, median, unique, nonzero: numpy references against numpy's sorting (stable, as TVM's
kernels are), and a compiled module running them (TVM 0.27 legalizes sort/argsort/topk to
nothing; its median calls a packed argsort, which tvms leaves to the reference)."""
from __future__ import annotations

import numpy as np
import pytest

from test_legalize_index import _ref
from tvms.ir import TVMSError
from tvms.ir.dtype import DataType
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

I32, I64 = DataType("int32"), DataType("int64")


def test_sort_references_match_numpy() -> None:
    x = np.array([[3, 1, 2, 1], [0, 5, 5, 4]], "float32")
    np.testing.assert_array_equal(_ref("sort", x, axis=-1, descending=False), np.sort(x))
    np.testing.assert_array_equal(_ref("sort", x, axis=0, descending=True), -np.sort(-x, axis=0))
    got = _ref("argsort", x, axis=1, descending=True, dtype=I32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[0, 2, 1, 3], [1, 2, 3, 0]])  # equal values keep their order
    values, indices = _ref("topk", x, k=2, axis=-1, ret_type="both", largest=False, dtype=I64)
    np.testing.assert_array_equal(values, [[1, 1], [0, 4]])
    np.testing.assert_array_equal(indices, [[1, 3], [0, 3]])
    np.testing.assert_array_equal(_ref("topk", x, k=0, axis=0, ret_type="values", largest=True, dtype=I32),
                                  -np.sort(-x, axis=0))
    values, indices = _ref("median", x, axis=(1,), keepdims=True)
    np.testing.assert_array_equal(values, [[1], [4]])  # the lower median of an even count
    np.testing.assert_array_equal(indices, [[3], [3]])
    assert _ref("median", x, axis=None, keepdims=False) == 2
    np.testing.assert_array_equal(_ref("median", x.reshape(2, 2, 2), axis=(0, 2), keepdims=False), [1, 2])


def test_sort_compiled_runs_the_references() -> None:
    import tvms

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def forward(x: R.Tensor((3, 4), "float32")):
        a = R.sort(x, axis=0, descending=True)
        b = R.argsort(x)
        c = R.topk(x, k=2, ret_type="values")
        d = R.median(x, axis=[1])
        return (a, b, c, d[0], d[1])
""")
    x = np.random.default_rng(2).standard_normal((3, 4)).astype("float32")
    a, b, c, d, i = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x)
    np.testing.assert_array_equal(a.numpy(), np.sort(x, axis=0)[::-1])
    np.testing.assert_array_equal(b.numpy(), np.argsort(x, axis=-1).astype("int32"))
    np.testing.assert_array_equal(c.numpy(), -np.sort(-x)[:, :2])
    np.testing.assert_array_equal(d.numpy(), np.sort(x)[:, 1])
    np.testing.assert_array_equal(x[np.arange(3), i.numpy()], d.numpy())


def test_topk_rejects_an_unknown_return_kind() -> None:
    with pytest.raises(TVMSError, match=r"R\.topk: ret_type must be"):
        from_source("""
@R.function
def f(x: R.Tensor((2, 3), "float32")):
    a = R.topk(x, k=1, ret_type="all")
    return a
""")


def test_unique_and_nonzero_references() -> None:
    """TVM's relax.run.unique keeps numpy's results, reordered by first occurrence when unsorted."""
    x = np.array([[3, 1, 3], [2, 1, 0]], "int32")
    np.testing.assert_array_equal(_ref("unique", x, True, False, False, False), [0, 1, 2, 3])
    values, index, inverse, counts = _ref("unique", x, False, True, True, True)
    np.testing.assert_array_equal(values, [3, 1, 2, 0])
    np.testing.assert_array_equal(index, [0, 1, 3, 5])
    np.testing.assert_array_equal(values[inverse], x.reshape(-1))
    np.testing.assert_array_equal(counts, [2, 2, 1, 1])
    rows, counts = _ref("unique", np.array([[1, 2], [0, 0], [1, 2]]), True, False, False, True, 0)
    np.testing.assert_array_equal(rows, [[0, 0], [1, 2]])
    np.testing.assert_array_equal(counts, [1, 2])
    np.testing.assert_array_equal(_ref("nonzero", x), np.stack(np.nonzero(x)))
    np.testing.assert_array_equal(_ref("nonzero", np.array(5)), [[0]])


def test_unique_legalized_as_tvm_and_compiled() -> None:
    """unique and nonzero legalize to R.call_pure_packed of relax.run.unique / relax.run.nonzero
    byte for byte as TVM 0.27 prints it (golden math_unique); compiled, the VM calls tvms's
    runtime functions and gets the reference's numbers."""
    import tvms
    from test_legalize_index import _text
    from tvms.lowering.relax.legalize import LegalizeOps

    text = _text("math_unique", "before")
    assert LegalizeOps()(from_source(text)).script(dialect="tvm-0.27") == _text("math_unique", "legalized")
    printed = _text("math_unique", "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed
    mod = from_source(text.rsplit("return", 1)[0] + "return (a[0], a[1], b, c[0], c[1])\n")
    x = np.array([2, 0, 2, 5, 0, 2], "float32")
    y = np.array([[0, 3, 0], [0, 3, 1]], "int32")
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x, y)
    want = run_relax(mod, "forward", x, y)
    np.testing.assert_array_equal(got[0].numpy(), [2, 0, 5])
    np.testing.assert_array_equal(got[1].numpy(), [3, 2, 1])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
