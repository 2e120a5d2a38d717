"""Relax gather and scatter operators (gather_elements, gather_nd, scatter_elements, scatter_nd),
registered when ``relax_ops`` imports this module. Inference follows TVM 0.27's rules, including
what it leaves unknown: only a shape written out (a ShapeExpr) counts as known here."""
from __future__ import annotations

from typing import Any

from .expr import IntImm
from .relax import PrimValue
from .relax_infer import (INT64, arg_name, describe, dim_add, dim_floordiv, dim_sub, fmt_dim,
                          fmt_dims, int_of, known_dims, make_tensor, normalize_axis, prove_equal,
                          prepare_tuple_arg, prove_not_equal, tensor_arg, to_dim)
from .relax_op import ATTR_BOOL, ATTR_INT, ATTR_STR, Attr, CallInfo, OpSpec, register
from .struct_info import VOID, StructInfo, TensorStructInfo, TupleStructInfo


def _require_int(info: CallInfo, s: TensorStructInfo, unsigned: bool = True) -> None:
    if s.dtype != VOID and not (s.dtype.is_int or (unsigned and s.dtype.is_uint)):
        raise info.fail(f"the indices must have an integer dtype, got {describe(s)}")


def _prepare_prims(*indices: int) -> Any:
    """A ``prepare`` step making the integer arguments at ``indices`` R.prim_value (int64)."""
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        args = list(args)
        for i in indices:
            if i < len(args) and not isinstance(args[i], PrimValue) and not hasattr(args[i], "struct_info"):
                args[i] = PrimValue(to_dim(args[i]))
        return args, attrs
    return prepare


def _like_data(data: TensorStructInfo) -> TensorStructInfo:
    """The result of a scatter: the data's shape when written out, else its rank."""
    if data.dims is not None:
        return make_tensor(data.dims, data.dtype, vdevice=data.vdevice)
    return TensorStructInfo(None, data.dtype, data.ndim, data.vdevice)


# ---------------------------------------------------------------- gather
def _infer_gather_elements(info: CallInfo) -> StructInfo:
    data, indices = tensor_arg(info, 0), tensor_arg(info, 1)
    _require_int(info, indices, unsigned=False)
    if data.ndim < 0 or indices.ndim < 0:
        return TensorStructInfo(None, data.dtype, -1, data.vdevice)
    normalize_axis(info, info.attrs["axis"], data.ndim)
    if data.ndim != indices.ndim:
        raise info.fail(f"the data and the indices must have the same rank, got {describe(data)} "
                        f"and {describe(indices)}")
    if indices.shape is not None:
        return TensorStructInfo(indices.shape, data.dtype, indices.ndim, data.vdevice)
    return TensorStructInfo(None, data.dtype, indices.ndim, data.vdevice)


register("gather_elements", ("data", "indices"), _infer_gather_elements, (Attr("axis", 0, ATTR_INT),))


def _infer_gather_nd(info: CallInfo) -> StructInfo:
    data, indices = tensor_arg(info, 0), tensor_arg(info, 1)
    batch = info.attrs["batch_dims"]
    if batch < 0:
        raise info.fail(f"batch_dims must not be negative, got {batch}")
    if indices.dtype != VOID and str(indices.dtype) != "int64":
        raise info.fail(f"the indices must have dtype int64, got {describe(indices)}")
    unknown = TensorStructInfo(None, data.dtype, -1, data.vdevice)
    if data.ndim < 0 or indices.ndim < 0:
        return unknown
    if batch > data.ndim or batch > indices.ndim - 1:
        raise info.fail(f"batch_dims={batch} must be at most the rank of the data ({data.ndim}) "
                        f"and less than the rank of the indices ({indices.ndim})")
    depth = int_of(indices.dims[-1]) if indices.dims is not None else None
    if depth is None:
        return unknown
    ndim = indices.ndim + data.ndim - depth - 1 - batch
    if data.dims is None:
        return TensorStructInfo(None, data.dtype, ndim, data.vdevice)
    if depth > data.ndim - batch:
        raise info.fail(f"the last dimension of the indices {fmt_dims(indices.dims)} indexes more "
                        f"than the {data.ndim - batch} non-batch axes of the data {fmt_dims(data.dims)}")
    return make_tensor(indices.dims[:-1] + data.dims[batch + depth:], data.dtype, vdevice=data.vdevice)


register("gather_nd", ("data", "indices"), _infer_gather_nd, (Attr("batch_dims", 0, ATTR_INT),))


# ---------------------------------------------------------------- scatter
def _infer_scatter_elements(info: CallInfo) -> StructInfo:
    data, indices, updates = (tensor_arg(info, i) for i in range(3))
    if data.ndim < 0:
        return TensorStructInfo(None, data.dtype, -1, data.vdevice)
    if indices.ndim >= 0 and updates.ndim >= 0 and not data.ndim == indices.ndim == updates.ndim:
        raise info.fail(f"the data, the indices and the updates must have the same rank, got "
                        f"{describe(data)}, {describe(indices)} and {describe(updates)}")
    if data.dtype != VOID and updates.dtype != VOID and data.dtype != updates.dtype:
        raise info.fail(f"the updates must have the data's dtype {data.dtype}, got {updates.dtype}")
    _require_int(info, indices)
    if indices.dims is not None and updates.dims is not None \
            and any(prove_not_equal(a, b) for a, b in zip(indices.dims, updates.dims)):
        raise info.fail(f"the indices and the updates must have the same shape, got "
                        f"{fmt_dims(indices.dims)} and {fmt_dims(updates.dims)}")
    return _like_data(data)


