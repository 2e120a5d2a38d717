"""UnrollLoop: a ``T.unroll`` loop of constant extent becomes one copy of its body per iteration.

Each copy has the loop variable replaced by the iteration's value, unsimplified (TVM prints the
first copy's ``k_0 * 4 + k_1`` as ``T.Add(k_0 * 4, 0)``). A loop whose body breaks or continues
stays a loop (the code generator runs it serially).
"""
from __future__ import annotations

from ...ir.analysis import controls_loop, substitute
from ...ir.expr import Add, IntImm, const
from ...ir.function import PrimFunc
from ...ir.stmt import UNROLLED, For, Stmt, seq
from ...ir.visitor import Mutator
from .tir_pass import define_tir_pass


class _Unroller(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_visit(loop)
        if loop.kind != UNROLLED or not isinstance(loop.extent, IntImm) or controls_loop(loop.body) \
                or not loop.has_trivial_step:  # (a loop with a step: CanonicalizeLoop first)
            return loop  # (copies of a body that breaks or continues would leave the outer loop)
        def value(k: int):
            if isinstance(loop.min, IntImm):
                return const(loop.min.value + k, loop.loop_var.dtype)
            return Add(loop.min, const(k, loop.loop_var.dtype))
        return seq([substitute(loop.body, {loop.loop_var: value(k)}) for k in range(loop.extent.value)])


def unroll_loop(func: PrimFunc) -> PrimFunc:
    """``func`` with its unrolled loops expanded."""
    return func.with_changes(body=_Unroller().visit(func.body))


UnrollLoop = define_tir_pass("UnrollLoop", unroll_loop)

__all__ = ["UnrollLoop", "unroll_loop"]
