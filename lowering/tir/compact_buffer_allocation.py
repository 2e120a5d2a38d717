"""CompactBufferAllocation: a block's allocation shrinks to the region its body touches.

``B = T.sblock_alloc_buffer((64, 48))`` in a block that only touches ``B[i, j_0 * 16:j_0 * 16 + 16]``
becomes ``(1, 16)``, and every access subtracts the region's start, unsimplified as TVM prints it:
``B[i - i, j_0 * 16 + ax0 - j_0 * 16]``. Regions are found from the accesses and the inner blocks'
declared reads/writes, with the block's own loops relaxed over their ranges, and, as on a GPU
the threads share it, the thread indices launched around the block that share the buffer's
memory: every thread index for a global buffer, ``threadIdx`` (and vthread) for a shared one,
``threadIdx.x`` for a warp one, none for a local one. The compact buffer has no strides, unless
storage_align asked for aligned rows (the ``buffer_dim_align`` annotation): then its strides are
padded.
"""
from __future__ import annotations

import dataclasses

from ...ir.analysis import index_bounds, substitute
from ...ir.buffer import Buffer, BufferRegion
from ...ir.arith import simplify_index
from ...ir.errors import TVMSError
from ...ir.expr import Add, BufferLoad, FloorDiv, FloorMod, IntImm, IterVar, PrimExpr, Range, Sub, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import THREAD_BINDING, AttrStmt, Block, BlockRealize, BufferStore, For
from ...ir.visitor import Mutator, Visitor, walk
from ..scopes import can_relax_under_thread
from .tir_pass import define_tir_pass


class _Accesses(Visitor):
    """The ranges of each buffer its loads and stores touch, inner blocks' iterators replaced
    by their bindings and loops (and the thread loops given) relaxed over their ranges (as
    TVM's collector, from the accesses themselves, not the blocks' declared regions)."""

    def __init__(self, threads: tuple) -> None:
        self.doms: dict = {t.loop_var: (t.min, t.extent) for t in threads}
        self.binding: dict = {}
        self.found: dict = {}

    def touch(self, buffer: Buffer, indices: tuple) -> None:
        self.touch_region(buffer, [(index, index) for index in indices])

    def touch_region(self, buffer: Buffer, spans: list) -> None:
        """Per dimension, the first and last index touched (expressions to relax)."""
        ranges = []
        for dim, (first, last) in enumerate(spans):
            low = index_bounds(self.quotients_folded(substitute(first, self.binding)), self.doms)
            high = low if last is first else index_bounds(self.quotients_folded(substitute(last, self.binding)),
                                                          self.doms)
            if low is None or high is None or first.dtype.lanes > 1:
                extent = buffer.shape[dim]
                ranges.append(Range(const(0, extent.dtype), extent))
            else:
                lo, hi = low[0], high[1]
                ranges.append(Range(lo, simplify_index(Add(Sub(hi, lo), const(1, lo.dtype)))))
        self.found.setdefault(buffer, []).append(BufferRegion(buffer, tuple(ranges)))

    def quotients_folded(self, index: PrimExpr) -> PrimExpr:
        """``index`` with its floordiv/floormod by a constant folded where the loops' constant
        ranges allow (``(i_0 * 72 + i_1 * 6 + i_2) // 6`` is ``i_0 * 12 + i_1`` for ``i_2 < 6``):
        bounds taken through an unfolded quotient cover whole dimensions (a packed panel)."""
        if not any(isinstance(n, (FloorDiv, FloorMod)) for n in walk(index)):
            return index
        ranges = {v: (lo.value, extent.value) for v, (lo, extent) in self.doms.items()
                  if isinstance(lo, IntImm) and isinstance(extent, IntImm)}
        return simplify_index(index, ranges)

    def visit_For(self, loop: For) -> None:
        self.doms[loop.loop_var] = (substitute(loop.min, self.binding), substitute(loop.extent, self.binding))
        self.generic_visit(loop)

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            self.binding[iv.var] = substitute(value, self.binding)
        block = realize.block
        for m in block.match_buffers:  # (a view's whole region, relaxed as the accesses are)
            self.touch_region(m.source.buffer, [(r.min, Sub(Add(r.min, r.extent), const(1, r.min.dtype)))
                                                for r in m.source.region])
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self.touch(load.buffer, load.indices)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.touch(store.buffer, store.indices)
        self.generic_visit(store)


