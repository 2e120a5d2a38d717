"""Relax gather and scatter operators (gather_elements, gather_nd, scatter_elements, scatter_nd),
registered when ``relax_ops`` imports this module. Inference follows TVM 0.27's rules, including
what it leaves unknown: only a shape written out (a ShapeExpr) counts as known here."""
from __future__ import annotations

from .relax_infer import describe, fmt_dims, int_of, make_tensor, normalize_axis, prove_equal, prove_not_equal, tensor_arg
from .relax_op import ATTR_INT, ATTR_STR, Attr, CallInfo, register
from .struct_info import VOID, StructInfo, TensorStructInfo


def _require_int(info: CallInfo, s: TensorStructInfo, unsigned: bool = True) -> None:
    if s.dtype != VOID and not (s.dtype.is_int or (unsigned and s.dtype.is_uint)):
        raise info.fail(f"the indices must have an integer dtype, got {describe(s)}")


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
