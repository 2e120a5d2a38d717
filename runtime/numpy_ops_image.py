"""Numpy references of image.resize2d / image.resize3d (registered into ``NUMPY_OPS`` when
``numpy_ops`` imports this module).

TVM's resize reads, for each output pixel, input pixels around a source coordinate computed per
axis (``coordinate_transformation_mode``) with indices clamped into the image, so it is separable:
each spatial axis is resampled on its own by a matrix of weights (nearest, linear or cubic), in
float32 as TVM computes the coordinates."""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from .numpy_ops import numpy_op
from .tir_values import numpy_dtype

_F = np.float32


def _source(n_in: int, n_out: int, mode: str, start: float, end: float) -> np.ndarray:
    """The input coordinate of each output index along one axis."""
    x = np.arange(n_out, dtype=_F)
    scale = _F(n_in) / _F(n_out)
    if mode == "half_pixel":
        return (x + _F(0.5)) * scale - _F(0.5)
    if mode == "align_corners":
        return _F(n_in - 1) / _F(n_out - 1) * x if n_out > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return scale * x
    if mode == "pytorch_half_pixel":
        return (x + _F(0.5)) * scale - _F(0.5) if n_out > 1 else np.zeros_like(x)
    if mode == "tf_half_pixel_for_nn":
        return (x + _F(0.5)) * scale
    if mode == "tf_crop_and_resize":
        if n_out > 1:
            return _F(start * (n_in - 1)) + x * _F(end - start) * _F(n_in - 1) / _F(n_out - 1)
        return np.full_like(x, _F(0.5 * (start + end) * (n_in - 1)))
    raise TVMSError(f"unknown coordinate_transformation_mode {mode!r}")


_ROUND = {
    "round": np.round, "round_prefer_floor": lambda v: np.ceil(v - _F(0.5)),
    "round_prefer_ceil": lambda v: np.floor(v + _F(0.5)), "floor": lambda v: np.floor(v + _F(1e-5)),
    "ceil": lambda v: np.ceil(v - _F(1e-5)),
}


def _cubic_weights(t: np.ndarray, a: float) -> list:
    t2, t3 = t * t, t * t * t
    return [a * (t3 - 2 * t2 + t), (a + 2) * t3 - (3 + a) * t2 + 1,
            -(a + 2) * t3 + (3 + 2 * a) * t2 - a * t, -a * t3 + a * t2]


def _axis_matrix(n_in: int, n_out: int, attrs: Any, start: float, end: float) -> tuple:
    """(weights of shape (n_out, n_in), which outputs lie inside the image)."""
    method, mode = attrs["method"], attrs["coordinate_transformation_mode"]
    src = _source(n_in, n_out, mode, start, end)
    taps: list = []  # (input index, weight) arrays
    if method == "nearest_neighbor":
        rounding = attrs["rounding_method"] or ("round" if mode == "align_corners" else "floor")
        if rounding not in _ROUND:
            raise TVMSError(f"unknown rounding_method {rounding!r}")
        taps.append((_ROUND[rounding](src).astype(np.int64), np.ones_like(src)))
    elif method == "linear":
        base = np.floor(src)
        t = src - base
        taps += [(base.astype(np.int64), 1 - t), (base.astype(np.int64) + 1, t)]
    elif method == "cubic":
        base = np.floor(src)
        weights = _cubic_weights(src - base, _F(attrs["cubic_alpha"]))
        first = base.astype(np.int64) - 1
        if attrs["cubic_exclude"]:  # taps outside the image weigh nothing; the rest renormalized
            weights = [np.where((first + k < 0) | (first + k >= n_in), _F(0), w) for k, w in enumerate(weights)]
            total = sum(weights)
            weights = [w / total for w in weights]
        taps += [(first + k, w) for k, w in enumerate(weights)]
    else:
        raise TVMSError(f"unknown resize method {method!r}")
    matrix = np.zeros((n_out, n_in), dtype=_F)
    rows = np.arange(n_out)
    for index, weight in taps:
        np.add.at(matrix, (rows, np.clip(index, 0, n_in - 1)), weight.astype(_F))
    inside = (src >= 0) & (src <= n_in - 1)
    return matrix, inside


