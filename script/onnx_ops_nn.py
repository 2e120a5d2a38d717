"""ONNX converters of the neural-network operators: convolutions, pooling, normalizations,
Gemm/MatMul, softmax."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir.dtype import DataType
from .onnx_convert import (OnnxOpConverter, Unsupported, converter, dims_of, dtype_of, normalize_axis, rank_of,
                           required_value, scalar_like, static_shape, value_of)
from .onnx_ops_math import swish
from .onnx_ops_random import dropout
from .relax_op_api import op


def _spatial_pads(attrs, in_dims, kernel, strides, dilations, transpose=False):
    """ONNX's pads (all begins, then all ends) with auto_pad resolved against the input size."""
    n = len(kernel)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads = list(attrs.get("pads", [0] * 2 * n))
    if auto_pad in ("NOTSET", "VALID"):
        return pads if auto_pad == "NOTSET" else [0] * 2 * n
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto_pad!r}")
    begins, ends = [], []
    for size, k, s, d in zip(in_dims, kernel, strides, dilations):
        if not isinstance(size, int):
            raise Unsupported(f"auto_pad={auto_pad} on a symbolic spatial size")
        extent = (k - 1) * d + 1
        total = max((math.ceil(size / s) - 1) * s + extent - size, 0) if not transpose else \
            max(extent - s, 0)
        small, large = total // 2, total - total // 2
        begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        begins.append(begin)
        ends.append(end)
    return begins + ends


def _window(attrs, x, kernel):
    n = len(kernel)
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = _spatial_pads(attrs, dims_of(x)[2:], kernel, strides, dilations)
    return strides, dilations, pads


def _add_channel_bias(y, bias):
    """``y`` (N, C, ...) plus a bias of shape (C,)."""
    return op.add(y, op.reshape(bias, [-1] + [1] * (rank_of(y) - 2)))


def _conv_inputs(inputs, attrs):
    """(data, weight, bias or None, kernel shape) of a convolution of 1, 2 or 3 spatial dims."""
    x, w, bias = (inputs + [None])[:3]
    kernel = list(attrs.get("kernel_shape", dims_of(w)[2:]))
    if len(kernel) not in (1, 2, 3):
        raise Unsupported(f"{len(kernel)}-d convolution")
    return x, w, bias, kernel


