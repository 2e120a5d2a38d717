"""A small simplifier for integer index expressions: affine forms are collected and folded.

It is enough to turn the extent of ``A[i * 16:i * 16 + 16]`` into ``16``; a full arithmetic
analyzer comes with schedules.
"""
from __future__ import annotations

from typing import Any

from ..expr import Add, Cast, IntImm, Mul, PrimExpr, Sub, Var, const, wrap_int
from ..node import Node, walk_fields


def _key(e: Any) -> Any:
    """A hashable key equal for structurally identical expressions over the same variables."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Node):
        return (type(e).__name__,) + tuple(_key(getattr(e, f)) for f, _, s in walk_fields(type(e)) if s)
    if isinstance(e, tuple):
        return tuple(_key(x) for x in e)
    return e


def _linear(e: PrimExpr, scale: int, terms: dict, atoms: dict) -> int:
    """Add ``scale * e`` into ``terms`` (key -> coefficient); return the constant part."""
    if isinstance(e, IntImm):
        return scale * e.value
    if isinstance(e, Add):
        return _linear(e.a, scale, terms, atoms) + _linear(e.b, scale, terms, atoms)
    if isinstance(e, Sub):
        return _linear(e.a, scale, terms, atoms) + _linear(e.b, -scale, terms, atoms)
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm):
            return _linear(e.a, scale * e.b.value, terms, atoms)
        if isinstance(e.a, IntImm):
            return _linear(e.b, scale * e.a.value, terms, atoms)
    key = _key(e)
    terms[key] = terms.get(key, 0) + scale
    atoms.setdefault(key, e)
    return 0


def simplify(e: PrimExpr) -> PrimExpr:
    """Fold ``e`` when it is an integer affine form whose variable terms cancel or are few."""
    if not isinstance(e, PrimExpr) or not e.dtype.is_integer or isinstance(e, Cast):
        return e
    terms: dict = {}
    atoms: dict = {}
    constant = _linear(e, 1, terms, atoms)
    # the sums are exact; wrapped into the type they are what the machine computes
    constant = wrap_int(constant, e.dtype)
    live = [(k, c) for k, c in terms.items() if wrap_int(c, e.dtype) != 0]
    if not live:
        return const(constant, e.dtype)
    if any(c < 0 for _, c in live):
        return e  # keep subtractions of variables as written
    result = None
    for key, coeff in live:  # in the order the terms first appear
        coeff = wrap_int(coeff, e.dtype)
        term = atoms[key] if coeff == 1 else Mul(atoms[key], const(coeff, e.dtype))
        result = term if result is None else Add(result, term)
    if constant > 0:
        return Add(result, const(constant, e.dtype))
    if constant < 0:
        return Sub(result, const(-constant, e.dtype))
    return result
