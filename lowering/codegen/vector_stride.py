"""How an index expression steps from one vector lane to the next.

``lane_stride(expr, vector_vars)`` is the constant difference between consecutive lanes of
``expr`` when ``expr`` is affine in the vector variables (``vector_vars`` maps each to its own
stride, None when unknown): 0 for a value that is the same in every lane, 1 for a contiguous
index, None when the lanes are not evenly spaced. Vector loads and stores rest on it.
"""
from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir.visitor import collect


def lane_stride(e: Any, vector_vars: dict) -> int | None:
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return 0
    if isinstance(e, E.Var):
        return vector_vars.get(e, 0)
    if isinstance(e, E.Ramp):
        base = lane_stride(e.base, vector_vars)
        if base == 0 and isinstance(e.stride, E.IntImm):
            return e.stride.value
        return None
    if isinstance(e, E.Broadcast):
        return 0 if lane_stride(e.value, vector_vars) == 0 else None
    if isinstance(e, (E.Add, E.Sub)):
        a, b = lane_stride(e.a, vector_vars), lane_stride(e.b, vector_vars)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        a, b = lane_stride(e.a, vector_vars), lane_stride(e.b, vector_vars)
        if a == 0 and b == 0:
            return 0
        if a is not None and b == 0 and isinstance(e.b, E.IntImm):
            return a * e.b.value
        if b is not None and a == 0 and isinstance(e.a, E.IntImm):
            return b * e.a.value
        return None
    if isinstance(e, E.Cast) and e.dtype.is_integer and e.value.dtype.is_integer \
            and e.dtype.bits >= e.value.dtype.bits:
        return lane_stride(e.value, vector_vars)
    if not vector_vars:
        return 0
    # anything else is uniform across lanes only when no vector variable occurs in it
    used = {id(v) for v in collect(e, E.Var)}
    return 0 if not any(id(v) in used for v in vector_vars) else None
