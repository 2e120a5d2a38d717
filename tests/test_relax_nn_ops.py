"""The R.nn operators beyond softmax / layer_norm / conv2d / pool2d: LegalizeOps byte for byte as
TVM 0.27 prints it (goldens fixtures/legalize/math_nn_*, made with TVM), compiled modules
(tvms.compile + VM) equal to the reference executor (numpy), the numpy references against
properties of the operators, and TVM's error cases. (Their struct info on static, symbolic and
unknown shapes is in fixtures/struct_info/nn_*, checked by test_struct_info_goldens.py.)"""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.ir import IntImm, TVMSError
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.runtime.numpy_ops import NUMPY_OPS
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

LEGALIZE_DIR = FIXTURES / "legalize"
NN_FIXTURES = ["math_nn_act", "math_nn_pad", "math_nn_conv", "math_nn_avgpool", "math_nn_convt", "math_nn_adaptive", "math_nn_attention",
               "math_nn_norm", "math_nn_loss", "math_nn_symbolic", "math_nn_symbolic2"]
POSITIVE_INPUTS = {"math_nn_norm"}  # (variances)
# (the others compile in over 2 s: marked slow)
FAST_COMPILE = {"math_nn_act", "math_nn_pad", "math_nn_conv", "math_nn_avgpool", "math_nn_adaptive", "math_nn_loss"}


@pytest.mark.parametrize("name", NN_FIXTURES)
def test_legalized_prints_as_tvm(name: str) -> None:
    before = from_source((LEGALIZE_DIR / f"{name}_before.tvms").read_text())
    golden = (LEGALIZE_DIR / f"{name}_legalized.tvms").read_text().rstrip("\n")
    assert LegalizeOps()(before).script(dialect="tvm-0.27") == golden


def _all_outputs(text: str) -> str:
    outputs = re.search(r"R\.output\(([^)]*)\)", text).group(1)
    return re.sub(r"return \w+\n", f"return ({outputs},)\n", text, count=1)


def _flat(values: tuple) -> list:
    out = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, (tuple, list)) else [v])
    return out


@pytest.mark.parametrize("name", [n if n in FAST_COMPILE else pytest.param(n, marks=pytest.mark.slow)
                                  for n in NN_FIXTURES])
