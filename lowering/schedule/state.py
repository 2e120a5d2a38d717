"""Schedule state and srefs, as far as tvms's design has them.

TVM keeps a tree of srefs (one per block and loop, each knowing its parent) that primitives update
in place. tvms's IR is immutable and a schedule finds its blocks and loops again on every call, so
an sref here is made on request from the current module: the block or loop, the sref of the
nearest enclosing block or loop, and its index in an enclosing sequence. It describes the module
as it was when it was made; ``ScheduleState`` is a view of a schedule: its module and srefs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.stmt import Block, BlockRealize, For, SeqStmt
from .tree import walk_with_path


@dataclass(frozen=True, eq=False)
class StmtSRef:
    """A block or loop of the module (``stmt``), its enclosing block or loop (``parent``, None for
    the root block) and its position in an enclosing sequence of statements (``seq_index``, -1
    when it is not in one)."""

    stmt: Any
    parent: "StmtSRef | None"
    seq_index: int

    def same_as(self, other: Any) -> bool:
        return isinstance(other, StmtSRef) and other.stmt is self.stmt

    def __repr__(self) -> str:
        if isinstance(self.stmt, Block):
            return f"StmtSRef(block '{self.stmt.name_hint}')"
        return f"StmtSRef(loop '{self.stmt.loop_var.name}')"


def sref_of(body: Any, target: Any) -> StmtSRef | None:
    """The sref of the Block or For ``target`` (found by identity) in the statement ``body``."""
    for node, path in walk_with_path(body):
        if node is target:
            return _make(node, path)
    return None


def _make(node: Any, path: tuple) -> StmtSRef:
    anchors = [i for i, p in enumerate(path) if isinstance(p, (Block, For))]
    parent = _make(path[anchors[-1]], path[:anchors[-1]]) if anchors else None
    child = node
    if isinstance(node, Block) and path and isinstance(path[-1], BlockRealize):
        child, path = path[-1], path[:-1]
    holder = path[-1] if path else None
    index = next(i for i, s in enumerate(holder.seq) if s is child) if isinstance(holder, SeqStmt) else -1
    return StmtSRef(node, parent, index)


class ScheduleState:
    """A view of a schedule's state: ``mod`` (its module now) and ``get_sref(block_or_loop)``."""

    def __init__(self, schedule: Any):
        self._schedule = schedule
        self.debug_mask, self.enable_check = "all", True  # (tvms always checks)

    @property
    def mod(self) -> Any:
        return self._schedule.mod

    def get_sref(self, stmt: Any) -> StmtSRef | None:
        return self._schedule.get_sref(stmt)
