"""The Relax operators that are not math (issue 14, point 1): printing and assertions, shapes as
tensors, packed and in-place calls, devices and virtual devices, parameters, closures, memory.

What TVM 0.27 infers and prints for them is checked by the struct-info goldens
(fixtures/struct_info/calls_* and lowered_*, made with TVM); here: the classic dialect, TVM's
error cases, and running them (reference executor, compiled VM, LegalizeOps as TVM does it).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms.ir import structural_equal
from tvms.ir.errors import ScriptError
from tvms.ir.registry import register_func
from tvms.ir.struct_info import ObjectStructInfo
from tvms.relax.transform import LegalizeOps
from tvms.runtime.numpy_ops_misc import RelaxAssertionError
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

GOLDENS = [FIXTURES / "struct_info" / f"{name}_inferred_by_tvm.tvms" for name in ("calls", "lowered", "call_forms", "nested_impure", "dist", "call_py_func")]


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_classic_dialect_reads_back_equal(path) -> None:
    """Printed in the classic dialect (sinfo_args=, out_sinfo=, R.Object, R.prim_value), the module
    reads back structurally equal and prints the same again, in both dialects."""
    golden = path.read_text().rstrip("\n")
    mod = from_source(golden)
    classic = mod.script(dialect="classic")
    assert "ty_args=" not in classic and "out_ty=" not in classic and "R.Any" not in classic
    again = from_source(classic)
    assert structural_equal(mod, again)
    assert again.script(dialect="classic") == classic
    assert again.script(dialect="tvm-0.27") == golden


_HEAD = '''@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm")]})
    @T.prim_func
    def add(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32")):
        T.evaluate(0)

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), c: R.Tensor((2, 2), "int64")):
        cls = Module
'''


@pytest.mark.parametrize("line, message", [
    ('y = R.assert_op(x)', "R.assert_op: the condition must be a bool scalar"),
    ('y = R.tensor_to_shape(c)', "R.tensor_to_shape: takes a 1-d tensor"),
    ('y = R.shape_to_tensor(x)', "R.shape_to_tensor: takes a shape"),
    ('y = R.to_vdevice(x, "cuda:0")', "the vdevice 'cuda:0' is not in the module's I.module_global_infos"),
    ('y: R.Tensor((2, 3), "float32", vdevice="llvm:2") = x', "the vdevice 'llvm:2' is not in"),
    ('y = R.call_tir_inplace(cls.add, (x,), out_ty=R.Tensor((2, 3), "float32"), inplace_indices=[3])',
     "in-place index 0 is out of range (must be between -1 and 0, inclusive, but is 3)"),
    ('y = R.call_tir_inplace(cls.add, (x,), out_ty=R.Tensor((2, 3), "float32"), inplace_indices=[-1])',
     "at least one index must have a value other than -1"),
    ('y = R.call_tir_inplace(cls.add, (c,), out_ty=R.Tensor((2, 3), "float32"), inplace_indices=[0])',
     "must be a tensor with identical shape and dtype as the output"),
    ('y = R.call_inplace_packed("f", x, x, inplace_indices=[0, 0], ty_args=[R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")])',
     "all in-place indices must be unique"),
    ('y = R.call_inplace_packed("f", x, inplace_indices=[0], ty_args=R.Tensor((3, 3), "float32"))',
     "does not fit the in-place argument 0"),
    ('y = R.hint_on_device(x, "cpu")', "takes a device such as R.cpu(0)"),
    ('y = R.print(x, format=3)', 'the format is a string'),
    ('y = R.hint_on_device(x, R.device("tpu", 0))', "a device is a device type"),
    ('y = R.memory.view(x, R.shape([4, 3]))', "a view must not exceed the bounds of the viewed tensor"),
    ('y = R.memory.view(x, dtype="float64")', "a view must not exceed the bounds of the viewed tensor"),
    ('y = R.memory.view(x, R.shape([2]), "float32", 20)', "its 8 bytes at byte 20 end past the 24 bytes"),
    # (review) an extra or unknown argument of these forms was dropped without a word
    ('y = R.call_tir(cls.add, (x,), R.Tensor((2, 3), "float32"), R.shape([1]), 5)',
     "R.call_tir takes at most 4 arguments (func, args, out_ty, tir_vars), got 5"),
    ('y = R.call_tir(cls.add, (x,), out_ty=R.Tensor((2, 3), "float32"), out_sinfo=R.Tensor((2, 3), "float32"))',
     "R.call_tir got the argument 'out_ty' twice"),
    ('y = R.call_dps_packed("f", (x,), R.Tensor((2, 3), "float32"), R.shape([1]))',
     "R.call_dps_packed takes at most 3 arguments"),
    ('y = R.call_dps_packed("f", (x,), out_ty=R.Tensor((2, 3), "float32"), inplace=True)',
     "R.call_dps_packed has no argument 'inplace'"),
    ('y = R.call_packed("f", x, attrs_type_key="relax.attrs.Resize2DAttrs", ty_args=R.Tensor((2, 3), "float32"))',
     "R.call_packed takes attributes of attrs_type_key=\"ir.DictAttrs\" only"),
    ('y = R.call_tir_inplace(cls.add, (x,), [0], R.Tensor((2, 3), "float32"), R.shape([1]), 9)',
     "R.call_tir_inplace takes at most 5 arguments"),
    ('y = R.call_tir_inplace(cls.add, (x,), [0])', "the output struct info is missing"),
    ('y = R.hint_on_device(x, R.cpu(0), "global", 3)', "R.hint_on_device takes at most 3 arguments"),
    ('y = R.to_vdevice(x, "llvm", 1)', "R.to_vdevice takes at most 2 arguments"),
    ('y = R.to_vdevice(x, dst="llvm")', "R.to_vdevice has no argument 'dst'"),
    ('y = R.nn.relu6(x, 1)', "R.nn.relu6 takes at most 1 arguments"),
    ('y = R.dist.redistribute(x, "mesh[0]", "R", 1)', "R.dist.redistribute takes at most 3 arguments"),
])
def test_errors_point_at_the_call(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as err:
        from_source(_HEAD + "        " + line + "\n        return x\n")
    assert message in str(err.value)
    assert str(err.value).startswith("<string>:11:")


def test_device_constructors_give_tvm_device_codes() -> None:
    codes = {"cpu": 1, "cuda": 2, "opencl": 4, "vulkan": 7, "metal": 8, "vpi": 9, "rocm": 10,
             "ext_dev": 12, "webgpu": 15, "hexagon": 16}
    lines = "".join(f"        a{k} = R.hint_on_device(x, R.{name}({k}))\n" for k, name in enumerate(codes))
    text = from_source(_HEAD + lines + "        return x\n").script(dialect="tvm-0.27")
    for k, (name, code) in enumerate(codes.items()):
        assert f"R.hint_on_device(x, R.device(device_type={code}, index={k}), \"global\")" in text


def test_legalize_ops_as_tvm() -> None:
    """R.print / R.assert_op become calls of relax.run.*, R.shape_to_tensor a PrimFunc (symbolic
    sizes passed as scalars) or, of an unknown shape, a pure packed call; the rest stay. The golden
    is TVM 0.27's LegalizeOps output on math_calls_before.tvms (tvm.script.from_source, then
    relax.transform.LegalizeOps(), printed), and TVM's print of the module reads back byte for byte."""
    before = from_source((FIXTURES / "legalize" / "math_calls_before.tvms").read_text())
    golden = (FIXTURES / "legalize" / "math_calls_legalized.tvms").read_text().rstrip("\n")
    assert LegalizeOps()(before).script(dialect="tvm-0.27") == golden
    printed = (FIXTURES / "legalize" / "math_calls_printed_by_tvm.tvms").read_text().rstrip("\n")
    assert before.script(dialect="tvm-0.27") == printed


