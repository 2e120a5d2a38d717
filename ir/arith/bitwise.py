"""Bitwise operators and shifts (``a & b``, ``a | b``, ``a ^ b``, ``~a``, ``a << b``, ``a >> b``)
built as TVM's operators build them: calls of the TIR intrinsics ``tir.bitwise_and``...
``tir.shift_right`` (TensorIR has no node for them), on integer operands (``&``, ``|``, ``^``,
``~`` also on booleans), with two index-typed constants folded and a shift by 0 dropped.
TVM prints the result as the call, ``T.bitwise_and(a, b)``.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from ..errors import TVMSError
from ..expr import Call, IntImm, PrimExpr, const, wrap_int
from ..op import get_op
from .operators import _is_number, match_types

# symbol -> (TIR intrinsic, how two integers fold, whether booleans are accepted)
_BINARY: dict[str, tuple[str, Callable[[int, int], int], bool]] = {
    "&": ("tir.bitwise_and", operator.and_, True),
    "|": ("tir.bitwise_or", operator.or_, True),
    "^": ("tir.bitwise_xor", operator.xor, True),
    "<<": ("tir.shift_left", operator.lshift, False),
    ">>": ("tir.shift_right", operator.rshift, False),
}
# symbol -> the TIR intrinsic it builds (the parser's T.bitwise_* names and the printer read it)
INTRINSICS: dict[str, str] = {**{symbol: entry[0] for symbol, entry in _BINARY.items()}, "~": "tir.bitwise_not"}


def _is_index_constant(e: PrimExpr) -> bool:
    """TVM folds only constants of an index type (int32, int64 scalars)."""
    return isinstance(e, IntImm) and e.dtype.name in ("int32", "int64")


def _check_operand(e: PrimExpr, symbol: str, allow_bool: bool) -> None:
    dt = e.dtype
    if not (dt.is_bool and allow_bool or dt.is_integer and not dt.is_bool):
        kinds = "integer or boolean" if allow_bool else "integer"
        raise TVMSError(f"the operator {symbol!r} needs {kinds} operands, got {dt}")


def bitwise_binary(symbol: str, a: Any, b: Any) -> Any:
    """``a <symbol> b`` for one of ``& | ^ << >>``: a call of the TIR intrinsic, folded as TVM
    folds it; two Python integers give a Python integer."""
    name, fold, allow_bool = _BINARY[symbol]
    if _is_number(a) and _is_number(b) and not isinstance(a, PrimExpr):
        if isinstance(a, float) or isinstance(b, float):
            raise TVMSError(f"the operator {symbol!r} needs integer operands, got {a!r} and {b!r}")
        return fold(a, b)
    for e in (a, b):
        if isinstance(e, float):
            kinds = "integer or boolean" if allow_bool else "integer"
            raise TVMSError(f"the operator {symbol!r} needs {kinds} operands, got {e!r}")
    a, b = match_types(a, b, adopt=True)
    for e in (a, b):
        _check_operand(e, symbol, allow_bool)
    if symbol in ("<<", ">>") and _is_index_constant(a) and _is_index_constant(b):
        if not 0 <= b.value < a.dtype.bits:
            raise TVMSError(f"shift amount {b.value} is outside [0, {a.dtype.bits}) for {a.dtype}")
    if _is_index_constant(a) and _is_index_constant(b):
        return const(wrap_int(fold(a.value, b.value), a.dtype), a.dtype)
    if symbol in ("<<", ">>") and _is_index_constant(b) and b.value == 0:
        return a
    return Call(a.dtype, get_op(name), (a, b))


def bitwise_not(a: Any) -> Any:
    """``~a``: a call of ``tir.bitwise_not`` (TVM folds no constant here); ``~`` of a Python
    integer is the Python integer."""
    if isinstance(a, int) and not isinstance(a, bool):
        return ~a
    if not isinstance(a, PrimExpr):
        raise TVMSError(f"the operator '~' needs an integer or boolean operand, got {a!r}")
    _check_operand(a, "~", True)
    return Call(a.dtype, get_op("tir.bitwise_not"), (a,))


def bitwise_builder(symbol: str) -> Callable[[Any, Any], Any]:
    """The builder of one symbol, for the operator table."""
    return lambda a, b: bitwise_binary(symbol, a, b)
