"""Numpy references of quantize / dequantize (registered into ``NUMPY_OPS`` when ``numpy_ops``
imports this module), in TVM's arithmetic: float32 math, rounding half to even, results clipped
into the output type."""
from __future__ import annotations

from typing import Any

import numpy as np

from .numpy_ops import numpy_op
from .tir_values import numpy_dtype


def _along(p: Any, ndim: int, axis: int) -> np.ndarray:
    """A scale / zero point shaped to broadcast along ``axis`` (a scalar or all-ones tensor: its value)."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    shape = [1] * ndim
    shape[axis] = -1
    return p.reshape(shape)


def _clip_cast(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return np.clip(value, info.min, info.max).astype(dtype)


def _params(args: tuple, attrs: Any) -> tuple:
    x = np.asarray(args[0])
    axis = attrs["axis"] % max(x.ndim, 1)
    return x, _along(args[1], x.ndim, axis), _along(args[2], x.ndim, axis), numpy_dtype(attrs["out_dtype"])


@numpy_op("quantize")
def quantize(args: tuple, attrs: Any) -> np.ndarray:
    x, scale, zero, out = _params(args, attrs)
    scaled = np.round(x / scale.astype(np.result_type(x, scale)))
    return _clip_cast(scaled + zero.astype(scaled.dtype), out)


@numpy_op("dequantize")
def dequantize(args: tuple, attrs: Any) -> np.ndarray:
    x, scale, zero, out = _params(args, attrs)
    wide = x.astype(np.float32 if np.issubdtype(x.dtype, np.floating) else np.int32)
    value = (wide - zero.astype(wide.dtype)).astype(np.float32) * scale.astype(np.float32)
    return value if out == np.float32 else _clip_cast(value, out)
