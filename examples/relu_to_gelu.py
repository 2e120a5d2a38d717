"""Seed 003's custom pass: rewrite every ``R.nn.relu`` call into ``R.nn.gelu``.

From the command line::

    tvms opt --load examples/relu_to_gelu.py -p ReluToGelu model.tvms

From Python::

    from tvms.script import from_source
    mod = ReluToGelu()(from_source(open("model.tvms").read()))
"""
import tvms as tvm
from tvms import IRModule, relax
from tvms.relax.expr_functor import PyExprMutator, mutator


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
    def transform_module(self, mod: IRModule, _ctx: tvm.transform.PassContext) -> IRModule:
        """IRModule-level transformation"""
        rewriter = ReluRewriter(mod)
        for g_var, func in mod.functions_items():
            if isinstance(func, relax.Function):
                func = rewriter.visit_expr(func)
                rewriter.builder_.update_func(g_var, func)
        return rewriter.builder_.get()
