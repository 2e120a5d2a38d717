"""The canonical form of integer index expressions: a sum of *split terms* plus a constant.

A split term is ``index // lower % upper * scale`` over one atom (a variable, or an expression
that cannot be taken apart); ``upper`` None means no modulo. This is the form of TVM's
``CanonicalSimplifier`` (its ``SplitExpr``/``SumExpr``, whose ``upper_factor`` is our
``lower * upper``). In it ``x // 4096 * 32 + x // 128 % 32`` merges into ``x // 128``.

The rules that build the form live in ``analyzer.py``; this module holds the form itself: the
terms, merging two terms over one atom, TVM's order of the terms and the way back to an
expression.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ..dtype import DataType
from ..expr import Add, FloorDiv, FloorMod, Mul, PrimExpr, Sub, Var, const, wrap_int
from ..node import Node, walk_fields


def expr_key(e: Any) -> Any:
    """A hashable key equal for structurally identical expressions over the same variables."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Node):
        return (type(e).__name__,) + tuple(expr_key(getattr(e, f)) for f, _, s in walk_fields(type(e)) if s)
    if isinstance(e, tuple):
        return tuple(expr_key(x) for x in e)
    return e


@dataclass(frozen=True)
class SplitTerm:
    """``index // lower % upper * scale``; ``upper`` None means no modulo."""

    index: PrimExpr
    lower: int
    upper: Optional[int]
    scale: int

    def same_index(self, other: "SplitTerm") -> bool:
        a, b = self.index, other.index
        if a is b:
            return True
        if type(a) is not type(b) or isinstance(a, Var):  # (cheap refusals before the keys)
            return False
        return expr_key(a) == expr_key(b)

    def modulus(self) -> Optional[int]:
        """TVM's ``upper_factor``: the term is ``index % modulus // lower``."""
        return None if self.upper is None else self.lower * self.upper

    def to_expr(self, scale: int) -> PrimExpr:
        """The term with ``scale`` in place of its own, in TVM's form ``x % (lower * upper) // lower``."""
        dtype = self.index.dtype
        e = self.index
        if self.upper is not None:
            e = FloorMod(e, const(self.lower * self.upper, dtype))
        if self.lower != 1:
            e = FloorDiv(e, const(self.lower, dtype))
        return e if scale == 1 else Mul(e, const(wrap_int(scale, dtype), dtype))


@dataclass(frozen=True)
class Sum:
    """A canonical integer expression: split terms (in TVM's order) plus ``base``."""

    terms: tuple
    base: int

    def single_term(self) -> Optional[SplitTerm]:
        """The one term of a sum without constant, else None."""
        return self.terms[0] if len(self.terms) == 1 and self.base == 0 else None

    def separate(self, c: int) -> tuple["Sum", "Sum"]:
        """The part that ``c`` divides (terms and constant) and the rest, as TVM's
        SeparateDivisibleParts: the constant goes whole to one side."""
        whole = tuple(t for t in self.terms if t.scale % c == 0)
        rest = tuple(t for t in self.terms if t.scale % c != 0)
        base_whole = self.base if self.base % c == 0 else 0
        return Sum(whole, base_whole), Sum(rest, self.base - base_whole)


def merge_terms(a: SplitTerm, b: SplitTerm):
    """One term for ``a + b`` (same atom), None when they cancel, False when they do not merge."""
    if a.lower == b.lower and a.upper == b.upper:
        total = a.scale + b.scale
        return None if total == 0 else replace(a, scale=total)
    # x // (l * u) % U * (s * u)  +  x // l % u * s  ==  x // l % (U * u) * s
    if b.upper is not None and a.lower == b.lower * b.upper and a.scale == b.scale * b.upper:
        upper = None if a.upper is None else a.upper * b.upper
        return SplitTerm(b.index, b.lower, upper, b.scale)
    return False


def tvm_order(terms: list) -> list:
    """TVM's stable order of the terms: larger scale first, then larger lower factor, then larger
    modulus (no modulo counts as the largest)."""
    inf = float("inf")
    return sorted(terms, key=lambda t: (-t.scale, -t.lower, -(inf if t.upper is None else t.modulus())))


def sum_to_expr(s: Sum, dtype: DataType) -> PrimExpr:
    """The expression TVM's ``SumExpr::Normalize`` prints: the positive terms, a positive constant,
    then the negative terms and a negative constant subtracted (``a + 3 - b``, ``3 - x * 3``);
    a lone negated term is ``x * -c``. Constants wrap in ``dtype``, as the machine computes them."""
    s = Sum(s.terms, wrap_int(s.base, dtype))
    if not s.terms:
        return const(s.base, dtype)
    if s.base == 0 and len(s.terms) == 1 and s.terms[0].scale < -1:
        return s.terms[0].to_expr(s.terms[0].scale)
    result: PrimExpr | None = None
    for t in s.terms:
        if t.scale > 0:
            e = t.to_expr(t.scale)
            result = e if result is None else Add(result, e)
    if s.base > 0:
        result = const(s.base, dtype) if result is None else Add(result, const(s.base, dtype))
    for t in s.terms:
        if t.scale < 0:
            result = Sub(const(0, dtype) if result is None else result, t.to_expr(-t.scale))
    if s.base < 0:
        result = Sub(result, const(-s.base, dtype))
    return result


__all__ = ["SplitTerm", "Sum", "expr_key", "merge_terms", "tvm_order", "sum_to_expr"]