_PROGRAM = '''
@I.ir_module
class Module:
    @T.prim_func
    def add_inplace(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            with T.block("a"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = A[vi, vj] + B[vi, vj]

    @T.prim_func
    def add_both(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32"), C: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + B[vi, vj]
                C[vi, vj] = A[vi, vj] * T.float32(2)

    @R.function
    def scale(k: R.Tensor((2, 3), "float32"), x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.multiply(k, x)
        return y

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), s: R.Shape(["n", 4]), c: R.Tensor((2,), "int64")):
        cls = Module
        R.print(x, s, format="x={} s={}")
        R.assert_op(R.const(True, "bool"), x, format="never: {}")
        a = R.shape_to_tensor(s)
        b = R.tensor_to_shape(c)
        d = R.wrap_param(x, "float16")
        e = R.call_pure_packed("test.calls.twice", x, ty_args=R.Tensor((2, 3), "float32"))
        x2 = R.add(x, R.const(0.0, "float32"))
        f = R.call_inplace_packed("test.calls.add_into", x2, y, inplace_indices=[0], ty_args=R.Tensor((2, 3), "float32"))
        x3 = R.add(x, R.const(0.0, "float32"))
        g = R.call_tir_inplace(cls.add_inplace, (x3, y), out_ty=R.Tensor((2, 3), "float32"), inplace_indices=[0])
        x4 = R.add(y, R.const(0.0, "float32"))
        h = R.call_tir_inplace(cls.add_both, (x, x4), out_ty=[R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")], inplace_indices=[1, -1])
        cl = R.make_closure(cls.scale, (y,))
        k = R.invoke_pure_closure(cl, (x,), ty_args=R.Tensor((2, 3), "float32"))
        st = R.memory.alloc_storage(R.shape([48]), 0, "global", "uint8")
        t = R.memory.alloc_tensor(st, 24, R.shape([2, 3]), "float32")
        R.vm.call_tir_dyn(cls.add_inplace, (t, y, R.shape([])))
        h0 = h[0]
        h1 = h[1]
        vw = R.memory.view(x, R.shape([3]), R.dtype("float32"), R.prim_value(T.int64(12)))
        vs = R.memory.view(x, [3, 2])
        return (a, b, d, e, f, g, h0, h1, k, t, vw, vs)
'''


