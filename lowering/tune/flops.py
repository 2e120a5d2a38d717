"""How many arithmetic operations a TensorIR function does (TVM's ``estimate_tir_flops``).

The tuner divides it by a measured time to report GFLOPS. As TVM counts: every binary arithmetic
operation of a stored value (``+ - * / % // min max``, of any dtype), times the extents of the
loops around it; loads (and so their index arithmetic) count nothing; a select or an if/else
counts its costlier side.
"""
from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.function import PrimFunc
from ...ir.module import IRModule

_ARITHMETIC = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _expr_ops(e: object) -> int:
    if isinstance(e, E.BufferLoad) or not isinstance(e, E.PrimExpr):
        return 0
    if isinstance(e, E.Select):
        return _expr_ops(e.condition) + max(_expr_ops(e.true_value), _expr_ops(e.false_value))
    if isinstance(e, E.BinaryOp):
        return _expr_ops(e.a) + _expr_ops(e.b) + isinstance(e, _ARITHMETIC)
    if isinstance(e, E.Cast):
        return _expr_ops(e.value)
    if isinstance(e, E.Not):
        return _expr_ops(e.a)
    if isinstance(e, E.Call):
        return sum(_expr_ops(a) for a in e.args)
    return 0


def _stmt_ops(s: object) -> int:
    if isinstance(s, S.BufferStore):
        return _expr_ops(s.value)
    if isinstance(s, S.SeqStmt):
        return sum(_stmt_ops(x) for x in s.seq)
    if isinstance(s, S.For):
        extent = getattr(s.extent, "value", None)
        return _stmt_ops(s.body) * (extent if isinstance(extent, int) else 1)
    if isinstance(s, S.BlockRealize):
        return _stmt_ops(s.block)
    if isinstance(s, S.Block):
        return (_stmt_ops(s.init) if s.init is not None else 0) + _stmt_ops(s.body)
    if isinstance(s, S.IfThenElse):
        other = _stmt_ops(s.else_case) if s.else_case is not None else 0
        return _expr_ops(s.condition) + max(_stmt_ops(s.then_case), other)
    if isinstance(s, S.Evaluate):
        return 0
    body = getattr(s, "body", None)  # let, attr, assert, allocations: what runs is the body
    return _stmt_ops(body) if isinstance(body, S.Stmt) else 0


def estimate_tir_flops(mod: "IRModule | PrimFunc") -> float:
    """The operation count of a PrimFunc, or of all the PrimFuncs of a module."""
    funcs = [mod] if isinstance(mod, PrimFunc) else [mod[n] for n in mod if isinstance(mod[n], PrimFunc)]
    return float(sum(_stmt_ops(f.body) for f in funcs))
