"""An arithmetic analyzer for integer index expressions: a canonical form with known variable ranges.

An index expression is read as a sum of *split terms* plus a constant. A split term is
``index // lower % upper * scale`` over one atom (a variable, or an expression the analyzer
cannot take apart). In this form ``x // 4096 * 32 + x // 128 % 32`` merges into ``x // 128``,
and a ``% 128`` disappears when the variable's range already stays below 128. The terms of a
printed sum go by decreasing scale, as TVM's canonical simplifier orders them
(``k_0 * 49 + k_1 * 7 + k_2``).

A division or modulo of a sum by a constant is taken apart only when the rest's range is known to
stay in [0, c); otherwise the sum stays whole (``(f0 * 128 + f1) // 128``), as the bindings of
TVM's schedule primitives print (TVM's canonical_simplify would print ``f1 // 128 + f0``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..dtype import DataType
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr,
                   Sub, Var, const)
from .affine import _key as expr_key


@dataclass(frozen=True)
class SplitTerm:
    """``index // lower % upper * scale``; ``upper`` None means no modulo."""

    index: PrimExpr
    lower: int
    upper: Optional[int]
    scale: int

    def same_index(self, other: "SplitTerm") -> bool:
        return expr_key(self.index) == expr_key(other.index)


@dataclass(frozen=True)
class Sum:
    """A canonical integer expression: split terms (ordered by decreasing scale) plus ``base``."""

    terms: tuple
    base: int


Bound = Optional[tuple]  # (lo, hi), both inclusive, or None when unknown


