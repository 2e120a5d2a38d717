"""More Relax neural-network operators: the activations with parameters (nn.leakyrelu, nn.prelu,
nn.selu, nn.softplus), nn.dropout, nn.pad, nn.batch_flatten, nn.pixel_shuffle, the norms over
a channel axis (nn.batch_norm, nn.group_norm, nn.instance_norm) and the losses (nn.nll_loss,
nn.cross_entropy_with_logits). Inference follows TVM 0.27's ``src/relax/op/nn/nn.cc``."""
from __future__ import annotations

from .expr import IntImm
from .relax_infer import (INT64, binary_dtype, describe, dim_add, dim_mul, fmt_dim, fmt_dims, int_of,
                          make_tensor, normalize_axes, normalize_axis, op_error, product, prove_not_equal,
                          require_float, tensor_arg, tensor_args, infer_unary_float, unknown_like)
from .relax_op import ATTR_BOOL, ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STR, Attr, CallInfo, OpSpec, register
from .relax_ops_nn import norm_params_unknown
from .struct_info import StructInfo, TensorStructInfo, TupleStructInfo

# ---------------------------------------------------------------- activations
register("nn.leakyrelu", ("data",), infer_unary_float, (Attr("alpha", 0.01, ATTR_FLOAT),))
register("nn.selu", ("data",), infer_unary_float)
register("nn.softplus", ("data",), infer_unary_float,
         (Attr("beta", 1.0, ATTR_FLOAT), Attr("threshold", 20.0, ATTR_FLOAT)))


def _infer_prelu(info: CallInfo) -> StructInfo:
    """The data's struct info; the slope tensor is not checked (as in TVM)."""
    x = tensor_arg(info, 0)
    tensor_arg(info, 1)
    if x.ndim < 0:
        return x
    require_float(info, x)
    normalize_axis(info, info.attrs["axis"], x.ndim)
    return x


register("nn.prelu", ("data", "alpha"), _infer_prelu, (Attr("axis", 1, ATTR_INT),))


def _infer_dropout(info: CallInfo) -> StructInfo:
    """The output and the mask, both of the data's struct info."""
    x = tensor_arg(info, 0)
    return TupleStructInfo((x, x))


register("nn.dropout", ("data",), _infer_dropout, (Attr("rate", 0.5, ATTR_FLOAT),))


# ---------------------------------------------------------------- pad, batch_flatten, pixel_shuffle
PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _prepare_pad(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    if attrs["pad_mode"] not in PAD_MODES:
        raise op_error(spec, f"pad_mode must be one of {', '.join(PAD_MODES)}, got {attrs['pad_mode']!r}")
    return args, attrs


def _infer_pad(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    width = info.attrs["pad_width"]
    if x.ndim >= 0 and len(width) != 2 * x.ndim:
        raise info.fail(f"pad_width must have two values (before, after) per dimension of "
                        f"{describe(x)}, got {list(width)}")
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, x.ndim, x.vdevice)
    dims = [dim_add(d, IntImm(INT64, width[2 * i] + width[2 * i + 1])) for i, d in enumerate(x.dims)]
    return make_tensor(dims, x.dtype, vdevice=x.vdevice)


register("nn.pad", ("data",), _infer_pad,
         (Attr("pad_width", None, ATTR_INTS, required=True), Attr("pad_value", 0.0, ATTR_FLOAT),
          Attr("pad_mode", "constant", ATTR_STR)),
         prepare=_prepare_pad, positional=("pad_width", "pad_mode", "pad_value"))


def _infer_batch_flatten(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype, 2, x.vdevice)
    if x.ndim < 2:
        raise info.fail(f"the data must have at least 2 dimensions, got {describe(x)}")
    if x.ndim == 2:
        return x
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, 2, x.vdevice)
    return make_tensor((x.dims[0], product(x.dims[1:])), x.dtype, vdevice=x.vdevice)


register("nn.batch_flatten", ("data",), _infer_batch_flatten)


