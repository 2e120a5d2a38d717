"""TVM 0.27's tile layouts: where each element of a buffer lives, on memory and on named axes of
the machine (lanes, warps, Trainium partitions, tensor-memory columns, ...).

``T.TileLayout(T.S[(2, 4):(1 @ Axis.laneid, 1)] + T.R[2:1 @ Axis.warpid] + 3)`` reads: the
buffer's elements, in row-major order, are split by the *shard* extents ``(2, 4)``; each piece
steps by its stride along its axis (``m``, memory, when none is named). The *replica* repeats the
whole on other axes, and the *offset* shifts it, per axis. ``T.ComposeLayout(3, 3, 3, tile)``
applies a swizzle (``per_element``, ``swizzle_len``, ``atom_len``) to a tile layout's addresses.

tvms reads and prints these layouts; it lowers only those that place elements as the plain
row-major layout does (``means_row_major``), and refuses the others (``refuse_tile_layouts``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtype import DataType
from .errors import TVMSError
from .expr import Add, IntImm, Mul, PrimExpr, Sub
from .node import Node

# The axes TVM 0.27 registers (``tvm.tirx.layout._AXIS_NAMES``); ``m`` is memory.
AXIS_NAMES = ("bx", "by", "bz", "cbx", "cby", "cbz", "tx", "warpid", "laneid", "wgid", "tid_in_wg",
              "wid_in_wg", "m", "P", "F", "Bank", "TCol", "TLane")
MEMORY = "m"
# the axes that are no memory but threads of the machine (a layout on them spreads a buffer across
# threads; ``B.local()`` views what one thread holds)
THREAD_AXES = frozenset(("bx", "by", "bz", "cbx", "cby", "cbz", "tx", "warpid", "laneid", "wgid", "tid_in_wg",
                         "wid_in_wg"))


@dataclass(frozen=True, slots=True, eq=False)
class Iter(Node):
    """One piece of a shard or replica: ``extent`` steps of ``stride`` along ``axis``."""

    extent: PrimExpr
    stride: PrimExpr
    axis: str = MEMORY


@dataclass(frozen=True, slots=True, eq=False)
class AxisOffset(Node):
    """One term of a layout's offset: ``value @ Axis.<axis>``."""

    axis: str
    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False)
class TileLayout(Node):
    """``T.TileLayout(T.S[shard] + T.R[replica] + offset)``. The offset's terms are kept in the
    order of their axis names, one per axis, as TVM keeps them (and prints them)."""

    shard: tuple = ()  # of Iter
    replica: tuple = ()  # of Iter
    offset: tuple = ()  # of AxisOffset


@dataclass(frozen=True, slots=True, eq=False)
class ComposeLayout(Node):
    """``T.ComposeLayout(per_element, swizzle_len, atom_len, tile_layout)``: a swizzle of the
    tile layout's addresses (``swizzle_inner=False``: of its outer bits)."""

    per_element: int
    swizzle_len: int
    atom_len: int
    tile_layout: TileLayout
    swizzle_inner: bool = True


Layout = TileLayout | ComposeLayout


def compact_strides(extents: tuple) -> tuple:
    """Row-major strides of ``extents`` (the last 1), as TVM's default layout computes them: in
    the type of the first extent that is not int32, int32 otherwise."""
    dtype = next((e.dtype for e in extents if e.dtype != DataType("int32")), DataType("int32"))
    strides, stride = [], IntImm(dtype, 1)
    for extent in reversed(extents):
        strides.append(stride)
        stride = _times(stride, extent)
    return tuple(reversed(strides))


def default_layout(shape: tuple) -> TileLayout:
    """TVM 0.27's layout of a buffer declared without one: ``T.S[shape]``, row-major in memory."""
    return TileLayout(tuple(Iter(e, s) for e, s in zip(shape, compact_strides(shape))))


def is_default(layout: Layout, shape: tuple) -> bool:
    """Whether ``layout`` is the one TVM gives a buffer of ``shape`` anyway (and prints not)."""
    from .structural import structural_equal  # (structural imports the buffers, which use this)

    return structural_equal(layout, default_layout(shape))


def canonical(layout: Layout) -> Layout:
    """``layout`` with its pieces of one element dropped and each run of pieces that step as one
    fused (``T.S[(8, 8):(8, 1)]`` is ``T.S[64:1]``), as TVM's ``Layout.canonicalize`` does for
    constant pieces: two layouts equal so place the same elements at the same places."""
    if isinstance(layout, ComposeLayout):
        return ComposeLayout(layout.per_element, layout.swizzle_len, layout.atom_len,
                             canonical(layout.tile_layout), layout.swizzle_inner)
    return TileLayout(_fused(layout.shard), _fused(layout.replica), layout.offset)


