"""Numpy references of sort, argsort, topk and median (registered into ``NUMPY_OPS`` when
``numpy_ops`` imports this module). Sorting is stable in both directions, as TVM's kernels are:
equal values keep their order."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.registry import register_func
from .numpy_ops import numpy_op
from .tir_values import numpy_dtype


def _argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # stable descending: sort the reversed array ascending, then reverse the order back
    n = x.shape[axis]
    return np.flip(n - 1 - np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)


@numpy_op("sort")
def sort(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    return np.take_along_axis(x, _argsort(x, attrs["axis"], attrs["descending"]), attrs["axis"])


@numpy_op("argsort")
def argsort(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    dtype = numpy_dtype(attrs["dtype"]) if attrs["dtype"] is not None else x.dtype
    return _argsort(x, attrs["axis"], attrs["descending"]).astype(dtype)


@numpy_op("topk")
def topk(args: tuple, attrs: Any) -> Any:
    x = np.asarray(args[0])
    axis = attrs["axis"] % x.ndim
    k = attrs["k"] if 0 < attrs["k"] < x.shape[axis] else x.shape[axis]
    order = np.take(_argsort(x, axis, attrs["largest"]), np.arange(k), axis=axis)
    values = np.take_along_axis(x, order, axis)
    indices = order.astype(numpy_dtype(attrs["dtype"]) if attrs["dtype"] is not None else x.dtype)
    return {"both": (values, indices), "values": values, "indices": indices}[attrs["ret_type"]]


@numpy_op("median")
def median(args: tuple, attrs: Any) -> Any:
    """The lower median (the element at (n - 1) // 2 in sorted order); along one axis also its
    int64 index there."""
    x = np.asarray(args[0])
    axis, keepdims = attrs["axis"], attrs["keepdims"]
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    kept = [a for a in range(x.ndim) if a not in axes]
    # the reduced axes moved last and flattened into one
    flat = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [-1])
    order = np.argsort(flat, axis=-1, kind="stable")
    mid = np.take(order, [(flat.shape[-1] - 1) // 2], axis=-1)
    values = np.take_along_axis(flat, mid, -1)[..., 0]
    out_shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keepdims else values.shape
    values = values.reshape(out_shape)
    if axis is None or len(axes) > 1:
        return values
    return values, mid[..., 0].reshape(out_shape).astype(np.int64)


@numpy_op("unique")
def unique(args: tuple, attrs: Any = None) -> Any:
    """numpy's unique (flattened unless an axis is given); unsorted: in order of first occurrence,
    with the indices, inverse and counts following that order, as TVM's relax.run.unique does."""
    x = np.asarray(args[0])
    keep_sorted, *wanted = (bool(v) for v in args[1:5])
    axis = int(args[5]) if len(args) > 5 and args[5] is not None else None
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not keep_sorted:
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    outs = [values] + [a.astype(np.int64) for f, a in zip(wanted, (first, inverse, counts)) if f]
    return outs[0] if len(outs) == 1 else tuple(outs)


@numpy_op("nonzero")
def nonzero(args: tuple, attrs: Any = None) -> np.ndarray:
    return np.stack(np.atleast_1d(np.asarray(args[0])).nonzero()).astype(np.int64)


# (the runtime functions TVM's LegalizeOps calls for them, lowering/relax/legalize_sort.py)
register_func("relax.run.unique")(lambda *args: unique(args))
register_func("relax.run.nonzero")(lambda x: nonzero((x,)))
