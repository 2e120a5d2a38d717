"""The Pool rule (lowering/dlight/cpu_pool.py) on what LegalizeOps makes of ``R.nn.max_pool2d``
and ``R.nn.avg_pool2d``: rows in parallel, vectors along a row read contiguously (stride 1),
scalar rows reading the input in place with a stride; equal to numpy and the reference executor."""
from __future__ import annotations

import numpy as np

import tvms
from tvms.lowering.dlight.cpu_pool import Pool
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source
from tvms.target import Target

from test_dlight_conv import AVX2, legalized, only_kernel, relax_module


def pool_reference(x: np.ndarray, kind: str, stride: int) -> np.ndarray:
    """A 3x3 pool with one pixel of padding (an average over the pixels inside only)."""
    fill = -np.inf if kind == "max" else 0.0
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::stride, ::stride]
    if kind == "max":
        return windows.max(axis=(-2, -1))
    inside = np.lib.stride_tricks.sliding_window_view(np.pad(np.ones(x.shape[2:]), 1), (3, 3))[::stride, ::stride]
    return windows.sum(axis=(-2, -1)) / inside.sum(axis=(-2, -1))


def test_pools_equal_numpy_and_the_reference():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 16, 16), dtype=np.float32)
    host = Target("llvm")
    for kind, stride, target in (("avg", 1, host), ("max", 2, AVX2), ("max", 1, AVX2), ("avg", 2, host)):
        out_size = (16 + 2 - 3) // stride + 1
        body = (f"            y = R.nn.{kind}_pool2d(x, pool_size=[3, 3], strides=[{stride}, {stride}], "
                "padding=[1, 1, 1, 1])\n            R.output(y)\n        return y")
        mod = from_source(relax_module(body, 'x: R.Tensor((2, 3, 16, 16), dtype="float32")',
                                       f'R.Tensor((2, 3, {out_size}, {out_size}), dtype="float32")'))
        sch = Pool().apply(only_kernel(legalized(mod)), target, False)
        assert sch is not None, (kind, stride)
        func = sch.mod["main"]
        text = func.script()
        assert "T.parallel" in text and ("T.vectorized" in text) == (stride == 1), text
        expected = pool_reference(x, kind, stride)
        built, ref = np.zeros(expected.shape, np.float32), np.zeros(expected.shape, np.float32)
        tvms.build(func, target="llvm")(x, built)
        run_prim_func(func, x, ref)
        np.testing.assert_allclose(built, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ref, built, rtol=1e-5, atol=1e-5)


def test_long_strided_max_pool_left_to_the_loop_vectorizer():
    """Rows of 16 pixels or more read with a stride: no epilogue, Fallback's serial loop (which
    LLVM vectorizes); with the average's division, rows of the Pool rule still."""
    for kind, expected in (("max", False), ("avg", True)):
        body = (f"            y = R.nn.{kind}_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])\n"
                "            R.output(y)\n        return y")
        mod = from_source(relax_module(body, 'x: R.Tensor((1, 2, 32, 32), dtype="float32")',
                                       'R.Tensor((1, 2, 16, 16), dtype="float32")'))
        assert (Pool().apply(only_kernel(legalized(mod)), Target("llvm"), False) is not None) == expected, kind
