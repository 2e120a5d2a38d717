"""LegalizeOps for quantize / dequantize, as TVM 0.27's ``legalize_ops/qdq.py`` builds them: one
compute per element, the scale and zero point read at the element's index along ``axis`` (or
at 0 when they are scalars or tensors of ones), the result clipped into the output type."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.expr import Add, Div, FloatImm, Max, Min, Mul, PrimExpr, Sub
from .. import te
from .legalize import _NotLegalized, _compute, call_te, register_legalize
from .legalize_manip import _i64
from .legalize_math import _intrin


def _qparam(p: te.Tensor, idx: tuple, axis: int) -> PrimExpr:
    if all(getattr(d, "value", None) == 1 for d in p.shape):  # (a scalar or a tensor of ones)
        return p[tuple(_i64(0) for _ in p.shape)]  # (int32 zeros, as int64 indices widen them)
    return p[(idx[axis],)]


def _clip_cast(value: PrimExpr, dtype: str) -> PrimExpr:
    """``value`` clipped into the range of ``dtype`` (the bounds in ``value``'s type), then cast."""
    lo, hi = (FloatImm(value.dtype, float(b.value)) for b in (te.min_value(dtype), te.max_value(dtype)))
    return arith.cast(dtype, Max(Min(value, hi), lo))


def _qdq_legalize(name: str, block: str, element: Any) -> Any:
    def legalize(bb: Any, call: rx.Call) -> Any:
        out = str(call.attrs["out_dtype"])
        if any(isinstance(a, rx.Constant) for a in call.args[1:]) or "float8" in out:
            raise _NotLegalized  # (TVM folds constant parameters into the computation)

        def fte(data: te.Tensor, scale: te.Tensor, zero: te.Tensor) -> te.Tensor:
            axis = call.attrs["axis"] % max(len(data.shape), 1)

            def body(idx: tuple) -> Any:
                return element(data[idx], _qparam(scale, idx, axis), _qparam(zero, idx, axis), out)

            return _compute(tuple(data.shape), body, block)

        fte.__name__ = name
        return call_te(bb, fte, *call.args)

    return legalize


def _quantize(x: PrimExpr, scale: PrimExpr, zero: PrimExpr, out: str) -> PrimExpr:
    scaled = arith.binary(Div, x, scale)
    return _clip_cast(arith.binary(Add, _intrin("round", scaled), zero), out)


def _dequantize(x: PrimExpr, scale: PrimExpr, zero: PrimExpr, out: str) -> PrimExpr:
    shifted = arith.binary(Sub, arith.cast("float32" if x.dtype.is_float else "int32", x), zero)
    value = arith.binary(Mul, shifted, arith.cast("float32", scale))
    return value if out == "float32" else _clip_cast(value, out)


register_legalize("relax.quantize")(_qdq_legalize("quantize", "quantized", _quantize))
register_legalize("relax.dequantize")(_qdq_legalize("dequantize", "dequantized", _dequantize))
