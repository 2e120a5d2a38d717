"""Numpy references for the Relax operators: one function per operator, keyed by its name.

``NUMPY_OPS["relax.add"](args, attrs)`` takes the evaluated arguments (numpy arrays for tensors,
Python numbers for ``R.prim_value``, tuples for tuples, ``Shape`` for shapes) and the call's
normalized attributes, and returns the result. The formulas are the textbook ones, written for
clarity, not speed; where TVM's legalization chooses a convention (integer division truncates,
gelu uses erf, rounding is half-to-even) the reference follows it.
"""
from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable

import numpy as np

from ..ir.errors import TVMSError
from .tir_values import numpy_dtype


class Shape(tuple):
    """A Relax shape value (``R.shape([2, 3])``, ``R.shape_of(x)``): a tuple of ints."""


NUMPY_OPS: dict[str, Callable[[tuple, Any], Any]] = {}


def numpy_op(*names: str) -> Callable:
    """Register the decorated function as the reference of the Relax operators ``names``."""
    def wrap(fn: Callable) -> Callable:
        for name in names:
            NUMPY_OPS[name if name.startswith("relax.") else f"relax.{name}"] = fn
        return fn
    return wrap


def _pair(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two operands as arrays; a Python scalar takes the other operand's dtype."""
    if not isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        a = np.asarray(a, dtype=b.dtype)
    elif not isinstance(b, np.ndarray) and isinstance(a, np.ndarray):
        b = np.asarray(b, dtype=a.dtype)
    return np.asarray(a), np.asarray(b)


def _result_dtype(a: np.ndarray, b: np.ndarray) -> np.dtype:
    return b.dtype if a.dtype == np.bool_ else a.dtype


def _trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "floor_mod": np.mod, "mod": np.fmod, "atan2": np.arctan2,
    "log_add_exp": np.logaddexp, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "left_shift": np.left_shift, "right_shift": np.right_shift,
}


def _binary(fn: Callable) -> Callable:
    def apply(args: tuple, attrs: Any) -> np.ndarray:
        a, b = _pair(*args)
        return np.asarray(fn(a, b)).astype(_result_dtype(a, b), copy=False)
    return apply


for _name, _fn in _BINARY.items():
    numpy_op(_name)(_binary(_fn))


@numpy_op("divide")
def divide(args: tuple, attrs: Any) -> np.ndarray:
    a, b = _pair(*args)
    dtype = _result_dtype(a, b)
    if np.issubdtype(dtype, np.integer):
        return _trunc_divide(a, b).astype(dtype)  # TVM's integer division truncates
    return (a / b).astype(dtype)


@numpy_op("floor_divide")
def floor_divide(args: tuple, attrs: Any) -> np.ndarray:
    a, b = _pair(*args)
    dtype = _result_dtype(a, b)
    if np.issubdtype(dtype, np.integer):
        return (a // b).astype(dtype)
    return np.floor(a / b).astype(dtype)


_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less,
            "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal}
for _name, _fn in _COMPARE.items():
    numpy_op(_name)(lambda args, attrs, _fn=_fn: np.asarray(_fn(*_pair(*args))))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": _sigmoid, "sin": np.sin, "cos": np.cos, "erf": _erf,
    "negative": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
    "atanh": np.arctanh, "cosh": np.cosh, "sinh": np.sinh, "tan": np.tan, "trunc": np.trunc,
    "sign": np.sign, "square": np.square, "logical_not": np.logical_not, "bitwise_not": np.invert,
    "nn.relu": lambda x: np.maximum(x, 0),
    "nn.gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "nn.gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "nn.silu": lambda x: x * _sigmoid(x),
}


def _unary(fn: Callable) -> Callable:
    def apply(args: tuple, attrs: Any) -> np.ndarray:
        x = np.asarray(args[0])
        return np.asarray(fn(x)).astype(x.dtype, copy=False)
    return apply


for _name, _fn in _UNARY.items():
    numpy_op(_name)(_unary(_fn))
for _name, _fn in (("isfinite", np.isfinite), ("isinf", np.isinf), ("isnan", np.isnan)):
    numpy_op(_name)(lambda args, attrs, fn=_fn: fn(np.asarray(args[0])))  # (bool results)


def _like(fill: Callable[[tuple], Any]) -> Callable:
    """zeros_like / ones_like / full_like: the input's shape, in ``dtype`` when given, filled with
    ``fill(args)`` (converted to that dtype, as a cast)."""
    def apply(args: tuple, attrs: Any) -> np.ndarray:
        x = np.asarray(args[0])
        dtype = numpy_dtype(attrs["dtype"]) if attrs["dtype"] is not None else x.dtype
        return np.full(x.shape, np.asarray(fill(args)).astype(dtype))
    return apply


