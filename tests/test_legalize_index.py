"""Gather and scatter operators (and the other indexing operators of relax_ops_index): LegalizeOps
against Apache TVM 0.27 (goldens in fixtures/legalize made by generate_math_with_tvm.py), the
compiled module against the reference executor, the numpy references against numpy's own
indexing."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.ir import TVMSError
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.runtime.numpy_ops import NUMPY_OPS
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

LEGALIZE_DIR = FIXTURES / "legalize"
FIXTURES_INDEX = ["math_gather", "math_indexing", "math_index_tensor", "math_scatter", "math_index_put",
                  "math_scatter_nd"]


def _text(name: str, kind: str) -> str:
    return (LEGALIZE_DIR / f"{name}_{kind}.tvms").read_text().rstrip("\n")


# TVM 0.27 numbers the element offsets of an extern kernel's buffers (elem_offset, elem_offset_1,
# ...) in an order that changes from run to run: these goldens are compared with the numbers
# taken off.
EXTERN_KERNELS = {"math_scatter", "math_index_put", "math_scatter_nd"}


def _offsets_unnumbered(text: str) -> str:
    return re.sub(r"\belem_offset_\d+\b", "elem_offset", text)


@pytest.mark.parametrize("name", FIXTURES_INDEX)
def test_legalized_as_tvm_and_printed_back(name: str) -> None:
    out = LegalizeOps()(from_source(_text(name, "before"))).script(dialect="tvm-0.27")
    golden = _text(name, "legalized")
    if name in EXTERN_KERNELS:
        out, golden = _offsets_unnumbered(out), _offsets_unnumbered(golden)
    assert out == golden
    printed = _text(name, "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed


def _compiled_equals_reference(name: str, args: tuple, count: int, rtol: float = 0,
                               fname: str = "forward", atol: float = 0) -> None:
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
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)


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


def test_index_put_compiled_equals_reference() -> None:
    """index_put legalized (broadcast indices, negative ones; accumulated and replaced), compiled,
    against the reference executor. (The kernel's loop over positions is parallel, as TVM's: a
    position given twice is a race there, so the positions here are distinct.)"""
    import tvms

    mod = from_source(_text("math_index_put", "before").replace(
        "            R.output(a)", "            c = R.index_put(x, (i, b), v)\n            R.output(a, c)").rsplit("return", 1)[0]
        + "return (a, c)\n")
    x, v = np.full((4, 6), 10, "float32"), np.arange(1, 7, dtype="float32").reshape(2, 3)
    i, b = np.array([[1], [-2]]), np.array([0, -1, 3])
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x, i, b, v)
    want = run_relax(mod, "forward", x, i, b, v)
    assert want[0][2, 5] == 15 and want[1][2, 5] == 5
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_index_tensor_compiled_equals_reference() -> None:
    x = np.arange(24, dtype="float32").reshape(4, 6)
    i, j, k = np.array([3, 0]), np.array([[1], [2], [0]]), np.array([[3, 1, 2], [0, 0, 1]], "int32")
    _compiled_equals_reference("math_index_tensor", (x, i, j, k), 3)


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


def test_scatter_compiled_equals_reference() -> None:
    """scatter_elements (each reduction, each axis, negative indices) and scatter_nd (whole rows
    and single elements, repeated index tuples applied in order) legalized, compiled, against the
    reference executor. (TVM names the element offsets of several extern kernels in one module in
    no fixed order, so each golden holds one kernel.)"""
    import tvms

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def forward(x: R.Tensor((2, 3, 4), "float32"), i: R.Tensor((2, 2, 4), "int64"), u: R.Tensor((2, 2, 4), "float32"), w: R.Tensor((2, 3, 2), "int64"), v: R.Tensor((2, 3, 2), "float32"), j: R.Tensor((3, 1), "int64"), y: R.Tensor((3, 3, 4), "float32"), k: R.Tensor((5, 3), "int64"), z: R.Tensor((5,), "float32")):
        a = R.scatter_elements(x, i, u, axis=1)
        b = R.scatter_elements(x, i, u, axis=-2, reduction="add")
        c = R.scatter_elements(x, w, v, axis=2, reduction="mean")
        d = R.scatter_elements(x, w, v, axis=2, reduction="max")
        e = R.scatter_elements(x, w, v, axis=-1, reduction="min")
        f = R.scatter_elements(x, i, u, axis=1, reduction="mul")
        g = R.scatter_nd(x, j, y)
        h = R.scatter_nd(x, k, z, reduction="add")
        l = R.scatter_nd(x, k, z, reduction="max")
        return (a, b, c, d, e, f, g, h, l)
""")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 4)).astype("float32")
    i = np.stack([rng.permutation(3)[:2] for _ in range(8)], axis=1).reshape(2, 2, 4) - 3 * (rng.random((2, 2, 4)) < 0.3)
    w = rng.integers(-4, 4, (2, 3, 2))
    k = np.array([[1, 2, 3], [0, 0, 0], [1, 2, 3], [1, 0, 2], [0, 0, 0]])
    args = (x, i, rng.standard_normal((2, 2, 4)).astype("float32"), w, rng.standard_normal((2, 3, 2)).astype("float32"),
            np.array([[1], [0], [1]]), rng.standard_normal((3, 3, 4)).astype("float32"), k,
            rng.standard_normal(5).astype("float32"))
    out = LegalizeOps()(mod)
    assert all(b.value.op.name == "relax.call_tir" for b in out["forward"].body.blocks[0].bindings)
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](*args)
    want = run_relax(mod, "forward", *args)
    assert len(got) == len(want) == 9
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)


def test_one_dimensional_scatters_compiled() -> None:
    """The kernels' loops over no remaining dimension (extent 1) on 1-d data."""
    import tvms

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def forward(x: R.Tensor((5,), "float32"), i: R.Tensor((3,), "int64"), u: R.Tensor((3,), "float32")):
        a = R.scatter_elements(x, i, u, reduction="add")
        b = R.index_put(x, (i,), u)
        c = R.scatter_nd(x, R.reshape(R.abs(i), (3, 1)), u)
        return (a, b, c)
""")
    args = (np.zeros(5, "float32"), np.array([4, -1, 0]), np.array([1, 2, 3], "float32"))
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](*args)
    want = ([3, 0, 0, 0, 3], [3, 0, 0, 0, 2], [3, 2, 0, 0, 1])  # (scatter_nd takes no negative index)
    for g, r, w in zip(got, run_relax(mod, "forward", *args), want):
        np.testing.assert_array_equal(g.numpy(), w)
        np.testing.assert_array_equal(r, w)


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
