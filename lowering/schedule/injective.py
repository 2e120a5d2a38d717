"""Whether an index map is one-to-one on a buffer: transform_layout refuses one that sends two
elements to the same place (they would overwrite each other in the new layout).

The results of the map fall into groups that share no index (``(i // 16, j // 16, i % 16,
j % 16)``: one group of ``i``, one of ``j``); the map is one-to-one exactly when no index is
dropped and each group is one-to-one on its own indices. A group is checked by evaluating it, with
numpy, at every point of its indices (up to ``ENUMERATION_LIMIT`` points), or, when larger, by
the iteration-map analysis: affine results that use each digit of each index once (``i * 4096 + j``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.expr import Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var
from ...ir.arith import FusedKey, affine_pieces, is_bijective_affine
from ...ir.visitor import collect
from .errors import ScheduleError

ENUMERATION_LIMIT = 1 << 22
_NUMPY = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide, FloorMod: np.mod,
          Min: np.minimum, Max: np.maximum}


class Unchecked(Exception):
    """The map has a form this check cannot decide (too many points, or an unknown operation)."""


def _variables(expr: PrimExpr, candidates: list) -> list:
    found = set(collect(expr, Var))
    return [v for v in candidates if v in found]


def _evaluate(expr: PrimExpr, grid: dict) -> Any:
    """``expr`` at every point of ``grid`` (Var -> an open-grid numpy array of its values)."""
    if isinstance(expr, Var):
        return grid[expr]
    if isinstance(expr, IntImm):
        return np.int64(expr.value)
    op = _NUMPY.get(type(expr))
    if op is None:
        raise Unchecked(f"it holds {type(expr).__name__}")
    a, b = _evaluate(expr.a, grid), _evaluate(expr.b, grid)
    if isinstance(expr, (FloorDiv, FloorMod)) and np.any(b == 0):
        raise ScheduleError(f"transform_layout: the index map divides by zero in {expr.script()}")
    return op(a, b)


def _digits_prove_one_to_one(results: list, group: list, sizes: dict) -> bool:
    """Whether the results are affine pieces of their indices (``ir/arith/iter_map.py``) that use every
    digit of every index exactly once: ``i * 4096 + j``, ``(i // 64, i % 64)``."""
    loops = {id(v): (v, 0, sizes[v]) for v in group}
    if not is_bijective_affine(results, loops):
        return False  # a digit used twice, or not affine
    spans: dict = {}
    for binding in affine_pieces(results, loops):
        for key, lower, upper, _ in binding:
            if isinstance(key, FusedKey):
                return False  # a fused sum's own extent is not known here: enumerate or vouch
            spans.setdefault(id(key), []).append((lower, lower * upper))
    for var in group:
        covered = 1  # the digits [1, covered) of var are used
        for low, high in sorted(spans.get(id(var), [])):
            if low != covered:
                return False  # a digit no result uses: elements differing only there collide
            covered = high
        if covered < sizes[var]:
            return False
    return True


def _first_collision(results: list, group: list, extents: dict, new_extents: list) -> tuple | None:
    """Two points of ``group`` (tuples of index values) that the results send to one place."""
    grid = dict(zip(group, np.ogrid[tuple(slice(0, extents[v]) for v in group)]))
    shape = tuple(extents[v] for v in group)
    columns = [np.broadcast_to(_evaluate(r, grid), shape).ravel() for r in results]
    if any(c.min() < 0 or c.max() >= extent for c, extent in zip(columns, new_extents)):
        raise Unchecked("its values leave the bounds found for the new shape")
    places, points = math.prod(new_extents), math.prod(shape)
    if places < 1 << 62:
        codes = np.zeros(points, dtype=np.int64)  # each point's place in the new layout, row-major
        for column, extent in zip(columns, new_extents):
            codes = codes * extent + column
        if places <= 4 * points:  # counting is linear; sorting only when the places are sparse
            counts = np.bincount(codes, minlength=places)
            duplicated = np.flatnonzero(counts > 1)
            if not len(duplicated):
                return None
            code = duplicated[0]
        else:
            ordered = np.sort(codes)
            equal = np.flatnonzero(ordered[1:] == ordered[:-1])
            if not len(equal):
                return None
            code = ordered[equal[0]]
        a, b = np.flatnonzero(codes == code)[:2]
    else:
        rows = np.stack(columns, axis=1)
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        clash = np.flatnonzero(first[inverse.ravel()] != np.arange(len(rows)))
        if not len(clash):
            return None
        b = clash[0]
        a = first[inverse.ravel()[b]]
    return tuple(int(x) for x in np.unravel_index(a, shape)), tuple(int(x) for x in np.unravel_index(b, shape))


def collision(initial: list, results: list, extents: list, new_extents: list) -> tuple | None:
    """Two points (dicts Var -> value) of the box ``initial`` x ``extents`` that ``results`` send
    to the same place, or None when the map is one-to-one. Raises Unchecked when it cannot tell."""
    sizes = dict(zip(initial, extents))
    uses = [_variables(r, initial) for r in results]
    origin = {v: 0 for v in initial}
    for var in initial:
        if sizes[var] > 1 and not any(var in u for u in uses):  # a dropped index
            return origin, {**origin, var: 1}
    groups: list = []  # [variables, result positions], merged while they share a variable
    for k, used in enumerate(uses):
        if not used:
            continue  # a constant result tells no points apart
        merged = [set(used), [k]]
        for g in [g for g in groups if g[0] & merged[0]]:
            groups.remove(g)
            merged = [merged[0] | g[0], merged[1] + g[1]]
        groups.append(merged)
    for group_vars, positions in groups:
        group = [v for v in initial if v in group_vars]
        points = math.prod(sizes[v] for v in group)
        if points > ENUMERATION_LIMIT:
            if _digits_prove_one_to_one([results[k] for k in sorted(positions)], group, sizes):
                continue
            raise Unchecked(f"one group of its indices spans {points} points, more than the "
                            f"{ENUMERATION_LIMIT} checked one by one")
        found = _first_collision([results[k] for k in sorted(positions)], group, sizes,
                                 [new_extents[k] for k in sorted(positions)])
        if found is not None:
            return {**origin, **dict(zip(group, found[0]))}, {**origin, **dict(zip(group, found[1]))}
    return None