register("scatter_elements", ("data", "indices", "updates"), _infer_scatter_elements,
         (Attr("axis", 0, ATTR_INT), Attr("reduction", "update", ATTR_STR)))


def _infer_scatter_nd(info: CallInfo) -> StructInfo:
    data, indices, updates = (tensor_arg(info, i) for i in range(3))
    if data.dtype == VOID or updates.dtype == VOID:
        raise info.fail(f"the data and the updates need a known dtype, got {describe(data)} and "
                        f"{describe(updates)}")
    if data.dtype != updates.dtype:
        raise info.fail(f"the updates must have the data's dtype {data.dtype}, got {updates.dtype}")
    _require_int(info, indices)
    if data.dims is not None and indices.dims is not None and updates.dims is not None:
        depth = int_of(indices.dims[-1])
        if depth is None:
            raise info.fail(f"the last dimension of the indices must be a constant, got "
                            f"{fmt_dims(indices.dims)}")
        if depth > data.ndim:
            raise info.fail(f"the last dimension of the indices {fmt_dims(indices.dims)} indexes "
                            f"more than the {data.ndim} axes of the data")
        want = indices.dims[:-1] + data.dims[depth:]
        if len(want) != updates.ndim or not all(prove_equal(a, b) for a, b in zip(want, updates.dims)):
            raise info.fail(f"the updates must have the shape indices.shape[:-1] + data.shape[{depth}:] "
                            f"= {fmt_dims(want)}, got {fmt_dims(updates.dims)}")
    return _like_data(data)


register("scatter_nd", ("data", "indices", "updates"), _infer_scatter_nd,
         (Attr("reduction", "update", ATTR_STR),))


# ---------------------------------------------------------------- advanced indexing
def _index_tensors(info: CallInfo, i: int) -> list:
    """The index tensors of a tuple argument (or of a single tensor), each of an integer dtype."""
    s = info.sinfo[i]
    fields = list(s.fields) if isinstance(s, TupleStructInfo) else [s]
    for k, f in enumerate(fields):
        if not isinstance(f, TensorStructInfo):
            raise info.fail(f"index {k} must be a tensor, got {describe(f)}")
        _require_int(info, f)
    return fields


def _infer_index_tensor(info: CallInfo) -> StructInfo:
    data = tensor_arg(info, 0)
    if not isinstance(info.sinfo[1], TupleStructInfo):
        raise info.fail(f"the indices must be a tuple of tensors, got {describe(info.sinfo[1])}")
    indices = _index_tensors(info, 1)
    if not indices:
        raise info.fail("needs at least one index tensor")
    for k, t in enumerate(indices):
        if t.dtype != VOID and not t.dtype.is_int:
            raise info.fail(f"index {k} must have an int dtype, got {describe(t)}")
    if data.ndim >= 0 and len(indices) > data.ndim:
        raise info.fail(f"{len(indices)} index tensors index a tensor of {data.ndim} dimensions")
    # the index shapes broadcast together (numpy's rule; a size it cannot prove equal: unknown)
    shape: list | None = None
    if all(t.dims is not None for t in indices):
        shape = [IntImm(INT64, 1)] * max(t.ndim for t in indices)
        for t in indices:
            for k in range(1, t.ndim + 1):
                a, b = shape[-k], t.dims[-k]
                if int_of(a) == 1:
                    shape[-k] = b
                elif int_of(b) == 1:
                    continue
                elif int_of(a) is not None and int_of(b) is not None and int_of(a) != int_of(b):
                    raise info.fail(f"the index shapes do not broadcast: {fmt_dims(tuple(shape))} "
                                    f"against {fmt_dims(t.dims)}")
                elif not prove_equal(a, b):
                    shape = None
                    break
            if shape is None:
                break
    if shape is not None and data.dims is not None:
        return make_tensor(tuple(shape) + data.dims[len(indices):], data.dtype, vdevice=data.vdevice)
    ndim = len(shape) + data.ndim - len(indices) if shape is not None and data.ndim >= 0 else -1
    return TensorStructInfo(None, data.dtype, ndim, data.vdevice)


register("index_tensor", ("data", "indices"), _infer_index_tensor, prepare=prepare_tuple_arg(1))


def _infer_index_put(info: CallInfo) -> StructInfo:
    data, values = tensor_arg(info, 0), tensor_arg(info, 2)
    indices = _index_tensors(info, 1)
    if data.ndim < 0:
        return TensorStructInfo(None, data.dtype, -1, data.vdevice)
    for k, t in enumerate(indices):
        if 0 <= t.ndim < 1:
            raise info.fail(f"index {k} must have at least one dimension, got {describe(t)}")
    if len(indices) != data.ndim:
        raise info.fail(f"needs one index tensor per dimension of the data ({data.ndim}), "
                        f"got {len(indices)}")
    if data.dtype != VOID and values.dtype != VOID and data.dtype != values.dtype:
        raise info.fail(f"the values must have the data's dtype {data.dtype}, got {values.dtype}")
    return _like_data(data)