@converter("Conv")
class Conv(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, w, bias, kernel = _conv_inputs(inputs, attrs)
        n = len(kernel)
        strides, dilations, pads = _window(attrs, x, kernel)
        conv = (op.nn.conv1d, op.nn.conv2d, op.nn.conv3d)[n - 1]
        half = dtype_of(x) == "float16"  # (summed in float32 and rounded once, as the reference does)
        y = conv(x, w, strides=strides, padding=pads, dilation=dilations, groups=attrs.get("group", 1),
                 out_dtype="float32" if half else "")
        y = op.astype(ctx.emit(y), "float16") if half else y
        return y if bias is None else _add_channel_bias(ctx.emit(y), bias)


@converter("ConvTranspose")
class ConvTranspose(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, w, bias, kernel = _conv_inputs(inputs, attrs)
        n = len(kernel)
        strides = list(attrs.get("strides", [1] * n))
        dilations = list(attrs.get("dilations", [1] * n))
        output_padding = list(attrs.get("output_padding", [0] * n))
        output_shape = attrs.get("output_shape")
        in_dims = dims_of(x)[2:]
        if output_shape is not None:
            # the pads that give exactly output_shape (split as ONNX says: the larger half first
            # unless SAME_UPPER); a negative total is further output padding
            output_shape = list(output_shape)[-n:]
            totals = [s * (i - 1) + op_ + ((k - 1) * d + 1) - o for i, k, s, d, op_, o in
                      zip(in_dims, kernel, strides, dilations, output_padding, output_shape)]
            output_padding = [p - min(t, 0) for p, t in zip(output_padding, totals)]
            totals = [max(t, 0) for t in totals]
            upper = attrs.get("auto_pad", "NOTSET") == "SAME_UPPER"
            pads = [t // 2 if upper else t - t // 2 for t in totals] + \
                   [t - t // 2 if upper else t // 2 for t in totals]
        else:
            auto_pad = attrs.get("auto_pad", "NOTSET")
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                # output size = input * stride: the total padding is the rest of the full output
                totals = [s * (i - 1) + op_ + ((k - 1) * d + 1) - i * s for i, k, s, d, op_ in
                          zip(in_dims, kernel, strides, dilations, output_padding)]
                upper = auto_pad == "SAME_UPPER"
                pads = [t // 2 if upper else t - t // 2 for t in totals] + \
                       [t - t // 2 if upper else t // 2 for t in totals]
            else:
                pads = _spatial_pads(attrs, in_dims, kernel, strides, dilations)
        conv = (op.nn.conv1d_transpose, op.nn.conv2d_transpose, op.nn.conv3d_transpose)[n - 1]
        y = conv(x, w, strides=strides, padding=pads, output_padding=output_padding, dilation=dilations,
                 groups=attrs.get("group", 1))
        return y if bias is None else _add_channel_bias(ctx.emit(y), bias)


def _pool_kernel(attrs) -> list:
    """A pooling node's ``kernel_shape``: 1, 2 or 3 dimensions, as Relax's pools have."""
    kernel = list(attrs["kernel_shape"])
    if len(kernel) not in (1, 2, 3):
        raise Unsupported(f"{len(kernel)}-d pooling")
    return kernel


class _Pool(OnnxOpConverter):
    kind = "max"

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        kernel = _pool_kernel(attrs)
        n = len(kernel)
        column_major = bool(attrs.get("storage_order", 0))
        if column_major and ctx.node_outputs < 2:
            raise Unsupported("storage_order=1")
        strides, dilations, pads = _window(attrs, x, kernel)
        ceil_mode = bool(attrs.get("ceil_mode", 0))
        if cls.kind == "max":
            pool = (op.nn.max_pool1d, op.nn.max_pool2d, op.nn.max_pool3d)[n - 1]
            y = pool(x, pool_size=kernel, strides=strides, dilation=dilations, padding=pads, ceil_mode=ceil_mode)
            if ctx.node_outputs < 2:
                return y
            y = ctx.emit(y)
            return [y, _max_indices(ctx, x, y, kernel, strides, dilations, pads, column_major)]
        pool = (op.nn.avg_pool1d, op.nn.avg_pool2d, op.nn.avg_pool3d)[n - 1]
        return pool(x, pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                    ceil_mode=ceil_mode, count_include_pad=bool(attrs.get("count_include_pad", 0)))


def _max_indices(ctx, x, y, kernel, strides, dilations, pads, column_major):
    """MaxPool's second output: where each window's maximum is (its first place in the window's
    row-major order), as an index into the flattened input (spatial axes in column-major order
    for ``storage_order=1``). Each window tap is a strided slice of the input padded with -inf;
    the taps, last to first, replace the index where their value is the maximum."""
    shape, out = static_shape(x), static_shape(y)
    if shape is None or out is None or not DataType(dtype_of(x)).is_float:
        raise Unsupported("the indices of a max pool of symbolic shape or of integers")
    spatial = shape[2:]
    order = range(len(spatial)) if not column_major else reversed(range(len(spatial)))
    places = np.zeros(spatial, np.int64)
    stride = 1
    for axis in reversed(list(order)):
        places += (np.arange(spatial[axis]) * stride).reshape([-1 if a == axis else 1 for a in range(len(spatial))])
        stride *= spatial[axis]
    n = len(kernel)
    width = [(0, 0), (0, 0)] + [(pads[a], pads[n + a] + strides[a]) for a in range(n)]  # (room for ceil_mode)
    padded = ctx.emit(op.nn.pad(x, [v for pair in width for v in pair], "constant", float("-inf")))
    places = np.pad(places, width[2:], constant_values=-1)
    found = ctx.constant(np.zeros(out, np.int64))
    for tap in reversed(list(itertools.product(*(range(k) for k in kernel)))):
        begin = [t * d for t, d in zip(tap, dilations)]
        end = [b + (o - 1) * s + 1 for b, o, s in zip(begin, out[2:], strides)]
        value = ctx.emit(op.strided_slice(padded, list(range(2, n + 2)), begin, end, strides))
        place = places[tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]
        found = ctx.emit(op.where(ctx.emit(op.equal(value, y)), ctx.constant(place), found))
    base = (np.arange(shape[0] * shape[1], dtype=np.int64) * math.prod(spatial)).reshape(shape[:2] + [1] * n)
    return op.add(found, ctx.constant(base))


@converter("MaxPool")
class MaxPool(_Pool):
    kind = "max"


@converter("AveragePool")
class AveragePool(_Pool):
    kind = "avg"


class _GlobalPool(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        return cls.reduce(x, list(range(2, rank_of(x))), True)


converter("GlobalAveragePool")(type("GlobalAveragePool", (_GlobalPool,), {"reduce": staticmethod(op.mean)}))
converter("GlobalMaxPool")(type("GlobalMaxPool", (_GlobalPool,), {"reduce": staticmethod(op.max)}))


def _per_channel(param, x):
    """A (C,) parameter shaped to broadcast over (N, C, ...)."""
    return op.reshape(param, [-1] + [1] * (rank_of(x) - 2))


@converter("BatchNormalization")
class BatchNormalization(OnnxOpConverter):
    """Inference form: (x - mean) / sqrt(var + epsilon) * scale + bias."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs", "momentum")
        if not attrs.get("is_test", 1) and ctx.opset < 7:
            raise Unsupported("is_test=0 (training)")
        if not attrs.get("spatial", 1):
            raise Unsupported("spatial=0")
        return cls._inference(ctx, inputs, attrs)

    @classmethod
    def _impl_v14(cls, ctx, inputs, attrs):
        momentum = attrs.get("momentum", 0.9)
        if not attrs.get("training_mode", 0):
            return cls._inference(ctx, inputs, attrs)
        # training: normalized by the batch's statistics (mean and population variance over all
        # axes but the channels'), which also update the running mean and variance
        x, scale, bias, mean, var = inputs
        axes = [a for a in range(rank_of(x)) if a != 1]
        batch_mean, batch_var = (ctx.emit(reduce(x, axes)) for reduce in (op.mean, op.variance))
        y = ctx.emit(cls._inference(ctx, [x, scale, bias, batch_mean, batch_var], attrs))
        running = [op.add(op.multiply(old, scalar_like(momentum, old)),
                          op.multiply(new, scalar_like(1 - momentum, new)))
                   for old, new in ((mean, batch_mean), (var, batch_var))]
        return [y] + running[:ctx.node_outputs - 1]

    @staticmethod
    def _inference(ctx, inputs, attrs):
        x, scale, bias, mean, var = inputs
        eps = scalar_like(attrs.get("epsilon", 1e-5), var)
        factor = ctx.emit(op.divide(scale, op.sqrt(op.add(var, eps))))
        shift = ctx.emit(op.subtract(bias, op.multiply(mean, factor)))
        return op.add(op.multiply(x, _per_channel(factor, x)), _per_channel(shift, x))


@converter("InstanceNormalization")
class InstanceNormalization(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, scale, bias = inputs
        axes = list(range(2, rank_of(x)))
        return op.nn.instance_norm(x, scale, bias, channel_axis=1, axes=axes,
                                   epsilon=attrs.get("epsilon", 1e-5))


def _normalize(ctx, x, axes, epsilon):
    """(x - mean) / sqrt(var + epsilon) over ``axes``, with the mean and 1 / sqrt(var + epsilon)."""
    mean = ctx.emit(op.mean(x, axes, True))
    centered = ctx.emit(op.subtract(x, mean))
    var = op.mean(op.multiply(centered, centered), axes, True)
    inv_std = ctx.emit(op.rsqrt(op.add(var, scalar_like(epsilon, x))))
    return op.multiply(centered, inv_std), mean, inv_std


@converter("LayerNormalization")
class LayerNormalization(OnnxOpConverter):
    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        x, scale, bias = (inputs + [None])[:3]
        if attrs.get("stash_type", 1) != 1:
            raise Unsupported("stash_type other than float32")
        rank = rank_of(x)
        axes = list(range(normalize_axis(attrs.get("axis", -1), rank), rank))
        y, mean, inv_std = _normalize(ctx, x, axes, attrs.get("epsilon", 1e-5))
        y = op.multiply(ctx.emit(y), scale)
        return [y if bias is None else op.add(ctx.emit(y), bias), mean, inv_std]


@converter("RMSNormalization")
class RMSNormalization(OnnxOpConverter):
    @classmethod
    def _impl_v23(cls, ctx, inputs, attrs):
        x, scale = inputs
        if attrs.get("stash_type", 1) != 1:
            raise Unsupported("stash_type other than float32")
        rank = rank_of(x)
        axes = list(range(normalize_axis(attrs.get("axis", -1), rank), rank))
        square = op.mean(op.multiply(x, x), axes, True)
        inv_rms = ctx.emit(op.rsqrt(op.add(square, scalar_like(attrs.get("epsilon", 1e-5), x))))
        return op.multiply(ctx.emit(op.multiply(x, inv_rms)), scale)


@converter("GroupNormalization")
class GroupNormalization(OnnxOpConverter):
    """From opset 21 (scale and bias per channel; opset 18's were per group)."""

    @classmethod
    def _impl_v21(cls, ctx, inputs, attrs):
        x, scale, bias = inputs
        if attrs.get("stash_type", 1) != 1:
            raise Unsupported("stash_type other than float32")
        rank = rank_of(x)
        return op.nn.group_norm(x, scale, bias, num_groups=attrs["num_groups"], channel_axis=1,
                                axes=list(range(2, rank)), epsilon=attrs.get("epsilon", 1e-5))


@converter("LpNormalization")
class LpNormalization(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        axis, p = attrs.get("axis", -1), attrs.get("p", 2)
        if p not in (1, 2):
            raise Unsupported(f"p={p}")
        norm = op.sum(op.abs(x), [axis], True) if p == 1 else \
            op.sqrt(ctx.emit(op.sum(op.multiply(x, x), [axis], True)))
        norm = ctx.emit(norm)
        zero = scalar_like(0, x)  # (a zero norm gives zeros, not NaN)
        return op.where(op.equal(norm, zero), zero, ctx.emit(op.divide(x, norm)))


@converter("LpPool")
class LpPool(OnnxOpConverter):
    """(sum over the window of |x| ** p) ** (1 / p): an average pool that counts the padding,
    times the window's size."""

    @classmethod
    def _impl_v2(cls, ctx, inputs, attrs):
        x = inputs[0]
        kernel = _pool_kernel(attrs)
        n = len(kernel)
        p = float(attrs.get("p", 2))
        strides, dilations, pads = _window(attrs, x, kernel)
        pool = (op.nn.avg_pool1d, op.nn.avg_pool2d, op.nn.avg_pool3d)[n - 1]
        powered = ctx.emit(op.power(op.abs(x), scalar_like(p, x)))
        mean = pool(powered, pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                    ceil_mode=bool(attrs.get("ceil_mode", 0)), count_include_pad=True)
        total = op.multiply(ctx.emit(mean), scalar_like(math.prod(kernel), x))
        return op.power(ctx.emit(total), scalar_like(1 / p, x))


@converter("LRN")
class LRN(OnnxOpConverter):
    """x / (bias + alpha / size * (sum of squares over a window of channels)) ** beta."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        size = attrs["size"]
        alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
        dims = dims_of(x)
        rest = 1
        for d in dims[2:]:
            rest = rest * d
        # the channel window as a 2-d average pool over (C, rest), including the zero padding
        squares = op.reshape(op.multiply(x, x), [dims[0], 1, dims[1], rest])
        window = op.nn.avg_pool2d(ctx.emit(squares), pool_size=[size, 1],
                                  padding=[(size - 1) // 2, 0, size - 1 - (size - 1) // 2, 0],
                                  count_include_pad=True)
        total = op.reshape(ctx.emit(window), dims)
        scaled = op.add(scalar_like(bias, x), op.multiply(scalar_like(alpha, x), total))
        # x * exp(-beta * log(scaled)): the vectorized exp and log, where pow is one libm call per
        # element (the same value for every base, 0 and negative ones included)
        return op.multiply(x, op.exp(op.multiply(scalar_like(-beta, x), op.log(scaled))))


@converter("Gemm")
class Gemm(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("broadcast")  # (opset < 7: C broadcasts either way here)
        a, b, c = (inputs + [None])[:3]
        alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
        if attrs.get("transA", 0):
            a = op.permute_dims(a, [1, 0])
        if attrs.get("transB", 0):
            b = op.permute_dims(b, [1, 0])
        y = op.matmul(a, b)
        if alpha != 1.0:
            y = op.multiply(ctx.emit(y), scalar_like(alpha, a))
        if c is None:
            return y
        if beta != 1.0:
            c = op.multiply(c, scalar_like(beta, c))
        return op.add(ctx.emit(y), c)


@converter("MatMul")
class MatMul(OnnxOpConverter):
    """float16 products are summed in float32 and rounded once, as numpy (the reference)
    computes them (a float16 sum rounds at every step)."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        if dtype_of(inputs[0]) == "float16":
            return op.astype(ctx.emit(op.matmul(*inputs, out_dtype="float32")), "float16")
        return op.matmul(*inputs)


class _Softmax(OnnxOpConverter):
    """Before opset 13 the input is seen as 2-d, (dims before axis) x (dims from axis on)."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        axis = normalize_axis(attrs.get("axis", 1), rank_of(x))
        dims = dims_of(x)
        if axis == rank_of(x) - 1:
            return cls.relax(x, axis=-1)
        shape = static_shape(x)
        if shape is None:
            raise Unsupported("softmax over several axes of symbolic size")
        flat = op.reshape(x, [math.prod(shape[:axis]), math.prod(shape[axis:])])
        return op.reshape(ctx.emit(cls.relax(ctx.emit(flat), axis=-1)), dims)

    @classmethod
    def _impl_v13(cls, ctx, inputs, attrs):
        return cls.relax(inputs[0], axis=attrs.get("axis", -1))


def _softmax(x, axis):
    """float16 as the reference computes it: exp rounded to float16, summed in float32 and the
    sum rounded once (Relax's float16 softmax would sum in float16, rounding at every step)."""
    if dtype_of(x) != "float16":
        return op.nn.softmax(x, axis=axis)
    powers = op.exp(op.subtract(x, op.max(x, [axis], True)))
    return op.divide(powers, op.astype(op.sum(op.astype(powers, "float32"), [axis], True), "float16"))


converter("Softmax")(type("Softmax", (_Softmax,), {"relax": staticmethod(_softmax)}))
converter("LogSoftmax")(type("LogSoftmax", (_Softmax,), {"relax": staticmethod(op.nn.log_softmax)}))


@converter("Dropout")
class Dropout(OnnxOpConverter):
    """Inference: the identity (and an all-true mask)."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        attrs.ignore("consumed_inputs", "ratio")
        # (an explicit is_test=0 is refused; one left out is taken as inference, as
        # BatchNormalization takes it, though opsets 1-6 default to 0)
        if not attrs.get("is_test", 1) and ctx.opset < 7:
            raise Unsupported("is_test=0 (training)")
        return cls._identity(ctx, inputs[0])

    @classmethod
    def _impl_v12(cls, ctx, inputs, attrs):
        """Training mode drops at random (``onnx_ops_random.dropout``), unless the ratio is 0:
        then it is the identity too. A training_mode or ratio known only at run time is
        converted when it arrives."""
        training = inputs[2] if len(inputs) > 2 else None
        seed = attrs.get("seed")
        if training is not None and bool(required_value(training, "training_mode")):
            ratio = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
            rate = 0.5 if ratio is None else float(required_value(ratio, "the ratio in training mode"))
            if rate != 0:
                return dropout(ctx, inputs[0], rate, seed)
        return cls._identity(ctx, inputs[0])

    @staticmethod
    def _identity(ctx, x):
        return [x, op.ones_like(x, "bool")]


@converter("Flatten")
class Flatten(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        dims = dims_of(x)
        axis = attrs.get("axis", 1)
        axis = axis + len(dims) if axis < 0 else axis
        outer, inner = 1, 1
        for d in dims[:axis]:
            outer = outer * d
        for d in dims[axis:]:
            inner = inner * d
        return op.reshape(x, [outer, inner])


@converter("Hardmax")
class Hardmax(OnnxOpConverter):
    """1 where the first maximum along the axis is, else 0 (opset 13: one axis)."""

    @classmethod
    def _impl_v13(cls, ctx, inputs, attrs):
        x = inputs[0]
        rank = rank_of(x)
        axis = normalize_axis(attrs.get("axis", -1), rank)
        length = dims_of(x)[axis]
        if not isinstance(length, int):
            raise Unsupported("an axis of symbolic length")
        first = ctx.emit(op.argmax(x, axis, True))
        positions = ctx.constant(np.arange(length, dtype="int64").reshape([-1] + [1] * (rank - 1 - axis)))
        return op.astype(op.equal(op.astype(first, "int64"), positions), str(x.struct_info.dtype))


@converter("Swish")
class Swish(OnnxOpConverter):
    @classmethod
    def _impl_v24(cls, ctx, inputs, attrs):
        return swish(inputs[0], attrs.get("alpha", 1.0))


@converter("Shrink")
class Shrink(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x = inputs[0]
        lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
        low = op.where(op.less(x, scalar_like(-lambd, x)), op.add(x, scalar_like(bias, x)), scalar_like(0, x))
        return op.where(op.greater(x, scalar_like(lambd, x)), op.subtract(x, scalar_like(bias, x)),
                        ctx.emit(low))


def _nll(ctx, log_prob, target, weight, attrs):
    reduction = attrs.get("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise Unsupported(f"reduction={reduction!r}")
    ignore = attrs.get("ignore_index")
    if weight is None:
        weight = ctx.constant(np.ones(dims_of(log_prob)[1], str(log_prob.struct_info.dtype)))
    kwargs = {} if ignore is None else {"ignore_index": ignore}
    return op.nn.nll_loss(log_prob, target, weight, reduction=reduction, **kwargs)


@converter("NegativeLogLikelihoodLoss")
class NegativeLogLikelihoodLoss(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, ctx, inputs, attrs):
        x, target, weight = (inputs + [None])[:3]
        return _nll(ctx, x, target, weight, attrs)


@converter("SoftmaxCrossEntropyLoss")
class SoftmaxCrossEntropyLoss(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, ctx, inputs, attrs):
        x, target, weight = (inputs + [None])[:3]
        log_prob = ctx.emit(op.nn.log_softmax(x, axis=1))
        return [_nll(ctx, log_prob, target, weight, attrs), log_prob]
