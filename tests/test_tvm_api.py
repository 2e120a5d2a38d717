"""The parts of TVM's Python API that tutorials and TVM's own tests reach for (issue 14, point 5):
IRModule.from_expr's naming, tvms.tir / tvms.tirx names, tvms.error, Target.from_device,
relax.analysis, script()/show() with TVM's options, tvms.testing."""
from __future__ import annotations

import numpy as np
import pytest

import tvms as tvm
import tvms.testing
from conftest import FIXTURES
from tvms import relax
from tvms.ir import relax as rx
from tvms.ir.relax_well_formed import well_formed_problem
from tvms.ir.struct_info import TensorStructInfo
from tvms.lowering.targets import compiled_kinds
from tvms.script import from_source

MODULE = from_source('''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            a = R.add(x, x)
            b = R.exp(a)
            R.output(b)
        return b

    @R.function(private=True)
    def g(x: R.Tensor((2,), "float32")):
        return x

    @T.prim_func
    def p(a: T.handle):
        T.evaluate(0)
''')


def test_from_expr_names_the_function_as_tvm() -> None:
    """By its global symbol; ``main`` for a function without one (a private one); a Schedule of a
    bare PrimFunc calls it ``main`` whatever its symbol (both as Apache TVM 0.27)."""
    assert [gv.name_hint for gv in tvm.IRModule.from_expr(MODULE["f"]).get_global_vars()] == ["f"]
    assert [gv.name_hint for gv in tvm.IRModule.from_expr(MODULE["g"]).get_global_vars()] == ["main"]
    assert [gv.name_hint for gv in tvm.IRModule.from_expr(MODULE["p"]).get_global_vars()] == ["p"]
    assert [gv.name_hint for gv in tvm.tir.Schedule(MODULE["p"]).mod.get_global_vars()] == ["main"]
    with pytest.raises(tvm.TVMError, match="takes a PrimFunc or a Relax function"):
        tvm.IRModule.from_expr(rx.Tuple(()))


def test_tir_names_and_tirx() -> None:
    import tvms.tir.expr
    import tvms.tirx

    assert tvms.tirx is tvm.tir and tvm.tir.PrimFunc is type(MODULE["p"])
    n = tvm.tir.expr.Var("n", "int64")
    assert isinstance(n + 1, tvm.tir.Add) and tvm.tir.IntImm is tvm.tir.expr.IntImm


def test_errors_under_tvm_names() -> None:
    assert tvm.TVMError is tvm.error.TVMError is tvm.TVMSError
    with pytest.raises(tvm.error.DiagnosticError, match="1:2"):
        from_source("@@")
    assert issubclass(tvm.error.OpNotImplemented, tvm.TVMError)


def test_target_from_device() -> None:
    assert str(tvm.target.Target.from_device(tvm.cpu(0))) == "llvm"
    assert tvm.target.Target.from_device("cpu").kind == "llvm"
    if not tvm.cuda(0).exist:
        with pytest.raises(tvm.TVMError, match="cannot detect the device cuda:0"):
            tvm.target.Target.from_device(tvm.cuda(0))
    with pytest.raises(tvm.TVMError, match="expected a device"):
        tvm.target.Target.from_device("tpu")


def _function(bindings: list, params: tuple, ret: rx.RelaxExpr, dataflow: bool = False) -> rx.Function:
    block = (rx.DataflowBlock if dataflow else rx.BindingBlock)(tuple(bindings))
    return rx.Function(params, rx.SeqExpr((block,), ret))


def test_well_formed() -> None:
    t = TensorStructInfo((2,), "float32")
    x, y = rx.Var("x", t), rx.Var("y", t)
    lv = rx.DataflowVar("lv", t)
    add = relax.op.add(x, x)
    assert relax.analysis.well_formed(MODULE) and relax.analysis.well_formed(MODULE["f"])
    cases = {
        "the variable y is used where it is not defined": _function([rx.VarBinding(relax.op.add(y, x), y)], (x,), y),
        "the variable y is defined more than once": _function([rx.VarBinding(add, y), rx.VarBinding(add, y)], (x,), y),
        "the dataflow variable lv is bound outside a dataflow block": _function([rx.VarBinding(add, lv)], (x,), lv),
        "the dataflow variable lv is used where it is not defined": _function([rx.VarBinding(add, lv)], (x,), lv, dataflow=True),
    }
    for problem, func in cases.items():
        assert not relax.analysis.well_formed(func)
        assert well_formed_problem(func) == f"the function: {problem}"
    n = tvm.tir.Var("n", "int64")
    sized = _function([rx.VarBinding(relax.op.reshape(x, rx.ShapeExpr((n,))), y)], (x,), y)
    assert well_formed_problem(sized) == "the function: the symbolic size n is used in an expression before it is defined"
    orphan = tvm.IRModule({"main": _function([rx.VarBinding(rx.Call(tvm.ir.GlobalVar("h"), (x,)), y)], (x,), y)})
    assert well_formed_problem(orphan) == "main: the global function h is not in the module"


def test_variables_of_an_expression() -> None:
    f = MODULE["f"]
    x = f.params[0]
    names = lambda vs: [v.name for v in vs]  # noqa: E731
    assert names(relax.analysis.bound_vars(f)) == ["x", "a", "b"]
    assert names(relax.analysis.all_vars(f)) == ["x", "a", "b"]
    body = f.body.blocks[0].bindings[1].value  # R.exp(a)
    assert names(relax.analysis.free_vars(body)) == ["a"] and relax.analysis.free_vars(f) == []
    assert [v.name for v in relax.analysis.get_var2val(f)] == ["a", "b"]
    assert x in relax.analysis.all_vars(f)


def test_script_takes_tvm_options() -> None:
    """indent_spaces and print_line_numbers lay the text out as TVM 0.27 does (golden made with
    TVM, fixtures/printer_options); TVM's other options at their defaults are accepted, other
    values refused rather than ignored."""
    mod = from_source((FIXTURES / "struct_info" / "elementwise_before.tvms").read_text())
    golden = (FIXTURES / "printer_options" / "line_numbers_indent2_by_tvm.txt").read_text()
    assert mod.script(dialect="tvm-0.27", print_line_numbers=True, indent_spaces=2, ir_prefix="I",
                      show_all_ty=True, obj_to_underline=None) == golden
    with pytest.raises(tvm.TVMError, match="tvms prints only with verbose_expr=False"):
        mod.script(verbose_expr=True)
    with pytest.raises(tvm.TVMError, match="unknown option 'colour'"):
        mod.script(colour=True)


def test_show_takes_tvm_arguments(capsys: pytest.CaptureFixture) -> None:
    MODULE["g"].show(None, False, name="g")
    assert capsys.readouterr().out.startswith("# from tvm.script import relax as R")


def test_testing_helpers() -> None:
    tvms.testing.assert_allclose(tvm.nd.array(np.ones(3, "float32")), np.ones(3))
    with pytest.raises(AssertionError, match="shapes differ"):
        tvms.testing.assert_allclose(np.ones(3), np.ones((3, 1)))
    assert tvms.testing.device_enabled("llvm -num-cores=2")
    assert tvms.testing.device_enabled("cuda") == ("cuda" in compiled_kinds() and tvm.cuda(0).exist)
    assert ("llvm", tvm.cpu(0)) in tvms.testing.enabled_targets()
    assert tvms.testing.requires_cuda.mark.name == "skipif"


dtype = tvms.testing.parameter("float32", "int8")


def test_parameter_fixture(dtype: str) -> None:
    assert dtype in ("float32", "int8")
