"""Relax-only modules in TVM 0.27's dialect (issue 14, point 4): detected by the spelling that only
0.27 prints, printed back byte for byte, converted both ways, and printed with their functions in
TVM's order. The goldens in fixtures/dialect_relax were printed by Apache TVM 0.27
(fixtures/dialect_relax/make_with_tvm.py, which names the command)."""
from __future__ import annotations

import pytest
from conftest import CORPUS_COPY, FIXTURES

from tvms.ir import IRModule, structural_equal, structural_hash
from tvms.ir.function import PrimFunc
from tvms.ir.print_order import tvm_function_order
from tvms.ir.relax import ExternFunc
from tvms.ir.struct_info import FuncStructInfo, ObjectStructInfo, TensorStructInfo
from tvms.script import from_source
from tvms.script.dialect import detect_dialect, tvm027_marker
from tvms.script.formatting import format_script

GOLDENS = FIXTURES / "dialect_relax"

# golden -> the 0.27 spelling that decides its dialect (None: no marker, the text reads as classic)
DECIDING_MARKER = {
    "any_struct_info": "R.Any",
    "out_dtype_none": "dtype=None",
    "dtype_none": "dtype=None",
    "ty_args": "ty_args=",
    "callable_params": "R.Any",
    "typevar_sizes": "import TypeVar",
    "function_order": None,
    "void_tuple": None,
    "bare_scalars": None,
}
# goldens without a marker that the parser reads as 0.27's: a scalar written bare as a Relax value
READ_AS_027 = {"bare_scalars"}

# golden -> what its classic print says instead of the 0.27 spelling
CLASSIC_SPELLING = {
    "any_struct_info": "R.Object",
    "out_dtype_none": 'out_dtype="void"',
    "dtype_none": 'dtype="void"',
    "ty_args": "sinfo_args=(",
    "callable_params": "R.Callable((R.Tensor((4,), dtype=\"float32\"), R.Object), R.Tuple, False)",
    "typevar_sizes": 'n = T.int64()',
    "bare_scalars": "R.clip(x, R.prim_value(0), R.prim_value(4))",
}


def golden(name: str) -> str:
    return (GOLDENS / f"{name}.tvms").read_text()


def test_every_golden_is_listed() -> None:
    assert sorted(p.stem for p in GOLDENS.glob("*.tvms")) == sorted(DECIDING_MARKER)


@pytest.mark.parametrize("name", sorted(DECIDING_MARKER))
def test_a_tvm027_relax_text_prints_back_byte_for_byte(name: str) -> None:
    text = golden(name)
    mod = from_source(text, f"{name}.tvms")
    want = "classic" if DECIDING_MARKER[name] is None and name not in READ_AS_027 else "tvm-0.27"
    assert mod.source_dialect == want
    assert format_script(text, f"{name}.tvms") == text  # tvms fmt keeps the file's dialect
    assert mod.script(dialect="tvm-0.27") + "\n" == text  # and so does naming 0.27 (no marker)


@pytest.mark.parametrize("name", sorted(DECIDING_MARKER))
def test_the_deciding_marker(name: str) -> None:
    assert tvm027_marker(golden(name)) == DECIDING_MARKER[name]


@pytest.mark.parametrize("name", sorted(CLASSIC_SPELLING))
def test_converting_to_classic_and_back(name: str) -> None:
    text = golden(name)
    mod = from_source(text)
    classic = mod.script(dialect="classic") + "\n"
    assert CLASSIC_SPELLING[name] in classic
    assert tvm027_marker(classic) is None, "the classic print carries no 0.27 spelling"
    again = from_source(classic)
    assert again.source_dialect == "classic" and structural_equal(again, mod)
    assert format_script(classic, "classic.tvms") == classic
    assert format_script(classic, "classic.tvms", dialect="tvm-0.27") == text


@pytest.mark.parametrize("snippet, marker", [
    ("x: R.Any", "R.Any"),
    ("R.matmul(x, w, out_dtype=None)", "dtype=None"),
    ("R.full(R.shape([2]), v, dtype=None)", "dtype=None"),
    ('R.call_packed("f", x, ty_args=(R.Tuple,))', "ty_args="),
    ('R.call_tir(cls.f, (x,), out_ty=R.Tensor((2,), dtype="float32"))', "out_ty="),
    ('n = TypeVar("n")', "TypeVar("),
    ("# from typing import TypeVar", "import TypeVar"),
    ('c = metadata["ir.GenericConst"][0]', "ir.GenericConst"),
])
def test_each_marker_alone_decides(snippet: str, marker: str) -> None:
    assert tvm027_marker(snippet) == marker
    assert detect_dialect(snippet).name == "tvm-0.27"


@pytest.mark.parametrize("snippet", [
    "x: R.Object",
    'R.matmul(x, w, out_dtype="void")',
    'R.full(R.shape([2]), v, dtype="float32")',
    'R.call_packed("f", x, sinfo_args=(R.Tuple,))',
    # R.Callable's tuple of parameters is printed so by TVM before 0.27 too: no marker
    'f: R.Callable((R.Tensor((4,), dtype="float32"),), R.Tensor((4,), dtype="float32"), True)',
    "h: R.Callable",
    "Anything = R.AnyThing; dtype=Nonesuch",
])
def test_classic_and_shared_spellings_are_no_markers(snippet: str) -> None:
    assert tvm027_marker(snippet) is None and detect_dialect(snippet).name == "classic"


def test_a_text_without_marker_stays_classic() -> None:
    text = (CORPUS_COPY / "relax_script_closures_and_calls.tvms").read_text()
    assert tvm027_marker(text) is None
    assert from_source(text).source_dialect == "classic"
    assert format_script(text, "closures.tvms") == text


def test_opaque_callables_parse_with_tvms_defaults() -> None:
    params = {p.name: p.struct_info for p in from_source(golden("callable_params"))["main"].params}
    h, k, g = params["h"], params["k"], params["g"]
    assert isinstance(h, FuncStructInfo) and h.params is None and not h.purity
    assert isinstance(h.ret, ObjectStructInfo)
    assert k.params is None and k.purity and isinstance(k.ret, TensorStructInfo)
    assert len(g.params) == 2 and not g.purity and g.ret.fields == ()


def test_a_module_prints_its_functions_in_tvms_order_in_the_027_dialect() -> None:
    text = golden("function_order")
    mod = from_source(text)
    shuffled = IRModule()
    for gv, func in reversed(mod.functions_items()):  # main first, then zeta, alpha
        shuffled[gv] = func
    assert shuffled.script(dialect="tvm-0.27") + "\n" == text
    classic = shuffled.script(dialect="classic")  # classic keeps insertion order
    assert classic.index("def main") < classic.index("def zeta") < classic.index("def alpha")
    # the order is no structure (a module maps names to functions), so both texts read back equal
    assert structural_equal(shuffled, mod) and structural_hash(shuffled) == structural_hash(mod)
    assert structural_equal(from_source(classic), from_source(text))
    renamed = IRModule()
    for gv, func in mod.functions_items():
        renamed["omega" if gv.name_hint == "alpha" else gv] = func
    assert not structural_equal(renamed, mod)


def test_tvms_order_ranks_kinds_then_names_with_main_last() -> None:
    prim = PrimFunc(params=[], body=None)
    relax_main = from_source(golden("function_order"))["main"]
    extern = ExternFunc("ext")
    items = [("main", prim), ("b", relax_main), ("z", extern), ("a", relax_main), ("y", prim)]
    assert [name for name, _ in tvm_function_order(items)] == ["y", "z", "a", "b", "main"]
