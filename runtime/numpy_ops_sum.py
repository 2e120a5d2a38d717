"""Numpy references of collapse_sum_like / collapse_sum_to and einsum (registered into
``NUMPY_OPS`` when ``numpy_ops`` imports this module)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .numpy_ops import numpy_op


def _collapse_sum(x: np.ndarray, target: tuple) -> np.ndarray:
    """Sum the axes that broadcasting ``target`` to ``x.shape`` would have added or stretched."""
    x = x.sum(axis=tuple(range(x.ndim - len(target))), dtype=x.dtype)
    stretched = tuple(i for i, (d, t) in enumerate(zip(x.shape, target)) if t == 1 and d != 1)
    return x.sum(axis=stretched, keepdims=True, dtype=x.dtype)


@numpy_op("collapse_sum_like")
def collapse_sum_like(args: tuple, attrs: Any) -> np.ndarray:
    return _collapse_sum(np.asarray(args[0]), np.shape(args[1]))


@numpy_op("collapse_sum_to")
def collapse_sum_to(args: tuple, attrs: Any) -> np.ndarray:
    return _collapse_sum(np.asarray(args[0]), tuple(args[1]))


@numpy_op("einsum")
def einsum(args: tuple, attrs: Any) -> np.ndarray:
    operands = [np.asarray(a) for a in args[0]]
    return np.asarray(np.einsum(attrs["subscripts"], *operands)).astype(operands[0].dtype)
