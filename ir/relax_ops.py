"""The Relax operators: one ``register`` call each (see ``relax_op.py`` for the fields).

Struct-info inference follows Apache TVM 0.27 (shapes, symbolic dimensions, dtype rules and the
cases it rejects); every error names the operator. Attributes are declared in the order TVM
prints them, and TVM prints all of them, defaults included: ``R.sum(x, axis=None, keepdims=False)``.

Families: elementwise, reductions and creation here; layout and indexing in ``relax_ops_layout``;
neural-network operators in ``relax_ops_nn``; calls into functions at the end of this file.
"""
from __future__ import annotations

from .distributed import DTensorStructInfo
from .expr import IntImm
from .module import GlobalVar
from .relax_infer import (BOOL, INT64, as_tuple_expr, binary_dtype, broadcast_shapes, describe,
                          infer_broadcast, infer_unary, infer_unary_float, make_tensor,
                          prepare_shape_arg, reduce_dims, shape_arg, tensor_arg, tensor_of_shape)
from .relax_op import ATTR_BOOL, ATTR_DTYPE, ATTR_INT, ATTR_INTS, Attr, CallInfo, OpSpec, register
from .struct_info import (VOID, ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)

# ---------------------------------------------------------------- elementwise
# Arithmetic: the dtypes must match (a bool operand is let through); comparisons give bool and do
# not compare the dtypes. Operands are tensors or scalars (R.Prim), broadcast numpy-style.
for _name in ("add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum", "floor_mod",
              "mod", "atan2", "log_add_exp", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
              "bitwise_xor", "left_shift", "right_shift"):
    register(_name, ("x1", "x2"), infer_broadcast)


def _infer_compare(info: CallInfo) -> StructInfo:
    return infer_broadcast(info, BOOL)


for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    register(_name, ("x1", "x2"), _infer_compare)

# Unary: the result is the input's struct info; the transcendental ones need a float input.
for _name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf"):
    register(_name, ("x",), infer_unary_float)
for _name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan"):
    register(_name, ("x",), infer_unary_float)
for _name in ("negative", "abs", "floor", "ceil", "round", "trunc", "sign", "square", "logical_not", "bitwise_not"):
    register(_name, ("x",), infer_unary)


def _infer_check(info: CallInfo) -> StructInfo:
    """isfinite, isinf, isnan: a bool tensor of the input's shape."""
    x = tensor_arg(info, 0)
    return TensorStructInfo(x.shape, BOOL, x.ndim, x.vdevice)


for _name in ("isfinite", "isinf", "isnan"):
    register(_name, ("x",), _infer_check)

register("nn.relu", ("data",), infer_unary)
for _name in ("nn.gelu", "nn.gelu_tanh", "nn.silu"):
    register(_name, ("data",), infer_unary_float)


