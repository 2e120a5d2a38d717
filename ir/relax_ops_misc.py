"""Relax operators that are not math: printing and assertions, shapes as tensors, calls of
packed functions and kernels (pure, in place, with a gradient), devices, parameters, closures,
and the operators of lowered Relax (``memory.*``, ``vm.call_tir_dyn``), with the
``grad.*`` markers of the training flow.

Struct info follows Apache TVM 0.27 (src/relax/op/op.cc and friends). How the calls whose text
is not ``R.name(args, attr=...)`` are written (``R.print(x, format=...)``, ``R.call_tir_inplace``,
``R.hint_on_device(x, R.device(...))``) is the script layer's business (script/relax_call_forms.py).
"""
from __future__ import annotations

from .dtype import DataType
from .expr import IntImm
from .relax_infer import INT64, describe, prove_equal, tensor_arg
from .relax_op import (ATTR_ANY, ATTR_DTYPE, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo,
                       register)
from .relax_ops import _infer_call_tir, _prepare_dps  # (R.call_tir's rules, which these share)
from .struct_info import (VOID, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo, is_base_of)

# DLPack's device type codes, as ``R.cpu(0)`` ... ``R.device(device_type=1, index=0)`` write them
DEVICE_TYPES = {"cpu": 1, "cuda": 2, "opencl": 4, "vulkan": 7, "metal": 8, "vpi": 9, "rocm": 10,
                "ext_dev": 12, "webgpu": 15, "hexagon": 16}


def _void(info: CallInfo) -> StructInfo:
    return TupleStructInfo(())


def _object(info: CallInfo) -> StructInfo:
    return ObjectStructInfo()


def _same(info: CallInfo) -> StructInfo:
    return tensor_arg(info, 0)


def _from_sinfo_args(info: CallInfo) -> StructInfo:
    """The result a packed call states (``ty_args``): anything when none, a tuple of several."""
    if not info.sinfo_args:
        return ObjectStructInfo()
    return info.sinfo_args[0] if len(info.sinfo_args) == 1 else TupleStructInfo(tuple(info.sinfo_args))


# ---------------------------------------------------------------- printing and assertions
def _infer_assert(info: CallInfo) -> StructInfo:
    cond = info.sinfo[0]
    ok = False
    if isinstance(cond, TensorStructInfo):
        ok = cond.ndim in (0, -1) and (cond.dtype == VOID or cond.dtype.is_bool)
    elif isinstance(cond, PrimStructInfo):
        ok = cond.dtype.is_bool
    if not ok:
        raise info.fail(f"the condition must be a bool scalar, got {describe(cond)}")
    return TupleStructInfo(())


# (the format string is the first argument of print and the second of assert_op, as in TVM)
register("print", ("format", "values"), _void, variadic=True, min_args=1)
register("assert_op", ("condition", "format", "values"), _infer_assert, variadic=True, min_args=2)


# ---------------------------------------------------------------- shapes and tensors
def _infer_shape_to_tensor(info: CallInfo) -> StructInfo:
    s = info.sinfo[0]
    if not isinstance(s, ShapeStructInfo):
        raise info.fail(f"takes a shape, got {describe(s)}")
    dims = (IntImm(INT64, s.ndim),)  # (-1 when the rank is unknown, as TVM writes it)
    from .relax import ShapeExpr

    return TensorStructInfo(ShapeExpr(dims, ShapeStructInfo(dims)), INT64, 1)


