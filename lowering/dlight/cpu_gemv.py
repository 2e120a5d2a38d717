"""``GEMV``: the default CPU schedule of matrix-vector products (batch-1 matmul and dense).

The function is one reduction ``C[s...] += V[...] * M[...]`` over one axis ``k``, where the
vector ``V`` varies along fewer output axes than the matrix ``M``, followed by elementwise
epilogues (bias add, relu). Two layouts:

* ``M`` contiguous along an output axis ``n`` (``[1, K] x [K, N]``): ``n`` is split into one
  chunk per thread, ``k`` runs outside the chunk and the chunk is walked in vectors of a few
  registers, so each step is a broadcast of ``V[k]`` times a long contiguous run of row ``k`` of
  ``M`` into outputs that stay in the L1 cache; the chunks run in parallel.
* ``M`` contiguous along ``k`` (``[1, K] x [N, K]``): ``k`` is split by the vector width and
  rfactored, so each row of ``M`` is reduced with vector multiply-adds into per-lane partial
  sums, added up at the end; the rows run in parallel.

The epilogue blocks are scheduled like any elementwise block.
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.expr import Add, BufferLoad, Cast, Mul, Var
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ..schedule import LoopRV, Schedule
from .analysis import (BlockInfo, CPURule, buffer_dtype, flat_schedule, innermost_index_var,
                       num_threads, vector_lanes)
from .cpu_tactics import (constant_suffix, loop_extents, parallelize_outer, schedule_spatial_block, vector_factor,
                          vectorized_partial_sums)

REGISTERS_PER_CHUNK = 4  # vector registers of outputs a chunk keeps: enough to hide the FMA latency
OUTPUTS_IN_L1 = 2048  # outputs (8 KiB of fp32) a thread updates per row of the matrix


class GEMV(CPURule):
    """Schedules ``C = V x M`` (with epilogues); declines a matrix-matrix product or anything else."""

    name = "GEMV"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = flat_schedule(func)
        if found is None or not found[1] or not found[1][0].is_reduction() or not all(i.trivial for i in found[1]):
            return None
        sch, infos = found
        gemv, epilogues = infos[0], infos[1:]
        if not all(e.is_injective() for e in epilogues):
            return None
        matrix = gemv_matrix(gemv)
        if matrix is None:
            return None
        if innermost_index_var(matrix) is gemv.reduction[0].var:
            _schedule_reduce_contiguous(sch, gemv, target)
        else:
            _schedule_output_contiguous(sch, gemv, matrix, target)
        for epilogue in epilogues:
            schedule_spatial_block(sch, epilogue, target)
        return sch


def gemv_matrix(info: BlockInfo) -> Any:
    """The matrix read region of a GEMV block (None when ``info`` is not one): one reduction
    iterator, the update ``C + V * M`` (casts allowed), and ``M`` varying along an output axis
    that ``V`` does not vary along."""
    if len(info.reduction) != 1:
        return None
    value = info.block.body.value
    if not isinstance(value, Add):
        return None
    product = value.b if isinstance(value.a, BufferLoad) and value.a.buffer is info.write().buffer else value.a
    while isinstance(product, Cast):
        product = product.value
    if not isinstance(product, Mul):
        return None
    loads = [_strip_casts(x) for x in (product.a, product.b)]
    if not all(isinstance(x, BufferLoad) for x in loads):
        return None
    wide = {id(it.var) for it in info.spatial if it.const_extent != 1}
    used = [{id(v) for i in load.indices for v in collect(i, Var)} & wide for load in loads]
    k = id(info.reduction[0].var)
    if not all(k in {id(v) for i in load.indices for v in collect(i, Var)} for load in loads):
        return None
    for vector, matrix in ((0, 1), (1, 0)):
        if used[vector] < used[matrix]:
            return next(r for r in info.block.reads if r.buffer is loads[matrix].buffer)
    return None


def _strip_casts(e: Any) -> Any:
    while isinstance(e, Cast):
        e = e.value
    return e


def _schedule_reduce_contiguous(sch: Schedule, info: BlockInfo, target: Any) -> None:
    """``[1, K] x [N, K]``: vector partial sums along ``k``, the rows in parallel; each row's
    lanes are added up right after it (in the same parallel iteration, while in registers)."""
    if not info.spatial:
        vectorized_partial_sums(sch, info, target)
        return
    work = _work(info)
    partial = vectorized_partial_sums(sch, info, target)
    rows = _parallel_spatial(sch, info, work)
    if partial is not None and rows is not None:
        sch.reverse_compute_at(sch.get_block(info.name), rows)


def _parallel_spatial(sch: Schedule, info: BlockInfo, work: int | None) -> LoopRV | None:
    """Fuse the constant spatial loops of the (first) nest and run them in parallel when it
    pays; the fused loop, or None when the loops are symbolic."""
    loops = list(info.loops[:len(info.spatial)])
    extents = loop_extents(sch, loops)
    if constant_suffix(extents) != 0:
        sch.parallel(loops[0])
        return None
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    if prod(extents) > 1:
        parallelize_outer(sch, fused, work)
    return fused


def _schedule_output_contiguous(sch: Schedule, info: BlockInfo, matrix: Any, target: Any) -> None:
    """``[1, K] x [K, N]``: chunks of ``n`` vectorized under the ``k`` loop, chunks in parallel."""
    n_var = innermost_index_var(matrix)
    position = next((i for i, it in enumerate(info.spatial) if it.var is n_var), None)
    if position is None:
        return
    n_extent = info.spatial[position].const_extent
    lanes = vector_lanes(target, buffer_dtype(info))
    width = vector_factor(n_extent, lanes * REGISTERS_PER_CHUNK) if n_extent else 1
    work = _work(info)
    k_loop = info.loops[-1]
    loops = list(info.loops)
    if width > 1 and n_extent >= 2 * lanes:
        vectors = n_extent // width
        rows = _vectors_per_row(vectors, width, num_threads(target))
        chunk, row, lane = sch.split(loops[position], [None, rows, width])
        others = [loop for i, loop in enumerate(loops[:-1]) if i != position]
        sch.reorder(*others, chunk, k_loop, row, lane)
        sch.decompose_reduction(info.rv, k_loop)
        sch.vectorize(lane)
        init = sch.get_block(f"{info.name}_init")
        sch.vectorize(sch.get_loops(init)[-1])
        outer = others + [chunk]
    else:
        outer = loops[:-1]
    extents = loop_extents(sch, outer)
    if outer and None not in extents and prod(extents) > 1:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        parallelize_outer(sch, fused, work)
    elif outer and None in extents:
        sch.parallel(outer[0])


def _vectors_per_row(vectors: int, width: int, threads: int) -> int:
    """How many ``width``-wide pieces of a row of ``M`` one step of ``k`` walks: as many as give
    each thread its share, so that rows are read in long contiguous runs, while the outputs they
    update stay in the L1 cache; a count that divides ``vectors``."""
    count = max(1, min(OUTPUTS_IN_L1 // width, vectors // max(1, threads)))
    while vectors % count:
        count -= 1
    return count


def _work(info: BlockInfo) -> int | None:
    extents = [it.const_extent for it in info.iters]
    return None if None in extents else prod(extents)


__all__ = ["GEMV", "gemv_matrix"]
