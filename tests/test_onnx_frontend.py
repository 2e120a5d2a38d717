"""ONNX import (``tvms.relax.frontend.onnx.from_onnx``, ``tvms import``), checked against ONNX's
own backend node tests (their expected outputs) and numpy.

``CLAIMED`` lists the node test cases of the operators tvms converts: each must pass through
from_onnx -> tvms.compile -> VM as ``benchmarks/onnx_suite.py`` runs them (that script runs all
of them and reports the pass rate). Skipped without the onnx package (``pip install tvms[onnx]``).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.cli import main  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.relax.frontend.onnx import InvalidModel, bind_inputs, detach_params, from_onnx  # noqa: E402
from tvms.script import from_source  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _benchmark(name: str):
    """A script of benchmarks/ as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# node test cases (onnx.backend.test.case.node) that pass today: one or two per claimed operator
CLAIMED = """
test_abs test_acos_example test_acosh_example test_add_bcast test_and2d
test_argmax_default_axis_example test_argmin_default_axis_example test_asin_example
test_asinh_example test_atan_example test_atanh_example test_attention_3d_causal
test_attention_4d_gqa test_averagepool_2d_ceil_last_window_starts_on_pad
test_basic_conv_with_padding test_batchnorm_epsilon test_bitshift_left_int16 test_bitwise_and_i32_2d
test_bitwise_not_2d test_bitwise_or_i32_2d test_bitwise_xor_i32_2d test_cast_FLOAT_to_DOUBLE
test_ceil_example test_celu_float16 test_center_crop_pad_crop_and_pad test_clip_default_inbounds
test_concat_1d_axis_0 test_constant test_constant_pad test_constantofshape_int_shape_zero
test_convtranspose_1d test_cos_example test_cosh_example test_cumsum_1d
test_depthtospace_crd_mode_example test_dequantizelinear_axis test_div_example
test_dropout_default_old test_einsum_scalar test_elu_example test_equal_bcast test_erf
test_exp_example test_expand_dim_changed test_eyelike_with_dtype test_flatten_axis0
test_floor_example test_gather_2d_indices test_gather_elements_0 test_gathernd_example_int32
test_gelu_default_1 test_gemm_default_scalar_bias test_globalaveragepool_precomputed
test_globalmaxpool_precomputed test_greater_bcast test_greater_equal_bcast
test_group_normalization_epsilon test_hardmax_one_hot test_hardsigmoid_example test_hardswish
test_identity test_instancenorm_example test_isinf test_isnan test_l1normalization_axis_0
test_l2normalization_axis_0 test_layer_normalization_2d_axis1
test_layer_normalization_4d_axis0_expanded test_leakyrelu_example test_less_bcast
test_less_equal_bcast test_log_example test_logsoftmax_example_1 test_lppool_2d_dilations test_lrn
test_matmul_1d_1d test_max_one_input test_maxpool_2d_ceil_output_size_reduce_by_one
test_mean_one_input test_min_one_input test_mish test_mod_uint16 test_mul_example test_neg_example
test_nllloss_NC test_nonzero_example test_not_2d test_onehot_without_axis test_or2d
test_pow_bcast_scalar test_prelu_broadcast test_quantizelinear test_range_float_type_positive_delta
test_reciprocal_example test_reduce_max_default_axes_keepdim_example
test_reduce_mean_keepdims_example test_reduce_min_default_axes_keepdims_example
test_reduce_prod_default_axes_keepdims_example test_reduce_sum_keepdims_example test_relu
test_reshape_allowzero_reordered test_reversesequence_batch test_rms_normalization_2d_axis1
test_round test_scatter_elements_with_axis test_scatter_with_axis
test_scatternd_max_with_element_indices test_sce_mean test_selu_example test_shape_example
test_shrink_hard test_sigmoid_example test_sign test_sin_example test_sinh_example test_size_example
test_slice test_softmax_axis_0 test_softmax_example test_softplus_example test_softsign_example
test_spacetodepth_example test_split_equal_parts_1d_opset13 test_split_variable_parts_2d_opset18
test_sqrt_example test_squeeze test_sub_example test_sum_one_input test_swish test_tan_example
test_tanh_example test_thresholdedrelu_example test_tile test_top_k
test_transpose_all_permutations_0 test_tril_one_row_neg test_unsqueeze_axis_0 test_where_example
test_xor2d test_blackmanwindow test_castlike_FLOAT_to_FLOAT16 test_cumprod_1d_reverse_exclusive
test_hammingwindow_symmetric test_reduce_l1_keep_dims_random test_reduce_l2_negative_axes_keep_dims_example
test_reduce_log_sum_desc_axes test_reduce_log_sum_exp_keepdims_random test_reduce_sum_square_do_not_keepdims_random
test_cast_FLOAT_to_FLOAT8E4M3FN test_cast_FLOAT8E5M2FNUZ_to_FLOAT16 test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ
test_cast_FLOAT_to_BFLOAT16 test_cast_FLOAT_to_INT4 test_cast_UINT2_to_FLOAT test_cast_FLOAT16_to_FLOAT4E2M1
test_cast_e8m0_FLOAT_to_FLOAT8E8M0 test_castlike_FLOAT_to_FLOAT8E5M2 test_bitcast_float32_to_int32
test_bitcast_bool_to_uint8 test_quantizelinear_e4m3fn test_quantizelinear_int4 test_dequantizelinear_float4e2m1
test_dequantizelinear_uint2 test_celu_bfloat16 test_einsum_batch_matmul_bfloat16 test_pow_types_int64_int64
test_bitshift_left_int32_shift_ge_width test_bitshift_right_int8_negative_shift
test_mod_float_edge_cases_fmod_0_float32 test_causal_conv_with_state_kernel_size_one
test_affine_grid_2d test_center_crop_pad_crop_and_pad test_col2im test_constant_pad_axes test_cumsum_1d_reverse
test_dft_axis test_edge_pad test_reflect_pad test_onehot_with_axis test_range_int32_type_negative_delta
test_reduce_mean_default_axes_keepdims_random test_resize_downsample_scales_cubic test_slice_default_steps
test_split_variable_parts_1d_opset18 test_squeeze_negative_axes test_stft test_tile_precomputed
test_top_k_negative_axis test_unsqueeze_negative_axes test_upsample_nearest test_hannwindow_symmetric
test_wrap_pad test_reduce_max_empty_set test_reduce_min_empty_set test_resize_upsample_sizes_nearest_not_larger
test_blackmanwindow_symmetric_expanded test_hannwindow_symmetric_expanded test_affine_grid_3d_expanded
""".split()
# control flow, sequences, optionals (script/onnx_ops_control.py, onnx_ops_sequence.py)
CLAIMED += """
test_if test_if_seq test_identity_sequence test_identity_opt test_scan_sum test_scan9_sum test_scan9_multi_state
test_scan9_scalar test_range_float_type_positive_delta_expanded test_range_int32_type_negative_delta_expanded
test_linear_attention_gated_expanded test_sequence_insert_at_back test_split_to_sequence_nokeepdims
test_sequence_map_add_2_sequences test_sequence_map_add_1_sequence_1_tensor_expanded
test_sequence_map_identity_2_sequences_expanded test_sequence_map_extract_shapes
test_optional_get_element_optional_sequence test_optional_get_element_tensor
test_optional_has_element_empty_optional_input test_optional_has_element_empty_no_input_name_tensor_input
test_optional_has_element_tensor_input test_sequence_insert_at_front test_split_to_sequence_1 test_split_to_sequence_2
test_loop16_seq_none
""".split()
# operators without a converter before, other domains, and results made to follow the reference
# (script/onnx_ops_{layers,linalg,ml,preview,select,text,training}.py)
CLAIMED += """
test_nonmaxsuppression_iou_threshold_boundary test_unique_not_sorted_without_axis test_compress_1 test_adagrad
test_adam_multiple test_nesterov_momentum test_ai_onnx_ml_binarizer test_ai_onnx_ml_array_feature_extractor
test_ai_onnx_ml_tree_ensemble_set_membership test_mvn test_maxunpool_export_with_output_shape
test_attention_23_boolmask_fullymasked_row_nan_robustness_expanded test_attention_4d_fp16_expanded
test_causal_conv_with_state_silu_fp16_expanded test_flexattention_relative_positional test_flexattention_gqa
test_tfidfvectorizer_tf_batch_uniandbigrams_skip5 test_det_2d test_batchnorm_epsilon_training_mode
test_maxpool_with_argmax_2d_precomputed_strides
""".split()