def _touched_regions(block: Block, threads: tuple = ()) -> dict:
    """buffer -> the regions of it that ``block``'s body reads or writes, as the thread loops
    ``threads`` (around the block) run."""
    collector = _Accesses(threads)
    collector.visit(block.body)
    return collector.found


def storage_aligns(func: PrimFunc) -> dict:
    """buffer -> {dim: (factor, offset)} from the blocks' ``buffer_dim_align`` (storage_align)."""
    aligns: dict = {}
    for block in walk(func.body):
        if isinstance(block, Block):
            for entry in _dim_aligns(block):
                index, dim, factor, offset = (int(getattr(v, "value", v)) for v in entry)
                if not 0 <= index < len(block.writes):
                    raise TVMSError(f"block {block.name_hint!r}: buffer_dim_align names its written buffer {index}, "
                                    f"and it writes {len(block.writes)}")
                buffer = block.writes[index].buffer
                if not 0 <= dim < len(buffer.shape) or factor <= 0 or not 0 <= offset < factor:
                    raise TVMSError(f"block {block.name_hint!r}: buffer_dim_align [{index}, {dim}, {factor}, {offset}] "
                                    f"of {buffer.name!r} (rank {len(buffer.shape)}): storage_align needs a dimension "
                                    f"of the buffer, a factor above 0 and an offset in [0, factor)")
                aligns.setdefault(buffer, {})[dim] = (factor, offset)
    return aligns


def _dim_aligns(block: Block) -> list:
    """The block's ``buffer_dim_align`` entries, each [buffer index, dim, factor, offset] (storage_align's)."""
    entries = block.annotations.get("buffer_dim_align", ())
    if not isinstance(entries, (list, tuple)) or not all(
            isinstance(e, (list, tuple)) and len(e) == 4 and all(isinstance(getattr(v, "value", v), int) for v in e)
            for e in entries):
        raise TVMSError(f"block {block.name_hint!r}: the annotation buffer_dim_align is a list of [buffer index, "
                        f"dim, factor, offset] (as storage_align writes it), not {entries!r}")
    return list(entries)


def aligned_strides(shape: tuple, aligns: dict) -> tuple:
    """Row-major strides with each aligned dimension's stride padded to ``offset`` modulo
    ``factor`` (TVM's CalcStrides); no strides for a buffer without alignment."""
    if not aligns:
        return ()
    strides = [None] * len(shape)
    stride: PrimExpr = const(1, shape[0].dtype)
    for dim in reversed(range(len(shape))):
        if dim in aligns:
            factor, offset = (const(v, stride.dtype) for v in aligns[dim])
            stride = simplify_index(stride + FloorMod(factor + offset - FloorMod(stride, factor), factor))
        strides[dim] = stride
        stride = simplify_index(stride * shape[dim])
    return tuple(strides)


