"""LegalizeOps for the neural-network operators of ``ir/relax_ops_nn_misc.py``: the activations
with parameters (topi's ``leaky_relu``, ``prelu``, ``softplus``; selu as TVM composes it),
nn.pad in constant mode (topi's ``nn.pad``), nn.dropout (the identity and a mask of ones, as TVM
legalizes it for inference) and nn.batch_flatten (a reshape); nn.attention / attention_bias
(TVM's ``_te_attention``; causal masks on static sizes); the norms, the losses and the transposed
convolutions.

Not legalized, as in TVM 0.27 or short of it: nn.pixel_shuffle (TVM's legalization fails: its
topi has no pixel_shuffle) and the reflect pad (the read regions TVM's bound analysis gives its
nested selects are not reproduced).
"""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.arith import canonical
from ...ir.expr import (EQ, LE, LT, NE, Add, FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Select,
                        Sub, const)
from ...ir.errors import TVMSError
from ...ir.relax_infer import fmt_dim, fmt_dims, int_of, prove_equal
from .. import te
from .legalize import _NotLegalized, _compute, _tensor_sinfo, call_te, register_legalize, transpose_compute
from .legalize_manip import _pad, _reshape_compute, cast_to
from .legalize_math import (_BINARY, _add, _binary_compute, _cast, _count, _divide, _elemwise, _intrin, _kept,
                            _multiply, _reduce, _softmax, _subtract)

_I64 = DataType("int64")
_ONE = IntImm(_I64, 1)
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
        extent = x.shape[axis]
        channels, slopes = int_of(extent), int_of(slope.shape[0]) if len(slope.shape) == 1 else None
        # (a symbolic length is the channel extent itself, or nothing this can check)
        if len(slope.shape) != 1 or slopes is None and not prove_equal(slope.shape[0], extent) \
                or slopes is not None and slopes != 1 and slopes != channels:
            raise TVMSError(f"R.nn.prelu: the slope has shape {fmt_dims(slope.shape)}; it takes one value "
                            f"or one per channel ({fmt_dim(extent)} along axis {axis})")
        if slopes == 1:  # (one slope for every channel, broadcast as topi does, even to one channel)
            one = slope
            slope = te.compute((x.shape[axis],), lambda c: one[IntImm(_I64, 0)], name="slope_broadcasted")
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


def _edge_pad(x: te.Tensor, before: list, after: list, mode: str) -> te.Tensor:
    """topi's replicate_pad (the index clamped into the tensor) and circular_pad (wrapped
    around), in the forms TVM's simplifier leaves them: ``max(0, min(n - 1, i - b))``,
    ``(i - b + n) % n``."""
    shape = tuple(canonical(d + IntImm(_I64, b + a)) for d, b, a in zip(x.shape, before, after))

    def index(i: Any, n: Any, b: int) -> PrimExpr:
        if mode == "replicate":
            if b == 1 and int_of(n) is None:  # (min(n - 1, i - 1) shares its offset: min(n, i) - 1)
                return Max(IntImm(_I64, 0), Sub(Min(n, i), _ONE))
            return Max(IntImm(_I64, 0), Min(canonical(n - _ONE), canonical(i - IntImm(_I64, b))))
        return canonical(FloorMod(canonical(i - IntImm(_I64, b) + n), n))

    name = "ReplicatePadInput" if mode == "replicate" else "CircularPadInput"
    return _compute(shape, lambda idx: x[tuple(index(i, n, b) for i, n, b in zip(idx, x.shape, before))],
                    name, "injective,pad")


@register_legalize("relax.nn.pad")
def _nn_pad(bb: Any, call: rx.Call) -> Any:
    mode = call.attrs["pad_mode"]
    if mode == "reflect":
        raise _NotLegalized
    width = call.attrs["pad_width"]
    before, after = list(width[::2]), list(width[1::2])

    def pad(x: te.Tensor) -> te.Tensor:
        if mode != "constant":
            return _edge_pad(x, before, after, mode)
        value = const(call.attrs["pad_value"], str(x.dtype))
        return _pad(x, before, after, value, "i", True, name="PadInput")

    return call_te(bb, pad, call.args[0], primfunc_name_hint="pad" if mode == "constant" else f"{mode}_pad")


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


