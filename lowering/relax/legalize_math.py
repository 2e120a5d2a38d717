"""LegalizeOps for elementwise math, comparisons, creation and reductions (sum, softmax, norms).

Each legalization builds the TE computation that TVM 0.27's builds for the operator (topi's
unary functions, ``topi.full``, the ``*_red`` reductions, ``topi.nn.softmax``, ``layer_norm``,
``rms_norm``, ...) so that the PrimFunc prints as TVM's: same names of functions, buffers, blocks
and axes, same expression forms. The binary operators (comparisons, floor_divide, power) live in
``legalize.py``'s ``_BINARY`` table.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ...ir import arith
from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.expr import (EQ, GT, LE, LT, NE, And, Call, Cast, FloatImm, IntImm, Mul, Not, Or, PrimExpr, Select,
                        Sub, const)
from ...ir.op import get_op
from .. import te
from .legalize import (_BINARY, _NotLegalized, _binary_compute, _broadcast_index, _broadcast_shape,
                       _compute, _is_const, _scalar_const, call_te, register_legalize)

_I64 = DataType("int64")
_F32 = DataType("float32")


def _intrin(name: str, value: PrimExpr) -> PrimExpr:
    """A call of the TensorIR math intrinsic ``tir.<name>`` (``T.exp(x)``)."""
    return Call(value.dtype, get_op(f"tir.{name}"), (value,))


def _elemwise(x: te.Tensor, f: Callable[[PrimExpr], PrimExpr], name: str = "compute",
              prefix: str = "i") -> te.Tensor:
    """topi's elementwise compute: ``name[i0, i1, ...] = f(x[i0, i1, ...])``."""
    return _compute(tuple(x.shape), lambda idx: f(x[idx]), name, "elemwise", prefix)


def _cast(x: te.Tensor, dtype: str, name: str = "compute", prefix: str = "i") -> te.Tensor:
    return _elemwise(x, lambda v: arith.cast(dtype, v), name, prefix)


_multiply = _binary_compute("multiply", _BINARY["multiply"])
_add = _binary_compute("add", _BINARY["add"])
_divide = _binary_compute("divide", _BINARY["divide"])
_subtract = _binary_compute("subtract", _BINARY["subtract"])


# ---------------------------------------------------------------- unary
def _abs(v: PrimExpr) -> PrimExpr:
    if v.dtype.is_float:
        return _intrin("fabs", v)
    # TVM's integer abs, as its int64 index normalization leaves it: a select on the sign
    return Select(LE(IntImm(_I64, 0), Cast(_I64, v)), v, Sub(const(0, v.dtype), v))


def _isnan(v: PrimExpr) -> PrimExpr:
    """TVM's isnan: float16 is tested as float32."""
    value = Cast(_F32, v) if v.dtype == DataType("float16") else v
    return Call(DataType("bool"), get_op("tir.isnan"), (value,))


def _isinf(v: PrimExpr) -> PrimExpr:
    return And(EQ(_intrin("fabs", v), FloatImm(v.dtype, math.inf)), Not(_isnan(v)))


def _isfinite(v: PrimExpr) -> PrimExpr:
    # (TVM's form: |v| != inf, kept true for nan by the "or", then nan excluded)
    return And(Or(NE(_intrin("fabs", v), FloatImm(v.dtype, math.inf)), _isnan(v)), Not(_isnan(v)))


def _rounding(intrinsic: str) -> Callable[[PrimExpr], PrimExpr]:
    """floor, ceil, round (nearbyint), trunc: an integer or a bool is its own value (as TVM's
    constructors of these intrinsics give it back)."""
    return lambda v: _intrin(intrinsic, v) if v.dtype.is_float else v


_UNARY: dict[str, Callable[[PrimExpr], PrimExpr]] = {
    "abs": _abs,
    "trunc": _rounding("trunc"),
    "floor": _rounding("floor"),
    "ceil": _rounding("ceil"),
    "round": _rounding("nearbyint"),
    "isnan": _isnan,
    "isinf": _isinf,
    "isfinite": _isfinite,
    "negative": lambda v: -v,
    **{name: (lambda n: lambda v: _intrin(n, v))(name)
       for name in ("cos", "exp", "log", "rsqrt", "sigmoid", "sin", "sqrt", "tanh", "acos", "acosh",
                    "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan")},
}


