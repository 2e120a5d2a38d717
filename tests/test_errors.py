"""Bad TVMScript in, a located ``ScriptError`` out.

Every case checks the message, the exact line and column, and the rendering: the header
``name:line:col: error: message``, the offending source line behind a gutter, and a caret under
the column. No case may let another exception escape (a Lark exception, ``AttributeError``,
``KeyError`` ...), nor chain one into the traceback.
"""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import LarkError

from tvms import ScriptError
from tvms.script import from_source

NAME = "bad.tvms"


def parse_error(src: str, name: str = NAME) -> ScriptError:
    """The ScriptError that parsing ``src`` raises; any other outcome fails the test."""
    try:
        from_source(src, name)
    except ScriptError as err:
        # No internal exception may show in the traceback ("During handling of ...").
        assert err.__cause__ is None, f"chained from {err.__cause__!r}"
        assert err.__context__ is None or err.__suppress_context__, f"context {err.__context__!r}"
        assert not isinstance(err, LarkError)
        return err
    except Exception as err:  # noqa: BLE001 - the point of these tests
        pytest.fail(f"{type(err).__module__}.{type(err).__name__} escaped instead of a ScriptError: {err}")
    pytest.fail("the text parsed without an error")


def assert_error(src: str, line: int, col: int, match: str, name: str = NAME) -> ScriptError:
    """``src`` fails at ``line``:``col`` (1-based) with a message matching the regex ``match``,
    and ``str(err)`` shows the file name, that source line and a caret under the column."""
    err = parse_error(src, name)
    assert re.search(match, err.message), f"message {err.message!r} does not match {match!r}"
    assert err.span is not None, "the error has no position"
    assert (err.span.line, err.span.col) == (line, col), \
        f"error at {err.span.line}:{err.span.col}, expected {line}:{col}\n{err}"
    assert (err.span.end_line, err.span.end_col) >= (line, col + 1)
    rendered = str(err).split("\n")
    assert rendered[0] == f"{name}:{line}:{col}: error: {err.message}"
    source_line = src.split("\n")[line - 1]
    if not source_line:  # nothing to show (an empty file)
        return err
    gutter = f"{line} | "
    # control characters show as their one-column pictures (U+2400...), a CRLF's CR not at all
    shown = "".join(chr(0x2400 + ord(c)) if ord(c) < 32 and c != "\t" else c
                    for c in source_line.removesuffix("\r"))
    assert rendered[1] == gutter + shown
    caret = rendered[2]
    assert caret.lstrip(" \t").startswith("^"), caret
    # the padding copies the line's tabs, so the caret lines up in a terminal too
    assert caret.index("^") == len(gutter) + col - 1, f"caret in the wrong column:\n{err}"
    return err


# ---------------------------------------------------------------- names and builtins
def test_unknown_builtin_suggests_the_close_one():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grdi(128, 128):
        B[i, j] = A[i, j]
'''
    err = assert_error(src, 3, 17, r"unknown builtin 'T\.grdi'")
    assert "did you mean 'T.grid'?" in err.message


def test_undefined_variable_suggests_a_close_name():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        B[i, j] = AA[i, j]
'''
    err = assert_error(src, 4, 19, r"undefined variable 'AA'")
    assert "did you mean 'A'?" in err.message


def test_undefined_variable_without_a_close_name():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        B[i, j] = zzz[i, j]
'''
    err = assert_error(src, 4, 19, r"^undefined variable 'zzz'$")
    assert "did you mean" not in err.message


def test_calling_something_that_is_not_callable():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        B[i, j] = A(i, j)
'''
    assert_error(src, 4, 19, r"buffer 'A' is not callable")


# ---------------------------------------------------------------- buffers and types
def test_wrong_number_of_buffer_indices():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        B[i, j] = A[i]
'''
    assert_error(src, 4, 19, r"buffer 'A' has 2 dimensions but is indexed with 1 index")


def test_bad_dtype_string():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float33")):
    T.evaluate(0)
'''
    assert_error(src, 2, 13, r"unknown data type 'float33'")


def test_storing_a_vector_into_one_element():
    src = '''\
@T.prim_func
def main(B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.Broadcast(T.int32(1), 4)
'''
    assert_error(src, 4, 16, r"cannot store an int32x4 value into buffer 'B' of float32")


