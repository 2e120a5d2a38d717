"""The Relax operators: one ``register`` call each (see ``relax_op.py`` for the fields)."""
from __future__ import annotations

from .dtype import DataType
from .expr import IntImm
from .relax_infer import (infer_broadcast, infer_unary, int_of, make_tensor, normalize_axis,
                          tensor_arg)
from .relax_op import ATTR_DTYPE, ATTR_INTS, Attr, CallInfo, register
from .struct_info import (VOID, ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)

# ---------------------------------------------------------------- elementwise
for _name in ("add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum"):
    register(_name, ("x1", "x2"), infer_broadcast)


def _infer_compare(info: CallInfo) -> StructInfo:
    return infer_broadcast(info, DataType("bool"))


for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    register(_name, ("x1", "x2"), _infer_compare)

for _name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "negative", "abs", "sin", "cos",
              "floor", "ceil", "round", "erf"):
    register(_name, ("x",), infer_unary)

for _name in ("nn.relu", "nn.silu"):
    register(_name, ("data",), infer_unary)
register("nn.gelu", ("data",), infer_unary)


# ---------------------------------------------------------------- layout
def _infer_permute_dims(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axes = info.attrs["axes"]
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    ndim = len(x.dims)
    order = list(range(ndim))[::-1] if axes is None else [normalize_axis(info, int_of(a), ndim) for a in axes]
    if sorted(order) != list(range(ndim)):
        raise info.fail(f"axes {list(axes)} are not a permutation of {ndim} dimensions")
    return make_tensor([x.dims[i] for i in order], x.dtype)


register("permute_dims", ("x",), _infer_permute_dims, (Attr("axes", None, ATTR_INTS),))


def _infer_matmul(info: CallInfo) -> StructInfo:
    a, b = tensor_arg(info, 0), tensor_arg(info, 1)
    out_dtype = info.attrs["out_dtype"]
    dtype = DataType(out_dtype) if out_dtype not in (None, "void") else (
        a.dtype if a.dtype == b.dtype else VOID)
    if a.dims is None or b.dims is None:
        return TensorStructInfo(None, dtype, -1)
    da, db = a.dims, b.dims
    if len(da) < 1 or len(db) < 1:
        raise info.fail("matmul needs tensors of at least one dimension")
    k1 = da[-1]
    k2 = db[-2] if len(db) >= 2 else db[0]
    if isinstance(k1, IntImm) and isinstance(k2, IntImm) and k1.value != k2.value:
        raise info.fail(f"the reduction dimensions differ: {k1.value} against {k2.value}")
    batch_a, batch_b = da[:-2], db[:-2]
    from .relax_infer import broadcast_dims

    batch = broadcast_dims(info, batch_a, batch_b)
    out = list(batch) + ([da[-2]] if len(da) >= 2 else []) + ([db[-1]] if len(db) >= 2 else [])
    return make_tensor(out, dtype)


register("matmul", ("x1", "x2"), _infer_matmul, (Attr("out_dtype", None, ATTR_DTYPE),))


def _infer_reshape(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    shape = info.sinfo[1]
    if not isinstance(shape, ShapeStructInfo):
        raise info.fail("the new shape must be a shape, such as R.shape([2, 3])")
    return make_tensor(shape.values, x.dtype) if shape.values is not None else \
        TensorStructInfo(None, x.dtype, shape.ndim)


register("reshape", ("x", "shape"), _infer_reshape)


def _infer_shape_of(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return ShapeStructInfo(x.dims, x.ndim) if x.dims is not None else ShapeStructInfo(None, x.ndim)


register("shape_of", ("expr",), _infer_shape_of)


# ---------------------------------------------------------------- calls into functions
def _infer_from_sinfo_args(info: CallInfo) -> StructInfo:
    if not info.sinfo_args:
        return ObjectStructInfo()
    if len(info.sinfo_args) == 1:
        return info.sinfo_args[0]
    return TupleStructInfo(tuple(info.sinfo_args))


register("call_tir", ("func", "args", "packed_ints"), _infer_from_sinfo_args, min_args=2)
register("call_dps_packed", ("func", "args"), _infer_from_sinfo_args)
register("call_packed", ("func", "args"), _infer_from_sinfo_args, variadic=True, min_args=1)
