"""LegalizeOps for conv2d on channel-blocked data: ``NCHW16c`` holds the 16 channels of a pixel side
by side (``x[n, c // 16, h, w, c % 16]``), so a kernel whose vectors run along the output channels
stores them whole, with no transposition on the way out (onnxruntime's convolutions run on such
data on x86, and so do TVM's x86 schedules). The computation is topi's ``conv2d_NCHWc``: one
reduction over every input channel ``ic`` (read at ``ic // bi, ..., ic % bi``) and the window.

Layouts taken: data ``NCHW{bi}c`` with kernel ``OIHW{bi}i{bo}o``, or plain ``NCHW`` data (a first
layer's three channels) with kernel ``OIHW{bo}o``; the output ``NCHW{bo}c``; groups of one.
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import FloorDiv, FloorMod, PrimExpr
from ...ir.relax_infer import int_of
from .. import te
from .legalize import _NotLegalized, call_te
from .legalize_manip import _i64 as i64, _out_dims, _pad as pad, _window_index as window_index, cast_to, channel_block


def blocked_conv2d(bb: Any, call: rx.Call) -> rx.Call:
    """The legalized conv2d of ``call``, whose output layout is blocked."""
    a = call.attrs
    out_block = channel_block(a["out_layout"])
    in_block = channel_block(a["data_layout"])
    if a["data_layout"] != "NCHW" and in_block is None or a["groups"] != 1:
        raise _NotLegalized
    kernel_layout = f"OIHW{in_block}i{out_block}o" if in_block else f"OIHW{out_block}o"
    if a["kernel_layout"] != kernel_layout:
        raise _NotLegalized
    strides, dilation, padding = a["strides"], a["dilation"], a["padding"]
    out_shape = _out_dims(call)
    cast = cast_to(str(call.struct_info.dtype))

    def conv(data: te.Tensor, kernel: te.Tensor) -> te.Tensor:
        channels = int_of(data.shape[1])
        if channels is None:
            raise _NotLegalized
        channels *= in_block or 1
        spatial_pad = [0, 0, padding[0], padding[1]] + ([0] if in_block else [])
        spatial_tail = [0, 0, padding[2], padding[3]] + ([0] if in_block else [])
        padded = pad(data, spatial_pad, spatial_tail, te.const(0, str(data.dtype)), "i", True)
        ic = te.reduce_axis((0, i64(channels)), name="ic")
        kh = te.reduce_axis((0, kernel.shape[2]), name="kh")
        kw = te.reduce_axis((0, kernel.shape[3]), name="kw")

        def body(n: Any, chunk: Any, oh: Any, ow: Any, lane: Any) -> PrimExpr:
            y = window_index(oh, strides[0], kh.var, dilation[0])
            x = window_index(ow, strides[1], kw.var, dilation[1])
            if in_block:
                outer, inner = FloorDiv(ic.var, i64(in_block)), FloorMod(ic.var, i64(in_block))
                value, weight = padded[n, outer, y, x, inner], kernel[chunk, outer, kh.var, kw.var, inner, lane]
            else:
                value, weight = padded[n, ic.var, y, x], kernel[chunk, ic.var, kh.var, kw.var, lane]
            return te.sum(cast(value) * cast(weight), axis=[ic, kh, kw])

        return te.compute(out_shape, body, name="conv2d_NCHWc", tag="conv2d_NCHWc",
                          varargs_names=["n", "oc_chunk", "oh", "ow", "oc_block"])

    return call_te(bb, conv, call.args[0], call.args[1], primfunc_name_hint="conv2d_NCHWc")


__all__ = ["blocked_conv2d"]
