"""The default CPU rules on what legalized Relax convolutions and batched matmuls become: the
Conv2D rule (lowering/dlight/cpu_conv.py) on ``R.nn.conv2d`` NCHW (3x3 stride 1, and any window,
stride, dilation and groups), which functions it takes,
that it computes what numpy and the reference executor compute and marks its weight packing;
the Matmul rule on ``R.matmul`` with batch dimensions."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tvms
from tvms.lowering.dlight import ApplyDefaultSchedule
from tvms.lowering.dlight.cpu import default_rules
from tvms.lowering.dlight.cpu_conv import Conv2D, channel_tile, pixel_tile, plane_tile
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source
from tvms.target import Target

from test_dlight_matmul import matmul_text

AVX2 = Target("llvm -mcpu=haswell -mattr=+avx2,+fma")
MARK = 'T.block_attr({"meta_schedule.layout_rewrite_preproc": T.bool(True)})'


def relax_module(body: str, params: str, ret: str) -> str:
    return f"""# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main({params}) -> {ret}:
        with R.dataflow():
{body}
"""


def conv_module(n: int, c: int, size: int, f: int, stride: int = 1, relu: bool = False) -> tvms.IRModule:
    out = (size + 2 - 3) // stride + 1
    tensor = f'R.Tensor(({n}, {f}, {out}, {out}), dtype="float32")'
    body = (f"            y = R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[1, 1, 1, 1])\n"
            + ("            z = R.nn.relu(y)\n            R.output(z)\n        return z" if relu else
               "            R.output(y)\n        return y"))
    params = f'x: R.Tensor(({n}, {c}, {size}, {size}), dtype="float32"), w: R.Tensor(({f}, {c}, 3, 3), dtype="float32")'
    return from_source(relax_module(body, params, tensor))


def legalized(mod: tvms.IRModule) -> tvms.IRModule:
    return tvms.relax.get_pipeline("zero")(mod)


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,fcij->nfyx", windows, w)


def only_kernel(mod: tvms.IRModule):
    (name,) = [gv for gv, f in mod.functions.items() if not hasattr(f, "ret_struct_info")]
    return mod[name]


@pytest.mark.parametrize("target", [Target("llvm"), AVX2], ids=["host", "avx2"])
def test_conv2d_equals_numpy_and_the_reference(target):
    """A small ResNet-like layer (output channels the tile does not divide), with a fused relu."""
    mod = legalized(conv_module(2, 4, 8, 20, relu=True))
    func = only_kernel(mod)
    sch = Conv2D().apply(func, target, False)
    assert sch is not None, "the rule declined a conv2d"
    out = sch.mod["main"]
    text = out.script()
    assert from_source(text).script() == text
    assert text.count(MARK) == 1 and "T.parallel" in text and 'scope="local"' in text
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8, 8), dtype=np.float32)
    w = rng.standard_normal((20, 4, 3, 3), dtype=np.float32)
    built, ref = np.zeros((2, 20, 8, 8), np.float32), np.zeros((2, 20, 8, 8), np.float32)
    tvms.build(out, target="llvm")(x, w, built)
    run_prim_func(out, x, w, ref)
    expected = np.maximum(conv_reference(x, w), 0)
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)


def test_resnet_layer_through_the_default_rules():
    """56x56x64 -> 64, 3x3: the Conv2D rule is the one default_rules pick, and it is right."""
    mod = legalized(conv_module(1, 64, 56, 64))
    with Target("llvm"):
        out = ApplyDefaultSchedule(*default_rules())(mod)
    func = only_kernel(out)
    assert func.script().count(MARK) == 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    y = np.zeros((1, 64, 56, 56), np.float32)
    tvms.build(func, target="llvm")(x, w, y)
    np.testing.assert_allclose(y, conv_reference(x, w), rtol=1e-3, atol=1e-3)


def test_channel_tile_fills_the_registers():
    assert channel_tile(64, 56, 16, 32) == (8, 2, 16)  # AVX-512: 8 pixels x 2 zmm of channels
    assert channel_tile(64, 56, 8, 16) == (4, 2, 8)  # AVX2: 4 pixels x 2 ymm
    assert channel_tile(128, 27, 16, 32) == (9, 2, 16)  # the most pixels per weight load (not 3 x 8)
    assert channel_tile(256, 13, 16, 32) == (13, 1, 16)  # a row of 13 (not 1 pixel x 16 zmm)
    assert channel_tile(64, 55, 16, 32) == (5, 4, 16)  # 11 x 2 would spill
    assert channel_tile(64, 111, 16, 32) == (3, 4, 16)  # SqueezeNet's first conv (k = 27): not 3 x 2
    assert channel_tile(1000, 13, 16, 32) == (13, 1, 8)  # 1000 channels: ymm
    assert channel_tile(68, 28, 16, 32) == (14, 1, 4)  # a group of 68 channels: xmm
    assert channel_tile(1, 56, 16, 32) is None  # depthwise: no vector of channels


def window_conv_module(c: int, f: int, size: int, k: int, stride: int, pad: int, dilation: int,
                       groups: int) -> tvms.IRModule:
    out = (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    body = (f"            y = R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[{pad}, {pad}, {pad}, {pad}], "
            f"dilation=[{dilation}, {dilation}], groups={groups})\n"
            "            z = R.add(y, b)\n            R.output(z)\n        return z")
    params = (f'x: R.Tensor((1, {c}, {size}, {size}), dtype="float32"), '
              f'w: R.Tensor(({f}, {c // groups}, {k}, {k}), dtype="float32"), b: R.Tensor(({f}, 1, 1), dtype="float32")')
    return from_source(relax_module(body, params, f'R.Tensor((1, {f}, {out}, {out}), dtype="float32")'))


def window_conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int,
                          groups: int) -> np.ndarray:
    k = w.shape[-1]
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    span = dilation * (k - 1) + 1
    windows = np.lib.stride_tricks.sliding_window_view(padded, (span, span), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride, ::dilation, ::dilation]
    fg, cg = w.shape[0] // groups, w.shape[1]
    return np.concatenate([np.einsum("ncyxij,fcij->nfyx", windows[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg])
                           for g in range(groups)], axis=1)


def check_window_conv(out, c: int, f: int, size: int, k: int, stride: int, pad: int, groups: int,
                      rng: np.random.Generator, reference: bool = True) -> None:
    """The scheduled ``window_conv_module`` ``out``, compiled, equals numpy on random inputs, and
    (``reference``) the reference executor computes what the compiled kernel does."""
    x = rng.standard_normal((1, c, size, size), dtype=np.float32)
    w = rng.standard_normal((f, c // groups, k, k), dtype=np.float32)
    b = rng.standard_normal((f, 1, 1), dtype=np.float32)
    expected = window_conv_reference(x, w, stride, pad, 1, groups) + b
    built, ref = np.zeros(expected.shape, np.float32), np.zeros(expected.shape, np.float32)
    tvms.build(out, target="llvm")(x, w, b, built)
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)
    if reference:
        run_prim_func(out, x, w, b, ref)
        np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)


def test_any_window_equals_numpy_and_the_reference():
    """Strides, 1x1, dilation, groups, a 7x7 and an 11x11 window, a depthwise one: the plans,
    with the bias epilogue inlined, equal numpy, and the reference executor computes what the
    compiled kernel does. Scheduled for the host and for AVX2 in turn."""
    rng = np.random.default_rng(3)
    cases = [(8, 16, 9, 3, 2, 1, 1, 2), (6, 24, 7, 1, 1, 0, 1, 1), (4, 8, 9, 3, 1, 2, 2, 1),
             (3, 16, 13, 7, 2, 3, 1, 1), (3, 8, 19, 11, 4, 0, 1, 1), (8, 8, 9, 3, 2, 1, 1, 8)]
    for case, (c, f, size, k, stride, pad, dilation, groups) in enumerate(cases):
        mod = legalized(window_conv_module(c, f, size, k, stride, pad, dilation, groups))
        sch = Conv2D().apply(only_kernel(mod), AVX2 if case % 2 else Target("llvm"), False)
        assert sch is not None, (c, f, size, k, stride, pad, dilation, groups)
        out = sch.mod["main"]
        text = out.script()
        depthwise = groups == c
        assert text.count(MARK) == (0 if depthwise else 1) and 'scope="local"' in text
        assert "T.vectorized" in text or depthwise  # (a row of 5 pixels: no vector divides it)
        x = rng.standard_normal((1, c, size, size), dtype=np.float32)
        w = rng.standard_normal((f, c // groups, k, k), dtype=np.float32)
        b = rng.standard_normal((f, 1, 1), dtype=np.float32)
        expected = window_conv_reference(x, w, stride, pad, dilation, groups) + b
        built, ref = np.zeros(expected.shape, np.float32), np.zeros(expected.shape, np.float32)
        tvms.build(out, target="llvm")(x, w, b, built)
        np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)
        if k < 7:  # (the reference executor is slow on the large windows)
            run_prim_func(out, x, w, b, ref)
            np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)


def test_short_reduction_runs_vectors_along_the_row():
    """An RGB image's first conv (3x3x3: 27 multiply-adds an output) and two other short
    reductions: the pixel-vector plan (vectors of output pixels ``xx_2``, at stride 2 too: the
    strided input loads), with the bias inlined, equals numpy and the reference executor. Rows
    of 16 pixels: one vector of 16 for the host with AVX-512, two of 8 with AVX2."""
    rng = np.random.default_rng(12)
    for c, f, size, stride, pad, target in ((3, 24, 32, 2, 1, Target("llvm")), (3, 24, 32, 2, 1, AVX2),
                                            (3, 12, 18, 1, 0, AVX2), (2, 10, 16, 1, 1, Target("llvm"))):
        mod = legalized(window_conv_module(c, f, size, 3, stride, pad, 1, 1))
        out = Conv2D().apply(only_kernel(mod), target, False).mod["main"]
        text = out.script()
        assert "for xx_2 in T.vectorized" in text and text.count(MARK) == 1, text
        assert max(int(n) for n in re.findall(r"T.vectorized\(T.int64\((\d+)\)\)", text)) <= 16  # (a store a vector)
        check_window_conv(out, c, f, size, 3, stride, pad, 1, rng)


def test_grouped_1x1_runs_vectors_of_pixels():
    """A 1x1 conv of 4 groups of 6 -> 28 channels (vectors of 4 channels at best) on 8x8 planes:
    the plane-vector plan (tiles of whole rows in vectors of the target's lanes, the epilogue
    inlined, no padding pass) equals numpy and the reference executor, for AVX-512 and AVX2."""
    rng = np.random.default_rng(13)
    for target, lanes in ((Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f"), 16), (AVX2, 8)):
        mod = legalized(window_conv_module(24, 112, 8, 1, 1, 0, 1, 4))
        out = Conv2D().apply(only_kernel(mod), target, False).mod["main"]
        text = out.script()
        assert f"T.vectorized(T.int64({lanes}))" in text and "yy_1_xx_fused" in text and "pad_temp" not in text, text
        assert text.count(MARK) == 1
        check_window_conv(out, 24, 112, 8, 1, 1, 0, 4, rng)
    padded = legalized(window_conv_module(24, 112, 8, 1, 1, 1, 1, 4))  # (a padding pass: not in place)
    text = Conv2D().apply(only_kernel(padded), Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f"), False).mod.script()
    assert "yy_1_xx_fused" not in text


SYMBOLIC_CHANNELS = """# from tvm.script import tir as T

