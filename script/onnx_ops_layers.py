"""ONNX layers composed of other Relax operators: ``MeanVarianceNormalization``, ``MaxUnpool``
(a scatter into zeros) and ``DeformConv`` (bilinear samples gathered at the offset positions,
then a grouped matmul with the weights)."""
from __future__ import annotations

import math

import numpy as np

from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dtype_of, required_value,
                           scalar_like, static_shape)
from .onnx_ops_nn import _add_channel_bias
from .relax_op_api import op


@converter("MeanVarianceNormalization")
class MeanVarianceNormalization(OnnxOpConverter):
    """(X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over ``axes``, as ONNX's function body."""

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x = inputs[0]
        axes = list(attrs.get("axes", [0, 2, 3]))
        mean = ctx.emit(op.mean(x, axes, True))
        mean_square = ctx.emit(op.mean(ctx.emit(op.multiply(x, x)), axes, True))
        variance = ctx.emit(op.subtract(mean_square, ctx.emit(op.multiply(mean, mean))))
        std = ctx.emit(op.add(ctx.emit(op.sqrt(variance)), scalar_like(1e-9, x)))
        return op.divide(ctx.emit(op.subtract(x, mean)), std)


@converter("MaxUnpool")
class MaxUnpool(OnnxOpConverter):
    """Each value written at its index into the flattened zeros of the unpooled shape
    ((in - 1) * stride - pads + kernel per spatial axis), placed at the start of
    ``output_shape`` when one is given (as the reference places it)."""

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x, indices = inputs[:2]
        shape = static_shape(x)
        kernel = list(attrs["kernel_shape"])
        if shape is None:
            raise Unsupported("an input of symbolic shape")
        n = len(kernel)
        strides = list(attrs.get("strides", [1] * n))
        pads = list(attrs.get("pads", [0] * 2 * n))
        unpooled = shape[:2] + [(d - 1) * s - (pads[i] + pads[n + i]) + k
                                for i, (d, s, k) in enumerate(zip(shape[2:], strides, kernel))]
        zeros = ctx.constant(np.zeros(math.prod(unpooled), dtype_of(x)))
        flat = ctx.emit(op.scatter_elements(zeros, ctx.emit(op.reshape(as_dtype(indices, "int64"), [-1])),
                                            ctx.emit(op.reshape(x, [-1])), 0))
        y = ctx.emit(op.reshape(flat, unpooled))
        if len(inputs) < 3 or inputs[2] is None:
            return y
        out = [int(d) for d in required_value(inputs[2], "output_shape")]
        if len(out) != len(unpooled) or any(o < u for o, u in zip(out, unpooled)):
            raise Unsupported(f"output_shape {out} smaller than the unpooled shape {unpooled}")
        return op.nn.pad(y, [v for o, u in zip(out, unpooled) for v in (0, o - u)])


