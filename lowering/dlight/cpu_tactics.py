"""Scheduling moves the default CPU rules share: vector and parallel loops for a spatial block,
tiles for a transpose, and vectorized partial sums for a reduction along a contiguous axis.

Each move works on a block that sits directly under the root block with one loop per iterator
(``BlockInfo.trivial``), and leaves loops it cannot transform (symbolic extents) as they are.
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.expr import Add, BufferLoad, IntImm, Sub
from ...ir.structural import structural_equal
from ...ir.visitor import collect
from ..schedule import BlockRV, LoopRV, Schedule
from ..schedule.loop_transform import uses_var
from .analysis import (PARALLEL_MIN_WORK, BlockInfo, buffer_dtype, const_int, describe_block, innermost_index_var,
                       vector_lanes, vectorizes_well)

TRANSPOSE_TILE = 32  # rows of a transpose tile: 32 strided reads per vector of columns


def vector_factor(extent: int, lanes: int) -> int:
    """The widest vector (a power of two, at most ``lanes``) that divides ``extent``; 1 if none.
    A split that does not divide would guard every lane with ``T.where``, which stays scalar."""
    width = lanes
    while width > 1 and extent % width:
        width //= 2
    return width


def loop_extents(sch: Schedule, loops: list[LoopRV]) -> list[int | None]:
    return [const_int(sch.get(loop).extent) for loop in loops]


def constant_suffix(extents: list[int | None]) -> int:
    """Where the run of constant extents at the inside of a loop nest starts."""
    start = len(extents)
    while start > 0 and extents[start - 1] is not None:
        start -= 1
    return start


def parallelize_outer(sch: Schedule, loop: LoopRV, work: int | None) -> None:
    """Make ``loop`` parallel when the work under it (elements, None when symbolic) pays for a
    parallel launch; a symbolic amount is taken to be large."""
    if work is None or work >= PARALLEL_MIN_WORK:
        sch.parallel(loop)


def schedule_spatial_block(sch: Schedule, info: BlockInfo, target: Any) -> None:
    """Vectorize the innermost loop of an injective block when its store is contiguous, and run
    the loops outside it, fused, in parallel when the work pays for it. A block that reads
    everything at the place it writes gets all its loops fused first (one long contiguous run);
    a transpose is tiled instead."""
    loops = list(sch.get_loops(info.rv))
    if not loops:
        return
    if info.trivial and _is_transpose(info):
        _tile_transpose(sch, info, loops, target)
        return
    extents = loop_extents(sch, loops)
    start = constant_suffix(extents)
    inner_size = prod(e for e in extents[start:] if e is not None)
    if start == len(loops):  # every loop symbolic: the outermost in parallel
        sch.parallel(loops[0])
        return
    if _reads_where_it_writes(info) and len(loops) - start > 1:
        loops = loops[:start] + [sch.fuse(*loops[start:])]
        extents = extents[:start] + [inner_size]
    contiguous = (info.trivial and innermost_index_var(info.write()) is info.iters[-1].var
                  and vectorizes_well(info))
    # a row that no wide vector divides (a padded image's 226 pixels: vectors of 2) is cut into
    # whole vectors and a guarded last one, whose loads and stores are masked (a 3x224x224
    # image's padding: 0.010 against 0.047 ms in vectors of 2)
    lanes = vector_lanes(target, buffer_dtype(info))
    width = vector_factor(extents[-1], lanes) if contiguous else 1
    if contiguous and 2 * width < lanes < extents[-1] and _row_offsets_only(info):
        width = lanes
    innermost = loops[-1]
    if width > 1:
        innermost, vec = sch.split(loops[-1], [None, width])
        sch.vectorize(vec)
    if start > 0:  # symbolic outer loops: the outermost in parallel when each step does real work
        if inner_size >= 64:
            sch.parallel(loops[0])
        return
    outer = loops[:-1]
    if outer:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        parallelize_outer(sch, fused, inner_size)
    elif extents[-1] // width > 1:
        parallelize_outer(sch, innermost, inner_size)


def _row_offsets_only(info: BlockInfo) -> bool:
    """Every load indexes the innermost iterator in its last index only, as the iterator plus or
    minus a constant (a padding's shifted row): vectors whose last one is guarded keep such loads
    contiguous, where a reshape's ``(x // 28 + ..)`` would not simplify under the guard and load
    lane by lane."""
    x = info.iters[-1].var
    for load in collect(info.block.body, BufferLoad):
        if not load.indices:  # (a scalar: the same in every lane)
            continue
        *outer, last = load.indices
        if any(uses_var(i, {id(x)}) for i in outer):
            return False
        offset = last.a if isinstance(last, (Add, Sub)) and isinstance(last.b, IntImm) else last
        if uses_var(last, {id(x)}) and offset is not x:
            return False
    return True


def _reads_where_it_writes(info: BlockInfo) -> bool:
    """Every buffer is read at the point written, and has the written buffer's shape: fusing the
    loops then keeps every access contiguous."""
    if not info.trivial or not info.is_elementwise():
        return False
    shape = info.write().buffer.shape
    return all(len(r.buffer.shape) == len(shape) and all(structural_equal(a, b) for a, b in zip(r.buffer.shape, shape))
               for r in info.block.reads)


def _is_transpose(info: BlockInfo) -> bool:
    """Some read is contiguous along a different spatial iterator than the write."""
    if len(info.iters) < 2 or any(it.const_extent is None or it.const_extent < 16 for it in info.iters[-2:]):
        return False
    written = innermost_index_var(info.write())
    if written is not info.iters[-1].var:
        return False
    return any(innermost_index_var(r) is info.iters[-2].var for r in info.block.reads)


def _tile_transpose(sch: Schedule, info: BlockInfo, loops: list[LoopRV], target: Any) -> None:
    """Tile the two innermost loops: ``TRANSPOSE_TILE`` rows of the result by one vector of
    columns, so that the strided reads of a tile share the cache lines and the TLB entries of
    their neighbours and every store is a whole vector (measured: a column tile of one vector
    beats wider tiles by 2-7x)."""
    rows, cols = loops[-2], loops[-1]
    lanes = vector_lanes(target, buffer_dtype(info))
    row_extent, col_extent = info.iters[-2].const_extent, info.iters[-1].const_extent
    width = vector_factor(col_extent, lanes) if vectorizes_well(info) else 1
    row_o, row_i = sch.split(rows, [None, TRANSPOSE_TILE])
    col_o, col_i = sch.split(cols, [None, width if width > 1 else TRANSPOSE_TILE])
    sch.reorder(row_o, col_o, row_i, col_i)
    if width > 1 and row_extent % TRANSPOSE_TILE == 0:  # (a guarded row tile stays scalar)
        sch.vectorize(col_i)
    extents = loop_extents(sch, loops[:-2])
    if all(e is not None for e in extents):
        outer = sch.fuse(*loops[:-2], row_o) if len(loops) > 2 else row_o
        parallelize_outer(sch, outer, prod(e for e in extents) * row_extent * col_extent)
    else:
        sch.parallel(loops[0])


def split_partial_sums(sch: Schedule, info: BlockInfo, target: Any) -> tuple[BlockRV, BlockRV] | None:
    """For a reduction whose innermost reduction loop reads contiguous memory and whose extent a
    vector width (of four lanes or more) divides: split that loop by the width and rfactor the
    lanes, so that each lane accumulates a partial result of its own (the init made a block of
    its own, so the update is a plain store); the original block then adds the lanes up. A loop
    of 4 to one vector's lanes inside another reduction loop (a 13 x 13 or 7 x 7 window, which no
    vector divides) is rfactored whole: its elements are the lanes (SqueezeNet's mean over
    13 x 13, 1000 channels: 0.118 ms as one chain of scalar adds a channel, 0.023 ms so). Returns
    the partial-sum block and its init block, or None when the reduction does not fit."""
    last = info.iters[-1]
    extent = last.const_extent
    if not info.trivial or last.kind != "R" or extent is None or not vectorizes_well(info):
        return None
    if not any(innermost_index_var(r) is last.var for r in info.block.reads):
        return None
    width = vector_lanes(target, buffer_dtype(info))
    lanes = vector_factor(extent, width)
    if lanes >= 4 and extent >= 2 * lanes:  # (half a register or less: not worth a second block)
        _, lane = sch.split(info.loops[-1], [None, lanes])
    elif 4 <= extent <= width and len(info.reduction) > 1:
        lane = info.loops[-1]  # a short row an outer reduction loop repeats (a 13 x 13 window): all lanes
    else:
        return None
    rf = sch.rfactor(lane, len(info.spatial))
    init = sch.decompose_reduction(rf, sch.get_loops(rf)[len(info.spatial)])
    return rf, init


def vectorize_lanes(sch: Schedule, rf: BlockRV, init: BlockRV) -> None:
    """Put the lane loop of a partial-sum block (and of its init) innermost and vectorize it."""
    for block in (init, rf):
        info = describe_block(sch, block)
        lane = info.iters[0].loop  # rfactor makes the lanes the block's first iterator
        if lane is None:
            continue
        lane_var = sch.get(lane).loop_var
        at = next((i for i, loop in enumerate(info.loops) if sch.get(loop).loop_var is lane_var), None)
        if at is None:
            continue
        if at < len(info.loops) - 1:  # only the loops inside the lane loop move (one chain)
            sch.reorder(*info.loops[at + 1:], lane)
        sch.vectorize(lane)


def vectorized_partial_sums(sch: Schedule, info: BlockInfo, target: Any) -> BlockRV | None:
    """``split_partial_sums`` with the lanes vectorized in place; the partial-sum block or None."""
    found = split_partial_sums(sch, info, target)
    if found is None:
        return None
    vectorize_lanes(sch, *found)
    return found[0]


__all__ = ["TRANSPOSE_TILE", "constant_suffix", "loop_extents", "parallelize_outer", "schedule_spatial_block",
           "split_partial_sums", "vector_factor", "vectorize_lanes", "vectorized_partial_sums"]
