"""ONNX converters of elementwise arithmetic, activations and reductions."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DataType
from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, dtype_of, fold,
                           normalize_axis, rank_of, required_value, scalar_like, static_shape)
from .onnx_ops_string import string_equal
from .relax_op_api import op


def _old_broadcast(ctx, a, b, attrs):
    """Before opset 7, ``broadcast=1`` aligned B with A's dimensions from ``axis`` on."""
    axis = attrs.get("axis")
    if not attrs.get("broadcast", 0):
        return b
    if axis is None:
        return b
    trailing = rank_of(a) - normalize_axis(axis, rank_of(a)) - rank_of(b)
    return op.reshape(b, dims_of(b) + [1] * trailing) if trailing > 0 else b


class _Binary(OnnxOpConverter):
    relax = None
    numpy = None

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        a, b = inputs
        b = _old_broadcast(ctx, a, b, attrs)
        return cls._impl_v7(ctx, [a, b], attrs)

    @classmethod
    def _impl_v7(cls, ctx, inputs, attrs):
        if cls.numpy is not None:
            folded = fold(cls.numpy, inputs)
            if folded is not None:
                return folded
        return cls.relax(*inputs)


def _binary(onnx_name: str, relax_fn, numpy_fn=None):
    cls = type(onnx_name, (_Binary,), {"relax": staticmethod(relax_fn), "numpy": staticmethod(numpy_fn)
                                       if numpy_fn else None})
    converter(onnx_name)(cls)


def _int_divide(a, b):
    """ONNX's integer Div truncates toward zero."""
    return np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b


_binary("Add", op.add, np.add)
_binary("Sub", op.subtract, np.subtract)
_binary("Mul", op.multiply, np.multiply)
_binary("Div", op.divide, _int_divide)
_binary("Less", op.less, np.less)
_binary("Greater", op.greater, np.greater)
_binary("LessOrEqual", op.less_equal, np.less_equal)
_binary("GreaterOrEqual", op.greater_equal, np.greater_equal)
_binary("And", op.logical_and)
_binary("Or", op.logical_or)
_binary("Xor", op.logical_xor)
_binary("BitwiseAnd", op.bitwise_and)
_binary("BitwiseOr", op.bitwise_or)
_binary("BitwiseXor", op.bitwise_xor)


@converter("Equal")
class Equal(_Binary):
    takes_strings = True
    relax, numpy = staticmethod(op.equal), staticmethod(np.equal)

    @classmethod
    def _impl_v7(cls, ctx, inputs, attrs):
        if "string" in (dtype_of(inputs[0]), dtype_of(inputs[1])):  # (from opset 19: a run-time function)
            return string_equal(*inputs)
        return super()._impl_v7(ctx, inputs, attrs)