def test_a_constant_out_of_its_types_range():
    # (TVM 0.27 refuses both: "Literal value 300 exceeds range of int8")
    src = '''\
@T.prim_func
def main(B: T.Buffer((4,), "int8")):
    B[0] = T.int8(300)
'''
    assert_error(src, 3, 12, r"300 is out of the range of int8")
    assert_error(src.replace("T.int8(300)", "T.int64(-129)"), 3, 12,
                 r"cannot store into buffer 'B' of int8: -129 is out of the range of int8")
    assert_error(src.replace("T.int8(300)", "T.bool(2)"), 3, 12, r"2 is out of the range of bool")
    assert_error(src.replace("T.int8(300)", 'T.float32("inf")'), 3, 12,
                 r"cannot store into buffer 'B' of int8: inf has no value in int8")
    assert_error(src.replace("T.int8(300)", "5 % 0"), 3, 12, r"division by zero")
    assert_error(src.replace("T.int8(300)", "T.bool(True) % T.bool(True)"), 3, 12,
                 r"floor modulo \(%, T.floormod\) takes integers, not bool")
    huge = '''\
@T.prim_func
def main(B: T.Buffer((99999999999999999999, 4), "float32")):
    T.evaluate(0)
'''
    assert_error(huge, 2, 13, r"99999999999999999999 is out of the range of int64")


def test_number_literals_in_every_form_python_writes():
    """0x/0o/0b literals and underscores read as Python reads them (TVM's parser is Python's);
    a digit the radix lacks ends the literal, and what follows is refused where it stands."""
    src = '''\
@T.prim_func
def main(B: T.Buffer((5,), "int32")):
    B[0] = 0b101
    B[1] = 0O1_7
    B[2] = 0x1_F
    B[3] = 1_000
    B[4] = T.int32(0B11)
'''
    assert [s.value.value for s in from_source(src).body.seq] == [5, 15, 31, 1000, 3]
    assert_error(src.replace("0b101", "0b102"), 3, 16, r"unexpected number '2'")
    zeros = src.replace("0b101", "00").replace("0O1_7", "0_0")
    assert [s.value.value for s in from_source(zeros).body.seq][:2] == [0, 0]
    assert_error(src.replace("0b101", "01"), 3, 13, r"unexpected number '1'")  # (Python refuses 01 too)
    floats = '''\
@T.prim_func
def main(B: T.Buffer((4,), "float32")):
    B[0] = T.float32(1_000.5)
    B[1] = T.float32(1e1_0)
    B[2] = T.float32(.2_5)
    B[3] = T.float32(3.)
'''
    assert [s.value.value for s in from_source(floats).body.seq] == [1000.5, 1e10, 0.25, 3.0]


def test_not_of_an_integer_is_refused_as_tvm_refuses_it():
    """``not A[i]`` of an int32 (TVM: "a_ty.MatchesCode(kDLBool)"); it had compiled to ~A[i],
    true for 0 and for every other value but -1."""
    src = '''\
@T.prim_func
def main(A: T.Buffer((2,), "int32"), B: T.Buffer((2,), "int32")):
    for i in range(2):
        if not A[i]:
            B[i] = 1
'''
    assert_error(src, 4, 12, r"'not' takes a bool, not int32: compare with zero \(x == 0\)")
    from_source(src.replace("not A[i]", "not A[i] == 0"))


def test_match_buffer_on_a_non_parameter_at_function_level():
    src = '''\
@T.prim_func
def main(a: T.handle):
    C = T.alloc_buffer((4,), "float32")
    D = T.match_buffer(C, (4,), "float32")
    T.evaluate(0)
'''
    assert_error(src, 4, 9, r"T\.match_buffer outside a block .*handle parameter")


def test_parameter_without_annotation():
    src = '''\
@T.prim_func
def main(A, b: T.handle):
    T.evaluate(0)
'''
    assert_error(src, 2, 10, r"parameter 'A' needs a type")


# ---------------------------------------------------------------- loops, blocks and scopes
def test_a_loop_step_is_positional_in_range_only():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in T.serial(0, 4, 1):
        A[i] = T.float32(0)
'''
    assert_error(src, 3, 14, r"loop takes an extent, or a start and an end \(and a step: range\(a, b, step\)")


def test_axis_remap_with_mismatched_counts():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("S", [i, j])
            B[vi, vj] = A[vi, vj]
'''
    assert_error(src, 5, 22, r"T\.axis\.remap: 1 kinds, 2 loop variables and 2 names must match")


