"""Relax vision operators vision.roi_align and vision.roi_pool (pooling over regions of
interest: rows ``[batch index, x0, y0, x1, y1]``), registered when ``relax_ops`` imports this
module."""
from __future__ import annotations

from .expr import IntImm
from .relax_infer import INT64, describe, int_of, make_tensor, tensor_arg
from .relax_op import ATTR_BOOL, ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo, OpSpec, register
from .struct_info import StructInfo, TensorStructInfo


def _prepare_pooled(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    """One pooled size is both (TVM's ``pooled_size=2`` is ``[2, 2]``)."""
    if attrs["pooled_size"] is not None and len(attrs["pooled_size"]) == 1:
        attrs["pooled_size"] = attrs["pooled_size"] * 2
    return args, attrs


def _roi_infer(layouts: tuple):
    def infer(info: CallInfo) -> StructInfo:
        data, rois = tensor_arg(info, 0), tensor_arg(info, 1)
        if data.ndim not in (-1, 4):
            raise info.fail(f"the data must be 4-d, got {describe(data)}")
        if rois.ndim not in (-1, 2):
            raise info.fail(f"the regions must be 2-d (count, 5), got {describe(rois)}")
        layout = info.attrs["layout"]
        if layout not in layouts:
            raise info.fail(f"the layout must be {' or '.join(layouts)}, got {layout!r}")
        if info.attrs.get("mode", "avg") not in ("avg", "max"):
            raise info.fail(f"the mode must be \"avg\" or \"max\", got {info.attrs['mode']!r}")
        if rois.dims is not None and int_of(rois.dims[1]) not in (None, 5):
            raise info.fail(f"the regions must have shape (count, 5), got {describe(rois)}")
        if data.dims is None or rois.dims is None:
            return TensorStructInfo(None, data.dtype, 4, data.vdevice)
        ph, pw = (IntImm(INT64, v) for v in info.attrs["pooled_size"])
        if layout == "NCHW":
            dims = (rois.dims[0], data.dims[1], ph, pw)
        else:
            dims = (rois.dims[0], ph, pw, data.dims[3])
        return make_tensor(dims, data.dtype, vdevice=data.vdevice)
    return infer


register("vision.roi_align", ("data", "rois"), _roi_infer(("NCHW", "NHWC")),
         (Attr("pooled_size", None, ATTR_INTS, required=True), Attr("spatial_scale", None, ATTR_FLOAT, required=True),
          Attr("sample_ratio", -1, ATTR_INT), Attr("aligned", False, ATTR_BOOL), Attr("layout", "NCHW", ATTR_STR),
          Attr("mode", "avg", ATTR_STR)),
         prepare=_prepare_pooled)
register("vision.roi_pool", ("data", "rois"), _roi_infer(("NCHW",)),
         (Attr("pooled_size", None, ATTR_INTS, required=True), Attr("spatial_scale", None, ATTR_FLOAT, required=True),
          Attr("layout", "NCHW", ATTR_STR)),
         prepare=_prepare_pooled)
