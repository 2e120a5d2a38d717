"""ONNX's transformer operators in Relax operators: ``Attention`` (opset 23; 24 adds the
``nonpad_kv_seqlen`` input, 25 the sliding window), ``RotaryEmbedding`` (23), ``TensorScatter``
(24), ``LinearAttention`` and ``CausalConvWithState`` (27), ``SwiGLU`` (28).

Attention: scaled Q K^T, softcap, an additive bias made of the mask, the causal and window
frontiers and the key padding, a softmax that gives zeros for a row with no key left, then the
product with V; its four outputs are Y, present_key, present_value, qk_matmul_output. Half
precision follows the reference's numpy: products and sums accumulate in float32."""
from __future__ import annotations

import math

import numpy as np

from ..ir import relax as rx
from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, dtype_of, normalize_axis,
                           onnx_dtype, scalar_like)
from .onnx_ops_math import swish
from .relax_op_api import op


def _heads_first(ctx, x, num_heads):
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    batch, seq, hidden = dims_of(x)
    if not isinstance(hidden, int) or hidden % num_heads:
        raise Unsupported(f"a hidden size {hidden} that {num_heads} heads do not divide")
    x = ctx.emit(op.reshape(x, [batch, seq, num_heads, hidden // num_heads]))
    return ctx.emit(op.permute_dims(x, [0, 2, 1, 3]))


def _neg_inf_where_false(ctx, allowed, like):
    """An additive bias: 0 where ``allowed``, -inf elsewhere, of ``like``'s dtype."""
    return ctx.emit(op.where(allowed, scalar_like(0.0, like), scalar_like(-math.inf, like)))


class _Frontiers:
    """The causal and window masks: a query at in-block row ``i`` is at absolute position
    ``i + offset``, where ``offset`` is the past length (an int) or, with ``nonpad_kv_seqlen``,
    ``nonpad[b] - q_len`` per batch (a run-time value of shape (batch, 1, 1, 1))."""

    def __init__(self, ctx, q_len, kv_len, past_len, nonpad):
        self.ctx = ctx
        rows = np.arange(q_len, dtype="int64").reshape(q_len, 1)
        cols = np.arange(kv_len, dtype="int64").reshape(1, kv_len)
        if nonpad is None:
            self.diff = ctx.constant(rows + past_len - cols)  # position - key, (q, kv)
        else:
            offset = op.subtract(op.reshape(as_dtype(nonpad, "int64"), [-1, 1, 1, 1]),
                                 ctx.constant(np.int64(q_len)))
            self.diff = ctx.emit(op.subtract(op.add(ctx.emit(offset), ctx.constant(rows)), ctx.constant(cols)))

    def causal(self):
        return self.ctx.emit(op.greater_equal(self.diff, self.ctx.constant(np.int64(0))))

    def window(self, left, right):
        allowed = None
        for bound, diff in ((left, self.diff), (right, op.negative(self.diff))):
            if bound >= 0:
                ok = self.ctx.emit(op.less_equal(diff, self.ctx.constant(np.int64(bound))))
                allowed = ok if allowed is None else self.ctx.emit(op.logical_and(allowed, ok))
        return allowed


def _bias(ctx, q, mask, q_len, kv_len, past_len, nonpad, is_causal, window):
    """The additive bias (None when nothing is masked), as ONNX's reference builds it."""
    if mask is not None:
        mask_dims = dims_of(mask)
        short = kv_len - mask_dims[-1]
        if short > 0:  # (a mask shorter than the keys: the rest is masked out)
            fill = False if dtype_of(mask) == "bool" else -math.inf
            pad = ctx.constant(np.full(mask_dims[:-1] + [short], fill, dtype=dtype_of(mask)))
            mask = ctx.emit(op.concat([mask, pad], axis=-1))
        if dtype_of(mask) == "bool":
            mask = _neg_inf_where_false(ctx, mask, q)
        else:
            mask = as_dtype(mask, dtype_of(q))
    frontiers = _Frontiers(ctx, q_len, kv_len, past_len, nonpad) if is_causal or window or nonpad is not None else None
    bias = mask
    for allowed in ((frontiers.causal() if is_causal else None), (frontiers.window(*window) if window else None)):
        if allowed is not None:
            term = _neg_inf_where_false(ctx, allowed, q)
            bias = term if bias is None else ctx.emit(op.add(bias, term))
    if nonpad is not None:
        keys = ctx.constant(np.arange(kv_len, dtype="int64").reshape(1, 1, 1, kv_len))
        valid = op.less(keys, op.reshape(as_dtype(nonpad, "int64"), [-1, 1, 1, 1]))
        term = _neg_inf_where_false(ctx, ctx.emit(valid), q)
        bias = term if bias is None else ctx.emit(op.add(bias, term))
    return bias


_HALF = ("float16", "bfloat16")


def _is_neg_inf(ctx, x):
    return ctx.emit(op.equal(x, scalar_like(-math.inf, x)))


def _row_max(ctx, x):
    """The maximum over the last axis (of half precision taken in float32: exact either way)."""
    dtype = dtype_of(x)
    wide = as_dtype(x, "float32") if dtype in _HALF else x
    return ctx.emit(as_dtype(ctx.emit(op.max(wide, axis=[-1], keepdims=True)), dtype))


def _softmax(ctx, x, masked):
    """Softmax over the last axis; with a bias (``masked``) a row that is all -inf gives zeros
    (the reference's convention) instead of NaN. Half precision: exp rounded to the dtype, the
    sum accumulated in float32, as the reference computes it with numpy."""
    if not masked and dtype_of(x) not in _HALF:
        return ctx.emit(op.nn.softmax(x, axis=-1))
    zero, one = scalar_like(0.0, x), scalar_like(1.0, x)
    top = _row_max(ctx, x)
    top = ctx.emit(op.where(_is_neg_inf(ctx, top), zero, top))
    e = ctx.emit(op.exp(op.subtract(x, top)))
    half = dtype_of(x) in _HALF
    # (half-precision sums accumulate in float32 and round once, as numpy's do)
    total = ctx.emit(op.sum(as_dtype(e, "float32") if half else e, axis=[-1], keepdims=True))
    total = ctx.emit(as_dtype(total, dtype_of(x)))
    total = ctx.emit(op.where(op.equal(total, zero), one, total))
    return ctx.emit(op.divide(e, total))


def _matmul(ctx, a, b):
    """``a @ b``; half-precision products accumulate in float32 and round once, as numpy's do."""
    dtype = dtype_of(a)
    if dtype not in _HALF:
        return ctx.emit(op.matmul(a, b))
    return as_dtype(ctx.emit(op.matmul(a, b, out_dtype="float32")), dtype)



@converter("Attention")
class Attention(OnnxOpConverter):
    @classmethod
    def _impl_v23(cls, ctx, inputs, attrs):
        return cls._convert(ctx, inputs, attrs, window=None)

    @classmethod
    def _impl_v25(cls, ctx, inputs, attrs):
        window = (attrs.get("left_window_size", -1), attrs.get("right_window_size", -1))
        return cls._convert(ctx, inputs, attrs, window=window if max(window) >= 0 else None)

    @classmethod
    def _convert(cls, ctx, inputs, attrs, window):
        q, k, v, mask, past_key, past_value, nonpad = (inputs + [None] * 7)[:7]
        if (past_key is None) != (past_value is None):
            raise Unsupported("past_key without past_value (or the reverse)")
        if nonpad is not None and past_key is not None:
            raise Unsupported("nonpad_kv_seqlen together with past_key/past_value")
        dtype = dtype_of(q)
        rank = len(dims_of(q))
        q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if rank == 3:
            if q_heads is None or kv_heads is None:
                raise Unsupported("3-d inputs without q_num_heads and kv_num_heads")
            q, k, v = _heads_first(ctx, q, q_heads), _heads_first(ctx, k, kv_heads), _heads_first(ctx, v, kv_heads)
        elif rank != 4:
            raise Unsupported(f"rank-{rank} inputs (3 or 4 are defined)")
        head_size = dims_of(q)[3]
        scale = attrs.get("scale")
        if scale is None:
            if not isinstance(head_size, int):
                raise Unsupported("the default scale of a symbolic head size")
            scale = 1 / math.sqrt(head_size)
        # (the reference scales Q and K each by sqrt(scale), rounded to the input dtype)
        root = scalar_like(np.sqrt(np.float64(scale)).astype(dtype), q)

        past_len = 0
        if past_key is not None:
            past_len = dims_of(past_key)[2]
            k = ctx.emit(op.concat([past_key, k], axis=2))
            v = ctx.emit(op.concat([past_value, v], axis=2))
        present_key, present_value = k, v
        q_len, kv_len = dims_of(q)[2], dims_of(k)[2]
        if not all(isinstance(n, int) for n in (q_len, kv_len, past_len)):
            raise Unsupported("symbolic sequence lengths")

        bias = _bias(ctx, q, mask, q_len, kv_len, past_len, nonpad, bool(attrs.get("is_causal", 0)), window)
        groups, rest = divmod(dims_of(q)[1], dims_of(k)[1])
        if rest:
            raise Unsupported(f"{dims_of(q)[1]} query heads over {dims_of(k)[1]} key/value heads")
        if groups > 1:  # (grouped-query attention: each key/value head serves `groups` query heads)
            k = ctx.emit(op.repeat(k, groups, axis=1))
            v = ctx.emit(op.repeat(v, groups, axis=1))
        scores = _matmul(ctx, ctx.emit(op.multiply(q, root)),
                         ctx.emit(op.permute_dims(op.multiply(k, root), [0, 1, 3, 2])))
        softcap = attrs.get("softcap", 0.0)
        if softcap > 0:
            cap = scalar_like(softcap, scores)
            scores = ctx.emit(op.multiply(op.tanh(op.divide(scores, cap)), cap))
        mode = attrs.get("qk_matmul_output_mode", 0)
        if mode not in (0, 1, 2, 3):
            raise Unsupported(f"qk_matmul_output_mode={mode}")
        qk_output = scores
        if bias is not None:
            scores = ctx.emit(op.add(scores, bias))
        if mode == 2:
            qk_output = scores
        precision = attrs.get("softmax_precision")
        if precision is not None:
            scores = as_dtype(scores, onnx_dtype(precision))
        probs = _softmax(ctx, scores, bias is not None)
        if bias is not None:  # (a row whose bias masks every key attends to nothing)
            empty = _is_neg_inf(ctx, _row_max(ctx, bias))
            probs = ctx.emit(op.where(empty, scalar_like(0.0, probs), probs))
        if mode == 3:
            qk_output = probs
        probs = as_dtype(probs, dtype)
        y = _matmul(ctx, probs, v)
        if rank == 3:
            y = ctx.emit(op.permute_dims(y, [0, 2, 1, 3]))
            batch, seq = dims_of(y)[:2]
            y = op.reshape(y, [batch, seq, -1])
        return [y, present_key, present_value, as_dtype(qk_output, dtype)]


@converter("RotaryEmbedding")
class RotaryEmbedding(OnnxOpConverter):
    """Rotates the first ``rotary_embedding_dim`` features of each head by the angles whose cos
    and sin the caches hold (indexed by ``position_ids`` when given): halves, or even/odd pairs
    when ``interleaved``."""

    @classmethod
    def _impl_v23(cls, ctx, inputs, attrs):
        x, cos, sin, positions = (inputs + [None])[:4]
        shape = dims_of(x)
        if len(shape) == 4:  # (batch, heads, seq, size) -> (batch, seq, heads, size)
            x = ctx.emit(op.permute_dims(x, [0, 2, 1, 3]))
        elif len(shape) == 3:
            heads = attrs.get("num_heads", 0)
            if not heads or not isinstance(shape[2], int) or shape[2] % heads:
                raise Unsupported(f"3-d input of hidden size {shape[2]} with num_heads={heads}")
            x = ctx.emit(op.reshape(x, shape[:2] + [heads, shape[2] // heads]))
        else:
            raise Unsupported(f"a rank-{len(shape)} input (3 or 4 are defined)")
        size = dims_of(x)[3]
        rot = attrs.get("rotary_embedding_dim", 0) or size
        if positions is not None:
            cos, sin = (ctx.emit(op.take(c, as_dtype(positions, "int64"), axis=0)) for c in (cos, sin))
        cos, sin = (ctx.emit(op.expand_dims(c, axis=2)) for c in (cos, sin))
        part = ctx.emit(op.strided_slice(x, axes=[3], begin=[0], end=[rot])) if rot < size else x
        interleaved = attrs.get("interleaved", 0)
        if interleaved:
            x1, x2 = (ctx.emit(op.strided_slice(part, axes=[3], begin=[i], end=[rot], strides=[2])) for i in (0, 1))
        else:
            halves = ctx.emit(op.split(part, 2, axis=3))
            x1, x2 = (ctx.emit(rx.TupleGetItem(halves, i)) for i in (0, 1))
        real = ctx.emit(op.subtract(op.multiply(cos, x1), op.multiply(sin, x2)))
        imag = ctx.emit(op.add(op.multiply(sin, x1), op.multiply(cos, x2)))
        if interleaved:
            rotated = ctx.emit(op.reshape(op.stack([real, imag], axis=-1), dims_of(part)))
        else:
            rotated = ctx.emit(op.concat([real, imag], axis=3))
        if rot < size:
            rotated = ctx.emit(op.concat([rotated, op.strided_slice(x, axes=[3], begin=[rot], end=[size])], axis=3))
        if len(shape) == 4:
            return op.permute_dims(rotated, [0, 2, 1, 3])
        return op.reshape(rotated, shape)


@converter("SwiGLU")
class SwiGLU(OnnxOpConverter):
    """swish(A, alpha) * B, swish(a) = a * sigmoid(alpha a)."""

    @classmethod
    def _impl_v28(cls, ctx, inputs, attrs):
        a, b = inputs
        return op.multiply(ctx.emit(swish(a, attrs.get("alpha", 1.0))), b)


def _silu_f32(ctx, x):
    """x * sigmoid(x) computed in float32, in x's dtype."""
    wide = as_dtype(x, "float32")
    return as_dtype(ctx.emit(op.multiply(wide, op.sigmoid(wide))), dtype_of(x))


@converter("CausalConvWithState")
class CausalConvWithState(OnnxOpConverter):
    """A depthwise causal 1-d convolution: the input (batch, channels, length) is continued from
    ``past_state`` (the last k - 1 steps, zeros when absent), which the second output updates."""

    @classmethod
    def _impl_v27(cls, ctx, inputs, attrs):
        x, w, bias, past = (inputs + [None] * 2)[:4]
        activation = attrs.get("activation", "none")
        if activation not in ("none", "silu", "swish"):
            raise Unsupported(f"activation={activation!r}")
        batch, channels, _ = dims_of(x)
        k = dims_of(w)[2]
        if past is None:
            past = ctx.emit(op.zeros([batch, channels, k - 1], dtype_of(x)))
        padded = ctx.emit(op.concat([past, x], axis=2))
        # (half precision accumulates in float32 and rounds once, as the reference's numpy does)
        acc = "float32" if dtype_of(x) in _HALF else dtype_of(x)
        y = ctx.emit(op.nn.conv1d(as_dtype(padded, acc), as_dtype(w, acc), groups=channels))
        if bias is not None:
            y = ctx.emit(op.add(y, op.reshape(as_dtype(bias, acc), [-1, 1])))
        y = as_dtype(y, dtype_of(x))
        if activation != "none":
            y = _silu_f32(ctx, y)
        length = dims_of(padded)[2]
        present = op.strided_slice(padded, axes=[2], begin=[length - (k - 1)], end=[length])
        return [y, present]


@converter("LinearAttention")
class LinearAttention(OnnxOpConverter):
    """Attention through a recurrent (key size x value size) state per key/value head, unrolled
    over the static sequence length in float32: ``gated`` rules decay the state by exp(decay),
    ``delta`` rules write beta * (v - state^T k) instead of v; each query reads q^T state * scale."""

    @classmethod
    def _impl_v27(cls, ctx, inputs, attrs):
        q, k, v, past, decay, beta = (inputs + [None] * 3)[:6]
        rule = attrs.get("update_rule", "gated_delta")
        if rule not in ("linear", "gated", "delta", "gated_delta"):
            raise Unsupported(f"update_rule={rule!r}")
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        if gated != (decay is not None) or delta != (beta is not None):
            raise Unsupported(f"update_rule={rule!r} with{'out' * (decay is None)} decay and "
                              f"with{'out' * (beta is None)} beta")
        attrs.ignore("chunk_size")  # (a tuning hint: the result does not depend on it)
        q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if not q_heads or not kv_heads or q_heads % kv_heads:
            raise Unsupported(f"q_num_heads={q_heads}, kv_num_heads={kv_heads}")
        batch, seq, _ = dims_of(q)
        if not isinstance(seq, int):
            raise Unsupported("a symbolic sequence length (the recurrence is unrolled)")
        out_dtype = dtype_of(q)

        def steps(x, heads, width=None):
            """(batch, seq, heads * width) -> per step (batch, heads, width) in float32."""
            x = ctx.emit(op.reshape(as_dtype(x, "float32"), [batch, seq, heads, -1 if width is None else width]))
            parts = ctx.emit(op.split(x, seq, axis=1)) if seq > 1 else None
            return [ctx.emit(op.squeeze(rx.TupleGetItem(parts, t) if parts is not None else x, axis=[1]))
                    for t in range(seq)]

        qs, ks, vs = steps(q, q_heads), steps(k, kv_heads), steps(v, kv_heads)
        d_k, d_v = dims_of(ks[0])[2], dims_of(vs[0])[2]
        decays = None if decay is None else steps(decay, kv_heads, 1 if dims_of(decay)[2] == kv_heads else d_k)
        betas = None if beta is None else steps(beta, dims_of(beta)[2], 1)
        scale = attrs.get("scale", 0.0) or 1 / math.sqrt(d_k)
        if past is None:
            state = ctx.emit(op.zeros([batch, kv_heads, d_k, d_v], "float32"))
        else:
            state = as_dtype(past, "float32")
        group = q_heads // kv_heads
        outputs = []
        for t in range(seq):
            if gated:  # (batch, heads, d_k or 1) -> a factor per state row
                state = ctx.emit(op.multiply(state, op.expand_dims(op.exp(decays[t]), axis=-1)))
            write = vs[t]
            if delta:
                read = ctx.emit(op.squeeze(op.matmul(op.expand_dims(ks[t], axis=2), state), axis=[2]))
                write = ctx.emit(op.multiply(betas[t], op.subtract(write, read)))
            update = op.multiply(op.expand_dims(ks[t], axis=-1), op.expand_dims(write, axis=2))
            state = ctx.emit(op.add(state, update))
            shared = ctx.emit(op.repeat(state, group, axis=1)) if group > 1 else state
            out = ctx.emit(op.squeeze(op.matmul(op.expand_dims(qs[t], axis=2), shared), axis=[2]))
            outputs.append(ctx.emit(op.multiply(out, ctx.constant(np.float32(scale)))))
        y = ctx.emit(op.reshape(op.stack(outputs, axis=1), [batch, seq, q_heads * d_v]))
        return [as_dtype(y, out_dtype), as_dtype(state, out_dtype if past is None else dtype_of(past))]


@converter("TensorScatter")
class TensorScatter(OnnxOpConverter):
    """A key/value cache update: ``update`` is written into ``past_cache`` along ``axis`` from
    each batch entry's ``write_indices`` on (wrapping around in ``circular`` mode)."""

    @classmethod
    def _impl_v24(cls, ctx, inputs, attrs):
        past, update, starts = (inputs + [None])[:3]
        mode = attrs.get("mode", "linear")
        if mode not in ("linear", "circular"):
            raise Unsupported(f"mode={mode!r}")
        dims = dims_of(update)
        axis = normalize_axis(attrs.get("axis", -2), len(dims))
        if axis == 0:
            raise Unsupported("axis 0 (the batch axis)")
        if not all(isinstance(d, int) for d in dims):
            raise Unsupported("an update of symbolic shape")
        steps = np.arange(dims[axis], dtype="int64").reshape([-1] + [1] * (len(dims) - axis - 1))
        index = ctx.constant(steps)
        if starts is not None:
            index = ctx.emit(op.add(op.reshape(as_dtype(starts, "int64"), [-1] + [1] * (len(dims) - 1)), index))
        if mode == "circular":
            index = ctx.emit(op.floor_mod(index, ctx.constant(np.int64(dims_of(past)[axis]))))
        index = ctx.emit(op.broadcast_to(index, dims))
        return op.scatter_elements(past, index, update, axis=axis)
