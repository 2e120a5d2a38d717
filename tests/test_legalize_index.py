"""Gather and scatter operators (and the other indexing operators of relax_ops_index): LegalizeOps
against Apache TVM 0.27 (goldens in fixtures/legalize made by generate_math_with_tvm.py), the
compiled module against the reference executor, the numpy references against numpy's own
indexing."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.ir import TVMSError
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.runtime.numpy_ops import NUMPY_OPS
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

LEGALIZE_DIR = FIXTURES / "legalize"
FIXTURES_INDEX = ["math_gather", "math_indexing"]


def _text(name: str, kind: str) -> str:
    return (LEGALIZE_DIR / f"{name}_{kind}.tvms").read_text().rstrip("\n")


@pytest.mark.parametrize("name", FIXTURES_INDEX)
def test_legalized_as_tvm_and_printed_back(name: str) -> None:
    out = LegalizeOps()(from_source(_text(name, "before")))
    assert out.script(dialect="tvm-0.27") == _text(name, "legalized")
    printed = _text(name, "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed


def _compiled_equals_reference(name: str, args: tuple, count: int, rtol: float = 0,
                               fname: str = "forward") -> None:
    """The fixture's function, returning every dataflow output, compiled by tvms.compile and run
    on the VM, against the reference executor."""
    import tvms

    text = _text(name, "before")
    outputs = text.split("R.output(")[1].split(")")[0]
    mod = from_source(text.rsplit("return", 1)[0] + f"return ({outputs},)\n")
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    got, want = vm[fname](*args), run_relax(mod, fname, *args)
    assert len(got) == len(want) == count
    for g, w in zip(got, want):
        assert g.numpy().dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol)


def test_gather_compiled_equals_reference() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4)).astype("float32")
    i = rng.integers(0, 3, (2, 5, 4)).astype("int64")
    j = np.stack([rng.integers(0, 2, 5), rng.integers(0, 3, 5)], axis=1).astype("int64")
    k = rng.integers(0, 3, (2, 3, 1)).astype("int64")
    w = rng.integers(0, 4, (2, 3, 4)).astype("int32")
    _compiled_equals_reference("math_gather", (x, i, j, k, w), 4)


def test_reverse_sequence_compiled_equals_reference() -> None:
    x = np.arange(24, dtype="float32").reshape(4, 6)
    s, t = np.array([0, 2, 9, 6]), np.array([1, 3, -2, 4, 0, 2], "int32")
    _compiled_equals_reference("math_indexing", (x, s, t), 2)


def _ref(name: str, *args, **attrs):
    return NUMPY_OPS[f"relax.{name}"](args, attrs)


def test_gather_references_match_numpy_indexing() -> None:
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    i = np.array([[[2, 0, 1, 1]], [[0, 0, 2, 1]]])
    np.testing.assert_array_equal(_ref("gather_elements", x, i, axis=1), np.take_along_axis(x, i, 1))
    j = np.array([[1, 2], [0, 0]])
    np.testing.assert_array_equal(_ref("gather_nd", x, j, batch_dims=0), x[[1, 0], [2, 0]])
    k = np.array([[2], [0]])  # batch_dims=1: row b of the indices picks in x[b]
    np.testing.assert_array_equal(_ref("gather_nd", x, k, batch_dims=1), np.stack([x[0, 2], x[1, 0]]))


def test_scatter_references_match_numpy_indexing() -> None:
    x = np.zeros((3, 4), "float32")
    i = np.array([[0, 2, 1, 0], [0, 1, 1, -1]])
    u = np.arange(1, 9, dtype="float32").reshape(2, 4)
    added = x.copy()
    np.add.at(added, (np.where(i < 0, i + 3, i), np.arange(4)[None].repeat(2, 0)), u)
    np.testing.assert_array_equal(_ref("scatter_elements", x, i, u, axis=0, reduction="add"), added)
    last = _ref("scatter_elements", x, i, u, axis=0, reduction="update")
    assert last[0, 0] == 5 and last[2, 3] == 8 and last[1, 2] == 7  # later updates win
    assert _ref("scatter_elements", x + 4, i, u, axis=0, reduction="mean")[0, 0] == ((4 + 1) / 2 + 5) / 2
    j = np.array([[1], [1], [0]])
    rows = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], "float32")
    np.testing.assert_array_equal(_ref("scatter_nd", x + 1, j, rows, reduction="mul"),
                                  np.array([[9, 10, 11, 12], [5, 12, 21, 32], [1, 1, 1, 1]]))
    np.testing.assert_array_equal(_ref("scatter_nd", x, np.array([[2, 3], [0, 1]]), np.array([7, 8], "float32"),
                                       reduction="update"), np.array([[0, 8, 0, 0], [0, 0, 0, 0], [0, 0, 0, 7]]))
    with pytest.raises(TVMSError, match="unknown reduction 'mean'"):
        _ref("scatter_nd", x, j, rows, reduction="mean")


def test_indexing_references_match_numpy() -> None:
    x = np.arange(24, dtype="float32").reshape(4, 6)
    i, j = np.array([[3], [1]]), np.array([0, 5, 2])
    np.testing.assert_array_equal(_ref("index_tensor", x, (i, j)), x[i, j])
    rows, cols, values = np.array([1, 1, 0]), np.array([2, 2, -1]), np.array([7, 8, 9], "float32")
    added = _ref("index_put", x, (rows, cols), values, accumulate=True)
    assert added[1, 2] == x[1, 2] + 15 and added[0, 5] == 14  # (repeated positions add up)
    put = _ref("index_put", x, (rows, cols), values, accumulate=False)
    assert put[1, 2] == 8 and put[0, 5] == 9 and put[0, 0] == 0
    scattered = x.copy()
    scattered[:, 1:5:2] = -1
    np.testing.assert_array_equal(_ref("slice_scatter", x, -np.ones((4, 2), "float32"), 1, 5, 2, axis=1), scattered)
    np.testing.assert_array_equal(_ref("reverse_sequence", x, np.array([0, 2, 9, 6]), seq_axis=1, batch_axis=0),
                                  [x[0], [7, 6, 8, 9, 10, 11], x[2, ::-1], x[3, ::-1]])
    np.testing.assert_array_equal(_ref("dynamic_strided_slice", x, np.array([1, -1]), np.array([4, 0]),
                                       np.array([2, -2])), x[1:4:2, -1:0:-2])


def test_scatter_compiled_runs_the_reference() -> None:
    """TVM legalizes the scatters into IR-builder kernels that tvms does not build: the compiled
    module keeps the operators and the VM runs their numpy references."""
    import tvms

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def forward(x: R.Tensor((3, 4), "float32"), i: R.Tensor((2, 4), "int64"), u: R.Tensor((2, 4), "float32"), j: R.Tensor((2, 1), "int64"), v: R.Tensor((2, 4), "float32")):
        a = R.scatter_elements(x, i, u, axis=0, reduction="add")
        b = R.scatter_nd(a, j, v)
        return b
""")
    x = np.ones((3, 4), "float32")
    i, u = np.array([[0, 2, 1, 0], [0, 1, 1, 2]]), np.full((2, 4), 2, "float32")
    j, v = np.array([[2], [0]]), np.arange(8, dtype="float32").reshape(2, 4)
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x, i, u, j, v)
    np.testing.assert_array_equal(got.numpy(), np.array([[4, 5, 6, 7], [1, 3, 5, 1], [0, 1, 2, 3]]))


def test_index_errors_name_the_operator() -> None:
    with pytest.raises(TVMSError, match=r"R\.gather_nd: the indices must have dtype int64"):
        from_source("""
@R.function
def f(x: R.Tensor((2, 3), "float32"), j: R.Tensor((5, 2), "int32")):
    a = R.gather_nd(x, j)
    return a
""")
    with pytest.raises(TVMSError, match=r"R\.scatter_nd: the updates must have the shape"):
        from_source("""
@R.function
def f(x: R.Tensor((2, 3), "float32"), j: R.Tensor((5, 1), "int64"), v: R.Tensor((5, 2), "float32")):
    a = R.scatter_nd(x, j, v)
    return a
""")
