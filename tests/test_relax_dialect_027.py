"""Relax-only modules in TVM 0.27's dialect (issue 14, point 4): detected by the spelling that only
0.27 prints, printed back byte for byte, converted both ways, and printed with their functions in
TVM's order. The goldens in fixtures/dialect_relax were printed by Apache TVM 0.27
(fixtures/dialect_relax/make_with_tvm.py, which names the command)."""
from __future__ import annotations

import re

import pytest
from conftest import CORPUS_COPY, FIXTURES

import tvms
from tvms.ir import IRModule, structural_equal, structural_hash
from tvms.ir.function import PrimFunc
from tvms.ir.print_order import tvm_function_order
from tvms.ir.relax import ExternFunc
from tvms.ir.struct_info import FuncStructInfo, ObjectStructInfo, TensorStructInfo
from tvms.ir.errors import ScriptError
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


# ---- a scalar int64 bound in TVM 0.27 text ("n: T.int64 = ..."): a size only where it is used as one

SCALAR_BINDINGS = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), p: R.Tuple(R.Prim("int64"), R.Tensor(dtype="float32", ndim=1))) -> R.Tuple(R.Prim("int64"), R.Prim("int64"), R.Prim("int64")):
        k: R.Prim("int64") = R.call_pure_packed("f", x, sinfo_args=(R.Prim("int64"),))
        j: R.Prim("int64") = p[0]
        i: R.Prim("int64") = j
        n: R.Prim(value="n") = R.match_cast(p[0], R.Prim(value="n"))
        w: R.Tensor((n,), dtype="float32") = R.match_cast(p[1], R.Tensor((n,), dtype="float32"))
        m: R.Prim(value="m") = R.match_cast(p[0], R.Prim(value="m"))
        s: R.Prim("int64") = R.prim_value(m + 1)
        return (k, i, s)
