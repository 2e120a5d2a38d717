"""Relax neural-network operators: nn.softmax, nn.log_softmax, nn.layer_norm, nn.rms_norm, and
the window operators in 1, 2 and 3 spatial dimensions: nn.conv1d/2d/3d, their transposes,
nn.max_pool*, nn.avg_pool*, nn.adaptive_avg_pool*. (The others are in ``relax_ops_nn_misc`` and
``relax_ops_attention``; the elementwise nn.relu / nn.gelu / nn.silu are with the elementwise
operators in ``relax_ops``.)"""
from __future__ import annotations

from typing import Any

from .expr import EQ, LE, Call, FloorMod, IntImm, PrimExpr
from .op import get_op
from .relax_infer import (INT64, binary_dtype, describe, dim_add, dim_ceildiv, dim_floordiv,
                          dim_mul, dim_sub, fmt_dim, fmt_dims, int_of, make_tensor, normalize_axes,
                          normalize_axis, op_error, prove_equal, prove_not_equal, require_float,
                          simplify_dim, tensor_arg, tensor_args, unknown_like)
from .relax_op import (ATTR_BOOL, ATTR_DTYPE, ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STR, Attr,
                       CallInfo, OpSpec, register)
from .struct_info import StructInfo, TensorStructInfo


# ---------------------------------------------------------------- softmax
def _infer_softmax(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    if x.ndim < 0:
        return x
    require_float(info, x)
    normalize_axis(info, info.attrs["axis"], x.ndim)
    return x


for _name in ("nn.softmax", "nn.log_softmax"):
    register(_name, ("data",), _infer_softmax, (Attr("axis", -1, ATTR_INT),))


# ---------------------------------------------------------------- normalization
def norm_params_unknown(info: CallInfo, axes: tuple) -> bool:
    """TVM's checks of a normalization's parameters (gamma, beta, moving mean, ...): each has
    one dimension per normalized axis, of the data's sizes there, and the data's dtype. True when
    some size cannot be proven equal (the result's shape is then unknown)."""
    ts = tensor_args(info)
    x, params = ts[0], ts[1:]
    norm = normalize_axes(info, axes, x.ndim) if x.ndim >= 0 else []
    require_float(info, x, "the data")
    for name, p in zip(info.spec.args[1:], params):
        if p.dtype != x.dtype:
            raise info.fail(f"{name} must have the data's dtype {x.dtype}, got {describe(p)}")
        if p.ndim != len(axes):
            raise info.fail(f"{name} must have one dimension per axis in {list(axes)}, "
                            f"got {describe(p)}")
    lengths = []
    if x.dims is not None:
        lengths.append(tuple(x.dims[a] for a in norm))
    lengths += [p.dims for p in params if p.dims is not None]
    for other in lengths[1:]:
        for d0, d in zip(lengths[0], other):
            if prove_not_equal(d0, d):
                raise info.fail(f"the data has sizes {fmt_dims(lengths[0])} on the axes {list(axes)}, "
                                f"but a scale or offset tensor has {fmt_dims(other)}")
            if not prove_equal(d0, d):
                return True
    return False


def _infer_norm(info: CallInfo) -> StructInfo:
    """layer_norm / rms_norm: the result is the data's struct info."""
    x = tensor_arg(info, 0)
    return unknown_like(x) if norm_params_unknown(info, info.attrs["axes"]) else x


register("nn.layer_norm", ("data", "gamma", "beta"), _infer_norm,
         (Attr("axes", None, ATTR_INTS, required=True), Attr("epsilon", 1e-5, ATTR_FLOAT),
          Attr("center", True, ATTR_BOOL), Attr("scale", True, ATTR_BOOL)))
register("nn.rms_norm", ("data", "weight"), _infer_norm,
         (Attr("axes", (-1,), ATTR_INTS), Attr("epsilon", 1e-5, ATTR_FLOAT)))


# ---------------------------------------------------------------- layouts
def layout_tokens(layout: str) -> list | None:
    """A layout such as ``NHWC`` or ``NCHW4c`` as ``[(axis, factor)]``: an upper-case letter is an
    axis (factor None), a lower-case letter after a factor a split of that axis; None when the
    text is not of that form."""
    tokens, digits = [], ""
    for ch in layout or "":
        if ch.isdigit():
            digits += ch
        elif ch.isupper() and not digits:
            tokens.append((ch, None))
        elif ch.islower() and digits and int(digits) > 0:
            tokens.append((ch, int(digits)))
            digits = ""
        else:
            return None
    return None if digits else tokens


def parse_layout(info: CallInfo, layout: str, target: str, what: str) -> list:
    """``layout_tokens`` of a layout of the axes of ``target`` (in any order, lower-case letters
    splitting some of them); an error naming the operator otherwise."""
    tokens = layout_tokens(layout) or []
    primal = [a for a, f in tokens if f is None]
    split = [a.upper() for a, f in tokens if f is not None]
    if sorted(primal) != sorted(target) or len(set(split)) != len(split) or not set(split) <= set(target):
        raise info.fail(f"the {what} layout {layout!r} is not a layout of {target} "
                        f"(an ordering such as {target[0] + target[2:] + target[1]}, optionally with "
                        f"split axes such as {target}4{target[1].lower()})")
    return tokens


def to_canonical(dims: tuple, layout: list, target: str) -> list:
    """The dimensions in ``target`` order (``NCHW``): a split axis is outer * inner."""
    out = []
    for axis in target:
        d = dims[layout.index((axis, None))]
        for j, (a, f) in enumerate(layout):
            if f is not None and a == axis.lower():
                d = dim_mul(d, dims[j])
        out.append(d)
    return out


def from_canonical(dims: list, layout: list, target: str) -> list:
    out = []
    for a, f in layout:
        if f is not None:
            out.append(IntImm(dims[0].dtype if isinstance(dims[0], PrimExpr) else INT64, f))
            continue
        d = dims[target.index(a)]
        for b, g in layout:
            if g is not None and b == a.lower():
                d = dim_ceildiv(d, g)
        out.append(d)
    return out


def check_rank(info: CallInfo, s: TensorStructInfo, layout: str, tokens: list, what: str) -> None:
    if s.ndim >= 0 and s.ndim != len(tokens):
        raise info.fail(f"the {what} layout {layout} needs a {len(tokens)}-d tensor, got {describe(s)}")


# The spatial axes of the 1-d, 2-d and 3-d operators, in their canonical layouts.
SPATIAL = {1: "W", 2: "HW", 3: "DHW"}
_N_SPATIAL: dict[str, int] = {}  # script name -> number of spatial axes (conv2d: 2)


def _n_spatial(info: CallInfo) -> int:
    return _N_SPATIAL[info.spec.script_name]
# The sides that a padding of 1, n or 2n values gives (before all axes, then after all axes)
_PAD_SIDES = {1: "left, right", 2: "top, left, bottom, right", 3: "front, top, left, back, bottom, right"}


def _ntuple(spec: OpSpec, attrs: dict, name: str, n: int) -> None:
    """An attribute of one value per spatial axis; a single value is repeated."""
    value = attrs[name]
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise op_error(spec, f"{name} must have {'1 value' if n == 1 else f'1 or {n} values'}, got {list(value)}")
    attrs[name] = value


def _padding(spec: OpSpec, attrs: dict, n: int, name: str = "padding") -> None:
    """The padding before and after each spatial axis: one value for all sides, one per axis
    (both sides), or all 2n (TVM's GetCompletePadding1D/2D/3D)."""
    p = attrs[name]
    if len(p) == 1:
        p = p * (2 * n)
    elif len(p) == n and n > 1:
        p = p + p
    elif len(p) != 2 * n:
        counts = "1 or 2" if n == 1 else f"1, {n} or {2 * n}"
        raise op_error(spec, f"{name} must have {counts} values ({_PAD_SIDES[n]}), got {list(p)}")
    attrs[name] = p


def window_size(extent: PrimExpr, pad: int, window: PrimExpr, dilation: int, stride: int,
                ceil_mode: bool = False, pad_before: int = 0) -> PrimExpr:
    """``(extent + pad - dilation * (window - 1) - 1) // stride + 1``, folded. In ceil mode the
    division rounds up, but a last window that would start in the back padding is dropped."""
    numerator = dim_sub(dim_sub(dim_add(extent, pad), dim_mul(dilation, dim_sub(window, 1))), 1)
    if not ceil_mode:
        return simplify_dim(dim_add(dim_floordiv(numerator, stride), 1))
    numerator = simplify_dim(dim_add(numerator, stride - 1))
    windows = simplify_dim(dim_floordiv(numerator, stride))
    # the last window is dropped when numerator % stride <= slack
    slack = int_of(simplify_dim(dim_sub(numerator, dim_add(extent, pad_before))))
    if int_of(numerator) is not None:
        drop = int_of(numerator) % stride <= slack
    elif slack is not None and (slack < 0 or slack >= stride - 1):
        drop = slack >= 0
    else:
        rem = FloorMod(numerator, IntImm(numerator.dtype, stride))
        bound = IntImm(numerator.dtype, slack)
        cond = EQ(rem, bound) if slack == 0 else LE(rem, bound)
        return Call(numerator.dtype, get_op("tir.if_then_else"),
                    (cond, windows, simplify_dim(dim_add(windows, 1))))
    return windows if drop else simplify_dim(dim_add(windows, 1))


# ---------------------------------------------------------------- convolutions
def _prepare_conv(n: int, transpose: bool = False):
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        for name in ("strides", "dilation") + (("output_padding",) if transpose else ()):
            _ntuple(spec, attrs, name, n)
        _padding(spec, attrs, n)
        if attrs["groups"] <= 0:
            raise op_error(spec, f"groups must be positive, got {attrs['groups']}")
        if attrs["out_layout"] is None:
            attrs["out_layout"] = attrs["data_layout"]
        return args, attrs
    return prepare


def _conv_shapes(info: CallInfo, kernel: str) -> tuple:
    """A convolution's layouts checked against its tensors: the data's and the kernel's
    dimensions in canonical order (NC..., OI... or IO...; None when unknown), the output layout
    and the result's dtype."""
    data, weight = tensor_args(info)
    a, n = info.attrs, _n_spatial(info)
    d_layout = parse_layout(info, a["data_layout"], "NC" + SPATIAL[n], "data")
    w_layout = parse_layout(info, a["kernel_layout"], kernel + SPATIAL[n], "kernel")
    o_layout = parse_layout(info, a["out_layout"], "NC" + SPATIAL[n], "output")
    check_rank(info, data, a["data_layout"], d_layout, "data")
    check_rank(info, weight, a["kernel_layout"], w_layout, "kernel")
    dtype = a["out_dtype"] if a["out_dtype"] is not None else binary_dtype(info, data, weight)
    if data.dims is None or weight.dims is None:
        return None, None, o_layout, dtype
    return (to_canonical(data.dims, d_layout, "NC" + SPATIAL[n]),
            to_canonical(weight.dims, w_layout, kernel + SPATIAL[n]), o_layout, dtype)


def _conv_result(info: CallInfo, out: list, o_layout: list, dtype: Any) -> StructInfo:
    return make_tensor(from_canonical(out, o_layout, "NC" + SPATIAL[_n_spatial(info)]), dtype,
                       vdevice=info.sinfo[0].vdevice)


def _infer_conv(info: CallInfo) -> StructInfo:
    d, w, o_layout, dtype = _conv_shapes(info, "OI")
    if d is None:
        return TensorStructInfo(None, dtype, len(o_layout))
    (batch, c, *extents), (o, i, *kernel) = d, w
    a, n, groups = info.attrs, _n_spatial(info), info.attrs["groups"]
    if prove_not_equal(c, dim_mul(i, groups)):
        raise info.fail(f"the data has {fmt_dim(c)} channels, but the kernel takes {fmt_dim(i)} input "
                        f"channels in each of {groups} group{'s' if groups != 1 else ''} "
                        f"(data {fmt_dims(info.sinfo[0].dims)}, kernel {fmt_dims(info.sinfo[1].dims)})")
    if int_of(o) is not None and int_of(o) % groups:
        raise info.fail(f"the {int_of(o)} output channels do not divide into {groups} groups")
    pad = a["padding"]
    out = [batch, o] + [window_size(e, pad[j] + pad[j + n], k, a["dilation"][j], a["strides"][j])
                        for j, (e, k) in enumerate(zip(extents, kernel))]
    return _conv_result(info, out, o_layout, dtype)


def _infer_conv_transpose(info: CallInfo) -> StructInfo:
    """The gradient of a convolution: each spatial size is
    ``(in - 1) * stride - padding + dilation * (kernel - 1) + output_padding + 1``."""
    d, w, o_layout, dtype = _conv_shapes(info, "IO")
    if d is None:
        return TensorStructInfo(None, dtype, len(o_layout))
    (batch, c, *extents), (i, o, *kernel) = d, w
    a, n, groups = info.attrs, _n_spatial(info), info.attrs["groups"]
    if prove_not_equal(c, i):
        raise info.fail(f"the data has {fmt_dim(c)} channels, but the kernel takes {fmt_dim(i)} "
                        f"(data {fmt_dims(info.sinfo[0].dims)}, kernel {fmt_dims(info.sinfo[1].dims)})")
    if int_of(i) is not None and int_of(i) % groups:
        raise info.fail(f"the {int_of(i)} input channels do not divide into {groups} groups")
    if any(p >= s for p, s in zip(a["output_padding"], a["strides"])):
        raise info.fail(f"output_padding {list(a['output_padding'])} must be less than the strides "
                        f"{list(a['strides'])}")
    pad = a["padding"]
    out = [batch, dim_mul(o, groups)]
    for j, (e, k) in enumerate(zip(extents, kernel)):
        size = dim_sub(dim_mul(dim_sub(e, 1), a["strides"][j]), pad[j] + pad[j + n])
        size = dim_add(dim_add(size, dim_mul(a["dilation"][j], dim_sub(k, 1))), a["output_padding"][j])
        out.append(simplify_dim(dim_add(size, 1)))
    return _conv_result(info, out, o_layout, dtype)


def _conv_attrs(n: int, kernel: str, transpose: bool) -> tuple:
    ones, zeros = (1,) * n, (0,) * n
    return (Attr("strides", ones, ATTR_INTS), Attr("padding", zeros * 2, ATTR_INTS),
            *((Attr("output_padding", zeros, ATTR_INTS),) if transpose else ()),
            Attr("dilation", ones, ATTR_INTS), Attr("groups", 1, ATTR_INT),
            Attr("data_layout", "NC" + SPATIAL[n], ATTR_STR), Attr("kernel_layout", kernel + SPATIAL[n], ATTR_STR),
            Attr("out_layout", None, ATTR_STR), Attr("out_dtype", None, ATTR_DTYPE))


for _n in SPATIAL:
    for _transpose in (False, True):
        _N_SPATIAL[f"nn.conv{_n}d{'_transpose' if _transpose else ''}"] = _n
        register(f"nn.conv{_n}d{'_transpose' if _transpose else ''}", ("data", "weight"),
                         _infer_conv_transpose if _transpose else _infer_conv,
                         _conv_attrs(_n, "IO" if _transpose else "OI", _transpose),
                         prepare=_prepare_conv(_n, _transpose))


# ---------------------------------------------------------------- pooling
def _prepare_pool(n: int):
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        for name in ("pool_size", "strides", "dilation"):
            _ntuple(spec, attrs, name, n)
        _padding(spec, attrs, n)
        if attrs["out_layout"] is None:
            attrs["out_layout"] = attrs["layout"]
        return args, attrs
    return prepare


def _pool_layouts(info: CallInfo) -> tuple:
    x = tensor_arg(info, 0)
    a = info.attrs
    target = "NC" + SPATIAL[_n_spatial(info)]
    d_layout = parse_layout(info, a["layout"], target, "data")
    o_layout = parse_layout(info, a["out_layout"], target, "output")
    check_rank(info, x, a["layout"], d_layout, "data")
    return x, d_layout, o_layout, target


def _infer_pool(info: CallInfo) -> StructInfo:
    x, d_layout, o_layout, target = _pool_layouts(info)
    a, n = info.attrs, _n_spatial(info)
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, len(o_layout), x.vdevice)
    batch, c, *extents = to_canonical(x.dims, d_layout, target)
    pad = a["padding"]
    out = [batch, c] + [window_size(e, pad[j] + pad[j + n], a["pool_size"][j], a["dilation"][j],
                                    a["strides"][j], a["ceil_mode"], pad[j])
                        for j, e in enumerate(extents)]
    return make_tensor(from_canonical(out, o_layout, target), x.dtype, vdevice=x.vdevice)