def _unary_legalize(name: str) -> Callable:
    f = _UNARY[name]

    def legalize(bb: Any, call: rx.Call) -> Any:
        return call_te(bb, lambda x: _elemwise(x, f), call.args[0], primfunc_name_hint=f"tir_{name}")

    return legalize


for _name in _UNARY:
    register_legalize(f"relax.{_name}")(_unary_legalize(_name))


def _sign(v: PrimExpr) -> PrimExpr:
    """topi's sign: 1, -1 or 0 (an integer compared as int64, as TVM's index normalization leaves it)."""
    if v.dtype.is_float:
        zero = FloatImm(v.dtype, 0.0)
        return Select(LT(zero, v), FloatImm(v.dtype, 1.0), Select(LT(v, zero), FloatImm(v.dtype, -1.0), zero))
    wide = v if v.dtype == _I64 else Cast(_I64, v)
    zero = IntImm(_I64, 0)
    return Select(LT(zero, wide), const(1, v.dtype), Select(LT(wide, zero), const(-1, v.dtype), const(0, v.dtype)))


@register_legalize("relax.sign")
def _legalize_sign(bb: Any, call: rx.Call) -> Any:
    return call_te(bb, lambda x: _elemwise(x, _sign, "T_sign", "ax"), call.args[0], primfunc_name_hint="tir_sign")


@register_legalize("relax.logical_not")
def _legalize_logical_not(bb: Any, call: rx.Call) -> Any:
    return call_te(bb, lambda x: _elemwise(x, Not, "T_logical_not", "ax"), call.args[0],
                   primfunc_name_hint="tir_logical_not")


@register_legalize("relax.bitwise_not")
def _legalize_bitwise_not(bb: Any, call: rx.Call) -> Any:
    return call_te(bb, lambda x: _elemwise(x, arith.bitwise_not, "T_bitwise_not", "ax"), call.args[0],
                   primfunc_name_hint="tir_bitwise_not")


@register_legalize("relax.square")
def _legalize_square(bb: Any, call: rx.Call) -> Any:
    return call_te(bb, lambda x: _multiply(x, x), call.args[0], primfunc_name_hint="tir_square")


def _erf_compute(x: te.Tensor) -> te.Tensor:
    """topi.erf; float16 goes through float32, as TVM computes it."""
    if str(x.dtype) == "float16":
        return _cast(_elemwise(_cast(x, "float32"), lambda v: _intrin("erf", v)), "float16")
    return _elemwise(x, lambda v: _intrin("erf", v))


@register_legalize("relax.erf")
def _erf(bb: Any, call: rx.Call) -> Any:
    return call_te(bb, _erf_compute, call.args[0], primfunc_name_hint="erf")


@register_legalize("relax.astype")
def _astype(bb: Any, call: rx.Call) -> Any:
    dtype = str(call.struct_info.dtype)
    return call_te(bb, lambda x: _cast(x, dtype), call.args[0], primfunc_name_hint="cast")


@register_legalize("relax.nn.silu")
def _silu(bb: Any, call: rx.Call) -> Any:
    def silu(x: te.Tensor) -> te.Tensor:
        return _multiply(x, _elemwise(x, lambda v: _intrin("sigmoid", v)))

    return call_te(bb, silu, call.args[0], primfunc_name_hint="silu")


