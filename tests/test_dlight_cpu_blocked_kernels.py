"""The default CPU schedules of the kernels BlockChannels puts between the convolutions, on
channel-blocked data (NCHW{b}c: b = 16 on this AVX-512 host, 8 on AVX2): max and average pooling
(with padding, count_include_pad either way, ceil_mode), a mean over H and W, and the
layout_transform kernels to and from NCHW; compiled by ``tvms.compile`` and equal to numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.lowering.dlight.cpu_pool import Pool
from tvms.lowering.dlight.cpu_shuffle import ChannelBlocks
from tvms.script import from_source
from tvms.target import Target

from test_dlight_conv import AVX2, legalized, only_kernel, relax_module

HOST = Target("llvm")
TARGETS = [pytest.param(HOST, 16, id="avx512"), pytest.param(AVX2, 8, id="avx2")]


def to_blocks(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def from_blocks(x: np.ndarray) -> np.ndarray:
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def pool_reference(x: np.ndarray, kind: str, k: int, s: int, pad: int, ceil: bool, include_pad: bool) -> np.ndarray:
    """ONNX's (and PyTorch's) pooling of NCHW ``x``: a ceil-mode window that starts in the
    right padding is dropped; an average with ``include_pad`` divides by the window's part inside
    the padded input (not the part past it), else by its part inside ``x``."""
    size = x.shape[2]
    span = size + 2 * pad - k
    out = -(-span // s) + 1 if ceil else span // s + 1
    if ceil and (out - 1) * s >= size + pad:
        out -= 1
    result = np.empty(x.shape[:2] + (out, out), np.float32)
    for i in range(out):
        for j in range(out):
            y0, x0 = i * s - pad, j * s - pad
            y1, x1 = min(y0 + k, size + pad), min(x0 + k, size + pad)
            window = x[:, :, max(y0, 0):min(y1, size), max(x0, 0):min(x1, size)]
            if kind == "max":
                result[:, :, i, j] = window.max(axis=(2, 3))
            else:
                count = (y1 - y0) * (x1 - x0) if include_pad else window.shape[2] * window.shape[3]
                result[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return result


def run(mod: tvms.IRModule, target: Target, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvms.compile(mod, target), tvms.cpu())
    return vm["main"](tvms.nd.array(x)).numpy()


def unary_module(call: str, shape: tuple, out_shape: tuple) -> tvms.IRModule:
    body = f"            y = {call}\n            R.output(y)\n        return y"
    return from_source(relax_module(body, f'x: R.Tensor({shape}, dtype="float32")',
                                    f'R.Tensor({out_shape}, dtype="float32")'))


POOLS = [  # kind, size, window, stride, padding, ceil_mode, count_include_pad
    ("max", 13, 3, 2, 0, False, False), ("max", 12, 3, 2, 1, False, False), ("max", 12, 3, 2, 0, True, False),
    ("avg", 10, 3, 1, 1, False, False), ("avg", 10, 3, 1, 1, False, True), ("avg", 12, 3, 2, 1, True, True),
    ("avg", 11, 3, 2, 1, True, False), ("avg", 7, 7, 1, 0, False, False),
]


@pytest.mark.parametrize("target,b", TARGETS)
@pytest.mark.parametrize("kind,size,k,s,pad,ceil,include_pad", POOLS)
def test_blocked_pool_equals_numpy(target, b, kind, size, k, s, pad, ceil, include_pad):
    rng = np.random.default_rng(size + k)
    x = rng.standard_normal((1, 2 * b, size, size), dtype=np.float32)
    expected = pool_reference(x, kind, k, s, pad, ceil, include_pad)
    out = expected.shape[2]
    layout = f"NCHW{b}c"
    call = (f"R.nn.{kind}_pool2d(x, pool_size=[{k}, {k}], strides=[{s}, {s}], padding=[{pad}, {pad}, {pad}, {pad}], "
            f"ceil_mode={ceil}, count_include_pad={include_pad}, layout=\"{layout}\", out_layout=\"{layout}\")")
    mod = unary_module(call, (1, 2, size, size, b), (1, 2, out, out, b))
    sch = Pool().apply(only_kernel(legalized(mod)), target, False)
    assert sch is not None
    text = sch.mod["main"].script()  # a tile of pixels in local vectors of the lanes
    assert f"T.vectorized(T.int64({b}))" in text and 'scope="local"' in text
    assert "pad_temp" not in text  # (the padding read in place)
    np.testing.assert_allclose(from_blocks(run(mod, target, to_blocks(x, b))), expected, rtol=1e-5, atol=1e-5)


def test_squeezenet_pool_in_rows_of_tiles():
    """128 channels of 55x55 -> 27x27: (block, output row) in parallel, tiles of 3 pixels (the
    largest divisor of 27 within 8 accumulators) unrolled, whose accumulators stay in registers."""
    mod = unary_module('R.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], layout="NCHW16c", out_layout="NCHW16c")',
                       (1, 8, 55, 55, 16), (1, 8, 27, 27, 16))
    text = Pool().apply(only_kernel(legalized(mod)), HOST, False).mod["main"].script()
    assert "T.parallel(T.int64(216))" in text and text.count("T.unroll(T.int64(3))") == 3
    assert "T.vectorized(T.int64(16))" in text


@pytest.mark.parametrize("target,lanes", [(AVX2, 8), (Target("llvm -mcpu=x86-64 -mattr=+sse2"), 4)],
                         ids=["avx2", "x86-64"])
def test_blocks_of_several_vectors(target, lanes):
    """Blocks of 16 lanes on a target of 8 or 4: whole vectors a pixel, unrolled; and the layout
    transforms in tiles of such vectors."""
    x = np.random.default_rng(3).standard_normal((1, 32, 9, 9), dtype=np.float32)
    mod = unary_module('R.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], '
                       'layout="NCHW16c", out_layout="NCHW16c")', (1, 2, 9, 9, 16), (1, 2, 5, 5, 16))
    text = Pool().apply(only_kernel(legalized(mod)), target, False).mod["main"].script()
    assert f"T.vectorized(T.int64({lanes}))" in text
    np.testing.assert_allclose(from_blocks(run(mod, target, to_blocks(x, 16))),
                               pool_reference(x, "max", 3, 2, 1, False, False), rtol=1e-6)
    np.testing.assert_array_equal(run(relayout_module(32, 9, 8, 16, True), target, x[..., :8].copy()),
                                  to_blocks(x[..., :8], 16))


@pytest.mark.parametrize("target,b", TARGETS)
@pytest.mark.parametrize("op", ["mean", "max"])
def test_blocked_mean_over_the_plane(target, b, op):
    x = np.random.default_rng(4).standard_normal((1, 3 * b, 13, 13), dtype=np.float32)
    mod = unary_module(f"R.{op}(x, axis=[2, 3], keepdims=True)", (1, 3, 13, 13, b), (1, 3, 1, 1, b))
    text = Pool().apply(only_kernel(legalized(mod)), target, False).mod["main"].script()
    assert "T.parallel" not in text and f"T.vectorized(T.int64({b}))" in text  # (too little work to share)
    expected = getattr(np, op)(x, axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(from_blocks(run(mod, target, to_blocks(x, b))), expected, rtol=1e-5, atol=1e-6)


def relayout_module(c: int, h: int, w: int, b: int, to_blocks_: bool) -> tvms.IRModule:
    plain, blocked = (1, c, h, w), (1, c // b, h, w, b)
    index_map = (f"lambda n, c, y, x: (n, c // {b}, y, x, c % {b})" if to_blocks_ else
                 f"lambda n, cb, y, x, lane: (n, cb * {b} + lane, y, x)")
    return unary_module(f"R.layout_transform(x, index_map={index_map})", plain if to_blocks_ else blocked,
                        blocked if to_blocks_ else plain)


@pytest.mark.parametrize("target,b", TARGETS)
@pytest.mark.parametrize("to_blocks_", [True, False], ids=["to_blocks", "from_blocks"])
@pytest.mark.parametrize("w", [16, 12, 13])
def test_layout_transform_equals_numpy(target, b, to_blocks_, w):
    """Rows of (n, block, y) in parallel when large; a tile of a row (the widest power of two up
    to a vector that divides it) read in vectors into registers and written in vectors the other
    way; a row that no such tile of 4 or more divides is left to the Elementwise rule."""
    c, h = 32 * b, 12
    mod = relayout_module(c, h, w, b, to_blocks_)
    sch = ChannelBlocks().apply(only_kernel(legalized(mod)), target, False)
    width = min(w & -w, b)
    assert (sch is not None) == (width >= 4)
    if sch is not None:
        text = sch.mod["main"].script()
        vectors = sorted(int(v) for v in re.findall(r"T\.vectorized\(T\.int64\((\d+)\)\)", text))
        assert 'scope="local"' in text and vectors == sorted([width, b]) and "T.parallel" in text
    x = np.random.default_rng(w).standard_normal((1, c, h, w), dtype=np.float32)
    if to_blocks_:
        np.testing.assert_array_equal(run(mod, target, x), to_blocks(x, b))
    else:
        np.testing.assert_array_equal(run(mod, target, to_blocks(x, b)), x)
