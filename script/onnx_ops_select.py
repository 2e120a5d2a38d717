"""ONNX converters whose output size depends on the input values: ``NonMaxSuppression``,
``Unique`` and ``Compress``. They map onto the Relax operators whose result shapes are known only
at run time (R.vision.all_class_non_max_suppression, R.unique, R.nonzero)."""
from __future__ import annotations

import numpy as np

from ..ir import relax as rx
from .onnx_convert import OnnxOpConverter, as_dtype, converter, normalize_axis, rank_of
from .relax_op_api import op


@converter("NonMaxSuppression")
class NonMaxSuppression(OnnxOpConverter):
    """The selected (batch, class, box) rows: all-class NMS gives them padded to the largest
    possible count with their count, and a dynamic slice keeps the selected ones. ONNX suppresses
    a box whose overlap exceeds the threshold t, the Relax operator one whose overlap reaches it:
    the float32 next after t makes ">= next" mean "> t" for float32 overlaps: t * (1 + 1.5 * 2^-24)
    in float64 is between 0.75 and 1.5 float32 ulps above t, so it rounds to t + 1 ulp (and at least
    the smallest float32 above 0, for t = 0)."""

    @classmethod
    def _impl_v10(cls, ctx, inputs, attrs):
        boxes, scores = inputs[:2]
        if attrs.get("center_point_box", 0):  # (x_center, y_center, width, height) -> corners
            center = ctx.emit(op.strided_slice(boxes, [2], [0], [2]))
            half = ctx.emit(op.divide(ctx.emit(op.strided_slice(boxes, [2], [2], [4])),
                                      ctx.constant(2, str(boxes.struct_info.dtype))))
            boxes = ctx.emit(op.concat([ctx.emit(op.subtract(center, half)), ctx.emit(op.add(center, half))], axis=2))
        given = list(inputs[2:]) + [None] * (5 - len(inputs))
        # (omitted: no box kept, a threshold of 0 that keeps only disjoint boxes, no score threshold)
        limit, iou, threshold = (
            as_dtype(v, dtype) if v is not None else ctx.constant([default], dtype)
            for v, dtype, default in zip(given, ("int64", "float32", "float32"), (0, 0.0, -np.inf)))
        above = op.multiply(as_dtype(iou, "float64"), ctx.constant(1 + 1.5 * 2.0 ** -24))
        smallest = ctx.constant(np.finfo(np.float32).smallest_subnormal, "float64")
        iou = ctx.emit(op.astype(op.maximum(above, smallest), "float32"))
        found = ctx.emit(op.vision.all_class_non_max_suppression(boxes, scores, limit, iou, threshold, "onnx"))
        rows, count = (ctx.emit(rx.TupleGetItem(found, i)) for i in range(2))
        end = ctx.emit(op.concat([count, ctx.constant([3], "int64")], axis=0))
        return op.dynamic_strided_slice(rows, ctx.constant([0, 0], "int64"), end, ctx.constant([1, 1], "int64"))


@converter("Unique")
class Unique(OnnxOpConverter):
    """The unique values (of the flattened input, or slices along ``axis``), sorted or in order
    of first occurrence, with their first indices, the inverse indices and the counts."""

    @classmethod
    def _impl_v11(cls, ctx, inputs, attrs):
        x = inputs[0]
        axis = attrs.get("axis")
        if axis is not None:
            axis = normalize_axis(axis, rank_of(x))
        found = ctx.emit(op.unique(x, bool(attrs.get("sorted", 1)), True, True, True, axis))
        return [rx.TupleGetItem(found, i) for i in range(4)]


@converter("Compress")
class Compress(OnnxOpConverter):
    """The slices along ``axis`` (of the flattened input without one) whose condition is true;
    a condition shorter than the axis drops the slices past its end."""

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x, condition = inputs
        axis = attrs.get("axis")
        if axis is None:
            x, axis = ctx.emit(op.reshape(x, [-1])), 0
        else:
            axis = normalize_axis(axis, rank_of(x))
        chosen = ctx.emit(op.nonzero(as_dtype(condition, "bool")))
        return op.take(x, ctx.emit(op.squeeze(chosen, [0])), axis=axis)
