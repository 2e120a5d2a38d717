"""WinogradConv2d: 3x3 stride-1 blocked convolutions computed by F(4x4, 3x3), checked by the exact
identity of its matrices, against the numpy reference of the plain program (the reference executor
runs the pass's kernels unscheduled, and the compiled program runs their default schedules), and
by what it leaves as it is."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.ir import relax as rx
from tvms.ir.function import PrimFunc
from tvms.lowering.build import default_schedules
from tvms.lowering.dlight.cpu_winograd import Winograd
from tvms.lowering.relax.block_channels import BlockChannels
from tvms.lowering.relax.winograd import WinogradConv2d, winograd_matrices
from tvms.lowering.transform import PassContext
from tvms.ir.registry import get_global_func
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

# two 3x3 convs (BlockChannels blocks a region of two), a bias, relu and a residual add between
TWO_CONVS = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, {c}, {h}, {w}), dtype="float32"), w0: R.Tensor(({k}, {c}, 3, 3), dtype="float32"), b: R.Tensor((1, {k}, 1, 1), dtype="float32"), w1: R.Tensor(({k}, {k}, 3, 3), dtype="float32")) -> R.Tensor((1, {k}, {oh}, {ow}), dtype="float32"):
        with R.dataflow():
            c0 = R.nn.conv2d(x, w0, strides=[1, 1], padding=[1, 1, 1, 1])
            a0 = R.add(c0, b)
            r0 = R.nn.relu(a0)
            c1 = R.nn.conv2d(r0, w1, strides=[1, 1], padding=[{pad}, {pad}, {pad}, {pad}])
            gv = R.nn.relu(R.add(c1, {residual}))
            R.output(gv)
        return gv
"""


def two_convs(c: int, k: int, h: int, w: int, pad: int = 1) -> tuple:
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    residual = "r0" if pad == 1 else "b"
    mod = from_source(TWO_CONVS.format(c=c, k=k, h=h, w=w, oh=oh, ow=ow, pad=pad, residual=residual))
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype("float32") for s in ((1, c, h, w), (k, c, 3, 3), (1, k, 1, 1), (k, k, 3, 3))]
    args[1] *= 0.2
    args[3] *= 0.2
    return mod, args


def assert_close(actual, expected) -> None:
    """Within Winograd's float32 error: F(4x4, 3x3) sums terms up to ~100x the result (its
    transforms' coefficients), so the error scales with the output's largest values."""
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


def winograd_funcs(mod: tvms.IRModule) -> list:
    """The Winograd kernels ``main`` calls, by kind, one entry per call (sorted)."""
    names = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            if isinstance(b.value, rx.Call) and getattr(b.value.op, "name", "") == "relax.call_tir":
                name = b.value.args[0].name_hint
                if name.startswith("winograd"):
                    names.append(name.rstrip("0123456789"))
    return sorted(names)


@pytest.mark.parametrize("m", [2, 4, 6])
def test_the_matrices_compute_the_correlation_exactly(m):
    a_t, g, b_t = winograd_matrices(m)
    assert (len(a_t), len(a_t[0]), len(g), len(g[0]), len(b_t)) == (m, m + 2, m + 2, 3, m + 2)
    assert all(x.denominator == 1 for row in b_t for x in row)  # (B^T in integers: G carries the fractions)
    rng = np.random.default_rng(m)
    for _ in range(3):
        kernel = [Fraction(int(v)) for v in rng.integers(-9, 9, 3)]
        data = [Fraction(int(v)) for v in rng.integers(-9, 9, m + 2)]
        gk = [sum(g[e][k] * kernel[k] for k in range(3)) for e in range(m + 2)]
        bd = [sum(b_t[e][i] * data[i] for i in range(m + 2)) for e in range(m + 2)]
        y = [sum(a_t[i][e] * gk[e] * bd[e] for e in range(m + 2)) for i in range(m)]
        assert y == [sum(kernel[k] * data[i + k] for k in range(3)) for i in range(m)]


@pytest.mark.parametrize("h, w", [(16, 16), (13, 15)])
def test_the_kernels_compute_the_convolution(h, w):
    """Tiles that fit the output, and tiles that overhang it (guarded stores, padded input)."""
    mod, args = two_convs(32, 64, h, w)
    rewritten = WinogradConv2d(16)(BlockChannels(16)(mod))
    assert winograd_funcs(rewritten) == ["winograd_data", "winograd_data", "winograd_gemm", "winograd_gemm",
                                         "winograd_output", "winograd_output", "winograd_weight", "winograd_weight"]
    expected = np.asarray(run_relax(mod, "main", *args))
    assert_close(np.asarray(run_relax(rewritten, "main", *args)), expected)