def test_axis_remap_with_an_unknown_kind_letter():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SX", [i, j])
            B[vi, vj] = A[vi, vj]
'''
    assert_error(src, 5, 22, r"unknown iterator kind 'X'; use 'S' \(spatial\) or 'R' \(reduce\)")


def test_block_iterator_declared_after_the_body_started():
    src = '''\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            B[vi, 0] = A[vi, 0]
            vj = T.axis.spatial(128, j)
'''
    assert_error(src, 7, 18, r"block iterators must be declared at the top of the block")


def test_reads_outside_a_block():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.reads(A[0])
    B[0] = A[0]
'''
    assert_error(src, 3, 5, r"T\.reads is only allowed inside a block")


def test_init_outside_a_block():
    src = '''\
@T.prim_func
def main(B: T.Buffer((4,), "float32")):
    with T.init():
        B[0] = T.float32(0)
'''
    assert_error(src, 3, 10, r"T\.init\(\) is only allowed inside a block")


def test_func_attr_inside_a_loop():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        T.func_attr({"global_symbol": "main"})
        A[i] = T.float32(0)
'''
    assert_error(src, 4, 9, r"T\.func_attr is only allowed at the top level of a function")


def test_func_attr_inside_a_block():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    with T.block("root"):
        T.func_attr({"global_symbol": "main"})
'''
    assert_error(src, 4, 9, r"T\.func_attr is only allowed at the top level of a function")


# ---------------------------------------------------------------- functions and modules
def test_unknown_decorator():
    src = '''\
@T.prim_fun
def main(A: T.Buffer((4,), "float32")):
    T.evaluate(0)
'''
    err = assert_error(src, 1, 2, r"unknown decorator '@T\.prim_fun'")
    assert "did you mean 'T.prim_func'?" in err.message


def test_function_without_decorator():
    src = '''\
def main(A: T.Buffer((4,), "float32")):
    T.evaluate(0)
'''
    assert_error(src, 1, 5, r"function 'main' needs a decorator such as @T\.prim_func")


_RELAX_HEAD = """\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
"""


def test_relax_dataflow_variable_escaping_its_block():
    src = _RELAX_HEAD + """\
        with R.dataflow():
            y = R.add(x, x)
            z = R.multiply(y, x)
            R.output(z)
        return y
"""
    assert_error(src, 9, 16, r"'y' is a dataflow variable: it is only visible inside its dataflow block")


def test_relax_struct_info_mismatch_in_an_annotation():
    src = _RELAX_HEAD + """\
        y: R.Tensor((5,), "float32") = R.add(x, x)
        return y
"""
    assert_error(src, 5, 12, r"'y' is annotated with a dimension 5 where its value has 4")


def test_relax_match_cast_of_the_wrong_rank():
    src = _RELAX_HEAD + """\
        y = R.match_cast(x, R.Tensor((2, 2), "float32"))
        return x
"""
    assert_error(src, 5, 13, r"R\.match_cast: a 1-d tensor cannot match 2 dimensions")


def test_relax_call_to_a_missing_function():
    src = _RELAX_HEAD + """\
        cls = Module
        y = R.call_tir(cls.mian, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y
"""
    assert_error(src, 6, 24, r"the module has no function 'mian'; did you mean 'main'\?")


def test_relax_operator_shape_error_names_the_op():
    src = _RELAX_HEAD + """\
        y = R.add(x, R.const([1.0, 2.0], "float32"))
        return y
"""
    assert_error(src, 5, 13, r"R\.add: shapes \(4,\) and \(2,\) do not broadcast")


def test_relax_quoted_size_that_is_not_an_expression():
    src = """\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", 2), "float32")) -> R.Tensor(("m +",), "float32"):
        return R.reshape(x, R.shape([-1]))
"""
    assert_error(src, 4, 51, r"a quoted dimension is a symbolic size or an expression of sizes, got "
                             r"'m \+': .*expected an expression after '\+'")


def test_relax_if_inside_a_dataflow_block():
    src = _RELAX_HEAD + """\
        with R.dataflow():
            if x:
                y = x
            else:
                y = x
            R.output(y)
        return y
"""
    assert_error(src, 6, 16, r"an if is not allowed inside a dataflow block")


def test_two_functions_with_the_same_name():
    src = '''\
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        T.evaluate(0)

    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        T.evaluate(1)
'''
    assert_error(src, 8, 9, r"function 'f' is defined twice in this module")


