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
numpy_op("hint_on_device", "to_vdevice", "builtin.stop_lift_params", "memory.ensure_zero_offset",
         "grad.no_grad", "grad.start_checkpoint", "grad.end_checkpoint")(lambda args, attrs: args[0])


@numpy_op("memory.alloc_storage")
def memory_alloc_storage(args: tuple, attrs: Any) -> np.ndarray:
    size = args[0]  # a shape of one value: the size in bytes
    return np.zeros(int(size[0] if isinstance(size, tuple) else size), dtype=np.uint8)


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


numpy_op("memory.kill_storage", "memory.kill_tensor")(lambda args, attrs: ())

__all__ = ["RelaxAssertionError", "render", "run_print", "run_assert_op", "run_shape_to_tensor"]
