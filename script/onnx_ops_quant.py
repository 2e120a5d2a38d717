"""ONNX's quantization operators in Relax operators: QuantizeLinear, DequantizeLinear (scalar,
per-axis and blocked scales), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
QLinearConv. QuantizeLinear/DequantizeLinear also take the 4- and 2-bit integers and the float8 and
float4 types (one element a byte, as ml_dtypes holds them). Rounding is to nearest, ties to even
(``np.rint``), as ONNX's reference rounds."""
from __future__ import annotations

import numpy as np

from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, dtype_of, rank_of,
                           normalize_axis, onnx_dtype)
from ..ir.dtype import DataType, float_format
from .onnx_ops_nn import Conv
from .relax_op_api import op

_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
           "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}



def _broadcastable(ctx, value, x, axis, block_size):
    """A scale or zero point shaped to broadcast against ``x``: a scalar stays one, a vector lies
    along ``axis``, a blocked one is repeated ``block_size`` times along it (the last block may
    be cut short)."""
    dims = dims_of(value)
    if not dims or dims == [1]:
        return value if not dims else ctx.emit(op.reshape(value, []))
    rank = rank_of(x)
    axis = normalize_axis(axis, rank)
    if not block_size:
        if len(dims) != 1:
            raise Unsupported(f"a scale of shape {dims} without block_size")
        return ctx.emit(op.reshape(value, [1] * axis + [-1] + [1] * (rank - axis - 1)))
    size = dims_of(x)[axis]
    value = ctx.emit(op.repeat(value, block_size, axis=axis))
    if dims_of(value)[axis] != size:
        value = ctx.emit(op.strided_slice(value, axes=[axis], begin=[0], end=[size]))
    return value


def _saturate(ctx, y, dtype):
    """``y`` (a float tensor of whole numbers) clipped to ``dtype``'s range and cast to it."""
    if dtype not in _RANGES:
        raise Unsupported(f"quantization to {dtype} (integers of 2 to 16 bits, float8 and float4 "
                          f"types are supported)")
    low, high = _RANGES[dtype]
    return op.astype(op.clip(y, low, high), dtype)


def _quantize(ctx, x, scale, zero_point, dtype, saturate=1):
    """saturate(rint(x / scale) + zero_point) in ``dtype`` (rounded before the zero point is
    added, as the reference does: the float sum could round a value near a half the other way).
    To a float type: x / scale rounded to it, past its range its largest value where
    ``saturate`` (float8; float4 has no inf to overflow to), plus the zero point for float4
    (the reference ignores a float8 one, which must be 0)."""
    y = ctx.emit(op.divide(x, as_dtype(scale, dtype_of(x))))
    if DataType(dtype).is_narrow_float:
        if dtype.startswith("float8"):
            if saturate:
                limit = float_format(dtype).max_value
                y = ctx.emit(op.clip(y, -limit, limit))
        elif zero_point is not None:
            y = ctx.emit(op.add(y, as_dtype(zero_point, dtype_of(y))))
        return op.astype(y, dtype)
    y = ctx.emit(op.round(y))
    if zero_point is not None:
        y = ctx.emit(op.add(y, as_dtype(zero_point, dtype_of(y))))
    return _saturate(ctx, y, dtype)


def _minus_zero_point(ctx, x, zero_point, dtype="int32"):
    """``x - zero_point`` widened to ``dtype``."""
    wide = as_dtype(x, dtype)
    return wide if zero_point is None else ctx.emit(op.subtract(wide, as_dtype(zero_point, dtype)))