class Analyzer:
    """Simplifies integer index expressions, knowing the ranges of some variables."""

    def __init__(self) -> None:
        self._ranges: dict[int, tuple[int, int]] = {}

    def bind(self, var: Var, min_value: int, extent: int) -> None:
        """``var`` takes the values ``min_value .. min_value + extent - 1``."""
        self._ranges[id(var)] = (min_value, min_value + extent - 1)

    # ------------------------------------------------------------ entry points
    def simplify(self, e: PrimExpr) -> PrimExpr:
        """The canonical form of an integer expression; other expressions come back unchanged."""
        if not isinstance(e, PrimExpr) or not e.dtype.is_integer or e.dtype.lanes != 1:
            return e
        return self.to_expr(self.canonical(e), e.dtype)

    def can_prove_less(self, e: PrimExpr, bound: int) -> bool:
        """Whether ``e < bound`` for every value of the bound variables."""
        b = self.bound(e)
        return b is not None and b[1] < bound

    def bound(self, e: PrimExpr) -> Bound:
        """Inclusive integer bounds of ``e`` by interval arithmetic, or None."""
        if isinstance(e, IntImm):
            return (e.value, e.value)
        if isinstance(e, Var):
            return self._ranges.get(id(e))
        if isinstance(e, (Add, Sub, Mul, Min, Max)):
            a, b = self.bound(e.a), self.bound(e.b)
            if a is None or b is None:
                return None
            if isinstance(e, Add):
                return (a[0] + b[0], a[1] + b[1])
            if isinstance(e, Sub):
                return (a[0] - b[1], a[1] - b[0])
            if isinstance(e, Mul):
                corners = [p * q for p in a for q in b]
                return (min(corners), max(corners))
            pick = min if isinstance(e, Min) else max
            return (pick(a[0], b[0]), pick(a[1], b[1]))
        if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
            a, d = self.bound(e.a), e.b.value
            if isinstance(e, FloorMod):
                return a if a is not None and a[0] >= 0 and a[1] < d else (0, d - 1)
            return None if a is None else (a[0] // d, a[1] // d)
        return None

    # ------------------------------------------------------------ canonical form
    def canonical(self, e: PrimExpr) -> Sum:
        if isinstance(e, IntImm):
            return Sum((), e.value)
        if isinstance(e, Add):
            return self.add(self.canonical(e.a), self.canonical(e.b), 1)
        if isinstance(e, Sub):
            return self.add(self.canonical(e.a), self.canonical(e.b), -1)
        if isinstance(e, Mul):
            a, b = self.canonical(e.a), self.canonical(e.b)
            if not b.terms:
                return self.scale(a, b.base)
            if not a.terms:
                return self.scale(b, a.base)
        if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
            a = self.canonical(e.a)
            if isinstance(e, FloorDiv) and _is_mod_atom(a, e.b.value):  # x % 128 // 16
                t = a.terms[0]
                return self.normalize(Sum((SplitTerm(t.index.a, e.b.value, t.index.b.value // e.b.value, 1),), 0))
            return self.floordiv(a, e.b.value, e.dtype) if isinstance(e, FloorDiv) else \
                self.floormod(a, e.b.value, e.dtype)
        return self.atom(e)

    def atom(self, e: PrimExpr) -> Sum:
        return self.normalize(Sum((SplitTerm(e, 1, None, 1),), 0))

    def add(self, a: Sum, b: Sum, sign: int) -> Sum:
        terms = a.terms + tuple(replace(t, scale=t.scale * sign) for t in b.terms)
        return self.normalize(Sum(terms, a.base + sign * b.base))

    def scale(self, a: Sum, factor: int) -> Sum:
        if factor == 0:
            return Sum((), 0)
        return self.normalize(Sum(tuple(replace(t, scale=t.scale * factor) for t in a.terms),
                                  a.base * factor))

    def floordiv(self, a: Sum, c: int, dtype: DataType) -> Sum:
        if c == 1:
            return a
        if all(t.scale % c == 0 for t in a.terms) and a.base % c == 0:
            return self.scale_down(a, c)
        if len(a.terms) == 1 and a.base == 0:
            t = a.terms[0]
            if t.scale % c == 0:
                return self.normalize(Sum((replace(t, scale=t.scale // c),), 0))
            if t.scale > 0 and c % t.scale == 0:
                k = c // t.scale
                if t.upper is None or t.upper % k == 0:
                    upper = None if t.upper is None else t.upper // k
                    return self.normalize(Sum((SplitTerm(t.index, t.lower * k, upper, 1),), 0))
        # Separate the multiples of c; the rest may stay within [0, c).
        divisible = tuple(t for t in a.terms if t.scale % c == 0)
        rest = Sum(tuple(t for t in a.terms if t.scale % c != 0), a.base % c)
        rb = self.sum_bound(rest)
        if rb is not None and rb[0] >= 0 and rb[1] < c:
            return self.scale_down(Sum(divisible, a.base - a.base % c), c)
        whole = self.sum_bound(a)
        if whole is not None and whole[0] >= 0 and whole[1] < c:
            return Sum((), 0)
        return self.atom_split(a, c, None, dtype)

    def floormod(self, a: Sum, c: int, dtype: DataType) -> Sum:
        if c == 1:
            return Sum((), 0)
        rest = Sum(tuple(t for t in a.terms if t.scale % c != 0), a.base % c)
        if not rest.terms:
            return Sum((), rest.base)
        rb = self.sum_bound(rest)
        if rb is not None and rb[0] >= 0 and rb[1] < c:
            return self.normalize(rest)
        if len(a.terms) == 1 and a.base == 0:
            t = a.terms[0]
            if t.scale > 0 and c % t.scale == 0:
                k = c // t.scale
                if t.upper is None or t.upper % k == 0:
                    return self.normalize(Sum((SplitTerm(t.index, t.lower, k, t.scale),), 0))
        # As TVM: multiples of c are dropped only when the rest is proven to stay in [0, c).
        return self.atom_split(a, 1, c, dtype)

    def scale_down(self, a: Sum, c: int) -> Sum:
        return self.normalize(Sum(tuple(replace(t, scale=t.scale // c) for t in a.terms), a.base // c))

    def atom_split(self, a: Sum, lower: int, upper: Optional[int], dtype: DataType) -> Sum:
        index = self.to_expr(a, dtype)
        return self.normalize(Sum((SplitTerm(index, lower, upper, 1),), 0))

    def normalize(self, s: Sum) -> Sum:
        """Drop modulos the ranges make useless, merge terms over one atom, order by scale."""
        terms = [t for t in (self.tidy(t) for t in s.terms) if t is not None]
        changed = True
        while changed:
            changed = False
            for i in range(len(terms)):
                for j in range(len(terms)):
                    if i == j or not terms[i].same_index(terms[j]):
                        continue
                    merged = _merge(terms[i], terms[j])
                    if merged is not False:
                        keep = [t for k, t in enumerate(terms) if k not in (i, j)]
                        if merged is not None:
                            tidy = self.tidy(merged)
                            if tidy is not None:
                                keep.insert(min(i, j), tidy)
                        terms = keep
                        changed = True
                        break
                if changed:
                    break
        terms.sort(key=lambda t: -t.scale)  # stable: equal scales keep their order
        return Sum(tuple(terms), s.base)

    def tidy(self, t: SplitTerm) -> Optional[SplitTerm]:
        """``t`` without a modulo its atom's range makes useless; None when ``t`` is always 0."""
        if t.scale == 0:
            return None
        b = self.bound(t.index)
        if b is not None and b[0] >= 0:
            if b[1] < t.lower:
                return None
            if t.upper is not None and b[1] // t.lower < t.upper:
                return replace(t, upper=None)
        return t

    # ------------------------------------------------------------ bounds
    def sum_bound(self, s: Sum) -> Bound:
        lo = hi = s.base
        for t in s.terms:
            tb = self.term_bound(t)
            if tb is None:
                return None
            a, b = tb[0] * t.scale, tb[1] * t.scale
            lo, hi = lo + min(a, b), hi + max(a, b)
        return (lo, hi)

    def term_bound(self, t: SplitTerm) -> Bound:
        b = self.bound(t.index)
        if b is None:
            return None if t.upper is None else (0, t.upper - 1)
        lo, hi = b[0] // t.lower, b[1] // t.lower
        if t.upper is not None and (lo < 0 or hi >= t.upper):
            return (0, t.upper - 1)
        return (lo, hi)

    # ------------------------------------------------------------ back to expressions
    def to_expr(self, s: Sum, dtype: DataType) -> PrimExpr:
        result: PrimExpr | None = None
        base_first = bool(s.terms) and s.terms[0].scale < 0 and s.base != 0
        if base_first:  # 3 - x * 3, as TVM prints a sum that starts negative
            result = const(s.base, dtype)
        for t in s.terms:
            e = t.index
            if t.upper is not None:  # TVM's form: x % (lower * upper) // lower
                e = FloorMod(e, const(t.lower * t.upper, dtype))
            if t.lower != 1:
                e = FloorDiv(e, const(t.lower, dtype))
            magnitude = abs(t.scale)
            if result is None:
                result = e if t.scale == 1 else Mul(e, const(t.scale, dtype))
                continue
            if magnitude != 1:
                e = Mul(e, const(magnitude, dtype))
            result = Add(result, e) if t.scale > 0 else Sub(result, e)
        if result is None:
            return const(s.base, dtype)
        if s.base > 0 and not base_first:
            return Add(result, const(s.base, dtype))
        if s.base < 0 and not base_first:
            return Sub(result, const(-s.base, dtype))
        return result

    def prove(self, cond: PrimExpr) -> Optional[bool]:
        """True or False when the comparison ``cond`` is decided by the ranges, else None."""
        if not isinstance(cond, (LT, LE, GT, GE, EQ, NE)):
            return None
        diff = self.canonical(Sub(cond.a, cond.b))
        b = self.sum_bound(diff)
        if b is None:
            return None
        lo, hi = b
        table = {LT: (hi < 0, lo >= 0), LE: (hi <= 0, lo > 0), GT: (lo > 0, hi <= 0),
                 GE: (lo >= 0, hi < 0), EQ: (lo == hi == 0, lo > 0 or hi < 0),
                 NE: (lo > 0 or hi < 0, lo == hi == 0)}
        yes, no = table[type(cond)]
        return True if yes else False if no else None


def _is_mod_atom(a: Sum, c: int) -> bool:
    """``a`` is one opaque ``x % m`` with ``c`` dividing ``m``: TVM's printed form of a split term."""
    if a.base or len(a.terms) != 1:
        return False
    t = a.terms[0]
    return (t.lower == 1 and t.upper is None and t.scale == 1 and isinstance(t.index, FloorMod)
            and isinstance(t.index.b, IntImm) and t.index.b.value % c == 0)


def _merge(a: SplitTerm, b: SplitTerm):
    """One term for ``a + b`` (same atom), None when they cancel, False when they do not merge."""
    if a.lower == b.lower and a.upper == b.upper:
        total = a.scale + b.scale
        return None if total == 0 else replace(a, scale=total)
    # x // (l * u) % U * (s * u)  +  x // l % u * s  ==  x // l % (U * u) * s
    if b.upper is not None and a.lower == b.lower * b.upper and a.scale == b.scale * b.upper:
        upper = None if a.upper is None else a.upper * b.upper
        return SplitTerm(b.index, b.lower, upper, b.scale)
    return False


def simplify_index(e: PrimExpr, ranges: dict | None = None) -> PrimExpr:
    """Canonical form of ``e``; ``ranges`` maps Vars to (min, extent)."""
    analyzer = Analyzer()
    for var, (lo, extent) in (ranges or {}).items():
        analyzer.bind(var, lo, extent)
    return analyzer.simplify(e)


__all__ = ["Analyzer", "SplitTerm", "Sum", "simplify_index"]
