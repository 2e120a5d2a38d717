"""Relax layout and indexing operators (matmul, permute_dims, reshape, broadcast_to, expand_dims,
squeeze, concat, split, strided_slice, take), registered when ``relax_ops`` imports this module."""
from __future__ import annotations

from typing import Any

from .expr import LT, Call, IntImm, Max, Min, PrimExpr, Var
from .op import get_op
from .relax import PrimValue, ShapeExpr, Tuple
from .relax import Var as RelaxVar
from .relax_infer import (INT64, as_shape_expr, as_tuple_expr, binary_dtype, broadcast_shapes,
                          describe, dim_add, dim_ceildiv, dim_floordiv, dim_mul, dim_sub, fmt_dim,
                          fmt_dims, int_of, known_dims, make_tensor, non_negative, normalize_axes,
                          normalize_axis,
                          op_error, prepare_shape_arg, product, prove_equal, prove_not_equal,
                          shape_arg, simplify_dim, sub_clamped, tensor_arg, tensor_of_shape, to_dim,
                          tuple_of_tensors, unknown_like)
from .relax_op import (ATTR_ANY, ATTR_BOOL, ATTR_DTYPE, ATTR_INT, ATTR_INTS, ATTR_STR, Attr,
                       CallInfo, OpSpec, register)
from .struct_info import (VOID, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo)
from .structural import structural_equal


# ---------------------------------------------------------------- matmul
def _infer_matmul(info: CallInfo) -> StructInfo:
    a, b = tensor_arg(info, 0), tensor_arg(info, 1)
    out_dtype = info.attrs["out_dtype"]
    dtype = out_dtype if out_dtype is not None else binary_dtype(info, a, b)
    if a.ndim < 0 or b.ndim < 0:
        return TensorStructInfo(None, dtype, -1)
    for side, s in (("left", a), ("right", b)):
        if s.ndim == 0:
            raise info.fail(f"the {side} operand must not be a scalar (zero-rank) tensor, "
                            f"got {describe(s)}")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    ndim = max(max(a.ndim, 2), max(b.ndim, 2)) - a_vec - b_vec
    if a.dims is None or b.dims is None:
        return TensorStructInfo(None, dtype, ndim)
    da, db = a.dims, b.dims
    batch = broadcast_shapes(info, da[:-2] if not a_vec else (), db[:-2] if not b_vec else ())
    if batch is None:
        return TensorStructInfo(None, dtype, ndim)
    k1, k2 = da[-1], db[0] if b_vec else db[-2]
    if prove_not_equal(k1, k2):
        raise info.fail(f"the reduction dimensions differ: {fmt_dims(da)} @ {fmt_dims(db)} "
                        f"reduces {fmt_dim(k1)} against {fmt_dim(k2)}")
    out = list(batch) + ([] if a_vec else [da[-2]]) + ([] if b_vec else [db[-1]])
    return make_tensor(out, dtype)


register("matmul", ("x1", "x2"), _infer_matmul, (Attr("out_dtype", None, ATTR_DTYPE),))


