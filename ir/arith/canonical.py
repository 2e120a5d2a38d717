"""The canonical form TVM's arithmetic simplifier gives integer index expressions, for the
indices that legalization builds (reshape's flattened index, slices, concatenation offsets).

An index is a sum of *split* terms ``(index % upper) // lower * scale`` plus a constant, the
form of TVM's ``CanonicalSimplifier``: ``(x // 4) // 3`` becomes ``x // 12``, ``(x // 4) % 3``
becomes ``x % 12 // 4``, ``(a * 4 + b) // 4`` becomes ``b // 4 + a``. Terms print in TVM's order
(larger scale first, then larger divisor), positive terms before the constant, subtracted terms
after it. Only what legalization meets is covered; anything else is kept as an opaque term.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..expr import LE, Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, const
from .affine import _key

_INF = None  # an upper factor of "no modulo"


@dataclass(frozen=True)
class _Split:
    index: PrimExpr
    lower: int = 1
    upper: int | None = _INF
    scale: int = 1

    def same_term(self, other: "_Split") -> bool:
        return (self.lower, self.upper) == (other.lower, other.upper) and \
            _key(self.index) == _key(other.index)

    def to_expr(self, scale: int) -> PrimExpr:
        dt = self.index.dtype
        e = self.index
        if self.upper is not _INF:
            e = FloorMod(e, const(self.upper, dt))
        if self.lower != 1:
            e = FloorDiv(e, const(self.lower, dt))
        return e if scale == 1 else Mul(e, const(scale, dt))


@dataclass(frozen=True)
class _Sum:
    terms: tuple  # of _Split
    base: int
    dtype: Any

    def add(self, other: "_Sum", sign: int = 1) -> "_Sum":
        terms = list(self.terms)
        for t in other.terms:
            for i, u in enumerate(terms):
                if u.same_term(t):
                    terms[i] = replace(u, scale=u.scale + sign * t.scale)
                    break
            else:
                terms.append(replace(t, scale=sign * t.scale))
        return _Sum(tuple(t for t in terms if t.scale != 0), self.base + sign * other.base, self.dtype)

    def scaled(self, c: int) -> "_Sum":
        if c == 0:
            return _Sum((), 0, self.dtype)
        return _Sum(tuple(replace(t, scale=t.scale * c) for t in self.terms), self.base * c, self.dtype)

    def as_split(self) -> _Split:
        """The sum as one term (TVM's ToSplitExpr)."""
        if self.base == 0 and len(self.terms) == 1:
            return self.terms[0]
        return _Split(normalize(self))

    def divisible_parts(self, c: int) -> tuple["_Sum", "_Sum"]:
        """The terms (and the constant) that ``c`` divides, and the others."""
        whole = tuple(t for t in self.terms if t.scale % c == 0)
        rest = tuple(t for t in self.terms if t.scale % c != 0)
        base_whole = self.base if self.base % c == 0 else 0
        return (_Sum(whole, base_whole, self.dtype),
                _Sum(rest, self.base - base_whole, self.dtype))


def _sum_of_term(t: _Split) -> _Sum:
    return _Sum((t,), 0, t.index.dtype)


def _const_of(s: _Sum) -> int | None:
    return s.base if not s.terms else None


def _floordiv(s: _Sum, c: int) -> _Sum:
    whole, rest = s.divisible_parts(c)
    whole = _Sum(tuple(replace(t, scale=t.scale // c) for t in whole.terms), whole.base // c, s.dtype)
    if not rest.terms and rest.base == 0:
        return whole
    if len(rest.terms) == 1 and rest.base and _plain_quotient(rest.terms[0]):
        # (x // l + b) // c is (x + b * l) // (l * c)
        t = rest.terms[0]
        index = normalize(_to_sum(t.index).add(_Sum((), rest.base * t.lower, s.dtype)))
        return whole.add(_sum_of_term(_Split(index, t.lower * c)))
    t = rest.as_split()
    if t.scale > 0 and c % t.scale == 0:  # (x * s) // c is x // (c / s)
        f = c // t.scale
        if t.upper is not _INF and t.upper <= t.lower * f:
            return whole  # (x % u) // c with u <= c is 0
        if t.upper is _INF or t.upper % (t.lower * f) == 0:
            return whole.add(_sum_of_term(replace(t, lower=t.lower * f, scale=1)))
    return whole.add(_sum_of_term(_Split(normalize(rest), c)))


def _plain_quotient(t: _Split) -> bool:
    return t.scale == 1 and t.upper is _INF and t.lower > 1


def _floormod(s: _Sum, c: int) -> _Sum:
    _, rest = s.divisible_parts(c)
    rest = _Sum(rest.terms, rest.base % c, s.dtype)  # the constant modulo c
    if not rest.terms:
        return rest
    t = rest.as_split()
    if t.scale > 0 and c % t.scale == 0:  # (x * s) % c is (x % (c / s)) * s
        f = c // t.scale
        if t.upper is not _INF and t.upper <= t.lower * f:
            return _sum_of_term(t)  # already below c
        if t.upper is _INF or t.upper % (t.lower * f) == 0:
            upper = t.lower * f
            index = _to_sum(t.index)  # its constant, too, modulo the new upper factor
            index = normalize(_Sum(index.terms, index.base % upper, index.dtype))
            return _sum_of_term(replace(t, index=index, upper=upper))
    return _sum_of_term(_Split(normalize(rest), 1, c))


def _to_sum(e: PrimExpr) -> _Sum:
    dt = e.dtype
    if isinstance(e, IntImm):
        return _Sum((), e.value, dt)
    if isinstance(e, (Add, Sub)):
        return _to_sum(e.a).add(_to_sum(e.b), 1 if isinstance(e, Add) else -1)
    if isinstance(e, Mul):
        a, b = _to_sum(e.a), _to_sum(e.b)
        ca, cb = _const_of(a), _const_of(b)
        if cb is not None:
            return a.scaled(cb)
        if ca is not None:
            return b.scaled(ca)
        ta, tb = a.as_split(), b.as_split()
        # a product of two scaled terms keeps the scales outside: v * (n * 2) is v * n * 2
        return _sum_of_term(_Split(Mul(replace(ta, scale=1).to_expr(1), replace(tb, scale=1).to_expr(1)),
                                   scale=ta.scale * tb.scale))
    if isinstance(e, (FloorDiv, FloorMod)):
        a, b = _to_sum(e.a), _to_sum(e.b)
        c = _const_of(b)
        if c is not None and c > 0:
            if _const_of(a) is not None:
                v = _const_of(a)
                return _Sum((), v // c if isinstance(e, FloorDiv) else v % c, dt)
            if c == 1:
                return a if isinstance(e, FloorDiv) else _Sum((), 0, dt)
            return _floordiv(a, c) if isinstance(e, FloorDiv) else _floormod(a, c)
        return _sum_of_term(_Split(type(e)(normalize(a), normalize(b))))
    return _sum_of_term(_Split(e))


def _order(terms: tuple) -> list:
    """TVM's stable order: larger scale, then larger lower factor, then larger upper factor."""
    inf = float("inf")
    return sorted(terms, key=lambda t: (-t.scale, -t.lower, -(inf if t.upper is _INF else t.upper)))


def normalize(s: _Sum) -> PrimExpr:
    dt = s.dtype
    if not s.terms:
        return const(s.base, dt)
    if s.base == 0 and len(s.terms) == 1 and s.terms[0].scale < -1:
        return s.terms[0].to_expr(s.terms[0].scale)  # a lone negated term: x * -c
    res: PrimExpr | None = None
    terms = _order(s.terms)
    for t in terms:
        if t.scale > 0:
            x = t.to_expr(t.scale)
            res = x if res is None else Add(res, x)
    if s.base > 0:
        res = const(s.base, dt) if res is None else Add(res, const(s.base, dt))
    for t in terms:
        if t.scale < 0:
            res = Sub(const(0, dt) if res is None else res, t.to_expr(-t.scale))
    if s.base < 0:
        res = Sub(const(0, dt) if res is None else res, const(-s.base, dt))
    return const(0, dt) if res is None else res


def canonical(e: Any) -> Any:
    """``e`` in TVM's canonical index form (non-integer expressions are returned unchanged)."""
    if not isinstance(e, PrimExpr) or not e.dtype.is_integer:
        return e
    return normalize(_to_sum(e))


def divisible(e: PrimExpr, d: int) -> bool:
    """Whether each term of ``e`` (and its constant) is a multiple of ``d``."""
    s = _to_sum(e)
    return s.base % d == 0 and all(t.scale % d == 0 for t in s.terms)


def canonical_ge_zero(e: PrimExpr) -> PrimExpr:
    """``e >= 0`` as TVM simplifies it: the constant moves to the left, ``c <= rest``."""
    s = _to_sum(e)
    rest = _Sum(s.terms, 0, s.dtype)
    return LE(const(-s.base, s.dtype), normalize(rest))


__all__ = ["canonical", "canonical_ge_zero", "divisible"]
