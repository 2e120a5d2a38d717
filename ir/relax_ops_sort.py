"""Relax sorting and selection operators (sort, argsort, topk, median) and those whose result
size depends on the data (unique, nonzero), registered when ``relax_ops`` imports this module.
TVM 0.27 legalizes sort, argsort and topk to nothing and median through a packed argsort: they run
through their numpy references; unique and nonzero become R.call_pure_packed of the runtime
functions relax.run.unique / relax.run.nonzero (lowering/relax/legalize_sort.py)."""
from __future__ import annotations

from .dtype import DataType
from .expr import IntImm
from .relax import PrimValue
from .relax_infer import BOOL, INT64, make_tensor, normalize_axis, reduce_dims, tensor_arg
from .relax_op import ATTR_BOOL, ATTR_DTYPE, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo, OpSpec, register
from .struct_info import StructInfo, TensorStructInfo, TupleStructInfo

_INT32 = DataType("int32")


def _with_dtype(x: TensorStructInfo, dtype: DataType) -> TensorStructInfo:
    return TensorStructInfo(x.shape, dtype, x.ndim, x.vdevice)


def _infer_sort(info: CallInfo) -> StructInfo:
    return tensor_arg(info, 0)


register("sort", ("x",), _infer_sort, (Attr("axis", -1, ATTR_INT), Attr("descending", False, ATTR_BOOL)))


def _infer_argsort(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    return _with_dtype(x, info.attrs["dtype"] or x.dtype)


register("argsort", ("data",), _infer_argsort,
         (Attr("axis", -1, ATTR_INT), Attr("descending", False, ATTR_BOOL), Attr("dtype", _INT32, ATTR_DTYPE)))


def _infer_topk(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    k, ret = info.attrs["k"], info.attrs["ret_type"]
    index_dtype = info.attrs["dtype"] or x.dtype
    if ret not in ("both", "values", "indices"):
        raise info.fail(f"ret_type must be \"both\", \"values\" or \"indices\", got {ret!r}")
    if x.dims is None:
        values, indices = (TensorStructInfo(None, d, x.ndim, x.vdevice) for d in (x.dtype, index_dtype))
    else:
        dims = list(x.dims)
        axis = normalize_axis(info, info.attrs["axis"], len(dims))
        size = dims[axis].value if isinstance(dims[axis], IntImm) else None
        if k > 0 and (size is None or k < size):  # (k past the size keeps the size)
            dims[axis] = IntImm(INT64, k)
        values, indices = (make_tensor(dims, d, vdevice=x.vdevice) for d in (x.dtype, index_dtype))
    return {"both": TupleStructInfo((values, indices)), "values": values, "indices": indices}[ret]


register("topk", ("data",), _infer_topk,
         (Attr("k", 1, ATTR_INT), Attr("axis", -1, ATTR_INT), Attr("ret_type", "both", ATTR_STR),
          Attr("largest", True, ATTR_BOOL), Attr("dtype", _INT32, ATTR_DTYPE)))


def _infer_median(info: CallInfo) -> StructInfo:
    """The median's values; along one axis also the int64 indices where they are, as a tuple."""
    x = tensor_arg(info, 0)
    axis, keepdims = info.attrs["axis"], info.attrs["keepdims"]
    values = reduce_dims(info, x, axis, keepdims, x.dtype)
    if x.dims is None:  # (TVM's rule: a tuple unless the result is known to be a scalar or all ones)
        if values.ndim == 0 or (axis is None and keepdims and x.ndim >= 0):
            return values
        return TupleStructInfo((values, TensorStructInfo(None, INT64, values.ndim, x.vdevice)))
    if axis is None or len(axis) > 1:
        return values
    return TupleStructInfo((values, make_tensor(values.dims, INT64, vdevice=x.vdevice)))


register("median", ("x",), _infer_median, (Attr("axis", None, ATTR_INTS), Attr("keepdims", False, ATTR_BOOL)))


# ---------------------------------------------------------------- data-dependent shapes
_UNIQUE_FLAGS = ("sorted", "return_index", "return_inverse", "return_counts")


def _prepare_unique(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """As TVM's constructor: the four flags always given (R.prim_value of a bool), the axis an
    R.prim_value when given."""
    args = list(args)
    for i, name in enumerate(_UNIQUE_FLAGS, start=1):
        if i >= len(args):
            args.append(spec.arg_defaults[name])
        if isinstance(args[i], (bool, int)):
            args[i] = PrimValue(IntImm(BOOL, int(args[i])))
    if len(args) > 5 and isinstance(args[5], int):
        args[5] = PrimValue(IntImm(INT64, args[5]))
    return args, attrs


def _infer_unique(info: CallInfo) -> StructInfo:
    """The unique values (a 1-d tensor, or ``ndim`` dimensions along an axis) and, as asked, the
    int64 first indices, inverse indices and counts; a scalar input gives tensors of shape (1,)."""
    x = tensor_arg(info, 0)
    flags = []
    for i, name in enumerate(_UNIQUE_FLAGS[1:], start=2):
        value = getattr(info.args[i], "value", None)
        if not isinstance(value, IntImm):
            raise info.fail(f"{name} must be a constant True or False, got {info.args[i]!r}")
        flags.append(bool(value.value))
    axis = getattr(info.args[5], "value", None) if len(info.args) > 5 else None
    if x.ndim >= 0 and isinstance(axis, IntImm):
        normalize_axis(info, axis.value, x.ndim)
    one = (IntImm(INT64, 1),)
    if x.ndim == 0:
        values = make_tensor(one, x.dtype, vdevice=x.vdevice)
    else:
        values = TensorStructInfo(None, x.dtype, x.ndim if axis is not None else 1, x.vdevice)
    extra = make_tensor(one, INT64, vdevice=x.vdevice) if x.ndim == 0 else TensorStructInfo(None, INT64, 1, x.vdevice)
    outs = [values] + [extra for f in flags if f]
    return outs[0] if len(outs) == 1 else TupleStructInfo(tuple(outs))


register("unique", ("x",) + _UNIQUE_FLAGS + ("axis",), _infer_unique, min_args=1, prepare=_prepare_unique,
         arg_defaults={"sorted": True, "return_index": False, "return_inverse": False, "return_counts": False})


def _infer_nonzero(info: CallInfo) -> StructInfo:
    """The indices of the non-zero elements: (rank, count), the count known only at run time."""
    return TensorStructInfo(None, INT64, 2, tensor_arg(info, 0).vdevice)


register("nonzero", ("x",), _infer_nonzero)