def _twice(x):
    return x * 2


def _add_into(a, b):
    a[...] += b
    return a


def test_compiled_equals_reference_and_numpy(capsys) -> None:
    """Packed calls (pure, in place), in-place kernels (an input written, a -1 output allocated),
    closures, a tensor in storage written by R.vm.call_tir_dyn, views, shapes to tensors and back,
    and R.print: the reference executor and the compiled VM give numpy's numbers and print the same."""
    register_func("test.calls.twice", _twice, override=True)
    register_func("test.calls.add_into", _add_into, override=True)
    mod = from_source(_PROGRAM)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    y = np.full((2, 3), 3, "float32")
    c = np.array([7, 8], "int64")
    want = [np.array([5, 4]), (7, 8), x.astype("float16"), x * 2, x + y, x + y, x + y, x * 2, x * y, y,
            x.reshape(-1)[3:], x.reshape(3, 2)]
    ref = run_relax(mod, "main", x.copy(), y.copy(), (5, 4), c.copy())
    printed = capsys.readouterr().out
    assert printed == f"x={x} s=(5, 4)\n"
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    got = vm["main"](x.copy(), y.copy(), (5, 4), c.copy())
    assert capsys.readouterr().out == printed
    for w, r, g in zip(want, ref, got):
        if isinstance(w, tuple):
            assert tuple(r) == tuple(g) == w
        else:
            np.testing.assert_array_equal(r, w)
            np.testing.assert_array_equal(g.numpy(), w)
            assert g.numpy().dtype == w.dtype


@pytest.mark.parametrize("args, message", [
    ('x, format="x: {}"', "x: [1. 2.]"),
    ("x, R.shape([2])", "[1. 2.], (2,)"),
    ("", "Assertion Failed"),
])
def test_a_false_assertion_raises_its_message(args: str, message: str) -> None:
    call = f"R.assert_op(R.const(False, \"bool\"){', ' + args if args else ''})"
    mod = from_source(f'''@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")):
        {call}
        return x
''')
    x = np.array([1, 2], "float32")
    exact = f"^{re.escape(message)}$"
    with pytest.raises(RelaxAssertionError, match=exact):
        run_relax(mod, "main", x)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    with pytest.raises(RelaxAssertionError, match=exact):
        vm["main"](x)


_DIST_HEAD = '''@I.ir_module
class Module:
    I.module_global_infos({"mesh": [R.device_mesh((2, 2), I.Range(0, 4)), R.device_mesh((2,), [5, 7])]})
    @R.function
    def main(x: R.DTensor((4, 4), "float32", "mesh[0]", "S[0], R"), t: R.Tensor((4, 4), "float32")):
'''


