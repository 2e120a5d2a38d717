"""Numpy references of the Relax operators that are not math (ir/relax_ops_misc.py), and the
runtime functions TVM's LegalizeOps calls for some of them (``relax.run.print``,
``relax.run.assert_op``, ``relax.run.shape_to_tensor``), with TVM's messages.

Device placement is no computation here: ``R.hint_on_device``, ``R.to_vdevice`` and the markers
(``R.builtin.stop_lift_params``, ``R.grad.no_grad``, ...) give their input back.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .numpy_ops import Shape, numpy_op
from .numpy_ops_nn import _canonical, _from_canonical, pool_windows
from .tir_values import numpy_dtype


class RelaxAssertionError(AssertionError):
    """``R.assert_op`` found its condition false (an AssertionError, as in TVM)."""


def render(value: Any) -> str:
    """A value as ``R.print`` and ``R.assert_op`` write it: tuples in parentheses."""
    if isinstance(value, tuple) and not isinstance(value, Shape):
        return "(" + ", ".join(render(v) for v in value) + ")"
    if isinstance(value, Shape):
        return str(tuple(value))
    return str(value)


@register_func("relax.run.print")
def run_print(format_str: str, *values: Any) -> tuple:
    """Print ``values`` with the Python format string (or space-separated when it is empty)."""
    texts = [render(v) for v in values]
    print(format_str.format(*texts) if format_str else " ".join(texts))
    return ()


@register_func("relax.run.assert_op")
def run_assert_op(condition: Any, format_str: str, *values: Any) -> tuple:
    """Raise when ``condition`` (a bool scalar) is false, with the formatted message."""
    cond = np.asarray(condition)
    if cond.shape != () or (cond.dtype != np.bool_ and not np.issubdtype(cond.dtype, np.integer)):
        raise TVMSError(f"the condition of R.assert_op must be a bool scalar, got {cond.dtype} of "
                         f"shape {cond.shape}")
    if not bool(cond):
        texts = [render(v) for v in values]
        message = "Assertion Failed"
        if format_str:
            message = format_str.format(*texts)
        elif texts:
            message = ", ".join(texts)
        raise RelaxAssertionError(message)
    return ()


@register_func("relax.run.shape_to_tensor")
def run_shape_to_tensor(shape: Any) -> np.ndarray:
    return np.array([int(v) for v in shape], dtype="int64")


numpy_op("print")(lambda args, attrs: run_print(*args))
numpy_op("assert_op")(lambda args, attrs: run_assert_op(*args))
numpy_op("shape_to_tensor")(lambda args, attrs: run_shape_to_tensor(args[0]))
numpy_op("tensor_to_shape")(lambda args, attrs: Shape(int(v) for v in np.asarray(args[0])))
numpy_op("wrap_param")(lambda args, attrs: np.asarray(args[0]).astype(numpy_dtype(attrs["dtype"])))
# (a distributed program's value seen whole: placing it does not change it)
numpy_op("hint_on_device", "to_vdevice", "builtin.stop_lift_params", "memory.ensure_zero_offset",
         "grad.no_grad", "grad.start_checkpoint", "grad.end_checkpoint", "dist.annotate_sharding",
         "dist.redistribute")(lambda args, attrs: args[0])


# the DLTensor fields of a tensor (numpy's kind -> DLPack's type code), of a compact tensor
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 1, "V": 4}  # (bool is a 1-bit uint in DLPack; V: bfloat16)
numpy_op("inspect.tensor_dtype_code")(lambda args, attrs: _DL_CODES[np.asarray(args[0]).dtype.kind])
numpy_op("inspect.tensor_dtype_bits")(
    lambda args, attrs: 1 if np.asarray(args[0]).dtype == np.bool_ else np.asarray(args[0]).dtype.itemsize * 8)
numpy_op("inspect.tensor_dtype_lanes")(lambda args, attrs: 1)
numpy_op("inspect.tensor_ndim")(lambda args, attrs: np.ndim(args[0]))
numpy_op("inspect.tensor_byte_offset", "inspect.tensor_elem_offset")(lambda args, attrs: 0)
numpy_op("inspect.tensor_shape_i")(lambda args, attrs: np.shape(args[0])[int(args[1])])
numpy_op("inspect.tensor_stride_i")(
    lambda args, attrs: int(np.prod(np.shape(args[0])[int(args[1]) + 1:], dtype=np.int64)))


@numpy_op("grad.nll_loss_backward")
def nll_loss_backward(args: tuple, attrs: Any) -> np.ndarray:
    """d(nll_loss)/d(predictions): -weight[target] at each target class (classes on axis 1, or 0
    for one sample), scaled by the output gradient, over the total weight for "mean"; targets
    equal to ignore_index get nothing and weigh nothing."""
    g, pred, targets = (np.asarray(a) for a in args[:3])
    classes = pred.shape[0] if pred.ndim == 1 else pred.shape[1]
    weights = np.asarray(args[3]) if len(args) > 3 else np.ones(classes, pred.dtype)
    keep = targets != attrs["ignore_index"]
    safe = np.where(keep, targets, 0)
    w = np.where(keep, weights[safe], 0).astype(pred.dtype)
    scale = g if attrs["reduction"] == "none" else np.broadcast_to(g, w.shape)
    if attrs["reduction"] == "mean":
        scale = scale / w.sum()
    out = np.zeros_like(pred)
    if pred.ndim == 1:
        out[safe] = -(w * scale)
    else:
        picked = np.expand_dims(safe, 1)
        np.put_along_axis(out, picked, np.expand_dims(-(w * scale), 1).astype(pred.dtype), axis=1)
    return out


@numpy_op("grad.take_backward")
def take_backward(args: tuple, attrs: Any) -> np.ndarray:
    """d(take)/d(x): each output gradient added back at the index it was taken from."""
    g, x, indices = (np.asarray(a) for a in args)
    axis = attrs["axis"]
    out = np.zeros(x.size if axis is None else x.shape, dtype=x.dtype)
    if axis is None:
        np.add.at(out, indices.reshape(-1), g.reshape(-1))
        return out.reshape(x.shape)
    axis %= x.ndim
    moved = np.moveaxis(out, axis, 0)  # (a view: the sums land in out)
    g = np.moveaxis(g.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1:]),
                    tuple(range(axis, axis + indices.ndim)), tuple(range(indices.ndim)))
    np.add.at(moved, indices, g)
    return out


def _pool2d_backward(kind: str) -> Any:
    def backward(args: tuple, attrs: Any) -> np.ndarray:
        """d(pool)/d(data): each output gradient to the window's first maximum (max), or spread
        evenly over the window (avg: divided by the count the forward divided by)."""
        x = _canonical(np.asarray(args[1]), attrs["layout"], "NCHW", f"grad.{kind}_pool2d_backward")
        g = _canonical(np.asarray(args[0]), attrs["out_layout"] or attrs["layout"], "NCHW",
                       f"grad.{kind}_pool2d_backward")
        pad = tuple(attrs["padding"])  # (as the forward reads 1 or 2 values: all sides, or top/left)
        pad = pad * 4 if len(pad) == 1 else pad * 2 if len(pad) == 2 else pad
        out = np.zeros_like(x)
        for o, inside, count in pool_windows(x.shape[2:], {**attrs, "padding": pad})[1]:
            go = g[(slice(None), slice(None)) + o]
            if kind == "max":
                first = np.stack([x[(slice(None), slice(None)) + p] for p in inside], -1).argmax(-1)
            for k, p in enumerate(inside):
                at = (slice(None), slice(None)) + p
                out[at] += np.where(first == k, go, 0) if kind == "max" else go / count
        return _from_canonical(out, attrs["layout"], "NCHW")
    return backward


numpy_op("grad.max_pool2d_backward")(_pool2d_backward("max"))
numpy_op("grad.avg_pool2d_backward")(_pool2d_backward("avg"))


@numpy_op("memory.alloc_tensor")
def memory_alloc_tensor(args: tuple, attrs: Any) -> np.ndarray:
    """A tensor in the storage at the byte offset: it shares the storage's memory."""
    storage, offset, shape, dtype = args[:4]
    dtype = np.dtype(numpy_dtype(dtype))
    count = int(np.prod(shape, dtype=np.int64))
    start, end = int(offset), int(offset) + count * dtype.itemsize
    if end > storage.size:
        raise TVMSError(f"R.memory.alloc_tensor: {count} {dtype} at byte {start} do not fit in a "
                         f"storage of {storage.size} bytes")
    return storage[start:end].view(dtype).reshape(tuple(shape))


@numpy_op("memory.view")
def memory_view(args: tuple, attrs: Any) -> np.ndarray:
    """The tensor's bytes from the offset, seen with the new dtype and shape (shared memory)."""
    x, shape, dtype, offset = args
    data = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    dtype = x.dtype if dtype in ((), None) else np.dtype(numpy_dtype(dtype))
    shape = x.shape if shape == () and not isinstance(shape, Shape) else tuple(shape)
    start = 0 if offset == () else int(offset)
    count = int(np.prod(shape, dtype=np.int64))
    return data[start:start + count * dtype.itemsize].view(dtype).reshape(shape)

__all__ = ["RelaxAssertionError", "render", "run_print", "run_assert_op", "run_shape_to_tensor"]
