"""Operators of lowered Relax (what the VM runs): storage, tensors in storage, object lifetime.

They appear in modules after ``relax.get_pipeline("default_build")``-style lowering; all their
arguments are Relax values (shapes, ``R.dtype``, ``R.str``, scalars), printed positionally.
"""
from __future__ import annotations

from .dtype import DataType
from .expr import IntImm
from .relax_op import CallInfo, register
from .struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)


def _object(info: CallInfo) -> StructInfo:
    return ObjectStructInfo()


def _void(info: CallInfo) -> StructInfo:
    return TupleStructInfo(())


def _tensor_of(info: CallInfo, shape_at: int, usage: str) -> StructInfo:
    """A tensor whose shape and dtype are the arguments at ``shape_at`` and the one after."""
    from .relax import DataTypeImm

    shape, dtype = info.args[shape_at], info.args[shape_at + 1]
    if not isinstance(info.sinfo[shape_at], ShapeStructInfo) or not isinstance(dtype, DataTypeImm):
        raise info.fail(f"takes ({usage}) with R.shape and R.dtype")
    sinfo = info.sinfo[shape_at]
    return TensorStructInfo(shape if sinfo.values is not None else None, dtype.value, sinfo.ndim)


def _alloc_tensor(info: CallInfo) -> StructInfo:
    return _tensor_of(info, 2, "storage, offset, shape, dtype, device index")


def _builtin_alloc_tensor(info: CallInfo) -> StructInfo:
    out = _tensor_of(info, 0, "shape, dtype, device index, storage scope")
    # (TVM takes the vdevice at the device index of the module's list, which inference does not
    # see here; the call's ty_args, the output CallTIRRewrite allocates, name the same one)
    declared = info.sinfo_args[0] if info.sinfo_args else None
    if isinstance(declared, TensorStructInfo) and declared.vdevice is not None:
        out = TensorStructInfo(out.shape, out.dtype, out.ndim, declared.vdevice)
    return out


def prepare_memory(dtype_at: int, scope_at: int | None = None, zero_at: int | None = None) -> object:
    """TVM's constructors: a dtype written as a string is an ``R.dtype``; a missing storage scope
    is ``R.str("global")``, a missing device index 0."""
    def prepare(spec, args: tuple, attrs: dict) -> tuple:
        from .relax import DataTypeImm, PrimValue, StringImm

        args = list(args)
        if isinstance(args[dtype_at], StringImm):
            args[dtype_at] = DataTypeImm(DataType(args[dtype_at].value), ObjectStructInfo())
        for at in sorted(k for k in (scope_at, zero_at) if k is not None):
            if len(args) == at:
                zero = IntImm(DataType("int64"), 0)
                args.append(StringImm("global", ObjectStructInfo()) if at == scope_at
                            else PrimValue(zero, PrimStructInfo(zero.dtype, zero)))
        return args, attrs
    return prepare


register("null_value", (), _object)
# the output of a destination-passing call, before memory planning (CallTIRRewrite)
register("builtin.alloc_tensor", ("shape", "dtype", "runtime_device_index", "storage_scope"),
         _builtin_alloc_tensor, min_args=3, prepare=prepare_memory(1, scope_at=3))
register("vm.alloc_storage", ("size", "runtime_device_index", "dtype", "storage_scope"), _object, min_args=3,
         prepare=prepare_memory(2, scope_at=3))
register("vm.alloc_tensor", ("storage", "offset", "shape", "dtype", "runtime_device_index"), _alloc_tensor,
         min_args=4, prepare=prepare_memory(3, zero_at=4))
register("vm.kill_object", ("obj",), _void)
