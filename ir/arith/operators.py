"""Building expressions the way TVM's Python operators do: Python numbers read as int32 or float32
(or take the other operand's type: in ``==``, ``!=``, the bitwise operators, and an ordering whose
left operand is the number), narrower operands widen, and operations on two constants fold."""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..dtype import DataType, float_literal_refusal
from ..errors import TVMSError
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, Cast, CmpOp, Div, FloatImm, FloorDiv,
                   FloorMod, IntImm, Max, Min, Mod, Mul, Not, Or, PrimExpr, Sub, const, wrap_int)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)


def to_expr(value: Any, like: PrimExpr | None = None) -> PrimExpr:
    """A PrimExpr for ``value``; a Python number takes the type of ``like`` when it fits (one
    that does not keeps its own type, int32 or int64; none wraps around). Operations read their
    numbers with ``match_types`` instead."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return const(value, "bool")
    if isinstance(value, int):
        if like is not None and (like.dtype.is_float or like.dtype.is_integer and like.dtype.holds_int(value)):
            return const(value, like.dtype.element_of)
        if not DataType("int64").holds_int(value):
            raise TVMSError(f"{value} is out of the range of int64")
        return const(value, "int32" if -2**31 <= value < 2**31 else "int64")
    if isinstance(value, float):
        if like is not None and like.dtype.is_float:
            return const(value, like.dtype.element_of)
        return const(value, "float32")
    raise TVMSError(f"expected an expression, got {type(value).__name__} {value!r}")


# The operators whose Python-number operand takes the other operand's type, as in TVM 0.27 (``==``,
# ``!=``; the bitwise ones too; an ordering whose left operand is the number): ``int8_value == 3``
# and ``3 < int8_value`` compare int8s. In the others (arithmetic, min/max, an ordering with the
# number on the right) a Python int is an int32 (int64 beyond) and a float a float32, and the
# narrower operand widens: ``int8_value + 3`` is ``T.Cast("int32", int8_value) + 3``.
ADOPTING = (EQ, NE)
ORDERING = (LT, LE, GT, GE)


def match_types(a: Any, b: Any, adopt: bool = False) -> tuple[PrimExpr, PrimExpr]:
    """The operands of a binary operation, of one type, as TVM 0.27's operators make them: Python
    numbers read as ``ADOPTING`` says (``adopt``), a scalar meeting a vector broadcast, an integer
    meeting a float converted to it, and of two integers or two floats the narrower widened (of
    two of one width, the signed one made unsigned); a constant converted folds."""
    a, b = _operands(a, b, adopt)
    ta, tb = a.dtype, b.dtype
    if ta.lanes != tb.lanes:  # a scalar meets a vector: the scalar is broadcast, as TVM's operators do
        if ta.scalable or tb.scalable or 1 not in (ta.lanes, tb.lanes):
            raise TVMSError(f"cannot combine vectors of {ta} and {tb}")
        a, b = (Broadcast(a, tb.lanes), b) if ta.lanes == 1 else (a, Broadcast(b, ta.lanes))
        ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    if ta.is_float != tb.is_float:
        # an integer meets a float: the integer becomes the float type
        return (convert(tb, a), b) if tb.is_float else (a, convert(ta, b))
    if (ta.is_integer or ta.is_bool) and (tb.is_integer or tb.is_bool) or (ta.is_float and tb.is_float):
        if ta.bits > tb.bits or ta.bits == tb.bits and not tb.is_uint:
            return a, convert(ta, b)
        return convert(tb, a), b
    raise TVMSError(f"type mismatch: {ta} and {tb}")


def _operands(a: Any, b: Any, adopt: bool) -> tuple[PrimExpr, PrimExpr]:
    """``a`` and ``b`` as expressions; a Python number among them reads as ``match_types`` says
    (a bool always takes the other operand's type)."""
    if isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
        return a, b
    if not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        b = to_expr(b)
        return _literal(a, b, adopt), b
    if isinstance(a, PrimExpr):
        return a, _literal(b, a, adopt)
    return _literal(a, b, adopt), b


def _literal(value: Any, other: PrimExpr, adopt: bool) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool) and not other.dtype.is_bool:
        return const(float(value) if other.dtype.is_float else int(value), other.dtype.element_of)
    if not adopt:
        return to_expr(value)
    if isinstance(value, int) and other.dtype.is_integer and not other.dtype.holds_int(value):
        raise TVMSError(f"{value} is out of the range of {other.dtype.element_of}")
    if isinstance(value, float) and not other.dtype.is_float:
        raise TVMSError(f"{value!r} is not a value of {other.dtype.element_of}")
    return to_expr(value, other)


