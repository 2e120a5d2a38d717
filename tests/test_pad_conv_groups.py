"""PadConvGroups: grouped convs whose groups fill vectors badly computed on groups padded with zero
filters, cropped after; checked against numpy (through the reference executor and compiled), by
what it leaves alone and by what tvms.compile makes of it."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import tvms
from tvms import relax
from tvms.ir.dtype import DataType
from tvms.ir.structural import structural_equal
from tvms.lowering.relax.pad_conv_groups import PadConvGroups, fma_lanes, group_padding, padded_group
from tvms.lowering.transform import PassContext
from tvms.runtime.reference_relax import run_relax
from tvms.target import Target

from test_block_channels import calls
from test_dlight_conv import AVX2, window_conv_reference

SKYLAKE = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx2,+fma")
ZEN4 = Target("llvm -mcpu=znver4 -mattr=+avx512f,+avx2,+fma")
F32 = DataType("float32")


def test_the_padding_fills_the_vectors_of_full_fma_rate():
    """On AMD Zen 4 (512-bit FMAs as two 256-bit halves) a group pads to whole 256-bit vectors:
    groups of 34 output channels to 40 (to 48 on an Intel AVX-512 CPU). A group of whole vectors
    that only tiles poorly along its rows gets one vector more; depthwise, ungrouped, short
    reductions and groups that fill their vectors are left. Without a target the pass takes the
    current one (as ``tvms opt`` runs it, from tvms.relax.transform)."""
    assert (fma_lanes(ZEN4, F32), fma_lanes(SKYLAKE, F32), fma_lanes(AVX2, F32)) == (8, 16, 8)
    assert padded_group(68, 8, 4) == 72 and padded_group(68, 16, 4) == 80 and padded_group(136, 8, 8) is None
    assert padded_group(24, 16, 8) == 32 and padded_group(28, 16, 4) == 32 and padded_group(8, 16, 8) is None
    assert group_padding(3, 20, 34, 1, 28, F32, ZEN4) == 40 and group_padding(3, 20, 34, 1, 28, F32, SKYLAKE) == 48
    assert group_padding(2, 16, 56, 1, 7, F32, ZEN4) == 64  # (7 vectors of 8 along rows of 7: 7 x 1 tiles)
    assert group_padding(2, 16, 32, 1, 28, F32, SKYLAKE) is None
    assert group_padding(1, 20, 34, 1, 28, F32, SKYLAKE) is None  # (not grouped)
    assert group_padding(34, 1, 34, 9, 28, F32, SKYLAKE) is None  # (depthwise)
    assert group_padding(3, 5, 34, 1, 28, F32, SKYLAKE) is None  # (5 products a sum: the crop costs more)
    mod = grouped_conv(1, 3, 20, 34, 14, 1, "", np.random.default_rng(0))[0]
    with ZEN4:
        (conv,) = calls(tvms.relax.transform.PadConvGroups()(mod), "nn.conv2d")
    assert [d.value for d in conv.struct_info.dims] == [1, 120, 14, 14]


def test_a_1x1_conv_whose_rows_fill_vectors_is_left_to_the_plane_plan():
    """On 28x28 planes four rows are 7 vectors of 16 pixels: the Conv2D rule's plane-vector plan
    computes the 34-channel groups as they are, so they are not padded (nor cropped); on 14x14
    planes no count of rows fills vectors of 16, and the groups are padded."""
    assert group_padding(3, 20, 34, 1, 28, F32, SKYLAKE, height=28) is None
    assert group_padding(3, 20, 34, 1, 14, F32, SKYLAKE, height=14) == 48
    mod = grouped_conv(1, 3, 20, 34, 28, 1, "", np.random.default_rng(0))[0]
    with SKYLAKE:
        assert structural_equal(tvms.relax.transform.PadConvGroups()(mod), mod)


def grouped_conv(n: int, groups: int, group_in: int, group_out: int, size: int, k: int, epilogue: str,
                 rng: np.random.Generator, weight_param: bool = False, stride: int = 1, shuffle: int = 0) -> tuple:
    """(module, its inputs, numpy's result) of a grouped conv (same padding) with a constant
    bias-free weight, then ``epilogue``: "", "bias", "bias relu" or "bn relu" (a scale and a shift
    per channel), then, with ``shuffle``, ShuffleNet's channel shuffle in that many groups; the
    weight a parameter when ``weight_param``."""
    c, f = groups * group_in, groups * group_out
    x = rng.standard_normal((n, c, size, size), dtype=np.float32)
    w = rng.standard_normal((f, group_in, k, k), dtype=np.float32)
    b = rng.standard_normal((f, 1, 1), dtype=np.float32)
    s = rng.standard_normal((1, f, 1, 1), dtype=np.float32)
    xv = relax.Var("x", relax.TensorStructInfo(x.shape, "float32"))
    wv = relax.Var("w", relax.TensorStructInfo(w.shape, "float32"))
    bb, ops = relax.BlockBuilder(), relax.op
    expected = window_conv_reference(x, w, stride, k // 2, 1, groups)
    with bb.function("main", [xv, wv] if weight_param else [xv]):
        with bb.dataflow():
            value = bb.emit(ops.nn.conv2d(xv, wv if weight_param else relax.const(w), strides=[stride] * 2,
                                          padding=[k // 2] * 4, groups=groups))
            if "bias" in epilogue:
                value = bb.emit(ops.add(value, relax.const(b)))
                expected = expected + b
            if "bn" in epilogue:
                value = bb.emit(ops.add(bb.emit(ops.multiply(value, relax.const(s))), relax.const(b)))
                expected = expected * s + b
            if "relu" in epilogue:
                value = bb.emit(ops.nn.relu(value))
                expected = np.maximum(expected, 0)
            if shuffle:
                shape = expected.shape
                value = bb.emit(ops.reshape(value, (n, shuffle, f // shuffle, *shape[2:])))
                value = bb.emit(ops.reshape(bb.emit(ops.permute_dims(value, [0, 2, 1, 3, 4])), shape))
                expected = expected.reshape(n, shuffle, f // shuffle, *shape[2:]).swapaxes(1, 2).reshape(shape)
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return bb.get(), [x, w] if weight_param else [x], expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 4), st.integers(4, 9), st.sampled_from([3, 5, 10, 17, 34, 24, 56]), st.sampled_from([1, 3]),
       st.sampled_from(["", "bias", "bias relu", "bn relu"]), st.sampled_from([1, 2]),
       st.sampled_from([SKYLAKE, ZEN4, AVX2]), st.integers(0, 2**16))
def test_padded_groups_compute_as_the_plain_conv(groups, group_in, group_out, k, epilogue, n, target, seed):
    mod, args, expected = grouped_conv(n, groups, group_in, group_out, 5, k, epilogue, np.random.default_rng(seed))
    padded = PadConvGroups(target)(mod)
    (conv,) = calls(padded, "nn.conv2d")
    pad = group_padding(groups, group_in, group_out, k * k, 5, F32, target)
    assert conv.struct_info.dims[1].value == groups * (pad or group_out)
    assert (pad is None) == structural_equal(padded, mod)
    np.testing.assert_allclose(np.asarray(run_relax(padded, "main", *args)), expected, rtol=1e-4, atol=1e-4)


def test_compiled_with_a_constant_and_a_parameter_weight():
    """Groups of 10 (vectors of 2 lanes) padded to whole vectors: with a constant weight the
    padded weight is folded and packed at compile time (the program calls the conv and the crop,
    which computes the bias and relu); with a weight that is a parameter it is padded at each
    call. Batches of one and two, for the host, equal numpy; the PassContext option turns the pass
    off, and so does disabling it (one kernel: the conv with its epilogue)."""
    rng = np.random.default_rng(5)
    for n, weight_param in ((1, False), (2, True)):
        mod, args, expected = grouped_conv(n, 2, 6, 10, 7, 3, "bias relu", rng, weight_param)
        kernels = compiled_kernels(mod, args, expected)
        if not weight_param:
            assert len(kernels) == 2 and kernels[0] == "conv2d_prepacked", kernels
            assert "strided_slice" in kernels[1] and "relu" in kernels[1], kernels
    mod, args, expected = grouped_conv(1, 2, 6, 10, 7, 3, "bias relu", rng)
    tvms.compile(mod, target="llvm")  # (compiled padded first: the switches are part of the compile's key)
    for ctx in (PassContext(config={"relax.PadConvGroups.enable": False}), PassContext(disabled_pass=["PadConvGroups"])):
        with ctx:
            kernels = compiled_kernels(mod, args, expected)
            assert len(kernels) == 1 and "strided_slice" not in kernels[0], kernels


@pytest.mark.slow
def test_compiled_strided_batched_and_shuffled():
    """The padded conv compiled for the host equals numpy strided, with a batch of three and a
    batch norm, and with a channel shuffle after the crop (fused with it: one copy after the conv)."""
    rng = np.random.default_rng(6)
    for n, stride, epilogue, shuffle in ((1, 2, "bias relu", 0), (3, 1, "bn relu", 0), (2, 2, "bn relu", 2)):
        kernels = compiled_kernels(*grouped_conv(n, 2, 6, 10, 7, 3, epilogue, rng, False, stride, shuffle))
        assert len(kernels) == 2 and kernels[0] == "conv2d_prepacked", kernels
        assert "strided_slice" in kernels[1] and "relu" in kernels[1], kernels


def compiled_kernels(mod: tvms.IRModule, args: list, expected: np.ndarray) -> list:
    """The kernels ``main`` of ``mod`` compiled for the host calls, in order, once its result on
    ``args`` is checked against ``expected``."""
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](*args).numpy(), expected, rtol=1e-4, atol=1e-4)
    return [inst.func for f in vm.executable.program.functions if f.name == "main"
            for inst in f.code if getattr(inst, "kind", None) == "kernel"]


def test_other_targets_are_left_alone():
    """The vector widths are a CPU's: for cuda or c (whose lanes the fallback would guess) the
    module is unchanged, given or current."""
    mod = grouped_conv(1, 3, 20, 34, 9, 1, "", np.random.default_rng(0))[0]
    assert not structural_equal(PadConvGroups(SKYLAKE)(mod), mod)
    for target in ("cuda", "c"):
        assert structural_equal(PadConvGroups(target)(mod), mod)
        with Target(target):
            assert structural_equal(tvms.relax.transform.PadConvGroups()(mod), mod)
