"""TVM 0.27's tile layouts (``layout=T.TileLayout(...)``, ``T.ComposeLayout``, ``allocated_addr=``):
read into the IR, part of a buffer's meaning (structural equality), refused where malformed, and
refused by lowering where they would move elements (the goldens TVM printed are in
fixtures/tvm027_printing/tile_layouts*.tvms)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES
from test_errors import assert_error

import tvms
from tvms.ir import structural_equal, structural_hash
from tvms.ir.stmt import DeclBuffer
from tvms.ir.tile_layout import TileLayout, layout_of, same_placement
from tvms.ir.visitor import collect
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HEADER = "# from tvm.script import tirx as T\n# from tvm.tirx.layout import Axis\n\n"


def doubling(layout: str) -> str:
    return HEADER + f'''@T.prim_func
def main(A: T.Buffer((8, 4), "float32", layout={layout}), B: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(8, 4):
        B[i, j] = A[i, j] * T.float32(2.0)
'''


def param_layout(text: str):
    func = from_source(text)
    return func.buffer_map[func.params[0]].layout


def test_a_layout_is_read_into_the_ir() -> None:
    layout = param_layout(doubling("T.TileLayout(T.S[(8, 4):(4 @ Axis.laneid, 1)] + T.R[2:1 @ Axis.warpid] "
                                   "+ 3 + 1 @ Axis.laneid)"))
    assert isinstance(layout, TileLayout)
    assert [(it.extent.value, it.stride.value, it.axis) for it in layout.shard] == [(8, 4, "laneid"), (4, 1, "m")]
    assert [(it.extent.value, it.stride.value, it.axis) for it in layout.replica] == [(2, 1, "warpid")]
    assert [(t.axis, t.value.value) for t in layout.offset] == [("laneid", 1), ("m", 3)]


def test_the_default_layout_is_none_and_other_layouts_differ_structurally() -> None:
    assert param_layout(doubling("T.TileLayout(T.S[(8, 4)])")) is None
    plain = from_source(doubling("T.TileLayout(T.S[(8, 4):(4, 1)])"))
    transposed = from_source(doubling("T.TileLayout(T.S[(8, 4):(1, 8)])"))
    again = from_source(doubling("T.TileLayout(T.S[(8, 4):(1, 8)])"))
    assert structural_equal(transposed, again) and structural_hash(transposed) == structural_hash(again)
    assert not structural_equal(plain, transposed)
    assert not structural_equal(transposed, from_source(doubling("T.TileLayout(T.S[(8, 4):(1, 8)] + 1)")))


@pytest.mark.parametrize("view", ["C.view(64)", "C.view(64, layout=None)"])  # (None: TVM keeps C's)
def test_a_view_without_layout_places_its_elements_as_the_viewed_buffer(view: str) -> None:
    func = from_source(HEADER + f'''@T.prim_func
def main(C: T.Buffer((8, 8), "float32", layout=T.TileLayout(T.S[(8, 8):(1, 8)]))):
    D = {view}
    T.evaluate(D[0])
''')
    view = func.body.buffer
    assert view.layout is not None and same_placement(view.layout, func.buffer_map[func.params[0]].layout)
    assert "D = C.view(64)\n" in func.script(dialect="tvm-0.27")


def test_a_buffer_without_layout_over_a_laid_out_buffer_is_declared_not_viewed() -> None:
    # (C.view(64, layout=None) would keep C's layout: TVM 0.27 prints this text as it is)
    text = HEADER + '''@T.prim_func(private=True)
def main():
    C = T.alloc_local((8, 8), layout=T.TileLayout(T.S[(8, 8):(1, 8)]))
    D = T.decl_buffer((64,), data=C.data, scope="local", layout=None)
    E = T.alloc_local((8, 8))
    F = T.decl_buffer((64,), data=E.data, scope="local", layout=None)'''
    assert from_source(text + "\n    T.evaluate(0)\n").script(dialect="tvm-0.27") == text


@pytest.mark.parametrize("layout", ["T.TileLayout(T.S[32:1])", "T.TileLayout(T.S[(2, 4, 4):(16, 4, 1)])"])
def test_a_layout_that_keeps_rows_in_place_is_run_and_built(layout: str) -> None:
    func = from_source(doubling(layout))
    assert param_layout(doubling(layout)) is not None  # (TVM prints it: it is not the default one)
    a = np.arange(32, dtype="float32").reshape(8, 4)
    b = np.zeros_like(a)
    run_prim_func(func, a, b)
    np.testing.assert_array_equal(b, 2 * a)
    built, out = tvms.build(func, "llvm"), tvms.nd.array(np.zeros_like(a))
    built(tvms.nd.array(a), out)
    np.testing.assert_array_equal(out.numpy(), 2 * a)


@pytest.mark.parametrize("layout", ["T.TileLayout(T.S[(8, 4):(1, 8)])",
                                    "T.TileLayout(T.S[(8, 4):(4 @ Axis.laneid, 1)])",
                                    "T.TileLayout(T.S[32:1] + 4)",
                                    "T.ComposeLayout(3, 3, 3, T.TileLayout(T.S[(8, 4):(4, 1)]))"])
def test_a_layout_that_moves_elements_is_refused_by_lowering_and_the_executor(layout: str) -> None:
    func = from_source(doubling(layout))
    a = np.zeros((8, 4), "float32")
    with pytest.raises(tvms.TVMSError, match=r"the reference executor: buffer 'A' has the tile layout T\.(Tile|Compose)Layout"):
        run_prim_func(func, a, a.copy())
    with pytest.raises(tvms.TVMSError, match=r"build: buffer 'A' has the tile layout .* does not lower them"):
        tvms.build(func, "llvm")


@pytest.mark.parametrize("pass_name", ["FlattenBuffer", "LowerMatchBuffer", "CompactBufferAllocation"])
def test_a_lowering_pass_run_by_hand_refuses_a_layout_it_would_drop(pass_name: str) -> None:
    func = from_source(doubling("T.TileLayout(T.S[(8, 4):(1, 8)])"))
    lowering = getattr(tvms.tirx.transform, pass_name)()
    with pytest.raises(tvms.TVMSError, match=rf"{pass_name}: buffer 'A' has the tile layout T\.TileLayout"):
        lowering(tvms.IRModule({"main": func}))
    row_major = from_source(doubling("T.TileLayout(T.S[32:1])"))  # (placed as without a layout: lowered)
    lowering(tvms.IRModule({"main": row_major}))


@pytest.mark.parametrize("spec", ["T.S[n * 2:n + 1] + T.R[n - 1:1 @ Axis.laneid]",
                                  "T.S[(n * 2, 4):(1, n * 2)] + (n + 1) @ Axis.laneid"])
def test_a_symbolic_spec_prints_parentheses_only_before_an_axis(spec: str) -> None:
    # (as TVM 0.27 prints these texts)
    text = HEADER + f'''@T.prim_func(private=True)
def main(A: T.Buffer(("n * 2", 4), "float32", layout=T.TileLayout({spec})), n: T.int32):
    T.evaluate(0)'''
    assert from_source(text).script(dialect="tvm-0.27") == text


LAYOUT_ERRORS = [
    ("T.TileLayout(T.S[(8, 4):(4, 1, 1)])", 66, r"T\.S\[\.\.\.\] has 2 extent\(s\) and 3 stride\(s\)"),
    ("T.TileLayout(T.S[(8, 4):(4 @ Axis.lanied, 1)])", 77, r"unknown layout axis 'Axis\.lanied'; did you mean 'laneid'\?"),
    ("T.TileLayout(5)", 48, r"T\.TileLayout takes one spec .* got 5"),
    ("T.TileLayout(T.S[8:1] + T.S[4:1])", 61, r"a tile layout has one T\.S\[\.\.\.\]"),
    ("T.ComposeLayout(3, 3, 3, T.S[32:1])", 48, r"T\.ComposeLayout swizzles a T\.TileLayout, got a bare spec"),
    ("T.TileLayout(T.S(32, 1))", 61, r"T\.S is written with brackets"),
    ("T.TileLayout(T.S[8:1] + Axis.laneid @ 4)", 72, r"an axis stands after a value: write 1 @ Axis\.laneid"),
    ("T.TileLayout(T.S[8:1] - 1)", 61, r"a layout is built with \+ alone"),
    ("T.TileLayout(T.S[8:1.5])", 61, r"a stride of a layout is an integer, got 1\.5"),
    ("T.TileLayout(1 @ Axis.laneid)", 48, r"got a layout offset \(a value @ Axis\.name\)"),
    ("Axis", 48, r"got the namespace Axis"),
    ("T.TileLayout(T.S[8:1] + None)", 72, r"an offset of a layout is an integer, got None$"),
    ("T.TileLayout(T.S[(8, 0):(1, 8)])", 61, r"an extent of a layout is positive, got 0"),
    ("T.ComposeLayout(3, 3, 3, T.TileLayout(T.S[32:1]), True, swizzle_inner=False)", 48,
     r"T\.ComposeLayout's swizzle_inner is given twice"),
    ('"row_major"', 48, r"a buffer's layout= is a T\.TileLayout, a T\.ComposeLayout or None, got the string 'row_major'"),
]


@pytest.mark.parametrize("layout, col, message", LAYOUT_ERRORS, ids=[m[:20] for _, _, m in LAYOUT_ERRORS])
def test_a_malformed_layout_is_located(layout: str, col: int, message: str) -> None:
    assert_error(doubling(layout), 5, col, message)


def test_a_layout_in_an_s_tir_function_is_refused() -> None:
    src = doubling("T.TileLayout(T.S[(8, 4):(1, 8)])").replace("@T.prim_func", "@T.prim_func(s_tir=True)")
    assert_error(src, 5, 48, r"s_tir PrimFunc takes no tile layout")


def test_tensor_memory_is_declared_at_an_address() -> None:
    body = HEADER + '''@T.prim_func
def main():
    C = T.decl_buffer((128, 128), scope="tmem"{})
    T.evaluate(C[0, 0])
'''
    assert_error(body.format(""), 6, 9, r'a T\.decl_buffer in scope "tmem" needs its allocated_addr=')
    func = from_source(body.format(", allocated_addr=64"))
    assert [a.value for a in func.body.buffer.allocated_addr] == [64]


def test_a_view_of_tensor_memory_is_a_buffer_of_its_own_at_the_same_address() -> None:
    tmem = '''J = T.decl_buffer((128, 4), scope="tmem", layout=T.TileLayout(T.S[(128, 4):(1 @ Axis.TLane, 1 @ Axis.TCol)]), allocated_addr=2)'''
    func = from_source(HEADER + f"@T.prim_func(private=True)\ndef main():\n    {tmem}\n    K = J.view(512)\n    T.evaluate(0)\n")
    view = func.body.body.buffer
    assert view.data is not func.body.buffer.data and [a.value for a in view.allocated_addr] == [2]
    # (as TVM 0.27 prints it)
    assert func.script(dialect="tvm-0.27").endswith(
        "\n    " + tmem.replace("J = T.decl_buffer((128, 4)", "K = T.decl_buffer((512,)"))


def test_a_local_view_of_a_symbolic_layout_across_threads_round_trips() -> None:
    tvm_text = HEADER + '''@T.prim_func(private=True)
def main(n: T.int32):
    B = T.alloc_local((n * 32,), layout=T.TileLayout(T.S[(n, 32):(1, 1 @ Axis.laneid)]))
    C = B.local()'''  # (as TVM 0.27 prints C = T.decl_buffer((n,), data=B.data, scope="local"))
    declared = tvm_text.replace("B.local()", 'T.decl_buffer((n,), data=B.data, scope="local")')
    for text in (tvm_text, declared):
        func = from_source(text + "\n    T.evaluate(0)\n")
        assert func.body.body.buffer.shape == (func.params[0],)
        assert func.script(dialect="tvm-0.27") == tvm_text


def test_a_local_view_holds_what_one_thread_holds() -> None:
    func = from_source((FIXTURES / "tvm027_printing" / "tile_layout_local_views.tvms").read_text())
    whole = func.body.body.body  # C = B.local()
    assert [e.value for e in whole.buffer.shape] == [32] and whole.buffer.layout is None
    assert whole.buffer.data is func.body.buffer.data


def test_a_local_view_of_a_buffer_of_the_default_layout_or_given_its_own_layout() -> None:
    # (what TVM 0.27 prints of this text, each view as TVM's printer writes it)
    src = HEADER + '''@T.prim_func(private=True)
def main():
    A = T.alloc_local((32,))
    C = A.local()
    D = A.local(4, 8)
    B = T.alloc_local((8, 4), layout=T.TileLayout(T.S[(8, 4):(1, 8)]))
    E = B.local()
    N = T.alloc_local((32,), layout=None)
    F = N.local(4, 8, layout=T.TileLayout(T.S[(4, 8):(1, 4)]))
    T.evaluate(0)
'''
    tvm_text = src.replace("C = A.local()", 'C = T.decl_buffer((32,), data=A.data, scope="local")').replace(
        "D = A.local(4, 8)", "D = A.view(4, 8)").replace(
        "E = B.local()", "E = B.view(32, layout=T.TileLayout(T.S[32:1]))").replace(
        "N.local(", "N.view(").replace("\n    T.evaluate(0)\n", "")
    func = from_source(src)
    assert func.script(dialect="tvm-0.27") == tvm_text
    # (TVM's A.view(4, 8) keeps A's layout where A.local(4, 8) has the default one of its shape:
    # the two place the elements alike, as tvms reads them)
    again = from_source(tvm_text)
    assert again.script(dialect="tvm-0.27") == tvm_text
    placed = [[layout_of(s.buffer) for s in collect(f, DeclBuffer)] for f in (func, again)]
    assert all(same_placement(a, b) for a, b in zip(*placed)) and len(placed[0]) == 4


LOCAL = HEADER + '''@T.prim_func
def main():
    N = T.alloc_local((32,), layout=None)
    B = N.view(64, 64, layout=T.TileLayout(T.S[(4, 2, 8, 8, 4, 2):(1 @ Axis.wid_in_wg, 2, 4 @ Axis.laneid, 4, 1 @ Axis.laneid, 1)]))
    C = {}
    T.evaluate(C[0])
'''


@pytest.mark.parametrize("call, col, message", [
    ("N.local()", 9, r"N\.local\(\.\.\.\) reads what one thread holds from N's layout, and N has layout=None: "
                     r"give a shape and layout="),
    ("N.local(32)", 9, r"N has layout=None: give a shape and layout="),
    ("B.local(4, 4)", 9, r"B\.local\(4, 4\): the shape must cover the 32 element\(s\) one thread holds"),
    ("B.local(32, scope=\"shared\")", 9, r"B\.local\(\.\.\.\) takes a shape and layout=, not scope="),
])
def test_a_local_view_that_does_not_fit_is_located(call: str, col: int, message: str) -> None:
    assert_error(LOCAL.format(call), 8, col, message)


PERMUTE = HEADER + '''@T.prim_func
def main():
    A = T.alloc_local((8, 4), "float16")
    N = T.alloc_local((8, 4), "float16", layout=None)
    W = T.alloc_shared((8, 4), "float16", layout=T.ComposeLayout(3, 3, 3, T.TileLayout(T.S[(8, 4):(4, 1)])))
    V = T.alloc_local((6, 4), "float16", layout=T.TileLayout(T.S[(4, 6):(6, 1)]))
    B = {}
    B[0, 0] = T.float16(0.0)
'''


def test_a_permuted_view_reorders_the_layouts_pieces() -> None:
    func = from_source(PERMUTE.format("A.permute(1, 0)"))
    (permuted,) = [s.buffer for s in collect(func, DeclBuffer) if s.buffer.name == "B"]
    assert [e.value for e in permuted.shape] == [4, 8]
    assert structural_equal(permuted.layout, param_layout(HEADER + '@T.prim_func\ndef main(A: T.Buffer((4, 8), "float16", '
                                                          'layout=T.TileLayout(T.S[(4, 8):(1, 4)]))):\n    T.evaluate(0)\n'))


def test_a_permute_of_a_view_splits_the_pieces_a_dimension_ends_in() -> None:
    # (B = A.local(4, 8) prints as TVM prints it, A.view(4, 8), which keeps A's (8, 4):(4, 1) layout;
    # TVM's permute then splits its 8 between the two dimensions, and so does tvms's)
    text = from_source(PERMUTE.format("A.local(4, 8)\n    C = B.permute(1, 0)")).script(dialect="tvm-0.27")
    assert "    B = A.view(4, 8)\n    C = B.permute(1, 0)\n" in text
    again = from_source(text).script(dialect="tvm-0.27")
    assert "    C = B.view(8, 4, layout=T.TileLayout(T.S[(2, 4, 4):(4, 1, 8)]))\n" in again


@pytest.mark.parametrize("call, col, message", [
    ("A.permute(1)", 9, r"A\.permute\(\.\.\.\) takes an order of its 2 dimensions, such as A\.permute\(1, 0\)"),
    ("A.permute(0, 0)", 9, r"takes an order of its 2 dimensions"),
    ("A.permute(1.0, 0)", 9, r"takes an order of its 2 dimensions"),
    ("N.permute(1, 0)", 9, r"N\.permute\(\.\.\.\) reorders N's layout, and N has layout=None"),
    ("W.permute(1, 0)", 9, r"tvms permutes the dimensions of a buffer laid out by a T\.TileLayout, not T\.ComposeLayout"),
    ("V.permute(1, 0)", 9, r"whose pieces can be grouped by the dimensions .* cannot for the shape \(6, 4\)"),
])
def test_a_permute_tvms_cannot_make_is_located(call: str, col: int, message: str) -> None:
    assert_error(PERMUTE.format(call), 10, col, message)
