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
from .errors import TVMSError
from .expr import IntImm
from .relax import StringImm
from .relax_infer import INT64, describe, prove_equal, tensor_arg
from .relax_op import (ATTR_ANY, ATTR_BOOL, ATTR_DTYPE, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo,
                       register)
from .relax_ops import _infer_call_tir, _prepare_dps  # (R.call_tir's rules, which these share)
from .relax_ops_vm import prepare_memory
from .struct_info import (VOID, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo, is_base_of)

# DLPack's device type codes, as ``R.cpu(0)`` ... ``R.device(device_type=1, index=0)`` write them
DEVICE_TYPES = {"cpu": 1, "cuda": 2, "opencl": 4, "vulkan": 7, "metal": 8, "vpi": 9, "rocm": 10,
                "ext_dev": 12, "webgpu": 15, "hexagon": 16}


def _void(info: CallInfo) -> StructInfo:
    return TupleStructInfo(())


def _is_void(sinfo: StructInfo) -> bool:
    return isinstance(sinfo, TupleStructInfo) and not sinfo.fields


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


def _infer_call_py_func(info: CallInfo) -> StructInfo:
    """TVM's rules: the name is a string literal, the arguments one tuple, and the result the one
    struct info the call states (a tuple of several outputs is stated as one tuple)."""
    if not isinstance(info.args[0], StringImm):
        raise info.fail(f"the first argument names the Python function as a string literal "
                        f"(R.str(\"name\")), not {describe(info.sinfo[0])}")
    if not isinstance(info.sinfo[1], TupleStructInfo):
        raise info.fail(f"the second argument is the tuple of arguments, not {describe(info.sinfo[1])}")
    if len(info.sinfo_args) != 1:
        raise info.fail(f"states exactly one result struct info, got {len(info.sinfo_args)}")
    return info.sinfo_args[0]


register("call_py_func", ("func_name", "args"), _infer_call_py_func)


