"""ONNX operator forms beyond what the node cases check (they are claimed in
test_onnx_frontend.py): RoiAlign's max mode and Resize's keep_aspect_ratio_policy against onnx's
reference evaluator on random data, Dropout in training mode decided at run time, an If whose
branch gives an empty optional."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.ir.errors import TVMSError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvms.relax.frontend.onnx import from_onnx  # noqa: E402

RNG = np.random.default_rng(0)


def _model(node, inputs, opset, initializers=()):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output],
                              [numpy_helper.from_array(v, k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vm(model):
    return relax.VirtualMachine(tvms.compile(from_onnx(model), "llvm"), tvms.cpu())["main"]


@pytest.mark.slow  # (~4 s: the default schedules of its one large fused kernel)
def test_roi_align_max_matches_the_reference():
    """half_pixel coordinates (test_roialign_mode_max, claimed, checks output_half_pixel)."""
    transform = "half_pixel"
    node = helper.make_node("RoiAlign", ["X", "rois", "b"], ["Y"], mode="max", output_height=3, output_width=4,
                            sampling_ratio=3, spatial_scale=0.5, coordinate_transformation_mode=transform)
    model = _model(node, [("X", TensorProto.FLOAT, [2, 3, 7, 9]), ("rois", TensorProto.FLOAT, [5, 4]),
                          ("b", TensorProto.INT64, [5])], 22)
    feeds = {"X": RNG.standard_normal((2, 3, 7, 9)).astype(np.float32),
             "rois": RNG.uniform(-6, 22, (5, 4)).astype(np.float32), "b": np.array([0, 1, 1, 0, 1])}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = _vm(model)(*[tvms.nd.array(v) for v in feeds.values()]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy,mode,transform,sizes", [
    ("not_smaller", "linear", "half_pixel", [4, 5, 6]),
    ("not_larger", "cubic", "pytorch_half_pixel", [3, 11, 4]),
    ("not_smaller", "nearest", "asymmetric", [9, 2, 13]),
    ("not_larger", "linear", "align_corners", [9, 2, 13]),
])
def test_resize_keep_aspect_ratio_matches_the_reference(policy, mode, transform, sizes):
    node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], axes=[1, 2, 3], mode=mode,
                            keep_aspect_ratio_policy=policy, coordinate_transformation_mode=transform)
    model = _model(node, [("X", TensorProto.FLOAT, [1, 5, 7, 9])], 19, [("sizes", np.array(sizes, np.int64))])
    x = RNG.standard_normal((1, 5, 7, 9)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"X": x})[0]
    np.testing.assert_allclose(_vm(model)(tvms.nd.array(x)).numpy(), want, rtol=1e-4, atol=1e-5)


def test_dropout_training_mode_decided_at_run_time():
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    run = _vm(_model(node, [("x", TensorProto.FLOAT, [2, 3]), ("r", TensorProto.FLOAT, []),
                            ("t", TensorProto.BOOL, [])], 13))
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    for ratio, training in ((0.0, True), (0.5, False)):
        y, mask = run(tvms.nd.array(x), tvms.nd.array(np.float32(ratio)), tvms.nd.array(np.bool_(training)))
        np.testing.assert_array_equal(y.numpy(), x)
        assert mask.numpy().all()
    y, mask = run(tvms.nd.array(x), tvms.nd.array(np.float32(0.5)), tvms.nd.array(np.bool_(True)))
    np.testing.assert_allclose(y.numpy(), np.where(mask.numpy(), 2 * x, 0), rtol=1e-6)  # (dropped at random)


def test_if_with_an_empty_optional_branch():
    empty = helper.make_graph([helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(1, [2]))],
                              "then", [], [helper.make_value_info("e", helper.make_optional_type_proto(
                                  helper.make_tensor_type_proto(1, [2])))])
    full = helper.make_graph([helper.make_node("Optional", ["x"], ["f"])], "else", [],
                             [helper.make_value_info("f", helper.make_optional_type_proto(
                                 helper.make_tensor_type_proto(1, [2])))])
    node = helper.make_node("If", ["c"], ["out"], then_branch=empty, else_branch=full)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_value_info("out", helper.make_optional_type_proto(
                                  helper.make_tensor_type_proto(1, [2])))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    run = _vm(model)
    x = np.array([1.5, -2.0], np.float32)
    assert run(tvms.nd.array(np.bool_(True)), tvms.nd.array(x)) is None
    np.testing.assert_array_equal(run(tvms.nd.array(np.bool_(False)), tvms.nd.array(x)).numpy(), x)
    # OptionalHasElement / OptionalGetElement of it are decided at run time, also in a subgraph
    # (where the If's result is captured as a new variable)
    model.graph.node.append(helper.make_node("OptionalHasElement", ["out"], ["has"]))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("has", TensorProto.BOOL, []))
    reader = helper.make_graph([helper.make_node("OptionalHasElement", ["out"], ["h"])], "reader", [],
                               [helper.make_tensor_value_info("h", TensorProto.BOOL, [])])
    nested = helper.make_model(model.graph, opset_imports=model.opset_import)
    nested.graph.node[-1].CopyFrom(helper.make_node("If", ["c"], ["has"], then_branch=reader, else_branch=reader))
    for has in (_vm(model), _vm(nested)):
        assert not has(tvms.nd.array(np.bool_(True)), tvms.nd.array(x)).numpy()
        assert has(tvms.nd.array(np.bool_(False)), tvms.nd.array(x)).numpy()
    model.graph.node[-1].CopyFrom(helper.make_node("OptionalGetElement", ["out"], ["got"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("got", TensorProto.FLOAT, [2]))
    got = _vm(model)
    np.testing.assert_array_equal(got(tvms.nd.array(np.bool_(False)), tvms.nd.array(x)).numpy(), x)
    with pytest.raises(TVMSError, match="OptionalGetElement of an empty optional"):
        got(tvms.nd.array(np.bool_(True)), tvms.nd.array(x))
