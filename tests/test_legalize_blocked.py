"""conv2d and pooling on channel-blocked data (NCHW16c), legalized and compiled, against the numpy
reference of the same operators on plain NCHW data."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

BLOCK = 16

MODULE = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({x}, dtype="float32"), w: R.Tensor({w}, dtype="float32")) -> R.Tensor({y}, dtype="float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w, strides=[{s}, {s}], padding=[{p}, {p}, {p}, {p}], data_layout="{data}", kernel_layout="{kernel}", out_layout="{out}")
            gv = R.nn.max_pool2d(c, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], layout="{out}")
            R.output(gv)
        return gv
"""


def block_data(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c // BLOCK, BLOCK, h, w).transpose(0, 1, 3, 4, 2)


def block_kernel(w: np.ndarray, inputs_blocked: bool) -> np.ndarray:
    o, i, h, k = w.shape
    if not inputs_blocked:  # OIHW16o
        return w.reshape(o // BLOCK, BLOCK, i, h, k).transpose(0, 2, 3, 4, 1)
    return w.reshape(o // BLOCK, BLOCK, i // BLOCK, BLOCK, h, k).transpose(0, 2, 4, 5, 3, 1)  # OIHW16i16o


def module(c: int, f: int, h: int, k: int, s: int, blocked_input: bool, blocked: bool) -> tuple:
    p = k // 2
    conv = (h + 2 * p - k) // s + 1
    pooled = (conv - 1) // 2 + 1
    if blocked:
        x = (1, c // BLOCK, h, h, BLOCK) if blocked_input else (1, c, h, h)
        w = (f // BLOCK, c // BLOCK, k, k, BLOCK, BLOCK) if blocked_input else (f // BLOCK, c, k, k, BLOCK)
        layouts = dict(data="NCHW16c" if blocked_input else "NCHW",
                       kernel="OIHW16i16o" if blocked_input else "OIHW16o", out="NCHW16c")
        y = (1, f // BLOCK, pooled, pooled, BLOCK)
    else:
        x, w, y = (1, c, h, h), (f, c, k, k), (1, f, pooled, pooled)
        layouts = dict(data="NCHW", kernel="OIHW", out="NCHW")
    return from_source(MODULE.format(x=x, w=w, y=y, s=s, p=p, **layouts))


@pytest.mark.parametrize("c, f, h, k, s, blocked_input", [
    (32, 32, 9, 3, 1, True),    # 3x3, padded
    (32, 48, 7, 1, 1, True),    # 1x1
    (3, 32, 10, 3, 2, False),   # a first layer: plain input, blocked output, strided
])
def test_blocked_conv_and_pool_compute_the_plain_ones(c, f, h, k, s, blocked_input):
    rng = np.random.default_rng(0)
    x = rng.random((1, c, h, h), dtype=np.float32)
    w = rng.random((f, c, k, k), dtype=np.float32) - 0.5
    expected = np.asarray(run_relax(module(c, f, h, k, s, blocked_input, False), "main", x, w))
    xb = block_data(x) if blocked_input else x
    wb = block_kernel(w, blocked_input)
    blocked = module(c, f, h, k, s, blocked_input, True)
    np.testing.assert_allclose(np.asarray(run_relax(blocked, "main", xb, wb)), block_data(expected), rtol=1e-5)
    vm = relax.VirtualMachine(tvms.compile(blocked, "llvm"), tvms.cpu())
    out = vm["main"](tvms.nd.array(np.ascontiguousarray(xb)), tvms.nd.array(np.ascontiguousarray(wb))).numpy()
    np.testing.assert_allclose(out, block_data(expected), rtol=1e-4, atol=1e-4)


def test_a_blocked_conv_with_an_unblocked_kernel_layout_is_left_unlegalized():
    text = MODULE.format(x=(1, 2, 8, 8, 16), w=(32, 32, 3, 3), y=(1, 2, 4, 4, 16), s=1, p=1,
                         data="NCHW16c", kernel="OIHW", out="NCHW16c")
    legalized = relax.transform.LegalizeOps()(from_source(text))
    assert "R.nn.conv2d" in legalized.script()
