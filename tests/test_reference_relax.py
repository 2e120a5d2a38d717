"""The Relax reference executor (runtime/reference_relax.py) and the numpy references of the
operators (runtime/numpy_ops.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tvms
from tvms import TVMSError
from tvms.ir import relax as rx
from tvms.ir import relax_op
from tvms.ir.struct_info import TensorStructInfo
from tvms.runtime.numpy_ops import NUMPY_OPS, Shape
from tvms.runtime.reference_relax import SPECIAL_OPS, eval_expr, register_func, run_relax
from tvms.script import from_source

from conftest import CORPUS_COPY

RNG = np.random.default_rng(11)


def load(name: str):
    return from_source((CORPUS_COPY / name).read_text())


# ---------------------------------------------------------------- the corpus
MLP = ["mlp_bias_dyn_01_exported", "mlp_bias_dyn_02_legalized", "mlp_bias_dyn_03_fused",
       "mlp_bias_dyn_04_zero_pipeline"]


@pytest.mark.parametrize("name", MLP)
def test_mlp_stages_agree_with_numpy(name: str) -> None:
    """Relax operators (01) and call_tir into PrimFuncs (02-04) give the numpy MLP: this checks
    the TensorIR executor against the operator references."""
    n = 3
    x = RNG.standard_normal((n, 784)).astype("float32")
    w1 = (RNG.standard_normal((256, 784)) * 0.05).astype("float32")
    b1 = RNG.standard_normal(256).astype("float32")
    w2 = (RNG.standard_normal((10, 256)) * 0.05).astype("float32")
    b2 = RNG.standard_normal(10).astype("float32")
    want = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    out = run_relax(load(name + ".tvms"), "forward", x, w1, b1, w2, b2)
    assert out.shape == (n, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_call_tir_with_a_symbolic_size() -> None:
    x = RNG.standard_normal(5).astype("float32")
    np.testing.assert_allclose(run_relax(load("relax_script_call_tir_dynamic.tvms"), "main", x), x + 1)


def test_closures_and_module_calls() -> None:
    x = RNG.standard_normal(4).astype("float32")
    out = run_relax(load("relax_script_closures_and_calls.tvms"), "main", x)
    np.testing.assert_allclose(out, (x + x) * x, rtol=1e-6)


def test_if() -> None:
    mod = load("relax_script_control_flow_if.tvms")
    x = RNG.standard_normal((4, 4)).astype("float32")
    np.testing.assert_allclose(run_relax(mod, "main", np.array(True), x), (x + x) * x)
    np.testing.assert_array_equal(run_relax(mod, "main", np.array(False), x), np.zeros((4, 4)))


def test_match_cast_binds_sizes() -> None:
    mod = load("relax_script_match_cast_shape.tvms")
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out = run_relax(mod, "main", x, (2, 3))
    np.testing.assert_array_equal(out, x.reshape(3, 2))
    with pytest.raises(TVMSError, match="match_cast"):
        run_relax(mod, "main", x, (3, 2))


def test_tuples() -> None:
    x = np.ones((2, 3), "float32")
    y = np.arange(3, dtype="int32")
    a, (b, c) = run_relax(load("relax_script_tuples.tvms"), "main", x, y)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, y)
    assert c == 7


def test_metadata_placeholders_are_refused_clearly() -> None:
    x = np.ones((2, 3), "float32")
    with pytest.raises(TVMSError, match="metadata"):
        run_relax(load("relax_script_constants_metadata.tvms"), "main", x)


def test_arguments_are_checked() -> None:
    mod = load("relax_script_tuples.tvms")
    with pytest.raises(TVMSError, match="dtype"):
        run_relax(mod, "main", np.ones((2, 3), "float64"), np.arange(3, dtype="int32"))
    with pytest.raises(TVMSError, match="dimension"):
        run_relax(mod, "main", np.ones((2, 4), "float32"), np.arange(3, dtype="int32"))


def test_packed_functions() -> None:
    @register_func("test.reference.add_one", override=True)
    def add_one(x, out):
        out.copyfrom(x.numpy() + 1)  # tensors arrive as TVM's NDArray, the output shared

    register_func("test.reference.double", lambda x: tvms.nd.array(x.numpy() * 2), override=True)
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = R.call_dps_packed("test.reference.add_one", (x,), out_sinfo=R.Tensor((3,), "float32"))
        z = R.call_packed("test.reference.double", y, sinfo_args=(R.Tensor((3,), "float32"),))
        return z
''')
    x = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(run_relax(mod, "main", x), (x + 1) * 2)
    with pytest.raises(TVMSError, match="already registered"):
        register_func("test.reference.double", lambda x: x)


# ---------------------------------------------------------------- the operator references
# what one worker of a program run on several devices does (collectives, local views): the
# single-process reference has no meaning for them
_PER_WORKER = ("relax.ccl.", "relax.dist.call_tir_local_view", "relax.dist.redistribute_replica_to_shard")


def test_every_registered_operator_has_a_numpy_reference() -> None:
    missing = [name for name in relax_op.script_names()
               if relax_op.lookup(name).name not in NUMPY_OPS and relax_op.lookup(name).name not in SPECIAL_OPS
               and not relax_op.lookup(name).name.startswith(_PER_WORKER)]
    assert not missing, f"Relax operators without a numpy reference in runtime/numpy_ops.py: {missing}"


def const(value, dtype="float32") -> rx.Constant:
    arr = np.asarray(value, dtype=dtype)
    return rx.Constant(arr, TensorStructInfo(list(arr.shape), dtype))


def call(name: str, *args, **attrs):
    """Build the call as the parser would (prepare + inference) and evaluate it."""
    return eval_expr(relax_op.make_call(name, list(args), attrs))


X = [[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]]
Y = [[2.0, 2.0, -2.0], [4.0, -5.0, 3.0]]


def test_elementwise_ops() -> None:
    x, y = const(X), const(Y)
    ax = np.array(X, "float32")
    assert call("add", x, y).tolist() == [[3, 0, 1], [0, 0, -3]]
    assert call("subtract", x, y).tolist() == [[-1, -4, 5], [-8, 10, -9]]
    assert call("multiply", x, y).tolist() == [[2, -4, -6], [-16, -25, -18]]
    assert call("divide", x, y).tolist() == [[0.5, -1, -1.5], [-1, -1, -2]]
    assert call("floor_divide", x, y).tolist() == [[0, -1, -2], [-1, -1, -2]]
    assert call("power", const([2.0, 3.0]), const([3.0, 2.0])).tolist() == [8, 9]
    assert call("maximum", x, y).tolist() == [[2, 2, 3], [4, 5, 3]]
    assert call("minimum", x, y).tolist() == [[1, -2, -2], [-4, -5, -6]]
    assert call("equal", x, x).all() and not call("not_equal", x, x).any()
    assert call("less", x, y).tolist() == [[True, True, False], [True, False, True]]
    assert call("less_equal", x, x).all()
    assert call("greater", x, y).tolist() == [[False, False, True], [False, True, False]]
    assert call("greater_equal", x, y).tolist() == [[False, False, True], [False, True, False]]
    assert call("add", x, const([10.0, 20.0, 30.0])).tolist() == [[11, 18, 33], [6, 25, 24]]  # broadcast
    i, j = const([7, -7], "int32"), const([2, 2], "int32")
    assert call("divide", i, j).tolist() == [3, -3]  # integer division truncates, as TVM's
    assert call("floor_divide", i, j).tolist() == [3, -4]
    assert call("add", i, j).dtype == np.int32
    assert call("negative", x).tolist() == (-ax).tolist()
    assert call("abs", x).tolist() == np.abs(ax).tolist()
    h = const([0.5, 1.5, -0.5, -1.7])
    assert call("floor", h).tolist() == [0, 1, -1, -2]
    assert call("ceil", h).tolist() == [1, 2, -0.0, -1]
    assert call("round", h).tolist() == [0, 2, -0.0, -2]
    p = const([1.0, 4.0])
    np.testing.assert_allclose(call("exp", p), [math.e, math.e ** 4], rtol=1e-6)
    np.testing.assert_allclose(call("log", p), [0, math.log(4)], rtol=1e-6)
    np.testing.assert_allclose(call("sqrt", p), [1, 2])
    np.testing.assert_allclose(call("rsqrt", p), [1, 0.5])
    np.testing.assert_allclose(call("sin", p), [math.sin(1), math.sin(4)], rtol=1e-6)
    np.testing.assert_allclose(call("cos", p), [math.cos(1), math.cos(4)], rtol=1e-6)
    np.testing.assert_allclose(call("tanh", p), [math.tanh(1), math.tanh(4)], rtol=1e-6)
    np.testing.assert_allclose(call("erf", p), [math.erf(1), math.erf(4)], rtol=1e-6)
    s = const([0.0, 2.0])
    np.testing.assert_allclose(call("sigmoid", s), [0.5, 1 / (1 + math.exp(-2))], rtol=1e-6)
    assert call("nn.relu", x).tolist() == [[1, 0, 3], [0, 5, 0]]
    np.testing.assert_allclose(call("nn.silu", s), [0, 2 / (1 + math.exp(-2))], rtol=1e-6)
    np.testing.assert_allclose(call("nn.gelu", s), [0, 0.5 * 2 * (1 + math.erf(2 / math.sqrt(2)))], rtol=1e-6)
    np.testing.assert_allclose(
        call("nn.gelu_tanh", s),
        [0, 0.5 * 2 * (1 + math.tanh(math.sqrt(2 / math.pi) * (2 + 0.044715 * 8)))], rtol=1e-6)
    out = call("astype", x, dtype="int32")
    assert out.dtype == np.int32 and out.tolist() == [[1, -2, 3], [-4, 5, -6]]
    w = call("where", const([True, False], "bool"), const([1.0, 2.0]), const([3.0, 4.0]))
    assert w.tolist() == [1, 4]
    assert all(call(n, x).dtype == np.float32 for n in ("exp", "nn.gelu", "nn.relu", "sigmoid"))


def test_reductions() -> None:
    x = const(X)
    assert call("sum", x).tolist() == -3
    assert call("sum", x, axis=[1]).tolist() == [2, -5]
    assert call("sum", x, axis=[0], keepdims=True).tolist() == [[-3, 3, -3]]
    np.testing.assert_allclose(call("mean", x, axis=[1]), [2 / 3, -5 / 3], rtol=1e-6)
    assert call("max", x, axis=[1]).tolist() == [3, 5]
    assert call("min", x).tolist() == -6
    am = call("argmax", x, axis=1)
    assert am.tolist() == [2, 1] and am.dtype == np.int64
    assert call("argmin", x, axis=0).tolist() == [1, 0, 1]
    assert call("argmax", x).tolist() == 4
    assert call("argmin", x, axis=1, keepdims=True).tolist() == [[1], [2]]


def test_creation() -> None:
    shape = rx.ShapeExpr([2, 2])
    assert call("zeros", shape, dtype="float32").tolist() == [[0, 0], [0, 0]]
    ones = call("ones", shape, dtype="int32")
    assert ones.tolist() == [[1, 1], [1, 1]] and ones.dtype == np.int32
    assert call("full", shape, const(2.5)).tolist() == [[2.5, 2.5], [2.5, 2.5]]
    assert call("shape_of", const(X)) == Shape((2, 3))


def test_layout_and_indexing() -> None:
    x = const(X)
    ax = np.array(X, "float32")
    assert call("matmul", x, const(np.ones((3, 1)))).tolist() == [[2], [-5]]
    assert call("permute_dims", x).tolist() == ax.T.tolist()
    assert call("permute_dims", const(np.zeros((1, 2, 3))), axes=[2, 0, 1]).shape == (3, 1, 2)
    assert call("reshape", x, rx.ShapeExpr([3, 2])).tolist() == [[1, -2], [3, -4], [5, -6]]
    assert call("broadcast_to", const([1.0, 2.0]), rx.ShapeExpr([2, 2])).tolist() == [[1, 2], [1, 2]]
    assert call("expand_dims", x, axis=[0, -1]).shape == (1, 2, 3, 1)
    assert call("squeeze", const(np.zeros((1, 2, 1))), axis=[0]).shape == (2, 1)
    assert call("squeeze", const(np.zeros((1, 2, 1)))).shape == (2,)
    assert call("concat", rx.Tuple([x, x]), axis=1).tolist() == np.concatenate([ax, ax], 1).tolist()
    parts = call("split", const(np.arange(5.0)), indices_or_sections=2)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4]]
    parts = call("split", x, indices_or_sections=[1, 2], axis=1)
    assert [p.tolist() for p in parts] == [[[1], [-4]], [[-2], [5]], [[3], [-6]]]
    sl = call("strided_slice", x, [1], [0], [3], [2])
    assert sl.tolist() == [[1, 3], [-4, -6]]
    assert call("take", x, const([2, 0], "int64"), axis=1).tolist() == [[3, 1], [-6, -4]]
    assert call("take", const([5.0, 6.0, 7.0]), const([2, 2], "int32")).tolist() == [7, 7]


def test_softmax_and_norms() -> None:
    x = const([[1.0, 2.0, 3.0]])
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(call("nn.softmax", x), [e / e.sum()], rtol=1e-6)
    np.testing.assert_allclose(call("nn.log_softmax", x), [np.log(e / e.sum())], rtol=1e-6)
    ln = call("nn.layer_norm", x, const([1.0, 1.0, 2.0]), const([0.0, 1.0, 0.0]), axes=[-1], epsilon=0.0)
    z = math.sqrt(1.5)  # (x - 2) / sqrt(2/3)
    np.testing.assert_allclose(ln, [[-z, 1, 2 * z]], rtol=1e-6)
    rms = call("nn.rms_norm", const([[3.0, 4.0]]), const([1.0, 2.0]), epsilon=0.0)
    r = math.sqrt(12.5)
    np.testing.assert_allclose(rms, [[3 / r, 8 / r]], rtol=1e-6)


def test_conv2d_and_pools() -> None:
    x = const(np.arange(16.0).reshape(1, 1, 4, 4))
    w = const(np.ones((1, 1, 2, 2)))
    out = call("nn.conv2d", x, w)
    assert out.tolist() == [[[[10, 14, 18], [26, 30, 34], [42, 46, 50]]]]
    out = call("nn.conv2d", x, w, strides=[2, 2])
    assert out.tolist() == [[[[10, 18], [42, 50]]]]
    out = call("nn.conv2d", x, const(np.ones((1, 1, 1, 1))), padding=[1, 1])
    assert out.shape == (1, 1, 6, 6) and out[0, 0, 0, 0] == 0 and out[0, 0, 1, 1] == 0
    out = call("nn.conv2d", x, const(np.ones((1, 1, 2, 2))), dilation=[2, 2])
    assert out.tolist() == [[[[20, 24], [36, 40]]]]  # 0 + 2 + 8 + 10
    g = const(np.arange(32.0).reshape(1, 2, 4, 4))
    out = call("nn.conv2d", g, const(np.ones((2, 1, 1, 1))), groups=2)
    np.testing.assert_array_equal(out, np.arange(32.0).reshape(1, 2, 4, 4))
    nhwc = call("nn.conv2d", const(np.arange(16.0).reshape(1, 4, 4, 1)), const(np.ones((1, 2, 2, 1))),
                data_layout="NHWC", kernel_layout="OHWI")
    assert nhwc[..., 0].tolist() == [[[10, 14, 18], [26, 30, 34], [42, 46, 50]]]
    mp = call("nn.max_pool2d", x, pool_size=[2, 2], strides=[2, 2])
    assert mp.tolist() == [[[[5, 7], [13, 15]]]]
    ap = call("nn.avg_pool2d", x, pool_size=[2, 2], strides=[2, 2])
    assert ap.tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    ap = call("nn.avg_pool2d", x, pool_size=[3, 3], padding=[1, 1])
    assert ap[0, 0, 0, 0] == (0 + 1 + 4 + 5) / 4  # padding is not counted
    ap = call("nn.avg_pool2d", x, pool_size=[3, 3], padding=[1, 1], count_include_pad=True)
    assert ap[0, 0, 0, 0] == (0 + 1 + 4 + 5) / 9


def test_vm_ops() -> None:
    assert NUMPY_OPS["relax.null_value"]((), {}) is None
    storage = NUMPY_OPS["relax.vm.alloc_storage"]((Shape((64,)), 0, "float32", "global"), {})
    assert storage.nbytes == 64
    t = NUMPY_OPS["relax.vm.alloc_tensor"]((storage, 0, Shape((2, 3)), "float32", 0), {})
    assert t.shape == (2, 3) and t.dtype == np.float32
    assert NUMPY_OPS["relax.vm.kill_object"]((t,), {}) == ()


NAN_REDUCTIONS = '''
# from tvm.script import ir as I
# from tvm.script import relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((2,), dtype="int64"), R.Tensor((3,), dtype="float32"), R.Tensor((1, 1), dtype="int64")):
        with R.dataflow():
            a = R.max(x, axis=[1], keepdims=False)
            b = R.argmax(x, axis=1, keepdims=False)
            c = R.min(x, axis=[0], keepdims=False)
            d = R.argmin(x, axis=None, keepdims=True)
            gv = (a, b, c, d)
            R.output(gv)
        return gv
'''


def test_reductions_treat_nan_as_tvm_kernels_do() -> None:
    """max/min skip NaN (maxnum) and argmax/argmin follow TVM's comparisons, in which a NaN is
    replaced and replaces: the operators give what their legalized kernels give."""
    from tvms.lowering.pass_registry import get_pass

    mod = from_source(NAN_REDUCTIONS)
    x = np.array([[np.nan, 0.5, 0.25], [0.5, np.nan, -1.0]], "float32")
    want = run_relax(mod, "main", x)
    got = run_relax(get_pass("LegalizeOps")(mod), "main", x)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[0], [0.5, 0.5])
    np.testing.assert_array_equal(want[1], [1, 2])  # (a NaN is replaced, then replaces)


def test_reshape_to_a_shape_known_when_it_runs_refuses_a_wrong_size() -> None:
    """R.reshape to R.tensor_to_shape(x): a shape whose elements are not the data's is a clear
    error in the reference and in the compiled module (numpy's ValueError had escaped both)."""
    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="int64"), y: R.Tensor((16,), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        lv: R.Shape(ndim=2) = R.tensor_to_shape(x)
        gv: R.Tensor(lv, dtype="float32") = R.reshape(y, lv)
        return gv''')
    y = np.arange(16, dtype="float32")
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_array_equal(vm["main"](np.array([4, 4]), y).numpy(), y.reshape(4, 4))
    np.testing.assert_array_equal(run_relax(mod, "main", np.array([2, 8]), y), y.reshape(2, 8))
    message = r"R.reshape: a tensor of shape \(16,\) \(16 elements\) cannot take the shape \(3, 2\)"
    with pytest.raises(TVMSError, match=message):
        run_relax(mod, "main", np.array([3, 2]), y)
    with pytest.raises(TVMSError, match=message):
        vm["main"](np.array([3, 2]), y)
    # (a negative dimension is refused, as TVM refuses it: numpy would have inferred a -1)
    for shape in ([-1, 8], [2, -8]):
        message = rf"R.reshape: the shape \({shape[0]}, {shape[1]}\) has a negative dimension"
        with pytest.raises(TVMSError, match=message):
            run_relax(mod, "main", np.array(shape), y)
        with pytest.raises(TVMSError, match=message):
            vm["main"](np.array(shape), y)
