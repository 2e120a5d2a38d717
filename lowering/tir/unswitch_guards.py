"""UnswitchGuards: a serial loop whose body is a sequence of guarded statements, with guards that
do not change inside the loop, runs unguarded when every guard holds.

A register tile with a tail (``T.where(i < n)`` on each of its rows, after unrolling) becomes::

    if g0 and g1 and g2 and g3:          # a full tile: the hot loop has no branch
        for k in range(K): S0; S1; S2; S3
    elif g0 or g1 or g2 or g3:            # the tail tile keeps its guards
        for k in range(K): if g0: S0 ...  # (and a tile wholly past the end runs nothing)

A guard qualifies when it reads no buffer and does not use the loop variable (the statements
then cannot change it). This is the part of TVM's LoopPartition that tiles with tails need.
"""
from __future__ import annotations

from ...ir.expr import And, BufferLoad, Call, Or, PrimExpr, Var
from ...ir.function import PrimFunc
from ...ir.stmt import SERIAL, For, IfThenElse, SeqStmt, Stmt, seq
from ...ir.visitor import Mutator, collect
from .tir_pass import define_tir_pass


def _invariant(cond: PrimExpr, var: Var) -> bool:
    return not collect(cond, (BufferLoad, Call)) and all(v is not var for v in collect(cond, Var))


def _guards(body: Stmt, var: Var) -> list[PrimExpr] | None:
    """The loop-invariant guards of a body made of guarded statements (and unguarded ones), or
    None when some statement is guarded by something else or none is guarded."""
    items = body.seq if isinstance(body, SeqStmt) else (body,)
    guards = []
    for item in items:
        if isinstance(item, IfThenElse):
            if item.else_case is not None or not _invariant(item.condition, var):
                return None
            guards.append(item.condition)
    return guards or None


def _all_guarded(body: Stmt) -> bool:
    return all(isinstance(item, IfThenElse) for item in (body.seq if isinstance(body, SeqStmt) else (body,)))


def _unguarded(body: Stmt) -> Stmt:
    items = body.seq if isinstance(body, SeqStmt) else (body,)
    return seq([item.then_case if isinstance(item, IfThenElse) else item for item in items])


class _Unswitcher(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_visit(loop)
        if loop.kind != SERIAL:
            return loop
        guards = _guards(loop.body, loop.loop_var)
        if guards is None:
            return loop
        every, some = guards[0], guards[0]
        for guard in guards[1:]:
            every, some = And(every, guard), Or(some, guard)
        guarded = loop
        if _all_guarded(loop.body):  # a tile wholly past the end runs nothing at all
            guarded = IfThenElse(some, loop)
        return IfThenElse(every, loop.with_changes(body=_unguarded(loop.body)), guarded)


def unswitch_guards(func: PrimFunc) -> PrimFunc:
    """``func`` with loop-invariant guards of its loop bodies tested once, outside the loop."""
    return func.with_changes(body=_Unswitcher().visit(func.body))


UnswitchGuards = define_tir_pass("UnswitchGuards", unswitch_guards)

__all__ = ["UnswitchGuards", "unswitch_guards"]
