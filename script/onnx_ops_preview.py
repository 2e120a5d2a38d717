"""``FlexAttention`` of ONNX's ``ai.onnx.preview`` domain: attention whose scores and
probabilities pass through the node's own subgraphs (``score_mod``, ``prob_mod``), which are
converted inline on the scores."""
from __future__ import annotations

import math

import numpy as np

from .onnx_convert import OnnxOpConverter, Unsupported, as_dtype, dims_of, dtype_of, converter, onnx_dtype
from .relax_op_api import op


def _inline(ctx, graph, value):
    """The output of the one-input, one-output ``graph`` applied to ``value``, its nodes
    converted into the current function (seeing the enclosing graph's values)."""
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise Unsupported(f"a modifier graph with {len(graph.input)} inputs and {len(graph.output)} outputs")
    return ctx.subgraph(ctx, graph, {graph.input[0].name: value})[0]


def _matmul(ctx, a, b):
    """A float16 matmul summed in float32 and rounded once, as numpy computes it."""
    if dtype_of(a) == "float16":
        return ctx.emit(op.astype(ctx.emit(op.matmul(a, b, out_dtype="float32")), "float16"))
    return ctx.emit(op.matmul(a, b))


@converter("ai.onnx.preview.FlexAttention")
class FlexAttention(OnnxOpConverter):
    """softmax(score_mod(Q K^T scale)) (prob_mod applied) times V, the key and value heads
    repeated for grouped queries; Q and K each scaled by sqrt(scale) first, and the softmax
    computed in ``softmax_precision`` (float32 for float16 inputs by default)."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        q, k, v = inputs
        dims_q, dims_k = dims_of(q), dims_of(k)
        if len(dims_q) != 4 or len(dims_k) != 4 or len(dims_of(v)) != 4:
            raise Unsupported("inputs that are not 4-d (batch, heads, sequence, head size)")
        heads, kv_heads = dims_q[1], dims_k[1]
        if not isinstance(heads, int) or not isinstance(kv_heads, int) or heads % kv_heads:
            raise Unsupported(f"{heads} query heads for {kv_heads} key/value heads")
        if heads != kv_heads:
            k, v = (ctx.emit(op.repeat(t, heads // kv_heads, axis=1)) for t in (k, v))
        dtype = dtype_of(q)
        scale = attrs.get("scale")
        if scale is None:
            if not isinstance(dims_q[3], int):
                raise Unsupported("a default scale with a symbolic head size")
            scale = 1.0 / math.sqrt(dims_q[3])
        root = ctx.constant(np.sqrt(np.float32(scale)), dtype)
        q, k = (ctx.emit(op.multiply(t, root)) for t in (q, k))
        scores = _matmul(ctx, q, ctx.emit(op.permute_dims(k, [0, 1, 3, 2])))
        precision = attrs.get("softmax_precision")
        compute = onnx_dtype(precision) if precision is not None else "float32" if dtype == "float16" else dtype
        scores = ctx.emit(as_dtype(scores, compute))
        if attrs.get("score_mod") is not None:
            scores = ctx.emit(as_dtype(_inline(ctx, attrs["score_mod"], scores), compute))
        probs = ctx.emit(op.nn.softmax(scores, axis=-1))
        if attrs.get("prob_mod") is not None:
            probs = ctx.emit(as_dtype(_inline(ctx, attrs["prob_mod"], probs), compute))
        return as_dtype(_matmul(ctx, probs, ctx.emit(as_dtype(v, compute))), dtype_of(inputs[2]))
