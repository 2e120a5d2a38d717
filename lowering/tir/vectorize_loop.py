"""VectorizeLoop: a ``T.vectorized`` loop of constant extent becomes vector statements.

The loop variable becomes ``T.Ramp(0, 1, n)``: a buffer index linear in it becomes a Ramp
(``C[i * 128 + j]`` -> ``C[i * 128:i * 128 + 8]``), a value that does not depend on it is
broadcast where it meets a vector (``T.Broadcast(A[i], 8)``), and arithmetic, casts, selects and
intrinsic calls work lane-wise; an ``if`` (or a ``T.if_then_else``) whose condition does not
depend on the loop variable keeps a scalar condition around vector values (C has no vector
condition; TVM keeps it scalar too). A loop whose body is not a sequence of stores,
or whose indices are not linear in the loop variable, stays a ``T.vectorized`` loop for the
code generator. With ``scalar_guards`` (the cuda pipeline, as TVM on every target) a loop
whose ``T.if_then_else`` condition varies by lane stays a loop too: C has no vector condition.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ...ir.arith import CANONICAL, Analyzer
from ...ir.analysis import substitute
from ...ir.expr import (Add, BinaryOp, Broadcast, BufferLoad, Call, Cast, IntImm, Not, PrimExpr,
                        Mul, Ramp, Select, StringImm, Sub, Var, const)
from ...ir.function import PrimFunc
from ...ir.stmt import VECTORIZED, BufferStore, For, IfThenElse, SeqStmt, Stmt
from ...ir.visitor import children
from .loop_ranges import LoopRangeMutator
from .tir_pass import define_tir_pass


class NotVectorizable(Exception):
    """The loop body has a form the vectorizer does not handle."""


class _LoopVectorizer:
    """Rewrites the body of one vectorized loop over ``var`` with ``lanes`` lanes."""

    def __init__(self, var: Var, lanes: int, analyzer: Analyzer, scalar_guards: bool = False) -> None:
        self.var, self.lanes, self.analyzer, self.scalar_guards = var, lanes, analyzer, scalar_guards
        # id(node) -> (node, answer): a subexpression shared by many statements (a Winograd
        # tile's loads and sums) is asked about at every level of each; each is worked out once
        self.seen: dict[int, tuple] = {}
        self.done: dict[int, tuple] = {}

    def uses(self, e: Any) -> bool:
        """Whether ``e`` reads the loop variable."""
        hit = self.seen.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        found = e is self.var or any(self.uses(c) for c in children(e))
        self.seen[id(e)] = (e, found)
        return found

    def widen(self, e: PrimExpr) -> PrimExpr:
        return e if e.dtype.lanes == self.lanes else Broadcast(e, self.lanes)

    def index(self, e: PrimExpr) -> PrimExpr:
        """A Ramp for an index linear in the loop variable (the index itself if it does not use it)."""
        if not self.uses(e):
            return e
        simplify = self.analyzer.simplify
        base = simplify(substitute(e, {self.var: const(0, e.dtype)}))
        stride = simplify(Sub(substitute(e, {self.var: const(1, e.dtype)}), base))
        if not isinstance(stride, IntImm):
            raise NotVectorizable(f"index {e} is not linear in {self.var.name}")
        rest = simplify(Sub(e, Add(base, Mul(self.var, stride))))
        if not (isinstance(rest, IntImm) and rest.value == 0):
            raise NotVectorizable(f"index {e} is not linear in {self.var.name}")
        return base if stride.value == 0 else Ramp(base, stride, self.lanes)

    def expr(self, e: PrimExpr) -> PrimExpr:
        hit = self.done.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = self._expr(e)
        self.done[id(e)] = (e, out)
        return out

    def _expr(self, e: PrimExpr) -> PrimExpr:
        if not self.uses(e):
            return e
        if e is self.var:
            return Ramp(const(0, e.dtype), const(1, e.dtype), self.lanes)
        if isinstance(e, BufferLoad):
            return BufferLoad(e.buffer, tuple(self.index(i) for i in e.indices))
        if isinstance(e, BinaryOp):
            return type(e)(self.widen(self.expr(e.a)), self.widen(self.expr(e.b)))
        if isinstance(e, Not):
            return Not(self.expr(e.a))
        if isinstance(e, Cast):
            return Cast(e.dtype.with_lanes(self.lanes), self.widen(self.expr(e.value)))
        if isinstance(e, Select):
            return Select(*(self.widen(self.expr(x)) for x in (e.condition, e.true_value, e.false_value)))
        if isinstance(e, Call) and all(isinstance(a, PrimExpr) for a in e.args):
            guarded = getattr(e.op, "name", None) == "tir.if_then_else"
            if self.scalar_guards and guarded and self.uses(e.args[0]):
                raise NotVectorizable("a guarded load whose condition varies by lane")
            args = tuple(a if isinstance(a, StringImm) or (guarded and k == 0 and not self.uses(a))
                         else self.widen(self.expr(a)) for k, a in enumerate(e.args))
            return dataclasses.replace(e, dtype=e.dtype.with_lanes(self.lanes), args=args)
        raise NotVectorizable(f"cannot vectorize {type(e).__name__}")

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(self.stmt(x) for x in s.seq))
        if isinstance(s, BufferStore):
            indices = tuple(self.index(i) for i in s.indices)
            if not any(i.dtype.lanes > 1 for i in indices):
                raise NotVectorizable("a store to the same element from every lane")
            return BufferStore(s.buffer, self.widen(self.expr(s.value)), indices)
        if isinstance(s, IfThenElse) and not self.uses(s.condition):
            # a guard the same for every lane (a tail row of a tile) stays one scalar branch
            orelse = None if s.else_case is None else self.stmt(s.else_case)
            return IfThenElse(s.condition, self.stmt(s.then_case), orelse)
        raise NotVectorizable(f"cannot vectorize a {type(s).__name__}")


class _Vectorizer(LoopRangeMutator):
    def __init__(self, scalar_guards: bool) -> None:
        super().__init__()
        self.scalar_guards = scalar_guards

    def visit_For(self, loop: For) -> Stmt:
        loop = super().visit_For(loop)
        if (loop.kind != VECTORIZED or not isinstance(loop.extent, IntImm) or not loop.has_trivial_step
                or not (isinstance(loop.min, IntImm) and loop.min.value == 0) or loop.extent.value < 2):
            return loop  # (a loop with a step: CanonicalizeLoop first)
        try:
            # indices as TVM's simplifier sees them: (f0 * 8 + f1) % 1000 is a ramp over f1
            analyzer = self.analyzer.with_mode(CANONICAL)
            return _LoopVectorizer(loop.loop_var, loop.extent.value, analyzer, self.scalar_guards).stmt(loop.body)
        except NotVectorizable:
            return loop  # left to the code generator as a vectorized loop


def vectorize_loop(func: PrimFunc, scalar_guards: bool = False) -> PrimFunc:
    """``func`` with its simple vectorized loops turned into vector statements (see the module
    docstring for ``scalar_guards``)."""
    return func.with_changes(body=_Vectorizer(scalar_guards).visit(func.body))


VectorizeLoop = define_tir_pass("VectorizeLoop", vectorize_loop)

__all__ = ["VectorizeLoop", "vectorize_loop"]