# string tensors: the string operators as run-time functions (script/onnx_ops_string.py)
CLAIMED += """
test_string_concat test_string_concat_broadcasting test_string_concat_zero_dimensional
test_string_concat_empty_string test_string_concat_utf8 test_string_split_basic test_string_split_maxsplit
test_string_split_consecutive_delimiters test_string_split_empty_string_delimiter test_string_split_no_delimiter
test_string_split_empty_tensor test_strnormalizer_nostopwords_nochangecase
test_strnormalizer_export_monday_casesensintive_nochangecase test_strnormalizer_export_monday_casesensintive_lower
test_strnormalizer_export_monday_casesensintive_upper test_strnormalizer_export_monday_empty_output
test_strnormalizer_export_monday_insensintive_upper_twodim test_regex_full_match_basic
test_regex_full_match_email_domain test_regex_full_match_empty test_equal_string test_equal_string_broadcast
test_ai_onnx_ml_label_encoder_string_int test_ai_onnx_ml_label_encoder_string_int_no_default
test_ai_onnx_ml_label_encoder_tensor_mapping test_ai_onnx_ml_label_encoder_tensor_value_only_mapping
""".split()
# forms added with them (SpaceToDepth's mode, Dropout ratio 0 in training, Transpose of unknown rank,
# an If with an empty optional branch, RoiAlign's max, Resize's keep_aspect_ratio_policy rounding up)
CLAIMED += """
test_spacetodepth_dcr_mode_example test_spacetodepth_crd_mode_example test_training_dropout_zero_ratio
test_training_dropout_zero_ratio_mask test_affine_grid_2d_expanded test_affine_grid_2d_align_corners_expanded
test_affine_grid_3d_align_corners_expanded test_if_opt test_roialign_mode_max
test_resize_downsample_sizes_nearest_not_smaller
""".split()