def _infer_astype(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    dtype = info.attrs["dtype"]
    if dtype is None:
        raise info.fail("the target dtype is missing, as in R.astype(x, dtype=\"float16\")")
    return TensorStructInfo(x.shape, dtype, x.ndim, x.vdevice)


register("astype", ("x",), _infer_astype, (Attr("dtype", None, ATTR_DTYPE, required=True),))


def _infer_where(info: CallInfo) -> StructInfo:
    cond, a, b = (tensor_arg(info, i) for i in range(3))
    if cond.dtype != VOID and not cond.dtype.is_bool:
        raise info.fail(f"the condition must be a bool tensor, got {describe(cond)}")
    dtype = binary_dtype(info, a, b)
    ndims = (cond.ndim, a.ndim, b.ndim)
    ndim = -1 if min(ndims) < 0 else max(ndims)
    if cond.dims is not None and a.dims is not None and b.dims is not None:
        out = broadcast_shapes(info, a.dims, b.dims)
        out = broadcast_shapes(info, cond.dims, out) if out is not None else None
        if out is not None:
            return make_tensor(out, dtype)
    elif cond.shape is not None and cond.shape is a.shape and cond.shape is b.shape:
        return TensorStructInfo(cond.shape, dtype, cond.ndim)
    return TensorStructInfo(None, dtype, ndim)


register("where", ("condition", "x1", "x2"), _infer_where)


# ---------------------------------------------------------------- reductions
def _infer_statistical(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return reduce_dims(info, x, info.attrs["axis"], info.attrs["keepdims"], x.dtype)


for _name in ("sum", "mean", "max", "min", "prod", "variance", "std"):
    register(_name, ("x",), _infer_statistical,
             (Attr("axis", None, ATTR_INTS), Attr("keepdims", False, ATTR_BOOL)))


def _infer_arg_reduce(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axis = info.attrs["axis"]
    # TVM takes the index dtype from the shape (int64 for every shape it builds)
    dtype = x.dims[0].dtype if x.dims else INT64
    return reduce_dims(info, x, None if axis is None else (axis,), info.attrs["keepdims"], dtype,
                       one=IntImm(dtype, 1))


for _name in ("argmax", "argmin"):
    register(_name, ("x",), _infer_arg_reduce,
             (Attr("axis", None, ATTR_INT), Attr("keepdims", False, ATTR_BOOL)))


# ---------------------------------------------------------------- creation
def _infer_zeros_ones(info: CallInfo) -> StructInfo:
    shape = shape_arg(info, 0)
    if info.attrs["dtype"] is None:
        raise info.fail("the dtype is missing, as in R.zeros(R.shape([2, 3]), dtype=\"float32\")")
    return tensor_of_shape(info.args[0], shape, info.attrs["dtype"])


for _name in ("zeros", "ones"):
    register(_name, ("shape",), _infer_zeros_ones, (Attr("dtype", None, ATTR_DTYPE, required=True),),
             prepare=prepare_shape_arg(0))


def _fill_value(info: CallInfo, i: int) -> TensorStructInfo:
    """The fill value of full / full_like: a zero-rank tensor."""
    fill = info.sinfo[i]
    if not isinstance(fill, TensorStructInfo) or fill.ndim != 0:
        raise info.fail(f"the fill value must be a zero-rank tensor such as R.const(1.0, \"float32\"), "
                        f"got {describe(fill)}")
    return fill


def _infer_full(info: CallInfo) -> StructInfo:
    shape = shape_arg(info, 0)
    fill = _fill_value(info, 1)
    dtype = info.attrs["dtype"] if info.attrs["dtype"] is not None else fill.dtype
    return tensor_of_shape(info.args[0], shape, dtype, fill.vdevice)


register("full", ("shape", "fill_value"), _infer_full, (Attr("dtype", None, ATTR_DTYPE),),
         prepare=prepare_shape_arg(0))


def _infer_like(info: CallInfo) -> StructInfo:
    """zeros_like, ones_like, full_like: the input's shape, in ``dtype`` when given."""
    x = tensor_arg(info, 0)
    if len(info.args) > 1:
        _fill_value(info, 1)
    dtype = info.attrs["dtype"] if info.attrs["dtype"] is not None else x.dtype
    return TensorStructInfo(x.shape, dtype, x.ndim, x.vdevice)


for _name in ("zeros_like", "ones_like"):
    register(_name, ("x",), _infer_like, (Attr("dtype", None, ATTR_DTYPE),))
register("full_like", ("x", "fill_value"), _infer_like, (Attr("dtype", None, ATTR_DTYPE),))


def _infer_shape_of(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return ShapeStructInfo(x.dims, x.ndim) if x.dims is not None else ShapeStructInfo(None, x.ndim)


register("shape_of", ("expr",), _infer_shape_of)


# ---------------------------------------------------------------- calls into functions
def _prepare_dps(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    args = list(args)
    args[1] = as_tuple_expr(args[1])
    return args, attrs


def _out_sinfo(info: CallInfo) -> StructInfo:
    if not info.sinfo_args:
        raise info.fail("the output struct info is missing: out_sinfo=R.Tensor((4,), \"float32\")")
    for s in info.sinfo_args:  # (or DTensors: R.dist.call_tir)
        if not isinstance(s, (TensorStructInfo, DTensorStructInfo)) or s.dims is None:
            raise info.fail(f"every output must be a tensor with a known shape, such as "
                            f"R.Tensor((n, 4), \"float32\"); got {describe(s)}")
    if not isinstance(info.sinfo[1], TupleStructInfo):
        raise info.fail(f"the arguments must be a tuple such as (x, y), got {describe(info.sinfo[1])}")
    return info.sinfo_args[0] if len(info.sinfo_args) == 1 else TupleStructInfo(tuple(info.sinfo_args))


def _infer_call_tir(info: CallInfo) -> StructInfo:
    if not isinstance(info.args[0], GlobalVar):
        raise info.fail("the callee must be a TensorIR function of the module, such as cls.add")
    return _out_sinfo(info)


def _infer_call_dps_packed(info: CallInfo) -> StructInfo:
    return _out_sinfo(info)


def _infer_call_packed(info: CallInfo) -> StructInfo:
    if not info.sinfo_args:
        return ObjectStructInfo()
    if len(info.sinfo_args) == 1:
        return info.sinfo_args[0]
    return TupleStructInfo(tuple(info.sinfo_args))


register("call_tir", ("func", "args", "packed_ints"), _infer_call_tir, min_args=2, prepare=_prepare_dps)
register("call_dps_packed", ("func", "args"), _infer_call_dps_packed, prepare=_prepare_dps)
register("call_packed", ("func", "args"), _infer_call_packed, variadic=True, min_args=1, free_attrs=True)

# ---------------------------------------------------------------- the other families
# (they register on import)
from . import relax_ops_attention, relax_ops_create, relax_ops_dist, relax_ops_image  # noqa: E402,F401
from . import relax_ops_index, relax_ops_layout, relax_ops_misc  # noqa: E402,F401
from . import relax_ops_nn, relax_ops_nn_misc, relax_ops_quant  # noqa: E402,F401
from . import relax_ops_relayout, relax_ops_sort, relax_ops_sum, relax_ops_vision  # noqa: E402,F401

__all__: list[str] = []  # the operators are reached through the registry (relax_op.lookup)
