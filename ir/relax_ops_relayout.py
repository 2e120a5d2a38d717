"""Relax layout_transform: a tensor stored in a new layout through an index map, registered when
``relax_ops`` imports this module."""
from __future__ import annotations

from .expr import FloatImm, IntImm
from .index_map import IndexMap
from .relax_infer import describe, known_dims, make_tensor, tensor_arg
from .relax_op import ATTR_ANY, Attr, CallInfo, OpSpec, register
from .struct_info import VOID, StructInfo, TensorStructInfo


def _prepare_layout_transform(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """A Python function becomes an IndexMap; a number pad value takes the tensor's dtype."""
    data = getattr(args[0], "struct_info", None) if args else None
    data = data if isinstance(data, TensorStructInfo) else TensorStructInfo()
    index_map, pad = attrs["index_map"], attrs["pad_value"]
    if callable(index_map) and not isinstance(index_map, IndexMap):
        attrs["index_map"] = IndexMap.from_func(index_map, data.ndim if data.ndim >= 0 else None)
    if isinstance(pad, (int, float)) and not isinstance(pad, bool) and data.dtype != VOID:
        attrs["pad_value"] = FloatImm(data.dtype, float(pad)) if data.dtype.is_float else IntImm(data.dtype, int(pad))
    return args, attrs


def _infer_layout_transform(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    index_map = info.attrs["index_map"]
    if not isinstance(index_map, IndexMap):
        raise info.fail(f"index_map must be a lambda of the indices, got {index_map!r}")
    pad = info.attrs["pad_value"]
    if pad is not None and (x.dtype == VOID or pad.dtype != x.dtype):
        raise info.fail(f"the pad value {pad!r} must have the tensor's dtype, got {describe(x)}")
    ndim = len(index_map.final_indices)
    if x.ndim >= 0 and len(index_map.initial_indices) != x.ndim:
        raise info.fail(f"the index map takes {len(index_map.initial_indices)} indices, the tensor "
                        f"has {x.ndim} dimensions")
    dims = known_dims(x)
    if dims is None:
        return TensorStructInfo(None, x.dtype, ndim, x.vdevice)
    return make_tensor(index_map.map_shape(dims), x.dtype, vdevice=x.vdevice)


register("layout_transform", ("x",), _infer_layout_transform,
         (Attr("index_map", None, ATTR_ANY, required=True), Attr("pad_value", None, ATTR_ANY)),
         prepare=_prepare_layout_transform)
