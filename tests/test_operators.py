"""The one operator table (tvms.ir.operators) decides how ``a op b op c`` is read, where the
printer puts parentheses (both follow each operator's precedence and associativity) and which
Relax operator a symbol calls on Relax values."""
from __future__ import annotations

import itertools
import re

import pytest

from tvms.ir.expr import EQ, LT, And, Or, Var
from tvms.script import from_source
from tvms.ir.operators import BINARY, BY_SYMBOL

_HEAD = ('@T.prim_func\ndef main(A: T.Buffer((1,), "int32"), B: T.Buffer((1,), "bool"), '
         'a: T.int32, b: T.int32, c: T.int32):\n')
# the operators with a TensorIR node over integers
_ARITH = [op for op in BINARY if op.symbol in ("+", "-", "*", "//", "%")]


def _read(expr: str, buffer: str = "A"):
    """The value of ``<buffer>[0] = <expr>`` read back, and the function."""
    func = from_source(_HEAD + f"    {buffer}[0] = {expr}\n")
    return func.body.value, func


def _printed(func) -> str:
    lines = [line.strip() for line in func.script().splitlines() if "[0] = " in line]
    assert len(lines) == 1, lines
    return lines[0].split(" = ", 1)[1]


def _shape(e) -> str:
    """An expression as a nesting of node class names over variable names."""
    if isinstance(e, Var):
        return e.name
    return f"{type(e).__name__}({_shape(e.a)}, {_shape(e.b)})"


@pytest.mark.parametrize("outer, inner", [(x.symbol, y.symbol) for x, y in itertools.product(_ARITH, _ARITH)])
def test_flat_operators_group_by_the_table(outer, inner):
    # `a outer b inner c`: the tighter operator takes b; on equal precedence, the left one does
    x, y = BY_SYMBOL[outer], BY_SYMBOL[inner]
    value, _ = _read(f"a {outer} b {inner} c")
    if y.precedence > x.precedence:
        expected = f"{x.node.__name__}(a, {y.node.__name__}(b, c))"
    else:
        expected = f"{y.node.__name__}({x.node.__name__}(a, b), c)"
    assert _shape(value) == expected


@pytest.mark.parametrize("outer, inner", [(x.symbol, y.symbol) for x, y in itertools.product(_ARITH, _ARITH)])
def test_parentheses_are_printed_where_the_table_needs_them(outer, inner):
    x, y = BY_SYMBOL[outer], BY_SYMBOL[inner]
    # a nested left operand needs them when it binds more loosely, a right one also on a tie
    left, func = _read(f"(a {inner} b) {outer} c")
    assert _shape(left) == f"{x.node.__name__}({y.node.__name__}(a, b), c)"
    wrap = y.precedence < x.precedence
    assert _printed(func) == (f"(a {inner} b) {outer} c" if wrap else f"a {inner} b {outer} c")
    right, func = _read(f"a {outer} (b {inner} c)")
    assert _shape(right) == f"{x.node.__name__}(a, {y.node.__name__}(b, c))"
    wrap = y.precedence <= x.precedence
    assert _printed(func) == (f"a {outer} (b {inner} c)" if wrap else f"a {outer} b {inner} c")


def test_comparisons_bind_tighter_than_and_which_binds_tighter_than_or():
    value, func = _read("a < b and b < c or c == a", buffer="B")
    assert isinstance(value, Or) and isinstance(value.a, And) and isinstance(value.b, EQ)
    assert isinstance(value.a.a, LT) and isinstance(value.a.b, LT)
    assert _printed(func) == "a < b and b < c or c == a"
    value, func = _read("a < b and (b < c or c == a)", buffer="B")
    assert isinstance(value, And) and isinstance(value.b, Or)
    assert _printed(func) == "a < b and (b < c or c == a)"


def test_operators_without_a_tensorir_meaning_are_refused():
    from tvms import ScriptError

    # (the bitwise operators and shifts build intrinsic calls: tests/test_tir_bitwise.py)
    for symbol in ("**", "@"):
        message = f"the operator {symbol!r} is not supported in TensorIR"
        with pytest.raises(ScriptError, match=re.escape(message)):
            _read(f"a {symbol} b")


_RELAX_HEAD = '@R.function\ndef main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):\n'


@pytest.mark.parametrize("symbol, name", [("+", "add"), ("-", "subtract"), ("*", "multiply"),
                                          ("/", "divide"), ("//", "floor_divide"), ("**", "power"),
                                          ("<", "less"), ("<=", "less_equal"), (">", "greater"),
                                          (">=", "greater_equal")])
def test_an_operator_on_relax_values_calls_its_relax_operator(symbol, name):
    func = from_source(_RELAX_HEAD + f"    z = x {symbol} y\n    return z\n")
    assert func.body.blocks[0].bindings[0].value.op.name == f"relax.{name}"


def test_operators_without_a_relax_operator_are_refused_on_relax_values():
    from tvms import ScriptError

    for symbol in ("%", "==", "&"):
        message = f"the operator {symbol!r} is not defined on Relax values"
        with pytest.raises(ScriptError, match=re.escape(message)):
            from_source(_RELAX_HEAD + f"    z = x {symbol} y\n    return z\n")
    func = from_source(_RELAX_HEAD + "    z = -x\n    return z\n")
    assert func.body.blocks[0].bindings[0].value.op.name == "relax.negative"