@pytest.mark.parametrize("h, w", [(28, 28), (27, 13)])
def test_compiled_with_default_schedules_it_computes_as_numpy(h, w):
    mod, args = two_convs(32, 64, h, w)
    expected = np.asarray(run_relax(mod, "main", *args))
    ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert [k for k in ex.kernels().functions if "winograd_gemm" in k]  # (one kernel for both: same shapes)
    vm = relax.VirtualMachine(ex, tvms.cpu())
    assert_close(vm["main"](*map(tvms.nd.array, args)).numpy(), expected)


def test_every_kernel_gets_the_winograd_schedule():
    mod, _ = two_convs(32, 32, 28, 28)
    target = tvms.target.Target("llvm -mcpu=znver4")
    with PassContext(config={"relax.BlockChannels.enable": True}):
        fused = relax.get_pipeline("zero")(WinogradConv2d(16)(BlockChannels(16)(mod)))
    names = [gv.name_hint for gv, f in fused.functions_items() if isinstance(f, PrimFunc)
             and gv.name_hint.startswith(("winograd_data", "winograd_gemm", "winograd_output", "fused_winograd_output"))]
    assert any(n.startswith("fused_winograd_output") for n in names)  # (the epilogue fused into it)
    with target:
        for name in names:
            assert Winograd().apply(fused[name], target, False) is not None, name
    scheduled = default_schedules(fused, target)
    for name in names:  # (Fallback's schedule of these would not vectorize the channels)
        text = scheduled[name].script()
        assert "T.parallel(" in text and "T.vectorized(" in text, name


def test_weights_given_as_parameters_are_transformed_at_run_time():
    mod, args = two_convs(32, 64, 16, 16)
    expected = np.asarray(run_relax(mod, "main", *args))
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    got = vm["main"](*map(tvms.nd.array, args)).numpy()
    assert_close(got, expected)
    args[3] = args[3] * -1.5  # (new weights: the transform is not kept from the first call)
    assert_close(vm["main"](*map(tvms.nd.array, args)).numpy(),
                               np.asarray(run_relax(mod, "main", *args)))


def test_what_it_leaves_as_it_is():
    def taken(**kwargs: int) -> int:
        mod, _ = two_convs(**kwargs)
        return len(winograd_funcs(WinogradConv2d(16)(BlockChannels(16)(mod))))

    assert taken(c=32, k=64, h=16, w=16) == 8
    assert taken(c=16, k=16, h=32, w=32) == 0  # (one block of output channels: too little to gain)
    assert taken(c=32, k=64, h=12, w=12) == 0  # (9 tiles: the transformed weights outweigh the work)
    assert taken(c=16, k=32, h=16, w=16) == 0  # (channels x channels x tiles under 32K)
    assert taken(c=32, k=64, h=18, w=18, pad=0) == 8  # (no padding: 16 x 16 outputs)
    strided = from_source(TWO_CONVS.format(c=32, k=64, h=32, w=32, oh=16, ow=16, pad=1, residual="b")
                          .replace("c1 = R.nn.conv2d(r0, w1, strides=[1, 1]", "c1 = R.nn.conv2d(r0, w1, strides=[2, 2]"))
    assert winograd_funcs(WinogradConv2d(16)(BlockChannels(16)(strided))) == ["winograd_data", "winograd_gemm",
                                                                            "winograd_output", "winograd_weight"]


def test_the_option_turns_it_off():
    mod, args = two_convs(32, 64, 16, 16)
    with PassContext(config={"relax.WinogradConv2d.enable": False}):
        ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert not [k for k in ex.kernels().functions if "winograd" in k]
    with PassContext(config={"relax.WinogradConv2d.enable": True}):
        ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert [k for k in ex.kernels().functions if "winograd_gemm" in k]


def test_tuning_finds_the_schedules_by_their_annotation():
    for rule in ("winograd_data", "winograd_gemm", "winograd_output", "winograd_weight"):
        assert get_global_func(f"s_tir.meta_schedule.cpu.{rule}", True) is not None
