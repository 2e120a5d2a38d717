"""Conditions simplified as TVM 0.27's ``Analyzer.simplify`` does (its rewrite simplifier's rules for
comparisons, ``and``/``or``/``not`` and selections, and its canonical simplifier's ``a < b``).

- A comparison of two index integers (int32, int64; a narrower or unsigned one wraps, and stays as
  written) is decided when the ranges bound their difference (``i < 16`` with ``i`` in [0, 16) is
  True, ``x < x + 1`` is True) or when the difference is never a multiple of what divides its terms
  (``x * 4 == 15`` is False);
- otherwise it takes TVM's normal form: ``>``/``>=`` written ``<``/``<=`` with the operands swapped, a
  common factor divided out (``x * 4 < 16`` is ``x < 4``), a quotient by a constant multiplied out
  (``x // 4 < 2`` is ``x < 8``), the constants gathered on one side (``x + 2 == 5`` is ``x == 3``), a
  common term cancelled (``x + y < x + 3`` is ``y < 3``), ``<=`` as the negation of ``<``;
- ``and``/``or``/``not`` fold a constant operand, ``c and not c``, and two bounds of one variable that
  no value (or every value) meets; a negation moves into its comparison;
- ``T.if_then_else``/``T.Select`` of a decided condition is the branch that is taken.

Like TVM's, ``p and p`` stays as written. Only the constant folds happen in the ``AFFINE`` mode.
"""
from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Optional

from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, Call, FloatImm, FloorDiv, IntImm, Max, Min, Mul,
                    Not, Or, PrimExpr, Select, Sub, const)
from .operators import _truncdiv as _trunc, index_typed
from .split_sum import Sum

if TYPE_CHECKING:
    from .analyzer import Analyzer

_COMPARE = {EQ: lambda a, b: a == b, NE: lambda a, b: a != b, LT: lambda a, b: a < b,
            LE: lambda a, b: a <= b, GT: lambda a, b: a > b, GE: lambda a, b: a >= b}
_SWAPPED = {GT: LT, GE: LE}
_AFFINE = "affine"  # (analyzer.AFFINE: the analyzer imports this module)


def is_condition(e: PrimExpr) -> bool:
    """Whether ``simplify_condition`` has rules for ``e``."""
    return isinstance(e, (EQ, NE, LT, LE, GT, GE, And, Or, Not, Select)) or _is_if_then_else(e)


def simplify_condition(an: "Analyzer", e: PrimExpr) -> PrimExpr:
    if isinstance(e, (EQ, NE, LT, LE, GT, GE)):
        return compare(an, type(e), an.simplify(e.a), an.simplify(e.b))
    if isinstance(e, (And, Or)):
        return _logical(an, type(e), an.simplify(e.a), an.simplify(e.b))
    if isinstance(e, Not):
        return negate(an, an.simplify(e.a))
    if isinstance(e, Select):
        cond = an.simplify(e.condition)
        a, b = an.simplify(e.true_value), an.simplify(e.false_value)
        if _is_bool(cond):
            return a if cond.value else b
        if _same(a, b):
            return a  # (TVM folds select(c, y, y); its if_then_else is not folded)
        return Select(cond, a, b)
    cond, *args = (an.simplify(x) for x in e.args)  # T.if_then_else
    if _is_bool(cond):
        return args[0] if cond.value else args[1]
    return Call(e.dtype, e.op, (cond, *args), e.attrs, e.type_annotation)


