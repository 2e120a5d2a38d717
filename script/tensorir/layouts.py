"""TVM 0.27's tile layouts in TVMScript: ``T.TileLayout(T.S[(2, 4):(1 @ Axis.laneid, 1)] +
T.R[2:1 @ Axis.warpid] + 3)`` and ``T.ComposeLayout(3, 3, 3, tile)`` as a buffer's ``layout=``.

Reading builds them from small script values: ``Axis.laneid`` (an axis name), ``4 @ Axis.laneid``
and sums of such terms (an offset), ``T.S[...]`` / ``T.R[...]`` and their sums (a spec), which
the evaluator's operators hand to ``combine``. Printing writes them as TVM 0.27 does: the strides
always, an axis only where it is not memory's, the offset's terms by axis name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import arith
from ...ir.expr import Add, IntImm, PrimExpr, Var
from ...ir.tile_layout import AXIS_NAMES, MEMORY, AxisOffset, ComposeLayout, Iter, TileLayout, compact_strides
from ...ir.operators import ATOM
from .. import syntax as S
from ..diagnostics import did_you_mean
from .evaluator import _describe
from .rules import EXPR_BUILTINS, GLOBAL_NAMES, OPERATOR_HOOKS, SUBSCRIPT_BUILTINS, Namespace


@dataclass(frozen=True)
class AxisNames(Namespace):
    """``Axis`` (imported by the header of TVM 0.27's texts): ``Axis.laneid`` names an axis."""

    description = "the namespace Axis"

    def attribute(self, ev: Any, name: str, syn: Any) -> "AxisName":
        if name not in AXIS_NAMES:
            raise ev.error(syn, f"unknown layout axis 'Axis.{name}'"
                                f"{did_you_mean(name, AXIS_NAMES)} (TVM 0.27's axes: {', '.join(AXIS_NAMES)})")
        return AxisName(name)


GLOBAL_NAMES["Axis"] = AxisNames()


@dataclass(frozen=True)
class AxisName:
    name: str

    @property
    def description(self) -> str:
        return f"the axis Axis.{self.name}"


@dataclass(frozen=True)
class Offset:
    """``4 @ Axis.laneid``, and sums of such terms and plain numbers (memory's): axis -> value."""

    terms: tuple  # of (axis, PrimExpr)
    description = "a layout offset (a value @ Axis.name)"

    def plus(self, other: "Offset") -> "Offset":
        terms = dict(self.terms)
        for axis, value in other.terms:
            terms[axis] = arith.binary(Add, terms[axis], value) if axis in terms else value
        return Offset(tuple(terms.items()))


@dataclass(frozen=True)
class Spec:
    """``T.S[...]`` (shard), ``T.R[...]`` (replica) and an offset, summed."""

    shard: tuple | None = None  # of Iter
    replica: tuple | None = None
    offset: Offset | None = None
    description = "a layout spec (T.S[...] + T.R[...] + offset)"


def _as_offset(ev: Any, value: Any, syn: Any) -> Offset:
    if isinstance(value, Offset):
        return value
    return Offset(((MEMORY, _integer(ev, value, "an offset", syn)),))


def _integer(ev: Any, value: Any, what: str, syn: Any) -> PrimExpr:
    """An integer value of a layout (an extent, a stride, an offset)."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, PrimExpr) and value.dtype.is_integer)):
        raise ev.error(syn, f"{what} of a layout is an integer, got {_describe(value)}")
    return ev.int_expr(value, syn)


def _is_term(value: Any) -> bool:
    return isinstance(value, (Offset, Spec, AxisName))


def combine(ev: Any, syn: S.BinOp, left: Any, right: Any) -> Any:
    """``value @ Axis.x`` and the sums that build a layout spec; NotImplemented for other operands."""
    if syn.op == "@" and isinstance(right, AxisName):
        return Offset(((right.name, _integer(ev, left, "a value on an axis", syn.left)),))
    if not (_is_term(left) or _is_term(right)):
        return NotImplemented
    for value, side in ((left, syn.left), (right, syn.right)):
        if isinstance(value, AxisName):
            raise ev.error(side, f"an axis stands after a value: write 1 @ Axis.{value.name}")
    if syn.op != "+":
        raise ev.error(syn, f"a layout is built with + alone (T.S[...] + T.R[...] + 1 @ Axis.laneid), "
                            f"not with {syn.op!r}")
    if isinstance(left, Spec) and isinstance(right, Spec):
        for part in ("shard", "replica"):
            if getattr(left, part) is not None and getattr(right, part) is not None:
                raise ev.error(syn, f"a tile layout has one {'T.S' if part == 'shard' else 'T.R'}[...]")
        offsets = [s.offset for s in (left, right) if s.offset is not None]
        return Spec(left.shard or right.shard, left.replica or right.replica,
                    offsets[0].plus(offsets[1]) if len(offsets) == 2 else (offsets or [None])[0])
    if isinstance(left, Spec) or isinstance(right, Spec):
        spec, other, side = (left, right, syn.right) if isinstance(left, Spec) else (right, left, syn.left)
        extra = _as_offset(ev, other, side)
        offset = extra if spec.offset is None else (spec.offset.plus(extra) if spec is left else extra.plus(spec.offset))
        return Spec(spec.shard, spec.replica, offset)
    return _as_offset(ev, left, syn.left).plus(_as_offset(ev, right, syn.right))


def _spec(kind: str) -> Any:
    def read(ev: Any, syn: S.Subscript) -> Spec:
        """``T.S[(8, 4):(4 @ Axis.laneid, 1)]``, ``T.S[8:1]``, or extents alone (row-major strides)."""
        if len(syn.indices) == 1 and isinstance(syn.indices[0], S.Slice):
            index = syn.indices[0]
            if index.lower is None or index.upper is None or index.step is not None:
                raise ev.error(syn, f"write T.{kind}[extents:strides], e.g. T.{kind}[(8, 4):(4, 1)]")
            extents, strides = _items(ev.ev(index.lower)), _items(ev.ev(index.upper))
            if len(extents) != len(strides):
                raise ev.error(index, f"T.{kind}[...] has {len(extents)} extent(s) and {len(strides)} "
                                      f"stride(s); give one stride per extent")
        else:
            extents = _items(ev.ev(syn.indices[0])) if len(syn.indices) == 1 else [ev.ev(i) for i in syn.indices]
            strides = None
        extents = [_integer(ev, e, "an extent", syn) for e in extents]
        for e in extents:
            if isinstance(e, IntImm) and e.value < 1:
                raise ev.error(syn, f"an extent of a layout is positive, got {e.value}")
        if not extents:
            raise ev.error(syn, f"T.{kind}[...] needs at least one extent")
        if strides is None:
            iters = tuple(Iter(e, s) for e, s in zip(extents, compact_strides(tuple(extents))))
        else:
            iters = tuple(_iter(ev, e, s, syn) for e, s in zip(extents, strides))
        return Spec(shard=iters) if kind == "S" else Spec(replica=iters)
    return read


def _items(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _iter(ev: Any, extent: PrimExpr, stride: Any, syn: Any) -> Iter:
    if isinstance(stride, Offset):
        if len(stride.terms) != 1:
            raise ev.error(syn, "a stride is a value on one axis, e.g. 4 @ Axis.laneid")
        axis, value = stride.terms[0]
        return Iter(extent, value, axis)
    if isinstance(stride, AxisName):
        raise ev.error(syn, f"a stride on an axis is written 1 @ Axis.{stride.name}")
    return Iter(extent, _integer(ev, stride, "a stride", syn), MEMORY)


def _tile_layout(ev: Any, args: list, kwargs: dict, syn: Any) -> TileLayout:
    if len(args) != 1 or kwargs or not isinstance(args[0], Spec):
        got = _describe(args[0]) if len(args) == 1 and not kwargs else "other arguments"
        raise ev.error(syn, f"T.TileLayout takes one spec such as T.S[(8, 4):(4, 1)] + T.R[2:1 @ Axis.warpid], "
                            f"got {got}")
    spec = args[0]
    if spec.shard is None and spec.replica is None:
        raise ev.error(syn, "T.TileLayout needs a T.S[...] (or a T.R[...])")
    offset = sorted(spec.offset.terms) if spec.offset is not None else []  # (TVM keeps them by axis name)
    return TileLayout(spec.shard or (), spec.replica or (), tuple(AxisOffset(a, v) for a, v in offset),
                      span=ev.span(syn))


def _compose_layout(ev: Any, args: list, kwargs: dict, syn: Any) -> ComposeLayout:
    kwargs = dict(kwargs)
    if len(args) > 4 and "swizzle_inner" in kwargs:
        raise ev.error(syn, "T.ComposeLayout's swizzle_inner is given twice (as its fifth argument and by name)")
    inner = kwargs.pop("swizzle_inner", args[4] if len(args) > 4 else True)
    if len(args) not in (4, 5) or kwargs:
        raise ev.error(syn, "T.ComposeLayout takes per_element, swizzle_len, atom_len, a T.TileLayout "
                            "and swizzle_inner=")
    numbers = args[:3]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        raise ev.error(syn, f"T.ComposeLayout's per_element, swizzle_len and atom_len are non-negative "
                            f"integers, got {', '.join(_describe(n) for n in numbers)}")
    if not isinstance(args[3], TileLayout):
        got = "a bare spec (write T.TileLayout(T.S[...]))" if isinstance(args[3], Spec) else _describe(args[3])
        raise ev.error(syn, f"T.ComposeLayout swizzles a T.TileLayout, got {got}")
    if not isinstance(inner, bool):
        raise ev.error(syn, f"swizzle_inner is True or False, got {_describe(inner)}")
    return ComposeLayout(*numbers, args[3], inner, span=ev.span(syn))


def _bracketed(name: str) -> Any:
    def refuse(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        raise ev.error(syn, f"T.{name} is written with brackets: T.{name}[(8, 4):(4, 1)]")
    return refuse


EXPR_BUILTINS["TileLayout"] = _tile_layout
EXPR_BUILTINS["ComposeLayout"] = _compose_layout
for _kind in ("S", "R"):
    EXPR_BUILTINS[_kind] = _bracketed(_kind)
    SUBSCRIPT_BUILTINS[_kind] = _spec(_kind)
OPERATOR_HOOKS.append(combine)


# ---------------------------------------------------------------- printing

def layout_text(p: Any, layout: TileLayout | ComposeLayout) -> str:
    """``T.TileLayout(...)`` / ``T.ComposeLayout(...)`` as TVM 0.27 prints them."""
    if isinstance(layout, ComposeLayout):
        inner = "" if layout.swizzle_inner else ", swizzle_inner=False"
        return (f"T.ComposeLayout({layout.per_element}, {layout.swizzle_len}, {layout.atom_len}, "
                f"{layout_text(p, layout.tile_layout)}{inner})")
    parts = []
    if layout.shard or not layout.replica:
        parts.append("T.S" + _iters_text(p, layout.shard))
    if layout.replica:
        parts.append("T.R" + _iters_text(p, layout.replica))
    if layout.offset:
        terms = [_on_axis(p, t.value, t.axis) for t in layout.offset]
        parts.append(terms[0] if len(terms) == 1 else "(" + " + ".join(terms) + ")")
    return f"T.TileLayout({' + '.join(parts)})"


def _iters_text(p: Any, iters: tuple) -> str:
    # (a slice bound or a tuple item needs no parentheses: only an operand of @ does)
    extents = [p.expr(it.extent) for it in iters]
    strides = [p.expr(it.stride) if it.axis == MEMORY else _on_axis(p, it.stride, it.axis) for it in iters]
    if len(iters) == 1:
        return f"[{extents[0]}:{strides[0]}]"
    return f"[({', '.join(extents)}):({', '.join(strides)})]"


def _on_axis(p: Any, value: PrimExpr, axis: str) -> str:
    return _operand(p, value) + ("" if axis == MEMORY else f" @ Axis.{axis}")


def _operand(p: Any, value: PrimExpr) -> str:
    text, precedence = p.ex(value)
    return text if precedence >= ATOM or isinstance(value, (IntImm, Var)) else f"({text})"


def allocated_addr_text(p: Any, addresses: tuple) -> str:
    """One address alone, several as a list (as TVM 0.27 prints them)."""
    texts = [p.expr(a) for a in addresses]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"

