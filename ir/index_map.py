"""An index map: a function from the indices of a tensor to the indices of its new layout,
``T.index_map(lambda i, j: (i // 4, j, i % 4))`` in TVMScript (``R.layout_transform``'s
attribute). Its variables are int64, as TVM makes them for Relax."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from .dtype import DataType
from .errors import TVMSError
from .expr import Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var
from .structural import structural_equal

INT64 = DataType("int64")


@dataclass(frozen=True, eq=False)
class IndexMap:
    initial_indices: tuple  # of Var
    final_indices: tuple  # of PrimExpr over them

    @staticmethod
    def from_func(func: Callable, ndim: int | None = None) -> "IndexMap":
        """The map of a Python function of the indices (``lambda i, j: (j, i)``)."""
        names = list(inspect.signature(func).parameters)
        if ndim is not None and len(names) != ndim:
            raise TVMSError(f"the index map takes {len(names)} indices, the tensor has {ndim} dimensions")
        variables = tuple(Var(n, INT64) for n in names)
        result = func(*variables)
        final = tuple(result) if isinstance(result, (list, tuple)) else (result,)
        return IndexMap(variables, tuple(IntImm(INT64, e) if isinstance(e, int) else e for e in final))

    def __eq__(self, other: Any) -> bool:
        # attributes compare by value: structurally, the lambda's indices bound by the map (the
        # same map read twice has indices of its own each time)
        return isinstance(other, IndexMap) and len(self.initial_indices) == len(other.initial_indices) \
            and structural_equal((self.initial_indices, self.final_indices),
                                 (other.initial_indices, other.final_indices), map_free_vars=True)

    def __hash__(self) -> int:
        return hash((len(self.initial_indices), len(self.final_indices)))

    def map_shape(self, shape: tuple) -> tuple:
        """The shape of the new layout of a tensor of ``shape``: the extent of each final index
        as the initial ones range over their dimensions (a split that does not divide pads)."""
        extents = {v: d for v, d in zip(self.initial_indices, shape)}
        return tuple(_extent(e, extents) for e in self.final_indices)


def _extent(e: PrimExpr, extents: dict) -> PrimExpr:
    """The extent of an index made of splits (``i // c``, ``i % c``) and fusions (``i * c + j``)
    of the initial indices, as TVM's iterator-map detection finds it."""
    terms = split_terms(e)
    if terms is None:
        raise TVMSError(f"cannot find the extent of the index {e!r}: layout_transform supports index "
                        f"maps made of i // c, i % c and i * c + j")
    spans = []  # (extent of the term's iterator, its scale)
    for var, kind, c, scale in terms:
        d = extents.get(var)
        if d is None:
            raise TVMSError(f"the index map uses {var.name}, which is not one of its indices")
        if kind == "div":
            size = IntImm(d.dtype, -(-d.value // c)) if isinstance(d, IntImm) else \
                FloorDiv(Sub(d, FloorMod(d, IntImm(d.dtype, -c))), IntImm(d.dtype, c))  # (TVM's ceildiv)
        elif kind == "mod":  # (c even over fewer values: TVM pads i % 16 over 14 to 16)
            size = IntImm(d.dtype, c)
        else:
            size = d
        spans.append((size, scale))
    if len(spans) == 1:
        size, scale = spans[0]
        return size if scale == 1 else _times(size, scale)
    if all(isinstance(size, IntImm) for size, _ in spans):
        return IntImm(spans[0][0].dtype, _fused_extent([(size.value, scale) for size, scale in spans]))
    raise TVMSError(f"cannot find the extent of the index {e!r} over symbolic sizes")


def _fused_extent(spans: list) -> int:
    """Terms that form a mixed-radix number (a fusion, ``i * 6 + j``) reach their largest
    ``size * scale``; overlapping ones (``i + j``) span their whole value range."""
    reach = 1
    for size, scale in sorted(spans, key=lambda p: p[1]):
        if scale < reach:
            return sum((size - 1) * scale for size, scale in spans) + 1
        reach = size * scale
    return max(size * scale for size, scale in spans)


def _times(size: PrimExpr, scale: int) -> PrimExpr:
    return IntImm(size.dtype, size.value * scale) if isinstance(size, IntImm) else Mul(size, IntImm(size.dtype, scale))


def split_terms(e: PrimExpr) -> list | None:
    """``e`` as a sum of (var, "var" | "div" | "mod", constant, scale) terms, or None."""
    if isinstance(e, Add):
        a, b = split_terms(e.a), split_terms(e.b)
        return None if a is None or b is None else a + b
    if isinstance(e, Mul) and isinstance(e.b, IntImm):
        inner = split_terms(e.a)
        return None if inner is None or len(inner) != 1 else [inner[0][:3] + (inner[0][3] * e.b.value,)]
    if isinstance(e, Var):
        return [(e, "var", 1, 1)]
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.a, Var) and isinstance(e.b, IntImm) and e.b.value > 0:
        return [(e.a, "div" if isinstance(e, FloorDiv) else "mod", e.b.value, 1)]
    return None
