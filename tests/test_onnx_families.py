"""The ONNX converter families of recurrent layers (``script/onnx_ops_rnn.py``), attention and
rotary embedding (``onnx_ops_transformer.py``), quantization (``onnx_ops_quant.py``), image
(``onnx_ops_image.py``) and signal operators (``onnx_ops_signal.py``), checked against ONNX's
own backend node tests: each case of ``CLAIMED_FAMILIES`` goes through from_onnx ->
tvms.compile -> VM as ``benchmarks/onnx_suite.py --specialize`` runs it (Resize's scales and
sizes are graph inputs there, bound to the case's values) and must match its expected outputs.
Unsupported forms must be refused with a TVMSError naming the attribute. Skipped without the
onnx package."""
from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402
from tvms.script import (onnx_ops_image, onnx_ops_quant, onnx_ops_rnn, onnx_ops_signal,  # noqa: E402,F401
                         onnx_ops_transformer)  # (they register converters)

ROOT = Path(__file__).resolve().parent.parent


def _suite():
    spec = importlib.util.spec_from_file_location("onnx_suite", ROOT / "benchmarks" / "onnx_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# node test cases (onnx.backend.test.case.node) of these families that pass today (the full
# lists are measured by benchmarks/onnx_suite.py --match)
CLAIMED_FAMILIES = """
test_gru_bidirectional test_lstm_with_peepholes test_lstm_batchwise test_simple_rnn_reverse
test_attention_3d_gqa_causal test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal
test_attention_24_fullymasked_qk_matmul_output_mode3_zero
test_attention_local_window_ext_cache_rank4_batch_mask
test_attention_4d_causal_fp16 test_attention_4d_softcap_neginf_mask_poison
test_rotary_embedding_with_interleaved_rotary_dim test_rotary_embedding_3d_input
test_linear_attention_gated_delta_gqa test_causal_conv_with_state_silu_fp16 test_swiglu_float16
test_tensorscatter_circular
test_qlinearconv test_qlinearmatmul_3D_int8_float16 test_dynamicquantizelinear_min_adjusted test_matmulinteger
test_dequantizelinear_blocked test_quantizelinear_blocked_asymmetric test_convinteger_with_padding
test_resize_downsample_scales_cubic_antialias test_resize_tf_crop_and_resize_axes_3_2
test_resize_upsample_sizes_nearest_ceil_half_pixel test_resize_upsample_scales_linear_half_pixel_symmetric
test_gridsample_reflection_padding test_gridsample_nearest_align_corners_1_additional_1
test_affine_grid_3d_align_corners
test_col2im_pads test_col2im_5d test_center_crop_pad_crop_and_pad test_roialign_aligned_true test_upsample_nearest
test_dft_irfft test_dft_axis_opset19 test_stft_with_window test_hannwindow_symmetric test_melweightmatrix
""".split()


@pytest.mark.slow
def test_claimed_family_cases_pass():
    suite = _suite()
    cases = {c.name: c for c in suite.node_cases("|".join(CLAIMED_FAMILIES))}
    missing = [name for name in CLAIMED_FAMILIES if name not in cases]
    assert not missing, f"not node cases of this onnx version: {missing}"
    failures = []
    for name in CLAIMED_FAMILIES:
        kind, detail = suite.run_tvms(*suite.case_job(cases[name], specialize=True))
        if kind != "pass":
            failures.append(f"{name}: {kind}: {detail[:200]}")
    assert not failures, "\n".join(failures)


def _model(node, inputs, outputs, opset):
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.mark.parametrize("attr, value, message", [
    ("input_forget", 1, "input_forget=1"),
    ("activations", ["Sigmoid", "Tanh", "Gelu"], "activation 'Gelu'"),
])
def test_lstm_refuses_what_it_does_not_convert(attr, value, message):
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=3, **{attr: value})
    model = _model(node, [_tensor("x", [2, 1, 4]), _tensor("w", [1, 12, 4]), _tensor("r", [1, 12, 3])],
                   [_tensor("y", None)], 14)
    with pytest.raises(TVMSError, match=message):
        from_onnx(model)


def test_rnn_activation_clip_and_sequence_lens_match_numpy():
    """A forward RNN with ScaledTanh(alpha, beta), a clip and a shorter sequence for one batch
    entry (its state stops there, its outputs are zeros) against a numpy loop."""
    rng = np.random.default_rng(1)
    seq, batch, size, hidden = 3, 2, 4, 5
    x = rng.standard_normal((seq, batch, size)).astype("float32")
    w = rng.standard_normal((1, hidden, size)).astype("float32")
    r = rng.standard_normal((1, hidden, hidden)).astype("float32")
    b = rng.standard_normal((1, 2 * hidden)).astype("float32")
    lens = np.array([3, 2], dtype="int32")
    node = helper.make_node("RNN", ["x", "w", "r", "b", "lens"], ["y", "y_h"], hidden_size=hidden, clip=1.5,
                            activations=["ScaledTanh"], activation_alpha=[0.7], activation_beta=[1.3])
    model = _model(node, [_tensor("x", x.shape), _tensor("w", w.shape), _tensor("r", r.shape),
                          _tensor("b", b.shape), _tensor("lens", lens.shape, TensorProto.INT32)],
                   [_tensor("y", None), _tensor("y_h", None)], 14)
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    y, y_h = (t.numpy() for t in vm["main"](*[tvms.nd.array(a) for a in (x, w, r, b, lens)]))

    h, ys = np.zeros((batch, hidden), "float32"), []
    for t in range(seq):
        pre = np.clip(x[t] @ w[0].T + h @ r[0].T + b[0, :hidden] + b[0, hidden:], -1.5, 1.5)
        new = 0.7 * np.tanh(1.3 * pre)
        valid = (t < lens)[:, None]
        h = np.where(valid, new, h)
        ys.append(np.where(valid, new, 0))
    np.testing.assert_allclose(y, np.stack(ys)[:, None], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_h, h[None], rtol=1e-5, atol=1e-6)