def _masked_softmax(p: te.Tensor, causal_mask: str | None) -> te.Tensor:
    """softmax over the last axis of (batch, queries, keys) scores; with a causal mask, TVM's
    form: the masked entries zeroed (topi.trilu) before the max and again after the exp."""
    if causal_mask is None:
        return _softmax(p, 2)
    queries, keys = int_of(p.shape[1]), int_of(p.shape[2])
    if queries is None or keys is None:
        raise _NotLegalized  # (the bottom-right offset |queries - keys| of symbolic sizes is not reproduced)
    offset = IntImm(_I64, 0 if causal_mask == "TopLeft" else abs(queries - keys))
    zero = const(0, str(p.dtype))

    def trilu(t: te.Tensor) -> te.Tensor:  # key j is kept for query i when j <= i + offset
        return _compute(tuple(t.shape), lambda i: Select(LE(i[2], arith.binary(Add, i[1], offset)), t[i], zero),
                        "trilu", "elemwise")

    masked = trilu(p)
    exp = trilu(_elemwise(_subtract(masked, _reduce(masked, [2], True, te.max)), lambda v: _intrin("exp", v)))
    return _divide(exp, _reduce(exp, [2], True, te.sum))


def _attention_legalize(name: str) -> Any:
    """TVM's ``_te_attention``: heads folded into the batch, softmax(q k^T * scale [+ bias]) v."""
    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        if a["window_size"] is not None:
            raise _NotLegalized  # (TVM's legalization rejects a sliding window)

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
                p = _divide(p, _intrin("sqrt", _float_of(head_dim, str(p.dtype))))
            if bias is not None:
                p = _reshape_compute(_add(_reshape_compute(p, (batch, heads, seq, seq_kv)), bias),
                                     (bs, seq, seq_kv))
            o = _batch_matmul(_masked_softmax(p, a["causal_mask"]), fold(v, seq_kv, head_dim_v), False)
            return transpose_compute(_reshape_compute(o, (batch, heads, seq, head_dim_v)), [0, 2, 1, 3])

        return call_te(bb, attention, *call.args, primfunc_name_hint=name)

    return legalize


register_legalize("relax.nn.attention")(_attention_legalize("attention"))
register_legalize("relax.nn.attention_bias")(_attention_legalize("attention_bias"))


# ---------------------------------------------------------------- norms over a channel axis
def _along(t: te.Tensor, ndim: int, axis: int, extent: Any) -> te.Tensor:
    """A 1-d tensor reshaped to broadcast along ``axis`` of an ``ndim``-d one (topi's reshape
    to ``[1, ..., C, ..., 1]``)."""
    return _reshape_compute(t, tuple(extent if i == axis else _ONE for i in range(ndim)))


@register_legalize("relax.nn.batch_norm")
def _batch_norm(bb: Any, call: rx.Call) -> Any:
    """topi.nn.batch_norm: the batch's statistics in training (and the moving ones updated with
    the momentum), the moving statistics at inference."""
    a = call.attrs
    if a["training"] and a["axis"] < 0:
        raise _NotLegalized  # (TVM's legalization fails on it: topi removes the axis unnormalized)

    def batch_norm(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor, moving_mean: te.Tensor,
                   moving_var: te.Tensor) -> list:
        ndim, dtype = len(x.shape), str(x.dtype)
        axis = a["axis"] % ndim
        extent = x.shape[axis]
        if a["training"]:
            others = [i for i in range(ndim) if i != axis]
            count = _count(x, others, x.dtype)
            mean = _divide(_reduce(x, others, False, te.sum), count)
            mean_rs = _along(mean, ndim, axis, extent)
            var = _divide(_reduce(_multiply(_subtract(x, mean_rs), _subtract(x, mean_rs)), others, False, te.sum),
                          count)
            var_rs = _along(var, ndim, axis, extent)
        else:
            mean_rs, var_rs = _along(moving_mean, ndim, axis, extent), _along(moving_var, ndim, axis, extent)
        std = _elemwise(_add(var_rs, const(a["epsilon"], dtype)), lambda v: _intrin("sqrt", v))
        out = _divide(_subtract(x, mean_rs), std)
        if a["scale"]:
            out = _multiply(out, _along(gamma, ndim, axis, extent))
        if a["center"]:
            out = _add(out, _along(beta, ndim, axis, extent))
        if not a["training"]:
            return [out, _multiply(moving_mean, const(1, dtype)), _multiply(moving_var, const(1, dtype))]
        m = a["momentum"]

        def update(moving: te.Tensor, batch: te.Tensor) -> te.Tensor:
            return _add(_multiply(const(1 - m, dtype), moving), _multiply(const(m, dtype), batch))

        return [out, update(moving_mean, mean), update(moving_var, var)]

    return call_te(bb, batch_norm, *call.args, primfunc_name_hint="batch_norm")


