"""ONNX's image operators in Relax operators: ``Resize`` (and ``Upsample``), ``GridSample``, ``AffineGrid``,
``CenterCropPad``, ``Col2Im``, ``RoiAlign``; and ``ImageDecoder``, a run-time function.

Resize is separable: it interpolates one axis after the other, and along one axis the output is
an affine function of the input (``y = W x + c``, ``c`` being the extrapolation value where a
tf_crop_and_resize output falls outside). ``_axis_map`` computes ``W`` and ``c`` of each resized
axis from the operator's definition (coordinate transformation, then a kernel's taps around
the source coordinate, clamped to the edge), and the importer emits one matmul per axis (a
``take`` where ``W`` only picks input elements, as nearest mode does). The sizes, scales and
roi must be constants."""
from __future__ import annotations

import math

import numpy as np

from ..ir import relax as rx
from ..ir.relax_op import make_call
from ..ir.struct_info import TensorStructInfo
from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, check_size, converter, dims_of,
                           dtype_of, normalize_axis, rank_of, required_value, scalar_like)
from .onnx_ops_layers import grid_sample_zeros
from .relax_op_api import op


def _source_coordinates(transform, y, n, scale, out, roi):
    """Where output positions ``y`` of an axis of length ``n`` resized to ``out`` (``scale``
    times as long) sample the input, and which of them fall outside (tf_crop_and_resize only)."""
    width = scale * n  # (the unrounded output length: the coordinates divide by it)
    if transform == "align_corners":
        return (np.zeros(out) if width == 1 else y * (n - 1) / (width - 1)), None
    if transform == "asymmetric":
        return y / scale, None
    if transform == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(out, (hi - lo) * (n - 1) / 2) if width == 1 else y * (hi - lo) * (n - 1) / (width - 1)
        x = x + lo * (n - 1)
        return x, (x < 0) | (x > n - 1)
    if transform == "pytorch_half_pixel":
        return (np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if transform == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if transform == "half_pixel_symmetric":  # (the rounded output is centred on the input)
        return n / 2 * (1 - out / width) + (y + 0.5) / scale - 0.5, None
    raise Unsupported(f"coordinate_transformation_mode={transform!r}")


def _cubic(d, a):
    """The cubic convolution kernel of coefficient ``a`` at distances ``d``."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _tap_weights(attrs, ratio, scale):
    """(offsets, weights): the taps of each output at ``anchor + offset`` with their weights,
    ``ratio`` in (0, 1] being the source coordinate's distance past its anchor."""
    mode = attrs.get("mode", "nearest")
    if mode == "nearest":
        rule = attrs.get("nearest_mode", "round_prefer_floor")
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
              "floor": np.zeros_like(ratio, bool), "ceil": np.ones_like(ratio, bool)}.get(rule)
        if up is None:
            raise Unsupported(f"nearest_mode={rule!r}")
        up = up | (ratio == 1)  # (an integral coordinate is its own element)
        return np.arange(2), np.stack([~up, up], axis=1).astype("float64")
    if mode not in ("linear", "cubic"):
        raise Unsupported(f"mode={mode!r}")
    # (antialias widens the kernel by 1/scale when downscaling, and renormalises its taps)
    shrink = min(scale, 1.0) if attrs.get("antialias", 0) else 1.0
    reach = 1 if mode == "linear" else 2
    first = math.floor(-reach / shrink) + 1
    offsets = np.arange(first, 1 - first + 1)
    d = (offsets[None, :] - ratio[:, None]) * shrink
    if mode == "linear":
        weights = np.clip(1 - np.abs(d), 0, 1)
    else:
        weights = _cubic(d, float(attrs.get("cubic_coeff_a", -0.75)))
    if attrs.get("antialias", 0):
        weights = weights / weights.sum(axis=1, keepdims=True)
    return offsets, weights


