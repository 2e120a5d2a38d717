"""Relax neural-network operators: nn.softmax, nn.log_softmax, nn.layer_norm, nn.rms_norm,
nn.conv2d, nn.max_pool2d, nn.avg_pool2d (the elementwise nn.relu / nn.gelu / nn.silu are with
the elementwise operators in ``relax_ops``)."""
from __future__ import annotations

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
def parse_layout(info: CallInfo, layout: str, target: str, what: str) -> list:
    """A layout such as ``NHWC`` or ``NCHW4c`` as ``[(axis, factor)]``: upper-case letters are
    the axes of ``target`` (in any order); a lower-case letter with a factor splits that axis."""
    tokens, digits = [], ""
    for ch in layout:
        if ch.isdigit():
            digits += ch
        elif ch.isupper() and not digits:
            tokens.append((ch, None))
        elif ch.islower() and digits and int(digits) > 0:
            tokens.append((ch, int(digits)))
            digits = ""
        else:
            tokens = []
            break
    primal = [a for a, f in tokens if f is None]
    split = [a.upper() for a, f in tokens if f is not None]
    if digits or sorted(primal) != sorted(target) or len(set(split)) != len(split) \
            or not set(split) <= set(target):
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


def _pair(spec: OpSpec, attrs: dict, name: str) -> None:
    value = attrs[name]
    if len(value) == 1:
        value = value * 2
    if len(value) != 2:
        raise op_error(spec, f"{name} must have 1 or 2 values, got {list(value)}")
    attrs[name] = value


def _padding(spec: OpSpec, attrs: dict) -> None:
    p = attrs["padding"]
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = p + p
    elif len(p) != 4:
        raise op_error(spec, f"padding must have 1, 2 or 4 values (top, left, bottom, right), "
                             f"got {list(p)}")
    attrs["padding"] = p


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


# ---------------------------------------------------------------- conv2d
def _prepare_conv2d(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    for name in ("strides", "dilation"):
        _pair(spec, attrs, name)
    _padding(spec, attrs)
    if attrs["groups"] <= 0:
        raise op_error(spec, f"groups must be positive, got {attrs['groups']}")
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["data_layout"]
    return args, attrs


def _infer_conv2d(info: CallInfo) -> StructInfo:
    data, weight = tensor_args(info)
    a = info.attrs
    d_layout = parse_layout(info, a["data_layout"], "NCHW", "data")
    w_layout = parse_layout(info, a["kernel_layout"], "OIHW", "kernel")
    o_layout = parse_layout(info, a["out_layout"], "NCHW", "output")
    check_rank(info, data, a["data_layout"], d_layout, "data")
    check_rank(info, weight, a["kernel_layout"], w_layout, "kernel")
    dtype = a["out_dtype"] if a["out_dtype"] is not None else binary_dtype(info, data, weight)
    if data.dims is None or weight.dims is None:
        return TensorStructInfo(None, dtype, len(o_layout))
    n, c, h, w = to_canonical(data.dims, d_layout, "NCHW")
    o, i, kh, kw = to_canonical(weight.dims, w_layout, "OIHW")
    groups = a["groups"]
    if prove_not_equal(c, dim_mul(i, groups)):
        raise info.fail(f"the data has {fmt_dim(c)} channels, but the kernel takes {fmt_dim(i)} input "
                        f"channels in each of {groups} group{'s' if groups != 1 else ''} "
                        f"(data {fmt_dims(data.dims)}, kernel {fmt_dims(weight.dims)})")
    if int_of(o) is not None and int_of(o) % groups:
        raise info.fail(f"the {int_of(o)} output channels do not divide into {groups} groups")
    (sh, sw), (dh, dw), pad = a["strides"], a["dilation"], a["padding"]
    out = [n, o, window_size(h, pad[0] + pad[2], kh, dh, sh),
           window_size(w, pad[1] + pad[3], kw, dw, sw)]
    return make_tensor(from_canonical(out, o_layout, "NCHW"), dtype, vdevice=data.vdevice)


register("nn.conv2d", ("data", "weight"), _infer_conv2d,
         (Attr("strides", (1, 1), ATTR_INTS), Attr("padding", (0, 0, 0, 0), ATTR_INTS),
          Attr("dilation", (1, 1), ATTR_INTS), Attr("groups", 1, ATTR_INT),
          Attr("data_layout", "NCHW", ATTR_STR), Attr("kernel_layout", "OIHW", ATTR_STR),
          Attr("out_layout", None, ATTR_STR), Attr("out_dtype", None, ATTR_DTYPE)),
         prepare=_prepare_conv2d)


# ---------------------------------------------------------------- pooling
def _prepare_pool2d(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    for name in ("pool_size", "strides", "dilation"):
        _pair(spec, attrs, name)
    _padding(spec, attrs)
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["layout"]
    return args, attrs


def _infer_pool2d(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    a = info.attrs
    d_layout = parse_layout(info, a["layout"], "NCHW", "data")
    o_layout = parse_layout(info, a["out_layout"], "NCHW", "output")
    check_rank(info, x, a["layout"], d_layout, "data")
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, len(o_layout), x.vdevice)
    n, c, h, w = to_canonical(x.dims, d_layout, "NCHW")
    (kh, kw), (sh, sw), (dh, dw), pad = a["pool_size"], a["strides"], a["dilation"], a["padding"]
    ceil = a["ceil_mode"]
    out = [n, c, window_size(h, pad[0] + pad[2], kh, dh, sh, ceil, pad[0]),
           window_size(w, pad[1] + pad[3], kw, dw, sw, ceil, pad[1])]
    return make_tensor(from_canonical(out, o_layout, "NCHW"), x.dtype, vdevice=x.vdevice)


for _name in ("nn.max_pool2d", "nn.avg_pool2d"):
    register(_name, ("data",), _infer_pool2d,
             (Attr("pool_size", (1, 1), ATTR_INTS), Attr("strides", (1, 1), ATTR_INTS),
              Attr("dilation", (1, 1), ATTR_INTS), Attr("padding", (0, 0, 0, 0), ATTR_INTS),
              Attr("ceil_mode", False, ATTR_BOOL), Attr("count_include_pad", False, ATTR_BOOL),
              Attr("layout", "NCHW", ATTR_STR), Attr("out_layout", None, ATTR_STR)),
             prepare=_prepare_pool2d,
             positional=("pool_size", "strides", "padding", "dilation", "ceil_mode",
                         "count_include_pad", "layout", "out_layout"))

__all__ = ["parse_layout", "window_size", "norm_params_unknown"]
