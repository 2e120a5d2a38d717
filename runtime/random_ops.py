"""ONNX's random operators as run-time functions (``script/onnx_ops_random.py`` converts
RandomUniform(Like), RandomNormal(Like), Multinomial, Bernoulli and training-mode Dropout into
``R.call_packed("tvms.random.NAME", ...)`` of these; Bernoulli and Dropout compare a uniform draw
in Relax operators).

A draw's seed is the node's ``seed`` attribute, passed as a last argument: the same seed gives
the same values on every call (a seeded node is a function of its inputs). Without one, each
call draws afresh from a generator seeded once from the operating system's entropy. The calls
are impure (``R.call_packed``), so that no pass folds, lifts or merges two draws."""
from __future__ import annotations

import os
import threading

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .tensor import numpy_dtype_of
from .vm_memory import aligned_empty

_fresh = np.random.default_rng()
_fresh_lock = threading.Lock()  # (a Generator is not safe to share between threads)


def _reseed_in_child() -> None:
    """A forked child's own stream (it would repeat its parent's draws) and lock (the fork may
    have copied it held by another thread)."""
    global _fresh, _fresh_lock
    _fresh, _fresh_lock = np.random.default_rng(), threading.Lock()


os.register_at_fork(after_in_child=_reseed_in_child)


def _draw(seed: tuple, draw) -> np.ndarray:
    """``draw(generator)`` with the generator of ``seed`` (empty: the shared fresh one)."""
    if not seed:
        with _fresh_lock:
            return draw(_fresh)
    if len(seed) != 1:
        raise TVMSError(f"tvms.random: expected at most one seed, got {len(seed)}")
    # (ONNX's seed is a float: its bits name the stream, so 0.5 and 1.0 differ)
    bits = np.asarray(seed[0], np.float64).view(np.uint64)
    return draw(np.random.default_rng(int(bits)))


def _shape(shape_or_like) -> tuple:
    """The shape of the draw: a shape, or that of a tensor (the ``Like`` forms)."""
    shape = getattr(shape_or_like, "shape", shape_or_like)
    return tuple(int(d) for d in shape)


def _result(values: np.ndarray, dtype: str) -> np.ndarray:
    out = aligned_empty(values.shape, numpy_dtype_of(dtype))
    out[...] = values  # (float16 and bfloat16 are drawn in float64 and rounded)
    return out


@register_func("tvms.random.uniform")
def uniform(shape_or_like, dtype: str, low: float, high: float, *seed: float) -> np.ndarray:
    """Values uniform on [low, high) of ``dtype``."""
    shape = _shape(shape_or_like)
    native = dtype if dtype in ("float32", "float64") else "float64"
    out = _result(_draw(seed, lambda g: g.random(shape, native) * (high - low) + low), dtype)
    # (a value just below high rounds to high in the output's dtype: the largest one below it)
    top = np.nextafter(out.dtype.type(high), out.dtype.type(-np.inf))
    if top >= out.dtype.type(low):
        np.minimum(out, top, out=out)
    return out


@register_func("tvms.random.normal")
def normal(shape_or_like, dtype: str, mean: float, scale: float, *seed: float) -> np.ndarray:
    """Values of the normal distribution of ``mean`` and standard deviation ``scale``."""
    shape = _shape(shape_or_like)
    native = dtype if dtype in ("float32", "float64") else "float64"
    return _result(_draw(seed, lambda g: g.standard_normal(shape, native) * scale + mean), dtype)


@register_func("tvms.random.multinomial")
def multinomial(logits: np.ndarray, dtype: str, samples: int, *seed: float) -> np.ndarray:
    """ONNX Multinomial: for each row of ``logits`` (batch, classes) of unnormalized log
    probabilities, ``samples`` class indices drawn with probabilities softmax(row)."""
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise TVMSError(f"tvms.random.multinomial: expected logits of shape (batch, classes), got {logits.shape}")
    rows = logits.astype(np.float64)
    cumulative = np.cumsum(np.exp(rows - rows.max(axis=1, keepdims=True)), axis=1)
    cumulative /= cumulative[:, -1:]

    def draw(g):  # (the class: how many cumulative probabilities a uniform draw reaches)
        u = g.random((rows.shape[0], int(samples)))
        found = [np.searchsorted(c, row, side="right") for c, row in zip(cumulative, u)]
        return np.minimum(np.array(found, np.int64).reshape(u.shape), rows.shape[1] - 1)
    return _result(_draw(seed, draw), dtype)
