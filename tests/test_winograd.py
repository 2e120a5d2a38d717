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
    def main(x: R.Tensor(({n}, {c}, {h}, {w}), dtype="float32"), w0: R.Tensor(({k}, {c}, 3, 3), dtype="float32"), b: R.Tensor((1, {k}, 1, 1), dtype="float32"), w1: R.Tensor(({k}, {k}, 3, 3), dtype="float32")) -> R.Tensor(({n}, {k}, {oh}, {ow}), dtype="float32"):
        with R.dataflow():
            c0 = R.nn.conv2d(x, w0, strides=[1, 1], padding=[1, 1, 1, 1])
            a0 = R.add(c0, b)
            r0 = R.nn.relu(a0)
            c1 = R.nn.conv2d(r0, w1, strides=[1, 1], padding=[{top}, {left}, {bottom}, {right}])
            gv = R.nn.relu(R.add(c1, {residual}))
            R.output(gv)
        return gv
"""


def two_convs(c: int, k: int, h: int, w: int, pad: int | tuple = 1, n: int = 1) -> tuple:
    """The module and its arguments; ``pad``: the second conv's padding (top, left, bottom, right)."""
    top, left, bottom, right = (pad,) * 4 if isinstance(pad, int) else pad
    oh, ow = h + top + bottom - 2, w + left + right - 2
    residual = "r0" if (oh, ow) == (h, w) else "b"
    mod = from_source(TWO_CONVS.format(c=c, k=k, h=h, w=w, oh=oh, ow=ow, top=top, left=left, bottom=bottom,
                                       right=right, residual=residual, n=n))
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype("float32") for s in ((n, c, h, w), (k, c, 3, 3), (1, k, 1, 1), (k, k, 3, 3))]
    args[1] *= 0.2
    args[3] *= 0.2
    return mod, args


def assert_close(actual, expected) -> None:
    """Within Winograd's float32 error: F(4x4, 3x3) sums terms up to ~100x the result (its
    transforms' coefficients), so the error scales with the output's largest values."""
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


def host_blocks_channels() -> bool:
    """Whether ``tvms.compile(..., "llvm")`` blocks channels here (8 float32 lanes or more), which
    the pass needs."""
    from tvms.lowering.dlight.analysis import vector_bits

    return (vector_bits(tvms.target.Target("llvm")) or 0) >= 256


needs_blocks = pytest.mark.skipif(not host_blocks_channels(), reason="the host has fewer than 8 float32 lanes")


def winograd_kernels(ex) -> list:
    return [k for k in ex.kernels().functions if k.startswith("winograd")]


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


@pytest.mark.parametrize("h, w, pad, n", [(16, 16, 1, 1), (13, 15, 1, 1), (14, 17, (0, 2, 1, 0), 2)])
def test_the_kernels_compute_the_convolution(h, w, pad, n):
    """Tiles that fit the output, tiles that overhang it (guarded stores, padded input), uneven
    padding and two images."""
    mod, args = two_convs(32, 64, h, w, pad, n)
    rewritten = WinogradConv2d(16)(BlockChannels(16)(mod))
    assert winograd_funcs(rewritten) == ["winograd_data", "winograd_data", "winograd_gemm", "winograd_gemm",
                                         "winograd_output", "winograd_output", "winograd_weight", "winograd_weight"]
    expected = np.asarray(run_relax(mod, "main", *args))
    assert_close(np.asarray(run_relax(rewritten, "main", *args)), expected)


@needs_blocks
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
    kinds = ("winograd_data", "winograd_gemm", "winograd_output", "fused_winograd_output")
    names = [gv.name_hint for gv, f in fused.functions_items()
             if isinstance(f, PrimFunc) and gv.name_hint.startswith(kinds)]
    assert any(n.startswith("fused_winograd_output") for n in names)  # (the epilogue fused into it)
    with target:
        for name in names:
            assert Winograd().apply(fused[name], target, False) is not None, name
    scheduled = default_schedules(fused, target)
    for name in names:  # (Fallback's schedule of these would not vectorize the channels)
        text = scheduled[name].script()
        assert "T.parallel(" in text and "T.vectorized(" in text, name


