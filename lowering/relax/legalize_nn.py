"""LegalizeOps for the neural-network operators of ``ir/relax_ops_nn_misc.py``: the activations
with parameters (topi's ``leaky_relu``, ``prelu``, ``softplus``; selu as TVM composes it),
nn.pad in constant mode (topi's ``nn.pad``), nn.dropout (the identity and a mask of ones, as TVM
legalizes it for inference) and nn.batch_flatten (a reshape).

Not legalized, as in TVM 0.27 or short of it: nn.pixel_shuffle (TVM's legalization fails: its
topi has no pixel_shuffle) and the reflect / replicate / circular pads (TVM's index forms come
from its simplifier's bound analysis, not reproduced here).
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import LT, PrimExpr, Select, const
from .. import te
from .legalize import _NotLegalized, _tensor_sinfo, call_te, register_legalize
from .legalize_manip import _pad, _reshape_compute
from .legalize_math import _BINARY, _add, _binary_compute, _elemwise, _intrin, _multiply, _subtract

_maximum = _binary_compute("maximum", _BINARY["maximum"])
_minimum = _binary_compute("minimum", _BINARY["minimum"])


def _positive(v: PrimExpr) -> PrimExpr:
    """``v > 0`` as TVM builds it: ``0 < v``."""
    return LT(const(0.0, str(v.dtype)), v)


# ---------------------------------------------------------------- activations
@register_legalize("relax.nn.leakyrelu")
def _leakyrelu(bb: Any, call: rx.Call) -> Any:
    alpha = call.attrs["alpha"]

    def leaky_relu(x: te.Tensor) -> te.Tensor:
        return _elemwise(x, lambda v: Select(_positive(v), v, v * const(alpha, str(v.dtype))))

    return call_te(bb, leaky_relu, call.args[0], primfunc_name_hint="leaky_relu")


@register_legalize("relax.nn.prelu")
def _prelu(bb: Any, call: rx.Call) -> Any:
    def prelu(x: te.Tensor, slope: te.Tensor) -> te.Tensor:
        axis = call.attrs["axis"] % len(x.shape)
        return te.compute(tuple(x.shape), lambda *i: Select(_positive(x[i]), x[i], x[i] * slope[i[axis]]),
                          name="compute", tag="broadcast", varargs_names=[f"i{k}" for k in range(len(x.shape))])

    return call_te(bb, prelu, call.args[0], call.args[1], primfunc_name_hint="prelu")


@register_legalize("relax.nn.selu")
def _selu(bb: Any, call: rx.Call) -> Any:
    """scale * (max(x, 0) + min(0, alpha * (exp(x) - 1))), one topi operator per step."""
    def selu(x: te.Tensor) -> te.Tensor:
        dtype = str(x.dtype)
        exp = _elemwise(x, lambda v: _intrin("exp", v))
        negative = _minimum(const(0.0, dtype),
                            _multiply(const(1.6732632423543772848170429916717, dtype),
                                      _subtract(exp, const(1.0, dtype))))
        return _multiply(const(1.0507009873554804934193349852946, dtype),
                         _add(_maximum(x, const(0.0, dtype)), negative))

    return call_te(bb, selu, call.args[0], primfunc_name_hint="selu")


@register_legalize("relax.nn.softplus")
def _softplus(bb: Any, call: rx.Call) -> Any:
    """x where beta * x > threshold, else log(1 + exp(beta * x)) / beta (TVM's operators fold
    the multiplications by 1)."""
    beta, threshold = call.attrs["beta"], call.attrs["threshold"]

    def softplus(x: te.Tensor) -> te.Tensor:
        def body(v: PrimExpr) -> PrimExpr:
            dtype = str(v.dtype)
            b = const(beta, dtype)
            smooth = const(1.0 / beta, dtype) * _intrin("log", const(1.0, dtype) + _intrin("exp", b * v))
            return Select(LT(const(threshold, dtype), b * v), v, smooth)

        return _elemwise(x, body)

    return call_te(bb, softplus, call.args[0], primfunc_name_hint="softplus")


# ---------------------------------------------------------------- dropout, pad, batch_flatten
@register_legalize("relax.nn.dropout")
def _dropout(bb: Any, call: rx.Call) -> Any:
    def dropout(x: te.Tensor) -> list:
        ones = te.compute(tuple(x.shape), lambda *i: const(1.0, str(x.dtype)), name="T_full_like",
                          tag="elemwise", varargs_names=[f"ax{k}" for k in range(len(x.shape))])
        return [_elemwise(x, lambda v: v), ones]

    return call_te(bb, dropout, call.args[0], primfunc_name_hint="dropout")


@register_legalize("relax.nn.pad")
def _nn_pad(bb: Any, call: rx.Call) -> Any:
    if call.attrs["pad_mode"] != "constant":
        raise _NotLegalized
    width = call.attrs["pad_width"]
    before, after = list(width[::2]), list(width[1::2])

    def pad(x: te.Tensor) -> te.Tensor:
        value = const(call.attrs["pad_value"], str(x.dtype))
        return _pad(x, before, after, value, "i", True, name="PadInput")

    return call_te(bb, pad, call.args[0], primfunc_name_hint="pad")


@register_legalize("relax.nn.batch_flatten")
def _batch_flatten(bb: Any, call: rx.Call) -> Any:
    sinfo = _tensor_sinfo(call)
    if sinfo is None:
        raise _NotLegalized
    shape = tuple(sinfo.dims)
    return call_te(bb, lambda x: _reshape_compute(x, shape), call.args[0], primfunc_name_hint="reshape")