numpy_op("zeros_like")(_like(lambda args: 0))
numpy_op("ones_like")(_like(lambda args: 1))
numpy_op("full_like")(_like(lambda args: args[1]))


@numpy_op("stack")
def stack(args: tuple, attrs: Any) -> np.ndarray:
    return np.stack([np.asarray(t) for t in args[0]], axis=attrs["axis"])


@numpy_op("flatten")
def flatten(args: tuple, attrs: Any) -> np.ndarray:
    return np.asarray(args[0]).reshape(-1)


@numpy_op("flip")
def flip(args: tuple, attrs: Any) -> np.ndarray:
    return np.flip(np.asarray(args[0]), attrs["axis"]).copy()


@numpy_op("tile")
def tile(args: tuple, attrs: Any) -> np.ndarray:
    return np.tile(np.asarray(args[0]), tuple(attrs["repeats"]))


@numpy_op("repeat")
def repeat(args: tuple, attrs: Any) -> np.ndarray:
    return np.repeat(np.asarray(args[0]), attrs["repeats"], axis=attrs["axis"])


@numpy_op("astype")
def astype(args: tuple, attrs: Any) -> np.ndarray:
    return np.asarray(args[0]).astype(numpy_dtype(attrs["dtype"]))


@numpy_op("where")
def where(args: tuple, attrs: Any) -> np.ndarray:
    cond, a, b = args
    a, b = _pair(a, b)
    return np.where(np.asarray(cond), a, b).astype(_result_dtype(a, b))


# ---------------------------------------------------------------- reductions
def _axis(attrs: Any) -> tuple | None:
    axis = attrs["axis"]
    return None if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else axis


def _reduction(fn: Callable) -> Callable:
    def apply(args: tuple, attrs: Any) -> np.ndarray:
        x = np.asarray(args[0])
        return np.asarray(fn(x, axis=_axis(attrs), keepdims=attrs["keepdims"])).astype(x.dtype)
    return apply


def _limits(dtype: np.dtype) -> tuple:
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype) if dtype.kind in "iu" else None
    return (info.min, info.max) if info is not None else (False, True)


# max and min skip NaN, as TVM computes them (its kernels use maxnum/minnum); over no elements
# they give TVM's identity, the lowest (highest) value
def _max(x: np.ndarray, **kw: Any) -> np.ndarray:
    return np.fmax.reduce(x, initial=_limits(x.dtype)[0], **kw)


def _min(x: np.ndarray, **kw: Any) -> np.ndarray:
    return np.fmin.reduce(x, initial=_limits(x.dtype)[1], **kw)


for _name, _fn in {"sum": np.sum, "mean": np.mean, "max": _max, "min": _min, "prod": np.prod, "variance": np.var,
                   "std": np.std}.items():
    numpy_op(_name)(_reduction(_fn))


def _arg_reduction(fn: Callable) -> Callable:
    def apply(args: tuple, attrs: Any) -> np.ndarray:
        x = np.asarray(args[0])
        axis = attrs["axis"]
        out = fn(x, axis=axis, keepdims=attrs["keepdims"])
        if axis is None and attrs["keepdims"]:
            out = np.asarray(out).reshape((1,) * x.ndim)
        return np.asarray(out).astype(np.int64)
    return apply