def py_func_result(outs: tuple) -> tuple:
    """The ty_args of a call_py_func stating ``outs`` (TVM's constructor): each a tensor of known
    shape, several one tuple."""
    for s in outs:
        if not (isinstance(s, TensorStructInfo) and s.dims is not None):
            raise TVMSError(f"R.call_py_func: each out_ty is a tensor of known shape, got {describe(s)}")
    return outs if len(outs) == 1 else (TupleStructInfo(tuple(outs)),)


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
def _infer_call_tir_with_grad(info: CallInfo) -> StructInfo:
    kwargs = info.attrs.get("te_grad_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise info.fail(f"te_grad_kwargs is a dict of the gradient's arguments, got {kwargs!r}")
    return _infer_call_tir(info)


register("call_tir_with_grad", ("func", "args", "packed_ints"), _infer_call_tir_with_grad,
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


register("memory.alloc_storage", ("total_space", "virtual_device_index", "storage_scope", "dtype"), _object,
         prepare=prepare_memory(3))
register("memory.alloc_tensor", ("storage", "offset", "shape", "dtype", "runtime_device_index"),
         _infer_memory_alloc_tensor, min_args=4, prepare=prepare_memory(3, zero_at=4))
def _infer_view(info: CallInfo) -> StructInfo:
    """TVM's R.memory.view: each of shape, dtype and byte offset is R.tuple() (or, for the dtype,
    R.null_value()) when it does not change; a view never reaches past the viewed tensor."""
    from .relax import Call, DataTypeImm, PrimValue

    x = tensor_arg(info, 0)
    shape, dtype, offset = info.args[1:4]
    unchanged = [_is_void(s) for s in info.sinfo]
    if not unchanged[1] and not isinstance(info.sinfo[1], ShapeStructInfo):
        raise info.fail(f"the shape must be a shape or R.tuple(), got {describe(info.sinfo[1])}")
    out_dtype = x.dtype
    if not unchanged[2] and not (isinstance(dtype, Call) and dtype.op.name == "relax.null_value"):
        if isinstance(dtype, DataTypeImm):
            if dtype.value == VOID:
                raise info.fail("the dtype must be a concrete data type; use R.null_value() for no change")
            out_dtype = dtype.value
        elif isinstance(info.sinfo[2], ObjectStructInfo):
            out_dtype = VOID  # (changed into a dtype known at run time)
        else:
            raise info.fail(f"the dtype must be an R.dtype, got {describe(info.sinfo[2])}")
    if unchanged[3]:
        byte_offset = 0
    elif isinstance(info.sinfo[3], PrimStructInfo) and info.sinfo[3].dtype == INT64:
        byte_offset = offset.value.value if isinstance(offset, PrimValue) and isinstance(offset.value, IntImm) \
            else None
    else:
        raise info.fail(f"the relative byte offset must be an int64, got {describe(info.sinfo[3])}")
    dims = x.dims if unchanged[1] else info.sinfo[1].values
    ndim = x.ndim if unchanged[1] else info.sinfo[1].ndim
    _check_view_bounds(info, x, dims, out_dtype, byte_offset)
    if dims is not None:
        from .relax_infer import make_tensor

        return make_tensor(dims, out_dtype, vdevice=x.vdevice)
    return TensorStructInfo(None, out_dtype, ndim, x.vdevice)


def _check_view_bounds(info: CallInfo, x: TensorStructInfo, dims: tuple | None, dtype: DataType,
                       byte_offset: int | None) -> None:
    """The view's end (in bytes) past the tensor's, when both are known numbers."""
    def nbytes(dims: tuple | None, dtype: DataType) -> int | None:
        if dims is None or dtype == VOID or not all(isinstance(d, IntImm) for d in dims):
            return None
        count = 1
        for d in dims:
            count *= d.value
        return count * dtype.bits * dtype.lanes // 8

    have, want = nbytes(x.dims, x.dtype), nbytes(dims, dtype)
    if have is not None and want is not None and want + (byte_offset or 0) > have:
        raise info.fail(f"a view must not exceed the bounds of the viewed tensor: its {want} bytes "
                        f"at byte {byte_offset or 0} end past the {have} bytes of {describe(x)}")


register("memory.view", ("data", "shape", "dtype", "relative_byte_offset"), _infer_view)
register("memory.kill_storage", ("storage",), _void)
register("memory.kill_tensor", ("tensor",), _void)
register("memory.ensure_zero_offset", ("x",), _same)
register("vm.call_tir_dyn", ("func", "args"), _void)

# ---------------------------------------------------------------- inspect: DLTensor fields, read at run time
def _inspect(dtype: str) -> object:
    def infer(info: CallInfo) -> StructInfo:
        tensor_arg(info, 0)
        return PrimStructInfo(DataType(dtype))
    return infer


def _inspect_axis(info: CallInfo) -> StructInfo:
    """tensor_shape_i / tensor_stride_i: an int64 (TVM's dimension type); a constant axis must be
    one of the tensor's."""
    from .relax import PrimValue

    x = tensor_arg(info, 0)
    axis = info.args[1]
    if not isinstance(info.sinfo[1], PrimStructInfo):
        raise info.fail(f"the axis must be a scalar, got {describe(info.sinfo[1])}")
    if isinstance(axis, PrimValue) and isinstance(axis.value, IntImm):
        if axis.value.value < 0 or 0 <= x.ndim <= axis.value.value:
            raise info.fail(f"axis {axis.value.value} is not an axis of {describe(x)}")
    return PrimStructInfo(x.dims[0].dtype if x.dims else INT64)


for _name, _dtype in (("tensor_dtype_code", "uint8"), ("tensor_dtype_bits", "uint8"), ("tensor_dtype_lanes", "uint16"),
                      ("tensor_ndim", "int32"), ("tensor_byte_offset", "uint64"), ("tensor_elem_offset", "uint64")):
    register(f"inspect.{_name}", ("tensor",), _inspect(_dtype))
register("inspect.tensor_shape_i", ("tensor", "axis"), _inspect_axis)
register("inspect.tensor_stride_i", ("tensor", "axis"), _inspect_axis)

# ---------------------------------------------------------------- the training flow (Gradient)
# markers: the value itself
for _name in ("no_grad", "start_checkpoint", "end_checkpoint"):
    register(f"grad.{_name}", ("input",), lambda info: info.sinfo[0])
# gradients of nll_loss and take: shaped as the forward operator's input (its second argument)
register("grad.nll_loss_backward", ("output_grad", "predictions", "targets", "weights"),
         lambda info: info.sinfo[1], (Attr("reduction", "mean", ATTR_STR), Attr("ignore_index", -100, ATTR_INT)),
         min_args=3)
register("grad.take_backward", ("output_grad", "x", "indices"), lambda info: info.sinfo[1],
         (Attr("axis", None, ATTR_INT), Attr("mode", "", ATTR_STR)))
def _prepare_pool_backward(spec, args: tuple, attrs: dict) -> tuple:
    """TVM keeps the attributes as given (padding [1, 1] stays two values); out_layout defaults
    to the layout."""
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["layout"]
    return args, attrs


for _kind in ("max", "avg"):
    register(f"grad.{_kind}_pool2d_backward", ("output_grad", "data"), lambda info: info.sinfo[1],
             (Attr("pool_size", (1, 1), ATTR_INTS), Attr("strides", (1, 1), ATTR_INTS),
              Attr("dilation", (1, 1), ATTR_INTS), Attr("padding", (0, 0, 0, 0), ATTR_INTS),
              Attr("ceil_mode", False, ATTR_BOOL), Attr("count_include_pad", False, ATTR_BOOL),
              Attr("layout", "NCHW", ATTR_STR), Attr("out_layout", None, ATTR_STR)),
             prepare=_prepare_pool_backward,
             positional=("pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad",
                         "layout", "out_layout"))

__all__ = ["DEVICE_TYPES"]