def test_class_without_ir_module_decorator():
    src = '''\
class Module:
    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        T.evaluate(0)
'''
    assert_error(src, 1, 7, r"class 'Module' needs the @I\.ir_module decorator")


def test_decorator_not_followed_by_a_definition():
    src = '''\
@I.ir_module
class Module:
    @T.prim_func
x = 1
'''
    assert_error(src, 4, 1, r"a decorator must be followed by a 'def' or a 'class'")


def test_empty_file():
    assert_error("", 1, 1, r"no @I\.ir_module class or @T\.prim_func function found")


def test_file_with_only_comments():
    src = "# from tvm.script import tir as T\n# nothing here\n"
    assert_error(src, 1, 1, r"no @I\.ir_module class or @T\.prim_func function found")


def test_empty_file_and_comment_only_file_are_script_errors():
    # The part of the two cases above that holds today: a ScriptError naming the file.
    for src in ("", "\n\n", "# only a comment\n", "# a\n\n# b"):
        err = parse_error(src)
        assert "no @I.ir_module class or @T.prim_func function found" in err.message
        assert NAME in str(err)


# ---------------------------------------------------------------- layout: indentation and tabs
def test_dedent_to_a_column_that_matches_no_block():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    for i in range(4):
        A[i, 0] = T.float32(0)
      A[0, 0] = T.float32(1)
'''
    assert_error(src, 5, 7, r"inconsistent indentation: this line is indented by 6 columns, "
                 r"which matches no enclosing block")


def test_unexpected_indent():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = T.float32(0)
        A[1] = T.float32(1)
'''
    assert_error(src, 4, 9, r"unexpected indentation")


def test_unexpected_indent_after_a_comment_and_blank_lines():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = T.float32(0)  # a comment

    # another one
      A[1] = T.float32(1)
'''
    assert_error(src, 6, 7, r"unexpected indentation")


def test_tab_indent_against_space_indent():
    # A tab is 8 columns: the tab line sits deeper than the loop body's 8 spaces would
    # with a 1-column tab, so the reading depends on the tab width.
    src = ('@T.prim_func\n'
           'def main(A: T.Buffer((4, 4), "float32")):\n'
           '    for i in range(4):\n'
           '\tA[i, 0] = T.float32(0)\n')
    assert_error(src, 4, 2, r"inconsistent use of tabs and spaces in indentation")


def test_spaces_dedent_into_a_tab_indented_block():
    src = ('@T.prim_func\n'
           'def main(A: T.Buffer((4, 4), "float32")):\n'
           '\tfor i in range(4):\n'
           '\t\tA[i, 0] = T.float32(0)\n'
           '        A[0, 0] = T.float32(1)\n')
    assert_error(src, 5, 9, r"inconsistent use of tabs and spaces in indentation")


def test_consistent_tabs_are_fine():
    src = ('@T.prim_func\n'
           'def main(A: T.Buffer((4, 4), "float32")):\n'
           '\tfor i in range(4):\n'
           '\t\tA[i, 0] = T.float32(0)\n'
           '\tA[0, 0] = T.float32(1)\n')
    from_source(src, NAME)


# ---------------------------------------------------------------- syntax errors
def test_unterminated_string():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "main})
'''
    assert_error(src, 3, 35, r"unterminated string")


def test_unterminated_triple_quoted_string():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    """the docstring
    T.evaluate(0)
'''
    assert_error(src, 3, 5, r'unterminated string: the """ string starting here is never closed')


def test_missing_colon_after_for():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4)
        A[i] = T.float32(0)
'''
    assert_error(src, 3, 22, r"^expected ':' at the end of this line$")


def test_missing_colon_before_a_comment():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    with T.block("root")   # the root block
        A[0] = T.float32(0)
'''
    assert_error(src, 3, 25, r"^expected ':' at the end of this line$")