def _axis_map(attrs, opset, n, scale=None, size=None, roi=None, aspect=None):
    """(W, c) of ONNX's Resize of one axis of input length ``n``: output j is
    sum_i W[i, j] x[i] + c[j]. ``aspect`` = (e, m): under a keep_aspect_ratio_policy, the one
    scale is that of another axis, of extent e asked for m, and the size is rounded half up."""
    if opset < 11:  # (opset 10's Resize, and Upsample: asymmetric coordinates, nearest rounds down)
        attrs = {**attrs, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    if aspect is not None:
        scale = aspect[1] / aspect[0]
        out = int(scale * n + 0.5)
    elif size is not None:
        scale, out = size / n, size
    else:
        out = math.floor(n * scale)
    check_size(n * out, f"the resize matrix of an axis of length {n} to {out}")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    x, outside = _source_coordinates(transform, np.arange(out, dtype="float64"), n, scale, out, roi)
    # (each output's taps sit around an anchor, the element below x; an integral x is
    # anchored one below itself, with ratio 1)
    below = np.floor(x)
    integral = x == below
    anchor = below.astype("int64") - integral
    ratio = np.where(integral, 1.0, x - below)
    offsets, weights = _tap_weights(attrs, ratio, scale)
    index = anchor[:, None] + offsets[None, :]
    if attrs.get("exclude_outside", 0):
        weights = np.where((index < 0) | (index >= n), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    matrix = np.zeros((n, out))
    columns = np.broadcast_to(np.arange(out)[:, None], index.shape)
    np.add.at(matrix, (np.clip(index, 0, n - 1), columns), weights)  # (edge elements repeat)
    offset = np.zeros(out)
    if outside is not None:
        matrix[:, outside] = 0.0
        offset[outside] = float(attrs.get("extrapolation_value", 0.0))
    return matrix, offset


@converter("Resize")
class Resize(OnnxOpConverter):
    # (the attributes that define one axis's map)
    _FORWARDED = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                  "extrapolation_value", "nearest_mode", "antialias")

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, roi, scales, sizes = cls._inputs(ctx, inputs)
        shape = dims_of(x)
        rank = len(shape)
        if not all(isinstance(d, int) for d in shape):
            raise Unsupported("Resize of an input of symbolic shape")
        axes = [normalize_axis(a, rank) for a in attrs.get("axes", range(rank))]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        aspect = None
        if policy != "stretch" and sizes is not None:
            aspect = cls._keep_aspect_ratio(policy, [shape[a] for a in axes], sizes, roi)
        forwarded = {k: attrs[k] for k in cls._FORWARDED if k in attrs}
        y = x
        for i, axis in enumerate(axes):
            n = shape[axis]
            scale = None if scales is None else float(scales[i])
            size = None if sizes is None else int(sizes[i])
            window = None if roi is None else (float(roi[i]), float(roi[len(axes) + i]))
            decided = None if aspect in (None, i) else (shape[axes[aspect]], int(sizes[aspect]))
            if (size == n or scale == 1.0) and window in (None, (0.0, 1.0)) and decided is None:
                continue
            weights, offset = _axis_map(forwarded, ctx.opset, n, scale, size, window, decided)
            y = cls._apply(ctx, y, axis, weights, offset)
        return as_dtype(y, dtype_of(x))

    @staticmethod
    def _keep_aspect_ratio(policy, extents, sizes, roi):
        """The index of the axis whose ratio of size to extent is the one scale of every axis
        (ONNX: the smallest for not_larger, the largest for not_smaller): that axis is
        resized to its size, the others with its scale (``_axis_map``'s ``aspect``)."""
        if policy not in ("not_larger", "not_smaller"):
            raise Unsupported(f"keep_aspect_ratio_policy={policy!r}")
        if roi is not None:
            raise Unsupported(f"keep_aspect_ratio_policy={policy!r} with a roi")
        ratios = [int(size) / n for size, n in zip(sizes, extents)]
        return int(np.argmin(ratios) if policy == "not_larger" else np.argmax(ratios))

    @staticmethod
    def _inputs(ctx, inputs):
        """(x, roi, scales, sizes) with the constants as numpy arrays (opset 10 has only scales)."""
        if ctx.opset < 11:
            x, scales = inputs
            roi = sizes = None
        else:
            x, roi, scales, sizes = (inputs + [None] * 3)[:4]
        roi, scales, sizes = (None if v is None else required_value(v, name)
                              for v, name in ((roi, "roi"), (scales, "scales"), (sizes, "sizes")))
        roi = None if roi is None or roi.size == 0 else roi
        scales = None if scales is None or scales.size == 0 else scales
        sizes = None if sizes is None or sizes.size == 0 else sizes
        if (scales is None) == (sizes is None):
            raise Unsupported("exactly one of scales and sizes must be given")
        return x, roi, scales, sizes

    @staticmethod
    def _apply(ctx, y, axis, weights, offset):
        """Along ``axis``: y' = weights^T y + offset (a gather when each output element copies
        one input element)."""
        picks = weights.argmax(axis=0)
        if not offset.any() and np.array_equal(weights, np.eye(len(weights))[:, picks]):
            return ctx.emit(op.take(y, ctx.constant(picks.astype("int64")), axis=axis))
        rank = len(dims_of(y))
        order = [a for a in range(rank) if a != axis] + [axis]
        back = [order.index(a) for a in range(rank)]
        moved = ctx.emit(op.permute_dims(as_dtype(y, "float64"), order))
        mixed = ctx.emit(op.matmul(moved, ctx.constant(weights)))
        if offset.any():
            mixed = ctx.emit(op.add(mixed, ctx.constant(offset)))
        return ctx.emit(op.permute_dims(mixed, back))


@converter("Upsample")
class Upsample(OnnxOpConverter):
    """Resize as opset 10 defined it (Upsample's semantics); the scales are an attribute in
    opset 7 and an input from opset 9 on, and the operator is gone from opset 10."""

    @classmethod
    def _impl_v7(cls, ctx, inputs, attrs):
        scales = ctx.constant(np.asarray(attrs["scales"], dtype="float32"))
        return cls._impl_v9(ctx, [inputs[0], scales], attrs)

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        return Resize._impl_v10(ctx, inputs, attrs)

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        raise Unsupported("Upsample is deprecated from opset 10 on (Resize replaces it)")


@converter("GridSample")
class GridSample(OnnxOpConverter):
    """Relax's image.grid_sample, whose grid has its coordinates on axis 1 (ONNX's on the last)."""

    _METHODS = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest"}

    @classmethod
    def _impl_v16(cls, ctx, inputs, attrs):
        x, grid = inputs
        mode = attrs.get("mode", "linear" if ctx.opset >= 20 else "bilinear")
        padding = attrs.get("padding_mode", "zeros")
        rank = len(dims_of(x))
        # (tvms's image.grid_sample computes bilinear and nearest sampling of 4-d data; other
        # ranks and cubic sampling with zeros padding gather their taps)
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        if padding == "zeros" and (rank != 4 or mode == "cubic") and mode in ("linear", "nearest", "cubic"):
            return grid_sample_zeros(ctx, x, grid, mode, bool(attrs.get("align_corners", 0)))
        if mode not in ("linear", "nearest") or rank != 4 or padding not in ("zeros", "border", "reflection"):
            raise Unsupported(f"mode={mode!r}, padding_mode={padding!r} on a rank-{rank} input "
                              f"(bilinear and nearest on 4-d inputs are, and any mode with zeros padding)")
        grid = ctx.emit(op.permute_dims(grid, [0, 3, 1, 2]))
        return op.image.grid_sample(x, grid, method=cls._METHODS[mode], layout="NCHW",
                                    padding_mode=padding, align_corners=bool(attrs.get("align_corners", 0)))


@converter("AffineGrid")
class AffineGrid(OnnxOpConverter):
    """Relax's image.affine_grid, whose grid has its coordinates on axis 1 (ONNX's on the last)."""

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        theta, size = inputs
        size = [int(s) for s in required_value(size, "size")[2:]]
        grid = ctx.emit(op.image.affine_grid(theta, size, align_corners=bool(attrs.get("align_corners", 0))))
        return op.permute_dims(grid, [0] + list(range(2, len(size) + 2)) + [1])


@converter("CenterCropPad")
class CenterCropPad(OnnxOpConverter):
    """Each listed axis cropped or zero-padded to its target length, centred (the odd element
    goes to the end)."""

    @classmethod
    def _impl_v18(cls, ctx, inputs, attrs):
        x, shape = inputs
        dims = dims_of(x)
        rank = len(dims)
        axes = [normalize_axis(a, rank) for a in attrs.get("axes", range(rank))]
        targets = [int(t) for t in required_value(shape, "shape")]
        if len(targets) != len(axes):
            raise Unsupported(f"{len(targets)} target lengths for {len(axes)} axes")
        width = [0] * (2 * rank)
        for axis, target in zip(axes, targets):
            size = dims[axis]
            if not isinstance(size, int):
                raise Unsupported("a symbolic length on a cropped or padded axis")
            if target < size:
                begin = (size - target) // 2
                x = ctx.emit(op.strided_slice(x, axes=[axis], begin=[begin], end=[begin + target]))
            else:
                width[2 * axis] = (target - size) // 2
                width[2 * axis + 1] = target - size - width[2 * axis]
        return op.nn.pad(x, width) if any(width) else x


@converter("Col2Im")
class Col2Im(OnnxOpConverter):
    """The inverse of im2col: column ``(c, kernel offset)`` of each sliding block is added into
    the image pixel it came from (a scatter-add along a flattened image whose index map is
    computed at import time; taps that fall into the padding go to a dropped extra pixel)."""

    @classmethod
    def _impl_v18(cls, ctx, inputs, attrs):
        x, image, block = inputs
        image = [int(v) for v in required_value(image, "image_shape")]
        kernel = [int(v) for v in required_value(block, "block_shape")]
        n = len(image)
        dilations = list(attrs.get("dilations", [1] * n))
        strides = list(attrs.get("strides", [1] * n))
        pads = list(attrs.get("pads", [0] * 2 * n))
        batch, rows, length = dims_of(x)
        taps = int(np.prod(kernel))
        if not isinstance(rows, int) or rows % taps:
            raise Unsupported(f"{rows} input rows for a kernel of {taps} elements")
        blocks = [(image[i] + pads[i] + pads[n + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
                  for i in range(n)]
        if int(np.prod(blocks)) != length:
            raise Unsupported(f"{length} blocks, but the image and block shapes make {int(np.prod(blocks))}")
        # position of each (kernel offset, block) pair along every image axis
        offsets = np.indices(kernel).reshape(n, -1, 1)
        starts = np.indices(blocks).reshape(n, 1, -1)
        pos = starts * np.array(strides).reshape(n, 1, 1) - np.array(pads[:n]).reshape(n, 1, 1) \
            + offsets * np.array(dilations).reshape(n, 1, 1)
        inside = np.all((pos >= 0) & (pos < np.array(image).reshape(n, 1, 1)), axis=0)
        pixels = int(np.prod(image))
        flat = np.where(inside, np.ravel_multi_index(tuple(np.clip(pos, 0, None)), image, mode="clip"), pixels)
        channels = rows // taps
        cols = ctx.emit(op.reshape(x, [batch, channels, taps * length]))
        index = ctx.emit(op.broadcast_to(ctx.constant(flat.reshape(1, 1, -1).astype("int64")),
                                         [batch, channels, taps * length]))
        canvas = ctx.emit(op.zeros([batch, channels, pixels + 1], dtype_of(x)))
        summed = ctx.emit(op.scatter_elements(canvas, index, cols, axis=2, reduction="add"))
        summed = ctx.emit(op.strided_slice(summed, axes=[2], begin=[0], end=[pixels]))
        return op.reshape(summed, [batch, channels] + image)


@converter("RoiAlign")
class RoiAlign(OnnxOpConverter):
    """Relax's vision.roi_align, whose regions carry their batch index in a first column."""

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        x, rois, batch_indices = inputs
        default = "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
        transform = attrs.get("coordinate_transformation_mode", default)
        if transform not in ("half_pixel", "output_half_pixel"):
            raise Unsupported(f"coordinate_transformation_mode={transform!r}")
        mode = attrs.get("mode", "avg")
        scale = float(attrs.get("spatial_scale", 1.0))
        half_pixel = transform == "half_pixel"
        ratio = attrs.get("sampling_ratio", 0)
        pooled = [attrs.get("output_height", 1), attrs.get("output_width", 1)]
        if mode == "max":
            return _roi_align_max(ctx, x, rois, batch_indices, pooled, scale, ratio, half_pixel)
        if mode != "avg":
            raise Unsupported(f"mode={mode!r}")
        if half_pixel:  # (Relax's ``aligned`` only drops the clamp of the size to 1: shift by half a pixel here)
            rois = ctx.emit(op.subtract(rois, scalar_like(0.5 / scale, rois)))
        index = op.expand_dims(as_dtype(batch_indices, dtype_of(rois)), axis=1)
        regions = ctx.emit(op.concat([index, rois], axis=1))
        return op.vision.roi_align(x, regions, pooled_size=pooled, spatial_scale=scale,
                                   sample_ratio=ratio if ratio > 0 else -1, aligned=half_pixel)


def _roi_align_max(ctx, x, rois, batch_indices, pooled, scale, ratio, half_pixel):
    """RoiAlign's max mode as ONNX defines it (onnxruntime's, which the reference follows): per
    sample point, the largest of its four bilinear terms (corner value times weight, not the
    interpolated value that Relax's max mode takes), then the largest over the bin's ratio x
    ratio samples. The sample rows and columns of every region are computed in Relax (rows
    and columns side by side, low and high corners stacked), the corners gathered from the
    flattened input."""
    if ratio <= 0:
        raise Unsupported("mode='max' with sampling_ratio 0 (a grid that each region's size decides)")
    dims = dims_of(x)
    if not all(isinstance(d, int) for d in dims[1:]):
        raise Unsupported(f"mode='max' on an input of shape {dims} (channels, height and width static)")
    _, channels, height, width = dims
    e, dtype = ctx.emit, dtype_of(x)
    rows, cols = pooled[0] * ratio, pooled[1] * ratio

    def num(value):
        return ctx.constant(np.asarray(value, dtype))

    def side_by_side(for_rows, for_cols):
        return np.array([for_rows] * rows + [for_cols] * cols)

    box = e(op.subtract(e(op.multiply(rois, num(scale))), num(0.5 if half_pixel else 0.0)))  # x1 y1 x2 y2
    start = e(op.take(box, ctx.constant(side_by_side(1, 0)), axis=1))  # (regions, rows + cols)
    size = e(op.subtract(e(op.take(box, ctx.constant(side_by_side(3, 2)), axis=1)), start))
    if not half_pixel:  # (a malformed region is taken as 1 x 1)
        size = e(op.maximum(size, num(1.0)))
    steps = [np.add.outer(np.arange(n), (np.arange(ratio) + 0.5) / ratio).reshape(-1) / n for n in pooled]
    pos = e(op.add(start, e(op.multiply(size, num(np.concatenate(steps))))))
    extent = num(side_by_side(height, width))
    inside = e(op.astype(e(op.logical_and(e(op.greater_equal(pos, num(-1.0))), e(op.less_equal(pos, extent)))), dtype))
    pos = e(op.maximum(pos, num(0.0)))
    last = num(side_by_side(height - 1, width - 1))
    edge = e(op.greater_equal(e(op.floor(pos)), last))
    low = e(op.where(edge, last, e(op.floor(pos))))
    high = e(op.where(edge, low, e(op.add(low, num(1.0)))))
    frac = e(op.subtract(e(op.where(edge, low, pos)), low))
    index = e(op.astype(e(op.stack([low, high], axis=1)), "int64"))  # (regions, 2, rows + cols)
    weight = e(op.stack([e(op.multiply(e(op.subtract(num(1.0), frac)), inside)), e(op.multiply(frac, inside))], axis=1))

    def split(v, axes):  # (the rows, the columns) with axes added for (row corner, column corner)
        r = e(op.strided_slice(v, [2], [0], [rows]))
        c = e(op.strided_slice(v, [2], [rows], [rows + cols]))
        return e(op.expand_dims(r, axes[0])), e(op.expand_dims(c, axes[1]))

    row_at, col_at = split(index, ([2, 4], [1, 3]))  # (regions, 2, 1, rows, 1), (regions, 1, 2, 1, cols)
    row_weight, col_weight = split(weight, ([2, 4], [1, 3]))
    at = e(op.add(e(op.multiply(row_at, ctx.constant(width, "int64"))), col_at))  # (regions, 2, 2, rows, cols)
    plane = e(op.multiply(as_dtype(batch_indices, "int64"), ctx.constant(channels, "int64")))
    plane = e(op.add(e(op.expand_dims(plane, [1])), ctx.constant(np.arange(channels))))  # (regions, channels)
    base = e(op.expand_dims(e(op.multiply(plane, ctx.constant(height * width, "int64"))), [2, 3, 4, 5]))
    values = e(op.take(e(op.reshape(x, [-1])), e(op.add(base, e(op.expand_dims(at, [1])))), axis=0))
    terms = e(op.multiply(values, e(op.expand_dims(e(op.multiply(row_weight, col_weight)), [1]))))
    best = e(op.max(terms, [2, 3]))  # (regions, channels, rows, cols)
    grid = e(op.reshape(best, [-1, channels, pooled[0], ratio, pooled[1], ratio]))
    return op.max(grid, [3, 5])


@converter("ImageDecoder")
class ImageDecoder(OnnxOpConverter):
    """The bytes of an image file (1-D uint8) decoded at run time by ``tvms.image.decode``
    (``runtime/image_decode.py``, with Pillow) into (height, width, channels) uint8: a size only
    the data gives, so the result's rank alone is known here."""

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        x = inputs[0]
        if dtype_of(x) != "uint8" or rank_of(x) != 1:
            raise Unsupported(f"an encoded stream of {dtype_of(x)} and rank {rank_of(x)} (ONNX takes 1-D uint8)")
        pixel_format = attrs.get("pixel_format", "RGB")
        if pixel_format not in ("RGB", "BGR", "Grayscale"):
            raise Unsupported(f"the pixel_format {pixel_format!r} (RGB, BGR or Grayscale)")
        return make_call("call_pure_packed", [rx.ExternFunc("tvms.image.decode"), x, rx.StringImm(pixel_format)],
                         {}, (TensorStructInfo(dtype="uint8", ndim=3),))