def test_rnn_softplus_does_not_overflow():
    """Softplus of a pre-activation above 88 (where exp overflows float32) is about x, not inf."""
    x = np.array([[[100.0, -100.0]], [[200.0, 1.0]]], "float32")  # (seq 2, batch 1, size 2)
    w, r = np.eye(2, dtype="float32")[None], np.zeros((1, 2, 2), "float32")
    node = helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=2, activations=["Softplus"])
    model = _model(node, [_tensor("x", x.shape), _tensor("w", w.shape), _tensor("r", r.shape)],
                   [_tensor("y", None)], 14)
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    y = vm["main"](*[tvms.nd.array(a) for a in (x, w, r)]).numpy()
    np.testing.assert_allclose(y, np.logaddexp(0, x)[:, None], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset, attrs, message", [
    (23, {"qk_matmul_output_mode": 4, "q_num_heads": 2, "kv_num_heads": 2}, "qk_matmul_output_mode=4"),
    # (left_window_size is an attribute of opset 25)
    (23, {"left_window_size": 2, "q_num_heads": 2, "kv_num_heads": 2}, "left_window_size is not supported"),
    (23, {"q_num_heads": 3}, "3-d inputs without q_num_heads and kv_num_heads"),
])
def test_attention_refuses_what_it_does_not_convert(opset, attrs, message):
    inputs = [_tensor(n, [1, 4, 6]) for n in "qkv"]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], **attrs)
    with pytest.raises(TVMSError, match=message):
        from_onnx(_model(node, inputs, [_tensor("y", None)], opset))