def test_unclosed_bracket():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    for i in range(4):
        A[i, 0] = T.max(A[i, 1], T.float32(0)
        A[i, 1] = T.float32(1)
'''
    assert_error(src, 4, 24, r"^'\(' was never closed; expected '\)'$")


def test_unclosed_bracket_at_the_end_of_the_file():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    A[0, 0] = T.max(A[0, 1], [T.float32(0)'''
    assert_error(src, 3, 30, r"^'\[' was never closed; expected '\]'$")


def test_closing_bracket_that_does_not_match():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    A[0, 0] = T.max(A[0, 1], T.float32(0)]
'''
    assert_error(src, 3, 42, r"closing bracket '\]' does not match '\(' on line 3; expected '\)'")


def test_closing_bracket_without_an_opening_one():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    A[0, 0] = T.float32(0))
'''
    assert_error(src, 3, 27, r"unmatched '\)'")


def test_unexpected_end_of_file_after_a_block_header():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):'''
    assert_error(src, 3, 23, r"unexpected end of text; expected an indented block")


def test_unexpected_end_of_file_in_an_expression():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = A[1] +'''
    assert_error(src, 3, 18, r"unexpected end of line; expected an expression after '\+'")


def test_syntax_error_in_the_middle_of_an_expression():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[i] + * A[i]
'''
    assert_error(src, 4, 23, r"^unexpected '\*'; expected an expression after '\+'$")


def test_two_names_in_a_row_say_what_could_come_between():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[i] A[i]
'''
    err = assert_error(src, 4, 21, r"^unexpected name 'A'; expected an operator, .*the end of the line$")
    # plain words, never Lark's terminal names
    assert not re.search(r"\b[A-Z_]{4,}\b|__ANON", err.message)


