"""The PlaneCopy rule (lowering/dlight/cpu_shuffle.py) on what legalized channel shuffles
(reshape, transpose, reshape) become: a parallel task per output channel copying its plane in
whole vectors, equal to numpy and the reference executor; what it declines."""
from __future__ import annotations

import warnings

import numpy as np

import tvms
from tvms.ir.module import IRModule
from tvms.lowering.dlight.cpu_shuffle import PlaneCopy
from tvms.lowering.tune.relax_integration import ExtractedTask, _tunable
from tvms.lowering.tune.task_scheduler import replayed_default
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source
from tvms.target import Target

from test_dlight_conv import AVX2, legalized, only_kernel, relax_module


def shuffle_kernel(groups: int, channels: int, size: int, axes: str = "[0, 2, 1, 3, 4]"):
    body = (f"            a = R.reshape(x, R.shape([1, {groups}, {channels // groups}, {size}, {size}]))\n"
            f"            b = R.permute_dims(a, axes={axes})\n"
            f"            c = R.reshape(b, R.shape([1, {channels}, {size}, {size}]))\n"
            "            R.output(c)\n        return c")
    tensor = f'R.Tensor((1, {channels}, {size}, {size}), dtype="float32")'
    return only_kernel(legalized(from_source(relax_module(body, f"x: {tensor}", tensor))))


def test_channel_shuffle_copies_planes_in_whole_vectors():
    """Groups of 3 of 12 channels of 5x5 (planes of 25: vectors of 5) and of 2 of 8 channels of
    4x4 (16: one AVX-512 vector, two of AVX2), scheduled for AVX-512 and AVX2 (built for the host)."""
    rng = np.random.default_rng(17)
    avx512 = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    for groups, channels, size, target, width in ((3, 12, 5, avx512, 5), (2, 8, 4, avx512, 16), (2, 8, 4, AVX2, 8)):
        func = PlaneCopy().apply(shuffle_kernel(groups, channels, size), target, False).mod["main"]
        text = func.script()
        assert f"T.parallel(T.int64({channels}))" in text and f"T.vectorized(T.int64({width}))" in text, text
        x = rng.standard_normal((1, channels, size, size), dtype=np.float32)
        expected = x.reshape(1, groups, channels // groups, size, size).transpose(0, 2, 1, 3, 4).reshape(x.shape)
        built, ref = np.zeros_like(x), np.zeros_like(x)
        tvms.build(func, target="llvm")(x, built)
        run_prim_func(func, x, ref)
        np.testing.assert_array_equal(built, expected)
        np.testing.assert_array_equal(ref, expected)


def test_declines_what_moves_no_whole_run():
    """A transpose of the plane's own axes moves no contiguous run: left to the injective rule."""
    assert PlaneCopy().apply(shuffle_kernel(2, 8, 4, "[0, 2, 1, 4, 3]"), Target("llvm"), False) is None


def crop_kernel(epilogue: str):
    """The crop of a conv's groups of 12 channels padded to 16 (3 groups, 5x5; PadConvGroups'), then
    ``epilogue`` (Relax lines over ``c``, ending in ``e``)."""
    body = ("            a = R.reshape(x, R.shape([1, 3, 16, 5, 5]))\n"
            "            b = R.strided_slice(a, axes=[2], begin=[0], end=[12])\n"
            "            c = R.reshape(b, R.shape([1, 36, 5, 5]))\n"
            f"{epilogue}            R.output(e)\n        return e")
    params = 'x: R.Tensor((1, 48, 5, 5), dtype="float32"), s: R.Tensor((36, 1, 1), dtype="float32")'
    return only_kernel(legalized(from_source(relax_module(body, params, 'R.Tensor((1, 36, 5, 5), dtype="float32")'))))


def test_a_crop_with_its_epilogue_copies_planes_in_whole_vectors():
    """The crop with a per-channel scale and relu fused: a parallel task per channel, its plane of
    25 in vectors of 5 (the scale one value a plane), equal to numpy and the reference executor.
    The same scale and relu on a plain tensor move nothing: left to the elementwise rule."""
    avx512 = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    epilogue = "            d = R.multiply(c, s)\n            e = R.nn.relu(d)\n"
    func = PlaneCopy().apply(crop_kernel(epilogue), avx512, False).mod["main"]
    text = func.script()
    assert "T.parallel(T.int64(36))" in text and "T.vectorized(T.int64(5))" in text, text
    rng = np.random.default_rng(19)
    x = rng.standard_normal((1, 48, 5, 5), dtype=np.float32)
    s = rng.standard_normal((36, 1, 1), dtype=np.float32)
    expected = np.maximum(x.reshape(1, 3, 16, 5, 5)[:, :, :12].reshape(1, 36, 5, 5) * s, 0)
    built, ref = np.zeros_like(expected), np.zeros_like(expected)
    tvms.build(func, target="llvm")(x, s, built)
    run_prim_func(func, x, s, ref)
    np.testing.assert_allclose(built, expected, rtol=1e-6)
    np.testing.assert_allclose(ref, expected, rtol=1e-6)
    body = "            d = R.multiply(x, s)\n            e = R.nn.relu(d)\n            R.output(e)\n        return e"
    tensor = 'R.Tensor((1, 36, 5, 5), dtype="float32")'
    params = f'x: {tensor}, s: R.Tensor((36, 1, 1), dtype="float32")'
    plain = only_kernel(legalized(from_source(relax_module(body, params, tensor))))
    assert PlaneCopy().apply(plain, avx512, False) is None


def test_the_schedule_replays_from_its_trace():
    """The simplified indices are a step of the trace (not a rewrite beside it): the schedule of a
    channel shuffle and of a crop with its epilogue, written as a tuning record and replayed on the
    function, is the same, so tuning keeps them (measured against it), without a warning."""
    target = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    crop = crop_kernel("            d = R.multiply(c, s)\n            e = R.nn.relu(d)\n")
    for func in (shuffle_kernel(3, 12, 5), crop):
        mod = IRModule({"main": func})
        default, replay = replayed_default(mod, target)
        assert "T.vectorized(T.int64(5))" in default.mod["main"].script()  # (PlaneCopy's)
        assert replay is not None
        task = ExtractedTask("copy", mod, target, [mod], 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _tunable([task], "test") == [task]