def test_quantize_rounds_ties_to_even_and_saturates():
    """QuantizeLinear per axis against numpy (rint: halves to even), then DequantizeLinear back."""
    x = np.array([[0.5, 1.5, 2.5, -0.5], [-3.5, 300.0, -300.0, 7.25]], dtype="float32")
    scale = np.array([1.0, 0.5], dtype="float32")
    zero = np.array([3, -2], dtype="int8")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [_tensor("x", x.shape), _tensor("s", [2]),
                                           _tensor("z", [2], TensorProto.INT8)],
                              [_tensor("q", None, TensorProto.INT8), _tensor("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    q, y = (t.numpy() for t in vm["main"](*[tvms.nd.array(a) for a in (x, scale, zero)]))
    expected = np.clip(np.rint(x / scale[:, None]) + zero[:, None], -128, 127).astype("int8")
    np.testing.assert_array_equal(q, expected)
    np.testing.assert_array_equal(y, (expected.astype("float32") - zero[:, None]) * scale[:, None])


def test_quantize_refuses_a_type_that_is_not_quantized():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=TensorProto.INT32)
    with pytest.raises(TVMSError, match="quantization to int32"):
        from_onnx(_model(node, [_tensor("x", [4]), _tensor("s", [])], [_tensor("q", None)], 21))


def test_gridsample_refuses_cubic_with_border_padding():
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic", padding_mode="border")
    model = _model(node, [_tensor("x", [1, 1, 3, 2]), _tensor("grid", [1, 2, 4, 2])], [_tensor("y", None)], 22)
    with pytest.raises(TVMSError, match="mode='cubic', padding_mode='border'"):
        from_onnx(model)


def test_resize_opset10_linear_is_asymmetric():
    """Opset 10's Resize (Upsample's semantics): output i samples input i / scale, clamped."""
    x = np.array([[[[1.0, 2.0], [3.0, 5.0]]]], dtype="float32")
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode="linear")
    graph = helper.make_graph([node], "g", [_tensor("x", x.shape)], [_tensor("y", None)], [scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    weights = np.array([[1, 0.5, 0, 0], [0, 0.5, 1, 1]])  # (input, output) along one axis
    expected = weights.T @ x[0, 0] @ weights
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy()[0, 0], expected, rtol=1e-6)


def _run_node(op_type, opset, feeds, attrs, outputs=1):
    """onnx's reference evaluator on one node (the oracle; the importer never runs it)."""
    from onnx.reference import ReferenceEvaluator

    names = [name if value is not None else "" for name, value in feeds]
    node = helper.make_node(op_type, names, [f"o{k}" for k in range(outputs)], **attrs)
    return ReferenceEvaluator(node, opsets={"": opset}).run(None, {k: v for k, v in feeds if v is not None})


_RESIZE_KERNELS = [dict(mode="nearest", nearest_mode=m) for m in ("round_prefer_floor", "round_prefer_ceil",
                                                                   "floor", "ceil")] + [
    dict(mode="linear"), dict(mode="cubic"), dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
    dict(mode="linear", antialias=1), dict(mode="cubic", antialias=1, exclude_outside=1)]
_RESIZE_TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_crop_and_resize"]


def test_resize_axis_maps_equal_onnx_reference():
    """_axis_map's (W, c) of every kernel and coordinate transformation, up and down, odd and
    even, by scale and by size, applied to a random vector equals
    the reference's Resize of it; keep_aspect_ratio_policy's rounded sizes on a 2-d input."""
    rng = np.random.default_rng(0)
    targets = [(0.5, None), (1.7, None), (0.3, None), (3.0, None), (None, 1), (None, 3), (None, 7), (None, 12)]
    for n, (scale, size), kernel, transform in itertools.product((1, 2, 5, 8), targets, _RESIZE_KERNELS,
                                                                 _RESIZE_TRANSFORMS):
        scale = None if scale is None else float(np.float32(scale))
        if scale is not None and math.floor(n * scale) == 0:
            continue
        attrs = dict(kernel, coordinate_transformation_mode=transform)
        # (the model's roi is float32, as is the scale: the importer sees those values)
        roi = tuple(np.float32([0.2, 0.9]).tolist()) if transform == "tf_crop_and_resize" else None
        if roi is not None:
            attrs["extrapolation_value"] = 4.0
        x = rng.standard_normal(n)
        weights, offset = onnx_ops_image._axis_map(attrs, 19, n, scale, size, roi)
        (want,) = _run_node("Resize", 19, [("x", x), ("roi", None if roi is None else np.array(roi, "float32")),
                                           ("scales", None if scale is None else np.array([scale], "float32")),
                                           ("sizes", None if size is None else np.array([size], "int64"))], attrs)
        # (the reference computes a few coefficients in float32)
        np.testing.assert_allclose(weights.T @ x + offset, want, rtol=1e-5, atol=1e-5, err_msg=f"{n} {attrs}")
    x = rng.standard_normal((5, 4))
    for policy, sizes in (("not_larger", (7, 3)), ("not_smaller", (7, 3)), ("not_larger", (2, 9))):
        (want,) = _run_node("Resize", 19, [("x", x), ("roi", None), ("scales", None),
                                           ("sizes", np.array(sizes, "int64"))],
                            dict(mode="linear", keep_aspect_ratio_policy=policy))
        decide = int((np.argmin if policy == "not_larger" else np.argmax)(np.divide(sizes, x.shape)))
        maps = [onnx_ops_image._axis_map({"mode": "linear"}, 19, n, size=int(sizes[axis]),
                                         aspect=None if axis == decide else (x.shape[decide], sizes[decide]))[0]
                for axis, n in enumerate(x.shape)]
        np.testing.assert_allclose(maps[0].T @ x @ maps[1], want, rtol=1e-12, err_msg=policy)


def test_dft_and_stft_matrices_equal_onnx_reference():
    """_dft_matrix (forward and inverse, onesided, dft_length cutting or padding, real and
    complex input) and _stft_matrix (frame steps, windows, frame lengths) applied to random
    signals equal the reference's DFT (opset 20) and STFT."""
    rng = np.random.default_rng(1)
    for n, parts, length, inverse, onesided in itertools.product((1, 4, 5, 8), (1, 2), (None, 3, 6, 11),
                                                                  (0, 1), (0, 1)):
        if length is None and inverse and onesided and n == 1:
            continue  # (no default length: 2 (n - 1) points)
        x = rng.standard_normal((3, n, parts))
        matrix = onnx_ops_signal._dft_matrix(n, parts, length, bool(inverse), bool(onesided))
        (want,) = _run_node("DFT", 20, [("x", x), ("length", None if length is None else np.array(length, "int64")),
                                        ("axis", np.array(1, "int64"))], dict(inverse=inverse, onesided=onesided))
        got = np.einsum("bi,ijk->bjk", x.reshape(3, -1), matrix)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{n} {parts} {length} {inverse}")
    for n, parts, step, framing, onesided in itertools.product((8, 11), (1, 2), (1, 3),
                                                                ("none", "window", "length", "both"), (0, 1)):
        window = rng.uniform(size=4 if framing == "window" else 5) if framing in ("window", "both") else None
        length = 4 if framing in ("length", "both") else None
        x = rng.standard_normal((2, n, parts))
        matrix = onnx_ops_signal._stft_matrix(n, parts, step, window, length, bool(onesided))
        (want,) = _run_node("STFT", 17, [("x", x), ("step", np.array(step, "int64")), ("window", window),
                                         ("length", None if length is None else np.array(length, "int64"))],
                            dict(onesided=onesided))
        got = np.einsum("bi,ifkc->bfkc", x.reshape(2, -1), matrix)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{n} {parts} {step} {framing}")