def _fused(iters: tuple) -> tuple:
    out: list = []
    for it in iters:
        if _const(it.extent) == 1:
            continue
        last = out[-1] if out else None
        if (last is not None and last.axis == it.axis and None not in (_const(last.stride), _const(it.stride), _const(it.extent))
                and _const(last.stride) == _const(it.extent) * _const(it.stride) and _const(last.extent) is not None):
            out[-1] = Iter(IntImm(it.extent.dtype, _const(last.extent) * _const(it.extent)), it.stride, it.axis)
        else:
            out.append(it)
    return tuple(out)


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def same_placement(a: Layout, b: Layout) -> bool:
    """Whether two layouts place every element at the same place (equal once canonical)."""
    from .structural import structural_equal

    return structural_equal(canonical(a), canonical(b))


def layout_of(buffer) -> Layout:
    """A buffer's tile layout, its default one where it has none of its own."""
    return buffer.layout if buffer.layout is not None else default_layout(buffer.shape)


def permute(layout: Layout, shape: tuple, dims: tuple) -> TileLayout:
    """The layout of ``B.permute(*dims)`` for ``B`` of ``shape`` laid out by ``layout``: the pieces
    of the shard that make up each dimension move with it (as TVM groups the layout by the shape,
    splitting a piece a dimension ends in, then reorders the groups). A TVMSError where the pieces
    cannot be so grouped (a symbolic extent, a dimension ending on no divisor of a piece) or the
    layout is a swizzle."""
    if not isinstance(layout, TileLayout):
        raise TVMSError(f"tvms permutes the dimensions of a buffer laid out by a T.TileLayout, not {describe(layout)}")
    groups = _groups(layout.shard, shape)
    if groups is None:
        raise TVMSError(f"tvms permutes a layout whose pieces can be grouped by the dimensions of the buffer; "
                        f"{describe(layout)} cannot for the shape ({', '.join(_text(e) for e in shape)})")
    return TileLayout(tuple(it for d in dims for it in groups[d]), layout.replica, layout.offset)