def test_unexpected_character():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    A[0] = $A[1]
'''
    assert_error(src, 3, 12, r"unexpected character '\$'")


@pytest.mark.parametrize("literal, match", [
    ('b"float32"', r"bytes literals"),
    ('f"float32"', r"f-strings are not TVMScript"),
    ('"float\\N32"', r"invalid string literal"),
    ('"float\\s32"', r"invalid string literal: invalid escape sequence '\\s'"),
])
def test_string_literals_python_has_but_tvmscript_does_not(literal, match):
    src = ('@T.prim_func\n'
           f'def main(A: T.Buffer((4,), {literal})):\n'
           '    T.evaluate(0)\n')
    assert_error(src, 2, 28, match)


def test_no_terminal_names_in_syntax_errors():
    # Lark's names for tokens (NAME, DEC_NUMBER, __ANON_0, _NL ...) never reach the user.
    for src in ["x = (1 2)\n", "def f(:\n  pass\n", "x.1\n", "x = {1: }\n", "x[1:2:3:4]\n",
                "for in range(3):\n  pass\n", "x = 1 if 2\n", "@T.prim_func\n", "import\n",
                "def f(a, b c):\n  pass\n", "with T.block('b') as :\n  pass\n"]:
        err = parse_error(src)
        assert not re.search(r"\b[A-Z_]{3,}\b|__ANON|\$END", err.message), err.message
        assert err.span is not None


# ---------------------------------------------------------------- internal errors that leak
# Each of these inputs lets a non-ScriptError escape from code outside the parser layer;
# strict xfails, so that the fix turns them into failures to remove the mark.
_FUNC = '@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
_LEAKS = [
    ("shape_index_out_of_range", _FUNC + "    A[0] = A.shape[5]\n", "IndexError in tensorir.evaluator.ev_Subscript"),
    ("tuple_index_not_int", _FUNC + '    A[0] = (1, 2)["a"]\n', "TypeError in tensorir.evaluator.ev_Subscript"),
    ("true_division_by_zero", _FUNC + "    A[0] = 1 / 0\n", "ZeroDivisionError from arith.truediv"),
    ("unhashable_dict_key", _FUNC + "    T.func_attr({[1]: 1})\n", "TypeError in tensorir.evaluator.ev_DictExpr"),
    ("evaluate_without_args", _FUNC + "    T.evaluate()\n", "IndexError in tensorir.statements._evaluate"),
    ("where_without_args", _FUNC + '    with T.block("b"):\n        T.where()\n',
     "IndexError in tensorir.blocks._where"),
    ("allocate_without_args", _FUNC + "    B = T.allocate()\n", "TypeError in tensorir.buffers._allocate"),
    ("alloc_buffer_bad_align", _FUNC + '    B = T.alloc_buffer((4,), "float32", align="x")\n',
     "ValueError in tensorir.buffers.buffer_decl (int(align))"),
    ("alloc_buffer_int_strides", _FUNC + '    B = T.alloc_buffer((4,), "float32", strides=5)\n',
     "TypeError in tensorir.buffers.buffer_decl (strides not iterable)"),
    ("comm_reducer_identity_not_a_list", _FUNC + "    A[0] = T.comm_reducer(lambda x, y: x + y, 1)\n",
     "AttributeError in tensorir.evaluator.comm_reducer (.elts of a Constant)"),
]


@pytest.mark.parametrize("src", [pytest.param(src, id=name) for name, src, why in _LEAKS])
def test_internal_exceptions_do_not_escape(src):
    parse_error(src)


def test_empty_dict_as_a_value_has_a_position():
    src = _FUNC + "    A[0] = {}\n"
    assert_error(src, 3, 12, r"expected an expression, got a dict")


# ---------------------------------------------------------------- robustness under mutation
_VALID = '''\
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, k in T.grid(8, 8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk] * T.float32(2)
'''

_INSERTS = list("()[]{}:,.=+-*/\"'#@\\ \t\n0123456789TSRxi_") + [
    "T.", "for ", "with ", "    ", "\n    ", "range(", "lambda ", " if ", " else ", "not ", "**"]

_MUTATION = st.tuples(
    st.sampled_from(["delete", "insert", "duplicate", "delete_line", "duplicate_line", "swap_lines"]),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=10_000),
    st.sampled_from(_INSERTS),
)


def _mutate(text: str, mutations: list) -> str:
    for op, a, b, piece in mutations:
        if op in ("delete", "insert", "duplicate"):
            i = a % (len(text) + 1)
            if op == "delete":
                text = text[:i] + text[i + 1 + b % 3:]
            elif op == "insert":
                text = text[:i] + piece + text[i:]
            else:
                j = min(len(text), i + 1 + b % 12)
                text = text[:j] + text[i:j] + text[j:]
        else:
            lines = text.split("\n")
            i, j = a % len(lines), b % len(lines)
            if op == "delete_line":
                del lines[i]
            elif op == "duplicate_line":
                lines.insert(i, lines[j])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


def test_the_unmutated_module_parses():
    from_source(_VALID, NAME)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_MUTATION, min_size=1, max_size=4))
def test_mutated_module_parses_or_raises_a_script_error(mutations):
    text = _mutate(_VALID, mutations)
    try:
        from_source(text, NAME)
    except ScriptError as err:
        # a position, when there is one, lies inside the text and renders
        rendered = str(err)
        if err.span is not None:
            assert 1 <= err.span.line <= text.count("\n") + 1
            assert err.span.col >= 1
            assert rendered.startswith(f"{NAME}:{err.span.line}:{err.span.col}: error: ")


def test_a_tensorir_buffer_in_a_relax_signature_is_refused():
    # the Relax builder reads TensorIR expressions only; T.Buffer declares a TensorIR buffer
    src = ('@I.ir_module\nclass Module:\n    @R.function\n'
           '    def main(x: T.Buffer((4,), "float32")):\n        return x\n')
    assert_error(src, 4, 17, r"T\.Buffer\(\.\.\.\) declares a TensorIR buffer; a Relax function takes tensors")


@pytest.mark.parametrize("src, line, col, message", [
    # (review) tvms read these; TVM 0.27 refuses them ("Variable m already defined in current scope")
    ('@I.ir_module\nclass Module:\n    @R.function\n'
     '    def main(m: R.Tensor((2,), "float32"), y: R.Tensor(("m",), "float32")):\n        return y\n',
     4, 14, "'m' is defined twice: as a parameter and as a symbolic size of the signature"),
    ('@I.ir_module\nclass Module:\n    @R.function\n'
     '    def main(y: R.Tensor(("m",), "float32"), m: R.Prim("int64")):\n        return y\n',
     4, 46, "'m' is defined twice"),
    # ... and "n is already bound to a non-PrimVar value"
    ('@T.prim_func\ndef main(A: T.Buffer(("n",), "float32"), n: T.Buffer((2,), "float32")):\n    T.evaluate(0)\n',
     2, 42, "n is already bound to a non-PrimVar value"),
    ('@T.prim_func\ndef main(A: T.Buffer(("n",), "float32"), n: T.handle):\n    T.evaluate(0)\n',
     2, 42, "n is already bound to a non-PrimVar value"),
])
def test_a_parameter_named_like_a_size_of_the_signature_is_refused(src, line, col, message):
    assert_error(src, line, col, re.escape(message))


def test_a_hint_holding_what_no_attribute_holds_is_located() -> None:
    src = ('@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
           '    with T.hint(x=T.hint):\n        A[0] = T.float32(1.0)\n')
    assert_error(src, 3, 19, r"T\.hint is not a value an attribute can hold")


def test_a_negative_slice_length_and_a_bad_offset_factor_are_located() -> None:
    err = parse_error('@T.prim_func\ndef g(A: T.Buffer((16,), "int32")):\n    A[0:8:-1] = T.Broadcast(1, 8)\n')
    assert "a vector slice needs a positive length and a positive step" in str(err) and "bad.tvms:3:" in str(err)
    err = parse_error('@T.prim_func\ndef g(a: T.handle):\n'
                      '    A = T.match_buffer(a, (16,), "int32", offset_factor="x")\n    A[0] = 1\n')
    assert "offset_factor is a non-negative integer, got 'x'" in str(err) and "bad.tvms:3:" in str(err)


def test_a_compound_prim_value_in_a_signature_prints_quoted_and_reads_back() -> None:
    src = ('@R.function\ndef f(x: R.Prim(value="n"), y: R.Prim(value="m")):\n'
           '    z = x + y\n    return z\n')
    text = from_source(src).script()
    assert 'R.Prim(value="n + m")' in text
    assert from_source(text).script() == text



@pytest.mark.parametrize("dtype, literal, bounds", [
    ("float16", "T.float16(70000.0)", "-65504.0 to 65504.0"),
    ("float16", "T.float32(-70000.0)", "-65504.0 to 65504.0"),
    ("float16", "70000", "-65504.0 to 65504.0"),
    ("float32", "T.float32(1e39)", "-3.4028234663852886e+38 to 3.4028234663852886e+38"),
    ("bfloat16", "T.bfloat16(3.5e38)", "-3.4028234663852886e+38 to 3.4028234663852886e+38"),
    ("float8_e4m3fn", "T.float8_e4m3fn(500.0)", "-448.0 to 448.0"),
    ("float8_e8m0fnu", "T.float8_e8m0fnu(-1.0)", "0.0 to 3.4028234663852886e+38"),
    ("float4_e2m1fn", "T.float4_e2m1fn(6.5)", "-6.0 to 6.0"),
])
def test_a_float_literal_beyond_the_range_tvm_allows_is_refused(dtype: str, literal: str, bounds: str) -> None:
    """TVM 0.27 refuses these ("Literal value 70000 exceeds maximum of float16"; its parser makes
    a literal float32 first, so bfloat16's: "... exceeds maximum of float32"); they had become
    infinities."""
    src = f'@T.prim_func\ndef main(B: T.Buffer((4,), "{dtype}")):\n    B[0] = {literal}\n'
    err = parse_error(src)
    assert "bad.tvms:3:12: error:" in str(err) and f"range of {dtype} literals ({bounds})" in str(err)


@pytest.mark.parametrize("dtype, literal", [("float16", "T.float16(65504.0)"), ("float16", "-65504"),
                                            ("float16", 'T.float16("-inf")'), ("bfloat16", "T.bfloat16(3.3e38)"),
                                            ("float8_e4m3fn", "T.float8_e4m3fn(-448.0)")])
def test_a_float_literal_within_the_range_tvm_allows_reads(dtype: str, literal: str) -> None:
    from_source(f'@T.prim_func\ndef main(B: T.Buffer((4,), "{dtype}")):\n    B[0] = {literal}\n')

@pytest.mark.parametrize("base, stride, which", [("T.Ramp(0, 1, 4)", "1", "base"), ("0", "T.Broadcast(1, 4)", "stride")])
def test_a_vector_base_or_stride_of_a_ramp_is_refused(base, stride, which) -> None:
    src = f'@T.prim_func\ndef g(A: T.Buffer((16,), "int32")):\n    A[T.Ramp({base}, {stride}, 4)] = T.Broadcast(1, 4)\n'
    err = parse_error(src)
    assert f"the {which} of T.Ramp is a scalar, got int32x4" in str(err) and "bad.tvms:3:" in str(err)


@pytest.mark.parametrize("statement, col, message", [
    ("B[i] = T.Select(A[i] > 0, A[i], 3)", 16, "the values of T.Select have one type, got int8 and int32"),
    ("B[i] = T.Add(A[i], 3)", 16, "the operands of T.Add have one type, got int8 and int32"),
    ("B[i] = T.Cast(\"int8\", A[i] == 300)", 31, "300 is out of the range of int8"),
    ("B[i] = A[i] & 300", 16, "300 is out of the range of int8"),
    ("G[i] = G[i] + (-1)", 16, "-1 is out of the range of uint32"),
    ("B[i] = T.Cast(\"int8\", 300 < A[i])", 31, "300 is out of the range of int8"),
    ("B[i] = T.Cast(\"int8\", 1.5 < A[i])", 31, "1.5 is not a value of int8"),
    ("B[i] = T.Cast(\"int8\", A[i] == 1.5)", 31, "1.5 is not a value of int8"),
])
def test_operands_of_two_types_where_tvm_refuses_them(statement: str, col: int, message: str):
    """TVM 0.27's ``==``, bitwise operators and orderings with the number on the left give a Python
    number the other operand's type (so 300 does not fit an int8, nor 1.5); its node constructors
    and T.Select match no types; a negative number meeting a uint32 cannot take its type."""
    src = ('@T.prim_func\ndef main(A: T.Buffer((8,), "int8"), B: T.Buffer((8,), "int8"), '
           f'G: T.Buffer((8,), "uint32")):\n    for i in range(8):\n        {statement}\n')
    assert_error(src, 4, col, re.escape(message))


def test_an_unknown_dotted_builtin_is_named_unknown():
    """Not "cannot be used in an expression" (what an unknown ``T.ptx.*`` statement said); the
    errors of the PTX dialect's calls are tests/test_ptx_dialect.py's."""
    src = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    T.ptx.lld(A[0], T.address_of(A[1]), "b32")\n'
    assert_error(src, 3, 5, re.escape("unknown builtin 'T.ptx.lld'; did you mean 'T.ptx.ld'?"))
    assert_error(src.replace("T.ptx.lld(A[0], T.address_of(A[1]), \"b32\")", "A[0] = T.evaluate(0)"), 3, 12,
                 re.escape("T.evaluate(...) cannot be used in an expression"))


@pytest.mark.parametrize("call, col, message", [
    ("T.cuda.cta_sync(1)", 5, "T.cuda.cta_sync takes 0 arguments, got 1"),
    ("T.cuda.make_float2(A[0])", 5, "T.cuda.make_float2 takes 2 arguments, got 1"),
    ("T.cuda.iket.mark(i)", 5, "T.cuda.iket.mark's argument 1 must be a string literal, got"),
    ("T.cuda.mov_sreg(32, 5)", 5, "T.cuda.mov_sreg's argument 2 must be a string literal, got"),
    ("T.cuda.mov_sreg(16, \"laneid\")", 5, "T.cuda.mov_sreg reads a 32- or 64-bit register, not 16"),
    ("T.cuda.cta_sum(A[i], 2)", 5, "T.cuda.cta_sum takes (value, num_warps, scratch), without scratch"),
    ("T.cuda.warp_sum(A[i], depth=2)", 5, "T.cuda.warp_sum takes (value, width)"),
])
def test_a_cuda_intrinsic_with_wrong_arguments(call: str, col: int, message: str):
    """TVM 0.27's T.cuda.* intrinsics check their arguments' number, strings and register width
    (and its reductions by name, their arguments)."""
    src = f'@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    for i in range(4):\n        {call}\n'
    assert_error(src, 4, col + 4, re.escape(message))


@pytest.mark.parametrize("text, col", [
    ('@R.function\ndef main():\n    x: R.Prim("float32") = {big}\n    return x\n', 28),
    ('@R.function\ndef main() -> R.Prim("float32"):\n    return {big}\n', 12),
    ('@R.function\ndef main():\n    return 99999999999999999999\n', 12),
    ('@T.prim_func\ndef f(A: T.Buffer((1,), "float32")):\n    A[0] = {big}\n', 12),
    ('@T.prim_func\ndef f(A: T.Buffer((1,), "float32")):\n    A[0] = T.float32({big})\n', 12),
])
def test_an_integer_beyond_every_float_or_int64_is_refused_where_it_stands(text: str, col: int) -> None:
    """TVM 0.27 refuses them ("Literal value ... exceeds range of int64"); tvms had raised
    Python's OverflowError ("int too large to convert to float") or kept a Relax value
    beyond int64."""
    err = parse_error(text.replace("{big}", "9" * 330))
    assert str(err).startswith(f"bad.tvms:3:{col}: error: 9999") and "is out of the range of" in str(err)