@converter("Pow")
class Pow(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        base, exponent = inputs
        return op.power(base, as_dtype(exponent, dtype_of(base)))


@converter("Mod")
class Mod(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        # fmod=1: the sign of the dividend (C's fmod); fmod=0: the sign of the divisor (Python's %)
        x, y = inputs
        if attrs.get("fmod", 0):
            return op.mod(x, y)
        if not DataType(dtype_of(x)).is_float:
            return op.floor_mod(x, y)
        # numpy's float mod from C's fmod, exact where x - floor(x / y) * y is not (a finite x
        # by an infinite y; a zero result takes the divisor's sign)
        zero = scalar_like(0.0, x)
        r = ctx.emit(op.mod(x, y))
        other_sign = op.not_equal(op.less(r, zero), op.less(y, zero))
        r = ctx.emit(op.where(op.logical_and(op.not_equal(r, zero), other_sign), op.add(r, y), r))
        signed_zero = op.where(op.less(y, zero), scalar_like(-0.0, x), zero)
        return op.where(op.equal(r, zero), signed_zero, r)


@converter("BitShift")
class BitShift(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        """A shift by a negative amount or by the width or more shifts every bit out (numpy's
        and ONNX's result: 0, or -1 for a right shift of a negative number), where LLVM's and
        C's shifts are undefined: such an amount is replaced by width - 1 and the result fixed."""
        x, y = inputs
        dtype = DataType(dtype_of(x))
        width = scalar_like(dtype.bits, y)
        out = op.greater_equal(y, width)
        if dtype.is_int:
            out = op.logical_or(out, op.less(y, scalar_like(0, y)))
        out = ctx.emit(out)
        y = ctx.emit(op.where(out, scalar_like(dtype.bits - 1, y), y))
        if attrs["direction"] == "RIGHT":
            shifted = ctx.emit(op.right_shift(x, y))
            return shifted if dtype.is_int else op.where(out, scalar_like(0, x), shifted)
        return op.where(out, scalar_like(0, x), ctx.emit(op.left_shift(x, y)))


# ------------------------------------------------------------------------- unary
class _Unary(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")  # (opset < 6: an optimization hint)
        return cls.relax(inputs[0])


def _unary(onnx_name: str, relax_fn) -> None:
    converter(onnx_name)(type(onnx_name, (_Unary,), {"relax": staticmethod(relax_fn)}))


for _name, _fn in {"Abs": op.abs, "Neg": op.negative, "Exp": op.exp, "Log": op.log, "Sqrt": op.sqrt,
                   "Floor": op.floor, "Ceil": op.ceil, "Round": op.round, "Sigmoid": op.sigmoid,
                   "Tanh": op.tanh, "Sin": op.sin, "Cos": op.cos, "Tan": op.tan, "Asin": op.asin,
                   "Acos": op.acos, "Atan": op.atan, "Sinh": op.sinh, "Cosh": op.cosh, "Asinh": op.asinh,
                   "Acosh": op.acosh, "Atanh": op.atanh, "Erf": op.erf, "Sign": op.sign,
                   "Not": op.logical_not, "IsNaN": op.isnan, "Relu": op.nn.relu,
                   "BitwiseNot": op.bitwise_not, "Softplus": op.nn.softplus}.items():
    _unary(_name, _fn)


@converter("Identity")
class Identity(OnnxOpConverter):
    takes_strings = True

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        return inputs[0]


@converter("Reciprocal")
class Reciprocal(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        return op.divide(scalar_like(1, inputs[0]), inputs[0])


@converter("IsInf")
class IsInf(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x = inputs[0]
        inf = op.isinf(x)
        negative, positive = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
        if negative and positive:
            return inf
        if not negative and not positive:
            return op.logical_and(inf, op.not_equal(x, x))  # (all false, of x's shape)
        sign = op.greater(x, scalar_like(0, x)) if positive else op.less(x, scalar_like(0, x))
        return op.logical_and(inf, sign)


# the activations with parameters as expressions (the RNN converters apply them too)
def softsign(x):
    return op.divide(x, op.add(op.abs(x), scalar_like(1, x)))


def elu(x, alpha):
    return _where_negative(x, op.multiply(scalar_like(alpha, x), op.subtract(op.exp(x), scalar_like(1, x))))


def thresholded_relu(x, alpha):
    return op.where(op.greater(x, scalar_like(alpha, x)), x, scalar_like(0, x))


def hard_sigmoid(x, alpha, beta):
    return op.clip(op.add(op.multiply(x, scalar_like(alpha, x)), scalar_like(beta, x)), 0.0, 1.0)


def swish(x, alpha):
    return op.multiply(x, op.sigmoid(op.multiply(x, scalar_like(alpha, x))))


def _where_negative(x, negative_branch):
    return op.where(op.less(x, scalar_like(0, x)), negative_branch, x)


@converter("Softsign")
class Softsign(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        return softsign(inputs[0])


@converter("LeakyRelu")
class LeakyRelu(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        return op.nn.leakyrelu(inputs[0], alpha=attrs.get("alpha", 0.01))


@converter("PRelu")
class PRelu(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        x, slope = inputs
        return op.where(op.less(x, scalar_like(0, x)), op.multiply(x, slope), x)


@converter("Elu")
class Elu(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        return elu(inputs[0], attrs.get("alpha", 1.0))


@converter("Celu")
class Celu(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, ctx, inputs, attrs):
        x = inputs[0]
        alpha = scalar_like(attrs.get("alpha", 1.0), x)
        negative = op.multiply(alpha, op.subtract(op.exp(op.divide(x, alpha)), scalar_like(1, x)))
        return op.add(op.maximum(x, scalar_like(0, x)), op.minimum(scalar_like(0, x), negative))


@converter("Selu")
class Selu(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        x = inputs[0]
        alpha = scalar_like(attrs.get("alpha", 1.67326319217681884765625), x)
        gamma = scalar_like(attrs.get("gamma", 1.05070102214813232421875), x)
        negative = op.multiply(alpha, op.subtract(op.exp(x), scalar_like(1, x)))
        return op.multiply(gamma, _where_negative(x, negative))


@converter("ThresholdedRelu")
class ThresholdedRelu(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        return thresholded_relu(inputs[0], attrs.get("alpha", 1.0))


@converter("HardSigmoid")
class HardSigmoid(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        return hard_sigmoid(inputs[0], attrs.get("alpha", 0.2), attrs.get("beta", 0.5))


@converter("HardSwish")
class HardSwish(OnnxOpConverter):
    @classmethod
    def _impl_v14(cls, ctx, inputs, attrs):
        x = inputs[0]
        linear = op.add(op.multiply(x, scalar_like(1 / 6, x)), scalar_like(0.5, x))
        return op.multiply(x, op.clip(linear, 0.0, 1.0))


@converter("Mish")
class Mish(OnnxOpConverter):
    @classmethod
    def _impl_v18(cls, ctx, inputs, attrs):
        x = inputs[0]
        return op.multiply(x, op.tanh(op.nn.softplus(x)))


@converter("Gelu")
class Gelu(OnnxOpConverter):
    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        approximate = attrs.get("approximate", "none")
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"approximate={approximate!r}")
        return (op.nn.gelu_tanh if approximate == "tanh" else op.nn.gelu)(inputs[0])


@converter("Clip")
class Clip(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        x = inputs[0]
        low, high = attrs.get("min", -np.inf), attrs.get("max", np.inf)
        return cls._bounded(x, scalar_like(low, x), scalar_like(high, x))

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x, low, high = (inputs + [None, None])[:3]
        return cls._bounded(x, low, high)

    @staticmethod
    def _bounded(x, low, high):
        # (maximum/minimum, not R.clip: the bounds may be tensors computed at run time)
        if low is not None:
            x = op.maximum(x, low)
        if high is not None:
            x = op.minimum(x, high)
        return x


@converter("Where")
class Where(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        return op.where(*inputs)


# ------------------------------------------------------------------- variadic
class _Variadic(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs")
        result = inputs[0]
        for x in inputs[1:]:
            result = cls.relax(result, x)
        return result


converter("Sum")(type("Sum", (_Variadic,), {"relax": staticmethod(op.add)}))
converter("Max")(type("Max", (_Variadic,), {"relax": staticmethod(op.maximum)}))
converter("Min")(type("Min", (_Variadic,), {"relax": staticmethod(op.minimum)}))


@converter("Mean")
class Mean(_Variadic):
    relax = staticmethod(op.add)

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        total = super()._impl_v1(ctx, inputs, attrs)
        return op.divide(total, scalar_like(len(inputs), inputs[0]))


# ------------------------------------------------------------------ reductions
class _Reduce(OnnxOpConverter):
    """ReduceX: ``axes`` an attribute until the opset ``axes_input`` (then the second input);
    no axes reduces all, unless ``noop_with_empty_axes``. ``empty``: the result over an empty
    set, for the reductions whose kernel has no such identity (max, min)."""
    axes_input = 18
    empty = None

    @classmethod
    def _axes(cls, ctx, inputs, attrs):
        if ctx.opset >= cls.axes_input:
            axes = inputs[1] if len(inputs) > 1 else None
            return None if axes is None else [int(a) for a in required_value(axes, "axes")]
        axes = attrs.get("axes")
        return None if axes is None else list(axes)

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        axes = cls._axes(ctx, inputs, attrs)
        keepdims = bool(attrs.get("keepdims", 1))
        noop = attrs.get("noop_with_empty_axes", 0)
        if not axes:
            if noop:
                return x
            axes = list(range(rank_of(x)))
        shape = static_shape(x)
        if cls.empty is not None and shape is not None and any(shape[a] == 0 for a in axes):
            rank, dtype = len(shape), dtype_of(x)
            reduced = {normalize_axis(a, rank) for a in axes}
            out = [1 if a in reduced else d for a, d in enumerate(shape) if keepdims or a not in reduced]
            return op.full(out, scalar_like(cls.empty(np.dtype(dtype)), x), dtype)
        return cls.reduce(x, axes, keepdims)


def _reduce(onnx_name: str, reduce_fn, axes_input: int = 18, empty=None) -> None:
    converter(onnx_name)(type(onnx_name, (_Reduce,), {"reduce": staticmethod(reduce_fn),
                                                       "axes_input": axes_input, "empty": staticmethod(empty)
                                                       if empty else None}))


def _lowest(dtype: np.dtype):
    return False if dtype == bool else -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    return True if dtype == bool else np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _log_sum_exp(x, axes, keepdims):
    peak = op.max(x, axes, True)
    shifted = op.sum(op.exp(op.subtract(x, peak)), axes, True)
    result = op.add(op.log(shifted), peak)
    return result if keepdims else op.squeeze(result, axes)


def _extreme(reduce_fn, infinity: float):
    """ReduceMax / ReduceMin: Relax's reduction starts from the largest finite value of the
    dtype, so an all -inf (max) or all +inf (min) slice would give that value instead of the
    infinity ONNX gives (an attention row that is masked throughout)."""
    def reduce(x, axes, keepdims):
        found = reduce_fn(x, axes, keepdims)
        if not DataType(dtype_of(x)).is_float:
            return found
        limit = scalar_like(infinity, x)
        all_infinite = op.min(op.astype(op.equal(x, limit), "int8"), axes, keepdims)
        return op.where(op.astype(all_infinite, "bool"), limit, found)
    return reduce


_reduce("ReduceSum", op.sum, axes_input=13)
_reduce("ReduceMean", op.mean)
_reduce("ReduceMax", _extreme(op.max, -np.inf), empty=_lowest)
_reduce("ReduceMin", _extreme(op.min, np.inf), empty=_highest)
_reduce("ReduceProd", op.prod)
_reduce("ReduceL1", lambda x, axes, keep: op.sum(op.abs(x), axes, keep))
_reduce("ReduceL2", lambda x, axes, keep: op.sqrt(op.sum(op.multiply(x, x), axes, keep)))
_reduce("ReduceSumSquare", lambda x, axes, keep: op.sum(op.multiply(x, x), axes, keep))
_reduce("ReduceLogSum", lambda x, axes, keep: op.log(op.sum(x, axes, keep)))
_reduce("ReduceLogSumExp", _log_sum_exp)


class _ArgReduce(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        axis, keepdims = attrs.get("axis", 0), bool(attrs.get("keepdims", 1))
        if attrs.get("select_last_index", 0):
            # the last extreme is the first one of the reversed axis
            length = dims_of(x)[normalize_axis(axis, rank_of(x))]
            if not isinstance(length, int):
                raise Unsupported("select_last_index on an axis of symbolic length")
            index = op.astype(cls.relax(op.flip(x, axis), axis, keepdims), "int64")
            return op.subtract(ctx.constant(length - 1, "int64"), index)
        return op.astype(cls.relax(x, axis, keepdims), "int64")


converter("ArgMax")(type("ArgMax", (_ArgReduce,), {"relax": staticmethod(op.argmax)}))
converter("ArgMin")(type("ArgMin", (_ArgReduce,), {"relax": staticmethod(op.argmin)}))
