"""Numpy references of the neural-network operators of ``ir/relax_ops_nn_misc.py`` (activations
with parameters, dropout, pad, batch_flatten, pixel_shuffle, the channel norms, the losses); the
conventions are TVM's legalizations' (dropout is the identity at inference, with a mask of ones)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .numpy_ops import numpy_op

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
    shape = [1] * x.ndim
    shape[attrs["axis"] % x.ndim] = -1
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
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


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