register("index_put", ("data", "indices", "values"), _infer_index_put,
         (Attr("accumulate", False, ATTR_BOOL),), prepare=prepare_tuple_arg(1))


# ---------------------------------------------------------------- slices and sequences
def _int_prim(info: CallInfo, i: int) -> Any:
    arg = info.args[i]
    if not isinstance(arg, PrimValue) or not arg.value.dtype.is_integer:
        raise info.fail(f"{arg_name(info, i)} must be an integer, got {describe(info.sinfo[i])}")
    return arg.value


def _infer_slice_scatter(info: CallInfo) -> StructInfo:
    data, src = tensor_arg(info, 0), tensor_arg(info, 1)
    if data.ndim < 0:
        return TensorStructInfo(None, data.dtype, -1, data.vdevice)
    normalize_axis(info, info.attrs["axis"], data.ndim)
    if src.ndim >= 0 and src.ndim != data.ndim:
        raise info.fail(f"the source must have the data's rank {data.ndim}, got {describe(src)}")
    if data.dtype != VOID and src.dtype != VOID and data.dtype != src.dtype:
        raise info.fail(f"the source must have the data's dtype {data.dtype}, got {src.dtype}")
    start, end, step = (_int_prim(info, i) for i in (2, 3, 4))
    if int_of(step) is not None and int_of(step) < 1:
        raise info.fail(f"the step must be at least 1, got {int_of(step)}")
    if int_of(start) is not None and int_of(end) is not None and int_of(end) < int_of(start):
        raise info.fail(f"the start {int_of(start)} must not be past the end {int_of(end)}")
    axis = info.attrs["axis"] % data.ndim
    if data.dims is not None and src.dims is not None:
        for i, (a, b) in enumerate(zip(data.dims, src.dims)):
            if i != axis and prove_not_equal(a, b):
                raise info.fail(f"the source {fmt_dims(src.dims)} must have the data's shape "
                                f"{fmt_dims(data.dims)} but along axis {axis}")
        count = dim_floordiv(dim_sub(dim_add(dim_sub(end, start), step), 1), step)
        if prove_not_equal(src.dims[axis], count):
            raise info.fail(f"the source has {fmt_dim(src.dims[axis])} elements along axis {axis}, "
                            f"the slice {fmt_dim(count)}")
    return TensorStructInfo(data.shape, data.dtype, data.ndim, data.vdevice)


register("slice_scatter", ("input", "src", "start", "end", "step"), _infer_slice_scatter,
         (Attr("axis", 0, ATTR_INT),), prepare=_prepare_prims(2, 3, 4), positional=("axis",))


def _infer_reverse_sequence(info: CallInfo) -> StructInfo:
    data, lengths = tensor_arg(info, 0), tensor_arg(info, 1)
    if lengths.ndim >= 0 and lengths.ndim != 1:
        raise info.fail(f"the sequence lengths must be 1-d, got {describe(lengths)}")
    if lengths.dtype != VOID and str(lengths.dtype) not in ("int32", "int64"):
        raise info.fail(f"the sequence lengths must be int32 or int64, got {describe(lengths)}")
    if data.ndim >= 0:
        normalize_axis(info, info.attrs["seq_axis"], data.ndim)
        batch = normalize_axis(info, info.attrs["batch_axis"], data.ndim)
        dims, count = known_dims(data), known_dims(lengths)
        if dims is not None and count is not None and prove_not_equal(count[0], dims[batch]):
            raise info.fail(f"{fmt_dim(count[0])} sequence lengths for a batch axis of "
                            f"{fmt_dim(dims[batch])}")
    return data


register("reverse_sequence", ("data", "seq_lengths"), _infer_reverse_sequence,
         (Attr("seq_axis", 1, ATTR_INT), Attr("batch_axis", 0, ATTR_INT)))


def _infer_dynamic_strided_slice(info: CallInfo) -> StructInfo:
    data = tensor_arg(info, 0)
    if data.ndim < 0:
        return TensorStructInfo(None, data.dtype, -1, data.vdevice)
    for i in (1, 2, 3):
        s = tensor_arg(info, i)
        count = int_of(s.dims[0]) if s.dims is not None and s.ndim == 1 else None
        if count != data.ndim:
            raise info.fail(f"{arg_name(info, i)} must be a 1-d tensor of {data.ndim} values, "
                            f"got {describe(s)}")
        if s.dtype != VOID and str(s.dtype) != "int64":
            raise info.fail(f"{arg_name(info, i)} must be int64, got {describe(s)}")
    return TensorStructInfo(None, data.dtype, data.ndim, data.vdevice)


register("dynamic_strided_slice", ("x", "begin", "end", "strides"), _infer_dynamic_strided_slice)