# ---------------------------------------------------------------- permute_dims
def _infer_permute_dims(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axes = info.attrs["axes"]
    if axes is None and x.ndim < 0:
        return x if x.shape is None else unknown_like(x)
    if axes is not None:
        if x.ndim < 0:
            raise info.fail(f"axes {list(axes)} need a tensor of known rank, got {describe(x)}")
        if len(axes) != x.ndim:
            raise info.fail(f"axes {list(axes)} do not permute a tensor of {x.ndim} dimensions")
        order = normalize_axes(info, axes, x.ndim)
    else:
        order = list(range(x.ndim))[::-1]
    if order == sorted(order):
        return x
    if x.dims is None:
        return unknown_like(x)
    return make_tensor([x.dims[i] for i in order], x.dtype, vdevice=x.vdevice)


register("permute_dims", ("x",), _infer_permute_dims, (Attr("axes", None, ATTR_INTS),))


# ---------------------------------------------------------------- reshape / broadcast_to
def _prepare_reshape(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """Resolve ``-1`` (the remaining size) and ``0`` (keep that dimension), as TVM's reshape does."""
    x, shape = args[0], as_shape_expr(args[1])
    if not isinstance(shape, ShapeExpr):
        return (x, shape), attrs
    values = list(shape.values)
    infer_at, zeros = None, []
    for i, v in enumerate(values):
        if not v.dtype.is_integer:
            raise op_error(spec, f"the new shape must be made of integers, "
                                 f"got {fmt_dims(tuple(values))}")
        c = int_of(v)
        if c == 0:
            zeros.append(i)
        elif c == -1:
            if infer_at is not None:
                raise op_error(spec, f"the new shape {fmt_dims(tuple(values))} has more than one -1")
            infer_at = i
        elif c is not None and c < 0:
            raise op_error(spec, f"the new shape {fmt_dims(tuple(values))} has a negative size "
                                 f"other than -1")
    if infer_at is None and not zeros:
        return (x, shape), attrs
    data = getattr(x, "struct_info", None)
    old = known_dims(data) if isinstance(data, TensorStructInfo) else None
    if old is None:
        raise op_error(spec, f"the new shape {fmt_dims(tuple(values))} has -1 or 0, which needs the "
                             f"input's shape to be known; got {describe(data)}")
    for i in zeros:
        if i >= len(old):
            raise op_error(spec, f"0 at position {i} of the new shape has no input dimension to keep")
        values[i] = old[i]
    if infer_at is not None:
        known = product(tuple(v for v in values if int_of(v) is None or int_of(v) > 0))
        values[infer_at] = simplify_dim(dim_floordiv(simplify_dim(product(old)), simplify_dim(known)))
    dims = tuple(values)
    return (x, ShapeExpr(dims, ShapeStructInfo(dims), span=getattr(shape, "span", None))), attrs


def _infer_reshape(info: CallInfo) -> StructInfo:

    x = tensor_arg(info, 0)
    shape = shape_arg(info, 1)
    old = known_dims(x)
    if shape.values is not None and old is not None:
        n_old, n_new = simplify_dim(product(old)), simplify_dim(product(shape.values))
        if prove_not_equal(n_old, n_new):
            raise info.fail(f"cannot reshape {fmt_dims(old)} ({fmt_dim(n_old)} elements) into "
                            f"{fmt_dims(tuple(shape.values))} ({fmt_dim(n_new)} elements)")
    if isinstance(info.args[1], RelaxVar) and shape.values is not None:
        return make_tensor(shape.values, x.dtype, vdevice=x.vdevice)
    return tensor_of_shape(info.args[1], shape, x.dtype, x.vdevice)


register("reshape", ("x", "shape"), _infer_reshape, prepare=_prepare_reshape)


def _infer_broadcast_to(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    shape = shape_arg(info, 1)
    if x.ndim >= 0 and shape.ndim >= 0 and shape.ndim < x.ndim:
        raise info.fail(f"cannot broadcast {describe(x)} to the shape {fmt_dims(tuple(shape.values))} "
                        f"of fewer dimensions" if shape.values is not None else
                        f"cannot broadcast {describe(x)} to a shape of {shape.ndim} dimensions")
    old = known_dims(x)
    if old is not None and shape.values is not None:
        new = tuple(shape.values)
        for i in range(1, len(old) + 1):
            if int_of(old[-i]) != 1 and prove_not_equal(old[-i], new[-i]):
                raise info.fail(f"cannot broadcast {fmt_dims(old)} to {fmt_dims(new)}: dimension "
                                f"{len(old) - i} is {fmt_dim(old[-i])}, not 1 or {fmt_dim(new[-i])}")
    return tensor_of_shape(info.args[1], shape, x.dtype, x.vdevice)


register("broadcast_to", ("x", "shape"), _infer_broadcast_to, prepare=prepare_shape_arg(1))


# ---------------------------------------------------------------- expand_dims / squeeze
def _infer_expand_dims(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axes = info.attrs["axis"]
    if not axes:
        return x
    if x.ndim < 0:
        return unknown_like(x, -1)
    ndim = x.ndim + len(axes)
    new = normalize_axes(info, axes, ndim)
    if x.dims is None:
        return unknown_like(x, ndim)
    rest = iter(x.dims)
    out = [IntImm(INT64, 1) if i in new else next(rest) for i in range(ndim)]
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


register("expand_dims", ("x",), _infer_expand_dims, (Attr("axis", None, ATTR_INTS, required=True),))


def _infer_squeeze(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axes = info.attrs["axis"]
    if axes is not None and not axes:
        return x
    if x.ndim < 0:
        return unknown_like(x, -1)
    dims = known_dims(x)
    remove = set()
    if axes is not None:
        norm = normalize_axes(info, axes, x.ndim)
        if dims is None:
            return unknown_like(x, x.ndim - len(norm))
        # a static size other than 1 is silently kept (as TVM and PyTorch do); symbolic ones go
        remove = {a for a in norm if int_of(dims[a]) in (1, None)}
    else:
        if dims is None or any(int_of(d) is None for d in dims):
            return unknown_like(x, -1)
        remove = {i for i, d in enumerate(dims) if int_of(d) == 1}
    out = [d for i, d in enumerate(dims) if i not in remove]
    if x.dims is None:  # the shape is a variable
        if len(out) == x.ndim:
            return x
        return unknown_like(x, len(out) if axes is not None else -1)
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


register("squeeze", ("x",), _infer_squeeze, (Attr("axis", None, ATTR_INTS),))


# ---------------------------------------------------------------- concat / split
def _prepare_concat(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    axis = attrs["axis"]
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        raise op_error(spec, f"attribute 'axis' must be an integer or None, got {axis!r}")
    return (as_tuple_expr(args[0]),) + tuple(args[1:]), attrs


def _infer_concat(info: CallInfo) -> StructInfo:
    tensors = tuple_of_tensors(info, 0)
    if not tensors:
        raise info.fail("needs at least one tensor to concatenate")
    axis = info.attrs["axis"]
    ndim = -1 if axis is not None else 1
    dtype, void = None, False
    shapes, shape_unknown = [], False
    for t in tensors:
        if t.dtype == VOID:
            void = True
        elif dtype is None:
            dtype = t.dtype
        elif t.dtype != dtype:
            raise info.fail(f"all tensors must have the same dtype, got {dtype} and {t.dtype}")
        if ndim < 0:
            ndim = t.ndim
        elif t.ndim >= 0 and t.ndim != ndim:
            raise info.fail(f"all tensors must have the same rank, got {ndim} and {t.ndim} dimensions")
        if t.dims is None:
            shape_unknown = True
        dims = known_dims(t)
        if dims is not None:
            shapes.append(dims)
    dtype = VOID if void or dtype is None else dtype
    if ndim < 0:
        return tensors[0] if len(tensors) == 1 else TensorStructInfo(None, dtype, -1)
    axis = normalize_axis(info, axis, ndim) if axis is not None else 0
    if len(tensors) == 1:
        return tensors[0]
    if not shapes:
        return TensorStructInfo(None, dtype, ndim)
    first = shapes[0][axis]
    if all(prove_equal_structural(s[axis], first) for s in shapes):
        total = dim_mul(first, len(shapes))
    else:
        total = IntImm(INT64, 0)
        for s in shapes:
            total = dim_add(total, s[axis])
    for d in range(ndim):
        if d == axis:
            continue
        for s in shapes[1:]:
            if prove_not_equal(s[d], shapes[0][d]):
                raise info.fail(f"the tensors differ outside the axis {axis}: {fmt_dims(shapes[0])} and "
                                f"{fmt_dims(s)} (dimension {d})")
            if not prove_equal(s[d], shapes[0][d]):
                shape_unknown = True
    if shape_unknown:
        return TensorStructInfo(None, dtype, ndim)
    out = list(shapes[0])
    out[axis] = total
    return make_tensor(out, dtype)


def prove_equal_structural(a: PrimExpr, b: PrimExpr) -> bool:
    return a is b or structural_equal(a, b)


register("concat", ("tensors",), _infer_concat, (Attr("axis", 0, ATTR_ANY),), prepare=_prepare_concat)


def _prepare_split(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """``indices_or_sections`` is a number of sections (an int) or the indices to cut at."""
    value = attrs["indices_or_sections"]
    if isinstance(value, (list, tuple)):
        value = tuple(int_of(v) for v in value)
    else:
        value = int_of(value)
    if value is None or isinstance(value, tuple) and None in value:
        raise op_error(spec, f"indices_or_sections must be an integer or a list of integers, "
                             f"got {attrs['indices_or_sections']!r}")
    if isinstance(value, int) and value <= 0:
        raise op_error(spec, f"the number of sections must be positive, got {value}")
    return args, dict(attrs, indices_or_sections=value)


def _infer_split(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    spec = info.attrs["indices_or_sections"]
    axis = normalize_axis(info, info.attrs["axis"], x.ndim) if x.ndim >= 0 else -1
    count = len(spec) + 1 if isinstance(spec, tuple) else spec
    if count == 1:
        return x
    if x.dims is None:
        return TupleStructInfo(tuple(unknown_like(x) for _ in range(count)))
    dims = list(x.dims)
    extent = dims[axis]
    if isinstance(spec, tuple):
        lengths = _split_lengths(extent, spec)
    else:
        part = dim_ceildiv(extent, spec)
        last = simplify_dim(dim_sub(extent, dim_mul(part, spec - 1)))
        lengths = [part] * (spec - 1) + [last]
    return TupleStructInfo(tuple(make_tensor(dims[:axis] + [n] + dims[axis + 1:], x.dtype,
                                             vdevice=x.vdevice) for n in lengths))


def _split_lengths(extent: PrimExpr, indices: tuple) -> list:
    """The sizes of the pieces cut at ``indices``, each clamped to ``[0, extent]``."""
    bounds = [0] + list(indices) + [None]
    size = int_of(extent)
    out = []
    for left, right in zip(bounds, bounds[1:]):
        if size is not None:
            lo = min(max(left, 0), size)
            hi = size if right is None else min(max(right, 0), size)
            out.append(IntImm(extent.dtype, max(hi - lo, 0)))
            continue
        lo = _clamp(left, extent)
        hi = extent if right is None else _clamp(right, extent)
        if int_of(lo) == 0:
            out.append(hi)
        elif hi is extent:
            out.append(sub_clamped(extent, lo))
        elif prove_equal(hi, lo):
            out.append(IntImm(extent.dtype, 0))
        else:
            out.append(Max(dim_sub(hi, lo), IntImm(extent.dtype, 0)))
    return out


def _clamp(index: int, extent: PrimExpr) -> PrimExpr:
    """``min(max(index, 0), extent)`` for a constant index and a symbolic (non-negative) extent."""
    return IntImm(extent.dtype, 0) if index <= 0 else Min(IntImm(extent.dtype, index), extent)


register("split", ("x",), _infer_split,
         (Attr("indices_or_sections", None, ATTR_ANY, required=True), Attr("axis", 0, ATTR_INT)),
         prepare=_prepare_split)


# ---------------------------------------------------------------- strided_slice
def _as_index_tuple(value: Any) -> Any:

    if isinstance(value, (list, tuple)):
        fields = []
        for v in value:
            if not isinstance(v, PrimValue):
                expr = to_dim(v)
                v = PrimValue(expr, PrimStructInfo(expr.dtype, expr))
            fields.append(v)
        return as_tuple_expr(fields)
    return value


def _prepare_strided_slice(spec: OpSpec, args: tuple, attrs: dict) -> tuple:

    args = (args[0],) + tuple(_as_index_tuple(a) for a in args[1:])
    lengths = [(name, len(a.fields)) for name, a in zip(("axes", "begin", "end", "strides"), args[1:])
               if isinstance(a, Tuple)]
    for name, n in lengths[1:]:
        if n != lengths[0][1]:
            raise op_error(spec, f"axes, begin, end and strides must have the same length; "
                                 f"{lengths[0][0]} has {lengths[0][1]}, {name} has {n}")
    return args, attrs


def _index_values(info: CallInfo, i: int) -> list | None:
    """The PrimExprs of an in-line tuple argument, None when they are not statically known."""
    arg = info.args[i]
    if isinstance(info.sinfo[i], ObjectStructInfo):
        return None
    if not isinstance(info.sinfo[i], TupleStructInfo):
        raise info.fail(f"argument {info.spec.args[i]!r} must be a tuple of integers, "
                        f"got {describe(info.sinfo[i])}")
    if not isinstance(arg, Tuple):
        return None
    values = []
    for f in arg.fields:
        if not isinstance(f, PrimValue) or not f.value.dtype.is_integer:
            raise info.fail(f"argument {info.spec.args[i]!r} must be a tuple of integers")
        values.append(f.value)
    return values


def _infer_strided_slice(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    axes, begin, end = (_index_values(info, i) for i in (1, 2, 3))
    strides = _index_values(info, 4) if len(info.args) > 4 else (
        [IntImm(INT64, 1)] * len(axes) if axes is not None else None)
    dims = known_dims(x)
    if None in (axes, begin, end, strides) or x.shape is None or dims is None:
        return unknown_like(x)
    if any(int_of(a) is None for a in axes):
        return unknown_like(x)
    norm = normalize_axes(info, [int_of(a) for a in axes], x.ndim)
    out = list(dims)
    for axis, b, e, s in zip(norm, begin, end, strides):
        out[axis] = _slice_length(b, e, s, dims[axis], info.attrs["assume_inbound"])
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


def _slice_length(begin: PrimExpr, end: PrimExpr, stride: PrimExpr, extent: PrimExpr,
                  inbound: bool) -> PrimExpr:
    s = int_of(stride)
    if s is None:
        return _slice_length_by_symbolic_stride(begin, end, stride, extent, inbound)
    if inbound:
        return dim_ceildiv(dim_sub(end, begin), s) if s > 0 else simplify_dim(dim_sub(end, begin))
    b, e = _canonical_index(begin, extent, s), _canonical_index(end, extent, s)
    if s < 0:
        return dim_ceildiv(dim_sub(b, e), -s)
    if s == 1:
        return sub_clamped(e, b)
    return dim_ceildiv(dim_sub(e, b), s)


def _slice_length_by_symbolic_stride(begin: PrimExpr, end: PrimExpr, stride: PrimExpr, extent: PrimExpr,
                                     inbound: bool) -> PrimExpr:
    """TVM's length of a slice by a stride known when it runs: ``ceildiv(end - begin, stride)``
    (the indices canonicalized unless in bounds). A symbolic size is non-negative, as TVM's
    analyzer takes it, so its stride counts up; a stride of unknown sign chooses its way when it
    runs."""
    def ceildiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return simplify_dim(dim_floordiv(dim_sub(dim_add(a, b), 1), b))

    if inbound:
        return ceildiv(dim_sub(end, begin), stride)
    up = ceildiv(dim_sub(_canonical_index(end, extent, 1), _canonical_index(begin, extent, 1)), stride)
    if non_negative(stride):
        return up
    # (each way canonicalizes the indices for its own sign, as TVM's analyzer folds the choice)
    down = ceildiv(dim_sub(_canonical_index(begin, extent, -1), _canonical_index(end, extent, -1)),
                   dim_sub(0, stride))
    return Call(extent.dtype, get_op("tir.if_then_else"), (LT(stride, IntImm(stride.dtype, 0)), down, up))


def _canonical_index(index: PrimExpr, extent: PrimExpr, stride: int) -> PrimExpr:
    """An index made non-negative and clamped to the extent (TVM's CanonicalizeIndex)."""
    lo, hi = (-1, dim_sub(extent, 1)) if stride < 0 else (0, extent)
    i, n = int_of(index), int_of(extent)
    if i is not None and n is not None:
        i = i + n if i < 0 else i
        return IntImm(extent.dtype, min(max(i, lo), int_of(hi)))
    if isinstance(index, Var) and isinstance(extent, Var) and index.name == extent.name:
        return index
    if i is not None and i >= 0:
        return IntImm(extent.dtype, 0) if i == 0 and stride > 0 else Min(IntImm(extent.dtype, i), hi)
    if i is not None:
        index = simplify_dim(dim_add(extent, i))
    else:
        negative = LT(index, IntImm(index.dtype, 0))
        index = Call(index.dtype, get_op("tir.if_then_else"), (negative, dim_add(index, extent), index))
    return Min(Max(index, IntImm(extent.dtype, lo)), hi)


register("strided_slice", ("x", "axes", "begin", "end", "strides"), _infer_strided_slice,
         (Attr("assume_inbound", False, ATTR_BOOL),), min_args=4, prepare=_prepare_strided_slice)


# ---------------------------------------------------------------- take
def _infer_take(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    idx = info.sinfo[1]
    if isinstance(idx, PrimStructInfo):
        idx = make_tensor((), idx.dtype)
    elif not isinstance(idx, TensorStructInfo):
        raise info.fail(f"the indices must be a tensor or a scalar, got {describe(idx)}")
    if idx.dtype != VOID and not idx.dtype.is_integer:
        raise info.fail(f"the indices must have an integer dtype, got {idx.dtype}")
    axis = info.attrs["axis"]
    if axis is None and x.ndim != 1:
        raise info.fail(f"without an axis the data must be 1-d, got {describe(x)}")
    if x.ndim < 0 or idx.ndim < 0:
        return unknown_like(x, -1)
    axis = normalize_axis(info, axis, x.ndim) if axis is not None else 0
    if x.dims is None or idx.dims is None:
        return unknown_like(x, x.ndim + idx.ndim - 1)
    out = list(x.dims[:axis]) + list(idx.dims) + list(x.dims[axis + 1:])
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


register("take", ("x", "indices"), _infer_take,
         (Attr("axis", None, ATTR_INT), Attr("mode", "fast", ATTR_STR)))


# ---------------------------------------------------------------- flatten, flip, tile, repeat
def _infer_flatten(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    dims = known_dims(x)
    if dims is None:
        return make_tensor(None, x.dtype, 1, x.vdevice)
    return make_tensor((simplify_dim(product(dims)),), x.dtype, vdevice=x.vdevice)


register("flatten", ("x",), _infer_flatten)


def _infer_flip(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    if x.ndim >= 0:
        normalize_axis(info, info.attrs["axis"], x.ndim)
    return x


register("flip", ("data",), _infer_flip, (Attr("axis", None, ATTR_INT, required=True),))


def _infer_tile(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    repeats = list(info.attrs["repeats"])
    if any(r < 0 for r in repeats):
        raise info.fail(f"the repeats must be non-negative, got {repeats}")
    dims = known_dims(x)
    if dims is None:
        return make_tensor(None, x.dtype, max(x.ndim, len(repeats)) if x.ndim >= 0 else -1, x.vdevice)
    n = max(len(dims), len(repeats))
    dims = (1,) * (n - len(dims)) + tuple(dims)
    repeats = [1] * (n - len(repeats)) + repeats
    return make_tensor(tuple(simplify_dim(dim_mul(d, r)) for d, r in zip(dims, repeats)), x.dtype,
                       vdevice=x.vdevice)


register("tile", ("data",), _infer_tile, (Attr("repeats", None, ATTR_INTS, required=True),))


def _infer_repeat(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    repeats, axis = info.attrs["repeats"], info.attrs["axis"]
    if repeats < 0:  # (0 is an empty result, as numpy's and TVM's)
        raise info.fail(f"the repeats must be non-negative, got {repeats}")
    dims = known_dims(x)
    if axis is None:
        if dims is None:
            return make_tensor(None, x.dtype, 1, x.vdevice)
        return make_tensor((simplify_dim(dim_mul(product(dims), repeats)),), x.dtype, vdevice=x.vdevice)
    if dims is None:
        return x
    axis = normalize_axis(info, axis, len(dims))
    out = tuple(simplify_dim(dim_mul(d, repeats)) if i == axis else d for i, d in enumerate(dims))
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


register("repeat", ("data",), _infer_repeat,
         (Attr("repeats", None, ATTR_INT, required=True), Attr("axis", None, ATTR_INT)))


def _infer_stack(info: CallInfo) -> StructInfo:
    """stack: tensors of one shape and dtype, joined along a new axis."""
    tensors = tuple_of_tensors(info, 0)
    if not tensors:
        raise info.fail("stack needs at least one tensor")
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype:
            raise info.fail(f"the tensors to stack differ in dtype: {first.dtype} and {t.dtype}")
    dims = known_dims(first)
    if dims is None:
        return TensorStructInfo(None, first.dtype, first.ndim + 1 if first.ndim >= 0 else -1)
    for t in tensors[1:]:
        other = known_dims(t)
        if other is not None and (len(other) != len(dims) or any(prove_not_equal(a, b) for a, b in zip(dims, other))):
            raise info.fail(f"the tensors to stack differ in shape: {fmt_dims(dims)} and {fmt_dims(other)}")
    axis = normalize_axis(info, info.attrs["axis"], len(dims) + 1)
    return make_tensor(dims[:axis] + (IntImm(INT64, len(tensors)),) + dims[axis:], first.dtype)


register("stack", ("tensors",), _infer_stack, (Attr("axis", 0, ATTR_INT),))