def convert(dtype: DataType, e: PrimExpr) -> PrimExpr:
    """``e`` as ``dtype``, as TVM's cast makes it: a Cast, or for a constant, the constant of that
    type (an integer that does not fit it refused; a number beyond a float type's literals stays
    a Cast, which rounds it to infinity where TVM refuses it)."""
    if isinstance(e, (IntImm, FloatImm)) and dtype.is_float and float_literal_refusal(dtype, float(e.value)):
        return Cast(dtype, e)
    if isinstance(e, IntImm) and e.dtype.lanes == 1 and dtype.lanes == 1:
        if dtype.is_float:
            return const(float(e.value), dtype)
        if not dtype.holds_int(e.value):
            raise TVMSError(f"{e.value} is out of the range of {dtype}")
        return const(e.value, dtype)
    if isinstance(e, FloatImm) and dtype.is_float and dtype.lanes == 1:
        return const(e.value, dtype)
    return Cast(dtype, e)


_FOLD: dict[type, Callable] = {
    Add: operator.add, Sub: operator.sub, Mul: operator.mul,
    FloorDiv: lambda x, y: x // y if y else None, FloorMod: lambda x, y: x % y if y else None,
    Min: min, Max: max, Div: lambda x, y: (x / y if isinstance(x, float) else _truncdiv(x, y)) if y else None,
    Mod: lambda x, y: x - y * _truncdiv(x, y) if y else None,
}


def _truncdiv(x: int, y: int) -> int:
    """Integer division rounding towards zero (C's, TVM's truncdiv)."""
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q
_FOLD_CMP: dict[type, Callable] = {EQ: operator.eq, NE: operator.ne, LT: operator.lt,
                                   LE: operator.le, GT: operator.gt, GE: operator.ge}


def binary(cls: type, a: Any, b: Any) -> Any:
    """``cls(a, b)`` with TVM's conversions; two Python numbers give a Python number."""
    if _is_number(a) and _is_number(b) and not isinstance(a, PrimExpr):
        fold = _FOLD.get(cls) or _FOLD_CMP.get(cls)
        if fold is not None:
            value = fold(a, b)
            if value is None:  # (the divisions fold to None for a divisor of 0)
                raise TVMSError("division by zero")
            return value
    a, b = match_types(a, b, adopt=cls in ADOPTING or cls in ORDERING and _is_number(a) and isinstance(b, PrimExpr))
    if cls in (And, Or) and not (a.dtype.is_bool and b.dtype.is_bool):
        raise TVMSError(f"'and'/'or' need boolean operands, got {a.dtype} and {b.dtype}")
    _check_operands(cls, a, b)
    folded = fold_constants(cls, a, b)
    if folded is None:
        folded = fold_identity(cls, a, b)
    return folded if folded is not None else cls(a, b)


def _check_operands(cls: type, a: PrimExpr, b: PrimExpr) -> None:
    """What TVM's operator functions refuse: floor division and modulo of other than integers,
    and a divisor that is the constant 0 (for a modulo, where TVM folds it)."""
    if cls in (FloorDiv, FloorMod) and not a.dtype.is_integer:
        raise TVMSError(f"{'floor division (//, T.floordiv)' if cls is FloorDiv else 'floor modulo (%, T.floormod)'} "
                        f"takes integers, not {a.dtype} (divide floats with / and T.floor)")
    if _is_value(b, 0) and (cls in (Div, FloorDiv) or cls in (Mod, FloorMod) and _folds_modulo(cls, a, b)):
        raise TVMSError("division by zero")


def index_typed(e: PrimExpr) -> bool:
    """int32 and int64 scalars, the types of shapes and indices, which TVM folds most eagerly (and
    the only ones its simplifiers rearrange: a narrower or unsigned integer wraps)."""
    return e.dtype.is_int and e.dtype.bits in (32, 64) and e.dtype.lanes == 1


def _folds_modulo(cls: type, a: PrimExpr, b: PrimExpr) -> bool:
    """Whether TVM folds a modulo of these operands at all: of index types only (and a floor
    modulo of two unsigned constants); ``T.int8(7) % T.int8(2)`` stays as written."""
    return index_typed(a) or (cls is FloorMod and a.dtype.is_uint and isinstance(a, IntImm)
                               and isinstance(b, IntImm))


