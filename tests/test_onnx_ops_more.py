"""The converters of onnx_ops_{layers,linalg,ml,select,text}.py and MaxPool's indices: the forms
ONNX's node suite does not exercise (TfIdfVectorizer beyond TF mode, ensembles of several trees,
larger Det, ...) checked against onnx's reference evaluator on the same model, and the node
cases too slow to compile for test_onnx_frontend's CLAIMED list (run with --runslow)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _check(node, feeds, out_type, out_shape, domains=(("", 22),), rtol=1e-5):
    """The node's model run by tvms and by the reference evaluator on ``feeds``."""
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", out_type, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in domains])
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    got = vm["main"](*feeds.values())
    np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=1e-5)


@pytest.mark.slow  # (compiles about 40 operators)
def test_det_pivots_and_gives_zero_for_a_singular_matrix():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 4, 4)).astype(np.float32)
    m[1, 0, :] = 0  # (a zero first pivot candidate: a row swap is needed)
    m[2, 3] = 2 * m[2, 1]  # (singular)
    _check(helper.make_node("Det", ["m"], ["y"]), {"m": m}, TensorProto.FLOAT, [3], rtol=1e-4)


@pytest.mark.parametrize("mode", ["IDF", "TFIDF"])
def test_tfidf_weighted_modes_with_unigrams(mode):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                            pool_int64s=[2, 3, 5, 2, 3, 5, 4], weights=[0.5, 2.0, 1.0, 3.0, 0.25])
    x = np.array([[2, 3, 5, 2, 3, 4, 5], [5, 5, 4, 2, 3, 2, 3]], np.int32)
    _check(node, {"x": x}, TensorProto.FLOAT, [2, 5])


@pytest.mark.parametrize("aggregate", [0, 2, 3])  # (average, min, max)
def test_tree_ensemble_of_two_trees_with_missing_values(aggregate):
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=3, aggregate_function=aggregate,
        post_transform=0, tree_roots=[0, 2],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, (3,), [1, 3, 5]),
        nodes_featureids=[0, 1, 1], nodes_splits=helper.make_tensor("s", TensorProto.DOUBLE, (3,), [0.5, -1.0, 2.0]),
        nodes_missing_value_tracks_true=[1, 0, 0],
        nodes_truenodeids=[1, 0, 2], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[0, 1, 3],
        nodes_falseleafs=[1, 1, 1], leaf_targetids=[0, 1, 0, 1],  # (no leaf of target 2)
        leaf_weights=helper.make_tensor("w", TensorProto.DOUBLE, (4,), [1.5, -2.0, 4.0, 8.0]))
    x = np.array([[0.1, 3.0], [0.9, -3.0], [np.nan, 2.0], [0.2, -1.0]], np.float32)
    _check(node, {"x": x}, TensorProto.FLOAT, [4, 3], domains=(("", 22), ("ai.onnx.ml", 5)))


def test_non_max_suppression_with_a_zero_iou_threshold_and_no_score_threshold():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 2.05, 1, 3]]], np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95]]], np.float32)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "k", "i"], ["y"])  # (only disjoint boxes kept)
    feeds = {"b": boxes, "s": scores, "k": np.array([3], np.int64), "i": np.array([0], np.float32)}
    _check(node, feeds, TensorProto.INT64, None)


def test_label_encoder_on_numbers():
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[3, 7, 1, 7],
                            values_floats=[0.5, 1.5, -2.0, 4.0], default_float=9.0)
    _check(node, {"x": np.array([[7, 2], [1, 3]], np.int64)}, TensorProto.FLOAT, [2, 2],
           domains=(("", 22), ("ai.onnx.ml", 4)))
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_tensor=helper.make_tensor("k", TensorProto.FLOAT, (2,), [0.5, 2.5]),
                            values_tensor=helper.make_tensor("v", TensorProto.INT16, (2,), [4, 5]),
                            default_tensor=helper.make_tensor("d", TensorProto.INT16, (1,), [-7]))
    _check(node, {"x": np.array([2.5, 0.5, 1.0], np.float32)}, TensorProto.INT16, [3],
           domains=(("", 22), ("ai.onnx.ml", 4)))


def test_other_domains_name_what_is_not_converted():
    def model(node):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
        graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        opsets = [helper.make_opsetid("", 22), helper.make_opsetid("ai.onnx.ml", 3)]
        return helper.make_model(graph, opset_imports=opsets)

    with pytest.raises(TVMSError, match=r"\(Normalizer, opset 3\): operators of domain 'ai.onnx.ml' are not supported"):
        from_onnx(model(helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml")))
    with pytest.raises(TVMSError, match=r"\(Binarizer, opset 3\): the attribute bias is not supported"):
        from_onnx(model(helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", bias=1.0)))


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_with_dilation_stride_and_ceil_mode(storage_order):
    x = np.random.default_rng(1).standard_normal((2, 3, 7, 6)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["v", "y"], kernel_shape=[2, 3], strides=[2, 1], dilations=[2, 1],
                            pads=[1, 0, 0, 1], ceil_mode=1, storage_order=storage_order)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    outputs = [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("y", TensorProto.INT64, None)]
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 22)])
    values, indices = ReferenceEvaluator(model).run(None, {"x": x})
    vm = relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())
    got = vm["main"](x)
    np.testing.assert_array_equal(got[0].numpy(), values)
    np.testing.assert_array_equal(got[1].numpy(), indices)


# node cases whose models take seconds to compile (many gathers): run with --runslow
SLOW_CASES = ["test_deform_conv_with_mask_bias", "test_gridsample_bicubic",
              "test_gridsample_volumetric_bilinear_align_corners_1",
              "test_gridsample_volumetric_nearest_align_corners_0"]


@pytest.mark.slow
def test_slow_node_cases_pass():
    spec = importlib.util.spec_from_file_location("onnx_suite", ROOT / "benchmarks" / "onnx_suite.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    cases = {c.name: c for c in suite.node_cases()}
    results = {name: suite.run_tvms(*suite.case_job(cases[name], specialize=True)) for name in SLOW_CASES}
    assert all(kind == "pass" for kind, _ in results.values()), results