def _resize(args: tuple, attrs: Any, target: str) -> np.ndarray:
    x = np.asarray(args[0])
    layout = attrs["layout"]
    if sorted(layout) != sorted(target):
        raise TVMSError(f"the resize reference supports layouts that order {target}, got {layout!r}")
    order = [layout.index(a) for a in target]
    data = np.transpose(x, order).astype(_F)
    size = [int(v) for v in args[1]]
    spatial = len(target) - 2
    roi = [float(getattr(v, "value", v)) for v in attrs["roi"]]
    crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"
    inside = np.ones(size, dtype=bool)
    for k in range(spatial):
        matrix, valid = _axis_matrix(data.shape[2 + k], size[k], attrs, roi[k], roi[k + spatial])
        data = np.moveaxis(np.tensordot(data, matrix, axes=([2 + k], [1])), -1, 2 + k)
        inside &= valid.reshape([-1 if j == k else 1 for j in range(spatial)])
    if crop:  # (outside the image: the extrapolation value)
        data = np.where(inside, data, _F(attrs["extrapolation_value"]))
    out_dtype = numpy_dtype(attrs["out_dtype"]) if attrs["out_dtype"] is not None else x.dtype
    return np.transpose(data, np.argsort(order)).astype(out_dtype)


numpy_op("image.resize2d")(lambda args, attrs: _resize(args, attrs, "NCHW"))
numpy_op("image.resize3d")(lambda args, attrs: _resize(args, attrs, "NCDHW"))


@numpy_op("image.affine_grid")
def affine_grid(args: tuple, attrs: Any) -> np.ndarray:
    """Normalized target coordinates ([-1, 1], at corner pixels or pixel centers) through each
    batch's affine matrix: (N, spatial, *size), x first."""
    theta = np.asarray(args[0])
    size = [int(v) for v in args[1]]
    dtype = theta.dtype.type
    if attrs["align_corners"]:  # (TVM's step keeps the last point just below 1)
        axes = [dtype(-1.0) + np.arange(s, dtype=theta.dtype) * dtype((2.0 - 1e-7) / (s - 1)) for s in size]
    else:
        axes = [dtype(-1.0 + 1.0 / s) + np.arange(s, dtype=theta.dtype) * dtype(2.0 / s) for s in size]
    coords = np.meshgrid(*axes, indexing="ij")[::-1]  # (x, y[, z]): the matrix's column order
    ndim = len(size)
    out = np.empty((theta.shape[0], ndim, *size), dtype=theta.dtype)
    for n in range(theta.shape[0]):
        for d in range(ndim):
            out[n, d] = theta[n, d, ndim] + sum(theta[n, d, k] * coords[k] for k in range(ndim))
    return out


def _reflect(x: np.ndarray, size: float, start: float) -> np.ndarray:
    """Coordinates outside [start, start + size] folded back in, as TVM's grid_sample does."""
    dist = np.abs(start - x)
    times = np.trunc(dist.astype(np.int32) / size).astype(np.int32)
    extra = dist - times * _F(size)
    folded = np.where(times % 2 == 0, extra + _F(start), _F(size) - extra + _F(start))
    return np.where((x >= start) & (x <= size + start), x, folded)


@numpy_op("image.grid_sample")
def grid_sample(args: tuple, attrs: Any) -> np.ndarray:
    """Bilinear or nearest sampling of NCHW data at the grid's (x, y) points in [-1, 1]."""
    data, grid = np.asarray(args[0]), np.asarray(args[1])
    method, padding, corners = attrs["method"], attrs["padding_mode"], attrs["align_corners"]
    if attrs["layout"] != "NCHW" or method not in ("bilinear", "nearest"):
        raise TVMSError(f"the grid_sample reference supports NCHW data, bilinear and nearest; "
                        f"got {attrs['layout']}, {method}")
    n_, c_, h, w = data.shape
    coords = []
    for k, size in ((1, h), (0, w)):  # (y from grid channel 1, x from channel 0)
        g = grid[:, k]
        v = (g + 1) * _F(size - 1) / 2 if corners else _F(-0.5) + (g + 1) * _F(size) / 2
        if padding == "reflection":
            v = _reflect(v, size - 1, 0.0) if corners else _reflect(v, size, -0.5)
        if padding in ("border", "reflection"):
            v = np.clip(v, 0, size - 1)
        coords.append(v.astype(_F))
    y, x = coords

    def pixel(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        """data[n, :, yi, xi] for each grid point, zero outside the image: (N, C, Ho, Wo)."""
        inside = (yi >= 0) & (xi >= 0) & (yi < h) & (xi < w)
        batch = np.arange(n_)[:, None, None]
        values = data[batch, :, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]  # (N, Ho, Wo, C)
        return np.moveaxis(np.where(inside[..., None], values, 0), -1, 1)

    if method == "nearest":
        return pixel(np.rint(y).astype(np.int64), np.rint(x).astype(np.int64)).astype(data.dtype)
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    dy, dx = (y - y0)[:, None], (x - x0)[:, None]
    out = (pixel(y0, x0) * (1 - dy) * (1 - dx) + pixel(y0, x0 + 1) * (1 - dy) * dx
           + pixel(y0 + 1, x0) * dy * (1 - dx) + pixel(y0 + 1, x0 + 1) * dy * dx)
    return out.astype(data.dtype)
