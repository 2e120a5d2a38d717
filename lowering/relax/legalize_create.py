"""LegalizeOps for the operators of ``ir/relax_ops_create.py``: clip, tril/triu, arange, eye/eye_like,
hamming_window, one_hot, size, bucketize, outer, meshgrid.

Each builds the TE computation TVM 0.27 builds (topi's ``clip``, ``trilu``, ``arange``, ``eye``,
``hamming_window``, ``one_hot``, ``meshgrid``; the ``outer`` of ``legalize_ops/linear_algebra.py``) in the
form TVM's simplifier leaves it, so the PrimFuncs print as TVM's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir import arith
from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.expr import EQ, LE, LT, Add, Call, Cast, FloatImm, IntImm, Max, Min, Mul, PrimExpr, Select, Sub, const
from ...ir.op import get_op
from ...ir.relax_infer import int_of
from ...ir.relax_op import make_call
from .. import te
from .ir_kernels import call_kernel, extern_buffers, searchsorted_kernel
from .legalize import LEGALIZE, _NotLegalized, _compute, call_te, register_legalize
from .legalize_manip import _i64, _out_dims, _tuple_fields

_INT64 = DataType("int64")
_F32 = DataType("float32")


def _scalar(arg: Any) -> PrimExpr:
    """The TensorIR value of a scalar argument (``R.prim_value(2)``)."""
    if not isinstance(arg, rx.PrimValue):
        raise _NotLegalized  # a scalar known only at run time
    return arg.value


def _cast(dtype: str, v: PrimExpr) -> PrimExpr:
    """A cast, folded on a constant as TVM folds it (C's conversion: a float truncates)."""
    if isinstance(v, (IntImm, FloatImm)) and not v.dtype.is_bool:
        dt = DataType(dtype)
        return const(int(v.value) if dt.is_integer else float(v.value), dtype) if not dt.is_bool else \
            const(bool(v.value), dtype)
    return arith.cast(dtype, v)


def _folded(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``cls(a, b)`` with TVM's type promotion, a constant operand converted in place (TVM folds
    ``T.Cast("float64", T.float32(0.5))`` to ``T.float64(0.5)``)."""
    a, b = (_cast(str(x.dtype), x.value) if isinstance(x, Cast) else x for x in arith.match_types(a, b))
    return arith.binary(cls, a, b)


@register_legalize("relax.clip")
def _clip(bb: Any, call: rx.Call) -> Any:
    lo, hi = _scalar(call.args[1]), _scalar(call.args[2])

    def clip(x: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        low, high = _cast(dtype, lo), _cast(dtype, hi)  # (topi casts the bounds to the tensor's type)
        return _compute(tuple(x.shape), lambda idx: arith.binary(
            Max, arith.binary(Min, x[idx], high), low), "compute", "elemwise")

    return call_te(bb, clip, call.args[0], primfunc_name_hint="tir_clip")


def _at_most(a: PrimExpr, b: PrimExpr, offset: int) -> PrimExpr:
    """``a <= b + offset`` as TVM's simplifier writes it: the constant on the side where it is
    positive, and ``a + 1 <= b`` as ``a < b``."""
    if offset > 0:
        return LE(a, Add(b, _i64(offset)))
    if offset == 0:
        return LE(a, b)
    if offset == -1:
        return LT(a, b)
    return LE(Add(a, _i64(-offset)), b)


def _trilu_legalize(upper: bool, name: str) -> Any:
    def legalize(bb: Any, call: rx.Call) -> Any:
        k = _scalar(call.args[1])
        if int_of(k) is None and k.dtype != _INT64:
            raise _NotLegalized  # (TVM casts such a diagonal twice; not reproduced)

        def trilu(x: te.Tensor) -> te.Tensor:
            def body(idx: tuple) -> Any:
                row, col = idx[-2], idx[-1]
                c = int_of(k)
                # topi keeps x[i, j] where i >= j - k (lower) or i <= j - k (upper)
                if c is None:
                    keep = LE(row, Sub(col, k)) if upper else LE(Sub(col, k), row)
                else:
                    keep = _at_most(row, col, -c) if upper else _at_most(col, row, c)
                return Select(keep, x[idx], const(0, str(x.dtype)))

            return _compute(tuple(x.shape), body, "trilu", "elemwise")

        return call_te(bb, trilu, call.args[0], primfunc_name_hint=name)

    return legalize


register_legalize("relax.tril")(_trilu_legalize(False, "tril"))
register_legalize("relax.triu")(_trilu_legalize(True, "triu"))


@register_legalize("relax.arange")
def _arange(bb: Any, call: rx.Call) -> Any:
    start, end, step = (_scalar(a) for a in call.args)
    dtype = str(call.attrs["dtype"])
    if all(isinstance(v, (IntImm, FloatImm)) for v in (start, end, step)):  # TVM folds it to a constant
        return rx.make_constant(np.arange(start.value, end.value, step.value, dtype=dtype))
    shape = _out_dims(call)

    def arange() -> te.Tensor:
        return _compute(shape, lambda idx: _cast(dtype, _folded(Add, start, _folded(Mul, step, idx[0]))),
                        "T_arange", "elemwise", "ax")

    return call_te(bb, arange, primfunc_name_hint="arange")


def _eye_compute(n: Any, m: Any, k: Any, dtype: str) -> te.Tensor:
    return te.compute((n, m), lambda i, j: te.if_then_else(EQ(i, arith.binary(Sub, j, k)), const(1, dtype),
                                                           const(0, dtype)), name="eye")


@register_legalize("relax.eye")
def _eye(bb: Any, call: rx.Call) -> Any:
    n, m, k = (_scalar(a) for a in call.args)
    dtype = str(call.attrs["dtype"])
    return call_te(bb, lambda: _eye_compute(n, m, k, dtype), primfunc_name_hint="eye")


@register_legalize("relax.eye_like")
def _eye_like(bb: Any, call: rx.Call) -> Any:
    sinfo = call.args[0].struct_info
    if sinfo.dims is None:
        raise _NotLegalized
    n, m = sinfo.dims
    k = _scalar(call.args[1])
    # (TVM 0.27 builds the input's dtype here, whatever ``dtype`` says; kept so the text matches)
    return call_te(bb, lambda: _eye_compute(n, m, k, str(sinfo.dtype)), primfunc_name_hint="eye_like")


@register_legalize("relax.hamming_window")
def _hamming_window(bb: Any, call: rx.Call) -> Any:
    size, periodic, alpha, beta = (_scalar(a) for a in call.args)
    if int_of(size) is None or int_of(periodic) is None or size.value == 1:
        raise _NotLegalized  # (TVM's legalization fails on these)
    dtype = str(call.attrs["dtype"])
    n = size.value + (1 if periodic.value else 0)  # a periodic window is one longer, then cut

    def hamming_window() -> te.Tensor:
        # topi's steps: alpha - beta * cos(2 * pi * arange(n) / (n - 1)), cast to dtype
        index = _compute((_i64(n),), lambda idx: arith.cast(dtype, idx[0]), "T_arange", "elemwise", "ax")
        angle = _compute((_i64(n),), lambda idx: _folded(Mul, FloatImm(_F32, 2 * math.pi), index[idx]),
                         "T_multiply", "elemwise", "ax")
        angle = _compute((_i64(n),), lambda idx: arith.truediv(angle[idx], FloatImm(angle.dtype, float(n - 1))),
                         "T_divide", "elemwise", "ax")
        cos = _compute((_i64(n),), lambda idx: Call(angle.dtype, get_op("tir.cos"), (angle[idx],)), "compute",
                       "elemwise")
        scaled = _compute((_i64(n),), lambda idx: _folded(Mul, beta, cos[idx]), "T_multiply", "elemwise", "ax")
        window = _compute((_i64(n),), lambda idx: _folded(Sub, alpha, scaled[idx]), "T_subtract", "elemwise",
                          "ax")
        window = _compute((_i64(n),), lambda idx: arith.cast(dtype, window[idx]), "compute", "elemwise")
        if periodic.value:
            window = _compute((_i64(size.value),), lambda idx: window[idx], "T_strided_slice", "injective", "ax")
        return window

    return call_te(bb, hamming_window, primfunc_name_hint="hamming_window")


@register_legalize("relax.one_hot")
def _one_hot(bb: Any, call: rx.Call) -> Any:
    on, off = _scalar(call.args[1]), _scalar(call.args[2])
    shape = _out_dims(call)
    axis = call.attrs["axis"] % len(shape)

    def one_hot(indices: te.Tensor) -> te.Tensor:
        def body(idx: tuple) -> Any:
            hot = arith.binary(EQ, indices[idx[:axis] + idx[axis + 1:]], idx[axis])
            return Select(hot, on, off)

        return _compute(shape, body, "T_one_hot", "injective", "ax")

    return call_te(bb, one_hot, call.args[0], primfunc_name_hint="one_hot")


@register_legalize("relax.size")
def _size(bb: Any, call: rx.Call) -> Any:
    """As TVM: the product of the shape made a tensor, ``prod(shape_to_tensor(shape_of(x)))``."""
    shape = bb.emit(make_call("shape_of", [call.args[0]]))
    if shape.struct_info.values is None:
        raise _NotLegalized
    tensor = bb.emit(LEGALIZE["relax.shape_to_tensor"](bb, make_call("shape_to_tensor", [shape])))
    return LEGALIZE["relax.prod"](bb, make_call("prod", [tensor]))


@register_legalize("relax.bucketize")
def _bucketize(bb: Any, call: rx.Call) -> Any:
    """topi's ``searchsorted`` of the values in the boundaries (an IR-builder kernel)."""
    x, boundaries = call.args
    named = [(a.name if isinstance(a, rx.Var) else chr(ord("A") + k), a.struct_info)
             for k, a in enumerate((boundaries, x))]
    out_dtype = DataType("int32" if call.attrs["out_int32"] else "int64")
    *ins, out = extern_buffers(named, tuple(x.struct_info.dims), out_dtype, "searchsorted")
    func = searchsorted_kernel(*ins, out, call.attrs["right"])
    return call_kernel(bb, func, "searchsorted", [boundaries, x], out)


@register_legalize("relax.outer")
def _outer(bb: Any, call: rx.Call) -> Any:
    def outer(a: te.Tensor, b: te.Tensor) -> te.Tensor:
        return te.compute((a.shape[0], b.shape[0]), lambda i, j: arith.binary(Mul, a[i], b[j]),
                          name="outer")

    return call_te(bb, outer, *call.args, primfunc_name_hint="outer")


@register_legalize("relax.meshgrid")
def _meshgrid(bb: Any, call: rx.Call) -> Any:
    fields = _tuple_fields(bb, call.args[0])
    xy = call.attrs["indexing"] == "xy"

    def meshgrid(*xs: te.Tensor) -> list:
        shape = [x.shape[0] for x in xs]
        if xy and len(xs) >= 2:  # (topi swaps the first two axes; TVM's struct info does not)
            shape[0], shape[1] = shape[1], shape[0]
        outs = []
        for i, x in enumerate(xs):
            at = (1 - i if i < 2 else i) if xy else i
            name = "T_meshgrid" if i == 0 else f"T_meshgrid_{i}"
            outs.append(_compute(tuple(shape), lambda idx, x=x, at=at: x[(idx[at],)], name, "injective", "ax"))
        return outs

    return call_te(bb, meshgrid, *fields, primfunc_name_hint="meshgrid")