@register_legalize("relax.nn.gelu_tanh")
def _gelu_tanh(bb: Any, call: rx.Call) -> Any:
    def gelu_tanh(x: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        inner = _multiply(_multiply(const(math.sqrt(2.0 / math.pi), dtype), x),
                          _add(const(1.0, dtype), _multiply(_multiply(const(0.044715, dtype), x), x)))
        tanh = _elemwise(inner, lambda v: _intrin("tanh", v))
        return _multiply(_multiply(const(0.5, dtype), x), _add(const(1.0, dtype), tanh))

    return call_te(bb, gelu_tanh, call.args[0], primfunc_name_hint="gelu_tanh")


# ---------------------------------------------------------------- where and creation
@register_legalize("relax.where")
def _where(bb: Any, call: rx.Call) -> Any:
    def where(cond: te.Tensor, x: te.Tensor, y: te.Tensor) -> te.Tensor:
        shape = _broadcast_shape(_broadcast_shape(tuple(cond.shape), tuple(x.shape)), tuple(y.shape))

        def body(idx: tuple) -> PrimExpr:
            c, a, b = (t[tuple(_broadcast_index(t, shape, idx))] for t in (cond, x, y))
            # TVM selects on ``0 < cond``, the condition widened to int64
            return Select(LT(IntImm(_I64, 0), Cast(_I64, c)), a, b)

        return _compute(shape, body, "T_where", "broadcast", "ax")

    return call_te(bb, where, *call.args, primfunc_name_hint="where")


def _full_compute(shape: tuple, dtype: str, value: Any) -> te.Tensor:
    dt = DataType(dtype)
    # the fill value takes the tensor's type as a C cast would (-2.5 fills an int32 tensor with -2)
    value = bool(value) if dt.is_bool else int(value) if dt.is_integer else float(value)
    return _compute(shape, lambda idx: const(value, dtype), "T_full", "elemwise", "ax")


def _full_legalize(name: str, fill: float | None) -> Callable:
    def legalize(bb: Any, call: rx.Call) -> Any:
        value = fill
        if value is None:
            imm = _scalar_const(call.args[1])
            if not isinstance(imm, (IntImm, FloatImm)):
                raise _NotLegalized  # a fill value known only at run time
            value = imm.value
        shape, dtype = tuple(call.struct_info.dims), str(call.struct_info.dtype)
        if not math.isfinite(value) and not DataType(dtype).is_float:
            raise _NotLegalized  # no integer holds it
        return call_te(bb, lambda: _full_compute(shape, dtype, value), primfunc_name_hint=name)

    return legalize


register_legalize("relax.full")(_full_legalize("full", None))
register_legalize("relax.ones")(_full_legalize("ones", 1.0))
register_legalize("relax.zeros")(_full_legalize("zeros", 0.0))
register_legalize("relax.full_like")(_full_legalize("full", None))
register_legalize("relax.ones_like")(_full_legalize("ones", 1.0))
register_legalize("relax.zeros_like")(_full_legalize("zeros", 0.0))


# ---------------------------------------------------------------- reductions
def _axes(axis: Any, ndim: int) -> list[int]:
    """Normalized reduction axes, ascending; ``None`` reduces all."""
    if axis is None:
        return list(range(ndim))
    axis = axis if isinstance(axis, (list, tuple)) else (axis,)
    return sorted({int(a) % ndim for a in axis})


def _reduced_index(ndim: int, axes: list[int], idx: tuple, ks: dict, keepdims: bool) -> tuple:
    """The index into the reduced tensor for output element ``idx``: the reduce axis ``ks[a]`` at
    each reduced axis, the output's axes elsewhere (without keepdims, in order)."""
    kept = iter(idx)
    return tuple(ks[a] if a in axes else (idx[a] if keepdims else next(kept)) for a in range(ndim))


def _kept(idx: tuple, axes: list[int]) -> tuple:
    return tuple(i for a, i in enumerate(idx) if a not in axes)


def _picked(idx: tuple, axes: list[int]) -> tuple:
    return tuple(idx[a] for a in axes)


def _reduce(x: te.Tensor, axes: list[int], keepdims: bool, reducer: Callable,
            f: Callable[[PrimExpr, list, tuple], Any] = lambda v, ks, idx: v,
            name: str | None = None) -> Any:
    """topi's ``<name>_red`` reduction of ``x`` over ``axes``: spatial axes ``ax0, ...`` in output
    order, reduce axes ``k<axis>``, the body ``reducer(f(x[...], reduce axes, output index))``."""
    shape = tuple(x.shape)
    out_shape = tuple(IntImm(_I64, 1) if i in axes else d for i, d in enumerate(shape)
                      if keepdims or i not in axes)

    def body(idx: tuple) -> Any:
        ks = {a: te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes}
        axis = [ks[a] for a in axes]
        return reducer(f(x[_reduced_index(len(shape), axes, idx, ks, keepdims)], axis, idx), axis=axis)

    return _compute(out_shape, body, name or f"{x.name}_red", "comm_reduce", "ax")


def _count(x: te.Tensor, axes: list[int], dtype: DataType) -> PrimExpr:
    """The number of elements reduced: a constant of ``dtype`` when a float sum divides it and
    the sizes are known, else an int64 product."""
    prod: Any = 1
    for a in axes:
        prod = x.shape[a] if isinstance(prod, int) and prod == 1 else arith.binary(Mul, prod, x.shape[a])
    prod = IntImm(_I64, prod) if isinstance(prod, int) else prod
    if isinstance(prod, IntImm) and dtype.is_float:
        return FloatImm(dtype, float(prod.value))
    return prod


def _statistical(name: str, reducer: Callable) -> Callable:
    def legalize(bb: Any, call: rx.Call) -> Any:
        axis, keepdims = call.attrs.get("axis"), bool(call.attrs.get("keepdims"))
        dims = call.args[0].struct_info.dims
        identity = {"sum": 0, "prod": 1}.get(name)
        if identity is not None and any(_is_const(dims[a], 0) for a in _axes(axis, len(dims))):
            # a sum (product) over no elements: TVM fills the result with zeros (ones)
            return _full_legalize("full", identity)(bb, call)

        def fte(x: te.Tensor) -> te.Tensor:
            return _reduce(x, _axes(axis, len(x.shape)), keepdims, reducer)

        return call_te(bb, fte, call.args[0], primfunc_name_hint=name)

    return legalize


register_legalize("relax.sum")(_statistical("sum", te.sum))
register_legalize("relax.max")(_statistical("max", te.max))
register_legalize("relax.min")(_statistical("min", te.min))
register_legalize("relax.prod")(_statistical("prod", te.prod))


def _variance(x: te.Tensor, axes: list[int], keepdims: bool) -> te.Tensor:
    """topi's variance: the mean of the squared distances to the (kept-dims) mean."""
    count = _count(x, axes, x.dtype)
    diff = _subtract(x, _divide(_reduce(x, axes, True, te.sum), count))
    return _divide(_reduce(_multiply(diff, diff), axes, keepdims, te.sum), count)


def _variance_legalize(name: str) -> Callable:
    def legalize(bb: Any, call: rx.Call) -> Any:
        axis, keepdims = call.attrs.get("axis"), bool(call.attrs.get("keepdims"))
        if not call.args[0].struct_info.dtype.is_float:
            raise _NotLegalized  # (TVM's is a float computation)

        def compute(x: te.Tensor) -> te.Tensor:
            var = _variance(x, _axes(axis, len(x.shape)), keepdims)
            return var if name == "variance" else _elemwise(var, lambda v: _intrin("sqrt", v))

        return call_te(bb, compute, call.args[0], primfunc_name_hint=name)

    return legalize


register_legalize("relax.variance")(_variance_legalize("variance"))
register_legalize("relax.std")(_variance_legalize("std"))


@register_legalize("relax.mean")
def _mean(bb: Any, call: rx.Call) -> Any:
    axis, keepdims = call.attrs.get("axis"), bool(call.attrs.get("keepdims"))

    if call.args[0].struct_info.dtype.is_bool:
        raise _NotLegalized  # TVM divides an "or" of the booleans: not a mean, left to others

    def mean(x: te.Tensor) -> te.Tensor:
        axes = _axes(axis, len(x.shape))
        total = _reduce(x, axes, keepdims, te.sum)
        return _divide(total, _count(x, axes, total.dtype))

    return call_te(bb, mean, call.args[0], primfunc_name_hint="mean")


# ---------------------------------------------------------------- softmax and norms
def _without(idx: tuple, axis: int) -> tuple:
    return idx[:axis] + idx[axis + 1:]


def _with(idx: tuple, axis: int, k: Any) -> tuple:
    return idx[:axis] + (k,) + idx[axis:]


def _reduce_along(shape: tuple, axis: int, name: str, f: Callable[[tuple, tuple, Any], Any]) -> te.Tensor:
    """topi.nn.softmax's reductions over one ``axis`` (reduce axis ``k``): the element ``idx`` of
    the result is ``f(idx with k inserted at axis, idx, k)``."""
    def body(idx: tuple) -> Any:
        k = te.reduce_axis((0, shape[axis]), name="k")
        return f(_with(idx, axis, k), idx, k)

    return _compute(_without(shape, axis), body, name)


def _softmax_maxelem(x: te.Tensor, axis: int) -> te.Tensor:
    return _reduce_along(tuple(x.shape), axis, "T_softmax_maxelem",
                         lambda src, idx, k: te.max(x[src], axis=k))


def _softmax(x: te.Tensor, axis: int) -> te.Tensor:
    shape = tuple(x.shape)
    maxelem = _softmax_maxelem(x, axis)
    exp = _compute(shape, lambda i: _intrin("exp", x[i] - maxelem[_without(i, axis)]), "T_softmax_exp")
    expsum = _reduce_along(shape, axis, "T_softmax_expsum", lambda src, idx, k: te.sum(exp[src], axis=k))
    return _compute(shape, lambda i: exp[i] / expsum[_without(i, axis)], "T_softmax_norm",
                    attrs={"axis": axis})


def _log_softmax(x: te.Tensor, axis: int) -> te.Tensor:
    shape = tuple(x.shape)
    maxelem = _softmax_maxelem(x, axis)
    expsum = _reduce_along(shape, axis, "compute",
                           lambda src, idx, k: te.sum(_intrin("exp", x[src] - maxelem[idx]), axis=k))

    def body(i: tuple) -> PrimExpr:
        return x[i] - maxelem[_without(i, axis)] - _intrin("log", expsum[_without(i, axis)])

    return _compute(shape, body, "compute", attrs={"axis": axis})


def _softmax_legalize(name: str, fte: Callable[[te.Tensor, int], te.Tensor]) -> Callable:
    def legalize(bb: Any, call: rx.Call) -> Any:
        axis = int(call.attrs.get("axis")) % len(call.struct_info.dims)
        return call_te(bb, lambda x: fte(x, axis), call.args[0], primfunc_name_hint=name)

    return legalize


register_legalize("relax.nn.softmax")(_softmax_legalize("softmax", _softmax))
register_legalize("relax.nn.log_softmax")(_softmax_legalize("log_softmax", _log_softmax))


def _norm_axes(call: rx.Call) -> list[int]:
    """The normalized axes of layer_norm / rms_norm. TVM indexes gamma (beta, weight) by the
    axes sorted, while their shape follows the axes as given: for axes out of order its
    PrimFunc reads out of bounds, so such calls stay unlegalized here."""
    ndim = len(call.struct_info.dims)
    given = [int(a) % ndim for a in call.attrs.get("axes")]
    if given != sorted(given):
        raise _NotLegalized
    return _axes(given, ndim)


@register_legalize("relax.nn.layer_norm")
def _layer_norm(bb: Any, call: rx.Call) -> Any:
    axes, eps = _norm_axes(call), float(call.attrs.get("epsilon"))

    def layer_norm(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        # float16 data is summed and normalized in float32, as TVM's layer_norm does
        acc = "float32" if dtype == "float16" else dtype
        count = _count(x, axes, DataType(acc))
        total = _reduce(x, axes, False, te.sum, lambda v, ks, idx: arith.cast(acc, v), f"{x.name}_sum")
        mean = _elemwise(total, lambda v: v / count, f"{x.name}_mean", "ax")

        def deviation2(v: PrimExpr, ks: list, idx: tuple) -> PrimExpr:
            dev = arith.cast(acc, v) - mean[idx]
            return dev * dev

        var_sum = _reduce(x, axes, False, te.sum, deviation2, f"{x.name}_var_sum")

        def body(idx: tuple) -> Any:
            s = _kept(idx, axes)
            scale = _intrin("rsqrt", var_sum[s] / count + const(eps, acc))
            norm = (arith.cast(acc, x[idx]) - mean[s]) * scale
            return arith.cast(dtype, norm) * gamma[_picked(idx, axes)] + beta[_picked(idx, axes)]

        return _compute(tuple(x.shape), body, "T_layer_norm", "", "ax")

    return call_te(bb, layer_norm, *call.args, primfunc_name_hint="layer_norm")


@register_legalize("relax.nn.rms_norm")
def _rms_norm(bb: Any, call: rx.Call) -> Any:
    axes, eps = _norm_axes(call), float(call.attrs.get("epsilon"))

    def rms_norm(x: te.Tensor, weight: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        xf = _cast(x, "float32", "T_cast", "ax")
        square = _multiply(xf, xf)
        total = _reduce(square, axes, False, te.sum)
        count = _count(x, axes, _F32)
        rsqrt = _elemwise(total, lambda v: _intrin("rsqrt", v / count + const(eps, "float32")), "rsqrt", "ax")
        wf = _cast(weight, "float32", "T_cast", "ax")

        def body(idx: tuple) -> Any:
            return rsqrt[_kept(idx, axes)] * xf[idx] * wf[_picked(idx, axes)]

        return _cast(_compute(tuple(x.shape), body, "T_rms_norm", "", "ax"), dtype, "T_cast", "ax")

    return call_te(bb, rms_norm, *call.args, primfunc_name_hint="rms_norm")


# ---------------------------------------------------------------- argmax / argmin
def _arg_reducer(better: type) -> Callable:
    """topi's argmax (``better`` = GT) / argmin (LT) reducer of (index, value) pairs: the better
    value wins, a tie goes to the smaller index."""
    def combine(acc: tuple, new: tuple) -> tuple:
        (acc_idx, acc_val), (idx, val) = acc, new
        keep = Or(better(acc_val, val), And(EQ(acc_val, val), LT(acc_idx, idx)))
        return Select(keep, acc_idx, idx), Select(better(acc_val, val), acc_val, val)

    def identity(idx_dtype: DataType, val_dtype: DataType) -> tuple:
        worst = te.min_value(val_dtype) if better is GT else te.max_value(val_dtype)
        return IntImm(idx_dtype, -1), worst

    return te.comm_reducer(combine, identity, name="argmax" if better is GT else "argmin")


def _flat_index(ks: list, shape: tuple) -> PrimExpr:
    """The row-major position of the reduce axes ``ks`` within the reduced dimensions."""
    index = ks[0].var
    for k, extent in zip(ks[1:], shape[1:]):
        index = index * extent + k.var
    return index


def _arg_legalize(name: str, better: type) -> Callable:
    reducer = _arg_reducer(better)

    def legalize(bb: Any, call: rx.Call) -> Any:
        axis, keepdims = call.attrs.get("axis"), bool(call.attrs.get("keepdims"))

        def fte(x: te.Tensor) -> te.Tensor:
            axes = _axes(axis, len(x.shape))
            reduced = tuple(x.shape[a] for a in axes)

            def pair(v: PrimExpr, ks: list, idx: tuple) -> tuple:
                # a bool (TVM 0.27 refuses it: no minimum value) compares as an int8, so that no
                # element ties with the identity's -128 (all False is index 0, as numpy's)
                return _flat_index(ks, reduced), Cast(DataType("int8"), v) if v.dtype.is_bool else v

            idx, _ = _reduce(x, axes, keepdims, reducer, pair, f"{x.name}_red_temp")
            return _elemwise(idx, lambda v: v, f"{x.name}_red", "ax")

        return call_te(bb, fte, call.args[0], primfunc_name_hint=name)

    return legalize


register_legalize("relax.argmax")(_arg_legalize("argmax", GT))
register_legalize("relax.argmin")(_arg_legalize("argmin", LT))
