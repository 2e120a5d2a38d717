"""TensorIR data types as LLVM types, and the conversions (casts) between them."""
from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from ...ir.dtype import FLOAT_FORMATS, DataType, float_format, ml_dtype
from ...ir.errors import TVMSError

PTR = ir.PointerType()
I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)


def scalar_type(dtype: DataType) -> ir.Type:
    """The LLVM type of one element of ``dtype`` in registers (bool is i1)."""
    dt = DataType(dtype).element_of
    if dt.is_bool:
        return I1
    if dt.is_integer:
        return ir.IntType(dt.bits)
    if dt.is_narrow_float and dt.name in FLOAT_FORMATS:  # its bits (llvm_narrow converts)
        return I16 if dt.bits == 16 else I8
    if dt.code == "float":
        types = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}
        if dt.bits in types:
            return types[dt.bits]
    if dt.is_handle:
        return PTR
    raise TVMSError(f"the llvm target does not support the data type {dt}")


def memory_type(dtype: DataType) -> ir.Type:
    """The LLVM type of one element in memory: bool takes a byte, as in numpy."""
    dt = DataType(dtype).element_of
    return I8 if dt.is_bool or dt.bits < 8 else scalar_type(dt)


def with_lanes(element: ir.Type, lanes: int) -> ir.Type:
    return element if lanes == 1 else ir.VectorType(element, lanes)


def lanes_of(value: ir.Value) -> int:
    return value.type.count if isinstance(value.type, ir.VectorType) else 1


def element_type(value: ir.Value) -> ir.Type:
    t = value.type
    return t.element if isinstance(t, ir.VectorType) else t


