"""The iteration-map check: are a block's bindings an affine, one-to-one map of the loop variables?

Each binding is brought to the analyzer's canonical form: a sum of ``v // lower % upper * scale``
pieces over loop variables. The map is affine when every piece is over a loop variable, and
one-to-one when no two pieces (in one binding or across bindings) reuse the same digits of the
same loop variable and each binding's pieces do not overlap in value.
"""
from __future__ import annotations

from typing import Any

from ..expr import PrimExpr, Var
from .analyzer import Analyzer
from .split_sum import expr_key


def _mixed_radix(pieces: list) -> bool:
    """Pieces sorted by scale form a mixed-radix number: no two overlap in value."""
    reach = 1
    for _, _, upper, scale in sorted(pieces, key=lambda p: p[3]):
        if scale < reach:
            return False
        reach = scale * upper
    return True


def _loop_piece(t, loops: dict) -> tuple | None:
    if not isinstance(t.index, Var) or id(t.index) not in loops or t.scale <= 0:
        return None
    _, lo, extent = loops[id(t.index)]
    if lo != 0:
        return None
    upper = t.upper if t.upper is not None else -(-extent // t.lower)
    return (t.index, t.lower, upper, t.scale)


def affine_pieces(bindings: list[PrimExpr], loops: dict[int, tuple[Var, int, int]]):
    """Per binding, its pieces ``(key, lower, upper, scale)``; None when a binding is not affine.

    ``loops`` maps ``id(var)`` to (var, min, extent) for the loops around the block. A piece's key
    is a loop variable, or a sum of loop variables that a fuse-then-split left whole
    (``(f0 * 100 + f1) // 128``), which counts as one fused iterator.
    """
    analyzer = Analyzer()
    for var, lo, extent in loops.values():
        analyzer.bind(var, lo, extent)
    result = []
    for value in bindings:
        pieces = []
        for t in analyzer.canonical(value).terms:
            piece = _loop_piece(t, loops)
            if piece is None:
                piece = _fused_piece(analyzer, t, loops)
            if piece is None:
                return None
            pieces.append(piece)
        result.append(pieces)
    return result


def _fused_piece(analyzer: Analyzer, t, loops: dict) -> tuple | None:
    """A piece over a sum of loop variables that is itself a one-to-one mixed-radix number."""
    inner = analyzer.canonical(t.index)
    parts = [_loop_piece(u, loops) for u in inner.terms]
    if t.scale <= 0 or inner.base or not parts or None in parts or not _mixed_radix(parts):
        return None
    bound = analyzer.sum_bound(inner)
    extent = bound[1] + 1
    upper = t.upper if t.upper is not None else -(-extent // t.lower)
    key = FusedKey(expr_key(t.index), tuple(p[0] for p in parts), tuple(p[3] for p in parts))
    return (key, t.lower, upper, t.scale)


class FusedKey(tuple):
    """The identity of a fused iterator: its expression's key and the loop variables in it
    (``scales``: each variable's place value in the sum, by id)."""

    def __new__(cls, key: tuple, variables: tuple, scales: tuple = ()) -> "FusedKey":
        made = super().__new__(cls, (key, tuple(id(v) for v in variables)))
        made.scales = dict(zip((id(v) for v in variables), scales))
        return made


def is_bijective_affine(bindings: list[PrimExpr], loops: dict[int, tuple[Var, int, int]]) -> bool:
    """Whether ``bindings`` are affine in the loop variables and use no loop digit twice."""
    pieces = affine_pieces(bindings, loops)
    if pieces is None:
        return False
    used: dict = {}
    owner: dict[int, Any] = {}  # loop variable -> the iterator (itself, or a fused sum) using it
    # a variable of a fused sum used alone too (``(f0 * 2 + f1) // 2`` beside ``f1``): its digits
    # are the sum's digits at its place value
    in_sum = {v: (key, scale) for binding in pieces for key, _, _, _ in binding if isinstance(key, FusedKey)
              for v, scale in key.scales.items()}
    shared = set()
    for binding in pieces:
        for key, lower, upper, _ in binding:
            if not isinstance(key, FusedKey) and id(key) in in_sum:
                if lower != 1 or upper != loops[id(key)][2]:
                    return False  # (only the variable whole, at its place)
                key, place = in_sum[id(key)]
                lower *= place
                shared.add(key)
            ident = key if isinstance(key, FusedKey) else id(key)
            for var_id in (key[1] if isinstance(key, FusedKey) else (id(key),)):
                if owner.setdefault(var_id, ident) != ident:
                    return False  # a loop used both alone and inside a fused sum
            span = (lower, lower * upper)  # the digits [lower, lower * upper) of the iterator
            if any(span[0] < b and a < span[1] for a, b in used.get(ident, [])):
                return False
            used.setdefault(ident, []).append(span)
        if not _mixed_radix(binding):
            return False
    return all(_on_digits(key, loops, span) for key in shared for span in used[key])


def _on_digits(key: FusedKey, loops: dict, span: tuple) -> bool:
    """Whether the span of a fused sum's digits starts and ends on whole digits of the variable
    it falls in (``(f0 * 100 + f1) // 128`` does not: 128 is no multiple of f0's place 100)."""
    for edge in span:
        places = [(p, p * loops[v][2]) for v, p in key.scales.items()]
        if not any(lo <= edge <= hi and edge % lo == 0 for lo, hi in places):
            return False
    return True


__all__ = ["affine_pieces", "is_bijective_affine"]
