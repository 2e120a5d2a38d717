"""Numpy references of the neural-network operators of ``ir/relax_ops_nn_misc.py`` (activations
with parameters, dropout, pad, batch_flatten, pixel_shuffle, the channel norms, the losses) and
the window operators in 1, 2 and 3 spatial dimensions (convolutions, their transposes, pooling);
the conventions are TVM's legalizations' (dropout is the identity at inference, with a mask of
ones)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TVMSError
from ..ir.relax_ops_nn import layout_tokens
from .numpy_ops import numpy_op
from .tir_values import numpy_dtype

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _like(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.asarray(out).astype(x.dtype, copy=False)


@numpy_op("nn.leakyrelu")
def leakyrelu(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    return _like(np.where(x > 0, x, x * attrs["alpha"]), x)


@numpy_op("nn.prelu")
def prelu(args: tuple, attrs: Any) -> np.ndarray:
    x, slope = np.asarray(args[0]), np.asarray(args[1])
    axis = attrs["axis"] % x.ndim
    if slope.ndim != 1 or slope.size not in (1, x.shape[axis]):
        raise TVMSError(f"R.nn.prelu: the slope has shape {slope.shape}; it takes one value or one per "
                        f"channel ({x.shape[axis]} along axis {axis})")
    shape = [1] * x.ndim
    shape[axis] = -1
    return _like(np.where(x > 0, x, x * slope.reshape(shape)), x)


@numpy_op("nn.selu")
def selu(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    return _like(_SELU_SCALE * (np.maximum(x, 0) + np.minimum(0, _SELU_ALPHA * (np.exp(x) - 1))), x)


@numpy_op("nn.softplus")
def softplus(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    beta, threshold = attrs["beta"], attrs["threshold"]
    with np.errstate(over="ignore"):  # (the large values take the other branch)
        smooth = np.log1p(np.exp(beta * x)) / beta
    return _like(np.where(beta * x > threshold, x, smooth), x)


@numpy_op("nn.dropout")
def dropout(args: tuple, attrs: Any) -> tuple:
    x = np.asarray(args[0])
    return x.copy(), np.ones_like(x)


_NUMPY_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@numpy_op("nn.pad")
def pad(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    w = attrs["pad_width"]
    widths = [(w[2 * i], w[2 * i + 1]) for i in range(x.ndim)]
    mode = _NUMPY_PAD_MODES[attrs["pad_mode"]]
    if mode == "constant":
        return np.pad(x, widths, constant_values=np.asarray(attrs["pad_value"]).astype(x.dtype))
    return np.pad(x, widths, mode=mode)


@numpy_op("nn.batch_flatten")
def batch_flatten(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    return x.reshape(x.shape[0], -1)


@numpy_op("nn.pixel_shuffle")
def pixel_shuffle(args: tuple, attrs: Any) -> np.ndarray:
    x = np.asarray(args[0])
    r = attrs["upscale_factor"]
    *batch, c, h, w = x.shape
    y = x.reshape(*batch, c // (r * r), r, r, h, w)
    nb = len(batch)
    order = [*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2]  # (..., C, H, r, W, r)
    return y.transpose(order).reshape(*batch, c // (r * r), h * r, w * r)


def _normalize(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over ``axes``, float16 computed in float32 (as TVM does) and
    rounded back before the scale and shift."""
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    mean = wide.mean(axis=axes, keepdims=True)
    var = ((wide - mean) ** 2).mean(axis=axes, keepdims=True)
    return ((wide - mean) / np.sqrt(var + eps)).astype(x.dtype)


