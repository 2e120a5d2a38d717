"""CanonicalizeLoop: every loop counts from 0 in steps of 1, as the passes after it expect.

``for i in range(a, b, s)`` becomes ``for i in range(ceildiv(b - a, s))`` with ``i`` read as
``i * s + a`` in the body (TVM 0.27's pass, first in its lowering pipeline). A step that cannot be
shown to be positive is refused: the loop would never end.
"""
from __future__ import annotations

from ...ir import arith
from ...ir.arith import simplify
from ...ir.errors import TVMSError
from ...ir.expr import Add, FloorDiv, IntImm, Mul, PrimExpr, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import For, Stmt
from ...ir.visitor import Mutator
from .tir_pass import define_tir_pass


class _Canonicalizer(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.renamed: dict[Var, PrimExpr] = {}  # loop variable -> what it stands for in the body

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.renamed.get(v, v)

    def visit_For(self, loop: For) -> Stmt:
        if is_const_int(loop.min, 0) and loop.has_trivial_step:
            return self.generic_visit(loop)
        var = loop.loop_var
        step = loop.step if loop.step is not None else const(1, var.dtype)
        if not (isinstance(step, IntImm) and step.value >= 1):
            raise TVMSError(f"CanonicalizeLoop: the step of loop {var.name!r} may not be positive: "
                            f"{_text(step)}")
        # (TVM's operators: i * 1 is i, i * 5 + 0 is i * 5)
        self.renamed[var] = arith.binary(Add, arith.binary(Mul, var, step), loop.min)
        try:
            body = self.visit(loop.body)
        finally:
            del self.renamed[var]
        extent = self.visit(loop.extent)
        if step.value != 1:  # ceildiv(extent, step)
            extent = arith.binary(FloorDiv, arith.binary(Add, extent, const(step.value - 1, step.dtype)), step)
        return loop.with_changes(min=const(0, var.dtype), extent=simplify(extent), step=None, body=body)


def _text(e: PrimExpr) -> str:
    from ...script.printer import to_script

    return to_script(e)


def canonicalize_loop(func: PrimFunc) -> PrimFunc:
    """``func`` with every loop starting at 0 with step 1."""
    return func.with_changes(body=_Canonicalizer().visit(func.body))


CanonicalizeLoop = define_tir_pass("CanonicalizeLoop", canonicalize_loop)

__all__ = ["CanonicalizeLoop", "canonicalize_loop"]