def broadcast(builder: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """``value`` repeated in ``lanes`` lanes (unchanged when it already is a vector)."""
    if lanes == 1 or lanes_of(value) == lanes:
        return value
    if lanes_of(value) != 1:
        raise TVMSError(f"cannot combine vectors of {lanes_of(value)} and {lanes} lanes")
    vec_type = ir.VectorType(value.type, lanes)
    if isinstance(value, ir.Constant):
        return ir.Constant(vec_type, [value.constant] * lanes)
    one = builder.insert_element(ir.Constant(vec_type, ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vec_type, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def unify(builder: ir.IRBuilder, *values: ir.Value) -> list:
    """The values broadcast to a common number of lanes."""
    lanes = max(lanes_of(v) for v in values)
    return [broadcast(builder, v, lanes) for v in values]


def constant(dtype: DataType, value: Any) -> ir.Constant:
    dt = DataType(dtype)
    element = scalar_type(dt)
    if dt.is_bool:
        value = int(bool(value))
    elif dt.is_narrow_float:  # its bits, rounded as the conversions here round
        with np.errstate(over="ignore"):
            code = np.array(_to_odd_float32(float(value)), np.float32).astype(ml_dtype(dt))
        value = int(code.view(np.uint16 if dt.bits == 16 else np.uint8))
    elif dt.is_integer:
        value = int(value) & ((1 << dt.bits) - 1)
    else:
        value = rounded_float(value, dt.bits)
    if dt.lanes > 1:
        return ir.Constant(ir.VectorType(element, dt.lanes), [ir.Constant(element, value)] * dt.lanes)
    return ir.Constant(element, value)


def _to_odd_float32(value: float) -> np.float32:
    """``value`` as a float32 rounded to odd (as ``llvm_half.round_to_odd``): rounding that to
    a narrow float gives ``value``'s correct rounding (ml_dtypes rounds a double twice)."""
    with np.errstate(over="ignore"):
        nearest = np.float32(value)
    if not np.isfinite(value) or float(nearest) == value:
        return nearest
    bits = int(np.array(nearest).view(np.uint32))
    if abs(float(nearest)) > abs(value):
        bits -= 1
    return np.array(bits | 1, np.uint32).view(np.float32)[()]


_NUMPY_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}


def rounded_float(value: Any, bits: int) -> float:
    """``value`` rounded to the nearest float of ``bits`` bits, as an IEEE conversion rounds it:
    past the type's range it is ``inf`` or ``-inf`` (``T.float16(70000.0)`` stores inf, as
    ``np.float16(70000.0)`` is), never an error."""
    with np.errstate(over="ignore"):
        return float(_NUMPY_FLOATS[bits](value))


def cast(builder: ir.IRBuilder, value: ir.Value, source: DataType, target: DataType) -> ir.Value:
    """``value`` of type ``source`` converted to ``target`` with C's (and TVM's) rules: integers
    wrap, floats truncate toward zero, anything to bool compares with zero."""
    src, dst = DataType(source).element_of, DataType(target).element_of
    lanes = lanes_of(value)
    to = with_lanes(scalar_type(dst), lanes)
    if src == dst:
        return value
    if src.is_narrow_float or dst.is_narrow_float:
        return _narrow_cast(builder, value, src, dst)
    if value.type == to:
        return value
    if dst.is_bool:
        if src.is_float:
            return builder.fcmp_unordered("!=", value, ir.Constant(value.type, None))
        return builder.icmp_unsigned("!=", value, ir.Constant(value.type, None))
    if src.is_float and dst.is_float:
        return builder.fpext(value, to) if dst.bits > src.bits else builder.fptrunc(value, to)
    if src.is_float:
        if dst.bits < 8:  # (LLVM's conversion to i4 is poison out of range: wrap as ml_dtypes does)
            return builder.trunc(builder.fptosi(value, with_lanes(I32, lanes)), to)
        return builder.fptoui(value, to) if dst.is_uint else builder.fptosi(value, to)
    if dst.is_float:  # from an integer or bool
        return builder.sitofp(value, to) if src.is_int else builder.uitofp(value, to)
    if dst.bits < element_type(value).width:
        return builder.trunc(value, to)
    return builder.sext(value, to) if src.is_int else builder.zext(value, to)


def _narrow_cast(builder: ir.IRBuilder, value: ir.Value, src: DataType, dst: DataType) -> ir.Value:
    """A conversion from or to a narrow float, through float32 (exact from a narrow float): a
    float64 or a wide integer is first rounded to float32 to odd, so that the second rounding
    gives the correctly rounded result (float32 keeps more than 2 * 8 + 2 bits)."""
    from .llvm_half import round_to_odd
    from .llvm_narrow import float_to_narrow, narrow_to_float

    f32 = DataType("float32")
    if src.is_narrow_float:
        wide = narrow_to_float(builder, value, float_format(src))
        return cast(builder, wide, f32, dst)
    if src.is_float and src.bits <= 32:
        wide = cast(builder, value, src, f32)
    else:  # float64, or an integer (exact in float64 up to 2**53)
        double = cast(builder, value, src, DataType("float64")) if not src.is_float else value
        wide = round_to_odd(builder, double)
    return float_to_narrow(builder, wide, float_format(dst), scalar_type(dst))


def to_memory(builder: ir.IRBuilder, value: ir.Value, dtype: DataType) -> ir.Value:
    """A register value ready to store into a buffer of ``dtype`` (bool: i1 -> i8)."""
    dt = DataType(dtype)
    if dt.is_bool or (dt.is_integer and dt.bits < 8):  # int4 -1 is the byte 0x0f, as in ml_dtypes
        return builder.zext(value, with_lanes(I8, lanes_of(value)))
    return value


def from_memory(builder: ir.IRBuilder, value: ir.Value, dtype: DataType) -> ir.Value:
    """A loaded value as a register value of ``dtype`` (bool: i8 -> i1)."""
    dt = DataType(dtype)
    if dt.is_bool:
        return builder.icmp_unsigned("!=", value, ir.Constant(value.type, None))
    if dt.is_integer and dt.bits < 8:
        return builder.trunc(value, with_lanes(scalar_type(dt), lanes_of(value)))
    return value
