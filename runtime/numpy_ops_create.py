"""Numpy references for the operators of ``ir/relax_ops_create.py`` (clip, tril/triu, arange,
eye/eye_like, hamming_window, one_hot, cumsum/cumprod, outer, ewise_fma, size, bucketize, multinomial_from_uniform, meshgrid).

Scalar arguments arrive as the reference executor evaluates ``R.prim_value``: numpy scalars for
floats (their dtype kept), Python ints for integers (taken as int64, what ``R.prim_value(1)`` is).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .numpy_ops import numpy_op
from .tir_values import numpy_dtype


def _typed(value: Any) -> np.ndarray:
    """A scalar argument as a 0-d array of its TensorIR dtype."""
    if isinstance(value, (bool, np.bool_)):
        return np.asarray(value, dtype=bool)
    if isinstance(value, int):
        return np.asarray(value, dtype=np.int64)
    return np.asarray(value)


@numpy_op("clip")
def clip(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    # the bounds take the tensor's type first, as a C cast would (a float bound truncates)
    lo, hi = (np.trunc(b) if x.dtype.kind in "iu" else b for b in (args[1], args[2]))
    lo, hi = np.asarray(lo).astype(x.dtype), np.asarray(hi).astype(x.dtype)
    return np.maximum(np.minimum(x, hi), lo)


numpy_op("tril")(lambda args, attrs: np.tril(np.asarray(args[0]), int(args[1])))
numpy_op("triu")(lambda args, attrs: np.triu(np.asarray(args[0]), int(args[1])))


@numpy_op("arange")
def arange(args: tuple, attrs: Any) -> np.ndarray:
    return np.arange(*args, dtype=numpy_dtype(attrs["dtype"]))


@numpy_op("eye")
def eye(args: tuple, attrs: Any) -> np.ndarray:
    n, m, k = (int(a) for a in args)
    return np.eye(n, m, k, dtype=numpy_dtype(attrs["dtype"]))


@numpy_op("eye_like")
def eye_like(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    dtype = numpy_dtype(attrs["dtype"]) if attrs["dtype"] is not None else x.dtype
    return np.eye(x.shape[0], x.shape[1], int(args[1]), dtype=dtype)


@numpy_op("one_hot")
def one_hot(args: tuple, attrs: Any) -> np.ndarray:
    indices = np.asarray(args[0])
    on, off = _typed(args[1]), _typed(args[2])
    hot = indices[..., None] == np.arange(attrs["depth"])
    hot = np.moveaxis(hot, -1, attrs["axis"] % (indices.ndim + 1))
    return np.where(hot, on, off).astype(on.dtype)


@numpy_op("outer")
def outer(args: tuple, attrs: Any) -> np.ndarray:
    return np.multiply.outer(np.asarray(args[0]), np.asarray(args[1]))


@numpy_op("meshgrid")
def meshgrid(args: tuple, attrs: Any) -> tuple:
    return tuple(np.meshgrid(*(np.asarray(t) for t in args[0]), indexing=attrs["indexing"]))


def _scan(ufunc: np.ufunc, identity: int) -> Any:
    def scan(args: tuple, attrs: Any) -> np.ndarray:
        x = np.asarray(args[0])
        if attrs["dtype"] is not None:
            x = x.astype(numpy_dtype(attrs["dtype"]))
        axis = attrs["axis"]
        if axis is None:  # over the flattened input
            x, axis = x.reshape(-1), 0
        out = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
        if attrs["exclusive"]:  # each element without itself: shifted by one, the identity first
            first = np.full_like(np.take(out, [0], axis=axis), identity)
            out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
        return out
    return scan


numpy_op("cumsum")(_scan(np.add, 0))
numpy_op("cumprod")(_scan(np.multiply, 1))
numpy_op("ewise_fma")(lambda args, attrs: np.asarray(args[0]) * np.asarray(args[1]) + np.asarray(args[2]))
numpy_op("size")(lambda args, attrs: np.asarray(np.asarray(args[0]).size, dtype=np.int64))


@numpy_op("hamming_window")
def hamming_window(args: tuple, attrs: Any) -> np.ndarray:
    size, periodic, alpha, beta = args
    size, dtype = int(size), numpy_dtype(attrs["dtype"])
    if size == 1:
        return np.ones(1, dtype=dtype)
    n = size + (1 if periodic else 0)  # a periodic window: one more point, the last left out
    window = float(alpha) - float(beta) * np.cos(2 * np.pi * np.arange(n) / (n - 1))
    return window[:size].astype(dtype)


@numpy_op("bucketize")
def bucketize(args: tuple, attrs: Any) -> np.ndarray:
    x, boundaries = (np.asarray(a) for a in args)
    found = np.searchsorted(boundaries, x, side="right" if attrs["right"] else "left")
    return found.astype(np.int32 if attrs["out_int32"] else np.int64)


@numpy_op("multinomial_from_uniform")
def multinomial_from_uniform(args: tuple, attrs: Any) -> np.ndarray:
    """Row ``sample_indices[i]`` of ``prob`` sampled at ``uniform_sample[i]``: the first index whose
    cumulative probability exceeds the sample (the last index when none does)."""
    prob, sample, indices = (np.asarray(a) for a in args)
    cumulative = np.cumsum(prob, axis=1, dtype=prob.dtype)
    picked = [min(np.searchsorted(cumulative[row], u, side="right"), prob.shape[1] - 1)
              for row, u in zip(indices[:, 0], sample[:, 0])]
    return np.asarray(picked, dtype=numpy_dtype(attrs["dtype"])).reshape(-1, 1)