def _groups(shard: tuple, shape: tuple) -> list | None:
    """The consecutive pieces of ``shard`` whose extents multiply to each dimension in turn, a piece
    that a dimension ends inside split in two (its outer part, the larger stride, stays with that
    dimension), or None."""
    pieces, groups = list(shard), []
    for dim in shape:
        want, group, size = _const(dim), [], 1
        if want is None or want < 1:
            return None
        while pieces and (size < want or want == 1 and not group and _const(pieces[0].extent) == 1):
            it = pieces.pop(0)
            extent = _const(it.extent)
            if extent is None or want % size:
                return None
            need = want // size
            if extent > need:
                if extent % need:
                    return None
                pieces.insert(0, Iter(IntImm(it.extent.dtype, extent // need), it.stride, it.axis))
                it, extent = Iter(IntImm(it.extent.dtype, need), _times(it.stride, extent // need), it.axis), need
            group.append(it)
            size *= extent
        if size != want:
            return None
        groups.append(tuple(group))
    return groups if not pieces else None


def permutation(parent: Layout, parent_shape: tuple, layout: Layout, shape: tuple) -> tuple | None:
    """The dimensions ``dims`` for which a buffer of ``shape`` laid out by ``layout`` is
    ``parent.permute(*dims)``, as TVM 0.27's printer recognizes one: ``dims`` inferred from the
    shapes (for each dimension the first unused one of the parent of the same extent), not all
    in place; the parent's layout one piece a dimension, and ``layout`` those pieces so reordered
    (the same replica and offset). None where it is no such permutation."""
    from .structural import structural_equal

    if not (isinstance(parent, TileLayout) and isinstance(layout, TileLayout)) \
            or not len(parent.shard) == len(parent_shape) == len(shape) \
            or not all(structural_equal(it.extent, e) for it, e in zip(parent.shard, parent_shape)):
        return None
    dims: list = []
    for extent in shape:
        d = next((j for j, e in enumerate(parent_shape) if j not in dims and structural_equal(e, extent)), None)
        if d is None:
            return None
        dims.append(d)
    if dims == sorted(dims):
        return None
    reordered = TileLayout(tuple(parent.shard[d] for d in dims), parent.replica, parent.offset)
    return tuple(dims) if structural_equal(reordered, layout) else None


def on_threads(layout: Layout) -> bool:
    """Whether a layout spreads its elements across threads (a piece or offset on a thread axis)."""
    tile = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    return any(x.axis in THREAD_AXES for x in (*tile.shard, *tile.replica, *tile.offset))


def storage(layout: TileLayout) -> TileLayout:
    """What one thread holds of a layout: its pieces and offsets on memory axes alone."""
    keep = lambda items: tuple(x for x in items if x.axis not in THREAD_AXES)  # noqa: E731
    return TileLayout(keep(layout.shard), keep(layout.replica), keep(layout.offset))


def storage_span(layout: TileLayout) -> int | PrimExpr:
    """The elements one thread's storage reaches: its last address plus one (TVM's ``span``); an
    expression where an extent, a stride or an offset is one."""
    values = [(_const(it.extent), _const(it.stride)) for it in (*layout.shard, *layout.replica)]
    offsets = [_const(t.value) for t in layout.offset]
    if not any(None in v for v in values) and None not in offsets:
        return sum((e - 1) * s for e, s in values) + sum(offsets) + 1
    from .arith import binary, simplify

    reach = [_times(binary(Sub, it.extent, 1), it.stride) for it in (*layout.shard, *layout.replica)]
    return simplify(_sum([*reach, *(t.value for t in layout.offset)], 1))


def storage_size(layout: TileLayout) -> int | PrimExpr:
    """How many elements one thread's storage holds (TVM's ``size``: the shard's extents)."""
    extents = [_const(it.extent) for it in layout.shard]
    if None not in extents:
        return _product_of(extents)
    from .arith import simplify

    product = layout.shard[0].extent
    for it in layout.shard[1:]:
        product = _times(product, it.extent)
    return simplify(product)


def _sum(terms: list, last: int) -> PrimExpr:
    from .arith import binary

    total = terms[0]
    for term in [*terms[1:], last]:
        total = binary(Add, total, term)
    return total


def _product_of(values: list) -> int:
    count = 1
    for v in values:
        count *= v
    return count


def means_row_major(layout: Layout, shape: tuple) -> bool:
    """Whether ``layout`` places every element where the plain row-major layout of ``shape``
    does: all in memory, compact row-major pieces covering the buffer, no replica, no offset
    (``T.S[32:1]`` of a (8, 4) buffer)."""
    if not isinstance(layout, TileLayout) or layout.replica or layout.offset:
        return False
    extents = tuple(it.extent for it in layout.shard)
    if any(it.axis != MEMORY for it in layout.shard) or not all(isinstance(e, IntImm) for e in extents):
        return False
    if not all(isinstance(e, IntImm) for e in shape) or _product_of([e.value for e in extents]) != \
            _product_of([e.value for e in shape]):
        return False
    return [getattr(it.stride, "value", None) for it in layout.shard] == [s.value for s in compact_strides(extents)]


def refuse_tile_layouts(node: Node, where: str) -> None:
    """A TVMSError naming the first buffer of ``node`` (a function) whose tile layout would
    change where its elements are: tvms lowers and runs only buffers laid out row-major."""
    from .buffer import Buffer
    from .visitor import collect

    for b in collect(node, Buffer):
        if b.layout is not None and not means_row_major(b.layout, b.shape):
            raise TVMSError(f"{where}: buffer {b.name!r} has the tile layout {describe(b.layout)}, which "
                            f"places its elements otherwise than row-major: tvms reads and prints tile "
                            f"layouts but does not lower them")


def describe(layout: Layout) -> str:
    """A layout as the script writes it, for messages (a symbolic value as ``...``)."""
    if isinstance(layout, ComposeLayout):
        return f"T.ComposeLayout({layout.per_element}, {layout.swizzle_len}, {layout.atom_len}, " \
               f"{describe(layout.tile_layout)})"
    parts = [f"T.{kind}{_spec_text(iters)}" for kind, iters in (("S", layout.shard), ("R", layout.replica)) if iters]
    parts += [_on_axis(t.value, t.axis) for t in layout.offset]
    return f"T.TileLayout({' + '.join(parts)})"


def _spec_text(iters: tuple) -> str:
    extents = [_text(it.extent) for it in iters]
    strides = [_on_axis(it.stride, it.axis) for it in iters]
    return f"[{extents[0]}:{strides[0]}]" if len(iters) == 1 else f"[({', '.join(extents)}):({', '.join(strides)})]"


def _on_axis(value: PrimExpr, axis: str) -> str:
    return _text(value) + ("" if axis == MEMORY else f" @ Axis.{axis}")


def _text(e: PrimExpr) -> str:
    return str(e.value) if isinstance(e, IntImm) else "..."


def _times(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    from .arith.operators import binary  # (constants folded, a 1 dropped; arith imports buffers)

    return binary(Mul, a, b)