def compare(an: "Analyzer", op: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``op(a, b)`` (a comparison) of simplified operands, decided or in TVM's normal form."""
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return _bool(_COMPARE[op](a.value, b.value))
    # (decided and rearranged in index types only: in uint8, ``x + 100 < 50`` wraps and is not ``x < -50``)
    decided = decide(an, op, a, b) if index_typed(a) and index_typed(b) else None
    if decided is not None:
        return _bool(decided)
    if an.mode == _AFFINE:
        return op(a, b)
    if op in _SWAPPED:  # a > b is b < a
        op, a, b = _SWAPPED[op], b, a
    if not index_typed(a) or not index_typed(b):
        return op(a, b)
    if op is LT:
        return _less(an, a, b)
    if op is LE:  # a <= b is not (b < a); at the bounds' edge, a == b (TVM: i <= 0 is i == 0)
        result = negate(an, _less(an, b, a))
        if isinstance(result, LE):
            lo_hi = _difference_bounds(an, result.a, result.b)
            if lo_hi is not None and lo_hi[0] == 0:
                return _equal(an, result.a, result.b)
        return result
    if op is NE:  # (TVM: when the ranges say a >= b, a != b is b < a)
        lo_hi = _difference_bounds(an, a, b)
        if lo_hi is not None and lo_hi[0] >= 0:
            return _less(an, b, a)
        if lo_hi is not None and lo_hi[1] <= 0:
            return _less(an, a, b)
        return negate(an, _equal(an, a, b))
    return _equal(an, a, b)


def negate(an: "Analyzer", e: PrimExpr) -> PrimExpr:
    """``not e`` for a simplified ``e``, moved into a comparison as TVM's rules do."""
    if _is_bool(e):
        return _bool(not e.value)
    if an.mode == _AFFINE:
        return Not(e)
    if isinstance(e, Not):
        return e.a
    if isinstance(e, (LT, LE)):  # not (a < b) is b <= a
        return (LE if isinstance(e, LT) else LT)(e.b, e.a)
    if isinstance(e, (EQ, NE)):
        return (NE if isinstance(e, EQ) else EQ)(e.a, e.b)
    if isinstance(e, (And, Or)):
        return _logical(an, Or if isinstance(e, And) else And, negate(an, e.a), negate(an, e.b))
    return Not(e)


def decide(an: "Analyzer", op: type, a: PrimExpr, b: PrimExpr) -> Optional[bool]:
    """The value of ``op(a, b)`` (a comparison) when the bounds of ``a - b`` or what divides it
    decide it, else None."""
    if op in _SWAPPED:
        op, a, b = _SWAPPED[op], b, a
    diff = an.canonical(Sub(a, b))
    bounds = an.sum_bound(diff)
    if bounds is not None:
        lo, hi = bounds
        table = {LT: (hi < 0, lo >= 0), LE: (hi <= 0, lo > 0), EQ: (lo == hi == 0, lo > 0 or hi < 0),
                 NE: (lo > 0 or hi < 0, lo == hi == 0)}
        yes, no = table[op]
        if yes or no:
            return yes
    if op in (EQ, NE) and diff.terms and diff.base % _factor(diff):
        return op is NE  # a - b is a multiple of the factor plus a remainder: never 0
    return None


def _difference_bounds(an: "Analyzer", a: PrimExpr, b: PrimExpr) -> Optional[tuple]:
    return an.sum_bound(an.canonical(Sub(a, b)))


def _factor(s: Sum) -> int:
    """What divides every term of ``s`` (TVM's modular set coefficient, as far as the scales say)."""
    g = 0
    for t in s.terms:
        g = gcd(g, t.scale)
    return g


def _less(an: "Analyzer", a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a < b`` of simplified integer operands, as TVM's canonical and rewrite rules write it."""
    decided = decide(an, LT, a, b)
    if decided is not None:
        return _bool(decided)
    divided = _divide_difference(an, a, b)
    if divided is not None:
        return _less(an, divided, const(0, a.dtype))
    c = _int
    if isinstance(a, Add) and isinstance(b, Add):  # x + y < x + z is y < z
        for p, q in ((a.a, b.a), (a.a, b.b), (a.b, b.a), (a.b, b.b)):
            if _same(p, q):
                return _less(an, a.b if p is a.a else a.a, b.b if q is b.a else b.a)
    if isinstance(a, Sub) and isinstance(b, Sub):
        if _same(a.b, b.b):  # y - x < z - x
            return _less(an, a.a, b.a)
        if _same(a.a, b.a):  # x - y < x - z is z < y
            return _less(an, b.b, a.b)
    if isinstance(b, (Add, Sub)) and _same(a, b.a):  # x < x + z is 0 < z, x < x - z is z < 0
        zero = const(0, a.dtype)
        return _less(an, zero, b.b) if isinstance(b, Add) else _less(an, b.b, zero)
    if isinstance(a, Mul) and isinstance(b, Mul) and c(a.b) is not None and c(a.b) == c(b.b) != 0:
        return _less(an, a.a, b.a) if c(a.b) > 0 else _less(an, b.a, a.a)
    if isinstance(a, Mul) and c(a.b) and c(b) is not None:  # x * c2 < c1
        c1, c2 = c(b), c(a.b)
        if c2 > 0:
            return _less(an, a.a, _k(a, _trunc(c1 - 1, c2) + 1 if c1 > 0 else _trunc(c1, c2)))
        return _less(an, _k(a, _trunc(c1 - 1, c2) - 1 if c1 > 0 else _trunc(c1, c2)), a.a)
    if isinstance(b, Mul) and c(b.b) and c(a) is not None:  # c1 < x * c2
        c1, c2 = c(a), c(b.b)
        if c2 > 0:
            return _less(an, _k(b, _trunc(c1 + 1, c2) - 1 if c1 < 0 else _trunc(c1, c2)), b.a)
        return _less(an, b.a, _k(b, _trunc(c1 + 1, c2) + 1 if c1 < 0 else _trunc(c1, c2)))
    if isinstance(a, FloorDiv) and c(a.b) and c(a.b) > 0 and c(b) is not None:  # x // c1 < c2
        return _less(an, an.simplify(a.a), _k(a, c(a.b) * c(b)))
    if isinstance(b, FloorDiv) and c(b.b) and c(b.b) > 0 and c(a) is not None:  # c1 < x // c2
        return _less(an, _k(b, (c(a) + 1) * c(b.b) - 1), an.simplify(b.a))
    if isinstance(a, (Min, Max)):  # min(x, y) < z is x < z or y < z
        return _logical(an, Or if isinstance(a, Min) else And, _less(an, a.a, b), _less(an, a.b, b))
    if isinstance(b, (Min, Max)):
        return _logical(an, And if isinstance(b, Min) else Or, _less(an, a, b.a), _less(an, a, b.b))
    moved = _move_constants(an, a, b)
    if moved is not None:
        return moved
    g = gcd(_modular_gcd(an, a), _modular_gcd(an, b))
    if g > 1:  # both sides multiples of g
        return _less(an, an.simplify(FloorDiv(a, _k(a, g))), an.simplify(FloorDiv(b, _k(b, g))))
    return LT(a, b)


def _divide_difference(an: "Analyzer", a: PrimExpr, b: PrimExpr) -> Optional[PrimExpr]:
    """TVM's canonical ``a < b``: with ``a - b`` as ``g * rest + extra`` where ``extra`` stays in
    [0, g), ``a < b`` is ``rest < 0`` (``x * 8 + y < 16``, ``y`` in [0, 8), is ``x - 2 < 0``); None
    when no scale but 1 or -1 is there, or no such ``g``."""
    diff = an.canonical(Sub(a, b))
    if all(abs(t.scale) <= 1 for t in diff.terms):
        return None
    g = diff.base
    for t in diff.terms:
        if abs(t.scale) > 1:
            g = gcd(g, t.scale)
    if g <= 1:
        return None
    whole, extra = diff.separate(g)
    if (extra.terms or extra.base) and not an.within(extra, g):
        return None
    return an.to_expr(an.scale_down(whole, g), a.dtype)


def _move_constants(an: "Analyzer", a: PrimExpr, b: PrimExpr) -> Optional[PrimExpr]:
    """TVM's rules that gather the constants of ``a < b`` on one side, or None."""
    c = _int
    if c(a) is not None and isinstance(b, (Add, Sub)) and c(b.b) is not None:  # c1 < x +- c2
        return _less(an, _k(a, c(a) - c(b.b) if isinstance(b, Add) else c(a) + c(b.b)), b.a)
    if c(a) is not None and isinstance(b, Sub) and c(b.a) is not None:  # c1 < c2 - x is x < c2 - c1
        return _less(an, b.b, _k(a, c(b.a) - c(a)))
    if c(b) is not None and isinstance(a, (Add, Sub)) and c(a.b) is not None:  # x +- c1 < c2
        return _less(an, a.a, _k(b, c(b) - c(a.b) if isinstance(a, Add) else c(b) + c(a.b)))
    if c(b) is not None and isinstance(a, Sub) and c(a.a) is not None:  # c1 - x < c2 is c1 - c2 < x
        return _less(an, _k(b, c(a.a) - c(b)), a.b)
    if isinstance(b, Sub) and c(b.a) is not None:  # x < c1 - y is x + y < c1
        return _less(an, an.simplify(Add(a, b.b)), b.a)
    if isinstance(a, Sub) and c(a.a) is not None:  # c1 - y < x is c1 < x + y
        return _less(an, a.a, an.simplify(Add(b, a.b)))
    (lhs, lo), (rhs, ro) = _offset(a), _offset(b)
    if lo == ro == 0:
        return None
    if ro == lo:
        return LT(lhs, rhs)
    if ro - lo == 1:  # lhs + k < rhs + k + 1 is lhs <= rhs
        return negate(an, _less(an, rhs, lhs))
    if ro < lo and ro != 0:
        return LT(an.simplify(Add(lhs, _k(a, lo - ro))), rhs)
    if ro > lo and lo != 0:
        return LT(lhs, an.simplify(Add(rhs, _k(b, ro - lo))))
    return None


def _offset(e: PrimExpr) -> tuple:
    """``e`` as ``(x, k)`` with ``e == x + k`` for a constant ``k`` written in it (TVM's
    ExtractConstantOffset; its ``c - x`` case, which drops the sign of ``x``, is left out)."""
    if isinstance(e, Add) and _int(e.b) is not None:
        return e.a, _int(e.b)
    if isinstance(e, Sub) and _int(e.b) is not None:
        return e.a, -_int(e.b)
    return e, 0


def _modular_gcd(an: "Analyzer", e: PrimExpr) -> int:
    """What divides every value of ``e``, as far as its terms' scales say (0 for the constant 0)."""
    s = an.canonical(e)
    return gcd(s.base, _factor(s))


def _equal(an: "Analyzer", a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a == b`` with the constants gathered on the right, as TVM's rules write it."""
    c = _int
    if c(a) is not None and c(b) is None:
        a, b = b, a
    if c(b) is not None:
        if isinstance(a, Sub) and c(a.b) is not None:  # x - c1 == c2
            return _equal(an, a.a, _k(b, c(b) + c(a.b)))
        if isinstance(a, Sub) and c(a.a) is not None:  # c1 - x == c2
            return _equal(an, a.b, _k(b, c(a.a) - c(b)))
        if isinstance(a, Add) and c(a.b) is not None:  # x + c1 == c2
            return _equal(an, a.a, _k(b, c(b) - c(a.b)))
        if isinstance(a, Mul) and c(b) == 0:  # x * y == 0 is x == 0 or y == 0
            return _logical(an, Or, _equal(an, a.a, b), _equal(an, a.b, b))
    decided = decide(an, EQ, a, b)
    return _bool(decided) if decided is not None else EQ(a, b)


def _logical(an: "Analyzer", op: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a and b`` / ``a or b`` of simplified operands."""
    absorbing = op is Or  # (True absorbs an or, False an and)
    for p, q in ((a, b), (b, a)):
        if _is_bool(p):
            return p if bool(p.value) == absorbing else q
    if an.mode != _AFFINE:
        for p, q in ((a, b), (b, a)):
            if isinstance(q, Not) and _same(p, q.a) or _opposite(an, p, q):
                return _bool(absorbing)  # c and not c, c or not c
        meets = _meet(a, b, op is And)
        if meets is not None:
            return _bool(meets)
    return op(a, b)


def _opposite(an: "Analyzer", p: PrimExpr, q: PrimExpr) -> bool:
    """Whether ``q`` is written as the negation of the comparison ``p`` (``x <= y`` and ``y < x``)."""
    n = negate(an, p) if isinstance(p, (LT, LE, EQ, NE)) else None
    return n is not None and type(n) is type(q) and _same(n.a, q.a) and _same(n.b, q.b)


def _meet(a: PrimExpr, b: PrimExpr, both: bool) -> Optional[bool]:
    """For two bounds of one expression by constants: False when no value meets both (``both``),
    True when every value meets one of them (not ``both``); else None."""
    ra, rb = _interval(a), _interval(b)
    if ra is None or rb is None or not _same(ra[0], rb[0]):
        return None
    (_, lo_a, hi_a), (_, lo_b, hi_b) = ra, rb
    if both:
        lo = max((v for v in (lo_a, lo_b) if v is not None), default=None)
        hi = min((v for v in (hi_a, hi_b) if v is not None), default=None)
        return False if lo is not None and hi is not None and lo > hi else None
    # a bound from above and one from below cover every value when they meet or touch
    hi, lo = (hi_a, lo_b) if lo_a is None else (hi_b, lo_a)
    return True if hi is not None and lo is not None and lo <= hi + 1 else None


def _interval(e: PrimExpr) -> Optional[tuple]:
    """``e`` as ``(x, lo, hi)`` when it bounds ``x`` by a constant (``x < 4`` is ``(x, None, 3)``)."""
    if not isinstance(e, (LT, LE)):
        return None
    strict = 1 if isinstance(e, LT) else 0
    if _int(e.b) is not None and _int(e.a) is None:
        return e.a, None, _int(e.b) - strict
    if _int(e.a) is not None and _int(e.b) is None:
        return e.b, _int(e.a) + strict, None
    return None


def _same(p: PrimExpr, q: PrimExpr) -> bool:
    from ..structural import structural_equal

    return p is q or structural_equal(p, q)


def _is_if_then_else(e: PrimExpr) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == "tir.if_then_else"


def _is_bool(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.dtype.is_bool


def _bool(value: bool) -> PrimExpr:
    return const(bool(value), "bool")


def _int(e: PrimExpr) -> Optional[int]:
    return e.value if isinstance(e, IntImm) and not e.dtype.is_bool else None


def _k(like: PrimExpr, value: int) -> PrimExpr:
    return IntImm(like.dtype, value)


