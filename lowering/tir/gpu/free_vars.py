"""What a region of TIR uses without defining it: the parameters a kernel cut out of it needs.

``undefined(stmt)`` gives the variables and the buffers ``stmt`` reads or writes that are
defined outside it, each in the order of its first use (a store's buffer before its value), as
TVM's VarUseDefAnalyzer finds them.
"""
from __future__ import annotations

from ....ir.buffer import Buffer
from ....ir.expr import BufferLoad, CommReducer, IterVar, Let, Var
from ....ir.stmt import AllocBuffer, Allocate, AttrStmt, BufferStore, DeclBuffer, For, LetStmt, Stmt
from ....ir.visitor import walk


def _defined(stmt: Stmt) -> set:
    defined: set = set()
    for node in walk(stmt):
        if isinstance(node, For):
            defined.add(node.loop_var)
        elif isinstance(node, (LetStmt, Let)):
            defined.add(node.var)
        elif isinstance(node, CommReducer):
            defined.update((*node.lhs, *node.rhs))
        elif isinstance(node, AttrStmt) and isinstance(node.node, IterVar):
            defined.add(node.node.var)
        elif isinstance(node, Allocate):  # (T.allocate: its pointer, and any buffer over it, are the region's own)
            defined.add(node.buffer_var)
        elif isinstance(node, (AllocBuffer, DeclBuffer)):
            defined.add(node.buffer)
            if isinstance(node, AllocBuffer):
                defined.add(node.buffer.data)
    return defined


def undefined(stmt: Stmt, declared: dict | None = None) -> tuple[list, list]:
    """(variables, buffers) that ``stmt`` uses and does not define, in order of first use; a use
    of the data of a buffer ``declared`` (data Var -> Buffer) around it (a pointer argument,
    ``A.data``) is a use of that buffer too."""
    defined = _defined(stmt)
    declared = declared or {}
    variables: dict = {}
    buffers: dict = {}
    for node in walk(stmt):
        if (isinstance(node, (BufferLoad, BufferStore)) and node.buffer not in defined
                and node.buffer.data not in defined):
            buffers.setdefault(node.buffer, None)
        elif isinstance(node, Var) and node not in defined:
            variables.setdefault(node, None)
            buffer = declared.get(node)
            if buffer is not None and not any(b.data is node for b in buffers):
                buffers.setdefault(buffer, None)
    return list(variables), [b for b in buffers if isinstance(b, Buffer)]


__all__ = ["undefined"]
