"""The Conv2DBlocked rule (lowering/dlight/cpu_conv_blocked.py) on conv2d in NCHW16c as topi's
``conv2d_NCHWc`` computes it (built here with ``tvms.te``): which functions it takes, that what
it builds computes what numpy computes on AVX-512 and AVX2 hosts, and what its schedule does."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms import te
from tvms.ir.expr import const
from tvms.lowering.dlight import ApplyDefaultSchedule
from tvms.lowering.dlight.cpu import default_rules
from tvms.lowering.dlight.cpu_conv_blocked import Conv2DBlocked
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source
from tvms.target import Target

from test_dlight_conv import AVX2, conv_module, legalized, only_kernel, relax_module, window_conv_module

B = 16  # channels of a block


def i64(v: int):
    return const(v, "int64")


def blocked_conv(c: int, f: int, size: int, k: int, stride: int, pad: int, plain: bool = False,
                 epilogue: tuple = (), groups: int = 1, block: int = B) -> tvms.tirx.PrimFunc:
    """conv2d_NCHWc as topi writes it (int64 indices, as the legalization gives): a blocked
    input (or a ``plain`` NCHW one), weights [F / b, C / b, k, k, b i, b o] (b = ``block``),
    ``epilogue`` of "bias", "residual", "relu", in that order, each its own block."""
    out = (size + 2 * pad - k) // stride + 1
    if plain:
        data = te.placeholder((i64(1), i64(c), i64(size), i64(size)), name="data")
        kernel = te.placeholder((i64(f // block), i64(c), i64(k), i64(k), i64(block)), name="kernel")
    else:
        data = te.placeholder((i64(1), i64(c // block), i64(size), i64(size), i64(block)), name="data")
        kernel = te.placeholder((i64(f // block), i64(c // block // groups), i64(k), i64(k), i64(block), i64(block)),
                                name="kernel")
    padded = data
    if pad:
        def inside(n, cc, y, x, *lane):
            within = te.all(y >= pad, y < size + pad, x >= pad, x < size + pad)
            return te.if_then_else(within, data[(n, cc, y - pad, x - pad, *lane)], const(0.0, "float32"))
        shape = [*data.shape[:2], i64(size + 2 * pad), i64(size + 2 * pad), *data.shape[4:]]
        padded = te.compute(shape, inside, name="data_pad")
    ic = te.reduce_axis((i64(0), i64(c // groups)), name="ic")
    kh, kw = te.reduce_axis((i64(0), i64(k)), name="kh"), te.reduce_axis((i64(0), i64(k)), name="kw")
    if plain:
        def body(n, fo, y, x, fi):
            return te.sum(padded[n, ic, y * stride + kh, x * stride + kw] * kernel[fo, ic, kh, kw, fi],
                          axis=[ic, kh, kw])
    else:
        per_group = f // block // groups

        def body(n, fo, y, x, fi):
            chunk = fo // per_group * (c // block // groups) + ic // block if groups > 1 else ic // block
            return te.sum(padded[n, chunk, y * stride + kh, x * stride + kw, ic % block]
                          * kernel[fo, ic // block, kh, kw, ic % block, fi], axis=[ic, kh, kw])
    y = te.compute((i64(1), i64(f // block), i64(out), i64(out), i64(block)), body, name="conv2d_NCHWc")
    args = [data, kernel]
    for name in epilogue:
        prev = y
        if name == "bias":
            bias = te.placeholder((i64(1), i64(f // block), i64(1), i64(1), i64(block)), name="bias")
            args.append(bias)
            y = te.compute(y.shape, lambda n, fo, p, q, fi: prev[n, fo, p, q, fi]
                           + bias[i64(0), fo, i64(0), i64(0), fi], name="T_add")
        elif name == "residual":
            res = te.placeholder(y.shape, name="residual")
            args.append(res)
            y = te.compute(y.shape, lambda *i: prev(*i) + res(*i), name="T_add_residual")
        else:
            y = te.compute(y.shape, lambda *i: te.max(prev(*i), const(0.0, "float32")), name="T_relu")
    return te.create_prim_func(args + [y])


def blocked(a: np.ndarray, block: int = B) -> np.ndarray:
    """NCHW -> NCHW{block}c."""
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int = 1) -> np.ndarray:
    span = (w.shape[2] - 1) * dilation + 1
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (span, span), axis=(2, 3))
    return np.einsum("ncyxij,fcij->nfyx", windows[:, :, ::stride, ::stride, ::dilation, ::dilation], w)


def operands(c: int, f: int, size: int, k: int, stride: int, pad: int, plain: bool, epilogue: tuple,
             block: int = B, dilation: int = 1):
    """The built function's arguments (blocked) and the expected output, from numpy on NCHW."""
    rng = np.random.default_rng(c * 1000 + f + size)
    out = (size + 2 * pad - (k - 1) * dilation - 1) // stride + 1
    x = rng.standard_normal((1, c, size, size), dtype=np.float32)
    w = rng.standard_normal((f, c, k, k), dtype=np.float32)
    by_out = w.reshape(f // block, block, c, k, k)  # [F, f, c, ry, rx]
    if plain:
        args = [x, np.ascontiguousarray(by_out.transpose(0, 2, 3, 4, 1))]
    else:
        by_in = by_out.reshape(f // block, block, c // block, block, k, k)  # [F, f, C, c, ry, rx]
        args = [blocked(x, block), np.ascontiguousarray(by_in.transpose(0, 2, 4, 5, 3, 1))]
    expected = conv_reference(x, w, stride, pad, dilation)
    for name in epilogue:
        if name == "relu":
            expected = np.maximum(expected, 0)
            continue
        term = rng.standard_normal((1, f, 1, 1) if name == "bias" else expected.shape, dtype=np.float32)
        args.append(blocked(term, block))
        expected = expected + term
    return args, blocked(expected, block), np.zeros((1, f // block, out, out, block), np.float32)


CASES = {  # (C, F, size, k, stride, pad, plain input, epilogue)
    "3x3": (32, 32, 9, 3, 1, 1, False, ("bias", "relu")),
    "1x1-residual": (32, 64, 8, 1, 1, 0, False, ("bias", "residual", "relu")),
    "3x3-stride2": (16, 32, 10, 3, 2, 1, False, ("bias", "relu")),
    "7x7-stride2-plain": (3, 32, 20, 7, 2, 3, True, ("bias", "relu")),
    "rows-of-13": (16, 48, 13, 1, 1, 0, False, ("residual",)),
}


@pytest.mark.parametrize("target", [Target("llvm"), AVX2], ids=["host", "avx2"])
@pytest.mark.parametrize("case", CASES)
def test_blocked_conv_equals_numpy(case, target):
    check_case(case, target)


@pytest.mark.parametrize("case", ["3x3-stride2", "7x7-stride2-plain"])
def test_generic_x86_64(case):
    """No AVX: LLVM splits the vectors into SSE registers."""
    check_case(case, Target("llvm -mcpu=x86-64"))


def check_case(case: str, target: Target) -> None:
    c, f, size, k, stride, pad, plain, epilogue = CASES[case]
    sch = Conv2DBlocked().apply(blocked_conv(c, f, size, k, stride, pad, plain, epilogue), target, False)
    assert sch is not None, "the rule declined a blocked conv2d"
    args, expected, built = operands(c, f, size, k, stride, pad, plain, epilogue)
    tvms.build(sch.mod["main"], target=str(target))(*args, built)
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)


def test_schedule_keeps_a_register_tile_and_stores_whole_vectors():
    """3x3 of 32 -> 64 channels on rows of 8 (AVX-512): 8 pixels x 2 blocks of accumulators
    [x, F, f] in a local buffer, the reduction walked (C, ry, rx, c) with the input's lanes
    innermost, the epilogue inlined into the vectorized copy out; the reference executor agrees."""
    func = blocked_conv(32, 64, 8, 3, 1, 1, epilogue=("bias", "relu"))
    out = Conv2DBlocked().apply(func, Target("llvm -mattr=+avx512f,+fma"), False).mod["main"]
    text = out.script()
    assert 'T.alloc_buffer((T.int64(1), T.int64(8), T.int64(8), T.int64(4), T.int64(16)), scope="local")' in text
    assert "for x_1 in T.unroll(T.int64(8)):" in text and "for fo_1 in T.unroll(T.int64(2)):" in text
    assert "for ic_0, kh, kw, ic_1 in T.grid(T.int64(2), T.int64(3), T.int64(3), T.int64(16)):" in text
    assert text.count("T.vectorized(T.int64(16))") == 4  # padding, init, update, copy out
    assert "T.parallel" in text and 'block("T_add")' not in text and 'block("T_relu")' not in text
    assert "meta_schedule.layout_rewrite_preproc" not in text  # (the weights are read as they are)
    args, expected, built = operands(32, 64, 8, 3, 1, 1, False, ("bias", "relu"))
    reference = np.zeros_like(built)
    run_prim_func(out, *args, reference)
    np.testing.assert_allclose(reference, expected, rtol=1e-4, atol=1e-4)


def test_avx2_splits_a_block_into_two_vectors():
    func = blocked_conv(16, 32, 8, 1, 1, 0)
    text = Conv2DBlocked().apply(func, AVX2, False).mod["main"].script()
    assert "T.vectorized(T.int64(8))" in text and "T.vectorized(T.int64(16))" not in text


@pytest.mark.parametrize("plain", [False, True], ids=["blocked", "plain"])
def test_blocks_of_8_on_avx2(plain):
    """NCHW8c, the layout AVX2's 8 lanes get: one vector a block, 4 pixels x 2 blocks."""
    case = (3, 16, 12, 3, 1, 1, True) if plain else (16, 32, 12, 3, 1, 1, False)
    epilogue = ("bias", "residual", "relu")
    sch = Conv2DBlocked().apply(blocked_conv(*case, epilogue, block=8), AVX2, False)
    text = sch.mod["main"].script()
    assert "for x_1 in T.unroll(T.int64(4)):" in text and "for fo_1 in T.unroll(T.int64(2)):" in text
    args, expected, built = operands(*case, epilogue, block=8)
    tvms.build(sch.mod["main"], target=str(AVX2))(*args, built)
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)


def test_the_default_rules_pick_it():
    func = blocked_conv(16, 32, 8, 3, 1, 1, epilogue=("bias", "relu"))
    with Target("llvm"):
        out = ApplyDefaultSchedule(*default_rules())(tvms.IRModule({"main": func}))
    args, expected, built = operands(16, 32, 8, 3, 1, 1, False, ("bias", "relu"))
    assert 'scope="local"' in out["main"].script()
    tvms.build(out["main"], target="llvm")(*args, built)
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case, dilation", [("3x3-stride2", 1), ("7x7-stride2-plain", 1), ("3x3", 2)])
def test_the_legalized_relax_conv_compiles_with_it(case, dilation):
    """``R.nn.conv2d`` on NCHW16c (OIHW16i16o, or a plain input with OIHW16o), a bias and relu:
    the rule takes the fused kernel the legalization makes, and tvms.compile's result is right."""
    c, f, size, k, stride, pad, plain, epilogue = CASES[case]
    out = (size + 2 * pad - (k - 1) * dilation - 1) // stride + 1
    x = (1, c, size, size) if plain else (1, c // B, size, size, B)
    w = (f // B, c, k, k, B) if plain else (f // B, c // B, k, k, B, B)
    layouts = f'data_layout="{"NCHW" if plain else "NCHW16c"}", kernel_layout="OIHW{"" if plain else "16i"}16o"'
    body = (f"            y = R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[{pad}, {pad}, {pad}, {pad}], "
            f'dilation=[{dilation}, {dilation}], {layouts}, out_layout="NCHW16c")\n'
            "            z = R.add(y, b)\n            u = R.nn.relu(z)\n            R.output(u)\n        return u")
    params = (f'x: R.Tensor({x}, dtype="float32"), w: R.Tensor({w}, dtype="float32"), '
              f'b: R.Tensor((1, {f // B}, 1, 1, {B}), dtype="float32")')
    mod = from_source(relax_module(body, params, f'R.Tensor((1, {f // B}, {out}, {out}, {B}), dtype="float32")'))
    assert Conv2DBlocked().apply(only_kernel(legalized(mod)), Target("llvm"), False) is not None
    args, expected, _ = operands(c, f, size, k, stride, pad, plain, epilogue, dilation=dilation)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    built = vm["main"](*(tvms.nd.array(a) for a in args)).numpy()
    np.testing.assert_allclose(built, expected, rtol=1e-4, atol=1e-4)


def test_declines_other_convolutions():
    """A plain NCHW conv (Conv2D's), a grouped blocked conv, one of a symbolic batch, a grouped
    and a depthwise NCHW one."""
    rule, target = Conv2DBlocked(), Target("llvm")
    body = ('            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1], data_layout="NCHW16c", '
            'kernel_layout="OIHW16i16o", out_layout="NCHW16c")\n            R.output(y)\n        return y')
    params = 'x: R.Tensor(("n", 2, 9, 9, 16), dtype="float32"), w: R.Tensor((2, 2, 3, 3, 16, 16), dtype="float32")'
    dynamic = from_source(relax_module(body, params, 'R.Tensor(("n", 2, 9, 9, 16), dtype="float32")'))
    assert "conv2d_NCHWc" in only_kernel(legalized(dynamic)).script()
    assert rule.apply(only_kernel(legalized(dynamic)), target, False) is None
    assert rule.apply(only_kernel(legalized(conv_module(1, 16, 8, 32))), target, False) is None
    assert rule.apply(blocked_conv(64, 64, 8, 3, 1, 1, groups=2), target, False) is None
    for groups in (2, 16):
        grouped = only_kernel(legalized(window_conv_module(16, 16, 8, 3, 1, 1, 1, groups)))
        assert rule.apply(grouped, target, False) is None


def test_the_tuning_space_branches_it_at_each_register_tile():
    """ConvRegisterTile (the conv tuning space) gives one schedule per tile of whole blocks that
    fits the registers; each computes the conv."""
    from tvms.lowering.dlight.cpu_conv_blocked import blocked_tiles
    from tvms.lowering.schedule import Schedule
    from tvms.lowering.tune.rule_conv_register_tile import ConvRegisterTile

    target = Target("llvm -mcpu=skylake-avx512")
    func = blocked_conv(16, 32, 8, 3, 1, 1, epilogue=("bias", "relu"))
    rule = ConvRegisterTile()
    rule.target = target
    sch = Schedule(func)
    branches = rule.apply(sch, sch.get_block("conv2d_NCHWc"))
    tiles = blocked_tiles(32, 8, B, target)
    assert len(branches) == len(tiles) >= 3 and len({b.mod.script() for b in branches}) == len(tiles)
    args, expected, out = operands(16, 32, 8, 3, 1, 1, False, ("bias", "relu"))
    for branch in branches:
        out[:] = 0
        tvms.build(branch.mod["main"], target=str(target))(*args, out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