for _n in SPATIAL:
    for _kind in ("max", "avg"):
        # (TVM's Python functions count the padding in the 1-d and 3-d averages by default)
        _N_SPATIAL[f"nn.{_kind}_pool{_n}d"] = _n
        register(f"nn.{_kind}_pool{_n}d", ("data",), _infer_pool,
                         (Attr("pool_size", (1,) * _n, ATTR_INTS), Attr("strides", (1,) * _n, ATTR_INTS),
                          Attr("dilation", (1,) * _n, ATTR_INTS), Attr("padding", (0,) * (2 * _n), ATTR_INTS),
                          Attr("ceil_mode", False, ATTR_BOOL),
                          Attr("count_include_pad", _kind == "avg" and _n != 2, ATTR_BOOL),
                          Attr("layout", "NC" + SPATIAL[_n], ATTR_STR), Attr("out_layout", None, ATTR_STR)),
                         prepare=_prepare_pool(_n),
                         positional=("pool_size", "strides", "padding", "dilation", "ceil_mode",
                                     "count_include_pad", "layout", "out_layout"))


def _prepare_adaptive(n: int):
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        if attrs["output_size"] is not None:
            _ntuple(spec, attrs, "output_size", n)
        if attrs["out_layout"] is None:
            attrs["out_layout"] = attrs["layout"]
        return args, attrs
    return prepare