@pytest.mark.parametrize("line, message", [
    ('y = R.dist.redistribute(x, device_mesh="mesh[2]", placement="R, R")', "the device mesh 'mesh[2]' is not in"),
    ('y = R.dist.redistribute(x, device_mesh="mesh[0]", placement="R")', "has 1 entries for a mesh of 2 axes"),
    ('y = R.dist.annotate_sharding(t, device_mesh="mesh[1]", placement="Q[0]")', "R (replicated) or S[axis]"),
    ('y = R.dist.redistribute(t, device_mesh="mesh[1]", placement="R")', "takes a DTensor"),
    ('y = R.ccl.scatter_from_worker0(t, num_workers=3, axis=0)', "(4) must be divisible by num_workers (3)"),
    ('y = R.add(x, R.dist.redistribute(x, device_mesh="mesh[0]", placement="R, S[1]"))', "placed differently"),
])
def test_distributed_errors(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as err:
        from_source(_DIST_HEAD + "        " + line + "\n        return x\n")
    assert message in str(err.value)


def test_inspect_struct_info_and_values_as_tvm() -> None:
    """R.inspect.*: tvms infers what TVM 0.27 printed (fixtures/relax_calls/inspect_by_tvm.tvms, built
    with TVM's BlockBuilder: TVM's parser has no R.inspect) and reads the fields of a compact tensor."""
    golden = (FIXTURES / "relax_calls" / "inspect_by_tvm.tvms").read_text().rstrip("\n")
    mod = from_source(golden)
    assert mod.script(dialect="tvm-0.27") == golden
    # the same functions without the annotations: inferred
    bare = "\n".join(re.sub(r"^(\s+gv\d+): [^=]+=", r"\1 =", line) for line in golden.splitlines())
    assert from_source(bare).script(dialect="tvm-0.27") == golden
    x = np.zeros((4, 5, 6), "float16")
    got = run_relax(mod, "unknown", x.astype("float32")[0])
    assert [int(v) for v in got] == [2, 32, 1, 2, 0, 0, 6, 1]
    assert [int(v) for v in run_relax(mod, "symbolic", np.zeros((7, 3), "int8"))] == [0, 8, 1, 2, 0, 0, 3, 1]


def _numeric_grad(f, x: np.ndarray, g: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """sum(g * df/dx) by central differences (f is linear in x here, so this is exact up to rounding)."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        out[idx] = np.sum(g * (f(x + d) - f(x - d))) / (2 * eps)
    return out


def _nll_loss(p: np.ndarray, t: np.ndarray, w: np.ndarray, reduction: str, ignore: int) -> np.ndarray:
    keep = t != ignore
    ww = np.where(keep, w[np.where(keep, t, 0)], 0)
    losses = -ww * np.take_along_axis(p, np.expand_dims(np.where(keep, t, 0), 1), 1)[:, 0]
    return {"none": losses, "sum": losses.sum(), "mean": losses.sum() / ww.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradient_references_match_numeric_gradients(reduction: str) -> None:
    """R.grad.nll_loss_backward and R.grad.take_backward give the gradients of nll_loss and take
    (central differences of their numpy definitions), with weights and an ignored class."""
    mod = from_source(f'''@I.ir_module
class Module:
    @R.function
    def main(g: R.Tensor("float64"), p: R.Tensor((4, 3), "float64"), t: R.Tensor((4,), "int64"), w: R.Tensor((3,), "float64"), x: R.Tensor((5, 2), "float64"), i: R.Tensor((3,), "int64"), gt: R.Tensor((5, 3), "float64")):
        a = R.grad.nll_loss_backward(g, p, t, w, reduction="{reduction}", ignore_index=2)
        b = R.grad.take_backward(gt, x, i, axis=1)
        return (a, b)
''')
    rng = np.random.default_rng(0)
    p, w, x = rng.standard_normal((4, 3)), rng.random(3) + 0.5, rng.standard_normal((5, 2))
    t, i = np.array([0, 2, 1, 0]), np.array([1, 0, 1])
    g = rng.standard_normal(4) if reduction == "none" else np.array(rng.standard_normal())
    gt = rng.standard_normal((5, 3))
    a, b = run_relax(mod, "main", g, p, t, w, x, i, gt)
    np.testing.assert_allclose(a, _numeric_grad(lambda q: _nll_loss(q, t, w, reduction, 2), p, g), rtol=1e-6)
    np.testing.assert_allclose(b, _numeric_grad(lambda q: np.take(q, i, axis=1), x, gt), rtol=1e-6)


def test_call_tir_rewrite_of_in_place_calls_as_tvm() -> None:
    """CallTIRRewrite makes an in-place output the input it names and allocates the others
    (golden: TVM 0.27's relax.transform.CallTIRRewrite() on call_tir_rewrite_before.tvms); the
    rewritten module computes what the original does."""
    from tvms.lowering.relax.call_tir_rewrite import CallTIRRewrite

    before = from_source((FIXTURES / "relax_calls" / "call_tir_rewrite_before.tvms").read_text())
    after = CallTIRRewrite()(before)
    golden = (FIXTURES / "relax_calls" / "call_tir_rewrite_by_tvm.tvms").read_text().rstrip("\n")
    assert after.script(dialect="tvm-0.27") == golden
    x, y = np.arange(6, dtype="float32").reshape(2, 3), np.ones((2, 3), "float32")
    for mod in (before, after):
        (h0, h1), g = run_relax(mod, "main", x, y.copy())
        np.testing.assert_array_equal(h0, x + 1)
        np.testing.assert_array_equal(h1, x)
        np.testing.assert_array_equal(g, x)


def test_remove_purity_checking_as_tvm() -> None:
    """RemovePurityChecking unwraps R.call_pure_packed / R.call_inplace_packed / R.invoke_pure_closure
    and marks pure functions relax.force_pure (golden: TVM 0.27's relax.transform.RemovePurityChecking()
    on remove_purity_checking_before.tvms); the module computes the same before and after."""
    before = from_source((FIXTURES / "relax_calls" / "remove_purity_checking_before.tvms").read_text())
    after = tvms.relax.transform.RemovePurityChecking()(before)
    golden = (FIXTURES / "relax_calls" / "remove_purity_checking_by_tvm.tvms").read_text().rstrip("\n")
    assert after.script(dialect="tvm-0.27") == golden
    register_func("test.purity.twice", _twice, override=True)
    register_func("test.purity.add_into", _add_into, override=True)
    x, y = np.arange(6, dtype="float32").reshape(2, 3), np.ones((2, 3), "float32")
    for mod in (before, after):
        np.testing.assert_array_equal(run_relax(mod, "main", x, y), x * 2 + 1)


@pytest.mark.parametrize("kind, attrs", [
    ("max", 'pool_size=[2, 2], strides=[2, 1], padding=[1, 0, 0, 1]'),
    ("avg", 'pool_size=[3, 2], strides=[1, 2], padding=[1, 1, 1, 0], count_include_pad=True'),
    ("avg", 'pool_size=[2, 2], layout="NHWC"'),
])
def test_pool_backward_matches_numeric_gradient(kind: str, attrs: str) -> None:
    """R.grad.{max,avg}_pool2d_backward give the gradient of the pooling (central differences of
    the reference executor's R.nn.*_pool2d), padding, strides and layouts included."""
    text = f'''@I.ir_module
class Module:
    @R.function
    def forward(x: R.Tensor((1, 2, 5, 4), "float64")):
        y = R.nn.{kind}_pool2d(x, {attrs})
        return y

    @R.function
    def backward(g: R.Tensor("float64"), x: R.Tensor((1, 2, 5, 4), "float64")):
        dx = R.grad.{kind}_pool2d_backward(g, x, {attrs})
        return dx
'''
    mod = from_source(text)
    rng = np.random.default_rng(1)
    x = rng.permutation(40).astype("float64").reshape(1, 2, 5, 4)  # (distinct values: one maximum)
    g = rng.standard_normal(np.shape(run_relax(mod, "forward", x)))
    want = _numeric_grad(lambda q: np.asarray(run_relax(mod, "forward", q)), x, g, eps=1e-4)
    np.testing.assert_allclose(run_relax(mod, "backward", g, x), want, rtol=1e-6, atol=1e-9)


def test_call_tir_inplace_with_a_fresh_output_after_an_inplace_one() -> None:
    """(review) in-place output 0 and a fresh output 1 of another shape: the reference executor
    handed the fresh output the in-place one's tensor; it now agrees with the compiled VM."""
    mod = from_source('''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((2, 3), "float32"), B: T.Buffer((4,), "float32")):
        for i, j in T.grid(2, 3):
            A[i, j] = A[i, j] + T.float32(1)
        for k in range(4):
            B[k] = T.float32(7)

    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        cls = Module
        y = R.call_tir_inplace(cls.f, (x,), [0, -1], [R.Tensor((2, 3), "float32"), R.Tensor((4,), "float32")])
        return y
''')
    a, b = run_relax(mod, "main", np.zeros((2, 3), "float32"))
    np.testing.assert_array_equal(a, np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(b, np.full(4, 7, "float32"))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    a2, b2 = vm["main"](np.zeros((2, 3), "float32"))
    np.testing.assert_array_equal(a2.numpy(), a)
    np.testing.assert_array_equal(b2.numpy(), b)


def test_the_operators_inferred_on_dtensors_are_named_explicitly() -> None:
    """(review) the DTensor rule was chosen by the identity of an operator's inference function;
    it is a list of names now (TVM's elementwise dist rules): each names a registered operator,
    and an operator left out (nn.leakyrelu, whose inference is the same as nn.gelu's) is not
    inferred on DTensors (the binding's annotation states its DTensor)."""
    from tvms.ir import relax_op
    from tvms.ir.relax_ops_dist import DTENSOR_ELEMENTWISE

    assert all(relax_op.lookup(name.removeprefix("relax.")) is not None for name in DTENSOR_ELEMENTWISE)
    text = '''@I.ir_module
class Module:
    I.module_global_infos({"mesh": [R.device_mesh((2,), I.Range(0, 2))]})

    @R.function
    def main(x: R.DTensor((4, 8), "float32", "mesh[0]", "S[0]")):
        a = R.nn.gelu(x)
        b = R.nn.leakyrelu(x)
        return (a, b)
'''
    a, b = from_source(text)["main"].body.body.struct_info.fields
    assert str(a.placement) == "S[0]" and isinstance(b, ObjectStructInfo)


def test_call_dps_packed_calls_a_value_too() -> None:
    """R.call_dps_packed's function may be a variable bound to an R.ExternFunc (text printed by TVM
    0.27 from its tests), not only a name."""
    text = '''# from tvm.script import relax as R

@R.function(private=True)
def main(x: R.Tensor((128, 128), dtype="float32")) -> R.Tensor((128, 128), dtype="float32"):
    gv: R.Callable = R.ExternFunc("extern_func")
    gv1 = R.call_dps_packed(gv, (x,), out_ty=R.Tensor((128, 128), dtype="float32"))
    return gv1'''
    assert from_source(text).script(dialect="tvm-0.27") == text


def test_call_packed_keeps_its_attributes() -> None:
    """TVM's R.call_packed makes its other keywords DictAttrs of the call, and prints them after
    ``attrs_type_key`` (a text TVM 0.27 printed from its tests); both dialects read them back."""
    text = ('''# from tvm.script import relax as R

@R.function(pure=False)
def f(x: R.Tensor((3,), dtype="float32")) -> R.Any:
    o: R.Any = R.call_packed("contrib.tensor_array_stack", x, attrs_type_key="ir.DictAttrs", test_attr=True, ty_args=(R.Any,))
    return o''')
    func = from_source(text)
    assert dict(func.body.blocks[0].bindings[0].value.attrs) == {"test_attr": True}
    assert func.script(dialect="tvm-0.27") == text
    classic = func.script(dialect="classic")
    assert 'attrs_type_key="ir.DictAttrs", test_attr=True, sinfo_args=(R.Object,)' in classic
    assert structural_equal(from_source(classic), func)


def test_a_packed_function_may_return_runtime_tensors() -> None:
    """A packed function's result may be a ``tvms.nd`` Tensor, alone or in a tuple: the VM holds
    its array, so it passes the result's check (it failed: "expected a tensor, got Tensor")."""
    @register_func("test.relax_calls.length_and_pair", override=True)
    def length_and_pair(x):
        return tvms.nd.array(np.array(x.shape[0], "int64")), (tvms.nd.array(x + 1), x)

    mod = from_source('''
# from tvm.script import relax as R
@R.function
def main(x: R.Tensor((2,), "float32")):
    r = R.call_pure_packed("test.relax_calls.length_and_pair", x,
        sinfo_args=R.Tuple(R.Tensor((), "int64"), R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2,), "float32"))))
    n = r[0]
    y = r[1][0]
    return (n, y)
''')
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    n, y = vm["main"](tvms.nd.array(np.array([1.0, 2.0], "float32")))
    assert int(n.numpy()) == 2
    np.testing.assert_array_equal(y.numpy(), [2.0, 3.0])