def test_compiled_equals_reference(name: str) -> None:
    import tvms

    mod = from_source(_all_outputs((LEGALIZE_DIR / f"{name}_before.tvms").read_text()))
    rng = np.random.default_rng(11)
    args = []
    for p in mod["forward"].params:
        # (a symbolic size is 3)
        shape = tuple(d.value if isinstance(d, IntImm) else 3 for d in p.struct_info.dims)
        dtype = str(p.struct_info.dtype)
        # (integers are class indices: the losses' fixtures have 3 classes)
        args.append(rng.integers(0, 3, shape).astype(dtype) if dtype.startswith("int")
                    else (rng.standard_normal(shape) * 3).astype(dtype))
    if name in POSITIVE_INPUTS:
        args = [np.abs(a) + 0.5 for a in args]
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    got, want = _flat(vm["forward"](*args)), _flat(run_relax(mod, "forward", *args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = g.numpy(), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 2e-3 if g.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=tol, atol=tol)


def _ref(op: str, *args, **attrs):
    return NUMPY_OPS[f"relax.nn.{op}"](args, attrs)


def test_numpy_references_follow_the_definitions() -> None:
    x = np.arange(2 * 8 * 2 * 3, dtype="float32").reshape(2, 8, 2, 3)
    y = _ref("pixel_shuffle", x, upscale_factor=2)
    # out[n, c, h * r + i, w * r + j] = x[n, c * r * r + i * r + j, h, w]
    assert y.shape == (2, 2, 4, 6) and y[1, 1, 3, 4] == x[1, 1 * 4 + 1 * 2 + 0, 1, 2]
    x = np.random.default_rng(1).standard_normal((4, 3, 5)).astype("float32")
    ones, zeros = np.ones(3, "float32"), np.zeros(3, "float32")
    out, mean, var = _ref("batch_norm", x, ones, zeros, zeros, ones, axis=1, epsilon=1e-5, center=True,
                          scale=True, momentum=0.5, training=True)
    np.testing.assert_allclose(out.mean(axis=(0, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(mean, 0.5 * x.mean(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(var, 0.5 + 0.5 * x.var(axis=(0, 2)), rtol=1e-5)
    pred = np.log(np.full((2, 3), 1 / 3, "float32"))
    loss = _ref("nll_loss", pred, np.array([0, -100]), reduction="mean", ignore_index=-100)
    np.testing.assert_allclose(loss, np.log(3), rtol=1e-6)  # the ignored row counts for nothing
    np.testing.assert_allclose(_ref("softplus", np.float32([0.0, 30.0]), beta=1.0, threshold=20.0),
                               [np.log(2), 30.0], rtol=1e-6)


@pytest.mark.parametrize("text, message", [
    ("R.nn.leakyrelu(i)", "float dtype"),
    ("R.nn.prelu(x, s, axis=3)", "axis 3 is out of range"),
    ("R.nn.pad(x, [1, 1])", "two values (before, after) per dimension"),
    ("R.nn.pad(x, [0, 0, 1, 1, 1, 1], pad_mode=\"mirror\")", "pad_mode must be one of"),
    ("R.nn.batch_flatten(s)", "at least 2 dimensions"),
    ("R.nn.pixel_shuffle(x, upscale_factor=2)", "do not divide by the square"),
    ("R.nn.batch_norm(x, s, s, s, t, axis=1)", "must have the data's dtype"),
    ("R.nn.group_norm(x, s, s, num_groups=2, channel_axis=1, axes=[2])", "do not divide into 2 groups"),
    ("R.nn.instance_norm(x, s, s, channel_axis=1, axes=[1])", "must not be one of the axes"),
    ("R.nn.nll_loss(x, s)", "integer dtype"),
    ("R.nn.nll_loss(x, i, reduction=\"avg\")", "reduction must be one of"),
    ("R.nn.cross_entropy_with_logits(x, s)", "differ in rank"),
    ("R.nn.conv1d(x, x, padding=[1, 1, 1])", "padding must have 1 or 2 values (left, right)"),
    ("R.nn.conv1d(x, x, groups=2)", "the data has 3 channels, but the kernel takes 3 input channels in each of 2"),
    ("R.nn.conv1d_transpose(x, R.permute_dims(x, [1, 0, 2]), strides=2, output_padding=2)",
     "must be less than the strides"),
    ("R.nn.max_pool3d(x)", "the data layout NCDHW needs a 5-d tensor"),
    ("R.nn.adaptive_avg_pool1d(x, output_size=[1, 2])", "output_size must have 1 value"),
    ("R.nn.attention(x, x, x)", "the query must be 4-d"),
    ("R.nn.attention(q, q, q, causal_mask=\"Top\")", "causal_mask must be None"),
])
def test_errors_name_the_operator(text: str, message: str) -> None:
    src = f"""@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((2, 3, 4), "float32"), s: R.Tensor((3,), "float32"), t: R.Tensor((3,), "float16"),
          i: R.Tensor((2, 4), "int32"), q: R.Tensor((1, 2, 3, 4), "float32")):
        a = {text}
        return a
"""
    with pytest.raises(TVMSError, match=re.escape(message)):
        from_source(src)


def test_relax_op_functions_take_tvms_signatures() -> None:
    """relax.op.nn.pad(data, pad_width, pad_mode, pad_value): TVM's positional order, which is
    not the printing order of the attributes."""
    from tvms import relax

    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    call = relax.op.nn.pad(x, [1, 1, 0, 2], "constant", 2.0)
    assert call.attrs["pad_value"] == 2.0 and call.attrs["pad_mode"] == "constant"
    assert [d.value for d in call.struct_info.dims] == [4, 5]
    y = relax.Var("y", relax.TensorStructInfo((1, 1, 4, 4), "float32"))
    pool = relax.op.nn.max_pool2d(y, 2, 1, 1)  # (pool_size, strides, padding)
    assert pool.attrs["padding"] == (1, 1, 1, 1) and pool.attrs["dilation"] == (1, 1)
    q = relax.Var("q", relax.TensorStructInfo((1, 3, 2, 4), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((1, 1, 3, 3), "float32"))
    att = relax.op.nn.attention(q, q, q, b, 0.5)  # (a bias makes it attention_bias, as in TVM)
    assert att.op.name == "relax.nn.attention_bias" and att.attrs["scale"].value == 0.5
    assert relax.op.nn.attention(q, q, q, None, causal_mask="TopLeft").op.name == "relax.nn.attention"
    relu6 = relax.op.nn.relu6(x)  # (TVM has no relu6 operator: it is a clip)
    assert relu6.op.name == "relax.clip" and [a.value.value for a in relu6.args[1:]] == [0, 6]


def test_attention_var_len_takes_tvms_argument_order() -> None:
    """TVM's Python order is (q, k, v, seqstart_q, max_seqlen_q, seqstart_k, max_seqlen_k), its
    operator's (and printed) order is (..., seqstart_q, seqstart_k, max_seqlen_q, max_seqlen_k);
    the line below is what TVM 0.27 prints for this function."""
    src = """@I.ir_module
class Module:
    @R.function
    def f(q: R.Tensor((1, 12, 4, 16), "float32"), k: R.Tensor((1, 15, 4, 16), "float32"), v: R.Tensor((1, 15, 4, 8), "float32"), sq: R.Tensor((3,), "int32"), sk: R.Tensor((3,), "int32"), mq: R.Tensor((), "int32"), mk: R.Tensor((), "int32")):
        a = R.nn.attention_var_len(q, k, v, sq, sk, mq, mk, causal_mask="TopLeft")
        return a
"""
    tvm_line = ('a: R.Tensor((1, 12, 4, 8), dtype="float32") = R.nn.attention_var_len(q, k, v, sq, mq, sk, mk, '
                'scale=None, causal_mask="TopLeft", window_size=None)')
    assert tvm_line in from_source(src).script(dialect="tvm-0.27")


def test_attention_references() -> None:
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal(s).astype("float32") for s in ((1, 5, 2, 4), (1, 5, 1, 4), (1, 5, 1, 3)))
    attrs = {"scale": None, "causal_mask": "TopLeft", "window_size": None}
    out = _ref("attention", q, k, v, **attrs)
    np.testing.assert_allclose(out[0, 0], np.repeat(v[0, :1, 0], 2, axis=0), rtol=1e-6)  # only key 0
    starts = np.array([0, 2, 5])
    packed = _ref("attention_var_len", q, k, v, starts, starts, 2, 2, **attrs)
    np.testing.assert_allclose(packed[:, 2:], _ref("attention", q[:, 2:], k[:, 2:], v[:, 2:], **attrs), rtol=1e-6)


def test_nn_frontend_functions_export_as_tvm() -> None:
    """nn.op.softplus, prelu, pad, conv1d, group_norm and scaled_dot_product_attention export to
    the text TVM 0.27 prints for the same model (fixtures/nn_frontend/nn_ops.tvms)."""
    from tvms.relax.frontend import nn

    class NNOps(nn.Module):
        def __init__(self):
            self.alpha = nn.Parameter((4,), "float32")
            self.w = nn.Parameter((8, 4, 3), "float32")
            self.b = nn.Parameter((8,), "float32")
            self.gamma = nn.Parameter((8,), "float32")
            self.beta = nn.Parameter((8,), "float32")

        def forward(self, x, q):
            y = nn.op.softplus(x, beta=2.0)
            y = nn.op.prelu(y, self.alpha)
            y = nn.op.pad(y, [0, 0, 0, 0, 1, 1])
            y = nn.op.conv1d(y, self.w, self.b, padding=1)
            y = nn.op.group_norm(y, 2, self.gamma, self.beta)
            a = nn.op.scaled_dot_product_attention(q, q, q, is_causal=True, scale=0.5)
            return y, a

    mod, _ = NNOps().export_tvm({"forward": {"x": nn.spec.Tensor(("n", 4, 6), "float32"),
                                             "q": nn.spec.Tensor((1, 5, 2, 8), "float32")}})
    assert mod.script(dialect="tvm-0.27") == (FIXTURES / "nn_frontend" / "nn_ops.tvms").read_text()


def test_left_unlegalized() -> None:
    """Calls TVM 0.27 cannot legalize (pixel_shuffle, a window, batch_norm training on a negative
    axis: its LegalizeOps fails) or whose TensorIR tvms does not reproduce (reflect pad, adaptive
    windows of varying extent) stay as they are."""
    mod = from_source("""@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor((1, 8, 5, 6), "float32"), g: R.Tensor((6,), "float32"), q: R.Tensor((1, 3, 2, 4), "float32")):
        with R.dataflow():
            a = R.nn.pixel_shuffle(x, upscale_factor=2)
            b = R.nn.pad(x, [0, 0, 0, 0, 1, 1, 1, 1], pad_mode="reflect")
            c = R.nn.adaptive_avg_pool2d(x, output_size=[2, 3])
            d = R.nn.attention(q, q, q, window_size=2)
            e = R.nn.batch_norm(x, g, g, g, g, axis=-1)
            R.output(a, b, c, d, e)
        return a
""")
    out = LegalizeOps()(mod)
    names = [b.value.op.name for b in out["forward"].body.blocks[0].bindings]
    assert names == ["relax.nn.pixel_shuffle", "relax.nn.pad", "relax.nn.adaptive_avg_pool2d", "relax.nn.attention",
                     "relax.nn.batch_norm"]


def test_ceil_mode_drops_a_last_window_in_the_padding() -> None:
    """In ceil mode a last window that would start in the back padding is not made (TVM's rule):
    the reference agrees with the struct info and with the compiled module."""
    import tvms

    mod = from_source("""@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor((1, 1, 7), "float32")):
        with R.dataflow():
            a = R.nn.avg_pool1d(x, pool_size=1, strides=2, dilation=2, padding=[1, 0], ceil_mode=True)
            b = R.nn.max_pool1d(x, pool_size=2, strides=3, padding=[0, 2], ceil_mode=True)
            R.output(a, b)
        return (a, b)
""")
    x = np.arange(7, dtype="float32").reshape(1, 1, 7)
    want = run_relax(mod, "forward", x)
    assert [np.shape(w) for w in want] == [(1, 1, 4), (1, 1, 3)]
    got = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["forward"](x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


PRELU_ONE_SLOPE = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 7), dtype="float32"), y: R.Tensor(({slopes},), dtype="float32")) -> R.Tensor((4, 7), dtype="float32"):
        gv: R.Tensor((4, 7), dtype="float32") = R.nn.prelu(x, y, axis=1)
        return gv'''


def test_prelu_with_one_slope_broadcasts_it() -> None:
    """A slope of one value applies to every channel: legalized, it is first copied to each
    channel (TVM 0.27's ``slope_broadcasted`` block); the kernel had read the slope at each
    channel's index, out of its bounds, and the compiled module returned garbage."""
    import tvms

    mod = from_source(PRELU_ONE_SLOPE.format(slopes=1))
    text = LegalizeOps()(mod).script(dialect="tvm-0.27")
    assert "slope_broadcasted[v_c] = y[T.int64(0)]" in text
    assert "x[v_i0, v_i1] * slope_broadcasted[v_i1])" in text
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (4, 7)).astype("float32"), np.float32([0.25])
    want = np.where(x > 0, x, x * 0.25)
    np.testing.assert_allclose(run_relax(mod, "main", x, y), want, rtol=1e-6)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x, y).numpy(), want, rtol=1e-6)


def test_prelu_refuses_a_slope_of_another_length() -> None:
    """Three slopes for seven channels: a clear error from LegalizeOps and from the reference
    (TVM's topi asserts; numpy had raised its broadcasting ValueError)."""
    mod = from_source(PRELU_ONE_SLOPE.format(slopes=3))
    with pytest.raises(TVMSError, match=r"R.nn.prelu: the slope has shape \(3,\).*one per channel \(7 along axis 1\)"):
        LegalizeOps()(mod)
    with pytest.raises(TVMSError, match=r"R.nn.prelu: the slope has shape \(3,\)"):
        run_relax(mod, "main", np.zeros((4, 7), "float32"), np.zeros(3, "float32"))


def test_prelu_with_a_slope_per_symbolic_channel() -> None:
    """A slope of length c for c channels (both symbolic) legalizes and computes (LegalizeOps had
    refused it: "the slope has shape (c,); it takes ... one per channel (c along axis 1)"); a slope
    of another symbolic length is refused with the two lengths."""
    import tvms

    text = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "c"), dtype="float32"), y: R.Tensor(("c",), dtype="float32")) -> R.Tensor(("n", "c"), dtype="float32"):
        n = T.int64()
        c = T.int64()
        gv: R.Tensor((n, c), dtype="float32") = R.nn.prelu(x, y, axis=1)
        return gv'''
    mod = from_source(text)
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, (2, 3)).astype("float32"), np.float32([0.5, 0.25, 0.125])
    want = np.where(x > 0, x, x * y)
    np.testing.assert_allclose(run_relax(LegalizeOps()(mod), "main", x, y), want, rtol=1e-6)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x, y).numpy(), want, rtol=1e-6)
    other = from_source(text.replace('y: R.Tensor(("c",)', 'y: R.Tensor(("k",)'))
    with pytest.raises(TVMSError, match=r"the slope has shape \(k,\).*one per channel \(c along axis 1\)"):
        LegalizeOps()(other)
    # three slopes for c channels: nothing proves c is 3 (the kernel had read past the slope for c = 5)
    fixed = from_source(text.replace('y: R.Tensor(("c",)', 'y: R.Tensor((3,)'))
    with pytest.raises(TVMSError, match=r"the slope has shape \(3,\).*one per channel \(c along axis 1\)"):
        LegalizeOps()(fixed)


def test_grouped_conv_with_sizes_known_when_it_runs_checks_them() -> None:
    """A grouped R.nn.conv2d over symbolic channels: data whose channels are not the kernel's
    input channels times the groups is a clear error of the reference (numpy's einsum had
    raised a ValueError); consistent sizes compute."""
    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "c", 6, 6), dtype="float32"), w: R.Tensor(("f", "c_div_2", 3, 3), dtype="float32")) -> R.Tensor(("n", "f", 4, 4), dtype="float32"):
        n = T.int64()
        c = T.int64()
        f = T.int64()
        gv: R.Tensor((n, f, 4, 4), dtype="float32") = R.nn.conv2d(x, w, groups=2)
        return gv''')
    with pytest.raises(TVMSError, match=r"R.nn.conv2d: data of 4 channels and a kernel of shape \(4, 4, 3, 3\)"
                                        r".* do not make 2 groups"):
        run_relax(mod, "main", np.ones((1, 4, 6, 6), "float32"), np.ones((4, 4, 3, 3), "float32"))
    out = run_relax(mod, "main", np.ones((1, 4, 6, 6), "float32"), np.ones((4, 2, 3, 3), "float32"))
    np.testing.assert_array_equal(out, np.full((1, 4, 4, 4), 18, "float32"))
