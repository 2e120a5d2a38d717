"""The printer decides what to print from the IR, never by reading back its own output (issue 13,
point 6): the metadata section, quoted signature sizes, the class name of a formatted module."""
from __future__ import annotations

import re

import pytest

import tvms
from tvms.ir.errors import ScriptError
from tvms.script import from_source
from tvms.script.formatting import format_python

METADATA_NOTE = "# Metadata omitted. Use show_meta=True in script() method to show it."

RELAX_WITH_CONSTANTS = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:{attrs}
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        y: R.Tensor((2,), dtype="float32") = R.add(x, {first})
        z: R.Tensor((2,), dtype="float32") = R.add(y, {second})
        return z
'''
ELIDED = 'metadata["relax.expr.Constant"][0]'  # a constant the text left out
INLINE = 'R.const([1.0, 2.0], "float32")'
SECTION = '''metadata = {
    "relax.expr.Constant": [
        {"dtype": "float32", "shape": [2], "data": "AACAPwAAAEA="},
    ],
}'''


def module(first: str, second: str, attrs: str = ""):
    return from_source(RELAX_WITH_CONSTANTS.format(first=first, second=second, attrs=attrs))


def test_a_complete_metadata_section_is_printed_with_show_meta() -> None:
    mod = module("x", INLINE)
    assert mod.script(show_meta=True).endswith("return z\n\n" + SECTION)
    assert mod.script().endswith("return z\n\n" + METADATA_NOTE)


def test_metadata_the_module_does_not_hold_is_never_printed_as_a_section() -> None:
    for mod in (module(ELIDED, "x"),
                module("x", "x", attrs='\n    I.module_attrs({"external_mods": [metadata["ffi.Module"][0]]})'),
                # an elided constant beside one the module holds: a section would give the
                # reference to the left-out one the value of the other
                module(ELIDED, INLINE)):
        assert mod.script(show_meta=True).endswith("return z\n\n" + METADATA_NOTE)
        assert mod.script().endswith("return z\n\n" + METADATA_NOTE)


def test_no_metadata_no_note() -> None:
    assert module("x", "x").script(show_meta=True).endswith("return z")


def test_a_compound_signature_size_is_quoted_whole() -> None:
    # (the classic signature quotes sizes it names before defining them; a compound size that
    # reads one is quoted as a whole, not with quotes inside)
    text = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor(("m",), dtype="float32"), x: R.Tensor(("n", "n * 2 + m"), dtype="float32")) -> R.Tensor(("n * 2 + m",), dtype="float32"):
        m = T.int64()
        n = T.int64()
        z: R.Tensor((n * 2 + m,), dtype="float32") = R.reshape(x, R.shape([n * 2 + m]))
        return z'''
    mod = from_source(text)
    assert mod.script() == text
    assert 'x: R.Tensor((n, "n * 2 + m"), dtype="float32")) -> R.Tensor(("n * 2 + m",), dtype="float32"):' \
        in mod.script(dialect="tvm-0.27")


ADDER_PY = '''from tvm.script import ir as I, relax as R, tir as T


@I.ir_module
class Adder:  # the adder
    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        # with T.block("root"):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1.0)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Adder
        y = R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
        return y
'''


def test_a_module_prints_under_the_class_name_it_is_given() -> None:
    mod = from_source(ADDER_PY.replace("class Adder:  # the adder", "class Module:")
                      .replace("cls = Adder", "cls = Module"))
    text = mod.script(name="Adder")
    assert "\nclass Adder:\n" in text and "\n        cls = Adder\n" in text and "Module" not in text


def test_a_formatted_python_class_keeps_its_name_and_its_comment() -> None:
    # (the class line used to be replaced after printing, and its comment with it)
    assert format_python(ADDER_PY, "adder.py") == ADDER_PY


def test_a_python_definition_that_needs_lines_outside_it_is_refused() -> None:
    symbolic = ('@R.function\ndef f(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):\n'
                '    return x\n')
    with pytest.raises(ScriptError, match=r"""cannot format 'f' inside a Python file: its text needs """
                       r"""'n = TypeVar\("n"\)' outside the definition"""):
        format_python(symbolic, "m.py", dialect="tvm-0.27")
    constant = ('@I.ir_module\nclass Module:\n    @R.function\n'
                '    def f(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):\n'
                '        y = R.add(x, R.const([1.0, 2.0], "float32"))\n        return y\n')
    with pytest.raises(ScriptError, match=f"its text needs '{re.escape(METADATA_NOTE)}' outside"):
        format_python(constant, "m.py")


RELAX_ONLY = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        y: R.Tensor((2,), dtype="float32") = R.call_packed("T.not_a_prefix", x, sinfo_args=(R.Tensor((2,), dtype="float32"),))
        return y'''


def test_the_tir_import_follows_the_printed_prefix_not_the_text() -> None:
    # (a string holding "T." is not a use of the prefix; a T.int64 size declaration is)
    assert from_source(RELAX_ONLY).script() == RELAX_ONLY
    sized = RELAX_ONLY.replace('R.Tensor((2,), dtype="float32")) -> R.Tensor((2,)',
                               'R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",)').replace(
        "(R.Tensor((2,)", "(R.Tensor((n,)").replace("y: R.Tensor((2,)", "y: R.Tensor((n,)").replace(
        "        y:", "        n = T.int64()\n        y:").replace(
        "# from tvm.script import relax as R", "# from tvm.script import tir as T\n# from tvm.script import relax as R")
    assert from_source(sized).script() == sized


# TVM 0.27's print of a function built in Python (its parser refuses the free variables): each
# free variable is defined in the innermost frame of TVM's printer around its uses: an if's
# branch, a while's body; a branch that is a loop keys two frames, and TVM takes the outer one
FREE_VARIABLES_IN_FRAMES = '''# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func
    def main(c: T.int32):
        A = T.Buffer((16,))
        A[0] = T.float32(1.0)
        if c > 0:
            n = T.int32()
            A[n] = T.float32(1.0)
        else:
            m = T.int32()
            for i in range(4):
                A[i + m] = T.float32(1.0)
        while c < 4:
            k = T.int32()
            A[k] = T.float32(1.0)'''


def test_a_free_variable_is_defined_in_the_innermost_frame_around_its_uses() -> None:
    assert from_source(FREE_VARIABLES_IN_FRAMES).script(dialect="tvm-0.27") == FREE_VARIABLES_IN_FRAMES


def test_a_declared_variable_is_the_loop_variable_of_the_first_loop_of_its_name() -> None:
    """TVM 0.27 prints a loop whose variable is named before the loop (a pragma on it, a block
    predicate) as ``v = T.int32()``, then ``for v in ...``: one variable, which prints back so.
    A use of it outside that loop is then an error at build, as the same text is in TVM (where
    the declared ``v`` is a free variable nothing defines)."""
    from tvms.ir import stmt as S
    from tvms.ir.visitor import collect

    pragma = ('# from tvm.script import tir as T\n\n@T.prim_func\ndef main(A: T.Buffer((8,), "int32")):\n'
              '    i = T.int32()\n    T.attr(i, "pragma_unroll", 1)\n    for i in range(8):\n        A[i] = 1')
    f = from_source(pragma)
    (attr,) = collect(f.body, S.AttrStmt)
    assert attr.node is attr.body.loop_var and f.script() == pragma
    tvms.build(f, "llvm")
    used_outside = pragma.replace('    T.attr(i, "pragma_unroll", 1)\n', "    A[0] = i\n")
    with pytest.raises(tvms.TVMSError, match="variable 'i' is used before it is bound"):
        tvms.build(from_source(used_outside), "llvm")
