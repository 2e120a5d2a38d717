"""``T.q_multiply_shift`` / ``T.q_multiply_shift_per_axis`` as integer arithmetic: TVM's
legalization of the fixed-point multiplication of quantized kernels (src/target/intrin_rule.cc),
so that a code generator sees only shifts, multiplications and casts. The reference executor
computes the same values directly (runtime/tir_values.py)."""
from __future__ import annotations

from ...ir import arith
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import Add, Broadcast, Call, GT, IntImm, Mul, NE, PrimExpr, Select, Sub, const


def _shift(symbol: str, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return arith.bitwise_binary(symbol, a, arith.cast(a.dtype, b))


def _constant(e: PrimExpr, what: str) -> int:
    scalar = e.value if isinstance(e, Broadcast) else e
    if not isinstance(scalar, IntImm):
        raise TVMSError(f"T.q_multiply_shift needs a constant {what}")
    return scalar.value


def _like(x: PrimExpr, value: int, dtype: str) -> PrimExpr:
    """The constant ``value`` of type ``dtype`` with ``x``'s lanes."""
    scalar = const(value, DataType(dtype))
    return scalar if x.dtype.lanes == 1 else Broadcast(scalar, x.dtype.lanes)


def _fixed_point(x: PrimExpr, y: PrimExpr, q: PrimExpr, left: PrimExpr, right: PrimExpr,
                 shift_left: PrimExpr) -> PrimExpr:
    wide = DataType("int64").with_lanes(x.dtype.lanes)
    x, y = arith.cast(wide, x), arith.cast(wide, y)
    x = Select(shift_left, _shift("<<", x, left), x)
    total = arith.binary(Add, right, q)
    rounding = _shift("<<", _like(x, 1, "int64"), arith.binary(Sub, total, 1))
    product = arith.binary(Add, arith.binary(Mul, x, y), rounding)
    return arith.cast(DataType("int32").with_lanes(wide.lanes), _shift(">>", product, total))


def legalize_q_multiply_shift(call: Call) -> PrimExpr:
    x, y, q, s = call.args
    if _constant(y, "multiplier") == 1 << 30:  # a power of two: a plain shift
        exp = _constant(s, "shift") - 1
        if exp > 0:
            return _shift("<<", x, _like(x, exp, "int32"))
        if exp == 0:
            raise TVMSError("T.q_multiply_shift by 2**30 with shift 1 shifts by -1 (undefined in TVM)")
        rounded = arith.binary(Add, x, _shift("<<", _like(x, 1, "int32"), _like(x, -exp - 1, "int32")))
        return _shift(">>", rounded, _like(x, -exp, "int32"))
    zero = _like(s, 0, str(s.dtype.element_of))
    left = Select(GT(s, zero), s, zero)
    right = Select(GT(s, zero), zero, arith.negate(s))
    return _fixed_point(x, y, q, left, right, NE(left, zero))


def legalize_q_multiply_shift_per_axis(call: Call) -> PrimExpr:
    x, y, left, right, q, shift_left, _shift_right = call.args
    return _fixed_point(x, y, q, left, right, shift_left)


LEGALIZE = {"tir.q_multiply_shift": legalize_q_multiply_shift,
            "tir.q_multiply_shift_per_axis": legalize_q_multiply_shift_per_axis}
