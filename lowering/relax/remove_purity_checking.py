"""``RemovePurityChecking``: the calls that only claim purity become ordinary ones, as TVM's pass
does before the VM is built: ``R.call_pure_packed`` and ``R.call_inplace_packed`` are
``R.call_packed``, ``R.invoke_pure_closure`` is ``R.invoke_closure``, and every pure function is
marked ``relax.force_pure`` (it stays pure although it now makes such calls).
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.expr import Op
from ...ir.module import IRModule
from ...ir.node import FrozenDict, Node
from ...ir.relax_op import make_call
from ...ir.visitor import Mutator
from ..pass_registry import register_pass
from ..transform import module_pass

_UNWRAP = {"relax.call_pure_packed": "call_packed", "relax.call_inplace_packed": "call_packed",
           "relax.invoke_pure_closure": "invoke_closure"}


class _Unwrap(Mutator):
    def visit_Call(self, call: rx.Call) -> Node:
        call = self.generic_visit(call)
        if isinstance(call.op, Op) and call.op.name in _UNWRAP:
            return make_call(_UNWRAP[call.op.name], call.args, {}, call.sinfo_args, span=call.span)
        return call

    def visit_Function(self, f: rx.Function) -> Node:
        f = self.generic_visit(f)
        if f.is_pure:
            f = f.with_changes(attrs=FrozenDict({**f.attrs, "relax.force_pure": True}))
        return f


@module_pass(opt_level=0, name="RemovePurityChecking")
class RemovePurityChecking:
    """``relax.transform.RemovePurityChecking()``."""

    def transform_module(self, mod: IRModule, ctx: Any = None) -> IRModule:
        out = mod.copy()
        for gv, f in mod.functions_items():
            if isinstance(f, rx.Function):
                out[gv] = _Unwrap().visit(f)
        return out


register_pass(factory=RemovePurityChecking)

__all__ = ["RemovePurityChecking"]