@T.prim_func(private=True)
def main(var_x: T.handle, w: T.Buffer((T.int64(112), T.int64(6), T.int64(1), T.int64(1)), "float32"), y: T.Buffer((T.int64(1), T.int64(112), T.int64(8), T.int64(8)), "float32")):
    T.func_attr({"tir.noalias": True})
    c = T.int64()
    x = T.match_buffer(var_x, (T.int64(1), c, T.int64(8), T.int64(8)))
    for nn, ff, yy, xx, rc, ry, rx in T.grid(T.int64(1), T.int64(112), T.int64(8), T.int64(8), T.int64(6), T.int64(1), T.int64(1)):
        with T.block("conv"):
            v_nn, v_ff, v_yy, v_xx, v_rc, v_ry, v_rx = T.axis.remap("SSSSRRR", [nn, ff, yy, xx, rc, ry, rx])
            T.reads(x[v_nn, v_ff // T.int64(28) * T.int64(6) + v_rc, v_yy + v_ry, v_xx + v_rx], w[v_ff, v_rc, v_ry, v_rx])
            T.writes(y[v_nn, v_ff, v_yy, v_xx])
            with T.init():
                y[v_nn, v_ff, v_yy, v_xx] = T.float32(0.0)
            y[v_nn, v_ff, v_yy, v_xx] = y[v_nn, v_ff, v_yy, v_xx] + x[v_nn, v_ff // T.int64(28) * T.int64(6) + v_rc, v_yy + v_ry, v_xx + v_rx] * w[v_ff, v_rc, v_ry, v_rx]
"""


def test_input_channels_that_make_no_whole_groups_are_declined():
    """Hand-written TIR the rule cannot group: a symbolic input channel count (the plane plan's
    group count asked for a constant: TypeError), and 4 input channels against a reduction of 6
    (no whole group: ZeroDivisionError). The rule declines both."""
    skylake = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    assert Conv2D().apply(from_source(SYMBOLIC_CHANNELS), skylake, False) is None
    four = SYMBOLIC_CHANNELS.replace("    c = T.int64()\n", "").replace("(T.int64(1), c, T.int64(8)",
                                                                    "(T.int64(1), T.int64(4), T.int64(8)")
    assert "c = T.int64()" not in four and "T.int64(4), T.int64(8)" in four
    assert Conv2D().apply(from_source(four), skylake, False) is None


def test_plane_tile_takes_rows_that_fill_vectors():
    skylake = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    assert plane_tile(4, 34, 34, 28, 28, skylake) == (2, 4, 16)  # ShuffleNet: 4 rows, 7 vectors, 2 channels
    assert plane_tile(4, 6, 28, 56, 56, skylake) == (2, 2, 16)
    assert plane_tile(4, 68, 68, 14, 14, skylake) is None  # (no count of rows of 14 fills vectors of 16)
    assert plane_tile(4, 136, 136, 7, 7, skylake) is None
    assert plane_tile(4, 16, 32, 28, 28, skylake) is None  # (whole vectors of channels: as fast that way)


def test_pixel_tile_fills_the_registers():
    assert pixel_tile(24, 1, 32) == (24, 1)  # ShuffleNet's first conv: all 24 channels per input vector
    assert pixel_tile(24, 2, 16) == (8, 1)  # AVX2: 8 accumulators (8 x 1 + 1 + 1 within 16 - 4)
    assert pixel_tile(64, 7, 32) == (16, 1)  # 32 x 1 would spill
    assert pixel_tile(5, 4, 32) == (5, 4)  # few channels: more vectors of pixels


def test_depthwise_rows_in_vectors_of_any_width():
    """A 3x3 stride-1 depthwise conv: rows of 14, 10 and 7 pixels in one vector each (the
    largest divisor of the row within the target's lanes: 14, 10, 7 on AVX-512; 7, 5, 7 on AVX2),
    the padding read in place (no padding pass); equal to numpy and the reference executor."""
    rng = np.random.default_rng(11)
    for size, target, width in ((14, Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f"), 14), (14, AVX2, 7),
                                (10, Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f"), 10), (10, AVX2, 5),
                                (7, AVX2, 7)):
        mod = legalized(window_conv_module(4, 4, size, 3, 1, 1, 1, 4))
        out = Conv2D().apply(only_kernel(mod), target, False).mod["main"]
        text = out.script()
        assert f"T.vectorized(T.int64({width}))" in text and "pad_temp" not in text, (size, width, text)
        check_window_conv(out, 4, 4, size, 3, 1, 1, 4, rng, reference=size == 7)


def test_a_conv_is_matched_once(monkeypatch):
    """The rule matches the function once (the first plan takes the match), twice for the
    depthwise conv (the channel-vector plan declines it on its schedule first)."""
    from tvms.lowering.dlight import cpu_conv

    calls = []
    match = cpu_conv.match_conv
    monkeypatch.setattr(cpu_conv, "match_conv", lambda func, matcher=None: calls.append(func) or match(func, matcher))
    for groups, matches in ((1, 1), (8, 2)):
        calls.clear()
        kernel = only_kernel(legalized(window_conv_module(8, 8, 9, 3, 1, 1, 1, groups)))
        assert Conv2D().apply(kernel, Target("llvm"), False) is not None and len(calls) == matches


def test_declines_matmuls():
    matmul = from_source(matmul_text(64, 64, 64))
    assert Conv2D().apply(matmul, Target("llvm"), False) is None


def test_batched_matmul_through_the_default_rules():
    """``R.matmul`` with batch dimensions on both sides, and on the left only (B shared)."""
    params = ('x: R.Tensor((2, 20, 16), dtype="float32"), w: R.Tensor((2, 16, 40), dtype="float32"), '
              'v: R.Tensor((16, 24), dtype="float32")')
    ret = 'R.Tuple(R.Tensor((2, 20, 40), dtype="float32"), R.Tensor((2, 20, 24), dtype="float32"))'
    body = "            y = R.matmul(x, w)\n            z = R.matmul(x, v)\n            R.output(y, z)\n        return (y, z)"
    mod = legalized(from_source(relax_module(body, params, ret)))
    with Target("llvm"):
        out = ApplyDefaultSchedule(*default_rules())(mod)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 20, 16), dtype=np.float32)
    for name, b in (("matmul", rng.standard_normal((2, 16, 40), dtype=np.float32)),
                    ("matmul1", rng.standard_normal((16, 24), dtype=np.float32))):
        func = out[name]
        text = func.script()
        assert 'scope="local"' in text, name  # the Matmul rule's register tile
        y = np.zeros((2, 20, b.shape[-1]), np.float32)
        tvms.build(func, target="llvm")(x, b, y)
        np.testing.assert_allclose(y, x @ b, rtol=1e-4, atol=1e-4)


def test_constant_weights_are_packed_at_compile_time():
    """A weight bound as a constant (as an imported model's are): tvms.compile runs the Conv2D
    rule's packing once, at compile time, so the program calls only the packed convolution; a
    weight that is a parameter is packed at each call. Both equal numpy."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8, 9, 9), dtype=np.float32)
    w = rng.standard_normal((16, 4, 3, 3), dtype=np.float32)
    b = rng.standard_normal((16, 1, 1), dtype=np.float32)
    expected = window_conv_reference(x, w, 2, 1, 1, 2) + b
    mod = window_conv_module(8, 16, 9, 3, 2, 1, 1, 2)
    bound = tvms.relax.transform.BindParams("main", {"w": w, "b": b})(mod)
    vm = tvms.relax.VirtualMachine(tvms.compile(bound, target="llvm"), tvms.cpu())
    (main,) = [f for f in vm.executable.program.functions if f.name == "main"]
    called = [inst.func for inst in main.code if getattr(inst, "kind", None) == "kernel"]
    assert len(called) == 1 and called[0].endswith("_prepacked"), called
    np.testing.assert_allclose(vm["main"](x).numpy(), expected, rtol=1e-4, atol=1e-4)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())  # (parameters: packed per call)
    np.testing.assert_allclose(vm["main"](x, w, b).numpy(), expected, rtol=1e-4, atol=1e-4)
