"""Relax attention operators: nn.attention, nn.attention_bias (``R.nn.attention(q, k, v, bias)``
builds it, as in TVM) and nn.attention_var_len. Inference follows TVM 0.27's
``src/relax/op/nn/attention.cc``: query, key and value are (batch, sequence, heads, head dim)."""
from __future__ import annotations

from typing import Any

from .relax_infer import describe, fmt_dim, int_of, make_tensor, op_error, prove_not_equal, tensor_arg
from .relax_op import ATTR_INT, ATTR_PRIM, ATTR_STR, Attr, CallInfo, OpSpec, register
from .struct_info import StructInfo, TensorStructInfo

CAUSAL_MASKS = ("TopLeft", "BottomRight")


def _prepare_attention(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    if attrs["causal_mask"] not in (None, *CAUSAL_MASKS):
        raise op_error(spec, f"causal_mask must be None, \"TopLeft\" or \"BottomRight\", "
                             f"got {attrs['causal_mask']!r}")
    return args, attrs


def _infer_attention(info: CallInfo) -> StructInfo:
    """(batch, queries, heads, head dim), keys, values -> (batch, queries, heads, value dim)."""
    q, k, v = (tensor_arg(info, i) for i in range(3))
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim != 4:
            raise info.fail(f"the {name} must be 4-d (batch, sequence, heads, head dim), got {describe(t)}")
    bias = tensor_arg(info, 3) if info.spec.script_name == "nn.attention_bias" else None
    if bias is not None and bias.ndim != 4:
        raise info.fail(f"the bias must be 4-d, got {describe(bias)}")
    if q.dims is None or k.dims is None or v.dims is None:
        # (TVM's inference needs every shape: it fails on an unknown one)
        return TensorStructInfo(None, q.dtype, 4, q.vdevice)
    batch, queries, heads, head_dim = q.dims

    def same(a: Any, b: Any, what: str) -> None:
        if prove_not_equal(a, b):
            raise info.fail(f"the {what} differ: {fmt_dim(a)} and {fmt_dim(b)}")

    same(batch, k.dims[0], "batch sizes of the query and the key")
    same(batch, v.dims[0], "batch sizes of the query and the value")
    for name, t in (("key", k), ("value", v)):
        h, kh = int_of(heads), int_of(t.dims[2])
        if h is not None and kh is not None and (kh == 0 or h % kh):
            raise info.fail(f"the query's {h} heads are not a multiple of the {name}'s {kh}")
    same(k.dims[1], v.dims[1], "sequence lengths of the key and the value")
    same(head_dim, k.dims[3], "head dimensions of the query and the key")
    if bias is not None and bias.dims is not None:
        for want, got, what in ((batch, bias.dims[0], "batch size"), (heads, bias.dims[1], "number of heads"),
                                (queries, bias.dims[2], "query length")):
            if prove_not_equal(want, got) and int_of(got) != 1:
                raise info.fail(f"the bias' {what} {fmt_dim(got)} is neither the query's {fmt_dim(want)} nor 1")
        same(k.dims[1], bias.dims[3], "sequence lengths of the key and the bias")
    return make_tensor((batch, queries, heads, v.dims[3]), q.dtype, vdevice=q.vdevice)


_ATTRS = (Attr("scale", None, ATTR_PRIM), Attr("causal_mask", None, ATTR_STR), Attr("window_size", None, ATTR_INT))
register("nn.attention", ("query", "key", "value", "bias"), _infer_attention, _ATTRS, min_args=3,
         prepare=_prepare_attention, redirect=lambda args: "nn.attention_bias" if len(args) == 4 else None)
register("nn.attention_bias", ("query", "key", "value", "bias"), _infer_attention, _ATTRS,
         prepare=_prepare_attention)


def _prepare_var_len(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """TVM's Python order (queries, keys, values, seqstart_q, max_seqlen_q, seqstart_k,
    max_seqlen_k; the key ones default to the query ones) stored in its operator's order
    (..., seqstart_q, seqstart_k, max_seqlen_q, max_seqlen_k). TVM prints the stored order, so
    its printed text does not read back as itself; tvms does as TVM does."""
    q, k, v, seqstart_q, max_q, *rest = args
    seqstart_k = rest[0] if rest else seqstart_q
    max_k = rest[1] if len(rest) > 1 else max_q
    return _prepare_attention(spec, (q, k, v, seqstart_q, seqstart_k, max_q, max_k), attrs)


register("nn.attention_var_len", ("queries", "keys", "values", "seqstart_q", "max_seqlen_q", "seqstart_k",
                                  "max_seqlen_k"), _infer_attention, _ATTRS, min_args=5, prepare=_prepare_var_len)