def _tuple_sum(a: tuple, b: tuple) -> tuple:
    return a[0] + b[0], a[1] + b[1]


# topi's MakeTupleSumReducer: the sum of x and of x * x in one pass
_SUM_AND_SQUARES = te.comm_reducer(_tuple_sum, lambda d0, d1: (const(0, str(d0)), const(0, str(d1))),
                                   name="tuple_sum")


def _normalized(data: te.Tensor, axes: list, source_name: str, eps: float, name: str, scale_shift: Any,
                out_dtype: str) -> te.Tensor:
    """topi's group_norm / instance_norm core: mean and variance from one tuple reduction over
    ``axes``, ``(x - mean) * rsqrt(var + eps)`` (float16 data computed in float32, the result cast
    back to ``out_dtype``), then ``scale_shift(value, index)``."""
    acc = "float32" if str(data.dtype) == "float16" else str(data.dtype)

    def widen(v: PrimExpr) -> PrimExpr:
        return v if str(v.dtype) == acc else arith.cast(acc, v)

    sums = _reduce(data, axes, False, _SUM_AND_SQUARES, lambda v, ks, idx: (widen(v), widen(v) * widen(v)),
                   f"{source_name}_red_temp")
    extent: Any = const(1.0, acc)
    for axis in axes:  # (constants fold, as TVM's operators fold them)
        size = data.shape[axis]
        if isinstance(extent, FloatImm) and int_of(size) is not None:
            extent = const(extent.value * int_of(size), acc)
        else:
            extent = arith.binary(Mul, extent, arith.cast(acc, size))

    def body(idx: tuple) -> PrimExpr:
        kept = _kept(idx, axes)
        mean = sums[0][kept] / extent
        var = sums[1][kept] / extent - mean * mean
        value = (widen(data[idx]) - mean) * _intrin("rsqrt", var + const(eps, acc))
        return scale_shift(value if acc == out_dtype else arith.cast(out_dtype, value), idx)

    return te.compute(tuple(data.shape), lambda *idx: body(idx), name=name, tag="injective",
                      varargs_names=[f"ax{i}" for i in range(len(data.shape))])


_NORM_DTYPES = ("float32", "float16")  # (topi's group_norm and instance_norm take these)


@register_legalize("relax.nn.instance_norm")
def _instance_norm(bb: Any, call: rx.Call) -> Any:
    a = call.attrs
    if str(call.struct_info.dtype) not in _NORM_DTYPES:
        raise _NotLegalized

    def instance_norm(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor) -> te.Tensor:
        ndim = len(x.shape)
        channel = a["channel_axis"] % ndim
        axes = sorted(ax % ndim for ax in a["axes"])
        return _normalized(x, axes, x.name, a["epsilon"], "T_instance_norm",
                           lambda v, idx: v * gamma[idx[channel]] + beta[idx[channel]], str(x.dtype))

    return call_te(bb, instance_norm, *call.args, primfunc_name_hint="instance_norm")


