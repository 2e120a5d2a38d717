"""The part of TVM's RemoveNoOp that a software pipeline needs: a wait for async copies whose
in-flight count is provably negative is no wait at all, and goes (its body stays).

Such counts come from a pipeline's epilogue: ``n - i`` groups may be in flight at its i-th
step, and once UnrollLoop and StmtSimplify make the steps constants, the last ones are below
zero (every group was waited for already). CUDA has no ``cp.async.wait_group -1``, and TVM 0.27
drops them here too (RemoveNoOp, after the last StmtSimplify), so ThreadSync puts no barrier
after them.
"""
from __future__ import annotations

from ....ir.arith import Analyzer
from ....ir.function import PrimFunc
from ....ir.stmt import AttrStmt, Stmt, async_wait
from ....ir.visitor import Mutator


class _Remover(Mutator):
    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        s = self.generic_visit(s)
        if s.attr_key != "async_wait_queue_scope":
            return s
        count, body = async_wait(s, "RemoveNoOp", cuda=False)
        return body if Analyzer().can_prove_less(count, 0) else s  # (unrolled, an epilogue's count reads 0 - 1)


def remove_negative_waits(func: PrimFunc) -> PrimFunc:
    body = _Remover().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


__all__ = ["remove_negative_waits"]