def _infer_adaptive_pool(info: CallInfo) -> StructInfo:
    """The spatial sizes become ``output_size``, or stay. (TVM makes them int32 constants, which
    its printer writes as it writes int64 sizes, and its parser reads back as int64.)"""
    x, d_layout, o_layout, target = _pool_layouts(info)
    a = info.attrs
    if x.dims is None:
        if x.shape is not None and a["out_layout"] == a["layout"] and a["output_size"] is None:
            return x
        return TensorStructInfo(None, x.dtype, len(o_layout), x.vdevice)
    out = to_canonical(x.dims, d_layout, target)
    if a["output_size"] is not None:
        out[2:] = [IntImm(INT64, s) for s in a["output_size"]]
    return make_tensor(from_canonical(out, o_layout, target), x.dtype, vdevice=x.vdevice)


for _n in SPATIAL:
    _N_SPATIAL[f"nn.adaptive_avg_pool{_n}d"] = _n
    register(f"nn.adaptive_avg_pool{_n}d", ("data",), _infer_adaptive_pool,
                     (Attr("output_size", None, ATTR_INTS), Attr("layout", "NC" + SPATIAL[_n], ATTR_STR),
                      Attr("out_layout", None, ATTR_STR)),
                     prepare=_prepare_adaptive(_n))

__all__ = ["parse_layout", "window_size", "norm_params_unknown", "SPATIAL"]