@register_legalize("relax.nn.group_norm")
def _group_norm(bb: Any, call: rx.Call) -> Any:
    """The channels split into (groups, channels per group), normalized over the group and the
    axes (float16 data cast to float32 first), reshaped back."""
    a = call.attrs
    if str(call.struct_info.dtype) not in _NORM_DTYPES:
        raise _NotLegalized

    def group_norm(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor) -> te.Tensor:
        ndim, groups = len(x.shape), a["num_groups"]
        channel = a["channel_axis"] % ndim
        size = arith.binary(FloorDiv, x.shape[channel], IntImm(_I64, groups))
        shape = tuple(x.shape[:channel]) + (IntImm(_I64, groups), size) + tuple(x.shape[channel + 1:])
        grouped = _reshape_compute(x, shape)
        if str(x.dtype) == "float16":
            grouped = _cast(grouped, "float32", "T_cast", "ax")
        params = [_reshape_compute(p, (IntImm(_I64, groups), size)) for p in (gamma, beta)]
        axes = sorted([channel + 1] + [ax % ndim + (ax % ndim > channel) for ax in a["axes"]])

        def scale_shift(v: PrimExpr, idx: tuple) -> PrimExpr:
            at = (idx[channel], idx[channel + 1])
            return v * params[0][at] + params[1][at]

        out = _normalized(grouped, axes, x.name, a["epsilon"], "T_group_norm", scale_shift, str(x.dtype))
        return _reshape_compute(out, tuple(x.shape))

    return call_te(bb, group_norm, *call.args, primfunc_name_hint="group_norm")


# ---------------------------------------------------------------- losses
@register_legalize("relax.nn.cross_entropy_with_logits")
def _cross_entropy_with_logits(bb: Any, call: rx.Call) -> Any:
    """-sum(x * y), divided by the batch size when there is a batch axis."""
    def cross_entropy_with_logits(x: te.Tensor, y: te.Tensor) -> te.Tensor:
        axes = list(range(len(x.shape)))
        total = _multiply(_reduce(_multiply(x, y), axes, False, te.sum), const(-1.0, str(x.dtype)))
        if len(x.shape) == 1:
            return total
        return _divide(total, _float_of(x.shape[0], str(x.dtype)))

    return call_te(bb, cross_entropy_with_logits, *call.args, primfunc_name_hint="cross_entropy_with_logits")


def _float_of(size: PrimExpr, dtype: str) -> PrimExpr:
    """An integer size as a float operand: a constant folds (``T.float32(2.0)``)."""
    return const(float(int_of(size)), dtype) if int_of(size) is not None else arith.cast(dtype, size)


def _nll_loss_te(pred: te.Tensor, target: te.Tensor, weight: te.Tensor, reduction: str,
                 ignore_index: int) -> te.Tensor:
    """topi.nn.nll_loss: -pred[n, t, ...] * weight[t] where t is not ignore_index (0 there);
    "mean" divides the sum by the sum of the weights taken."""
    zero = const(0, str(pred.dtype))

    def per_element(value: Any) -> Any:
        def body(idx: tuple) -> PrimExpr:
            c = target[idx]
            at = (c,) if len(pred.shape) == 1 else (idx[0], c, *idx[1:])
            return Select(NE(c, const(ignore_index, str(c.dtype))), value(pred[at], weight[c]), zero)
        return te.compute(tuple(target.shape), lambda *idx: body(idx), name="nll_loss", tag="broadcast",
                          varargs_names=[f"ax{i}" for i in range(len(target.shape))])

    loss = per_element(lambda p, w: Sub(zero, p) * w)
    if reduction == "none" or (reduction == "sum" and len(pred.shape) == 1):
        return loss
    axes = list(range(len(target.shape)))
    total = _reduce(loss, axes, False, te.sum) if axes else loss
    if reduction == "sum":
        return total
    weights = per_element(lambda p, w: w)
    return _divide(total, _reduce(weights, axes, False, te.sum) if axes else weights)


