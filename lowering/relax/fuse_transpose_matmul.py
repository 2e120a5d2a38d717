"""``relax.transform.FuseTransposeMatmul()``: ``R.matmul(x, R.permute_dims(w))`` becomes one
kernel, ``NT_matmul``, that reads ``w`` as it is stored (``x[i, k] * w[j, k]``).

Weights are stored as (out_features, in_features), so a linear layer is a matmul with the
weight's last two axes swapped; as two calls, the transposition copies the whole weight at every
run. As TVM does it: the matches are first fused by pattern into ``transpose_matmul_fuse``
composites, then each call of a composite becomes a ``call_tir`` of a TE NT matmul (the
composites stay until dead-code elimination removes them).
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.module import GlobalVar, IRModule
from ..pass_registry import register_pass
from ..transform import module_pass
from .dpl import is_op, wildcard
from .expr_functor import PyExprMutator, mutate_relax_functions
from .fuse_by_pattern import FuseOpsByPattern, PatternCheckContext
from .legalize import call_te, matmul_te
from .passes import tvm_print_order

COMPOSITE = "transpose_matmul_fuse"


def _pattern() -> tuple:
    w, x = wildcard(), wildcard()
    w_t = is_op("relax.permute_dims")(w)
    return is_op("relax.matmul")(x, w_t), {"w": w, "x": x, "wT": w_t}


def _applies(context: PatternCheckContext) -> bool:
    """The transposition swaps the last two axes, and the matmul is its only use (else the
    transposed weight is needed anyway, and TVM's pass would make a composite of two outputs)."""
    transpose = context.annotated_expr["wT"]
    bound = context.value_to_bound_var.get(transpose)
    if not isinstance(bound, rx.DataflowVar) or len(context.var_usages.get(bound, ())) > 1:
        return False  # (a variable that leaves its dataflow block has uses beyond the block)
    ndim = getattr(transpose.args[0].struct_info, "ndim", -1)
    if ndim == -1 or getattr(context.matched_expr.struct_info, "dims", None) is None:
        return False  # (the NT kernel is written for a result of known shape)
    axes = transpose.attrs.get("axes")
    if axes is None:
        return ndim == 2
    swapped = list(range(ndim))
    swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
    return [int(a) for a in axes] == swapped


class _CompositeToKernel(PyExprMutator):
    def visit_call_(self, call: rx.Call) -> Any:
        call = self.visit_expr_post_order(call)
        if not (isinstance(call, rx.Call) and isinstance(call.op, GlobalVar)):
            return call
        func = self.builder_.get()[call.op]
        if not (isinstance(func, rx.Function) and func.attrs.get("Composite") == COMPOSITE):
            return call
        x, w = _operands(func, call)
        result = func.ret_struct_info
        out_dtype = None if all(a.struct_info.dtype == result.dtype for a in (x, w)) else str(result.dtype)
        compute = matmul_te(tuple(call.struct_info.dims), str(result.dtype), out_dtype, "NT_matmul",
                            transpose_b=True)
        return call_te(self.builder_, compute, x, w, primfunc_name_hint="NT_matmul")


def _operands(composite: rx.Function, call: rx.Call) -> tuple:
    """The caller's ``x`` and ``w`` of a composite ``matmul(x, permute_dims(w))`` (its parameters
    are the distinct inputs in the order the pattern met them: one when ``x`` is ``w``)."""
    values = {b.var: b.value for block in composite.body.blocks for b in block.bindings}
    matmul = values[composite.body.body] if composite.body.body in values else composite.body.body
    x, transposed = matmul.args
    w = values[transposed].args[0]
    argument = dict(zip(composite.params, call.args))
    return argument[x], argument[w]


@module_pass(opt_level=0, name="FuseTransposeMatmul")
class FuseTransposeMatmul:
    """Fuse ``matmul(x, permute_dims(w))`` (the last two axes swapped) into ``NT_matmul``."""

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        pattern, annotations = _pattern()
        mod = FuseOpsByPattern([(COMPOSITE, pattern, annotations, _applies)],
                               bind_constants=False)(mod)
        return tvm_print_order(mutate_relax_functions(_CompositeToKernel(mod), mod))


register_pass("FuseTransposeMatmul", FuseTransposeMatmul, override=True)

__all__ = ["FuseTransposeMatmul"]
