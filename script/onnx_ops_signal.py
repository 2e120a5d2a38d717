"""ONNX's signal operators: ``DFT`` and ``STFT`` as one matmul, ``HannWindow``,
``HammingWindow``, ``BlackmanWindow`` from ``R.arange`` and ``R.cos``, ``MelWeightMatrix`` as a constant
computed here from its constant inputs.

DFT and STFT are linear in their input's real and imaginary parts once the lengths, the axis, the
step and the window are known, so the importer asks onnx's reference evaluator for the matrix:
it transforms each basis vector of the transformed axis (with its real/imaginary component) and
the rows of the results are the matrix, applied in float64 as the reference computes."""
from __future__ import annotations

import numpy as np

from .onnx_convert import (OnnxOpConverter, Unsupported, as_dtype, check_size, converter, dims_of, dtype_of,
                           normalize_axis, onnx_dtype, reference, required_value)
from .relax_op_api import op


def _linear_map(ctx, x, axis, op_type, opset, extra, attrs):
    """``x`` transformed along ``axis`` (its last axis holds 1 or 2 components) by the linear map
    the reference computes for ``op_type``: the basis of that axis (every element, every
    component) goes through the reference, giving the matrix that one matmul applies."""
    dims = dims_of(x)
    rank = len(dims)
    n, parts = dims[axis], dims[-1]
    if not isinstance(n, int) or parts not in (1, 2):
        raise Unsupported(f"a transformed axis of length {n} with {parts} components")
    check_size((n * parts) ** 2, f"the basis of a transformed axis of length {n}")
    basis = np.eye(n * parts, dtype="float64").reshape(n * parts, n, parts)
    (image,) = reference(op_type, opset, [basis] + extra, attrs)
    out_shape = image.shape[1:-1]  # (the transformed axis's new extents)
    matrix = image.reshape(n * parts, -1)
    order = [a for a in range(rank - 1) if a != axis]
    lead = [dims[a] for a in order]
    moved = ctx.emit(op.permute_dims(as_dtype(x, "float64"), order + [axis, rank - 1]))
    flat = ctx.emit(op.reshape(moved, lead + [n * parts]))
    mixed = ctx.emit(op.matmul(flat, ctx.constant(matrix)))
    result = ctx.emit(op.reshape(mixed, lead + list(out_shape) + [image.shape[-1]]))
    return result, len(lead)


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
        length = None if length is None else np.asarray(required_value(length, "dft_length"), "int64")
        flags = {k: attrs.get(k, 0) for k in ("inverse", "onesided")}
        # (the reference at opset 20 takes the axis as an input: axis 1 of the basis)
        result, lead = _linear_map(ctx, x, axis, "DFT", 20, [length, np.array(1, "int64")], flags)
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
        extra = [np.asarray(required_value(step, "frame_step"), "int64"),
                 None if window is None else required_value(window, "window").astype("float64"),
                 None if length is None else np.asarray(required_value(length, "frame_length"), "int64")]
        flags = {"onesided": attrs.get("onesided", 1)}
        result, _ = _linear_map(ctx, signal, 1, "STFT", 17, extra, flags)
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
