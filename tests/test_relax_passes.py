"""Relax passes (tvms.relax.transform): the text TVM 0.27 prints after each pass, byte for byte
(goldens produced with TVM 0.27 from the same input, tests/fixtures/relax_passes), idempotence
(TVM's passes are idempotent on these inputs) and semantics kept (reference executor)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS_COPY, FIXTURES

import tvms as tvm
from tvms import relax
from tvms.ir import structural_equal
from tvms.lowering.pass_registry import get_pass, list_passes
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

GOLDEN = FIXTURES / "relax_passes"

VARIANTS = {
    "ToNonDataflow": lambda: relax.transform.ToNonDataflow(),
    "ConvertToDataflow": lambda: relax.transform.ConvertToDataflow(),
    "ConvertToDataflow_min1": lambda: relax.transform.ConvertToDataflow(min_size=1),
    "ConvertToDataflow_min3": lambda: relax.transform.ConvertToDataflow(min_size=3),
    "DeadCodeElimination": lambda: relax.transform.DeadCodeElimination(),
    "DeadCodeElimination_entry_helper": lambda: relax.transform.DeadCodeElimination(["helper"]),
    "CanonicalizeBindings": lambda: relax.transform.CanonicalizeBindings(),
}
MODULES = ["basic", "nested", "canon"]
CASES = [(m, v) for m in MODULES for v in VARIANTS if (GOLDEN / f"{m}.{v}.tvms").exists()]


def load(name: str) -> tvm.IRModule:
    return from_source((GOLDEN / f"{name}.input.tvms").read_text())


def random_args(func: relax.Function, rng: np.random.Generator) -> list:
    args = []
    for p in func.params:
        sinfo = p.struct_info
        shape = [int(d.value) if hasattr(d, "value") else 4 for d in sinfo.shape.values]
        if str(sinfo.dtype) == "bool":
            args.append(np.array(rng.random() < 0.5))
        else:
            args.append(rng.standard_normal(shape).astype(str(sinfo.dtype)))
    return args


def assert_same_results(before: tvm.IRModule, after: tvm.IRModule, seeds=(0, 1, 2)) -> None:
    for gv, func in after.functions_items():
        if not isinstance(func, relax.Function) or func.is_private:
            continue
        for seed in seeds:
            args = random_args(before[gv.name_hint], np.random.default_rng(seed))
            want = run_relax(before, gv.name_hint, *args)
            got = run_relax(after, gv.name_hint, *args)
            if isinstance(want, (tuple, list)):
                for w, g in zip(want, got):
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
            else:
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("module,variant", CASES)
def test_golden_text(module: str, variant: str) -> None:
    mod = load(module)
    after = VARIANTS[variant]()(mod)
    assert after.script(dialect="tvm-0.27") == (GOLDEN / f"{module}.{variant}.tvms").read_text()


@pytest.mark.parametrize("module,variant", CASES)
def test_idempotent(module: str, variant: str) -> None:
    once = VARIANTS[variant]()(load(module))
    twice = VARIANTS[variant]()(once)
    assert twice.script(dialect="tvm-0.27") == once.script(dialect="tvm-0.27")


@pytest.mark.parametrize("module,variant", CASES)
def test_semantics_kept(module: str, variant: str) -> None:
    mod = load(module)
    assert_same_results(mod, VARIANTS[variant]()(mod))


@pytest.mark.parametrize("module,variant", CASES)
def test_roundtrip_of_result(module: str, variant: str) -> None:
    after = VARIANTS[variant]()(load(module))
    back = from_source(after.script(dialect="tvm-0.27"))
    assert structural_equal(after, back)


def test_dce_unknown_entry_function_raises() -> None:
    # TVM 0.27: ValueError: Cannot find global var "helper" in the Module
    with pytest.raises(Exception, match="Cannot find global var"):
        relax.transform.DeadCodeElimination(["helper"])(load("canon"))


def test_input_module_unchanged() -> None:
    mod = load("basic")
    text = mod.script()
    for make in VARIANTS.values():
        make()(mod)
    assert mod.script() == text


def test_to_non_dataflow_leaves_no_dataflow() -> None:
    after = relax.transform.ToNonDataflow()(load("nested"))
    from tvms.ir.visitor import walk
    for _, func in after.functions_items():
        nodes = list(walk(func))
        assert not any(isinstance(n, (relax.DataflowBlock, relax.DataflowVar)) for n in nodes)


# ---------------------------------------------------------------- impure calls

IMPURE = '''
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        a: R.Tensor((4,), dtype="float32") = R.add(x, x)
        b: R.Tensor((4,), dtype="float32") = R.multiply(a, x)
        z = R.call_packed("my_print", a, sinfo_args=(R.Tuple,))
        w: R.Tensor((4,), dtype="float32") = R.subtract(b, x)
        q: R.Tensor((4,), dtype="float32") = R.nn.relu(w)
        u: R.Tensor((4,), dtype="float32") = R.add(q, q)
        return q
'''


def _names(func: relax.Function) -> list:
    return [[b.var.name for b in blk.bindings] for blk in func.body.blocks]


def test_dce_keeps_impure_calls() -> None:
    after = relax.transform.DeadCodeElimination()(from_source(IMPURE))
    assert _names(after["main"]) == [["a", "b", "z", "w", "q"]]


def test_convert_to_dataflow_splits_at_impure_calls() -> None:
    # TVM 0.27: a, b in one dataflow block (outputs a, b), the call alone, then w, q, u
    after = relax.transform.ConvertToDataflow()(from_source(IMPURE))
    blocks = after["main"].body.blocks
    assert [type(b).__name__ for b in blocks] == ["DataflowBlock", "BindingBlock", "DataflowBlock"]
    assert _names(after["main"]) == [["a", "b"], ["z"], ["w", "q", "u"]]
    kinds = [[type(b.var).__name__ for b in blk.bindings] for blk in blocks]
    assert kinds == [["Var", "Var"], ["Var"], ["DataflowVar", "Var", "DataflowVar"]]


# ---------------------------------------------------------------- BindParams


def _static_mlp() -> tvm.IRModule:
    src = (CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms").read_text()
    src = src.replace("# from typing import TypeVar\n", "").replace('n = TypeVar("n")\n', "")
    return from_source(src.replace("(n, ", "(1, "))


def _mlp_params(mod: tvm.IRModule, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal([int(d.value) for d in p.struct_info.shape.values])
            .astype("float32") for p in mod["forward"].params[1:]}


def test_bind_params_matches_corpus() -> None:
    mod = _static_mlp()
    after = relax.transform.BindParams("forward", _mlp_params(mod))(mod)
    golden = (CORPUS_COPY / "mlp_bias_static_09_bound_params.tvms").read_text()
    assert after.script(dialect="tvm-0.27") == golden


def test_bind_params_semantics() -> None:
    mod = _static_mlp()
    params = _mlp_params(mod)
    after = relax.transform.BindParams("forward", params)(mod)
    x = np.random.default_rng(5).standard_normal((1, 784)).astype("float32")
    want = run_relax(mod, "forward", x, *params.values())
    got = run_relax(after, "forward", x)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert [p.name for p in after["forward"].params] == ["x"]


def test_bind_params_by_var_and_unknown_function() -> None:
    mod = _static_mlp()
    params = _mlp_params(mod)
    by_var = {p: params[p.name] for p in mod["forward"].params[1:]}
    a = relax.transform.BindParams("forward", by_var)(mod)
    b = relax.transform.BindParams("forward", params)(mod)
    assert a.script() == b.script()
    assert relax.transform.BindParams("nothing", params)(mod).script() == mod.script()


# ---------------------------------------------------------------- registry and CLI


@pytest.mark.parametrize("name", ["ToNonDataflow", "ConvertToDataflow", "DeadCodeElimination",
                                  "CanonicalizeBindings"])
def test_registered(name: str) -> None:
    assert name in list_passes()
    assert get_pass(name).info.name == name


def test_cli_opt(tmp_path, capsys) -> None:
    from tvms.cli import main
    src = tmp_path / "in.tvms"
    src.write_text((GOLDEN / "basic.input.tvms").read_text())
    out = tmp_path / "out.tvms"
    rc = main(["opt", str(src), "-p", "DeadCodeElimination", "-o", str(out)])
    assert rc in (0, None)
    assert out.read_text().rstrip("\n") == (GOLDEN / "basic.DeadCodeElimination.tvms").read_text().rstrip("\n")


# ---------------------------------------------------------------- FoldConstant
# fold*.input.tvms hold constants as R.const literals (TVM 0.27 segfaults printing metadata);
# fold*.input_tvm.tvms is how TVM 0.27 prints that input, fold*.FoldConstant.tvms its result.


@pytest.mark.parametrize("name", ["fold1", "fold2"])
def test_fold_constant_golden(name: str) -> None:
    mod = load(name)
    assert mod.script(dialect="tvm-0.27") == (GOLDEN / f"{name}.input_tvm.tvms").read_text()
    after = relax.transform.FoldConstant()(mod)
    assert after.script(dialect="tvm-0.27").rstrip("\n") == \
        (GOLDEN / f"{name}.FoldConstant.tvms").read_text().rstrip("\n")


@pytest.mark.parametrize("name", ["fold1", "fold2"])
def test_fold_constant_idempotent_and_semantics(name: str) -> None:
    mod = load(name)
    once = relax.transform.FoldConstant()(mod)
    twice = relax.transform.FoldConstant()(once)
    assert twice.script() == once.script()
    assert_same_results(mod, once)


def test_fold_constant_values() -> None:
    after = relax.transform.FoldConstant()(load("fold2"))
    body = after["allconst"].body
    assert not body.blocks and isinstance(body.body, relax.Constant)
    c = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(body.body.data, (c + c) * c)
    assert get_pass("FoldConstant").info.name == "FoldConstant"


# ---------------------------------------------------------------- the corpus
# corpus/<file>.<Pass>.tvms: TVM 0.27's text after <Pass> on ../shared/corpus/<file>.tvms (copied into tests/fixtures/corpus)

CORPUS_GOLDEN = sorted((GOLDEN / "corpus").glob("*.tvms"))


@pytest.mark.parametrize("golden", CORPUS_GOLDEN, ids=lambda p: p.stem)
def test_corpus_golden(golden) -> None:
    source, pass_name = golden.stem.rsplit(".", 1)
    path = CORPUS_COPY / f"{source}.tvms"
    mod = from_source(path.read_text())
    after = getattr(relax.transform, pass_name)()(mod)
    assert after.script(dialect="tvm-0.27").rstrip("\n") == golden.read_text().rstrip("\n")
    again = getattr(relax.transform, pass_name)()(after)
    assert again.script(dialect="tvm-0.27") == after.script(dialect="tvm-0.27")


@pytest.mark.parametrize("pass_name", ["ToNonDataflow", "ConvertToDataflow", "DeadCodeElimination",
                                       "CanonicalizeBindings", "FoldConstant"])
@pytest.mark.parametrize("source", ["mlp_bias_dyn_01_exported", "relax_script_control_flow_if"])
def test_corpus_semantics_kept(source: str, pass_name: str) -> None:
    path = CORPUS_COPY / f"{source}.tvms"
    mod = from_source(path.read_text())
    assert_same_results(mod, getattr(relax.transform, pass_name)()(mod), seeds=(0, 1))


def test_bind_params_binds_symbolic_sizes() -> None:
    # TVM 0.27 on the dynamic MLP, binding x (3, 784) and fc1_bias: n becomes 3 everywhere
    mod = from_source((CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms").read_text())
    rng = np.random.default_rng(0)
    params = {"x": rng.standard_normal((3, 784)).astype("float32"),
              "fc1_bias": np.zeros(256, "float32")}
    after = relax.transform.BindParams("forward", params)(mod)
    golden = (GOLDEN / "mlp_bias_dyn.BindParams_x_fc1_bias.tvms").read_text()
    assert after.script(dialect="tvm-0.27").rstrip("\n") == golden.rstrip("\n")
    weights = [rng.standard_normal(s).astype("float32") for s in [(256, 784), (10, 256), (10,)]]
    want = run_relax(mod, "forward", params["x"], weights[0], params["fc1_bias"], *weights[1:])
    np.testing.assert_allclose(run_relax(after, "forward", *weights), want, rtol=1e-5)


ON_VDEVICE = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global")]})
    @R.function
    def main(x: R.Tensor((4,), dtype="float32", vdevice="llvm:0")) -> R.Tensor((4,), dtype="float32", vdevice="llvm:0"):
        with R.dataflow():
            y: R.Tensor((4,), dtype="float32", vdevice="llvm:0") = R.add(x, x)
            R.output(y)
        return y'''


@pytest.mark.parametrize("passes", [["LegalizeOps"], ["LegalizeOps", "AnnotateTIROpPattern", "FuseOps"],
                                    ["ToNonDataflow"], ["DeadCodeElimination"]])
def test_passes_keep_the_modules_vdevices(passes):
    """A pass that rebuilds the module keeps its I.module_global_infos: LegalizeOps and FuseOps
    had dropped them, and the result printed vdevice="llvm:-1:global", which does not parse."""
    mod = from_source(ON_VDEVICE)
    out = mod
    for name in passes:
        out = get_pass(name)(out)
    assert out.global_infos == mod.global_infos
    text = out.script()
    assert 'vdevice="llvm:0:global"' in text and "llvm:-1" not in text
    assert structural_equal(from_source(text), out)
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(run_relax(out, "main", x), x + x)


def test_legalized_outputs_live_on_their_tensors_vdevice():
    """LegalizeOps gives a call_tir's outputs the vdevice of its first placed argument (TVM's
    call_te), so CallTIRRewrite allocates there: device 1, "local", as TVM 0.27 prints it (tvms
    had allocated on device 0, "global", and dropped the vdevice from the result)."""
    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "local")]})
    @R.function
    def main(x: R.Tensor((4,), dtype="float32", vdevice="llvm:1")) -> R.Tensor((4,), dtype="float32", vdevice="llvm:1"):
        with R.dataflow():
            y: R.Tensor((4,), dtype="float32", vdevice="llvm:1") = R.add(x, x)
            R.output(y)
        return y''')
    out = get_pass("CallTIRRewrite")(get_pass("LegalizeOps")(mod))
    text = out["main"].script(dialect="tvm-0.27")
    # (TVM 0.27's line, from its LegalizeOps and CallTIRRewrite of this module)
    assert ('alloc: R.Tensor((4,), dtype="float32", vdevice="llvm:-1:local") = R.builtin.alloc_tensor('
            'R.shape([4]), R.dtype("float32"), 1, R.str("local"), '
            'ty_args=(R.Tensor((4,), dtype="float32", vdevice="llvm:-1:local"),))') in text
    assert 'y: R.Tensor((4,), dtype="float32", vdevice="llvm:-1:local") = alloc' in text
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(run_relax(out, "main", x), x + x)


def test_a_recursive_local_function_stays_a_var_of_its_dataflow_block():
    """ConvertToDataflow (then CanonicalizeBindings) on a function defining a local function that
    calls itself: the function's variable is used inside its own body, where no dataflow
    variable is visible, so it stays a Var and is listed in R.output (TVM 0.27 writes
    ``R.output(loop, gv)``); it had become a DataflowVar and the text did not parse."""
    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        @R.function
        def loop(i: R.Tensor((), dtype="int32"), s: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            cond: R.Tensor((), dtype="bool") = R.less(i, R.const(3, "int32"))
            if cond:
                n: R.Tensor((), dtype="int32") = R.add(i, R.const(1, "int32"))
                t: R.Tensor((2,), dtype="float32") = R.add(s, x)
                r: R.Tensor((2,), dtype="float32") = loop(n, t)
            else:
                r: R.Tensor((2,), dtype="float32") = s
            return r

        gv: R.Tensor((2,), dtype="float32") = loop(R.const(0, "int32"), x)
        return gv''')
    out = relax.transform.ConvertToDataflow()(mod)
    text = out.script()
    assert "R.output(loop, gv)" in text
    assert structural_equal(from_source(text), out)
    x = np.array([1.0, 2.0], dtype="float32")
    np.testing.assert_array_equal(run_relax(out, "main", x), 4 * x)
    assert structural_equal(relax.transform.CanonicalizeBindings()(out), out)