def _scan(better: Callable, start: int) -> Callable:
    """argmax/argmin as TVM's kernels reduce: from (index -1, the lowest (highest) value), each
    element replaces the best unless the best is ``better`` or equal with a smaller index, so a
    NaN (which compares false) is replaced and replaces. Without NaN: numpy's argmax/argmin."""
    def apply(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
        if x.dtype.kind != "f" or not np.isnan(x).any():
            fn = np.argmax if start == 0 else np.argmin
            return fn(x, axis=axis, keepdims=keepdims)
        if axis is None:
            rows, kept = x.reshape(-1), ()
        else:
            axis = axis % x.ndim
            rows = np.moveaxis(x, axis, -1)
            kept = rows.shape[:-1]
        index = np.full(kept, -1, np.int64)
        best = np.full(kept, _limits(x.dtype)[start], x.dtype)
        for r in range(rows.shape[-1]):
            value = rows[..., r]
            keep = better(best, value) | ((best == value) & (index < r))
            index, best = np.where(keep, index, r), np.where(keep, best, value)
        if keepdims:
            index = np.expand_dims(index, axis if axis is not None else tuple(range(x.ndim)))
        return index
    return apply


numpy_op("argmax")(_arg_reduction(_scan(np.greater, 0)))
numpy_op("argmin")(_arg_reduction(_scan(np.less, 1)))


# ---------------------------------------------------------------- creation
@functools.cache
def memory_bytes() -> int:
    """This machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _created(shape: Any, dtype: Any) -> tuple:
    """The shape of a tensor made at run time (a shape may be a value the model computed):
    refused, before allocating, when a dimension is negative or the tensor exceeds the memory."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise TVMSError(f"cannot make a tensor of shape {dims}: a dimension is negative")
    return check_fits(dims, dtype)


def check_fits(dims: tuple, dtype: Any) -> tuple:
    """``dims``, refused when a tensor of that shape and ``dtype`` exceeds the machine's memory."""
    nbytes = math.prod(dims) * np.dtype(dtype).itemsize
    if nbytes > memory_bytes():
        raise TVMSError(f"a tensor of shape {dims} and dtype {np.dtype(dtype)} would take {nbytes} bytes, "
                        f"more than this machine's memory ({memory_bytes()} bytes)")
    return dims


@numpy_op("zeros")
def zeros(args: tuple, attrs: Any) -> np.ndarray:
    dtype = numpy_dtype(attrs["dtype"])
    return np.zeros(_created(args[0], dtype), dtype=dtype)


@numpy_op("ones")
def ones(args: tuple, attrs: Any) -> np.ndarray:
    dtype = numpy_dtype(attrs["dtype"])
    return np.ones(_created(args[0], dtype), dtype=dtype)


@numpy_op("full")
def full(args: tuple, attrs: Any) -> np.ndarray:
    fill = np.asarray(args[1])
    dtype = numpy_dtype(attrs["dtype"]) if attrs["dtype"] is not None else fill.dtype
    return np.full(_created(args[0], dtype), fill, dtype=dtype)


@numpy_op("shape_of")
def shape_of(args: tuple, attrs: Any) -> Shape:
    return Shape(np.asarray(args[0]).shape)


# ---------------------------------------------------------------- layout and indexing
@numpy_op("matmul")
def matmul(args: tuple, attrs: Any) -> np.ndarray:
    a, b = (np.asarray(x) for x in args)
    dtype = numpy_dtype(attrs["out_dtype"]) if attrs["out_dtype"] is not None else a.dtype
    return np.asarray(np.matmul(a.astype(dtype), b.astype(dtype)))  # (1-d @ 1-d: 0-d, not a scalar)


@numpy_op("permute_dims")
def permute_dims(args: tuple, attrs: Any) -> np.ndarray:
    axes = attrs["axes"]
    return np.array(np.transpose(args[0], axes), order="C")  # (0-d stays 0-d)


@numpy_op("reshape")
def reshape(args: tuple, attrs: Any) -> np.ndarray:
    # (a shape known only when it runs, R.tensor_to_shape's, may not hold the data's elements)
    data, shape = np.asarray(args[0]), tuple(int(d) for d in args[1])
    if any(d < 0 for d in shape):  # (numpy would infer a -1; a run-time shape states every dimension)
        raise TVMSError(f"R.reshape: the shape {shape} has a negative dimension")
    try:
        return np.reshape(data, shape).copy()
    except ValueError:
        raise TVMSError(f"R.reshape: a tensor of shape {data.shape} ({data.size} elements) cannot take "
                        f"the shape {shape}") from None


@numpy_op("broadcast_to")
def broadcast_to(args: tuple, attrs: Any) -> np.ndarray:
    return np.broadcast_to(args[0], tuple(args[1])).copy()


@numpy_op("expand_dims")
def expand_dims(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    ndim = x.ndim + len(attrs["axis"])
    axes = sorted(a % ndim for a in attrs["axis"])
    return np.expand_dims(x, tuple(axes)).copy()


@numpy_op("squeeze")
def squeeze(args: tuple, attrs: Any) -> np.ndarray:
    axis = attrs["axis"]
    return np.squeeze(args[0], axis=None if axis is None else tuple(axis)).copy()


@numpy_op("concat")
def concat(args: tuple, attrs: Any) -> np.ndarray:
    axis = attrs["axis"]
    return np.concatenate([np.asarray(t) for t in args[0]], axis=axis)


@numpy_op("split")
def split(args: tuple, attrs: Any) -> Any:
    spec = attrs["indices_or_sections"]
    x = np.asarray(args[0])
    if isinstance(spec, int) and spec == 1:
        return x.copy()
    if isinstance(spec, int):  # TVM: `sections` parts of ceil(extent / sections), the last
        extent = x.shape[attrs["axis"]]  # ones smaller, maybe empty
        size = -(-extent // spec)
        spec = tuple(min(size * i, extent) for i in range(1, spec))
    return tuple(p.copy() for p in np.split(x, list(spec), axis=attrs["axis"]))


@numpy_op("strided_slice")
def strided_slice(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    axes, begin, end = args[1], args[2], args[3]
    strides = args[4] if len(args) > 4 else (1,) * len(axes)
    index = [slice(None)] * x.ndim
    for axis, b, e, s in zip(axes, begin, end, strides):
        if int(s) == 0:
            raise TVMSError(f"R.strided_slice: a stride of 0 on axis {axis}")
        index[axis] = slice(int(b), int(e), int(s))
    return x[tuple(index)].copy()


@numpy_op("take")
def take(args: tuple, attrs: Any) -> np.ndarray:
    x, idx = np.asarray(args[0]), np.asarray(args[1])
    axis = attrs["axis"] if attrs["axis"] is not None else 0
    mode = {"fast": "raise", "nan": "raise"}.get(attrs["mode"], attrs["mode"])
    return np.take(x, idx, axis=axis, mode=mode)


# ---------------------------------------------------------------- neural networks
@numpy_op("nn.softmax")
def softmax(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    e = np.exp(x - np.max(x, axis=attrs["axis"], keepdims=True, initial=-np.inf))
    return (e / np.sum(e, axis=attrs["axis"], keepdims=True)).astype(x.dtype)


@numpy_op("nn.log_softmax")
def log_softmax(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    shifted = x - np.max(x, axis=attrs["axis"], keepdims=True, initial=-np.inf)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=attrs["axis"], keepdims=True))).astype(x.dtype)


def _bcast_params(p: np.ndarray, x: np.ndarray, axes: tuple) -> np.ndarray:
    """gamma / beta of shape x.shape[axes] placed so that they broadcast against x."""
    shape = [1] * x.ndim
    for a in axes:
        shape[a] = x.shape[a]
    return np.asarray(p).reshape(shape)


@numpy_op("nn.layer_norm")
def layer_norm(args: tuple, attrs: Any) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    axes = tuple(sorted(a % x.ndim for a in attrs["axes"]))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + attrs["epsilon"])
    if attrs["scale"]:
        out = out * _bcast_params(gamma, x, axes)
    if attrs["center"]:
        out = out + _bcast_params(beta, x, axes)
    return out.astype(x.dtype)


@numpy_op("nn.rms_norm")
def rms_norm(args: tuple, attrs: Any) -> np.ndarray:
    x, weight = (np.asarray(a) for a in args)
    axes = tuple(sorted(a % x.ndim for a in attrs["axes"]))
    ms = np.mean(x.astype(np.float64) ** 2, axis=axes, keepdims=True)
    return (x / np.sqrt(ms + attrs["epsilon"]) * _bcast_params(weight, x, axes)).astype(x.dtype)


# ---------------------------------------------------------------- lowered (VM) operators
@numpy_op("null_value")
def null_value(args: tuple, attrs: Any) -> None:
    return None


@numpy_op("vm.alloc_storage", "memory.alloc_storage")  # (the size: bytes, or a shape of one value)
def alloc_storage(args: tuple, attrs: Any) -> np.ndarray:
    size = args[0]
    return np.zeros(int(size[0] if isinstance(size, tuple) else size), dtype=np.uint8)


@numpy_op("vm.alloc_tensor")
def alloc_tensor(args: tuple, attrs: Any) -> np.ndarray:
    # a fresh array: the reference does not model storage reuse between tensors
    shape, dtype = args[2], args[3]  # (args 0 and 1: the storage and the offset in it)
    return np.zeros(tuple(shape), dtype=numpy_dtype(dtype))


@numpy_op("builtin.alloc_tensor")
def builtin_alloc_tensor(args: tuple, attrs: Any) -> np.ndarray:
    return np.zeros(tuple(args[0]), dtype=numpy_dtype(args[1]))  # (shape, dtype, device, scope)


@numpy_op("vm.kill_object", "memory.kill_storage", "memory.kill_tensor")
def kill_object(args: tuple, attrs: Any) -> tuple:
    return ()


# (they register on import)
from . import numpy_ops_create, numpy_ops_image, numpy_ops_index  # noqa: E402,F401
from . import numpy_ops_misc, numpy_ops_nn, numpy_ops_quant  # noqa: E402,F401
from . import numpy_ops_sort, numpy_ops_sum, numpy_ops_vision  # noqa: E402,F401