def _infer_tensor_to_shape(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    if x.ndim != 1:
        raise info.fail(f"takes a 1-d tensor, got {describe(x)}")
    dims = x.dims
    if dims is not None and isinstance(dims[0], IntImm):
        return ShapeStructInfo(None, dims[0].value)
    return ShapeStructInfo(None, -1)


register("shape_to_tensor", ("expr",), _infer_shape_to_tensor)
register("tensor_to_shape", ("expr",), _infer_tensor_to_shape)


# ---------------------------------------------------------------- packed calls
def _infer_call_pure_packed(info: CallInfo) -> StructInfo:
    return _from_sinfo_args(info)


def _check_inplace(info: CallInfo, indices: tuple, count: int, what: str) -> None:
    """TVM's rules for in-place indices: each in [-1, count), unique, not all -1."""
    seen: set = set()
    for i, index in enumerate(indices):
        if index < -1 or index >= count:
            raise info.fail(f"in-place index {i} is out of range (must be between -1 and {count - 1}, "
                            f"inclusive, but is {index})")
        if index != -1:
            if index in seen:
                raise info.fail(f"all in-place indices must be unique, but index {index} appears more than once")
            seen.add(index)
    if not seen:
        raise info.fail(f"at least one index must have a value other than -1 (or else simply use {what})")


def _infer_call_inplace_packed(info: CallInfo) -> StructInfo:
    indices = info.attrs["inplace_indices"] or ()
    count = len(info.args) - 1
    if count < 1:
        raise info.fail("takes the packed function and at least one argument to it")
    _check_inplace(info, indices, count, "R.call_pure_packed")
    ret = _from_sinfo_args(info)
    outs = (ret,) if len(indices) == 1 else None
    if outs is None:
        if not isinstance(ret, TupleStructInfo):
            raise info.fail("several in-place indices need a tuple of results in ty_args")
        outs = ret.fields
    for i, index in enumerate(indices):
        if index != -1 and not is_base_of(outs[i], info.sinfo[index + 1]):
            raise info.fail(f"the result {describe(outs[i])} does not fit the in-place argument "
                            f"{index}: {describe(info.sinfo[index + 1])}")
    return ret


register("call_pure_packed", ("func", "args"), _infer_call_pure_packed, variadic=True, min_args=1)
register("call_inplace_packed", ("func", "args"), _infer_call_inplace_packed,
         (Attr("inplace_indices", (), ATTR_INTS, required=True),), variadic=True, min_args=1)
register("call_builtin_with_ctx", ("func", "args"),
         lambda info: info.sinfo_args[0] if info.sinfo_args else TupleStructInfo(()))


# ---------------------------------------------------------------- kernels: in place, with a gradient
def _infer_call_tir_inplace(info: CallInfo) -> StructInfo:
    ret = _infer_call_tir(info)
    outs = info.sinfo_args
    indices = info.attrs["inplace_indices"] or ()
    if len(indices) != len(outs):
        raise info.fail("there must be an in-place index for each output")
    inputs = info.sinfo[1].fields
    _check_inplace(info, indices, len(inputs), "R.call_tir")
    for i, index in enumerate(indices):
        if index == -1:
            continue
        out, arg = outs[i], inputs[index]
        if not (isinstance(arg, TensorStructInfo) and arg.dtype == out.dtype and arg.dims is not None
                and len(arg.dims) == len(out.dims)
                and all(prove_equal(a, b) for a, b in zip(arg.dims, out.dims))):
            raise info.fail(f"the input used for an in-place mutation must be a tensor with identical "
                            f"shape and dtype as the output; output {i} is {describe(out)}, input "
                            f"{index} is {describe(arg)}")
    return ret


register("call_tir_inplace", ("func", "args", "packed_ints"), _infer_call_tir_inplace,
         (Attr("inplace_indices", (), ATTR_INTS, required=True),), min_args=2, prepare=_prepare_dps)
register("call_tir_with_grad", ("func", "args", "packed_ints"), _infer_call_tir,
         (Attr("te_grad_name", None, ATTR_STR, required=True), Attr("te_grad_kwargs", None, ATTR_ANY)),
         min_args=2, prepare=_prepare_dps)


# ---------------------------------------------------------------- devices and parameters
def _infer_to_vdevice(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return TensorStructInfo(x.shape, x.dtype, x.ndim, info.attrs["dst_vdevice"])


def _infer_wrap_param(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return TensorStructInfo(x.shape, info.attrs["dtype"], x.ndim, x.vdevice)


register("hint_on_device", ("data",), _same,
         (Attr("device_type", None, ATTR_INT, required=True), Attr("index", 0, ATTR_INT),
          Attr("memory_scope", "global", ATTR_STR)))
register("to_vdevice", ("data",), _infer_to_vdevice, (Attr("dst_vdevice", None, ATTR_ANY, required=True),))
register("builtin.stop_lift_params", ("x",), _same)
register("wrap_param", ("data",), _infer_wrap_param, (Attr("dtype", DataType("float32"), ATTR_DTYPE),))


# ---------------------------------------------------------------- closures
def _infer_invoke_closure(info: CallInfo) -> StructInfo:
    return _from_sinfo_args(info)


register("make_closure", ("func", "args"), _object, prepare=_prepare_dps)
register("invoke_closure", ("closure", "args"), _infer_invoke_closure, prepare=_prepare_dps)
register("invoke_pure_closure", ("closure", "args"), _infer_invoke_closure, prepare=_prepare_dps)


# ---------------------------------------------------------------- lowered Relax
def _infer_memory_alloc_tensor(info: CallInfo) -> StructInfo:
    from .relax import DataTypeImm

    shape, dtype = info.args[2], info.args[3]
    if not isinstance(info.sinfo[2], ShapeStructInfo):
        raise info.fail(f"the shape must be a shape, got {describe(info.sinfo[2])}")
    out = dtype.value if isinstance(dtype, DataTypeImm) else VOID
    return TensorStructInfo(shape, out, info.sinfo[2].ndim)


def _prepare_memory(dtype_at: int, scope_at: int | None = None, count: int = 0) -> object:
    """TVM's constructors: a dtype written as a string is an ``R.dtype``, a scope an ``R.str``,
    and a missing device index is 0."""
    def prepare(spec, args: tuple, attrs: dict) -> tuple:
        from .relax import DataTypeImm, PrimValue, StringImm

        args = list(args)
        if isinstance(args[dtype_at], StringImm):
            args[dtype_at] = DataTypeImm(DataType(args[dtype_at].value), ObjectStructInfo())
        if scope_at is not None and isinstance(args[scope_at], str):
            args[scope_at] = StringImm(args[scope_at], ObjectStructInfo())
        if len(args) < count:
            zero = IntImm(INT64, 0)
            args.append(PrimValue(zero, PrimStructInfo(INT64, zero)))
        return args, attrs
    return prepare


register("memory.alloc_storage", ("total_space", "virtual_device_index", "storage_scope", "dtype"), _object,
         prepare=_prepare_memory(3))
register("memory.alloc_tensor", ("storage", "offset", "shape", "dtype", "runtime_device_index"),
         _infer_memory_alloc_tensor, min_args=4, prepare=_prepare_memory(3, count=5))
register("memory.kill_storage", ("storage",), _void)
register("memory.kill_tensor", ("tensor",), _void)
register("memory.ensure_zero_offset", ("x",), _same)
register("vm.call_tir_dyn", ("func", "args"), _void)

# markers of the training flow (Gradient): the value itself
for _name in ("no_grad", "start_checkpoint", "end_checkpoint"):
    register(f"grad.{_name}", ("input",), lambda info: info.sinfo[0])

__all__ = ["DEVICE_TYPES"]
