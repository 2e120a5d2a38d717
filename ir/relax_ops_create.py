"""Relax operators whose arguments include TensorIR scalars (``R.prim_value``), and their kin:
clip, tril/triu, arange, eye/eye_like, hamming_window, one_hot, the scans cumsum/cumprod, outer,
ewise_fma, size, bucketize, multinomial_from_uniform and meshgrid.

TVM 0.27 passes the scalar arguments as Relax arguments (printed bare in its dialect:
``R.arange(0, n, 1, dtype="int64")``), so they are Relax arguments here too; the ``prepare``
steps do what TVM's Python constructors do (fill defaults, make Python numbers PrimValues: an
int an int64, a float a float64).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import arith
from .dtype import DataType
from .expr import Call as PrimCall
from .expr import FloatImm, IntImm, PrimExpr, Sub
from .op import get_op
from .relax import PrimValue, RelaxExpr
from .relax_infer import (INT64, describe, dim_add, dim_floordiv, dim_sub, int_of,
                          make_tensor, normalize_axis, product, prove_equal, simplify_dim, tensor_arg,
                          prepare_tuple_arg, tensor_args, tuple_of_tensors, typed_arg)
from .relax_op import (ATTR_BOOL, ATTR_DTYPE, ATTR_INT, ATTR_STR, PRIM_VALUE_ARGS, Attr, CallInfo, OpSpec,
                       register)
from .struct_info import VOID, PrimStructInfo, StructInfo, TensorStructInfo, TupleStructInfo

FLOAT32 = DataType("float32")


def as_prim_value(value: Any) -> Any:
    """TVM's ``relax.prim_value``: a Python int is an int64, a float a float64, a bool a bool;
    Relax expressions pass through."""
    if isinstance(value, RelaxExpr):
        return value
    if isinstance(value, bool):
        return PrimValue(IntImm(DataType("bool"), int(value)))
    if isinstance(value, int):
        return PrimValue(IntImm(INT64, value))
    if isinstance(value, float):
        return PrimValue(FloatImm(DataType("float64"), value))
    if isinstance(value, PrimExpr):
        return PrimValue(value)
    return value


def _prepare_scalars(*defaults: Any) -> Any:
    """A ``prepare`` step: the missing trailing Relax arguments (or None ones) take ``defaults``
    (counted from the last one), and every scalar argument becomes a PrimValue."""
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        args = list(args) + [None] * (len(spec.args) - len(args))
        first = len(spec.args) - len(defaults)
        args = [defaults[i - first] if a is None and i >= first else a for i, a in enumerate(args)]
        return [as_prim_value(a) for a in args], attrs
    return prepare


def prim_arg(info: CallInfo, i: int) -> PrimStructInfo:
    return typed_arg(info, i, PrimStructInfo, "a scalar such as R.prim_value(1)")


def prim_value_of(info: CallInfo, i: int) -> PrimExpr:
    """The value of scalar argument ``i``, which must be known (it makes a shape)."""
    s = prim_arg(info, i)
    if s.value is None:
        raise info.fail(f"argument {info.spec.args[i]!r} must be a scalar of known value, got {describe(s)}")
    return s.value


def size_of(info: CallInfo, i: int) -> PrimExpr:
    """Scalar argument ``i`` as a dimension: an integer of known value."""
    value = prim_value_of(info, i)
    if not value.dtype.is_int:
        raise info.fail(f"argument {info.spec.args[i]!r} is a size: it must be an integer, got a {value.dtype}")
    return value


# ---------------------------------------------------------------- clip, tril, triu
def _infer_clip(info: CallInfo) -> StructInfo:
    prim_arg(info, 1)
    prim_arg(info, 2)
    return info.sinfo[0]  # (TVM returns the first argument's struct info as it is)


register("clip", ("x", "min", "max"), _infer_clip, prepare=_prepare_scalars())


def _infer_trilu(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    prim_arg(info, 1)
    if 0 <= x.ndim < 2:
        raise info.fail(f"the input tensor needs at least two dimensions, got {describe(x)}")
    return x


for _name in ("tril", "triu"):
    register(_name, ("x", "k"), _infer_trilu, min_args=1, prepare=_prepare_scalars(0))


# ---------------------------------------------------------------- arange, eye, eye_like
def _prepare_arange(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    start, end, step = list(args) + [None] * (3 - len(args))
    if end is None:  # arange(end)
        start, end = 0, start
    args = [as_prim_value(a) for a in (start, end, 1 if step is None else step)]
    if attrs["dtype"] is None:  # integers give int64, anything else float32 (as TVM's arange)
        ints = all(isinstance(a, PrimValue) and a.value.dtype.is_int for a in args)
        attrs["dtype"] = INT64 if ints else FLOAT32
    return args, attrs


def _infer_arange(info: CallInfo) -> StructInfo:
    start, end, step = (prim_value_of(info, i) for i in range(3))
    if isinstance(step, (IntImm, FloatImm)) and step.value == 0:
        raise info.fail("the step must not be zero")
    if all(v.dtype.is_int for v in (start, end, step)):
        count = simplify_dim(dim_floordiv(dim_sub(dim_add(dim_sub(end, start), step), 1), step))
    elif all(isinstance(v, (IntImm, FloatImm)) for v in (start, end, step)):
        # int64(ceil(float32(end - start) / step)), as TVM counts a float range: the difference in
        # the wider type, rounded to float32, divided in float64 only by a float64 step
        wide = np.result_type(*(np.dtype(str(v.dtype)) for v in (start, end)))
        quotient_type = np.float64 if step.dtype == DataType("float64") else np.float32
        with np.errstate(all="ignore"):
            diff = np.float32(np.array(end.value, wide) - np.array(start.value, wide))
            quotient = quotient_type(diff) / quotient_type(step.value)
        if not np.isfinite(quotient):
            raise info.fail(f"the range from {start.value} to {end.value} by {step.value} has no finite length")
        count = IntImm(INT64, int(math.ceil(quotient)))
    else:  # the same count as an expression, which TVM's simplifier leaves as it is
        ratio = arith.truediv(arith.cast(FLOAT32, arith.binary(Sub, end, start)), step)
        count = arith.cast(INT64, PrimCall(ratio.dtype, get_op("tir.ceil"), (ratio,)))
    return make_tensor((count,), info.attrs["dtype"])


register("arange", ("start", "end", "step"), _infer_arange, (Attr("dtype", None, ATTR_DTYPE),),
         min_args=1, prepare=_prepare_arange)


def _prepare_eye(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    n, m, k = list(args) + [None] * (3 - len(args))
    return [as_prim_value(a) for a in (n, n if m is None else m, 0 if k is None else k)], attrs


def _infer_eye(info: CallInfo) -> StructInfo:
    n, m = size_of(info, 0), size_of(info, 1)
    prim_arg(info, 2)
    return make_tensor((n, m), info.attrs["dtype"])


register("eye", ("n", "m", "k"), _infer_eye, (Attr("dtype", DataType("float32"), ATTR_DTYPE),),
         min_args=1, prepare=_prepare_eye)


def _infer_eye_like(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    prim_arg(info, 1)
    if x.ndim not in (2, -1):
        raise info.fail(f"the input tensor must be 2-dimensional, got {describe(x)}")
    dtype = info.attrs["dtype"] if info.attrs["dtype"] is not None else x.dtype
    return TensorStructInfo(x.shape, dtype, x.ndim, x.vdevice)


register("eye_like", ("x", "k"), _infer_eye_like, (Attr("dtype", None, ATTR_DTYPE),), min_args=1,
         prepare=_prepare_scalars(0))


def _infer_hamming_window(info: CallInfo) -> StructInfo:
    dtype = info.attrs["dtype"]
    if dtype.is_integer:
        raise info.fail(f"the dtype must be a float type, got {dtype}")
    size = size_of(info, 0)
    for i in range(1, 4):
        prim_arg(info, i)
    if int_of(size) is not None and size.value < 1:
        raise info.fail(f"the window size must be positive, got {size.value}")
    return make_tensor((simplify_dim(size),), dtype)


register("hamming_window", ("window_size", "periodic", "alpha", "beta"), _infer_hamming_window,
         (Attr("dtype", None, ATTR_DTYPE, required=True),), prepare=_prepare_scalars())


# ---------------------------------------------------------------- one_hot
def _infer_one_hot(info: CallInfo) -> StructInfo:
    indices = tensor_arg(info, 0)
    on, off = prim_arg(info, 1), prim_arg(info, 2)
    if on.dtype != off.dtype:
        raise info.fail(f"on_value and off_value must have the same dtype, got {on.dtype} and {off.dtype}")
    depth = info.attrs["depth"]
    if depth <= 0:
        raise info.fail(f"depth must be positive, got {depth}")
    if indices.dtype != VOID and not indices.dtype.is_integer:
        raise info.fail(f"the indices must have an integer dtype, got {describe(indices)}")
    if indices.ndim < 0:
        return TensorStructInfo(None, on.dtype, -1, indices.vdevice)
    dims = indices.dims
    if dims is None:
        return TensorStructInfo(None, on.dtype, indices.ndim + 1, indices.vdevice)
    axis = normalize_axis(info, info.attrs["axis"], len(dims) + 1)
    return make_tensor(dims[:axis] + (IntImm(INT64, depth),) + dims[axis:], on.dtype, vdevice=indices.vdevice)


register("one_hot", ("indices", "on_value", "off_value"), _infer_one_hot,
         (Attr("depth", None, ATTR_INT, required=True), Attr("axis", -1, ATTR_INT)),
         prepare=_prepare_scalars())


# ---------------------------------------------------------------- cumsum, cumprod
def _infer_scan(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    dtype = info.attrs["dtype"] if info.attrs["dtype"] is not None else x.dtype
    if info.attrs["axis"] is not None and x.ndim >= 0:  # (TVM checks it only when lowering)
        normalize_axis(info, info.attrs["axis"], x.ndim)
    if info.attrs["axis"] is None:  # over the flattened input
        dims = x.dims
        if dims is None:  # (TVM keeps the input's rank here)
            return TensorStructInfo(None, dtype, x.ndim, x.vdevice)
        return make_tensor((product(dims),), dtype, vdevice=x.vdevice)
    return TensorStructInfo(x.shape, dtype, x.ndim, x.vdevice)


for _name in ("cumsum", "cumprod"):
    register(_name, ("data",), _infer_scan,
             (Attr("axis", None, ATTR_INT), Attr("dtype", None, ATTR_DTYPE), Attr("exclusive", False, ATTR_BOOL)))


# ---------------------------------------------------------------- outer, ewise_fma, size
def _infer_outer(info: CallInfo) -> StructInfo:
    a, b = tensor_args(info)
    if a.ndim != 1 or b.ndim != 1:
        raise info.fail(f"both inputs must be 1-d tensors, got {describe(a)} and {describe(b)}")
    if a.dims is None or b.dims is None:
        return TensorStructInfo(None, a.dtype, 2)
    return make_tensor((a.dims[0], b.dims[0]), a.dtype)


register("outer", ("x1", "x2"), _infer_outer)


def _infer_ewise_fma(info: CallInfo) -> StructInfo:
    ts = tensor_args(info)
    ndims = {t.ndim for t in ts if t.ndim >= 0}
    if len(ndims) > 1:
        raise info.fail("the three arguments must have the same number of dimensions")
    ndim = ndims.pop() if ndims else -1
    dtypes = {t.dtype for t in ts}
    if VOID in dtypes:
        dtype = VOID
    elif len(dtypes) > 1:
        raise info.fail(f"the three arguments must have the same dtype, got {', '.join(str(t.dtype) for t in ts)}")
    else:
        dtype = dtypes.pop()
    vdevice = ts[0].vdevice if all(t.vdevice == ts[0].vdevice for t in ts) else None
    if all(t.dims is not None for t in ts):
        for dims in zip(*(t.dims for t in ts)):
            if not (prove_equal(dims[0], dims[1]) and prove_equal(dims[1], dims[2])):
                raise info.fail("the three arguments must have the same shape")
        return make_tensor(ts[0].dims, dtype, vdevice=vdevice)
    if ts[0].shape is not None and ts[0].shape is ts[1].shape and ts[0].shape is ts[2].shape:
        return TensorStructInfo(ts[0].shape, dtype, ndim, vdevice)
    return TensorStructInfo(None, dtype, ndim, vdevice)


register("ewise_fma", ("x1", "x2", "x3"), _infer_ewise_fma)


def _infer_size(info: CallInfo) -> StructInfo:
    tensor_arg(info, 0)
    return make_tensor((), INT64)


register("size", ("expr",), _infer_size)


def _infer_bucketize(info: CallInfo) -> StructInfo:
    x, boundaries = tensor_args(info)
    if boundaries.ndim not in (1, -1):
        raise info.fail(f"the boundaries must be a 1-d tensor, got {describe(boundaries)}")
    dtype = DataType("int32" if info.attrs["out_int32"] else "int64")
    if x.dims is not None:
        return make_tensor(x.dims, dtype, vdevice=x.vdevice)
    return TensorStructInfo(None, dtype, x.ndim, x.vdevice)


register("bucketize", ("input_tensor", "boundaries"), _infer_bucketize,
         (Attr("out_int32", False, ATTR_BOOL), Attr("right", False, ATTR_BOOL)))


def _infer_multinomial(info: CallInfo) -> StructInfo:
    prob, sample, indices = tensor_args(info)
    for t, what, kind in ((prob, "prob", "float"), (sample, "uniform_sample", "float"), (indices, "sample_indices", "int")):
        if t.dtype != VOID and not (t.dtype.is_float if kind == "float" else t.dtype.is_int):
            raise info.fail(f"{what} must have a{'n' if kind == 'int' else ''} {kind} dtype, got {describe(t)}")
    dtype = info.attrs["dtype"]
    if min(prob.ndim, sample.ndim, indices.ndim) < 0:
        return TensorStructInfo(None, dtype, -1, prob.vdevice)
    for t, what in ((prob, "prob"), (sample, "uniform_sample"), (indices, "sample_indices")):
        if t.ndim != 2:
            raise info.fail(f"{what} must be a 2-d tensor, got {describe(t)}")
    if prob.dims is None or sample.dims is None or indices.dims is None:
        return TensorStructInfo(None, dtype, 2, prob.vdevice)
    n = sample.dims[0]
    if not prove_equal(n, indices.dims[0]):
        raise info.fail(f"uniform_sample and sample_indices must have the same batch size, got "
                        f"{describe(sample)} and {describe(indices)}")
    if int_of(sample.dims[1]) != 1 or int_of(indices.dims[1]) != 1:
        raise info.fail(f"uniform_sample and sample_indices must be of shape (n, 1), got "
                        f"{describe(sample)} and {describe(indices)}")
    return make_tensor((n, 1), dtype, vdevice=prob.vdevice)


register("multinomial_from_uniform", ("prob", "uniform_sample", "sample_indices"), _infer_multinomial,
         (Attr("dtype", DataType("int64"), ATTR_DTYPE),))


# ---------------------------------------------------------------- meshgrid
def _infer_meshgrid(info: CallInfo) -> StructInfo:
    tensors = tuple_of_tensors(info, 0)
    if not tensors:
        raise info.fail("meshgrid needs at least one 1-d tensor")
    dtype, lengths = None, []
    for i, t in enumerate(tensors):
        if t.ndim != 1:
            raise info.fail(f"every input must be a 1-d tensor, got {describe(t)} at index {i}")
        if t.dtype == VOID:
            continue
        if dtype is not None and t.dtype != dtype:
            raise info.fail(f"the inputs must have one dtype, got {dtype} and {t.dtype}")
        dtype = t.dtype
        if t.dims is not None:
            lengths.append(t.dims[0])
    dtype = dtype if dtype is not None else VOID
    devices = {t.vdevice for t in tensors if t.vdevice is not None}
    vdevice = devices.pop() if len(devices) == 1 else None
    # (TVM's shape ignores ``indexing``: "xy" keeps the inputs' order too)
    if len(lengths) == len(tensors):
        field = make_tensor(tuple(lengths), dtype, vdevice=vdevice)
    else:
        field = TensorStructInfo(None, dtype, len(tensors), vdevice)
    return TupleStructInfo((field,) * len(tensors))


register("meshgrid", ("tensors",), _infer_meshgrid, (Attr("indexing", "ij", ATTR_STR),), prepare=prepare_tuple_arg(0))

PRIM_VALUE_ARGS.update(f"relax.{name}" for name in ("clip", "tril", "triu", "arange", "eye", "eye_like",
                                                      "one_hot", "hamming_window"))

__all__ = ["as_prim_value", "prim_arg", "prim_value_of", "size_of"]
