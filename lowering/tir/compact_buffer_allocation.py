"""CompactBufferAllocation: a block's allocation shrinks to the region its body touches.

``B = T.sblock_alloc_buffer((64, 48))`` in a block that only touches ``B[i, j_0 * 16:j_0 * 16 + 16]``
becomes ``(1, 16)``, and every access subtracts the region's start, unsimplified as TVM prints it:
``B[i - i, j_0 * 16 + ax0 - j_0 * 16]``. Regions are found from the accesses and the inner blocks'
declared reads/writes, with the block's own loops relaxed over their ranges, and, as on a GPU
the threads share it, the thread indices launched around the block that share the buffer's
memory: every thread index for a global buffer, ``threadIdx`` for a shared one, ``threadIdx.x``
for a warp one, none for a local one. The compact buffer has no strides.
"""
from __future__ import annotations

import dataclasses

from ...ir.analysis import infer_block_regions
from ...ir.buffer import Buffer, BufferRegion
from ...ir.arith import simplify_index
from ...ir.expr import Add, BufferLoad, IntImm, PrimExpr, Range, Sub, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import SERIAL, THREAD_BINDING, Block, BufferStore, For
from ...ir.visitor import Mutator
from .tir_pass import define_tir_pass



def _shares(scope: str, tag: str) -> bool:
    """Whether the threads of index ``tag`` share memory of ``scope`` (TVM's
    CanRelaxStorageUnderThread)."""
    thread_rank = 0 if tag.startswith("blockIdx.") else 1 if tag.startswith("threadIdx.") else -1
    if thread_rank < 0:
        return False
    if scope == "warp":
        return tag == "threadIdx.x"
    storage_rank = {"global": 0, "shared": 1, "shared.dyn": 1}.get(scope, 3)
    return storage_rank <= thread_rank


def _touched_regions(block: Block, threads: tuple = ()) -> dict:
    """buffer -> the region of it that ``block``'s body reads or writes, as the thread loops
    ``threads`` (around the block) run."""
    body = block.body
    for loop in reversed(threads):
        body = For(loop.loop_var, loop.min, loop.extent, SERIAL, body)
    reads, writes = infer_block_regions(dataclasses.replace(block, alloc_buffers=(), match_buffers=(), body=body))
    found: dict = {}
    for region in (*writes, *reads):
        found.setdefault(region.buffer, []).append(region)
    return found


class _Compactor(Mutator):
    def __init__(self) -> None:
        self.shifts: dict = {}  # old buffer -> (new buffer, per-dimension start)
        self.threads: list = []  # the thread-bound loops around what is visited

    def visit_For(self, loop: For) -> For:
        bound = loop.thread_binding is not None and loop.kind == THREAD_BINDING
        if bound:
            self.threads.append(loop)
        result = self.generic_visit(loop)
        if bound:
            self.threads.pop()
        return result

    def shift(self, buffer: Buffer, indices: tuple) -> tuple:
        new, starts = self.shifts[buffer]
        return new, tuple(i if is_const_int(s, 0) else Sub(i, s) for i, s in zip(indices, starts))

    def visit_Block(self, block: Block) -> Block:
        if block.alloc_buffers:
            by_threads: dict = {}
            allocs = []
            for buf in block.alloc_buffers:
                threads = tuple(t for t in self.threads if _shares(buf.scope, t.thread_binding.thread_tag))
                if threads not in by_threads:
                    by_threads[threads] = _touched_regions(block, threads)
                region = _single_region(buf, by_threads[threads].get(buf, []), block)
                if region is None:
                    allocs.append(buf)
                    continue
                new = dataclasses.replace(buf, shape=tuple(r.extent for r in region), strides=())
                self.shifts[buf] = (new, tuple(r.min for r in region))
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


def _single_region(buffer: Buffer, regions: list, block: Block) -> tuple | None:
    """The union of ``regions``, dimension by dimension, or None to keep the whole buffer (one
    never touched, or aligned by storage_align)."""
    if not regions or (buffer.strides and "buffer_dim_align" in block.annotations):
        return None
    return tuple(_hull([r.region[d] for r in regions], extent)
                 for d, extent in enumerate(buffer.shape))


def _hull(ranges: list, full_extent: PrimExpr) -> Range:
    """The smallest range covering ``ranges`` when their starts differ by constants, else the
    whole dimension."""
    first = ranges[0]
    if len(ranges) == 1:
        return first
    lows, highs = [], []
    for r in ranges:
        low = simplify_index(Sub(r.min, first.min))
        high = simplify_index(Sub(Add(r.min, r.extent), first.min))
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
    return func.with_changes(body=_Compactor().visit(func.body))


CompactBufferAllocation = define_tir_pass("CompactBufferAllocation", compact_buffer_allocation)

__all__ = ["CompactBufferAllocation", "compact_buffer_allocation"]
