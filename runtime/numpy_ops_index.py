"""Numpy references of the Relax gather and scatter operators (registered into ``NUMPY_OPS`` when
``numpy_ops`` imports this module). Scatters apply their updates one by one in row-major order of
the indices, which is the order TVM's kernels apply repeated indices in."""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from .numpy_ops import numpy_op

# reduction name -> (old value, update) -> new value; "mean" averages pairwise, as TVM's kernel does
_REDUCE = {
    "update": lambda old, new: new, "add": lambda old, new: old + new, "mul": lambda old, new: old * new,
    "min": np.minimum, "max": np.maximum, "mean": lambda old, new: (old + new) / 2,
}


def _reducer(attrs: Any, allowed: tuple) -> Any:
    name = attrs["reduction"]
    if name not in allowed:
        raise TVMSError(f"unknown reduction {name!r}: expected one of {', '.join(allowed)}")
    return _REDUCE[name]


@numpy_op("gather_elements")
def gather_elements(args: tuple, attrs: Any) -> np.ndarray:
    data, indices = np.asarray(args[0]), np.asarray(args[1])
    return np.take_along_axis(data, indices.astype(np.int64), axis=attrs["axis"])


def _batched(indices: np.ndarray, batch: int) -> Any:
    """(batch index, index tuple into the non-batch axes) for every row of ``indices``."""
    lead = indices.shape[:-1]
    for pos in np.ndindex(*lead):
        yield pos, pos[:batch] + tuple(int(v) for v in indices[pos])


@numpy_op("gather_nd")
def gather_nd(args: tuple, attrs: Any) -> np.ndarray:
    data, indices = np.asarray(args[0]), np.asarray(args[1])
    batch = attrs["batch_dims"]
    out = np.empty(indices.shape[:-1] + data.shape[batch + indices.shape[-1]:], dtype=data.dtype)
    for pos, where in _batched(indices, batch):
        out[pos] = data[where]
    return out


@numpy_op("scatter_elements")
def scatter_elements(args: tuple, attrs: Any) -> np.ndarray:
    data, indices, updates = (np.asarray(a) for a in args)
    reduce = _reducer(attrs, tuple(_REDUCE))
    axis = attrs["axis"] % data.ndim
    out = data.copy()
    for pos in np.ndindex(*indices.shape):
        k = int(indices[pos])
        target = pos[:axis] + (k + data.shape[axis] if k < 0 else k,) + pos[axis + 1:]
        out[target] = reduce(out[target], updates[pos])
    return out


@numpy_op("scatter_nd")
def scatter_nd(args: tuple, attrs: Any) -> np.ndarray:
    data, indices, updates = (np.asarray(a) for a in args)
    reduce = _reducer(attrs, ("update", "add", "mul", "min", "max"))
    out = data.copy()
    for pos, where in _batched(indices, 0):
        out[where] = reduce(out[where], updates[pos])
    return out
