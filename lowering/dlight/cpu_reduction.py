"""``Reduction``: the default CPU schedule of row reductions and of what LegalizeOps makes of
softmax, log_softmax, layer_norm and rms_norm.

The function is a sequence of blocks over the same leading "row" iterators: reductions over the
rest of each row (sum, mean, max, min) and elementwise blocks over the row's elements. The row
loops of the last block are fused and run in parallel; every earlier block is computed at that
loop, so a row is reduced and written while it is in the cache. A reduction along the contiguous
axis whose extent the vector width divides accumulates per-lane partial results in vector
registers (rfactor); the elementwise blocks of the row are vectorized.
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.expr import Var
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ...ir.structural import structural_equal
from ..schedule import LoopRV, Schedule
from .analysis import (BlockInfo, CPURule, buffer_dtype, const_int, describe_block, describe_blocks, flat_schedule,
                       innermost_index_var, vector_lanes, vectorizes_well)
from .cpu_tactics import parallelize_outer, split_partial_sums, vector_factor, vectorize_lanes


class Reduction(CPURule):
    """Schedules reductions over the trailing axes and the row-wise chains built on them."""

    name = "Reduction"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = flat_schedule(func)
        rows = None if found is None else _row_count(*found)
        if rows is None:
            return None
        sch, infos = found
        work = _work(infos, rows)
        reductions = [info for info in infos if info.block.init is not None]
        partials = [p for p in (split_partial_sums(sch, info, target) for info in reductions) if p is not None]
        if rows == 0:  # a reduction of everything: no rows to share, the lanes still pay
            for rf, init in partials:
                vectorize_lanes(sch, rf, init)
            return sch
        infos = describe_blocks(sch)
        output = infos[-1]
        row_loop = _fuse_rows(sch, output, rows)
        for info in reversed(infos[:-1]):
            sch.compute_at(info.rv, row_loop)
        for rf, init in partials:
            vectorize_lanes(sch, rf, init)
        for info in _redescribe(sch, infos):
            if info.is_injective():
                _vectorize_row(sch, info, row_loop, target)
        if const_int(sch.get(row_loop).extent) != 1:
            parallelize_outer(sch, row_loop, work)
        return sch


def _redescribe(sch: Schedule, infos: list[BlockInfo]) -> list[BlockInfo]:
    """The blocks of ``infos`` described again (compute_at gave them new loops)."""
    return [describe_block(sch, sch.get_block(info.name)) for info in infos]


def _row_count(sch: Schedule, infos: list[BlockInfo]) -> int | None:
    """How many leading iterators every block shares as its rows; None when the function is not
    a row reduction (no reduction, a reduction that keeps trailing axes, blocks that disagree)."""
    reductions = [info for info in infos if info.block.init is not None]
    if not reductions or not all(info.trivial for info in reductions):
        return None
    if not all(info.is_reduction() for info in reductions):
        return None
    if not all(_reduces_contiguously(info) for info in reductions):
        return None
    rows = len(reductions[0].spatial)
    if any(len(info.spatial) != rows for info in reductions):
        return None
    if rows == 0:  # everything reduced to a scalar: the blocks after it are scalar work
        return 0
    if not all(info.trivial for info in infos):
        return None
    extents = [it.extent for it in reductions[0].iters[:rows]]
    params = set(id(b) for b in sch.mod["main"].buffer_map.values())
    for info in infos:
        if info.block.init is None and not info.is_injective():
            return None
        if len(info.iters) < rows or info.kinds[:rows] != "S" * rows:
            return None
        if not all(structural_equal(it.extent, e) for it, e in zip(info.iters, extents)):
            return None
        row_vars = [id(it.var) for it in info.iters[:rows]]
        for region in info.block.reads + info.block.writes:  # intermediates are indexed by rows
            if id(region.buffer) in params:
                continue
            mins = [r.min for r in region.region[:rows]]
            if len(mins) < rows or [id(m) for m in mins] != row_vars:
                return None
    return rows


def _reduces_contiguously(info: BlockInfo) -> bool:
    """Every read that walks the innermost reduction axis walks it along contiguous memory (a
    matmul's second operand does not: that is a job for the matmul rule)."""
    k = info.reduction[-1].var
    reads = [r for r in info.block.reads if any(k is v for x in r.region for v in collect(x.min, Var))]
    return bool(reads) and all(innermost_index_var(r) is k for r in reads)


def _fuse_rows(sch: Schedule, output: BlockInfo, rows: int) -> LoopRV:
    """The one loop over the rows of the output block: its constant row loops fused."""
    loops = list(output.loops[:rows])
    if len(loops) > 1 and all(const_int(sch.get(loop).extent) is not None for loop in loops):
        return sch.fuse(*loops)
    return loops[0]


def _work(infos: list[BlockInfo], rows: int) -> int | None:
    """Elements a whole run touches: the rows times the longest row (None when symbolic)."""
    extents = [it.const_extent for it in infos[0].iters[:rows]]
    longest = max(prod(it.const_extent or 0 for it in info.iters[rows:]) for info in infos)
    return None if None in extents or not longest else prod(extents) * longest


def _vectorize_row(sch: Schedule, info: BlockInfo, row_loop: LoopRV, target: Any) -> None:
    """Fuse an elementwise block's loops inside the row loop and vectorize them when the store
    is contiguous along them."""
    if innermost_index_var(info.write()) is not info.iters[-1].var or not vectorizes_well(info):
        return
    loops = list(sch.get_loops(info.rv))
    row_var = sch.get(row_loop).loop_var
    at = next((i for i, loop in enumerate(loops) if sch.get(loop).loop_var is row_var), None)
    inner = loops[at + 1:] if at is not None else []
    extents = [const_int(sch.get(loop).extent) for loop in inner]
    if not inner or None in extents:
        return
    fused = sch.fuse(*inner) if len(inner) > 1 else inner[0]
    width = vector_factor(prod(extents), vector_lanes(target, buffer_dtype(info)))
    if width > 1:
        _, vec = sch.split(fused, [None, width])
        sch.vectorize(vec)


__all__ = ["Reduction"]
