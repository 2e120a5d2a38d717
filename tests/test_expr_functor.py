"""tvms.relax.expr_functor: seed 003's ReluToGelu pass, visitors and mutators."""
from __future__ import annotations

import pytest

import tvms as tvm
from conftest import CORPUS_COPY, FIXTURES, load_example
from tvms import relax
from tvms.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor
from tvms.script import from_source

SEEDS = FIXTURES / "seeds_relax"


# The pass exactly as seed 003 writes it (with ``tvms`` for ``tvm``).
@mutator
class ReluRewriter(PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        # visit the relax.Call expr, and only handle the case when op is relax.nn.relu
        if call.op.name == "relax.nn.relu":
            return relax.op.nn.gelu(call.args[0])
        return super().visit_call_(call)


@tvm.transform.module_pass(opt_level=0, name="ReluToGelu")
class ReluToGelu:  # pylint: disable=too-few-public-methods
    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        """IRModule-level transformation"""
        rewriter = ReluRewriter(mod)
        for g_var, func in mod.functions_items():
            if isinstance(func, relax.Function):
                func = rewriter.visit_expr(func)
                rewriter.builder_.update_func(g_var, func)
        return rewriter.builder_.get()


def test_seed_003_relu_to_gelu_classic_golden():
    before = (SEEDS / "seed003_relax_mlp_exported.tvms").read_text()
    expected = (SEEDS / "seed003_relax_relu_to_gelu.tvms").read_text()
    origin_mod = from_source(before)
    mod = ReluToGelu()(origin_mod)
    assert mod.script() == expected.rstrip("\n")
    assert origin_mod.script() == before.rstrip("\n")  # the input is untouched


def test_relu_to_gelu_matches_tvm_0_27_output():
    before = from_source((CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms").read_text())
    expected = (CORPUS_COPY / "mlp_bias_dyn_06_relu_to_gelu.tvms").read_text()
    assert ReluToGelu()(before).script(dialect="tvm-0.27") == expected.rstrip("\n")


def test_the_example_file_is_the_same_pass():
    example = load_example("relu_to_gelu.py")
    before = from_source((SEEDS / "seed003_relax_mlp_exported.tvms").read_text())
    expected = (SEEDS / "seed003_relax_relu_to_gelu.tvms").read_text().rstrip("\n")
    assert example.ReluToGelu()(before).script() == expected


def test_unchanged_function_is_the_same_object():
    mod = from_source((SEEDS / "seed003_relax_relu_to_gelu.tvms").read_text())  # no relu left
    func = mod["forward"]
    assert ReluRewriter(mod).visit_expr(func) is func


def test_verify_each_accepts_relu_to_gelu():
    mod = from_source((SEEDS / "seed003_relax_mlp_exported.tvms").read_text())
    with tvm.transform.PassContext(instruments=[tvm.instrument.VerifyEachInstrument()]):
        ReluToGelu()(mod)


# ----------------------------------------------------------------------------- visitors

SMALL = '''\
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            a: R.Tensor((2, 3), dtype="float32") = R.add(x, y)
            b: R.Tensor((2, 3), dtype="float32") = R.nn.relu(a)
            c: R.Tensor((2, 3), dtype="float32") = R.multiply(b, a)
            R.output(c)
        return c'''


def test_visitor_counts_calls_and_variables():
    @visitor
    class Counter(PyExprVisitor):
        def __init__(self):
            self.ops: list[str] = []
            self.uses = 0
            self.defs: list[str] = []

        def visit_call_(self, call):
            self.ops.append(call.op.name)
            super().visit_call_(call)

        def visit_var_(self, var):
            self.uses += 1

        def visit_dataflow_var_(self, var):
            self.uses += 1

        def visit_var_def_(self, var):
            self.defs.append(var.name)

        def visit_dataflow_var_def_(self, var):
            self.defs.append(var.name)

    counter = Counter()
    counter.visit_expr(from_source(SMALL)["main"])
    assert counter.ops == ["relax.add", "relax.nn.relu", "relax.multiply"]
    assert counter.uses == 2 + 1 + 2 + 1  # add(x, y), relu(a), multiply(b, a), return c
    assert counter.defs == ["x", "y", "a", "b", "c"]


def test_visit_binding_sees_every_binding():
    names = []

    class Bindings(PyExprVisitor):
        def visit_binding(self, binding):
            names.append(binding.var.name)
            super().visit_binding(binding)

    Bindings().visit_expr(from_source(SMALL)["main"])
    assert names == ["a", "b", "c"]


def test_mutator_rewrites_and_normalizes_nested_calls():
    @mutator
    class ExpandRelu(PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op.name == "relax.nn.relu":  # relu(a) -> relu(exp(a)): a nested call
                return relax.op.nn.relu(relax.op.exp(call.args[0]))
            return call

    mod = from_source(SMALL)
    m = ExpandRelu(mod)
    m.builder_.update_func(mod.get_global_var("main"), m.visit_expr(mod["main"]))
    text = m.builder_.get().script()
    assert "= R.exp(a)" in text  # bound to a fresh variable, before its use
    lines = [line.strip() for line in text.splitlines()]
    exp_line = next(i for i, line in enumerate(lines) if "R.exp(a)" in line)
    relu_line = next(i for i, line in enumerate(lines) if "R.nn.relu(" in line)
    assert exp_line < relu_line
    out = from_source(text)  # still valid TVMScript
    assert tvm.ir.structural_equal(out, m.builder_.get())


def test_mutator_replaces_a_variable_whose_struct_info_changed():
    @mutator
    class SumRelu(PyExprMutator):
        def visit_call_(self, call):
            if call.op.name == "relax.nn.relu":
                return relax.op.sum(call.args[0], axis=[1], keepdims=True)  # (2, 3) -> (2, 1)
            return super().visit_call_(call)

    mod = from_source(SMALL)
    m = SumRelu(mod)
    func = m.visit_expr(mod["main"])
    old = mod["main"].body.blocks[0].bindings
    new = func.body.blocks[0].bindings
    assert new[1].var.name == "b" and new[1].var is not old[1].var
    assert [int(d.value) for d in new[1].var.struct_info.shape.values] == [2, 1]
    assert new[2].value.args[0] is new[1].var  # the later use follows the new variable
    assert new[0] is old[0]  # bindings that did not change are kept as they are
    m.builder_.update_func(mod.get_global_var("main"), func)
    assert 'b: R.Tensor((2, 1), dtype="float32") = R.sum(a, axis=[1], keepdims=True)' \
        in m.builder_.get().script()


def test_decorators_check_the_base_class():
    with pytest.raises(tvm.TVMSError, match="PyExprMutator"):
        mutator(type("NotAMutator", (), {}))
    with pytest.raises(tvm.TVMSError, match="PyExprVisitor"):
        visitor(type("NotAVisitor", (), {}))