@register_legalize("relax.nn.nll_loss")
def _nll_loss(bb: Any, call: rx.Call) -> Any:
    reduction, ignore_index = call.attrs["reduction"], call.attrs["ignore_index"]
    if len(call.args) == 3:
        return call_te(bb, lambda p, t, w: _nll_loss_te(p, t, w, reduction, ignore_index), *call.args,
                       primfunc_name_hint="nll_loss")

    def nll_loss_without_weight(pred: te.Tensor, target: te.Tensor) -> te.Tensor:
        classes = pred.shape[1] if len(pred.shape) > 1 else pred.shape[0]
        ones = _compute((classes,), lambda idx: const(1.0, str(pred.dtype)), "T_full", "elemwise", "ax")
        return _nll_loss_te(pred, target, ones, reduction, ignore_index)

    return call_te(bb, nll_loss_without_weight, *call.args, primfunc_name_hint="nll_loss_without_weight")


# ---------------------------------------------------------------- transposed convolutions
def _dilate(x: te.Tensor, strides: list, name: str) -> te.Tensor:
    """topi.nn.dilate: ``stride - 1`` zeros between the elements along each axis."""
    shape = tuple(canonical((d - _ONE) * IntImm(_I64, s) + _ONE) if s != 1 else d for d, s in zip(x.shape, strides))

    def body(idx: tuple) -> PrimExpr:
        src, inside = [], []
        for v, s in zip(idx, strides):
            if s == 1:
                src.append(v)
                continue
            src.append(arith.binary(FloorDiv, v, IntImm(_I64, s)))
            inside.append(EQ(arith.binary(FloorMod, v, IntImm(_I64, s)), IntImm(_I64, 0)))
        if not inside:
            return x[tuple(src)]
        return te.if_then_else(te.all(*inside), x[tuple(src)], const(0.0, str(x.dtype)))

    return _compute(shape, body, name, "injective,dilate", "i")


# topi's names of the transposed kernel's axes and of the output's spatial axes
_TRANSPOSE_SPATIAL = {1: "w", 2: "hw", 3: "dhw"}