@converter("DeformConv")
class DeformConv(OnnxOpConverter):
    """A 2-d convolution whose kernel taps sample the input at positions moved by ``offset``
    (per offset group, tap and output position: (dy, dx)), by bilinear interpolation with zeros
    outside (``sample_zeros``), each sample scaled by ``mask``: the samples of each (channel,
    tap) are the columns of an im2col matrix that the grouped weights multiply."""

    @classmethod
    def _impl_v19(cls, ctx, inputs, attrs):
        x, w, offset, bias, mask = (list(inputs) + [None] * 5)[:5]
        xs, ws, offs = static_shape(x), static_shape(w), static_shape(offset)
        if xs is None or ws is None or offs is None or len(xs) != 4:
            raise Unsupported("a deformable convolution other than 2-d with static shapes")
        n, channels, height, width = xs
        out_channels, group_channels = ws[:2]
        oh, ow = offs[2:]
        group, offset_group = attrs.get("group", 1), attrs.get("offset_group", 1)
        kh, kw = attrs.get("kernel_shape", ws[2:])
        taps = kh * kw
        sh, sw = attrs.get("strides", [1, 1])
        dh, dw = attrs.get("dilations", [1, 1])
        pads = attrs.get("pads", [0, 0, 0, 0])
        dtype = dtype_of(x)
        per_offset = channels // offset_group
        # the sampled positions (n, offset group, tap, oh * ow): the tap's place in the window
        # at each output position, plus its offset
        offset = ctx.emit(op.reshape(offset, [n, offset_group, taps, 2, oh * ow]))
        base = np.stack(np.meshgrid(np.arange(oh) * sh - pads[0], np.arange(ow) * sw - pads[1], indexing="ij"))
        tap = np.stack(np.meshgrid(np.arange(kh) * dh, np.arange(kw) * dw, indexing="ij")).reshape(2, taps, 1)
        places = (base.reshape(2, 1, oh * ow) + tap).astype(dtype)
        # each offset group's channels sampled bilinearly at its positions (a batch of n * groups)
        coords = []
        for i in range(2):
            moved = ctx.emit(op.strided_slice(offset, [3], [i], [i + 1]))
            moved = ctx.emit(op.reshape(moved, [n * offset_group, taps, oh * ow]))
            coords.append(ctx.emit(op.add(moved, ctx.constant(places[i]))))
        data = ctx.emit(op.reshape(x, [n * offset_group, per_offset, height, width]))
        sampled = ctx.emit(op.reshape(ctx.emit(sample_zeros(ctx, data, coords, "linear")),
                                      [n, offset_group, per_offset, taps, oh * ow]))
        if mask is not None:
            mask = ctx.emit(op.reshape(mask, [n, offset_group, 1, taps, oh * ow]))
            sampled = ctx.emit(op.multiply(sampled, mask))
        columns = ctx.emit(op.reshape(sampled, [n, group, group_channels * taps, oh * ow]))
        weights = ctx.emit(op.reshape(w, [1, group, out_channels // group, group_channels * taps]))
        y = ctx.emit(op.reshape(ctx.emit(op.matmul(weights, columns)), [n, out_channels, oh, ow]))
        return _add_channel_bias(y, bias) if bias is not None else y


# the taps along one axis from the floor of the coordinate, and their weights as polynomials
# in the fraction f (highest power first, one coefficient per tap): linear 1 - f, f; cubic Keys's
# convolution (alpha -0.75) at the distances 1 + f, f, 1 - f, 2 - f, expanded in f
_ALPHA = -0.75
_TAPS = {"linear": ([0, 1], [[-1, 1], [1, 0]]),
         "cubic": ([-1, 0, 1, 2], [[_ALPHA, -2 * _ALPHA, _ALPHA, 0], [_ALPHA + 2, -(_ALPHA + 3), 0, 1],
                                   [-(_ALPHA + 2), 2 * _ALPHA + 3, -_ALPHA, 0], [-_ALPHA, _ALPHA, 0, 0]])}


def grid_sample_zeros(ctx, x, grid, mode, align_corners):
    """GridSample with zeros padding of any spatial rank: ``grid`` (N, *out, rank) lists the
    normalized coordinates last axis first."""
    dims = static_shape(x)
    if dims is None:
        raise Unsupported("a grid sample of symbolic shape")
    rank = len(dims) - 2
    one = scalar_like(1, grid)
    coords = []
    for axis, size in enumerate(dims[2:]):
        at = [rank - 1 - axis]
        coord = ctx.emit(op.squeeze(ctx.emit(op.strided_slice(grid, [rank + 1], at, [at[0] + 1])), [rank + 1]))
        if align_corners:
            coord = ctx.emit(op.multiply(ctx.emit(op.add(coord, one)), scalar_like((size - 1) / 2, grid)))
        else:
            scaled = ctx.emit(op.multiply(ctx.emit(op.add(coord, one)), scalar_like(size, grid)))
            coord = ctx.emit(op.divide(ctx.emit(op.subtract(scaled, one)), scalar_like(2, grid)))
        coords.append(coord)
    return sample_zeros(ctx, x, coords, mode)


def sample_zeros(ctx, x, coords, mode):
    """``x`` (N, C, *spatial) sampled at the pixel coordinates ``coords`` (one (N, *out) tensor
    per spatial axis), zero outside: along each axis the taps (nearest: 1, linear: 2, cubic: 4)
    and their weights, their combinations' flat indices gathered from the input (a tap outside
    reads 0) and summed with the products of the weights. Gives (N, C, *out)."""
    dims, out = static_shape(x), static_shape(coords[0])
    if dims is None or out is None:
        raise Unsupported("a sample of symbolic shape")
    spatial, rank = dims[2:], len(dims) - 2
    count = math.prod(out[1:])
    dtype = dtype_of(coords[0])
    flat = weight = inside = None
    for axis, (size, coord) in enumerate(zip(spatial, coords)):
        shape = out + [1] * axis + [1]  # (this axis's taps on a new last axis)
        if mode == "nearest":
            tap, w = ctx.emit(op.reshape(ctx.emit(op.round(coord)), shape)), None
        else:
            offsets, polys = _TAPS[mode]
            low = ctx.emit(op.reshape(ctx.emit(op.floor(coord)), shape))
            f = ctx.emit(op.subtract(ctx.emit(op.reshape(coord, shape)), low))
            tap = ctx.emit(op.add(low, ctx.constant(np.array(offsets, dtype))))
            coeffs = np.array(polys, dtype).T  # (power, tap)
            w = ctx.constant(coeffs[0])
            for c in coeffs[1:]:  # (Horner)
                w = ctx.emit(op.add(ctx.emit(op.multiply(w, f)), ctx.constant(c)))
        where = [len(out) + axis]
        valid = ctx.emit(op.logical_and(ctx.emit(op.greater_equal(tap, ctx.constant(0, dtype))),
                                        ctx.emit(op.less_equal(tap, ctx.constant(size - 1, dtype)))))
        index = ctx.emit(op.multiply(tap, ctx.constant(math.prod(spatial[axis + 1:]), dtype)))
        flat = index if flat is None else ctx.emit(op.add(ctx.emit(op.expand_dims(flat, where)), index))
        inside = valid if inside is None else ctx.emit(op.logical_and(ctx.emit(op.expand_dims(inside, where)), valid))
        if w is not None:
            weight = w if weight is None else ctx.emit(op.multiply(ctx.emit(op.expand_dims(weight, where)), w))
    taps = math.prod(static_shape(flat)[len(out):])
    index = ctx.emit(op.where(inside, ctx.emit(op.astype(flat, "int64")), ctx.constant(0, "int64")))
    index = ctx.emit(op.broadcast_to(ctx.emit(op.reshape(index, [dims[0], 1, count * taps])),
                                     [dims[0], dims[1], count * taps]))
    data = ctx.emit(op.reshape(x, [dims[0], dims[1], math.prod(spatial)]))
    value = ctx.emit(op.gather_elements(data, index, 2))
    scale = ctx.emit(op.astype(inside, dtype_of(x))) if weight is None else \
        ctx.emit(op.where(inside, weight, ctx.constant(0, dtype)))
    value = ctx.emit(op.multiply(value, ctx.emit(op.reshape(scale, [dims[0], 1, count * taps]))))
    summed = ctx.emit(op.sum(ctx.emit(op.reshape(value, [dims[0], dims[1], count, taps])), [3]))
    return op.reshape(summed, dims[:2] + out[1:])
