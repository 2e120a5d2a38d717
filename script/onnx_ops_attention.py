"""ONNX's Attention (opset 23): scaled dot-product attention with an optional mask, causal
masking, a key/value cache, grouped-query heads and a soft cap, as the operator's reference
defines it (a query row that no key may attend gives zeros, not NaN)."""
from __future__ import annotations

import numpy as np

from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, dtype_of, onnx_dtype,
                           rank_of, scalar_like, static_shape)
from .relax_op_api import op


def _heads_first(ctx, x, heads):
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    batch, seq, hidden = dims_of(x)
    split = ctx.emit(op.reshape(x, [batch, seq, heads, hidden // heads]))
    return ctx.emit(op.permute_dims(split, [0, 2, 1, 3]))


@converter("Attention")
class Attention(OnnxOpConverter):
    @classmethod
    def _impl_v23(cls, ctx, inputs, attrs):
        q, k, v, mask, past_k, past_v, nonpad = (list(inputs) + [None] * 7)[:7]
        rank3 = rank_of(q) == 3
        q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if rank3:
            if q_heads is None or kv_heads is None:
                raise Unsupported("3-d inputs without q_num_heads and kv_num_heads")
            q, k, v = _heads_first(ctx, q, q_heads), _heads_first(ctx, k, kv_heads), _heads_first(ctx, v, kv_heads)
        if (past_k is None) != (past_v is None) or (nonpad is not None and past_k is not None):
            raise Unsupported("this combination of past_key, past_value and nonpad_kv_seqlen")
        if past_k is not None:
            k, v = ctx.emit(op.concat([past_k, k], axis=2)), ctx.emit(op.concat([past_v, v], axis=2))
        q_len, kv_len = (static_shape(q) or [None] * 4)[2], (static_shape(k) or [None] * 4)[2]
        if q_len is None or kv_len is None:
            raise Unsupported("sequence lengths of symbolic size")
        dtype = dtype_of(q)
        bias = cls._bias(ctx, attrs, mask, nonpad, q_len, kv_len, 0 if past_k is None else dims_of(past_k)[2],
                         dtype)
        heads, kv = dims_of(q)[1], dims_of(k)[1]
        if heads != kv and heads % kv == 0:  # grouped-query: each key/value head serves heads // kv
            k_rep, v_rep = op.repeat(k, heads // kv, axis=1), op.repeat(v, heads // kv, axis=1)
        else:
            k_rep, v_rep = k, v
        scale = attrs.get("scale")
        scale = float(np.sqrt(1 / np.sqrt(dims_of(q)[3]) if scale is None else scale))
        root = scalar_like(scale, q)  # (both sides scaled by its square root, as the reference)
        qk = ctx.emit(op.matmul(op.multiply(q, root),
                                ctx.emit(op.permute_dims(ctx.emit(op.multiply(k_rep, root)), [0, 1, 3, 2]))))
        softcap = attrs.get("softcap", 0.0)
        if softcap > 0:
            cap = scalar_like(softcap, qk)
            qk = ctx.emit(op.multiply(op.tanh(op.divide(qk, cap)), cap))
        with_bias = qk if bias is None else ctx.emit(op.add(qk, bias))
        precision = attrs.get("softmax_precision")
        logits = with_bias if precision is None else as_dtype(with_bias, onnx_dtype(precision))
        probs = ctx.emit(op.nn.softmax(logits, axis=-1))
        if bias is not None:  # a row that no key may attend: zeros
            # (all -inf: R.max's reduction starts from the lowest finite value, not -inf)
            blocked = ctx.emit(op.astype(op.isinf(bias), "int8"))
            masked = op.equal(ctx.emit(op.min(blocked, [-1], True)), ctx.constant(1, "int8"))
            probs = ctx.emit(op.where(masked, scalar_like(0, probs), probs))
        probs = as_dtype(probs, dtype)
        out = ctx.emit(op.matmul(probs, v_rep))
        if rank3:
            batch, _, seq, _ = dims_of(out)
            out = op.reshape(ctx.emit(op.permute_dims(out, [0, 2, 1, 3])), [batch, seq, -1])
        mode = attrs.get("qk_matmul_output_mode", 0)
        qk_out = {0: qk, 1: qk, 2: with_bias, 3: probs}.get(mode)
        if qk_out is None:
            raise Unsupported(f"qk_matmul_output_mode={mode}")
        return [out, k, v, as_dtype(qk_out, dtype)]

    @classmethod
    def _bias(cls, ctx, attrs, mask, nonpad, q_len, kv_len, offset_past, dtype):
        """The additive bias (0 where a query may attend a key, -inf elsewhere), None when all
        may attend all."""
        ninf = np.array(-np.inf, dtype)
        if mask is not None:
            shape = static_shape(mask)
            if shape is None:
                raise Unsupported("an attn_mask of symbolic shape")
            is_bool = dtype_of(mask) == "bool"
            if shape[-1] < kv_len:  # a shorter mask: the keys past it are masked
                fill = np.full(shape[:-1] + [kv_len - shape[-1]], False if is_bool else ninf,
                               "bool" if is_bool else dtype_of(mask))
                mask = ctx.emit(op.concat([mask, ctx.constant(fill)], axis=-1))
            if is_bool:
                mask = ctx.emit(op.where(mask, ctx.constant(np.zeros((), dtype)), ctx.constant(ninf)))
        bias = mask
        # causal and sliding-window masks bound diff = (query index + offset) - key index,
        # where offset is the number of keys before the query block (per batch with nonpad)
        left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
        lows = [b for b, on in ((0, attrs.get("is_causal", 0)), (-right, right >= 0)) if on]
        low, high = (max(lows) if lows else None), (left if left >= 0 else None)
        if low is not None or high is not None:
            offset = offset_past if nonpad is None else \
                ctx.emit(op.subtract(as_dtype(nonpad, "int64"), ctx.constant(q_len, "int64")))
            frontier = cls._frontier(ctx, q_len, kv_len, offset, low, high, dtype)
            bias = frontier if bias is None else ctx.emit(op.add(bias, frontier))
        if nonpad is not None:
            keys = ctx.constant(np.arange(kv_len, dtype="int64")[None, :])
            lengths = op.reshape(as_dtype(nonpad, "int64"), [-1, 1])
            valid = ctx.emit(op.less(keys, ctx.emit(lengths)))
            padding = ctx.emit(op.where(valid, ctx.constant(np.zeros((), dtype)), ctx.constant(ninf)))
            padding = ctx.emit(op.reshape(padding, [-1, 1, 1, kv_len]))
            bias = padding if bias is None else ctx.emit(op.add(bias, padding))
        return bias

    @staticmethod
    def _frontier(ctx, q_len, kv_len, offset, low, high, dtype):
        """0 where low <= diff <= high (each bound optional), -inf elsewhere: (q, kv) for a
        scalar offset, (batch, 1, q, kv) for one per batch."""
        diff = np.arange(q_len)[:, None] - np.arange(kv_len)[None, :]
        zero, ninf = np.zeros((), dtype), np.array(-np.inf, dtype)
        if isinstance(offset, int):
            diff = diff + offset
            allowed = np.ones_like(diff, bool)
            allowed &= diff >= low if low is not None else True
            allowed &= diff <= high if high is not None else True
            return ctx.constant(np.where(allowed, zero, ninf))
        diff = ctx.emit(op.add(ctx.constant(diff.astype("int64")), op.reshape(offset, [-1, 1, 1])))
        allowed = None
        for bound, compare in ((low, op.greater_equal), (high, op.less_equal)):
            if bound is not None:
                check = ctx.emit(compare(diff, ctx.constant(bound, "int64")))
                allowed = check if allowed is None else ctx.emit(op.logical_and(allowed, check))
        bias = ctx.emit(op.where(allowed, ctx.constant(zero), ctx.constant(ninf)))
        return op.reshape(bias, [-1, 1, q_len, kv_len])
