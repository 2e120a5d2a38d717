"""Operators of lowered Relax (what the VM runs): storage, tensors in storage, object lifetime.

They appear in modules after ``relax.get_pipeline("default_build")``-style lowering; all their
arguments are Relax values (shapes, ``R.dtype``, ``R.str``, scalars), printed positionally.
"""
from __future__ import annotations

from .relax_op import CallInfo, register
from .struct_info import ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo


def _object(info: CallInfo) -> StructInfo:
    return ObjectStructInfo()


def _void(info: CallInfo) -> StructInfo:
    return TupleStructInfo(())


def _alloc_tensor(info: CallInfo) -> StructInfo:
    from .relax import DataTypeImm

    shape, dtype = info.args[2], info.args[3]
    if not isinstance(info.sinfo[2], ShapeStructInfo) or not isinstance(dtype, DataTypeImm):
        raise info.fail("takes (storage, offset, shape, dtype, device index) with R.shape and R.dtype")
    return TensorStructInfo(shape if info.sinfo[2].values is not None else None, dtype.value,
                            info.sinfo[2].ndim)


register("null_value", (), _object)
register("vm.alloc_storage", ("size", "runtime_device_index", "dtype", "storage_scope"), _object)
register("vm.alloc_tensor", ("storage", "offset", "shape", "dtype", "runtime_device_index"), _alloc_tensor)
register("vm.kill_object", ("obj",), _void)