def fold_constants(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """TVM's folding of an operation on two constants of one type, or None where it keeps the
    operation: integer modulo only of index types, float arithmetic only in 32 and 64 bits
    (``min``/``max`` and comparisons in any)."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        values = (a.value, b.value)
        if cls in (Mod, FloorMod) and not _folds_modulo(cls, a, b):
            return None
    elif isinstance(a, FloatImm) and isinstance(b, FloatImm):
        values = (a.value, b.value)
        if cls not in _FOLD_CMP and cls not in (Min, Max) and not (cls in (Add, Sub, Mul, Div) and
                                                                   a.dtype.bits in (32, 64)):
            return None
    else:
        return None
    if cls in _FOLD_CMP:
        return const(_FOLD_CMP[cls](*values), "bool")
    single = a.dtype.is_float and a.dtype.bits == 32 and cls not in (Min, Max)
    if single:  # (TVM computes in float: one operation on float32 values, rounded to float32)
        values = tuple(_float32(v) for v in values)
    fold = _FOLD.get(cls)
    value = fold(*values) if fold is not None else None
    if value is None:
        return None
    return const(wrap_int(value, a.dtype) if isinstance(a, IntImm) else _float32(value) if single else value, a.dtype)


def _float32(value: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _is_value(e: Any, value: int) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and not e.dtype.is_bool and e.value == value


def fold_identity(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """What TVM's operators make of an operation with a neutral or absorbing constant: ``x + 0``,
    ``x - 0``, ``x * 1``, ``x // 1`` are ``x``, ``x * 0``, ``0 // x`` and ``x % 1`` are ``0``
    (a modulo only of int32 and int64), ``min(x, x)`` is ``x``; else None.
    (The printer writes such a node that was built directly as ``T.Add(x, 0)``, so that it reads
    back as itself.)"""
    if cls is Add:
        return a if _is_value(b, 0) else b if _is_value(a, 0) else None
    if cls is Sub:
        return a if _is_value(b, 0) else None
    if cls is Mul:
        if _is_value(b, 1) or _is_value(a, 0):
            return a
        return b if _is_value(a, 1) or _is_value(b, 0) else None
    if cls in (Mod, FloorMod) and not index_typed(a):
        return None
    if cls in (FloorDiv, Div, FloorMod, Mod) and _is_value(a, 0):
        return a  # 0 divided by anything
    if cls in (FloorDiv, Div):
        return a if _is_value(b, 1) else None
    if cls in (FloorMod, Mod) and _is_value(b, 1):
        return const(0, a.dtype)
    if cls in (Min, Max) and a is b:
        return a
    return None


def truediv(a: Any, b: Any) -> Any:
    """``a / b``: a float division (TVM's script refuses ``/`` between integers, whose division
    has several meanings)."""
    if _is_number(a) and _is_number(b) and not isinstance(a, PrimExpr):
        return a / b
    a, b = match_types(a, b)
    if not a.dtype.is_float:
        raise TVMSError(f"/ divides floats, not {a.dtype}: for integers, say which division "
                        f"(// or T.floordiv rounds down, T.truncdiv towards zero)")
    return binary(Div, a, b)


def builds_as_written(cls: type, a: PrimExpr, b: PrimExpr) -> bool:
    """Whether the operator of ``cls`` (``binary``; ``truediv`` for a float Div) keeps ``cls(a,
    b)`` as it is: neither folds it nor refuses it. The printer writes the others as the node
    (``T.Add(x, 0)``, ``T.FloorDiv(x, 0)``), which reads back as itself."""
    try:
        _check_operands(cls, a, b)
    except TVMSError:
        return False
    return fold_constants(cls, a, b) is None and fold_identity(cls, a, b) is None


def negate(a: Any) -> Any:
    if isinstance(a, (IntImm, FloatImm)) and not a.dtype.is_bool:
        return const(wrap_int(-a.value, a.dtype) if isinstance(a, IntImm) else -a.value, a.dtype)
    if isinstance(a, PrimExpr):
        return Mul(a, const(-1, a.dtype))  # as TVM's PrimExpr.__neg__
    return -a


def logical_not(a: Any) -> Any:
    if isinstance(a, PrimExpr):
        return Not(a)  # not folded, even for a constant: the text keeps the Not
    return not a


def cast(dtype: "str | DataType", value: Any) -> PrimExpr:
    dt = DataType(dtype)
    value = to_expr(value)
    if value.dtype == dt:
        return value
    return Cast(dt, value)


__all__ = ["binary", "builds_as_written", "fold_constants", "truediv", "negate", "logical_not", "cast",
           "to_expr", "match_types", "convert", "CmpOp", "Mod"]
