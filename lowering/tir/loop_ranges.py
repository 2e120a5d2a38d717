"""A mutator that knows the ranges of the loops (and launched threads) around what it visits."""
from __future__ import annotations

from ...ir.arith import Analyzer
from ...ir.expr import IntImm, IterVar
from ...ir.stmt import AttrStmt, For, Stmt
from ...ir.visitor import Mutator


class LoopRangeMutator(Mutator):
    """``self.analyzer`` has every enclosing loop of constant bounds bound to its range.

    Loop variables are unique objects, so a binding left behind after its loop is harmless."""

    def __init__(self) -> None:
        self.analyzer = Analyzer()

    def visit_For(self, loop: For) -> Stmt:
        if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
            self.analyzer.bind(loop.loop_var, loop.min.value, loop.extent.value)
        return self.generic_visit(loop)

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if (attr.attr_key == "thread_extent" and isinstance(attr.node, IterVar)
                and isinstance(attr.value, IntImm)):
            self.analyzer.bind(attr.node.var, 0, attr.value.value)
        return self.generic_visit(attr)


__all__ = ["LoopRangeMutator"]
