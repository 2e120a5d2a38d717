"""LegalizeOps for the neural-network operators of ``ir/relax_ops_nn_misc.py``: the activations
with parameters (topi's ``leaky_relu``, ``prelu``, ``softplus``; selu as TVM composes it),
nn.pad in constant mode (topi's ``nn.pad``), nn.dropout (the identity and a mask of ones, as TVM
legalizes it for inference) and nn.batch_flatten (a reshape); and nn.attention / attention_bias
without a causal mask (TVM's ``_te_attention``).

Not legalized, as in TVM 0.27 or short of it: nn.pixel_shuffle (TVM's legalization fails: its
topi has no pixel_shuffle) and the reflect / replicate / circular pads (TVM's index forms come
from its simplifier's bound analysis, not reproduced here).
"""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.expr import LT, Mul, PrimExpr, Select, const
from ...ir.relax_infer import int_of
from .. import te
from .legalize import _NotLegalized, _tensor_sinfo, call_te, register_legalize, transpose_compute
from .legalize_manip import _pad, _reshape_compute
from .legalize_math import (_BINARY, _add, _binary_compute, _divide, _elemwise, _intrin, _multiply, _softmax,
                            _subtract)

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


# ---------------------------------------------------------------- attention
def _batch_matmul(x: te.Tensor, y: te.Tensor, transpose_b: bool) -> te.Tensor:
    """topi.nn.batch_matmul of two 3-d tensors of one batch: ``x @ y^T`` (NT) or ``x @ y`` (NN)."""
    batch, rows, depth = x.shape
    cols = y.shape[1] if transpose_b else y.shape[2]
    kind = "NT" if transpose_b else "NN"

    def body(b: Any, i: Any, j: Any) -> Any:
        k = te.reduce_axis((0, depth), name="k")
        right = y[b, j, k.var] if transpose_b else y[b, k.var, j]
        return te.sum(x[b, i, k.var] * right, axis=k)

    return te.compute((batch, rows, cols), body, name=f"T_batch_matmul_{kind}", tag="batch_matmul",
                      attrs={"layout_free_placeholders": [y]}, varargs_names=["b", "i", "j"])


def _attention_legalize(name: str) -> Any:
    """TVM's ``_te_attention``: heads folded into the batch, softmax(q k^T * scale [+ bias]) v."""
    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        if a["causal_mask"] is not None or a["window_size"] is not None:
            raise _NotLegalized  # (the masked forms are not reproduced; TVM rejects a window)

        def attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, bias: te.Tensor | None = None) -> te.Tensor:
            batch, seq, heads, head_dim = q.shape
            seq_kv, head_dim_v = v.shape[1], v.shape[3]
            if int_of(heads) is None or int_of(heads) != int_of(k.shape[2]) or int_of(heads) != int_of(v.shape[2]):
                raise _NotLegalized  # (TVM folds the heads into the batch assuming as many for k, v)
            bs = arith.binary(Mul, batch, heads)

            def fold(t: te.Tensor, length: Any, depth: Any) -> te.Tensor:
                return _reshape_compute(transpose_compute(t, [0, 2, 1, 3]), (bs, length, depth))

            p = _batch_matmul(fold(q, seq, head_dim), fold(k, seq_kv, head_dim), True)
            if a["scale"] is not None:
                p = _multiply(p, a["scale"])
            else:
                # (a constant head size is cast by folding: T.sqrt(T.float32(4.0)))
                size = const(float(int_of(head_dim)), str(p.dtype)) if int_of(head_dim) is not None \
                    else arith.cast(str(p.dtype), head_dim)
                p = _divide(p, _intrin("sqrt", size))
            if bias is not None:
                p = _reshape_compute(_add(_reshape_compute(p, (batch, heads, seq, seq_kv)), bias),
                                     (bs, seq, seq_kv))
            o = _batch_matmul(_softmax(p, 2), fold(v, seq_kv, head_dim_v), False)
            return transpose_compute(_reshape_compute(o, (batch, heads, seq, head_dim_v)), [0, 2, 1, 3])

        return call_te(bb, attention, *call.args, primfunc_name_hint=name)

    return legalize


register_legalize("relax.nn.attention")(_attention_legalize("attention"))
register_legalize("relax.nn.attention_bias")(_attention_legalize("attention_bias"))
