"""A copy of a statement with fresh variables for what it binds (as TVM's ConvertSSA makes them),
so that a pass that repeats a statement (unrolling, virtual threads, software pipelining) never
binds one variable twice; the names stay. A buffer the statement allocates (a block's
``alloc_buffers``, ``AllocBuffer``) gets fresh data too, and every use of it follows: two copies of
a pipelined stage with its own register tile are two allocations, as the CUDA code generator wants."""
from __future__ import annotations

from ...ir.buffer import Buffer
from ...ir.expr import Var
from ...ir.stmt import AllocBuffer, Block, For, LetStmt, Stmt
from ...ir.visitor import Mutator


class _Fresh(Mutator):
    def __init__(self) -> None:
        self.mapping: dict = {}
        self.buffers: dict = {}  # old buffer -> the one over fresh data (one object per buffer)

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
        for buffer in block.alloc_buffers:
            self.mapping[buffer.data] = buffer.data.with_changes()
        return self.generic_visit(block)

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        self.mapping[alloc.buffer.data] = alloc.buffer.data.with_changes()
        return self.generic_visit(alloc)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        if buffer not in self.buffers:
            self.buffers[buffer] = self.generic_visit(buffer)
        return self.buffers[buffer]


def fresh_bindings(stmt: Stmt) -> Stmt:
    """``stmt`` with each loop, let and block iterator variable it binds, and the data of each
    buffer it allocates, made anew."""
    return _Fresh().visit(stmt)


__all__ = ["fresh_bindings"]
