"""A copy of a statement with fresh variables for what it binds (as TVM's ConvertSSA makes them),
so that a pass that repeats a statement (unrolling, virtual threads, software pipelining) never
binds one variable twice; the names stay."""
from __future__ import annotations

from ...ir.expr import Var
from ...ir.stmt import Block, For, LetStmt, Stmt
from ...ir.visitor import Mutator


class _Fresh(Mutator):
    def __init__(self) -> None:
        self.mapping: dict = {}

    def visit_Var(self, var: Var) -> Var:
        return self.mapping.get(var, var)

    def visit_For(self, loop: For) -> Stmt:
        self.mapping[loop.loop_var] = loop.loop_var.with_changes()
        return self.generic_visit(loop)

    def visit_LetStmt(self, let: LetStmt) -> Stmt:
        self.mapping[let.var] = let.var.with_changes()
        return self.generic_visit(let)

    def visit_Block(self, block: Block) -> Stmt:
        for iv in block.iter_vars:
            self.mapping[iv.var] = iv.var.with_changes()
        return self.generic_visit(block)


def fresh_bindings(stmt: Stmt) -> Stmt:
    """``stmt`` with each loop, let and block iterator variable it binds made anew."""
    return _Fresh().visit(stmt)


__all__ = ["fresh_bindings"]