def test_claimed_node_cases_pass():
    suite = _benchmark("onnx_suite")
    cases = {c.name: c for c in suite.node_cases()}
    missing = [name for name in CLAIMED if name not in cases]
    assert not missing, f"not node cases of this onnx version: {missing}"
    failures = []
    for name in CLAIMED:
        kind, detail = suite.run_tvms(*suite.case_job(cases[name]))
        if kind != "pass":
            failures.append(f"{name}: {kind}: {detail[:200]}")
    assert not failures, "\n".join(failures)


def test_importing_tvms_does_not_import_onnx():
    code = "import sys, tvms, tvms.relax.frontend; print('onnx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in dict(initializers).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(mod, *args):
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*[tvms.nd.array(a) for a in args]).numpy()


RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 6)).astype("float32")
B = RNG.standard_normal(4).astype("float32")


def _linear_model():
    """y = relu(x @ W.T + B), x of shape (batch, 6) with a named batch dimension."""
    return _model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                   helper.make_node("Relu", ["h"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                  {"w": W, "b": B})


def test_weights_are_constants_and_named_dimensions_symbolic():
    mod = from_onnx(_linear_model())
    main_fn = mod["main"]
    assert [p.name for p in main_fn.params] == ["x"] and main_fn.attrs["num_input"] == 1
    assert "batch = T.int64()" in mod.script()
    x = RNG.standard_normal((3, 6)).astype("float32")
    np.testing.assert_allclose(_run(mod, x), np.maximum(x @ W.T + B, 0), rtol=1e-5, atol=1e-6)


def test_keep_params_in_input():
    mod = from_onnx(_linear_model(), keep_params_in_input=True)
    assert [p.name for p in mod["main"].params] == ["x", "w", "b"] and mod["main"].attrs["num_input"] == 1
    mod, params = detach_params(mod)
    assert "params" not in mod["main"].attrs
    np.testing.assert_array_equal(params["main"][0], W)
    x = RNG.standard_normal((2, 6)).astype("float32")
    np.testing.assert_allclose(_run(mod, x, W, B), np.maximum(x @ W.T + B, 0), rtol=1e-5, atol=1e-6)


def test_shape_dict_fixes_a_dimension():
    mod = from_onnx(_linear_model(), shape_dict={"x": [5, 6]})
    assert mod["main"].params[0].struct_info.dims[0].value == 5


def _softmax_model(opset):
    return _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])], opset=opset)