def _conv_transpose_legalize(n: int) -> Any:
    """topi's conv{n}d_transpose (and group_conv{n}d_transpose): the data dilated by the strides
    and padded by ``kernel - 1 - padding``, convolved with the flipped, transposed kernel."""
    spatial = _TRANSPOSE_SPATIAL[n]
    canonical_layout = "NC" + "DHW"[3 - n:]

    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        if a["data_layout"] != canonical_layout or a["out_layout"] != canonical_layout or \
                a["kernel_layout"] != "IO" + canonical_layout[2:]:
            raise _NotLegalized  # (topi has only the canonical layouts)
        strides, pad, groups = a["strides"], a["padding"], a["groups"]
        out_dtype = str(call.struct_info.dtype)

        cast = cast_to(out_dtype)
        def conv_transpose(data: te.Tensor, kernel: te.Tensor) -> te.Tensor:
            if any(d != 1 for d in a["dilation"]):
                kernel = _dilate(kernel, [1, 1, *a["dilation"]], "kernel_dilate")
            sizes = [int_of(k) for k in kernel.shape[2:]]
            if None in sizes:
                raise _NotLegalized
            before = [k - 1 - pad[i] for i, k in enumerate(sizes)]
            after = [k - 1 - pad[n + i] + a["output_padding"][i] for i, k in enumerate(sizes)]
            padded = _pad(_dilate(data, [1, 1, *strides], "data_dilate"), [0, 0, *before], [0, 0, *after],
                          const(0.0, str(data.dtype)), "i", True, name="data_pad")
            in_c, out_c = kernel.shape[0], kernel.shape[1]
            names = ("i", "o") if n == 2 and groups > 1 else ("o", "i")

            def flipped(*idx: Any) -> PrimExpr:  # (out, in, *window) reads kernel[in, out, *flipped window]
                return kernel[(idx[1], idx[0]) + tuple(IntImm(_I64, k - 1) - v for k, v in zip(sizes, idx[2:]))]

            transformed = te.compute((out_c, in_c, *kernel.shape[2:]), flipped,
                                     name="kernel" if n == 1 else "kernel_transform",
                                     varargs_names=[*names, *spatial])
            in_g, out_g = int_of(padded.shape[1]) // groups, int_of(out_c)
            dc = te.reduce_axis((0, IntImm(_I64, in_g)), name="dc")
            ds = [te.reduce_axis((0, IntImm(_I64, k)), name=f"d{s}") for k, s in zip(sizes, spatial)]

            def body(*idx: Any) -> PrimExpr:
                b, c, *out = idx
                channel, filt = dc.var, c
                if groups > 1:
                    channel = canonical(c // IntImm(_I64, out_g) * IntImm(_I64, in_g) + dc.var)
                    filt = canonical(FloorMod(c, IntImm(_I64, out_g)))
                window = tuple(canonical(o + d.var) for o, d in zip(out, ds))
                return te.sum(cast(padded[(b, channel) + window]) *
                              cast(transformed[(filt, channel) + tuple(d.var for d in ds)]), axis=[dc, *ds])

            shape = (data.shape[0], IntImm(_I64, out_g * groups),
                     *(canonical(padded.shape[2 + i] - IntImm(_I64, k - 1)) for i, k in enumerate(sizes)))
            tag = f"{'group_' if groups > 1 else ''}conv{n}d_transpose_{canonical_layout.lower()}"
            return te.compute(shape, body, name="compute", tag=tag, varargs_names=["b", "c", *spatial])

        return call_te(bb, conv_transpose, call.args[0], call.args[1], primfunc_name_hint=f"conv{n}d_transpose")

    return legalize


for _n in _TRANSPOSE_SPATIAL:
    register_legalize(f"relax.nn.conv{_n}d_transpose")(_conv_transpose_legalize(_n))


# ---------------------------------------------------------------- adaptive pooling
def _adaptive_avg_pool_legalize(n: int) -> Any:
    """topi's adaptive_pool (avg) where each pooled size divides the input's: output element o
    averages the window [o * k, (o + 1) * k) of k = in / out elements. (Other sizes give windows
    of varying extent, which TVM lowers to nested blocks: left unlegalized here.)"""
    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        layout = a["layout"]
        if a["out_layout"] != layout:
            raise _NotLegalized  # (as in TVM: topi pools in one layout)
        axes = [layout.index(c) for c in "DHW"[3 - n:]]
        in_sizes = [int_of(d) for d in (call.args[0].struct_info.dims[i] for i in axes)]
        out_sizes = list(a["output_size"] or in_sizes)
        if None in in_sizes or any(s <= 0 or i % s for i, s in zip(in_sizes, out_sizes)):
            raise _NotLegalized
        windows = [i // s for i, s in zip(in_sizes, out_sizes)]

        def pool(x: te.Tensor) -> te.Tensor:
            shape = list(x.shape)
            for axis, s in zip(axes, out_sizes):
                shape[axis] = IntImm(_I64, s)
            rv = [te.reduce_axis((0, IntImm(_I64, k)), name=f"rv{i}") for i, k in enumerate(windows)]

            def window(idx: tuple) -> PrimExpr:
                src = list(idx)
                for axis, k, r in zip(axes, windows, rv):
                    src[axis] = canonical(idx[axis] * IntImm(_I64, k) + r.var)
                return te.sum(x[tuple(src)], axis=rv)

            names = [f"ax{i}" for i in range(len(shape))]
            total = te.compute(tuple(shape), lambda *idx: window(idx), name="adaptive_pool_sum",
                               tag="adaptive_pool_sum", varargs_names=names)
            count = 1
            for k in windows:
                count *= k

            def average(*idx: Any) -> PrimExpr:  # (a division by 1 folds away)
                return total[idx] if count == 1 else total[idx] / const(float(count), str(x.dtype))

            return te.compute(tuple(shape), average, name="adaptive_pool_avg", tag="elemwise",
                              attrs={"schedule_rule": "meta_schedule.adaptive_pool_avg"}, varargs_names=names)

        return call_te(bb, pool, call.args[0], primfunc_name_hint=f"adaptive_avg_pool{n}d")

    return legalize


for _n in (1, 2, 3):
    register_legalize(f"relax.nn.adaptive_avg_pool{_n}d")(_adaptive_avg_pool_legalize(_n))
