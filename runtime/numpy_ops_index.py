"""Numpy references of the Relax gather and scatter operators (registered into ``NUMPY_OPS`` when
``numpy_ops`` imports this module). Scatters apply their updates one by one in row-major order of
the indices, which is the order TVM's kernels apply repeated indices in."""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError
from tvms.ir.expr import IntImm
from tvms.ir.relax_infer import INT64

from .numpy_ops import numpy_op
from .reference import compile_expr

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


@numpy_op("index_tensor")
def index_tensor(args: tuple, attrs: Any) -> np.ndarray:
    return np.asarray(args[0])[tuple(np.asarray(i) for i in args[1])]


@numpy_op("index_put")
def index_put(args: tuple, attrs: Any) -> np.ndarray:
    out = np.array(args[0])
    where = tuple(np.asarray(i) for i in (args[1] if isinstance(args[1], tuple) else (args[1],)))
    values = np.asarray(args[2], dtype=out.dtype)
    if attrs["accumulate"]:
        np.add.at(out, where, values)  # (repeated positions add up)
    else:
        out[where] = values
    return out


@numpy_op("slice_scatter")
def slice_scatter(args: tuple, attrs: Any) -> np.ndarray:
    out = np.array(args[0])
    start, end, step = (int(v) for v in args[2:5])
    where = [slice(None)] * out.ndim
    where[attrs["axis"]] = slice(start, end, step)
    out[tuple(where)] = args[1]
    return out


@numpy_op("reverse_sequence")
def reverse_sequence(args: tuple, attrs: Any) -> np.ndarray:
    """Along the batch axis, the first ``seq_lengths[b]`` elements of the sequence axis reversed
    (a length past the axis reverses all of it; 0 or 1 reverses nothing)."""
    x, lengths = np.asarray(args[0]), np.asarray(args[1])
    seq, batch = attrs["seq_axis"] % x.ndim, attrs["batch_axis"] % x.ndim
    out = x.copy()
    for b, n in enumerate(lengths):
        where = [slice(None)] * x.ndim
        where[batch], where[seq] = b, slice(0, max(int(n), 0))
        out[tuple(where)] = np.flip(x[tuple(where)], axis=seq - (batch < seq))  # (b's axis is gone)
    return out


@numpy_op("dynamic_strided_slice")
def dynamic_strided_slice(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    return x[tuple(slice(int(b), int(e), int(s)) for b, e, s in zip(*(np.asarray(a) for a in args[1:4])))]


@numpy_op("layout_transform")
def layout_transform(args: tuple, attrs: Any) -> np.ndarray:
    """Each element moved to where the index map sends it; what no element reaches (the padding
    of a split that does not divide) holds the pad value, 0 when none is given (as TVM fills it)."""
    x = np.asarray(args[0])
    index_map = attrs["index_map"]
    shape = tuple(int(compile_expr(d)({})) for d in index_map.map_shape(tuple(IntImm(INT64, n) for n in x.shape)))
    pad = attrs["pad_value"]
    out = np.full(shape, 0 if pad is None else pad.value, dtype=x.dtype)
    final = [compile_expr(e) for e in index_map.final_indices]
    for idx in np.ndindex(*x.shape):
        env = dict(zip(index_map.initial_indices, idx))
        out[tuple(int(f(env)) for f in final)] = x[idx]
    return out