def test_the_converter_follows_the_opset():
    """Softmax: before opset 13 over the flattened dimensions from the axis on, then over one axis."""
    x = RNG.standard_normal((2, 3, 4)).astype("float32")

    def softmax(v, axis):
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    flat = softmax(x.reshape(2, 12), 1).reshape(2, 3, 4)
    np.testing.assert_allclose(_run(from_onnx(_softmax_model(11)), x), flat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(from_onnx(_softmax_model(13)), x), softmax(x, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(from_onnx(_softmax_model(17), opset=11), x), flat, rtol=1e-5, atol=1e-6)


def test_unsupported_operator_and_attribute_name_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = _model([helper.make_node("GlobalLpPool", ["x"], ["y"], name="pool")], [x], [y])
    with pytest.raises(TVMSError, match=r"node 'pool' \(GlobalLpPool, opset 17\): the operator GlobalLpPool "
                                        r"is not supported"):
        from_onnx(model)
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r", shape="odd")], [x], [y])
    with pytest.raises(TVMSError, match=r"node 'r' \(Relu, opset 17\): the attribute shape is not supported"):
        from_onnx(model)


def _reduce_sum_model():
    """ReduceSum of x over the axes given as a graph input: Relu(ReduceSum(x, axes))."""
    return _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0),
                   helper.make_node("Relu", ["y"], ["z"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                  [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])


def test_an_axes_input_known_at_run_time_is_converted_when_it_arrives():
    from tvms import onnx_node

    mod = from_onnx(_reduce_sum_model())
    text = mod.script()
    assert ('R.call_pure_packed("tvms.onnx.specialized_node", '
            'R.str("opset 17: y = ReduceSum <keepdims: int = 0> (x, axes)"), x, axes, '
            'sinfo_args=(R.Tensor(dtype="float32"),))') in text
    assert from_source(text).script() == text  # (the printed call round-trips)
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    x = RNG.standard_normal((2, 3)).astype("float32")
    before = dict(onnx_node.stats)
    for axis in (1, 0, 1, -1):
        out = vm["main"](tvms.nd.array(x), tvms.nd.array(np.array([axis]))).numpy()
        np.testing.assert_allclose(out, np.maximum(x.sum(axis=axis), 0), rtol=1e-5)
    # one compile per distinct axes value (-1 and 1 are distinct values); the repeat is a hit
    assert onnx_node.stats["compiled"] - before["compiled"] == 3
    assert onnx_node.stats["hits"] - before["hits"] == 1
    # bind_inputs still specializes the model itself, with no run-time conversion left
    bound = from_onnx(bind_inputs(_reduce_sum_model(), {"axes": np.array([1])}))
    assert "call_pure_packed" not in bound.script()
    np.testing.assert_allclose(_run(bound, x), np.maximum(x.sum(axis=1), 0), rtol=1e-5)


def test_a_run_time_node_called_from_several_threads_at_once():
    """Each thread runs the cached specialization on a VM of its own (a VM reuses its buffers,
    so a shared one mixes the threads' intermediates)."""
    import threading

    model = _model([helper.make_node("ReduceSumSquare", ["x", "axes"], ["y"], keepdims=0)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256]),
                    helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=18)
    ex, axes = tvms.compile(from_onnx(model), "llvm"), tvms.nd.array(np.array([0]))
    wrong = []

    def work(seed):
        vm, rng = relax.VirtualMachine(ex, tvms.cpu()), np.random.default_rng(seed)
        for _ in range(150):
            x = rng.standard_normal((256, 256)).astype("float32") * (seed + 1)
            out = vm["main"](tvms.nd.array(x), axes).numpy()
            wrong.extend([] if np.allclose(out, (x * x).sum(0), rtol=1e-3) else [seed])

    work(0)  # (compiled once, before the threads)
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_a_node_failing_to_convert_at_run_time_is_named():
    model = _model([helper.make_node("Pad", ["x", "pads"], ["y"], "p", mode="wrap")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("pads", TensorProto.INT64, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=19)
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out = vm["main"](tvms.nd.array(x), tvms.nd.array(np.array([0, 1, 1, 2]))).numpy()
    np.testing.assert_array_equal(out, np.pad(x, [(0, 1), (1, 2)], mode="wrap"))
    with pytest.raises(TVMSError, match=r"tvms\.onnx\.specialized_node: converting at run time: node 'p' "
                                        r"\(Pad, opset 19\): not supported: negative pads \(cropping\)"):
        vm["main"](tvms.nd.array(x), tvms.nd.array(np.array([0, -1, 0, 0])))
    from tvms.script.onnx_deferred import parse_spec
    with pytest.raises(TVMSError, match="is not an ONNX node as the importer writes it"):
        parse_spec("opset x: y = Relu (x)")


def test_crafted_run_time_nodes_are_errors_not_crashes():
    """A payload of ``tvms.onnx.specialized_node`` (a .tvms file may say anything) is checked
    against the operator's schema and its call's arguments; a run-time shape is checked before
    the tensor is made."""
    node = tvms.runtime.get_global_func("tvms.onnx.specialized_node")
    x = tvms.nd.array(np.ones((2, 3), "float32"))
    for spec, args, message in [
            ("= Relu (x)", [x], r"node '' \(Relu, opset 17\): has 0 outputs, the operator takes 1"),
            ("y = Relu ()", [], r"has 0 inputs, the operator takes 1"),
            ("y, z = Relu (x)", [x], r"has 2 outputs, the operator takes 1"),
            ("y = Gemm (a, , c)", [x, x], r"its input 'B' \(position 1\) is required"),
            ("y = Relu (x)", [x, x], r"the Relu node has 1 input, but the call passes 2"),
            ("y = Pad (x, p, c)", [x, x], r"the Pad node has 3 inputs, but the call passes 2"),
            ("y = ConstantOfShape (s)", [np.array([-3])], r"shape \(-3,\): a dimension is negative"),
            ("y = ConstantOfShape (s)", [np.array([10**12])], r"would take 4000000000000 bytes, more than this "
                                                              r"machine's memory")]:
        with pytest.raises(TVMSError, match=message):
            node(f"opset 17: {spec}", *args)
    # (the same schema check covers a model's own nodes)
    model = _model([helper.make_node("Relu", ["x", "x"], ["y"], "r")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(TVMSError, match=r"node 'r' \(Relu, opset 17\): has 2 inputs, the operator takes 1"):
        from_onnx(model)


def test_run_time_node_caches_are_bounded(monkeypatch):
    from tvms import onnx_node

    monkeypatch.setattr(onnx_node, "_CACHE_SIZE", 2)
    node = tvms.runtime.get_global_func("tvms.onnx.specialized_node")
    for n in range(2, 6):  # (inputs of a new shape each time: a new entry in both caches)
        x = np.ones((n, 3), "float32")
        np.testing.assert_array_equal(node("opset 17: y = ReduceSum (x, axes)", x, np.array([0])), x.sum(0, keepdims=True))
    assert len(onnx_node._deciding) <= 2 and len(onnx_node._compiled) <= 2


def test_cli_import_then_run_converts_run_time_nodes(tmp_path, capsys):
    path, out = tmp_path / "reduce.onnx", tmp_path / "reduce.tvms"
    onnx.save(_reduce_sum_model(), str(path))
    assert main(["import", str(path), "-o", str(out)]) == 0
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, 6.5]], np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "axes.npy", np.array([1]))
    capsys.readouterr()
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--input", f"axes={tmp_path / 'axes.npy'}"]) == 0
    assert capsys.readouterr().out.endswith("[2. , 7.5]\n")


def test_shape_computations_fold_to_static_shapes():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: a static reshape, not shape arithmetic."""
    n = helper.make_node
    model = _model([n("Shape", ["x"], ["s"]), n("Gather", ["s", "zero"], ["s0"], axis=0),
                    n("Unsqueeze", ["s0", "axes"], ["s1"]), n("Concat", ["s1", "minus_one"], ["t"], axis=0),
                    n("Reshape", ["x", "t"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
                   {"zero": np.array(0), "axes": np.array([0]), "minus_one": np.array([-1])})
    mod = from_onnx(model)
    assert "R.shape_of" not in mod.script() and "R.Tensor((2, 12)" in mod.script()


def test_constant_nodes_fold_by_tvms_own_evaluation(monkeypatch):
    """Nodes of constant inputs (Range -> Less -> Where, Sqrt, a Cast) fold to one constant,
    evaluated by tvms (its converters' operators on numpy), and so do Resize's and DFT's
    matrices: onnx's reference evaluator is never run by the importer."""
    from onnx import reference

    def refuse(*args, **kwargs):
        raise AssertionError("the importer ran onnx's reference evaluator")

    monkeypatch.setattr(reference.ReferenceEvaluator, "__init__", refuse)
    n = helper.make_node
    model = _model([n("Range", ["zero", "four", "one"], ["r"]), n("Less", ["r", "two"], ["m"]),
                    n("Sqrt", ["w"], ["s"]), n("Where", ["m", "s", "w"], ["v"]), n("Cast", ["v"], ["c"], to=1),
                    n("Add", ["x", "c"], ["a"]),
                    n("Resize", ["a", "", "scales"], ["b"], mode="linear"),
                    n("Unsqueeze", ["b", "axes"], ["u"]), n("DFT", ["u"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   {"zero": np.array(0.0), "four": np.array(4.0), "one": np.array(1.0), "two": np.array(2.0),
                    "w": np.array([4.0, 9.0, 16.0, 25.0]), "scales": np.array([2.0], "float32"),
                    "axes": np.array([0, 2])})
    mod = from_onnx(model)
    assert not any(f"R.{name}(" in mod.script() for name in ("arange", "less", "where", "sqrt"))
    x = np.arange(4, dtype="float32")
    a = x + np.array([2.0, 3.0, 16.0, 25.0], "float32")
    b = np.interp(np.arange(8) / 2 - 0.25, np.arange(4), a)  # (half_pixel, clamped at the edges)
    spectrum = np.fft.fft(b)
    np.testing.assert_allclose(_run(mod, x)[0, :, 0], spectrum.real, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(_run(mod, x)[0, :, 1], spectrum.imag, rtol=1e-5, atol=1e-4)


def test_shape_computations_on_a_symbolic_batch_stay_compiled():
    """Reshape(x, Concat(Shape(x)[0:1], [-1])), then a ConstantOfShape, an Expand and a Range of
    sizes computed from the batch (Gather, Mul, Unsqueeze, Concat): symbolic shapes, no run-time
    step."""
    n = helper.make_node
    model = _model([n("Shape", ["x"], ["s"]), n("Slice", ["s", "zero", "one"], ["b"]),
                    n("Concat", ["b", "minus_one"], ["t"], axis=0), n("Reshape", ["x", "t"], ["y"]),
                    n("Gather", ["s", "izero"], ["d"], axis=0), n("Mul", ["d", "two"], ["d2"]),
                    n("Unsqueeze", ["d2", "zero"], ["u"]), n("Concat", ["u", "six"], ["t2"], axis=0),
                    n("ConstantOfShape", ["t2"], ["c"], value=numpy_helper.from_array(np.array([0.5], "float32"))),
                    n("Reshape", ["y", "t2"], ["y2"]), n("Expand", ["w", "t2"], ["e"]),
                    n("Add", ["y2", "c"], ["a"]), n("Add", ["a", "e"], ["z"]),
                    n("Range", ["izero", "d2", "two"], ["r"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
                   [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("r", TensorProto.INT64, None)],
                   {"zero": np.array([0]), "one": np.array([1]), "minus_one": np.array([-1]), "izero": np.array(0),
                    "two": np.array(2), "six": np.array([6]), "w": np.arange(6, dtype="float32")})
    mod = from_onnx(model)
    text = mod.script()
    assert "R.reshape(x, R.shape([batch, 12]))" in text
    assert 'R.full(R.shape([batch * 2, 6]), R.const(0.5, "float32"), dtype="float32")' in text
    assert "R.broadcast_to(" in text and 'R.Tensor(("batch * 2", 6), dtype="float32")' in text
    assert 'R.arange(R.prim_value(0), R.prim_value(batch * 2), R.prim_value(2), dtype="int64")' in text
    assert "shape_of" not in text and "call_pure_packed" not in text
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    for batch in (1, 5):
        x = RNG.standard_normal((batch, 3, 4)).astype("float32")
        z, r = vm["main"](tvms.nd.array(x))
        np.testing.assert_allclose(z.numpy(), x.reshape(2 * batch, 6) + 0.5 + np.arange(6), rtol=1e-6)
        np.testing.assert_array_equal(r.numpy(), np.arange(0, 2 * batch, 2))


def test_shape_values_read_as_tensors_are_computed_from_the_sizes():
    """Sizes arithmetic that a graph outputs (or a node not following sizes reads) becomes
    tensor operators on R.shape_to_tensor of the sizes."""
    n = helper.make_node
    model = _model([n("Shape", ["x"], ["s"]), n("Mul", ["s", "two"], ["s2"]),
                    n("Gather", ["s2", "izero"], ["g"], axis=0), n("Add", ["s", "s2"], ["s3"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                   [helper.make_tensor_value_info(name, TensorProto.INT64, None) for name in ("s2", "g", "s3")],
                   {"two": np.array(2), "izero": np.array(0)})
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    s2, g, s3 = (t.numpy() for t in vm["main"](tvms.nd.array(np.zeros((5, 3), "float32"))))
    np.testing.assert_array_equal(s2, [10, 6])
    assert g.shape == () and g == 10
    np.testing.assert_array_equal(s3, [15, 9])


def test_cli_import_writes_a_module_the_toolchain_runs(tmp_path, capsys):
    path = tmp_path / "linear.onnx"
    onnx.save(_linear_model(), str(path))
    out = tmp_path / "linear.tvms"
    assert main(["import", str(path), "-o", str(out), "--shape", "x=3,6"]) == 0
    mod = from_source(out.read_text(), str(out))
    x = RNG.standard_normal((3, 6)).astype("float32")
    np.testing.assert_allclose(_run(mod, x), np.maximum(x @ W.T + B, 0), rtol=1e-5, atol=1e-6)
    assert main(["import", str(path), "-o", str(tmp_path / "kept.tvms"), "--keep-params-in-input"]) == 0
    saved = np.load(tmp_path / "kept.params.npz")
    np.testing.assert_array_equal(saved["w"], W)
    capsys.readouterr()


def test_cli_import_errors_are_messages(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["import", str(bad)]) == 2
    assert main(["import", str(tmp_path / "none.onnx")]) == 2
    model = _model([helper.make_node("GlobalLpPool", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(model, str(tmp_path / "pool.onnx"))
    assert main(["import", str(tmp_path / "pool.onnx")]) == 1
    assert main(["import", str(tmp_path / "pool.onnx"), "--shape", "z=1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "the operator GlobalLpPool is not supported" in err
    assert "--shape names z, not an input of the model" in err


@pytest.mark.slow
def test_light_squeezenet_matches_its_expected_output():
    """The smallest of the light models onnx ships (benchmarks/onnx_models.py runs all nine)."""
    model, feeds, expected = _benchmark("onnx_models").load("squeezenet")
    out = _run(from_onnx(model), *feeds.values())
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-7)


def test_huge_constants_are_refused_or_filled_at_run_time_not_built():
    """A few bytes of input asking for GiBs: never built at import time (MemoryError before)."""
    n = helper.make_node
    big = np.array([2 ** 30, 2 ** 30], "int64")
    model = _model([n("ConstantOfShape", ["s"], ["y"])], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], {"s": big})
    assert "R.full(R.shape([1073741824, 1073741824])" in from_onnx(model).script()
    ranged = _model([n("Range", ["a", "b", "c"], ["y"], name="r")], [],
                    [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                    {"a": np.array(0), "b": np.array(2 ** 50), "c": np.array(1)})
    with pytest.raises(TVMSError, match=r"node 'r' \(Range, opset 17\): the range would have "
                                        r"1125899906842624 elements"):
        from_onnx(ranged)
    expand = _model([n("Expand", ["x", "s"], ["y"], name="e")], [],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                    {"x": np.ones(1, "float32"), "s": big})
    with pytest.raises(TVMSError, match=r"node 'e' \(Expand, opset 17\): the expanded constant would have"):
        from_onnx(expand)
    window = _model([n("HannWindow", ["k"], ["y"], name="w")], [],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], {"k": np.array(2 ** 40)})
    assert "R.arange(R.prim_value(0), R.prim_value(1099511627776)" in from_onnx(window).script()  # (at run time)
    # small ones still fold to constants
    small = _model([n("ConstantOfShape", ["s"], ["y"])], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], {"s": np.array([2, 3])})
    assert "R.full" not in from_onnx(small).script()


def test_malformed_models_are_input_errors_naming_the_part(tmp_path, capsys):
    """An invalid model (an unknown element type, tensor data not matching its dims, in an
    initializer, a Constant or a branch's initializer, a non-UTF-8 string attribute, a name no
    node defines, the wrong arity, no outputs at all) is an InvalidModel from from_onnx and an
    input error from tvms import (exit 2: exit 1 is left to forms tvms does not convert)."""
    n = helper.make_node
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], raw_data=b"\0" * 20)

    def graph(nodes, inputs=(x,), inits=(), opset=17):
        return helper.make_model(helper.make_graph(nodes, "g", list(inputs), [y], list(inits)),
                                 opset_imports=[helper.make_opsetid("", opset)])

    branch = helper.make_graph([n("Add", ["x", "w"], ["t"])], "then", [], [y], [short])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    init = r"initializer 'w': its data does not make a tensor of shape \[2, 3\] and element type FLOAT"
    cases = {"input": (graph([n("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", 99, [2])]),
                       r"graph input 'x': the element type 99 is not an ONNX tensor type"),
             "initializer": (graph([n("Relu", ["w"], ["y"])], [], [short]), init),
             "branch": (graph([n("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=branch)],
                              [cond, x]), r"node 'if' \(If, opset 17\): " + init),
             "value": (graph([n("Constant", [], ["y"], name="k", value=short)], []),
                       r"node 'k' \(Constant, opset 17\): the attribute value: its data does not make"),
             "attribute": (graph([n("Gelu", ["x"], ["y"], name="g", approximate=b"\xff")], opset=20),
                           r"node 'g' \(Gelu, opset 20\): the attribute approximate is not UTF-8"),
             "defines": (graph([n("Add", ["x", "z"], ["y"], name="a")]), r"node 'a' \(Add, opset 17\) "
                         r"reads 'z', which no node, input or initializer defines"),
             "takes": (graph([n("Add", ["x"], ["y"], name="a")]), r"has 1 inputs, the operator takes 2"),
             "outputs": (onnx.ModelProto(), r"the model has no graph outputs")}
    for name, (model, message) in cases.items():
        with pytest.raises(InvalidModel, match=message):
            from_onnx(model)
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(model.SerializeToString())
        assert main(["import", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert "Traceback" not in err and name in err
    good = _model([n("Relu", ["x"], ["y"])], [x], [y]).SerializeToString()
    (tmp_path / "truncated.onnx").write_bytes(good[:len(good) // 2])
    assert main(["import", str(tmp_path / "truncated.onnx")]) == 2
    assert "cannot read the ONNX model" in capsys.readouterr().err
    weights = graph([n("Add", ["x", "w"], ["y"])], inits=[numpy_helper.from_array(np.ones(2, "float32"), "w")])
    onnx.save_model(weights, str(tmp_path / "external.onnx"), save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    (tmp_path / "w.bin").unlink()  # (onnx's loader raised its ValidationError through: exit 70)
    assert main(["import", str(tmp_path / "external.onnx")]) == 2
    assert "cannot read the ONNX model" in capsys.readouterr().err


def test_numpy_errors_in_a_converter_name_the_node(monkeypatch):
    from tvms.script.onnx_convert import CONVERTERS, OnnxOpConverter

    class Refusing(OnnxOpConverter):
        @classmethod
        def _impl_v1(cls, ctx, inputs, attrs):
            np.zeros(2 ** 62, "float64")  # (numpy: MemoryError, or ValueError: array too big)

    monkeypatch.setitem(CONVERTERS, "Relu", Refusing)
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(TVMSError, match=r"node 'r' \(Relu, opset 17\): (MemoryError|ValueError): "):
        from_onnx(model)


def test_cli_import_params_file_takes_any_name_and_follows_the_module(tmp_path, capsys):
    model = _model([helper.make_node("Add", ["x", "allow_pickle"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], {"allow_pickle": B})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert main(["import", str(path), "-o", str(tmp_path / "m.tvms"), "--keep-params-in-input"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "m.params.npz")["allow_pickle"], B)
    (tmp_path / "d.tvms").mkdir()  # (the module cannot be written: no values are left beside it)
    assert main(["import", str(path), "-o", str(tmp_path / "d.tvms"), "--keep-params-in-input"]) == 2
    assert not (tmp_path / "d.params.npz").exists()
    assert "Traceback" not in capsys.readouterr().err


def test_range_and_constantofshape_converters_themselves():
    """The node cases of these operators have constant inputs only, so the importer folds them
    (evaluating what the converters emit): run the converters directly."""
    from tvms.script.block_builder import BlockBuilder, const
    from tvms.script.onnx_convert import CONVERTERS, Attrs, Context

    ctx = Context(BlockBuilder(), 17)
    args = [const(np.array(v, "float32"), "float32") for v in (1.0, 5.0, 1.5)]
    value = CONVERTERS["Range"].get_converter(17)(ctx, args, Attrs({})).data
    np.testing.assert_array_equal(value, np.arange(1.0, 5.0, 1.5, dtype="float32"))
    assert value.dtype == np.float32
    zero = CONVERTERS["ConstantOfShape"].get_converter(17)(
        ctx, [const(np.array([4, 0], "int64"), "int64")], Attrs({"value": np.array([7], "int32")})).data
    assert zero.shape == (4, 0) and zero.dtype == np.int32
    # a shape known at run time: filled when the module runs
    seven = helper.make_tensor("v", TensorProto.INT32, [1], [7])
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], value=seven)],
                   [helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    np.testing.assert_array_equal(_run(from_onnx(model), np.array([2, 3])), np.full((2, 3), 7, "int32"))


def test_old_dropout_in_training_mode_is_refused():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    training = _model([helper.make_node("Dropout", ["x"], ["y"], name="d", is_test=0)], [x], [y], opset=6)
    with pytest.raises(TVMSError, match=r"node 'd' \(Dropout, opset 6\): not supported: is_test=0"):
        from_onnx(training)
    inference = _model([helper.make_node("Dropout", ["x"], ["y"], is_test=1)], [x], [y], opset=6)
    value = np.array([1.0, -2.0], "float32")
    np.testing.assert_array_equal(_run(from_onnx(inference), value), value)


def test_out_of_range_axes_are_refused_not_wrapped():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    ones = {"s": np.ones(3, "float32")}
    for node, opset, inits in [(helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=2), 17, ones),
                               (helper.make_node("Softmax", ["x"], ["y"], axis=-3), 11, {}),
                               (helper.make_node("Hardmax", ["x"], ["y"], axis=2), 13, {}),
                               (helper.make_node("ArgMax", ["x"], ["y"], axis=5, select_last_index=1), 13, {})]:
        with pytest.raises(TVMSError, match=r"not supported: axis -?\d is out of range for rank 2"):
            from_onnx(_model([node], [x], [y], inits, opset=opset))