@needs_blocks
def test_weights_given_as_parameters_are_transformed_at_run_time():
    mod, args = two_convs(32, 64, 16, 16)
    expected = np.asarray(run_relax(mod, "main", *args))
    ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert "winograd_weight" in winograd_kernels(ex)  # (the weights are parameters: transformed per call)
    vm = relax.VirtualMachine(ex, tvms.cpu())
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
    assert taken(c=64, k=64, h=3, w=4, pad=0, n=16) == 4  # (1 x 2 outputs: the first conv's 3 x 4 only)
    text = TWO_CONVS.format(c=32, k=64, h=32, w=32, oh=16, ow=16, top=1, left=1, bottom=1, right=1, residual="b", n=1)
    strided = from_source(text.replace("c1 = R.nn.conv2d(r0, w1, strides=[1, 1]",
                                       "c1 = R.nn.conv2d(r0, w1, strides=[2, 2]"))
    assert winograd_funcs(WinogradConv2d(16)(BlockChannels(16)(strided))) == ["winograd_data", "winograd_gemm",
                                                                            "winograd_output", "winograd_weight"]


@needs_blocks
def test_the_option_turns_it_off():
    mod, args = two_convs(32, 64, 16, 16)
    with PassContext(config={"relax.WinogradConv2d.enable": False}):
        ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert not [k for k in ex.kernels().functions if "winograd" in k]
    with PassContext(config={"relax.WinogradConv2d.enable": True}):
        ex = tvms.compile(mod, "llvm", exec_mode="bytecode")
    assert [k for k in ex.kernels().functions if "winograd_gemm" in k]


@pytest.mark.parametrize("h, w", [(16, 16), (27, 26)])
def test_tuning_spaces_take_the_schedules_and_pass_the_postprocessors(h, w):
    """ApplyCustomRule finds each kernel's schedule by its annotation; every sketch passes the
    llvm postprocessors (an overhanging output's epilogue per tile had loops of variable extent,
    which DisallowDynamicLoop refuses) and computes as the unscheduled kernel."""
    from tvms import meta_schedule as ms
    from tvms.lowering.tune.post_order_apply import PostOrderApply
    from tvms.lowering.tune.tune_context import TuneContext
    from tvms.runtime.reference import run_prim_func

    for rule in ("winograd_data", "winograd_gemm", "winograd_output", "winograd_weight"):
        assert get_global_func(f"s_tir.meta_schedule.cpu.{rule}", True) is not None
    mod, _ = two_convs(32, 64, h, w)
    fused = relax.get_pipeline("zero")(WinogradConv2d(16)(BlockChannels(16)(mod)))
    target = "llvm -num-cores=1 -mcpu=znver4"
    names = [gv.name_hint for gv, f in fused.functions_items() if isinstance(f, PrimFunc)
             and gv.name_hint.startswith(("winograd_gemm", "fused_winograd_output"))]
    assert len(names) >= 2
    rng = np.random.default_rng(0)
    for name in names:
        func = fused[name]
        sketches = TuneContext(tvms.IRModule({"main": func}), target, PostOrderApply(postprocs=[], mutator_probs={}),
                               task_name=name, rand_state=1).generate_design_space()
        args = [rng.standard_normal([d.value for d in func.buffer_map[p].shape]).astype("float32") for p in func.params]
        want = [a.copy() for a in args]
        run_prim_func(func, *want)
        for sketch in sketches:
            sch = sketch.copy()
            sch.enter_postproc()
            assert all(p.apply(sch) for p in ms.Postproc.create("llvm")), name
            if host_blocks_channels():
                got = [a.copy() for a in args]
                tvms.build(sch.mod["main"], target="llvm")(*got)
                assert_close(got[-1], want[-1])
