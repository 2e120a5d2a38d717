"""Relax vision operators, registered when ``relax_ops`` imports this module: vision.roi_align and
vision.roi_pool (pooling over regions of interest: rows ``[batch index, x0, y0, x1, y1]``), and the
box selection of detection models (get_valid_counts, non_max_suppression,
all_class_non_max_suppression, multibox_transform_loc)."""
from __future__ import annotations

from .dtype import DataType
from .expr import IntImm
from .relax_infer import INT64, describe, dim_mul, int_of, make_tensor, prove_equal, tensor_arg
from .relax_op import ATTR_ANY, ATTR_BOOL, ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo, OpSpec, register
from .struct_info import VOID, StructInfo, TensorStructInfo, TupleStructInfo


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


# ---------------------------------------------------------------- box selection
_I32 = DataType("int32")


def _boxes_data(info: CallInfo) -> TensorStructInfo:
    data = tensor_arg(info, 0)
    if data.ndim not in (-1, 3):
        raise info.fail(f"the boxes must be 3-d (batch, anchors, element), got {describe(data)}")
    return data


def _check_indices(info: CallInfo, data: TensorStructInfo, **fields: int) -> None:
    """Each attribute of ``fields`` (its least value) indexes into an element of known length."""
    length = int_of(data.dims[2]) if data.dims is not None else None
    if length is None:
        return
    for name, low in fields.items():
        value = info.attrs[name]
        top = length - 3 if name == "coord_start" else length  # (four coordinates from there)
        if not low <= value < top:
            raise info.fail(f"{name} {value} is out of range for elements of length {length}")


def _infer_get_valid_counts(info: CallInfo) -> StructInfo:
    """(valid count per batch, the boxes with the valid ones first, their original indices)."""
    data = _boxes_data(info)
    if data.dims is None:
        return TupleStructInfo((TensorStructInfo(None, _I32, 1, data.vdevice),
                                TensorStructInfo(None, data.dtype, 3, data.vdevice),
                                TensorStructInfo(None, _I32, 2, data.vdevice)))
    _check_indices(info, data, score_index=0, id_index=-1)
    batch, anchors, _ = data.dims
    return TupleStructInfo((make_tensor((batch,), _I32, vdevice=data.vdevice),
                            make_tensor(data.dims, data.dtype, vdevice=data.vdevice),
                            make_tensor((batch, anchors), _I32, vdevice=data.vdevice)))


register("vision.get_valid_counts", ("data",), _infer_get_valid_counts,
         (Attr("score_threshold", 0.0, ATTR_FLOAT), Attr("id_index", 0, ATTR_INT), Attr("score_index", 1, ATTR_INT)))


def _infer_nms(info: CallInfo) -> StructInfo:
    """The boxes kept, or with return_indices their indices and count (and, for soft-NMS, the
    rescored boxes first)."""
    data, count, indices = _boxes_data(info), tensor_arg(info, 1), tensor_arg(info, 2)
    for what, s, ndim in (("valid count", count, 1), ("indices", indices, 2)):
        if s.ndim not in (-1, ndim):
            raise info.fail(f"the {what} must be {ndim}-d, got {describe(s)}")
        if s.dtype != VOID and s.dtype != _I32:
            raise info.fail(f"the {what} must be int32, got {describe(s)}")
    if data.dims is not None:
        batch, anchors, _ = data.dims
        if count.dims is not None and not prove_equal(count.dims[0], batch) or indices.dims is not None \
                and not (prove_equal(indices.dims[0], batch) and prove_equal(indices.dims[1], anchors)):
            raise info.fail(f"the valid count and the indices must have shapes (batch,) and (batch, "
                            f"anchors) of the boxes {describe(data)}, got {describe(count)} and {describe(indices)}")
        _check_indices(info, data, score_index=0, coord_start=0, id_index=-1)
    boxes = make_tensor(data.dims, data.dtype, vdevice=data.vdevice) if data.dims is not None \
        else TensorStructInfo(None, data.dtype, 3, data.vdevice)
    if not info.attrs["return_indices"]:
        return boxes
    if data.dims is None:
        fields = (TensorStructInfo(None, _I32, 2, data.vdevice),) * 2
    else:
        fields = (make_tensor(data.dims[:2], _I32, vdevice=data.vdevice),
                  make_tensor((data.dims[0], IntImm(INT64, 1)), _I32, vdevice=data.vdevice))
    return TupleStructInfo(((boxes,) if info.attrs["soft_nms_sigma"] > 0 else ()) + fields)