class _Compactor(Mutator):
    def __init__(self, aligns: dict) -> None:
        self.aligns = aligns
        self.shifts: dict = {}  # old buffer -> (new buffer, per-dimension start)
        self.loops: list = []  # the loops around what is visited

    @property
    def threads(self) -> list:
        return [loop for loop in self.loops if loop.thread_binding is not None and loop.kind == THREAD_BINDING]

    def ranges(self) -> dict:
        """The constant ranges of the loops around (to compare the regions' starts)."""
        return {loop.loop_var: (loop.min.value, loop.extent.value) for loop in self.loops
                if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)}

    def start(self, e: PrimExpr) -> PrimExpr:
        """A region's start with the loops of one iteration around at their value (TVM's
        analyzer knows them), else as it is."""
        unit = {loop.loop_var: loop.min for loop in self.loops if is_const_int(loop.extent, 1)}
        fixed = substitute(e, unit) if unit else e
        return e if fixed is e else simplify_index(fixed)

    def visit_For(self, loop: For) -> For:
        self.loops.append(loop)
        result = self.generic_visit(loop)
        self.loops.pop()
        return result

    def visit_AttrStmt(self, attr: AttrStmt) -> AttrStmt:
        if attr.attr_key not in ("thread_extent", "virtual_thread") or not isinstance(attr.node, IterVar):
            return self.generic_visit(attr)
        # a thread launched by T.launch_thread shares memory as a thread-bound loop does: the
        # same loop for the regions (a shared buffer spans every threadIdx of the block)
        var = attr.node.var
        self.loops.append(For(var, const(0, var.dtype), attr.value, THREAD_BINDING, attr.body, attr.node))
        try:
            return self.generic_visit(attr)
        finally:
            self.loops.pop()

    def shift(self, buffer: Buffer, indices: tuple) -> tuple:
        new, starts = self.shifts[buffer]
        return new, tuple(i if is_const_int(s, 0) else Sub(i, s) for i, s in zip(indices, starts))

    def visit_Block(self, block: Block) -> Block:
        if block.alloc_buffers:
            by_threads: dict = {}
            allocs = []
            for buf in block.alloc_buffers:
                threads = tuple(t for t in self.threads
                                if can_relax_under_thread(buf.scope, t.thread_binding.thread_tag))
                if threads not in by_threads:
                    by_threads[threads] = _touched_regions(block, threads)
                region = _single_region(buf, by_threads[threads].get(buf, []), block, self.ranges())
                if region is None:
                    allocs.append(buf)
                    continue
                shape = tuple(r.extent for r in region)
                new = dataclasses.replace(buf, shape=shape, strides=aligned_strides(shape, self.aligns.get(buf, {})))
                self.shifts[buf] = (new, tuple(self.start(r.min) for r in region))
                allocs.append(new)
            block = dataclasses.replace(block, alloc_buffers=tuple(allocs))
        return self.generic_visit(block)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        load = self.generic_visit(load)
        if load.buffer not in self.shifts:
            return load
        return BufferLoad(*self.shift(load.buffer, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        store = self.generic_visit(store)
        if store.buffer not in self.shifts:
            return store
        new, indices = self.shift(store.buffer, store.indices)
        return BufferStore(new, store.value, indices)

    def visit_BufferRegion(self, region: BufferRegion) -> BufferRegion:
        region = self.generic_visit(region)
        if region.buffer not in self.shifts:
            return region
        new, starts = self.shift(region.buffer, tuple(r.min for r in region.region))
        return BufferRegion(new, tuple(Range(s, r.extent) for s, r in zip(starts, region.region)))

    def visit_Buffer(self, buffer: Buffer) -> Buffer:  # rewritten where accessed
        return buffer


def _single_region(buffer: Buffer, regions: list, block: Block, ranges: dict) -> tuple | None:
    """The union of ``regions``, dimension by dimension, or None to keep the whole buffer (one
    never touched)."""
    if not regions:
        return None
    return tuple(_within(_hull([r.region[d] for r in regions], extent, ranges), extent)
                 for d, extent in enumerate(buffer.shape))


def _within(span: Range, full_extent: PrimExpr) -> Range:
    """``span`` cut to the dimension's ``[0, full_extent)`` where both are constant: the accesses
    of a guarded loop (a row of 30 in vectors of 16, the last one masked) reach past what their
    guard lets them touch, and the buffer must not grow to that."""
    if not all(isinstance(e, IntImm) for e in (span.min, span.extent, full_extent)):
        return span
    low, high = max(span.min.value, 0), min(span.min.value + span.extent.value, full_extent.value)
    if (low, high) == (span.min.value, span.min.value + span.extent.value) or low >= high:
        return span
    return Range(const(low, span.min.dtype), const(high - low, span.min.dtype))


def _hull(ranges: list, full_extent: PrimExpr, loops: dict) -> Range:
    """The smallest range covering ``ranges`` when their starts differ by constants, else the
    whole dimension."""
    first = ranges[0]
    if len(ranges) == 1:
        return first
    lows, highs = [], []
    for r in ranges:
        low = simplify_index(Sub(r.min, first.min), loops)
        high = simplify_index(Sub(Add(r.min, r.extent), first.min), loops)
        if not (isinstance(low, IntImm) and isinstance(high, IntImm)):
            return Range(const(0, full_extent.dtype), full_extent)
        lows.append(low.value)
        highs.append(high.value)
    lo, hi = min(lows), max(highs)
    first_extent = simplify_index(first.extent)
    if lo == 0 and isinstance(first_extent, IntImm) and first_extent.value == hi:
        return first  # the first range covers the others: keep it as written
    start = first.min if lo == 0 else simplify_index(Add(first.min, const(lo, first.min.dtype)))
    return Range(start, const(hi - lo, first.min.dtype))


def compact_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """``func`` with every block allocation shrunk to the part its block touches."""
    return func.with_changes(body=_Compactor(storage_aligns(func)).visit(func.body))


CompactBufferAllocation = define_tir_pass("CompactBufferAllocation", compact_buffer_allocation)

__all__ = ["CompactBufferAllocation", "aligned_strides", "compact_buffer_allocation", "storage_aligns"]
