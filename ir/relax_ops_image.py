"""Relax image operators: image.resize2d / resize3d (the spatial dimensions of the layout take the
new size), image.grid_sample and image.affine_grid, registered when ``relax_ops`` imports this
module."""
from __future__ import annotations

from .dtype import DataType
from .expr import FloatImm, IntImm, PrimExpr
from .relax import ShapeExpr
from .relax_infer import (INT64, as_shape_expr, describe, int_of, make_tensor, prepare_shape_arg, shape_arg,
                          tensor_arg, to_dim)
from .relax_op import ATTR_ANY, ATTR_BOOL, ATTR_DTYPE, ATTR_FLOAT, ATTR_INT, ATTR_STR, Attr, CallInfo, OpSpec, register
from .relax_ops_nn import check_rank, from_canonical, parse_layout, to_canonical
from .struct_info import StructInfo, TensorStructInfo

_F32 = DataType("float32")


def _prepare_resize(spatial: int):
    """TVM's constructor: ``size`` as a shape (one value for every spatial axis), ``roi`` as
    float32 values (zeros when not given)."""
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        args = list(args)
        size = args[1]
        if isinstance(size, (int, PrimExpr)) and not isinstance(size, bool):
            size = (size,)
        size = as_shape_expr(size)
        if isinstance(size, ShapeExpr) and len(size.values) == 1:
            size = as_shape_expr(tuple(size.values) * spatial)
        args[1] = size
        roi = attrs["roi"]
        roi = (0.0,) * (2 * spatial) if roi is None else (roi,) * (2 * spatial) if isinstance(roi, float) else roi
        attrs["roi"] = tuple(v if isinstance(v, FloatImm) else FloatImm(_F32, float(v)) for v in roi)
        return args, attrs
    return prepare


def _resize_infer(target: str):
    def infer(info: CallInfo) -> StructInfo:
        data, size = tensor_arg(info, 0), shape_arg(info, 1)
        spatial = len(target) - 2
        if size.ndim != spatial:
            raise info.fail(f"the output size must be a {spatial}-d shape, got {size.ndim} dimensions")
        layout = info.attrs["layout"]
        tokens = parse_layout(info, layout, target, "data")
        check_rank(info, data, layout, tokens, "data")
        dtype = info.attrs["out_dtype"] or data.dtype
        values = getattr(info.args[1], "values", None)  # (only a size written out counts)
        if data.dims is None or values is None:
            return TensorStructInfo(None, dtype, len(tokens), data.vdevice)
        dims = to_canonical(data.dims, tokens, target)
        dims[2:] = [to_dim(v) for v in values]
        return make_tensor(from_canonical(dims, tokens, target), dtype, vdevice=data.vdevice)
    return infer


for _name, _target, _rounding in (("image.resize2d", "NCHW", "round"), ("image.resize3d", "NCDHW", "")):
    register(_name, ("data", "size"), _resize_infer(_target),
             (Attr("roi", None, ATTR_ANY), Attr("layout", _target, ATTR_STR), Attr("method", "linear", ATTR_STR),
              Attr("coordinate_transformation_mode", "half_pixel", ATTR_STR),
              Attr("rounding_method", _rounding, ATTR_STR), Attr("cubic_alpha", -0.75, ATTR_FLOAT),
              Attr("cubic_exclude", 0, ATTR_INT), Attr("extrapolation_value", 0.0, ATTR_FLOAT),
              Attr("out_dtype", None, ATTR_DTYPE)),
             prepare=_prepare_resize(len(_target) - 2))


def _infer_grid_sample(info: CallInfo) -> StructInfo:
    """The data resampled at the grid's points: the spatial sizes of the grid (N, 2, H, W)."""
    data, grid = tensor_arg(info, 0), tensor_arg(info, 1)
    layout = info.attrs["layout"]
    target = "NCDHW" if layout == "NCDHW" else "NCHW"
    tokens = parse_layout(info, layout, target, "data")
    check_rank(info, data, layout, tokens, "data")
    if data.dims is None or grid.dims is None:
        return TensorStructInfo(None, data.dtype, len(tokens), data.vdevice)
    dims = to_canonical(data.dims, tokens, target)
    dims[2:] = grid.dims[2:len(target)]
    return make_tensor(from_canonical(dims, tokens, target), data.dtype, vdevice=data.vdevice)


register("image.grid_sample", ("data", "grid"), _infer_grid_sample,
         (Attr("method", "bilinear", ATTR_STR), Attr("layout", "NCHW", ATTR_STR),
          Attr("padding_mode", "zeros", ATTR_STR), Attr("align_corners", False, ATTR_BOOL)))


def _infer_affine_grid(info: CallInfo) -> StructInfo:
    """A sampling grid (N, spatial, *size) from (N, spatial, spatial + 1) affine matrices."""
    data, size = tensor_arg(info, 0), shape_arg(info, 1)
    spatial = size.ndim
    if spatial not in (2, 3):
        raise info.fail(f"the target size must be a 2-d or 3-d shape, got {spatial} dimensions")
    if data.ndim not in (-1, 3):
        raise info.fail(f"the affine matrices must be 3-d (batch, {spatial}, {spatial + 1}), got {describe(data)}")
    if data.dims is not None:
        for k, want in ((1, spatial), (2, spatial + 1)):
            if int_of(data.dims[k]) not in (None, want):
                raise info.fail(f"dimension {k} of the affine matrices must be {want}, got {describe(data)}")
    values = getattr(info.args[1], "values", None)
    if data.dims is None or values is None:
        return TensorStructInfo(None, data.dtype, spatial + 2, data.vdevice)
    return make_tensor((data.dims[0], IntImm(INT64, spatial)) + tuple(values), data.dtype, vdevice=data.vdevice)


register("image.affine_grid", ("data", "size"), _infer_affine_grid, (Attr("align_corners", True, ATTR_BOOL),),
         prepare=prepare_shape_arg(1))