register("vision.non_max_suppression", ("data", "valid_count", "indices"), _infer_nms,
         (Attr("max_output_size", -1, ATTR_INT), Attr("iou_threshold", 0.5, ATTR_FLOAT),
          Attr("force_suppress", False, ATTR_BOOL), Attr("top_k", -1, ATTR_INT), Attr("coord_start", 2, ATTR_INT),
          Attr("score_index", 1, ATTR_INT), Attr("id_index", 0, ATTR_INT), Attr("return_indices", True, ATTR_BOOL),
          Attr("invalid_to_bottom", False, ATTR_BOOL), Attr("soft_nms_sigma", 0.0, ATTR_FLOAT),
          Attr("score_threshold", 0.0, ATTR_FLOAT)))


def _infer_all_class_nms(info: CallInfo) -> StructInfo:
    """ONNX: (selected (batch, class, box) rows, their count); otherwise per batch the
    (class, box) pairs, their scores and their count."""
    boxes, scores = tensor_arg(info, 0), tensor_arg(info, 1)
    for what, s in (("boxes", boxes), ("scores", scores)):
        if s.dims is None or s.ndim != 3:
            raise info.fail(f"the {what} must be 3-d with a known shape, got {describe(s)}")
    batch, anchors, classes = boxes.dims[0], boxes.dims[1], scores.dims[1]
    v = boxes.vdevice
    if info.attrs["output_format"] == "onnx":
        total = dim_mul(dim_mul(batch, classes), anchors)
        return TupleStructInfo((make_tensor((total, 3), INT64, vdevice=v), make_tensor((1,), INT64, vdevice=v)))
    per_batch = dim_mul(classes, anchors)
    return TupleStructInfo((make_tensor((batch, per_batch, 2), INT64, vdevice=v),
                            make_tensor((batch, per_batch), DataType("float32"), vdevice=v),
                            make_tensor((batch,), INT64, vdevice=v)))


register("vision.all_class_non_max_suppression",
         ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
         _infer_all_class_nms, (Attr("output_format", "onnx", ATTR_STR),))


def _infer_multibox_transform_loc(info: CallInfo) -> StructInfo:
    """(decoded boxes (batch, anchors, 4), class scores (batch, classes, anchors))."""
    cls, loc, anchor = (tensor_arg(info, i) for i in range(3))
    for what, s, ndim in (("class predictions", cls, 3), ("location predictions", loc, 2), ("anchors", anchor, 3)):
        if s.ndim not in (-1, ndim):
            raise info.fail(f"the {what} must be {ndim}-d, got {describe(s)}")
    for s in (loc, anchor):
        if VOID not in (cls.dtype, s.dtype) and cls.dtype != s.dtype:
            raise info.fail(f"the inputs must share a dtype, got {cls.dtype} and {s.dtype}")
    n = int_of(cls.dims[2]) if cls.dims is not None else None
    if loc.dims is not None and int_of(loc.dims[1]) is not None and (
            int_of(loc.dims[1]) % 4 or n is not None and int_of(loc.dims[1]) != 4 * n):
        raise info.fail(f"the location predictions must hold 4 values per anchor, got {describe(loc)}")
    if anchor.dims is not None and (int_of(anchor.dims[0]) not in (None, 1) or int_of(anchor.dims[2]) not in (None, 4)
                                    or n is not None and int_of(anchor.dims[1]) not in (None, n)):
        raise info.fail(f"the anchors must have shape (1, anchors, 4), got {describe(anchor)}")
    if cls.dims is None:
        return TupleStructInfo((TensorStructInfo(None, cls.dtype, 3, cls.vdevice),) * 2)
    batch, classes, anchors = cls.dims
    return TupleStructInfo((make_tensor((batch, anchors, IntImm(INT64, 4)), cls.dtype, vdevice=cls.vdevice),
                            make_tensor(cls.dims, cls.dtype, vdevice=cls.vdevice)))


def _prepare_variances(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    attrs["variances"] = tuple(float(v) for v in attrs["variances"])
    return args, attrs


register("vision.multibox_transform_loc", ("cls_pred", "loc_pred", "anchor"), _infer_multibox_transform_loc,
         (Attr("clip", False, ATTR_BOOL), Attr("threshold", 0.0, ATTR_FLOAT),
          Attr("variances", (1.0, 1.0, 1.0, 1.0), ATTR_ANY), Attr("keep_background", True, ATTR_BOOL),
          Attr("apply_softmax", True, ATTR_BOOL)),
         prepare=_prepare_variances)
