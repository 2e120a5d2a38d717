"""ONNX's signal operators: ``DFT`` and ``STFT`` as one matmul, ``HannWindow``,
``HammingWindow``, ``BlackmanWindow`` from ``R.arange`` and ``R.cos``, ``MelWeightMatrix`` as a constant
computed here from its constant inputs.

DFT and STFT are linear in their input's real and imaginary parts once the lengths, the axis, the
step and the window are known: ``_dft_matrix`` and ``_stft_matrix`` compute that matrix from the
definitions (cosines and sines of 2 pi k t / length in float64), and one matmul applies it."""
from __future__ import annotations

import numpy as np

from .onnx_convert import (InvalidModel, OnnxOpConverter, Unsupported, as_dtype, check_size, converter, dims_of,
                           dtype_of, normalize_axis, onnx_dtype, required_value)
from .relax_op_api import op


def _dft_matrix(n, parts, length, inverse, onesided):
    """The DFT of ``length`` points along an axis of ``n`` elements of ``parts`` (1 or 2)
    components, as a (n * parts, bins, components) array: the input is cut or zero-padded
    to ``length``; forward, bin k = sum_t x_t e^(-2 pi i k t / length) for k below length (below
    length // 2 + 1 when ``onesided``); inverse, x_t = sum_k X_k e^(+2 pi i k t / length) / length
    (``onesided``: the real signal whose spectrum's conjugate-symmetric half X is, the bins
    between 0 and the Nyquist bin counting twice, their imaginary parts of 0 and Nyquist unread).
    ``length`` None: n points (2 (n - 1) for the onesided inverse)."""
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise InvalidModel(f"a DFT of {length} points")
    if inverse and onesided:
        bins, used, components = length, min(n, length // 2 + 1), 1
    else:
        bins = length // 2 + 1 if onesided else length
        used, components = min(n, length), 2
    check_size(n * parts * bins * components, f"the DFT matrix of an axis of length {n}")
    t, k = np.arange(used)[:, None], np.arange(bins)[None, :]
    if inverse:
        t, k = k, t  # (rows are input bins, columns output samples)
    angle = 2 * np.pi * (k * t % length) / length  # (reduced first: exact angles for long axes)
    weights = np.exp(-1j * angle) if not inverse else np.exp(1j * angle) / length
    if inverse and onesided:  # (the bins between 0 and Nyquist stand for their conjugates too)
        weights = weights * np.where((k == 0) | (2 * k == length), 1.0, 2.0)
    matrix = np.zeros((n, parts, bins, 2))
    for c, w in enumerate((weights, 1j * weights)[:parts]):  # (the input's real, imaginary part)
        matrix[:used, c, :, 0], matrix[:used, c, :, 1] = w.real, w.imag
    return matrix[..., :components].reshape(n * parts, bins, components)


def _stft_matrix(n, parts, step, window, length, onesided):
    """STFT's frames of a signal of ``n`` elements as a (n * parts, frames, bins, 2) array:
    frame f holds the window's elements times the signal from f * step on (zero past its end),
    then their forward DFT of ``length`` points (by default the window's length, or n; no
    window weighs each element 1)."""
    if length is None:
        length = n if window is None else len(window)
    if window is None:
        window = np.ones(length)
    window = window[:length]  # (a longer window's tail falls past the DFT's points)
    if step < 1 or length > n:
        raise InvalidModel(f"STFT of {n} samples with frame_length {length} and frame_step {step}")
    size, frames = len(window), 1 + (n - length) // step
    one = _dft_matrix(size, parts, length, False, onesided) * np.repeat(window, parts)[:, None, None]
    check_size(n * parts * frames * one[0].size, f"the STFT matrix of a signal of length {n}")
    matrix = np.zeros((n * parts, frames) + one.shape[1:])
    for f in range(frames):
        matrix[f * step * parts:(f * step + size) * parts, f] = one
    return matrix


def _linear_map(ctx, x, axis, matrix_of, *args):
    """``x`` transformed along ``axis`` (its last axis holds 1 or 2 components) by
    ``matrix_of(n, parts, *args)``, whose first axis is that axis's elements and components and
    whose others the result's, in float64; the result has the other axes first (returns their
    count too)."""
    dims = dims_of(x)
    rank = len(dims)
    n, parts = dims[axis], dims[-1]
    if not isinstance(n, int) or parts not in (1, 2):
        raise Unsupported(f"a transformed axis of length {n} with {parts} components")
    matrix = matrix_of(n, parts, *args)
    order = [a for a in range(rank - 1) if a != axis]
    lead = [dims[a] for a in order]
    moved = ctx.emit(op.permute_dims(as_dtype(x, "float64"), order + [axis, rank - 1]))
    flat = ctx.emit(op.reshape(moved, lead + [n * parts]))
    mixed = ctx.emit(op.matmul(flat, ctx.constant(matrix.reshape(n * parts, -1))))
    return ctx.emit(op.reshape(mixed, lead + list(matrix.shape[1:]))), len(lead)


@converter("DFT")
class DFT(OnnxOpConverter):
    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        x, length = (inputs + [None])[:2]
        return cls._convert(ctx, x, length, attrs.get("axis", 1), attrs)

    @classmethod
    def _impl_v20(cls, ctx, inputs, attrs):
        x, length, axis = (inputs + [None] * 2)[:3]
        axis = -2 if axis is None else int(required_value(axis, "axis"))
        return cls._convert(ctx, x, length, axis, attrs)

    @staticmethod
    def _convert(ctx, x, length, axis, attrs):
        rank = len(dims_of(x))
        axis = normalize_axis(axis, rank)
        if axis == rank - 1:
            raise Unsupported("a transform along the component axis")
        length = None if length is None else int(np.asarray(required_value(length, "dft_length")).item())
        result, lead = _linear_map(ctx, x, axis, _dft_matrix, length, bool(attrs.get("inverse", 0)),
                                   bool(attrs.get("onesided", 0)))
        # the transformed axis sits after the others: move it back
        order = list(range(lead))
        order.insert(axis, lead)
        return as_dtype(ctx.emit(op.permute_dims(result, order + [lead + 1])), dtype_of(x))


@converter("STFT")
class STFT(OnnxOpConverter):
    """(batch, length, 1 or 2) -> (batch, frames, bins, 2)."""

    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        signal, step, window, length = (inputs + [None] * 2)[:4]
        step = int(np.asarray(required_value(step, "frame_step")).item())
        window = None if window is None else required_value(window, "window").astype("float64")
        length = None if length is None else int(np.asarray(required_value(length, "frame_length")).item())
        result, _ = _linear_map(ctx, signal, 1, _stft_matrix, step, window, length, bool(attrs.get("onesided", 1)))
        return as_dtype(result, dtype_of(signal))


class _Window(OnnxOpConverter):
    """A generalized cosine window of the (constant) length: sum_k (-1)^k a_k cos(2 pi k n / N),
    N the length when ``periodic``, the length - 1 otherwise, computed by Relax operators."""

    coefficients: tuple = ()

    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        size = int(np.asarray(required_value(inputs[0], "size")).reshape(-1)[0])
        dtype = onnx_dtype(attrs.get("output_datatype", 1))
        period = size if attrs.get("periodic", 1) else size - 1
        angle = ctx.emit(op.multiply(op.arange(0, max(size, 0), 1, dtype="float64"),
                                     ctx.constant(2 * np.pi / period if period else np.nan)))
        window = ctx.constant(cls.coefficients[0])
        for k, a in enumerate(cls.coefficients[1:], 1):
            term = op.multiply(ctx.constant((-1) ** k * a), op.cos(op.multiply(angle, ctx.constant(float(k)))))
            window = ctx.emit(op.add(window, term))
        return as_dtype(window, dtype)


@converter("HannWindow")
class HannWindow(_Window):
    coefficients = (0.5, 0.5)


@converter("HammingWindow")
class HammingWindow(_Window):
    coefficients = (25 / 46, 21 / 46)


@converter("BlackmanWindow")
class BlackmanWindow(_Window):
    coefficients = (0.42, 0.5, 0.08)


@converter("MelWeightMatrix")
class MelWeightMatrix(OnnxOpConverter):
    """The triangular filters of ``num_mel_bins`` mel bands over the ``dft_length // 2 + 1``
    frequencies of a spectrum (its inputs are constants): band i rises from edge i to edge i + 1
    and falls to edge i + 2, the edges equally spaced in mel and rounded down to frequency bins,
    as onnx's reference computes them (whose spacing divides by num_mel_bins + 2)."""

    @classmethod
    def _impl_v17(cls, ctx, inputs, attrs):
        bins, length, rate, low, high = (required_value(v, name).item() for v, name in zip(
            inputs, ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")))
        check_size(int(bins) * (int(length) // 2 + 1), "the mel weight matrix")
        mel_low, mel_high = (2595 * np.log1p(hz / 700) / np.log(10) for hz in (low, high))
        mels = np.arange(bins + 2) * ((mel_high - mel_low) / (bins + 2)) + mel_low
        edges = ((length + 1) * (700 * np.expm1(mels / 2595 * np.log(10))) // rate).astype(int)
        lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]
        j = np.arange(length // 2 + 1)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where(mid > lo, (j - lo) / (mid - lo), j == mid)
            fall = (hi - j) / (hi - mid)
        rising = (lo <= j) & (j <= mid)
        falling = (mid <= j) & (j < hi)
        weights = np.where(falling, fall, np.where(rising, rise, 0.0))
        return ctx.constant(weights.astype(onnx_dtype(attrs.get("output_datatype", 1))))