@converter("QuantizeLinear")
class QuantizeLinear(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, scale, zero_point = (inputs + [None] * 2)[:3]
        axis, block_size = attrs.get("axis", 1), attrs.get("block_size", 0)
        out = attrs.get("output_dtype", 0)
        dtype = dtype_of(zero_point) if zero_point is not None else (onnx_dtype(out) if out else "uint8")
        if out and onnx_dtype(out) != dtype:
            raise Unsupported(f"output_dtype {onnx_dtype(out)} differs from the zero point's {dtype}")
        saturate = attrs.get("saturate", 1)  # (it concerns float8 outputs only)
        precision = attrs.get("precision", 0)
        if precision:
            x = as_dtype(x, onnx_dtype(precision))
            scale = as_dtype(scale, onnx_dtype(precision))
        scale = _broadcastable(ctx, scale, x, axis, block_size)
        if zero_point is not None:
            zero_point = _broadcastable(ctx, zero_point, x, axis, block_size)
        return _quantize(ctx, x, scale, zero_point, dtype, saturate)


@converter("DequantizeLinear")
class DequantizeLinear(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, scale, zero_point = (inputs + [None] * 2)[:3]
        if dtype_of(x) not in _RANGES and dtype_of(x) != "int32" and not DataType(dtype_of(x)).is_narrow_float:
            raise Unsupported(f"dequantizing {dtype_of(x)} (integers of 2 to 32 bits, float8 and float4 "
                              f"types are supported)")
        axis, block_size = attrs.get("axis", 1), attrs.get("block_size", 0)
        out = attrs.get("output_dtype", 0)
        dtype = onnx_dtype(out) if out else dtype_of(scale)
        if zero_point is not None:
            zero_point = _broadcastable(ctx, zero_point, x, axis, block_size)
        # (the reference subtracts in float32 and multiplies by the scale promoted to float32)
        y = _minus_zero_point(ctx, x, zero_point, "float32")
        y = op.multiply(y, as_dtype(_broadcastable(ctx, scale, x, axis, block_size), "float32"))
        return as_dtype(ctx.emit(y), dtype)


@converter("DynamicQuantizeLinear")
class DynamicQuantizeLinear(OnnxOpConverter):
    """uint8 quantization with the scale and zero point that map [min(x, 0), max(x, 0)] onto
    [0, 255]."""

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        (x,) = inputs
        zero = ctx.constant(np.float32(0))
        x = as_dtype(x, "float32")
        high = ctx.emit(op.maximum(op.max(x), zero))
        low = ctx.emit(op.minimum(op.min(x), zero))
        span = ctx.emit(op.subtract(high, low))
        span = ctx.emit(op.where(op.equal(span, zero), ctx.constant(np.float32(1)), span))
        scale = ctx.emit(op.divide(span, ctx.constant(np.float32(255))))
        zero_point = ctx.emit(op.round(op.clip(op.negative(op.divide(low, scale)), 0, 255)))
        y = _quantize(ctx, x, scale, zero_point, "uint8")
        return [y, scale, op.astype(zero_point, "uint8")]


@converter("MatMulInteger")
class MatMulInteger(OnnxOpConverter):
    """(A - a_zero_point) @ (B - b_zero_point) in int32; a per-row zero point of A lies along
    its rows, a per-column one of B along its columns."""

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        a, b, a_zero, b_zero = (inputs + [None] * 2)[:4]
        if a_zero is not None and rank_of(a_zero) == 1 and dims_of(a_zero) != [1]:
            a_zero = ctx.emit(op.reshape(a_zero, [-1, 1]))
        return op.matmul(_minus_zero_point(ctx, a, a_zero), _minus_zero_point(ctx, b, b_zero))


def _conv_int32(ctx, x, w, x_zero, w_zero, attrs):
    """The int32 convolution of (x - x_zero) and (w - w_zero); a per-output-channel w_zero
    lies along w's first axis."""
    if w_zero is not None and rank_of(w_zero) == 1 and dims_of(w_zero) != [1]:
        w_zero = ctx.emit(op.reshape(w_zero, [-1] + [1] * (rank_of(w) - 1)))
    if x_zero is not None and dims_of(x_zero) not in ([], [1]):
        raise Unsupported("a per-channel zero point of the input")
    x, w = _minus_zero_point(ctx, x, x_zero), _minus_zero_point(ctx, w, w_zero)
    return ctx.emit(Conv._impl_v1(ctx, [x, w], attrs))


@converter("ConvInteger")
class ConvInteger(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, w, x_zero, w_zero = (inputs + [None] * 2)[:4]
        return _conv_int32(ctx, x, w, x_zero, w_zero, attrs)


def _requantize(ctx, acc, scale, y_scale, y_zero, dtype):
    """An int32 accumulator times scale / y_scale, plus y_zero, saturated to ``dtype`` (in
    float64, to which numpy promotes int32 times a float)."""
    factor = ctx.emit(op.divide(scale, y_scale))
    y = ctx.emit(op.multiply(as_dtype(acc, "float64"), as_dtype(factor, "float64")))
    if y_zero is not None:
        y = ctx.emit(op.add(y, as_dtype(y_zero, "float64")))
    return _saturate(ctx, ctx.emit(op.round(y)), dtype)


@converter("QLinearMatMul")
class QLinearMatMul(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = inputs
        acc = ctx.emit(op.matmul(_minus_zero_point(ctx, a, a_zero), _minus_zero_point(ctx, b, b_zero)))
        scale = ctx.emit(op.multiply(a_scale, b_scale))
        return _requantize(ctx, acc, scale, y_scale, y_zero, dtype_of(y_zero) if y_zero is not None else dtype_of(a))


@converter("QLinearConv")
class QLinearConv(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = (inputs + [None])[:9]
        acc = _conv_int32(ctx, x, w, x_zero, w_zero, attrs)
        if bias is not None:
            acc = ctx.emit(op.add(acc, op.reshape(as_dtype(bias, "int32"), [-1] + [1] * (rank_of(acc) - 2))))
        if dims_of(w_scale) not in ([], [1]):  # (one scale per output channel)
            w_scale = ctx.emit(op.reshape(w_scale, [-1] + [1] * (rank_of(acc) - 2)))
        scale = ctx.emit(op.multiply(x_scale, w_scale))
        return _requantize(ctx, acc, scale, y_scale, y_zero, dtype_of(y_zero) if y_zero is not None else dtype_of(x))