def _infer_pixel_shuffle(info: CallInfo) -> StructInfo:
    """(..., C * r * r, H, W) -> (..., C, H * r, W * r)."""
    x = tensor_arg(info, 0)
    r = info.attrs["upscale_factor"]
    if x.dims is None:
        return TensorStructInfo(None, x.dtype, x.ndim, x.vdevice)
    if x.ndim < 3:
        raise info.fail(f"the data must have at least 3 dimensions (C, H, W), got {describe(x)}")
    *batch, c, h, w = x.dims
    channels = int_of(c)
    if channels is None:  # (TVM's inference needs the channel count: it fails on a symbolic one)
        raise info.fail(f"the number of channels must be a constant, got {fmt_dim(c)}")
    if r <= 0 or channels % (r * r):
        raise info.fail(f"the {channels} channels do not divide by the square of the upscale factor {r}")
    out = (*batch, IntImm(c.dtype, channels // (r * r)), dim_mul(h, r), dim_mul(w, r))
    return make_tensor(out, x.dtype, vdevice=x.vdevice)


register("nn.pixel_shuffle", ("data",), _infer_pixel_shuffle,
         (Attr("upscale_factor", None, ATTR_INT, required=True),))


# ---------------------------------------------------------------- norms over a channel axis
def _infer_batch_norm(info: CallInfo) -> StructInfo:
    """The normalized data, the new moving mean and the new moving variance."""
    ts = tensor_args(info)
    x = ts[0]
    if norm_params_unknown(info, (info.attrs["axis"],)):
        return TupleStructInfo((unknown_like(x), TensorStructInfo(None, x.dtype, 1, x.vdevice),
                                TensorStructInfo(None, x.dtype, 1, x.vdevice)))
    return TupleStructInfo((x, ts[3], ts[4]))


_NORM_FLAGS = (Attr("epsilon", 1e-5, ATTR_FLOAT), Attr("center", True, ATTR_BOOL),
               Attr("scale", True, ATTR_BOOL))
register("nn.batch_norm", ("data", "gamma", "beta", "moving_mean", "moving_var"), _infer_batch_norm,
         (Attr("axis", None, ATTR_INT, required=True), *_NORM_FLAGS, Attr("momentum", 0.1, ATTR_FLOAT),
          Attr("training", True, ATTR_BOOL)))


def _infer_channel_norm(info: CallInfo) -> StructInfo:
    """group_norm / instance_norm: the data's struct info; gamma and beta are 1-d of the
    channel axis' size."""
    x, *params = tensor_args(info)
    a = info.attrs
    channel = None
    if x.ndim >= 0:
        channel = normalize_axis(info, a["channel_axis"], x.ndim)
        if channel in normalize_axes(info, a["axes"], x.ndim):
            raise info.fail(f"channel_axis {channel} must not be one of the axes {list(a['axes'])}")
    require_float(info, x, "the data")
    size = x.dims[channel] if x.dims is not None and channel is not None else None
    groups = a.get("num_groups")
    if groups is not None and size is not None and int_of(size) is not None and int_of(size) % groups:
        raise info.fail(f"the {int_of(size)} channels do not divide into {groups} groups")
    for name, p in zip(info.spec.args[1:], params):
        if p.dtype != x.dtype:
            raise info.fail(f"{name} must have the data's dtype {x.dtype}, got {describe(p)}")
        if p.ndim != 1:
            raise info.fail(f"{name} must be 1-d, got {describe(p)}")
        if size is not None and p.dims is not None and prove_not_equal(size, p.dims[0]):
            raise info.fail(f"{name} has {fmt_dims(p.dims)} elements, but the channel axis has "
                            f"{fmt_dim(size)}")
    return x


register("nn.group_norm", ("data", "gamma", "beta"), _infer_channel_norm,
         (Attr("num_groups", None, ATTR_INT, required=True), Attr("channel_axis", None, ATTR_INT, required=True),
          Attr("axes", None, ATTR_INTS, required=True), *_NORM_FLAGS))
register("nn.instance_norm", ("data", "gamma", "beta"), _infer_channel_norm,
         (Attr("channel_axis", None, ATTR_INT, required=True), Attr("axes", None, ATTR_INTS, required=True),
          *_NORM_FLAGS))


# ---------------------------------------------------------------- losses
def _infer_cross_entropy(info: CallInfo) -> StructInfo:
    pred, label = tensor_args(info)
    dtype = binary_dtype(info, pred, label)
    if pred.ndim >= 0 and label.ndim >= 0 and pred.ndim != label.ndim:
        raise info.fail(f"the predictions and labels differ in rank: {describe(pred)} and {describe(label)}")
    if pred.dims is not None and label.dims is not None:
        if any(prove_not_equal(a, b) for a, b in zip(pred.dims, label.dims)):
            raise info.fail(f"the predictions and labels differ in shape: {fmt_dims(pred.dims)} and "
                            f"{fmt_dims(label.dims)}")
    return make_tensor((), dtype, vdevice=pred.vdevice or label.vdevice)


register("nn.cross_entropy_with_logits", ("predictions", "labels"), _infer_cross_entropy)

NLL_REDUCTIONS = ("none", "mean", "sum")


def _prepare_nll_loss(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
    if attrs["reduction"] not in NLL_REDUCTIONS:
        raise op_error(spec, f"reduction must be one of {', '.join(NLL_REDUCTIONS)}, got {attrs['reduction']!r}")
    return args, attrs


def _infer_nll_loss(info: CallInfo) -> StructInfo:
    """predictions (N, C, d1, ..., dk) or (C,), targets (N, d1, ..., dk) or (), weights (C,):
    the loss per element (N, d1, ..., dk) with reduction="none", a scalar otherwise."""
    pred, target, *weights = tensor_args(info)
    weight = weights[0] if weights else None
    dtype = binary_dtype(info, pred, weight) if weight is not None else pred.dtype
    vdevice = pred.vdevice or (weight.vdevice if weight is not None else None)
    if not target.dtype.is_void and not target.dtype.is_integer:
        raise info.fail(f"the targets must have an integer dtype, got {target.dtype}")
    k = None
    if pred.ndim >= 0:
        if pred.ndim < 1:
            raise info.fail(f"the predictions must have at least 1 dimension, got {describe(pred)}")
        k = max(pred.ndim - 2, 0)
    if target.ndim >= 0 and k is not None and k != max(target.ndim - 1, 0):
        raise info.fail(f"the predictions {describe(pred)} and targets {describe(target)} differ in "
                        f"their number of spatial dimensions")
    if weight is not None and weight.ndim >= 0 and weight.ndim != 1:
        raise info.fail(f"the weights must be 1-d, got {describe(weight)}")
    n = c = None
    out: tuple = ()
    if pred.dims is not None:
        if pred.ndim == 1:
            c = pred.dims[0]
        else:
            n, c = pred.dims[0], pred.dims[1]
            out = (n, *pred.dims[2:])
    if target.dims is not None:
        if not target.dims:
            if n is not None:
                raise info.fail(f"the predictions {describe(pred)} need targets of (N, ...), got a scalar")
        else:
            if n is not None and prove_not_equal(n, target.dims[0]):
                raise info.fail(f"the batch sizes differ: {fmt_dim(n)} in the predictions, "
                                f"{fmt_dim(target.dims[0])} in the targets")
            if n is None and c is not None:
                raise info.fail(f"the predictions {describe(pred)} need scalar targets, got {describe(target)}")
            if pred.dims is not None and any(prove_not_equal(a, b) for a, b in zip(out[1:], target.dims[1:])):
                raise info.fail(f"the predictions {describe(pred)} and targets {describe(target)} differ "
                                f"in their spatial sizes")
    if weight is not None and weight.dims is not None and c is not None and prove_not_equal(c, weight.dims[0]):
        raise info.fail(f"the predictions have {fmt_dim(c)} classes, the weights {fmt_dim(weight.dims[0])}")
    if info.attrs["reduction"] != "none":
        return make_tensor((), dtype, vdevice=vdevice)
    if pred.dims is not None:
        return make_tensor(out, dtype, vdevice=vdevice)
    return TensorStructInfo(None, dtype, pred.ndim - 1 if pred.ndim >= 0 else -1, vdevice)


register("nn.nll_loss", ("predictions", "targets", "weights"), _infer_nll_loss,
         (Attr("reduction", "mean", ATTR_STR), Attr("ignore_index", -100, ATTR_INT)),
         min_args=2, prepare=_prepare_nll_loss)