'''


def _bindings(mod: IRModule) -> dict:
    from tvms.ir import relax as rx

    return {b.var.name: type(b).__name__ for block in mod["main"].body.blocks for b in block.bindings
            if isinstance(b, (rx.VarBinding, rx.MatchCast))}


def test_a_scalar_binding_is_a_match_cast_only_where_its_name_is_a_size() -> None:
    """TVM 0.27 writes ``n: T.int64 = value`` both for a plain binding of a scalar and for one
    that defines the size ``n`` (a match_cast, as LiftTransformParams makes): read back, it is a
    match_cast only where the function uses ``n`` as a size (a shape, arithmetic), a plain binding
    elsewhere, as TVM's parser makes it; so classic -> 0.27 -> classic keeps every binding."""
    mod = from_source(SCALAR_BINDINGS)
    text = mod.script(dialect="tvm-0.27")
    for line in ("k: T.int64 = R.call_pure_packed(", "j: T.int64 = p[0]", "i: T.int64 = j", "n: T.int64 = p[0]",
                 "m: T.int64 = p[0]", "s: T.int64 = m + 1"):
        assert line in text
    again = from_source(text)
    assert _bindings(again) == {"k": "VarBinding", "j": "VarBinding", "i": "VarBinding", "n": "MatchCast",
                                "w": "MatchCast", "m": "MatchCast", "s": "VarBinding"}
    assert structural_equal(again, mod) and again.script(dialect="classic") == mod.script(dialect="classic")
    assert again.script(dialect="tvm-0.27") == text


def test_a_size_matched_but_never_used_keeps_its_match_cast_in_tvm027_text() -> None:
    """A match_cast to a size the function never uses is no ``n: T.int64 = value`` in TVM 0.27
    text (that reads back as a plain binding): it stays a match_cast (0.27 writes a scalar's
    struct info without its value)."""
    mod = from_source(SCALAR_BINDINGS.replace("w: R.Tensor((n,)", "w: R.Tensor((4,)").replace(
        'R.Tensor((n,), dtype="float32"))', 'R.Tensor((4,), dtype="float32"))'))
    text = mod.script(dialect="tvm-0.27")
    assert "n: T.int64 = R.match_cast(p[0], T.int64)" in text
    assert _bindings(from_source(text))["n"] == "MatchCast"


@pytest.mark.parametrize("annotation", ["T.int64", 'R.Prim("int64")'])
def test_a_scalar_annotated_with_another_dtype_than_its_value_is_refused(annotation: str) -> None:
    text = SCALAR_BINDINGS.replace('k: R.Prim("int64") = R.call_pure_packed("f", x, sinfo_args=(R.Prim("int64"),))',
                                   f'k: {annotation} = R.call_pure_packed("f", x, sinfo_args=(R.Prim("int32"),))')
    if annotation == "T.int64":
        text = "# from tvm.script import tirx as T\n" + text
    with pytest.raises(ScriptError, match="'k' is annotated int64 but its value is int32") as err:
        from_source(text)
    line = 9 if annotation == "T.int64" else 8
    assert str(err.value).startswith(f"<string>:{line}:12: error:") and f"k: {annotation} =" in str(err.value)


# TVM 0.27's print of R.prim_value of each integer type, a float16 and a tuple (tvm.script.from_source
# then .script(), with the side virtualenv): integers bare under their annotation, whatever their type
TYPED_SCALARS = """# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> T.int32:
        a: T.int64 = 3
        b: T.int32 = 3
        c: T.int8 = 3
        d: T.uint32 = 3
        e: T.bool = True
        f: T.float16 = T.float16(3.0)
        g: R.Tuple(T.int32, T.int64) = 3, 4
        return b
"""


def test_bare_numbers_take_their_annotations_type_as_tvm_writes_them() -> None:
    """``k: T.int32 = 3`` is an int32 scalar (it had been refused: a bare 3 read as int64), and
    prints back as TVM prints it, in both dialects' round trip."""
    mod = from_source(TYPED_SCALARS)
    values = {b.var.name: b.value for b in mod["main"].body.blocks[0].bindings}
    assert [str(values[k].value.dtype) for k in "abcdef"] == ["int64", "int32", "int8", "uint32", "bool", "float16"]
    assert [str(f.value.dtype) for f in values["g"].fields] == ["int32", "int64"]
    assert mod.script(dialect="tvm-0.27") == TYPED_SCALARS.rstrip("\n")
    assert from_source(mod.script(dialect="classic")).script(dialect="tvm-0.27") == TYPED_SCALARS.rstrip("\n")


# TVM 0.27's print of scalars in tuples (nested, beside a tensor) and in an if's branches
TYPED_IN_TUPLES = """# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), c: T.bool) -> R.Tuple(R.Tuple(R.Tensor((4,), dtype="float32"), T.int8), R.Tuple(R.Tuple(T.int32, T.int32), T.int64), T.int32, T.int32):
        t: R.Tuple(R.Tensor((4,), dtype="float32"), T.int8) = x, 5
        u: R.Tuple(R.Tuple(T.int32, T.int32), T.int64) = (1, 2), 7
        if c:
            r: T.int32 = 4
        else:
            r: T.int32 = 6
        return (t, u, r, r)
"""


def test_bare_numbers_in_tuples_and_branches_take_their_annotations_types() -> None:
    mod = from_source(TYPED_IN_TUPLES)
    t, u = (b.value for b in mod["main"].body.blocks[0].bindings[:2])
    assert str(t.fields[1].value.dtype) == "int8"
    assert [str(f.value.dtype) for f in (*u.fields[0].fields, u.fields[1])] == ["int32", "int32", "int64"]
    assert mod.script(dialect="tvm-0.27") == TYPED_IN_TUPLES.rstrip("\n")
    assert from_source(mod.script(dialect="classic")).script(dialect="tvm-0.27") == TYPED_IN_TUPLES.rstrip("\n")


@pytest.mark.parametrize("annotation, value, message", [
    ("T.int8", "300", "300 is out of the range of int8"),
    ("T.uint8", "-1", "-1 is out of the range of uint8"),
    ("R.Tuple(T.int8, T.int8)", "1, 300", "300 is out of the range of int8"),
    ("R.Tuple(T.int32, T.int64)", "3, 4, 5", "'k' is annotated a tuple of 2 fields but its value has 3"),
    ("R.Tuple(R.Tuple(T.int32, T.int32), T.int64)", "(1, 2), 7.5", "'k' is annotated int64 but its value is float64"),
    ("R.Tuple(T.int32, T.int64)", "x, 4", "'k' is annotated a scalar but its value is a tensor"),
])
def test_a_scalar_that_does_not_fit_its_annotation_is_refused(annotation: str, value: str, message: str) -> None:
    """As TVM refuses them ("Literal value 300 exceeds range of int8", "Invalid annotation");
    tvms had wrapped 300 to 44 at run time and kept tuples at odds with their annotations."""
    text = TYPED_IN_TUPLES.replace('t: R.Tuple(R.Tensor((4,), dtype="float32"), T.int8) = x, 5',
                                   f"k: {annotation} = {value}")
    assert text != TYPED_IN_TUPLES
    with pytest.raises(ScriptError, match=re.escape(message)) as err:
        from_source(text)
    assert str(err.value).startswith("<string>:10:")


def test_bare_numbers_returned_take_the_return_annotations_types() -> None:
    """TVM 0.27 writes an integer scalar returned bare whatever its type (``-> T.int32: return
    3``); tvms reads it back as the type the return annotation says, so TVM's text reads back as
    the module TVM printed (TVM's own parser reads int64 there, and tvms had too: then the
    module did not compile, "the return annotation contradicts the value returned")."""
    import numpy as np

    text = (FIXTURES / "typed_returns" / "typed_returns.tvms").read_text()
    mod = from_source(text)
    beside, nested, scalar = (mod[name].body.body for name in ("beside_a_tensor", "nested", "scalar"))
    assert str(scalar.value.dtype) == "int32"
    assert [str(beside.fields[i].value.dtype) for i in (0, 2)] == ["int32", "int8"]
    assert [str(f.value.dtype) for f in (*nested.fields[0].fields, *nested.fields[1:])] == \
        ["int16", "int64", "float32", "uint8"]
    assert mod.script(dialect="tvm-0.27") == text.rstrip("\n")
    assert from_source(mod.script(dialect="classic")).script(dialect="tvm-0.27") == text.rstrip("\n")
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    first, x, last = vm["main"](tvms.nd.array(np.ones(2, "float32")))
    assert (first, last) == (3, -5) and x.numpy().tolist() == [1.0, 1.0]


@pytest.mark.parametrize("annotation, value, printed, mismatch", [
    ("T.int8", "300", "return 300", "dtype int8 vs int64"),
    ("R.Tuple(T.int32, R.Tuple(T.uint8,))", "(1, (256,))", "return (1, (256,))", "field 1: field 0: dtype uint8 vs int64"),
    ('R.Prim("float16")', "70000.0", "return T.float64(70000.0)", "dtype float16 vs float64"),
])
def test_a_number_returned_out_of_its_annotations_range_stays_as_tvm_reads_it(
        annotation: str, value: str, printed: str, mismatch: str) -> None:
    """TVM 0.27 reads it (as int64 or float64) and prints it so; tvms too, and its compile then
    refuses the module by its return annotation, where it had refused the text."""
    mod = from_source(f"@R.function\ndef main() -> {annotation}:\n    return {value}\n")
    text = mod.script(dialect="tvm-0.27")
    assert text.endswith(printed) and structural_equal(from_source(text), mod)
    with pytest.raises(ScriptError, match=re.escape(f"the return annotation contradicts the value returned "
                                                    f"(annotation vs value: {mismatch})")):
        tvms.compile(mod, "llvm")


def test_a_number_returned_of_another_type_than_the_annotations_prints_its_type() -> None:
    """Written bare it would read back as the annotation's type: it keeps ``T.int16(3)``."""
    mod = from_source("@R.function\ndef main() -> T.int32:\n    return T.int16(3)\n")
    assert mod.script(dialect="tvm-0.27").endswith("return T.int16(3)")
    assert structural_equal(from_source(mod.script(dialect="tvm-0.27")), mod)
