"""The arithmetic analyzer: integer index expressions brought to the canonical form of split terms
(``split_sum.py``), knowing the ranges of some variables.

A ``% 128`` disappears when the variable's range already stays below 128, and terms over one
variable merge (``x // 4096 * 32 + x // 128 % 32`` is ``x // 128``). Division and modulo of a sum by
a constant ``c`` follow one of two TVM behaviours, the analyzer's ``mode``:

- ``SCHEDULE``: the sum is taken apart only when the rest (what ``c`` does not divide) is known to
  stay in [0, c); otherwise it stays whole, ``(f0 * 128 + f1) // 128``, as the bindings that TVM's
  schedule primitives print;
- ``CANONICAL``: the multiples of ``c`` always come out, ``(a * 4 + b) // 4`` is ``b // 4 + a``, as
  TVM's ``CanonicalSimplifier`` gives the indices that legalization builds.

In these two modes the terms print in TVM's order (larger scale first: ``k_0 * 49 + k_1 * 7 + k_2``).
Two more modes keep the terms in the order they are written, as TVM's rewrite simplifier leaves a
sum it does not reorder:

- ``DIMENSION``: the ``CANONICAL`` rules (but ``(n // 4 + 1) // 2`` stays), and a division by a
  symbolic size that divides exactly (``n * 6 // n`` is 6), as TVM folds the sizes in Relax struct
  info (``m + 2 - 2 - 1 + 1`` is ``m``, ``(m - 2) // 2 + 1`` is ``m // 2``);
- ``AFFINE``: only like terms combine and constants fold; anything but ``+ - *`` by a constant stays
  as written, and a sum with a subtracted term comes back unchanged (``A[i * 16:i * 16 + 16]`` has
  extent ``16``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from math import gcd
from typing import Optional

from ..dtype import DataType
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Call, Cast, FloorDiv, FloorMod, IntImm, Max, Min,
                    Mul, PrimExpr, Sub, Var, const, wrap_int)
from ..visitor import walk
from .conditions import decide, is_condition, negate, simplify_condition
from .split_sum import SplitTerm, Sum, expr_key, merge_terms, sum_to_expr, tvm_order

SCHEDULE = "schedule"
CANONICAL = "canonical"
DIMENSION = "dimension"
AFFINE = "affine"
_MODES = (SCHEDULE, CANONICAL, DIMENSION, AFFINE)

Bound = Optional[tuple]  # (lo, hi), both inclusive, or None when unknown


class Analyzer:
    """Simplifies integer index expressions, knowing the ranges of some variables; ``mode`` is
    one of ``SCHEDULE``, ``CANONICAL``, ``DIMENSION``, ``AFFINE`` (see the module's docstring)."""

    def __init__(self, mode: str = SCHEDULE, iter_map_order: bool = False) -> None:
        if mode not in _MODES:
            raise ValueError(f"unknown analyzer mode {mode!r}")
        self.mode = mode
        # the order of TVM's IterMapSimplify (split's and fuse's bindings): larger scale first,
        # terms of one scale as written (``fused % 112 + w_2``), where TVM's order puts mods last
        self.iter_map_order = iter_map_order
        self._ranges: dict[int, tuple[int, int]] = {}
        self._known: dict = {}  # expr_key of a condition known to hold (or not) -> True (False)
        self._narrowed: dict[int, tuple[int, int]] = {}  # a variable's range within a constraint

    def bind(self, var: Var, min_value: int, extent: int) -> None:
        """``var`` takes the values ``min_value .. min_value + extent - 1``."""
        self._ranges[id(var)] = (min_value, min_value + extent - 1)

    def with_mode(self, mode: str) -> "Analyzer":
        """An analyzer in ``mode`` that knows the same ranges (and sees later bindings)."""
        other = Analyzer(mode)
        other._ranges = self._ranges
        other._known = self._known
        other._narrowed = self._narrowed
        return other

    @contextmanager
    def constraint(self, cond: PrimExpr, derive: bool = False):
        """Within: ``cond`` (simplified) is known to hold, as in TVM's ConstraintContext. Its rewrite
        simplifier keeps each conjunct without side effects as a literal constraint: the conjunct
        simplifies to True, its negation to False (``tx == 0`` under ``if tx == 0``); its bound
        analysis narrows the range of a variable compared with a constant (under ``if tx < 32``,
        ``tx // 32`` is 0 and ``tx < 64`` True). ``derive``: also what a comparison of a quotient
        by a constant says of the dividend, as TVM's statement mutators add to the condition of an
        ``if``'s first branch (``w // 4 == 0`` is ``0 <= w`` and ``w < 4``: ``w % 4`` is ``w`` there)."""
        parts = [part for part in _conjuncts(cond) if _side_effect_free(part)]
        if derive:
            parts += [self.simplify(fact) for part in parts for fact in _quotient_facts(part)]
        added = []
        for part in parts:
            for literal, value in ((part, True), (negate(self, part), False)):
                key = expr_key(literal)
                if key not in self._known:
                    self._known[key] = value
                    added.append(key)
        ends: dict[int, list] = {}  # id(var) -> [var, lo or None, hi or None]
        for part in parts:
            _narrow(ends, part, self)
        narrowed = {}
        for var_id, (var, lo, hi) in ends.items():
            if lo is not None and hi is not None and lo <= hi:  # (a branch that never runs keeps its ranges)
                narrowed[var_id] = self._narrowed.get(var_id)
                self._narrowed[var_id] = (lo, hi)
        try:
            yield
        finally:
            for key in added:
                del self._known[key]
            for var_id, before in narrowed.items():
                if before is None:
                    del self._narrowed[var_id]
                else:
                    self._narrowed[var_id] = before

    def known(self, cond: PrimExpr) -> PrimExpr:
        """``cond`` as True or False when an entered constraint says so, else ``cond``."""
        if not self._known or _is_bool_constant(cond):
            return cond
        value = self._known.get(expr_key(cond))
        return cond if value is None else const(value, "bool")

    # ------------------------------------------------------------ entry points
    def simplify(self, e: PrimExpr) -> PrimExpr:
        """The canonical form of an integer expression; a condition (comparison, ``and``, ``or``,
        ``not``, selection) simplified as TVM does (``conditions.py``); other expressions come back
        unchanged."""
        if isinstance(e, (IntImm, Var)) or not isinstance(e, PrimExpr):
            # (the common case, first: constants and variables are their own form; a boolean
            # variable may be a known condition)
            return self.known(e) if isinstance(e, Var) and e.dtype.is_bool else e
        if e.dtype.lanes == 1 and is_condition(e):
            return self.known(simplify_condition(self, e))
        if not e.dtype.is_integer:
            return e
        if self.mode == AFFINE and isinstance(e, Cast) or self.mode != AFFINE and e.dtype.lanes != 1:
            return e  # the affine fold also folds vector sums of like terms
        s = self.canonical(e)
        if self.mode == AFFINE and any(t.scale < 0 for t in s.terms):
            return e  # subtractions of variables stay as written
        return self.to_expr(s, e.dtype)

    def can_prove_less(self, e: PrimExpr, bound: int) -> bool:
        """Whether ``e < bound`` for every value of the bound variables."""
        b = self.bound(e)
        return b is not None and b[1] < bound

    def bound(self, e: PrimExpr, constrained: bool = True) -> Bound:
        """Inclusive integer bounds of ``e`` by interval arithmetic, or None; ``constrained``: with
        the ranges the entered constraints narrowed (else the ranges bound alone)."""
        if isinstance(e, IntImm):
            return (e.value, e.value)
        if isinstance(e, Var):
            narrowed = self._narrowed.get(id(e)) if constrained and self._narrowed else None
            return narrowed or self._ranges.get(id(e))
        if isinstance(e, (Add, Sub, Mul, Min, Max)):
            a, b = self.bound(e.a, constrained), self.bound(e.b, constrained)
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
            a, d = self.bound(e.a, constrained), e.b.value
            if isinstance(e, FloorMod):
                return a if a is not None and a[0] >= 0 and a[1] < d else (0, d - 1)
            return None if a is None else (a[0] // d, a[1] // d)
        return None

    # ------------------------------------------------------------ canonical form
    def canonical(self, e: PrimExpr) -> Sum:
        """``e`` as a sum of split terms."""
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
            return self.atom(e) if self.mode == AFFINE else self.product(a, b, e.dtype)
        if self.mode == AFFINE:
            return self.atom(e)
        if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
            a, c = self.canonical(e.a), e.b.value
            if not a.terms:
                return Sum((), a.base // c if isinstance(e, FloorDiv) else a.base % c)
            if isinstance(e, FloorDiv) and _is_mod_atom(a, c):  # x % 128 // 16
                t = a.terms[0]
                return self.normalize(Sum((SplitTerm(t.index.a, c, t.index.b.value // c, 1),), 0))
            return self.floordiv(a, c, e.dtype) if isinstance(e, FloorDiv) else self.floormod(a, c, e.dtype)
        if isinstance(e, FloorDiv) and self.mode == DIMENSION:
            quotient = self.exact_quotient(e.a, e.b)
            if quotient is not None:
                return quotient
        if e.dtype.lanes == 1 and is_condition(e):  # (a selection: simplified, its branch when decided)
            chosen = self.known(simplify_condition(self, e))
            return self.atom(chosen) if is_condition(chosen) else self.canonical(chosen)
        if isinstance(e, (FloorDiv, FloorMod, Min, Max)):  # its operands are simplified
            a, b = self.simplify(e.a), self.simplify(e.b)
            if isinstance(e, (Min, Max)) and isinstance(a, IntImm) and isinstance(b, IntImm):
                return Sum((), (min if isinstance(e, Min) else max)(a.value, b.value))
            return self.atom(type(e)(a, b))
        return self.atom(e)

    def exact_quotient(self, a: PrimExpr, b: PrimExpr) -> Optional[Sum]:
        """``a // b`` for a symbolic ``b`` that divides ``a`` exactly, as TVM folds sizes: ``n * 6 // n``
        is 6, ``n * m * 4 // n`` is ``m * 4``; else None."""
        sa, sb = self.canonical(a), self.canonical(b)
        if isinstance(b, Var) and sa.base == 0 and sa.terms \
                and all(t.lower == 1 and t.upper is None for t in sa.terms):
            quotients = [(t.scale, _factor_out(t.index, b)) for t in sa.terms]
            if all(q is not None for _, q in quotients) \
                    and not all(isinstance(q, IntImm) for _, q in quotients):
                total = Sum((), 0)
                for scale, q in quotients:
                    total = self.add(total, self.scale(self.canonical(q), scale), 1)
                return total
        if not sb.terms or len(sa.terms) != len(sb.terms):
            return None
        first, by_key = sa.terms[0], {_term_key(t): t.scale for t in sb.terms}
        divisor = by_key.get(_term_key(first))
        if divisor is None or first.scale % divisor:
            return None
        ratio = first.scale // divisor
        if sa.base != ratio * sb.base \
                or any(t.scale != ratio * by_key.get(_term_key(t), 0) for t in sa.terms):
            return None
        return Sum((), ratio)

    def atom(self, e: PrimExpr) -> Sum:
        return self.normalize(Sum((SplitTerm(e, 1, None, 1),), 0))

    def add(self, a: Sum, b: Sum, sign: int) -> Sum:
        # (the sums canonical() returns are normalized: adding a constant keeps them so)
        if not b.terms:
            return Sum(a.terms, a.base + sign * b.base)
        if not a.terms and sign == 1:
            return Sum(b.terms, a.base + b.base)
        terms = a.terms + tuple(replace(t, scale=t.scale * sign) for t in b.terms)
        return self.normalize(Sum(terms, a.base + sign * b.base))

    def scale(self, a: Sum, factor: int) -> Sum:
        if factor == 0:
            return Sum((), 0)
        if factor == 1:
            return a
        return self.normalize(Sum(tuple(replace(t, scale=t.scale * factor) for t in a.terms),
                                  a.base * factor))

    def product(self, a: Sum, b: Sum, dtype: DataType) -> Sum:
        """A product of two non-constant sums is one atom; the scales of single terms stay
        outside, as TVM prints them: ``v * (n * 2)`` is ``v * n * 2``."""
        ta, tb = self.as_term(a, dtype), self.as_term(b, dtype)
        atom = Mul(ta.to_expr(1), tb.to_expr(1))
        return self.normalize(Sum((SplitTerm(atom, 1, None, ta.scale * tb.scale),), 0))

    def as_term(self, a: Sum, dtype: DataType) -> SplitTerm:
        """``a`` as one split term (TVM's ToSplitExpr): its own term, or the whole sum as an atom."""
        t = a.single_term()
        return t if t is not None else SplitTerm(self.to_expr(a, dtype), 1, None, 1)

    def floordiv(self, a: Sum, c: int, dtype: DataType) -> Sum:
        """``a // c`` for a constant ``c > 0``."""
        if c == 1:
            return a
        whole, rest = a.separate(c)
        if not rest.terms and not rest.base or self.within(rest, c):
            return self.scale_down(whole, c)  # the rest adds nothing to the quotient
        parts = None if self.mode == SCHEDULE else self.lanes_in_period(a, c)
        if parts is not None:
            return self.floordiv(parts[0], c, dtype)
        if self.mode == SCHEDULE and (whole.terms or whole.base):
            if self.within(a, c):
                return Sum((), 0)
            return self.atom_split(a, c, None, dtype)  # kept whole: (f0 * 128 + f1) // 128
        return self.add(self.scale_down(whole, c), self.divide_rest(rest, c, dtype), 1)

    def divide_rest(self, rest: Sum, c: int, dtype: DataType) -> Sum:
        """``rest // c`` where ``c`` divides none of the terms of ``rest``."""
        t = rest.single_term()
        if t is None and self.mode == CANONICAL and len(rest.terms) == 1 and _plain_quotient(rest.terms[0]):
            # (x // l + b) // c is (x + b * l) // (l * c), as TVM's canonical simplifier merges them
            q = rest.terms[0]
            index = self.add(self.canonical(q.index), Sum((), rest.base * q.lower), 1)
            return self.atom_split(index, q.lower * c, None, dtype)
        if t is not None and t.scale > 0 and c % t.scale == 0:  # (x * s) // c is x // (c / s)
            k = c // t.scale
            if t.upper is None or t.upper % k == 0:
                upper = None if t.upper is None else t.upper // k
                return self.normalize(Sum((SplitTerm(t.index, t.lower * k, upper, 1),), 0))
        return self.atom_split(rest, c, None, dtype)

    def floormod(self, a: Sum, c: int, dtype: DataType) -> Sum:
        """``a % c`` for a constant ``c > 0``: the multiples of ``c`` drop out."""
        if c == 1:
            return Sum((), 0)
        whole, rest = a.separate(c)
        rest = Sum(rest.terms, rest.base % c)
        if not rest.terms:
            return rest
        if self.within(rest, c):
            return self.normalize(rest)
        parts = None if self.mode == SCHEDULE else self.lanes_in_period(a, c)
        if parts is not None:
            return self.add(self.floormod(parts[0], c, dtype), parts[1], 1)
        if self.mode == SCHEDULE and (whole.terms or whole.base or rest.base):
            # TVM's schedule bindings: multiples of c are dropped only when the rest is in [0, c)
            return self.atom_split(a, 1, c, dtype)
        t = rest.single_term()
        if t is not None and t.scale > 0 and c % t.scale == 0:  # (x * s) % c is x % (c / s) * s
            k = c // t.scale
            if t.upper is None or t.upper % k == 0:
                return self.normalize(Sum((SplitTerm(t.index, t.lower, k, t.scale),), 0))
        return self.atom_split(rest, 1, c, dtype)

    def lanes_in_period(self, a: Sum, c: int) -> Optional[tuple[Sum, Sum]]:
        """``a`` as ``big + small``, where a ``g`` that divides ``c`` divides every term of ``big``
        and ``small`` stays in [0, g), or None. Then ``small`` never carries into the next multiple
        of ``c``: ``(big + small) // c`` is ``big // c`` and ``(big + small) % c`` is
        ``big % c + small``. So ``(f0 * 8 + f1) % 1000`` with ``f1`` in [0, 8) is
        ``f0 % 125 * 8 + f1``: a ramp over the vector lanes ``f1``. (Not in ``SCHEDULE`` mode: TVM's
        schedule primitives print such a binding whole, ``(f0 * 8 + f1) % 1000``.)"""
        for g in sorted({gcd(t.scale, c) for t in a.terms}, reverse=True):
            if g == 1 or g == c:  # g == c is the plain separation of the multiples of c
                continue
            big, small = a.separate(g)
            if big.terms and (small.terms or small.base) and self.within(small, g):
                return big, small
        return None

    def within(self, a: Sum, c: int) -> bool:
        """Whether ``a`` is known to stay in [0, c)."""
        b = self.sum_bound(a)
        return b is not None and b[0] >= 0 and b[1] < c

    def scale_down(self, a: Sum, c: int) -> Sum:
        return self.normalize(Sum(tuple(replace(t, scale=t.scale // c) for t in a.terms), a.base // c))

    def atom_split(self, a: Sum, lower: int, upper: Optional[int], dtype: DataType) -> Sum:
        index = self.to_expr(a, dtype)
        return self.normalize(Sum((SplitTerm(index, lower, upper, 1),), 0))

    def normalize(self, s: Sum) -> Sum:
        """Drop modulos the ranges make useless, merge terms over one atom, and put the terms in
        TVM's order (``SCHEDULE``, ``CANONICAL``) or leave them as written."""
        terms = [t for t in (self.tidy(t) for t in s.terms) if t is not None]
        changed = len(terms) > 1  # (one term has nothing to merge with)
        while changed:
            changed = False
            for i in range(len(terms)):
                for j in range(len(terms)):
                    if i == j or not terms[i].same_index(terms[j]):
                        continue
                    merged = merge_terms(terms[i], terms[j])
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
        if self.iter_map_order:
            terms = sorted(terms, key=lambda t: -t.scale)
        elif self.mode in (SCHEDULE, CANONICAL):
            terms = tvm_order(terms)
        return Sum(tuple(terms), s.base)

    def tidy(self, t: SplitTerm) -> Optional[SplitTerm]:
        """``t`` without a modulo its atom's range makes useless; None when ``t`` is always 0."""
        if t.scale == 0:
            return None
        b = self.bound(t.index)
        if b is not None and b[0] >= 0:
            # (an atom a constraint pins to 0 stays, as TVM keeps ``tx`` under ``if tx == 0``; its
            # quotient by more than its range is 0 all the same)
            if b[1] < t.lower and (t.lower > 1 or self.bound(t.index, constrained=False) == (0, 0)):
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
        """The expression of a canonical sum (see ``split_sum.sum_to_expr``)."""
        return sum_to_expr(s, dtype)

    def prove(self, cond: PrimExpr) -> Optional[bool]:
        """True or False when the comparison ``cond`` is decided by the ranges or by what divides
        the difference (``x * 4 == 15``), else None."""
        if not isinstance(cond, (LT, LE, GT, GE, EQ, NE)):
            return None
        return decide(self, type(cond), cond.a, cond.b)


def _is_mod_atom(a: Sum, c: int) -> bool:
    """``a`` is one opaque ``x % m`` with ``c`` dividing ``m``: TVM's printed form of a split term."""
    if a.base or len(a.terms) != 1:
        return False
    t = a.terms[0]
    return (t.lower == 1 and t.upper is None and t.scale == 1 and isinstance(t.index, FloorMod)
            and isinstance(t.index.b, IntImm) and t.index.b.value % c == 0)


def _factor_out(atom: PrimExpr, v: Var) -> Optional[PrimExpr]:
    """``atom / v`` when ``v`` is a factor of the product ``atom``."""
    if atom is v:
        return IntImm(v.dtype, 1)
    if isinstance(atom, Mul):
        left = _factor_out(atom.a, v)
        if left is not None:
            return atom.b if _is_one(left) else Mul(left, atom.b)
        right = _factor_out(atom.b, v)
        if right is not None:
            return atom.a if _is_one(right) else Mul(atom.a, right)
    return None


def _narrow(ends: dict, part: PrimExpr, analyzer: "Analyzer") -> None:
    """Narrow the range in ``ends`` of a variable ``part`` compares with a constant (``x < c``,
    ``c <= x``, ``x == c``), from the range it has (or none)."""
    if not isinstance(part, (LT, LE, EQ)):
        return
    a, b = part.a, part.b
    if isinstance(a, Var) and isinstance(b, IntImm) and not b.dtype.is_bool:
        var, c, var_left = a, b.value, True
    elif isinstance(b, Var) and isinstance(a, IntImm) and not a.dtype.is_bool:
        var, c, var_left = b, a.value, False
    else:
        return
    entry = ends.setdefault(id(var), [var, *(analyzer.bound(var) or (None, None))])
    if isinstance(part, EQ) or not var_left:  # c <= x, c < x, x == c: a lower end
        low = c + 1 if isinstance(part, LT) else c
        entry[1] = low if entry[1] is None else max(entry[1], low)
    if isinstance(part, EQ) or var_left:  # x <= c, x < c, x == c: an upper end
        high = c - 1 if isinstance(part, LT) else c
        entry[2] = high if entry[2] is None else min(entry[2], high)


def _quotient_facts(part: PrimExpr) -> list:
    """What ``x // d op k`` (``d`` a positive constant, ``k`` a constant) says of ``x``: for ``==``,
    ``k*d <= x`` and ``x < (k+1)*d``; for ``<``, ``x < k*d``; for ``<=``, ``x < (k+1)*d`` (TVM's
    derived constraint facts)."""
    if not isinstance(part, (LT, LE, EQ)):
        return []
    for quotient, k, quotient_left in ((part.a, part.b, True), (part.b, part.a, False)):
        if isinstance(quotient, FloorDiv) and isinstance(quotient.b, IntImm) and quotient.b.value > 0 \
                and isinstance(k, IntImm) and not k.dtype.is_bool:
            x, d, dtype = quotient.a, quotient.b.value, quotient.dtype
            low, high = IntImm(dtype, k.value * d), IntImm(dtype, (k.value + 1) * d)
            if isinstance(part, EQ):
                return [LE(low, x), LT(x, high)]
            if quotient_left:  # x // d < k, x // d <= k
                return [LT(x, low if isinstance(part, LT) else high)]
            return [LE(high, x) if isinstance(part, LT) else LE(low, x)]  # k < x // d, k <= x // d
    return []


def _conjuncts(cond: PrimExpr) -> list:
    return _conjuncts(cond.a) + _conjuncts(cond.b) if isinstance(cond, And) else [cond]


def _side_effect_free(e: PrimExpr) -> bool:
    """No load and no call (TVM keeps only pure constraints; a load reads state)."""
    return not any(isinstance(n, (BufferLoad, Call)) for n in walk(e))


def _is_bool_constant(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.dtype.is_bool


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _term_key(t: SplitTerm) -> tuple:
    return (expr_key(t.index), t.lower, t.upper)


def _plain_quotient(t: SplitTerm) -> bool:
    return t.scale == 1 and t.upper is None and t.lower > 1


def simplify_index(e: PrimExpr, ranges: dict | None = None) -> PrimExpr:
    """Canonical form of ``e``; ``ranges`` maps Vars to (min, extent)."""
    analyzer = Analyzer()
    for var, (lo, extent) in (ranges or {}).items():
        analyzer.bind(var, lo, extent)
    return analyzer.simplify(e)


def simplify(e: PrimExpr) -> PrimExpr:
    """Fold ``e`` when it is an integer affine form whose variable terms cancel or are few (the
    ``AFFINE`` mode)."""
    value = _constant(e)
    if value is not None:  # (most calls: region bounds such as 0 + 16 - 1; no canonical form needed)
        return e if isinstance(e, IntImm) else IntImm(e.dtype, wrap_int(value, e.dtype))
    return Analyzer(AFFINE).simplify(e)


_CONSTANT_OPS = {Add: int.__add__, Sub: int.__sub__, Mul: int.__mul__}


def _constant(e: PrimExpr) -> int | None:
    """The value of a scalar integer sum, difference or product of constants, else None."""
    if type(e) is IntImm:
        return e.value if e.dtype.lanes == 1 and e.dtype.is_integer and not e.dtype.is_bool else None
    op = _CONSTANT_OPS.get(type(e))
    if op is None:
        return None
    a = _constant(e.a)
    b = None if a is None else _constant(e.b)
    return None if b is None or e.a.dtype != e.b.dtype else op(a, b)


def canonical(e: PrimExpr) -> PrimExpr:
    """``e`` as TVM's CanonicalSimplifier writes it (the indices legalization builds); other
    expressions come back unchanged."""
    return Analyzer(CANONICAL).simplify(e)


def divisible(e: PrimExpr, d: int) -> bool:
    """Whether each term of ``e`` (and its constant) is a multiple of ``d``."""
    s = Analyzer(CANONICAL).canonical(e)
    return s.base % d == 0 and all(t.scale % d == 0 for t in s.terms)


def canonical_ge_zero(e: PrimExpr) -> PrimExpr:
    """``e >= 0`` as TVM simplifies it: the constant moves to the left, ``c <= rest``."""
    analyzer = Analyzer(CANONICAL)
    s = analyzer.canonical(e)
    return LE(const(-s.base, e.dtype), analyzer.to_expr(Sum(s.terms, 0), e.dtype))


__all__ = ["Analyzer", "SCHEDULE", "CANONICAL", "DIMENSION", "AFFINE", "simplify_index", "simplify",
           "canonical", "divisible", "canonical_ge_zero"]
