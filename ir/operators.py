"""The one table of TVMScript's operators: symbol, IR node class, precedence and associativity,
and the Relax operator it means on Relax values.

It serves the places that need to know an operator: the syntax builder (``a + b * c`` gets its
tree from the binding powers), the TensorIR evaluator (which node a symbol builds, with arith's
folding), the TensorIR printer (where parentheses go) and the Relax builder (``x * y`` is
``R.multiply(x, y)``, as in TVM's parser).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from . import arith
from .expr import EQ, GE, GT, LE, LT, NE, Add, And, Div, FloorDiv, FloorMod, Mul, Or, Sub

# Precedence levels, as Python's grammar orders them (higher binds tighter).
LAMBDA, OR, AND, NOT, CMP, BIT_OR, BIT_XOR, BIT_AND, SHIFT, ADD, MUL, UNARY, POW = range(13)
ATOM = 100  # a name, a literal, a call, a subscript: never parenthesised


@dataclass(frozen=True)
class Operator:
    """A binary operator of the script. ``node``: the TensorIR node it builds (None where
    TensorIR has none); ``build``: how the evaluator builds it from two operands (by default
    ``arith.binary`` of the node); ``relax``:
    the Relax operator it calls on Relax values (None where there is none)."""

    symbol: str
    node: type | None
    precedence: int
    right_assoc: bool = False
    build: Callable[[Any, Any], Any] | None = None
    relax: str | None = None

    def __post_init__(self) -> None:
        if self.build is None and self.node is not None:  # arith.binary folds as TVM does
            object.__setattr__(self, "build", partial(arith.binary, self.node))

    @property
    def binding_powers(self) -> tuple[int, int]:
        """(left, right) binding powers for precedence climbing: a left-associative operator
        binds its right operand tighter than its left one, a right-associative one the reverse."""
        p = self.precedence
        return (2 * p, 2 * p - 1) if self.right_assoc else (2 * p - 1, 2 * p)


def _op(symbol: str, node: type | None, precedence: int, **kw: Any) -> Operator:
    return Operator(symbol, node, precedence, **kw)


BINARY: tuple[Operator, ...] = (
    _op("or", Or, OR), _op("and", And, AND),
    _op("<", LT, CMP, relax="less"), _op(">", GT, CMP, relax="greater"), _op("==", EQ, CMP),
    _op(">=", GE, CMP, relax="greater_equal"), _op("<=", LE, CMP, relax="less_equal"),
    _op("!=", NE, CMP),
    # bitwise operators and shifts are calls of TIR intrinsics (tir.bitwise_and ...), no node
    *(_op(s, None, p, build=arith.bitwise_builder(s))
      for s, p in (("|", BIT_OR), ("^", BIT_XOR), ("&", BIT_AND), ("<<", SHIFT), (">>", SHIFT))),
    _op("+", Add, ADD, relax="add"), _op("-", Sub, ADD, relax="subtract"),
    # "/" is true division: a float Div (integers are refused by arith.truediv)
    _op("*", Mul, MUL, relax="multiply"), _op("/", Div, MUL, build=arith.truediv, relax="divide"),
    _op("//", FloorDiv, MUL, relax="floor_divide"), _op("%", FloorMod, MUL), _op("@", None, MUL),
    _op("**", None, POW, right_assoc=True, relax="power"),
)
BY_SYMBOL: dict[str, Operator] = {op.symbol: op for op in BINARY}
# the printer's view: the node a symbol prints for (Div prints as "/" only for floats)
BY_NODE: dict[type, Operator] = {op.node: op for op in BINARY if op.node is not None}
COMPARISONS = frozenset(op.symbol for op in BINARY if op.precedence == CMP)

# the Relax builder's view: what a symbol calls on Relax values
RELAX_BINARY: dict[str, str] = {op.symbol: op.relax for op in BINARY if op.relax is not None}

# Prefix operators: symbol -> precedence of the operand they take; and on Relax values.
PREFIX: dict[str, int] = {"not": NOT, "-": UNARY, "+": UNARY, "~": UNARY}
RELAX_PREFIX: dict[str, str] = {"-": "negative"}