def _along(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return np.asarray(p).reshape(shape)


def _scale_shift(out: np.ndarray, gamma: Any, beta: Any, axis: int, attrs: Any) -> np.ndarray:
    if attrs["scale"]:
        out = out * _along(gamma, out.ndim, axis)
    if attrs["center"]:
        out = out + _along(beta, out.ndim, axis)
    return out


@numpy_op("nn.batch_norm")
def batch_norm(args: tuple, attrs: Any) -> tuple:
    x, gamma, beta, moving_mean, moving_var = (np.asarray(a) for a in args)
    axis = attrs["axis"] % x.ndim
    if attrs["training"]:
        others = tuple(a for a in range(x.ndim) if a != axis)
        mean, var = x.mean(axis=others), x.var(axis=others)
        m = attrs["momentum"]
        new_mean, new_var = (1 - m) * moving_mean + m * mean, (1 - m) * moving_var + m * var
    else:
        mean, var, new_mean, new_var = moving_mean, moving_var, moving_mean, moving_var
    out = (x - _along(mean, x.ndim, axis)) / np.sqrt(_along(var, x.ndim, axis) + attrs["epsilon"])
    out = _scale_shift(out, gamma, beta, axis, attrs)
    return _like(out, x), _like(new_mean, x), _like(new_var, x)


@numpy_op("nn.group_norm")
def group_norm(args: tuple, attrs: Any) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    c = attrs["channel_axis"] % x.ndim
    g = attrs["num_groups"]
    grouped = x.reshape(x.shape[:c] + (g, x.shape[c] // g) + x.shape[c + 1:])
    axes = (c + 1,) + tuple(a % x.ndim + (a % x.ndim > c) for a in attrs["axes"])
    out = _normalize(grouped, axes, attrs["epsilon"]).reshape(x.shape)
    return _like(_scale_shift(out, gamma, beta, c, attrs), x)


@numpy_op("nn.instance_norm")
def instance_norm(args: tuple, attrs: Any) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    c = attrs["channel_axis"] % x.ndim
    out = _normalize(x, tuple(a % x.ndim for a in attrs["axes"]), attrs["epsilon"])
    return _like(_scale_shift(out, gamma, beta, c, attrs), x)


@numpy_op("nn.cross_entropy_with_logits")
def cross_entropy_with_logits(args: tuple, attrs: Any) -> np.ndarray:
    x, y = np.asarray(args[0]), np.asarray(args[1])
    total = -np.sum(x * y)
    return _like(total / x.shape[0] if x.ndim > 1 else total, x)


@numpy_op("nn.nll_loss")
def nll_loss(args: tuple, attrs: Any) -> np.ndarray:
    """-predictions[n, t, ...] * weights[t] per element, 0 where t is ignore_index; "mean"
    divides the sum by the sum of the weights taken."""
    pred, target = np.asarray(args[0]), np.asarray(args[1])
    if pred.ndim == 1:  # (C,) predictions, a scalar target
        pred, target = pred[None], target[None]
    classes = pred.shape[1]
    weights = np.asarray(args[2]) if len(args) > 2 else np.ones(classes, pred.dtype)
    kept = target != attrs["ignore_index"]
    t = np.where(kept, target, 0).astype(np.int64)
    picked = np.take_along_axis(pred, t[:, None], axis=1)[:, 0]
    w = np.where(kept, weights[t], 0)
    loss = -picked * w
    if attrs["reduction"] == "none":
        return _like(loss.reshape(np.asarray(args[1]).shape), pred)
    if attrs["reduction"] == "sum":
        return _like(loss.sum(), pred)
    return _like(loss.sum() / w.sum(), pred)


# ---------------------------------------------------------------- convolutions and pooling
# Any number of spatial axes; layouts that permute the canonical axes (NWC, NHWC, OHWI, ...) and
# layouts with blocked axes (NCHW16c: x[n, c // 16, h, w, c % 16]; OIHW16i16o).
def _canonical(x: np.ndarray, layout: str, target: str, op: str) -> np.ndarray:
    names = [name for name, _ in layout_tokens(layout) or ()]
    if sorted(n for n in names if n.isupper()) != sorted(target) or len(set(names)) != len(names) or \
            any(n.islower() and n.upper() not in names for n in names) or len(names) != x.ndim:
        raise TVMSError(f"the numpy reference of {op} supports layouts that permute or block {target}, "
                        f"got {layout!r}")
    order, shape = [], []
    for axis in target:  # (an axis and its block side by side, then merged)
        order.append(names.index(axis))
        size = x.shape[order[-1]]
        if axis.lower() in names:
            order.append(names.index(axis.lower()))
            size *= x.shape[order[-1]]
        shape.append(size)
    return np.transpose(x, order).reshape(shape)


def _from_canonical(x: np.ndarray, layout: str, target: str) -> np.ndarray:
    tokens = layout_tokens(layout)
    axes = dict(tokens)
    split, names = [], []
    for axis, size in zip(target, x.shape):
        block = axes.get(axis.lower())
        split += [size // block, block] if block else [size]
        names += [axis, axis.lower()] if block else [axis]
    return np.transpose(x.reshape(split), [names.index(name) for name, _ in tokens])


_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _layouts(attrs: Any, kernel: str | None) -> tuple:
    """The canonical data layout (NCW, NCHW, NCDHW) and kernel layout (OIHW, IOHW, ...)."""
    n = len(attrs["strides"])
    return "NC" + _SPATIAL[n], (kernel + _SPATIAL[n]) if kernel else None


def _accumulator(dtype: np.dtype) -> np.dtype:
    return np.float64 if np.issubdtype(dtype, np.floating) else dtype


def _strided(start: int, stride: int, count: int) -> slice:
    return slice(start, start + stride * (count - 1) + 1, stride)


def _conv(op: str, transpose: bool) -> Any:
    def conv(args: tuple, attrs: Any) -> np.ndarray:
        """Direct convolution (the transpose scatters each input element over its window)."""
        target, kernel = _layouts(attrs, "IO" if transpose else "OI")
        x = _canonical(np.asarray(args[0]), attrs["data_layout"], target, op)
        w = _canonical(np.asarray(args[1]), attrs["kernel_layout"], kernel, op)
        dtype = numpy_dtype(attrs["out_dtype"]) if attrs["out_dtype"] is not None else x.dtype
        acc = _accumulator(dtype)
        n, groups = x.ndim - 2, attrs["groups"]
        strides, dilation, pad = attrs["strides"], attrs["dilation"], attrs["padding"]
        ksize = w.shape[2:]
        # (sizes known only when it runs: the data's channels must be the kernel's, groups times)
        channels = w.shape[0] if transpose else w.shape[1] * groups
        if x.shape[1] != channels or w.shape[0] % groups:
            raise TVMSError(f"R.{op}: data of {x.shape[1]} channels and a kernel of shape {w.shape} "
                            f"(in the {target} / {kernel} layouts) do not make {groups} groups")
        if transpose:
            cin = w.shape[0] // groups
            sizes = [(x.shape[2 + i] - 1) * strides[i] + dilation[i] * (ksize[i] - 1) + 1
                     + attrs["output_padding"][i] + max(pad[i + n], 0) for i in range(n)]
            full = np.zeros((x.shape[0], w.shape[1] * groups, *sizes), acc)
            for g in range(groups):
                xs = x[:, g * cin:(g + 1) * cin].astype(acc)
                ws = w[g * cin:(g + 1) * cin].astype(acc)
                outs = slice(g * w.shape[1], (g + 1) * w.shape[1])
                for r in np.ndindex(*ksize):
                    window = tuple(_strided(r[i] * dilation[i], strides[i], x.shape[2 + i]) for i in range(n))
                    full[(slice(None), outs) + window] += np.einsum("ni...,io->no...", xs, ws[(..., *r)])
            out_sizes = [(x.shape[2 + i] - 1) * strides[i] - pad[i] - pad[i + n]
                         + dilation[i] * (ksize[i] - 1) + attrs["output_padding"][i] + 1 for i in range(n)]
            out = full[(slice(None), slice(None)) + tuple(slice(pad[i], pad[i] + out_sizes[i]) for i in range(n))]
        else:
            x = np.pad(x, [(0, 0), (0, 0)] + [(pad[i], pad[i + n]) for i in range(n)])
            osz = [(x.shape[2 + i] - dilation[i] * (ksize[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
            out = np.zeros((x.shape[0], w.shape[0], *osz), acc)
            cg, per_group = w.shape[1], w.shape[0] // groups
            for g in range(groups):
                xs = x[:, g * cg:(g + 1) * cg].astype(acc)
                ws = w[g * per_group:(g + 1) * per_group].astype(acc)
                for r in np.ndindex(*ksize):
                    patch = xs[(slice(None), slice(None)) +
                               tuple(_strided(r[i] * dilation[i], strides[i], osz[i]) for i in range(n))]
                    out[:, g * per_group:(g + 1) * per_group] += np.einsum("nc...,oc->no...", patch, ws[(..., *r)])
        return _from_canonical(out.astype(dtype), attrs["out_layout"] or attrs["data_layout"], target)
    return conv


for _n in _SPATIAL:
    numpy_op(f"nn.conv{_n}d")(_conv(f"nn.conv{_n}d", False))
    numpy_op(f"nn.conv{_n}d_transpose")(_conv(f"nn.conv{_n}d_transpose", True))


def pool_windows(extents: tuple, attrs: Any) -> tuple[tuple, list]:
    """The output extents of a pooling over spatial ``extents``, and its windows: for each output
    position, the input positions inside the (unpadded) input and the count an average divides by."""
    n = len(extents)
    size, strides, dilation, pad = attrs["pool_size"], attrs["strides"], attrs["dilation"], attrs["padding"]

    def out_size(i: int) -> int:
        span = extents[i] + pad[i] + pad[i + n] - dilation[i] * (size[i] - 1) - 1
        if not attrs["ceil_mode"]:
            return span // strides[i] + 1
        count = -(-span // strides[i]) + 1
        # in ceil mode a last window starting in the back padding is dropped
        return count - 1 if (count - 1) * strides[i] >= extents[i] + pad[i] else count

    osz = tuple(out_size(i) for i in range(n))
    windows = []
    for o in np.ndindex(*osz):
        # the positions of the window in each axis, before padding
        axes = [[o[i] * strides[i] + r * dilation[i] - pad[i] for r in range(size[i])] for i in range(n)]
        inside = [tuple(axes[i][p[i]] for i in range(n)) for p in np.ndindex(*size)
                  if all(0 <= axes[i][p[i]] < extents[i] for i in range(n))]
        if attrs["count_include_pad"]:  # the window clipped to the padded input
            count = int(np.prod([sum(1 for v in axes[i] if -pad[i] <= v < extents[i] + pad[i + n])
                                 for i in range(n)]))
        else:
            count = max(len(inside), 1)
        windows.append((o, inside, count))
    return osz, windows


def _pool(kind: str) -> Any:
    def pool(args: tuple, attrs: Any) -> np.ndarray:
        target, _ = _layouts(attrs, None)
        x = _canonical(np.asarray(args[0]), attrs["layout"], target, f"nn.{kind}_pool")
        osz, windows = pool_windows(x.shape[2:], attrs)
        out = np.zeros(x.shape[:2] + osz, dtype=x.dtype)
        for o, inside, count in windows:
            if inside:
                vals = np.stack([x[(slice(None), slice(None)) + p] for p in inside], axis=-1)
            else:  # a window in the padding only: the padding's value (TVM's, the lowest for max)
                lowest = np.finfo(x.dtype).min if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
                vals = np.full(x.shape[:2] + (1,), lowest if kind == "max" else 0, x.dtype)
            at = (slice(None), slice(None)) + o
            out[at] = vals.max(axis=-1) if kind == "max" else vals.sum(axis=-1) / count
        return _from_canonical(out, attrs["out_layout"] or attrs["layout"], target)
    return pool


def _adaptive_avg_pool(args: tuple, attrs: Any) -> np.ndarray:
    """Output element o of an axis of size L pooled to S averages [floor(o L / S), ceil((o + 1) L / S))."""
    layout = attrs["layout"]
    target = "NC" + _SPATIAL[sum(c.isupper() for c in layout) - 2]
    x = _canonical(np.asarray(args[0]), layout, target, "nn.adaptive_avg_pool")
    extents = x.shape[2:]
    osz = attrs["output_size"] or extents
    out = np.zeros(x.shape[:2] + tuple(osz), dtype=x.dtype)
    for o in np.ndindex(*osz):
        window = tuple(slice(o[i] * extents[i] // osz[i], -(-(o[i] + 1) * extents[i] // osz[i]))
                       for i in range(len(osz)))
        out[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + window].mean(
            axis=tuple(range(2, x.ndim)))
    return _from_canonical(out, attrs["out_layout"] or layout, target)


for _n in _SPATIAL:
    numpy_op(f"nn.max_pool{_n}d")(_pool("max"))
    numpy_op(f"nn.avg_pool{_n}d")(_pool("avg"))
    numpy_op(f"nn.adaptive_avg_pool{_n}d")(_adaptive_avg_pool)


# ---------------------------------------------------------------- attention
def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: Any, attrs: Any) -> np.ndarray:
    """softmax(q k^T * scale + bias) v over (batch, sequence, heads, dim) tensors; keys and values
    with fewer heads serve groups of query heads; a causal mask keeps key j for query i when
    j <= i (TopLeft) or j <= i + |keys - queries| (BottomRight)."""
    if attrs["window_size"] is not None:
        raise TVMSError("the numpy reference of nn.attention does not cover window_size")
    acc = _accumulator(q.dtype)
    heads = q.shape[2]
    k, v = (np.repeat(t, heads // t.shape[2], axis=2).astype(acc) for t in (k, v))
    scale = attrs["scale"].value if attrs["scale"] is not None else 1 / np.sqrt(q.shape[3])
    scores = np.einsum("bshd,bthd->bhst", q.astype(acc), k) * scale
    if bias is not None:
        scores = scores + np.asarray(bias)
    if attrs["causal_mask"] is not None:
        s, t = scores.shape[-2:]
        offset = 0 if attrs["causal_mask"] == "TopLeft" else abs(s - t)
        keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + offset
        scores = np.where(keep, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhst,bthd->bshd", weights, v).astype(q.dtype)


@numpy_op("nn.attention", "nn.attention_bias")
def attention(args: tuple, attrs: Any) -> np.ndarray:
    q, k, v = (np.asarray(a) for a in args[:3])
    return _attend(q, k, v, args[3] if len(args) > 3 else None, attrs)


@numpy_op("nn.attention_var_len")
def attention_var_len(args: tuple, attrs: Any) -> np.ndarray:
    """The sequences packed along axis 1 attend each to its own keys: query rows
    seqstart_q[i]:seqstart_q[i + 1] to key rows seqstart_k[i]:seqstart_k[i + 1]."""
    q, k, v, start_q, start_k = (np.asarray(a) for a in args[:5])
    out = np.zeros(q.shape[:3] + v.shape[3:], q.dtype)
    for i in range(len(start_q) - 1):
        rows, keys = slice(start_q[i], start_q[i + 1]), slice(start_k[i], start_k[i + 1])
        out[:, rows] = _attend(q[:, rows], k[:, keys], v[:, keys], None, attrs)
    return out
