"""Helpers the GPU passes share."""
from __future__ import annotations

from ....ir.buffer import Buffer, decl_buffer
from ....ir.dtype import int32
from ....ir.expr import Call, StringImm
from ....ir.module import Target
from ....ir.op import get_op
from ....ir.stmt import AllocBuffer, Evaluate, LetStmt, SeqStmt, Stmt


def target_attr(target: Target | None, key: str, default: int) -> int:
    return int(target.config.get(key, default)) if isinstance(target, Target) else default


def storage_sync(scope: str) -> Stmt:
    """``T.tvm_storage_sync(scope)``: a barrier for the threads sharing ``scope`` memory."""
    return Evaluate(Call(int32, get_op("tir.tvm_storage_sync"), (StringImm(scope),)))


def local_buffer(name: str, dtype, scope: str = "local", extent=1) -> Buffer:
    """A one-dimensional buffer (an int extent is an int32)."""
    return decl_buffer((extent,), dtype, name, scope=scope)


class Bind:
    """A ``let`` in a statement list: it scopes the statements after it (see ``sequence``)."""

    __slots__ = ("var", "value")

    def __init__(self, var, value) -> None:
        self.var, self.value = var, value


def sequence(items: list) -> Stmt:
    """The statements ``items`` in order; a ``Bind`` becomes a LetStmt around the rest, an
    allocation (``AllocBuffer`` without a body, given as a Buffer) an AllocBuffer around it."""
    stmts: list = []
    for i, item in enumerate(items):
        if isinstance(item, Bind):
            stmts.append(LetStmt(item.var, item.value, sequence(items[i + 1:])))
            break
        if isinstance(item, Buffer):
            stmts.append(AllocBuffer(item, sequence(items[i + 1:])))
            break
        stmts.extend(item.seq if isinstance(item, SeqStmt) else (item,))
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))


__all__ = ["Bind", "local_buffer", "sequence", "storage_sync", "target_attr"]
