"""The default GPU schedule of a low-batch matrix-vector product (TVM 0.27's
``dl.gpu.LowBatchGEMV``, its inner-reduction form under a cuda target).

A decode step multiplies a few rows (a symbolic batch ``b``) by a weight matrix: ``Y[b, s] +=
X[b, r] * W[s, r]``. The rule pads the batch to a multiple of ``bucket`` (4) with
``pad_einsum`` and schedules the product like a GEMV (two ``rfactor`` stages of partial sums
across ``TR`` threads, ``TS`` outputs per thread block, two outputs per thread), each thread
block handling ``bucket`` rows of the batch (``blockIdx.y``); the padded rows are written back
through the unpadding block. Reductions that are not innermost, and targets other than cuda,
are declined.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import DATA_PAR, IntImm, Var
from ...ir.function import PrimFunc
from ..schedule import BlockRV, Schedule, ScheduleError
from .gpu_gemv import (finish_partial_sums, fit_in_shared_memory, is_broadcast_epilogue, iter_vars_used,
                       max_factor, reduction_operand, rfactor_partial_sums, stage_in_shared_memory)
from .gpu_base import GPUBlockInfo, normalize_prim_func
from .gpu_utils import GPURule, get_extent, max_num_threads, target_kind, try_inline_contiguous_spatial



def _pad_compatible(block: Any) -> bool:
    """Every access is a point at constants or plain variables (what ``pad_einsum`` takes)."""
    return all(isinstance(r.extent, IntImm) and r.extent.value == 1 and isinstance(r.min, (IntImm, Var))
               for region in (*block.reads, *block.writes) for r in region.region)


def vector_buffers(sch: Schedule, info: GPUBlockInfo) -> list | None:
    """The reads that use some but not all of the constant-extent iterators, when the block is a
    low-batch product with exactly one symbolic (spatial) iterator; None otherwise."""
    block = sch.get(info.rv)
    if not (info.is_reduction() and len(block.reads) >= 2 and len(block.writes) == 1
            and reduction_operand(block) is not None and _pad_compatible(block)
            and iter_vars_used(block, block.writes[0])):
        return None
    constant = {id(iv.var) for iv in block.iter_vars if isinstance(iv.dom.extent, IntImm)}
    symbolic = [iv for iv in block.iter_vars if id(iv.var) not in constant]
    if len(symbolic) != 1 or symbolic[0].iter_type != DATA_PAR:
        return None
    found = [r.buffer for r in block.reads if 0 < len(iter_vars_used(block, r) & constant) < len(constant)]
    return found if 0 < len(found) < len(block.reads) else None


def normalize(sch: Schedule, info: GPUBlockInfo) -> bool | None:
    """Order the loops ``(batch, s, r)`` and fuse the spatial and the reduction ones; whether the
    reduction is innermost in the dominant read (the one using the most constant iterators)."""
    block = sch.get(info.rv)
    constant = {id(iv.var) for iv in block.iter_vars if isinstance(iv.dom.extent, IntImm)}
    read = max(block.reads, key=lambda r: (len(iter_vars_used(block, r) & constant), -block.reads.index(r)))
    kinds = {id(it.var): it for it in info.iters}
    axes = [r.min for r in read.region if not isinstance(r.min, IntImm)]
    if not axes or any(not isinstance(a, Var) or id(a) not in kinds for a in axes):
        return None
    used = [iter_vars_used(block, region) for region in (*block.writes, *block.reads)]
    spatial, reduce = [], []
    for var in axes:
        it = kinds[id(var)]
        if it.kind == "R":
            reduce.append(it.loop_rv)
        elif not all(id(var) in u for u in used):
            spatial.append(it.loop_rv)
    dynamic = [it.loop_rv for it in info.iters if id(it.var) not in constant]
    if not spatial or not reduce or len(dynamic) != 1:
        return None
    sch.reorder(*dynamic, *spatial, *reduce)
    sch.fuse(*spatial)
    sch.fuse(*reduce)
    return kinds[id(axes[-1])].kind == "R"


class LowBatchGEMV(GPURule):
    """Low-batch matrix-vector products (see the module docstring)."""

    name = "LowBatchGEMV"

    def __init__(self, bucket: int = 4) -> None:
        self.bucket = bucket

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target) or target_kind(target) != "cuda":
            return None
        sch = Schedule(func)
        try:
            return self._schedule(sch, target)
        except ScheduleError:
            return None

    def _schedule(self, sch: Schedule, target: Any) -> Schedule | None:
        blocks = normalize_prim_func(sch)
        if blocks is None:
            return None
        reductions = [b for b in blocks if b.is_reduction()]
        if len(reductions) != 1 or vector_buffers(sch, reductions[0]) is None:
            return None
        main = reductions[0]
        sch.pad_einsum(main.rv, [it.dom.value if isinstance(it.dom, IntImm) else self.bucket
                                 for it in main.iters])
        blocks = normalize_prim_func(sch)
        pad_input = next((b.rv for b in blocks if "pad" in b.name and "dequantize" not in b.name
                          and not sch.get_producers(b.rv)), None)
        if any("dequantize" in b.name for b in blocks):
            return None  # (TVM's dequantize staging is not built)
        blocks = try_inline_contiguous_spatial(sch, [b for b in blocks if "pad" not in b.name])
        if len(blocks) not in (1, 2) or (len(blocks) == 2 and not blocks[1].is_injective()):
            return None
        info = blocks[0]
        if len(info.iters) not in (2, 3):
            return None
        vectors = vector_buffers(sch, info)
        if vectors is None or normalize(sch, info) is not True:
            return None
        return self._inner_reduction(sch, target, info.rv, pad_input, vectors)

    def _inner_reduction(self, sch: Schedule, target: Any, gemv: BlockRV, pad_input: BlockRV | None,
                         vectors: list) -> Schedule:
        _, s, r = sch.get_loops(gemv)
        len_s, len_r = get_extent(sch, s), get_extent(sch, r)
        ts, tr = ((4, 64) if len_s > len_r else (16, 32)) if isinstance(len_s, int) else (1, 64)
        while ts * tr > max_num_threads(target):
            if ts > 1:
                ts //= 2
            else:
                tr //= 2
        tile_s, tile_r = 2, max(max_factor(len_r, [tr, tr * 2, tr * 4, tr * 8]) // tr, 1)
        vec_c = min(max_factor(tile_r, [1, 2, 4, 8]), 4)
        tag_s, tag_r, load_v_vec = "threadIdx.y", "threadIdx.x", 8

        rf, rf2, (bx, ts_, tr_, r) = rfactor_partial_sums(sch, gemv, s, r, (ts, tr, tile_s, tile_r, vec_c), 1)
        batch_loop = sch.get_loops(rf)[0]
        by, batch = sch.split(batch_loop, [None, self.bucket])
        sch.bind(by, "blockIdx.y")
        sch.reorder(bx, ts_, tr_, r, batch)

        load_v_shared = fit_in_shared_memory(vectors, target)
        v_shared = stage_in_shared_memory(sch, rf, tr_, ts, tr, load_v_vec) if load_v_shared else None
        if pad_input is not None:
            sch.compute_inline(pad_input)

        sch.reverse_compute_at(rf2, bx, preserve_unit_loops=True)
        tr_, vec_c_, batch_loop, *rest = sch.get_loops(rf2)[2:]
        ts_o, ts_i, tile_s_ = sch.split(sch.fuse(*rest), [None, ts, tile_s], preserve_unit_iters=True)
        tile_s_, vec_s = sch.split(tile_s_, [None, max_factor(tile_s, [1, 2, 4, 8])], preserve_unit_iters=True)
        ts_ = sch.fuse(ts_o, ts_i)
        sch.reorder(ts_, tr_, tile_s_, batch_loop, vec_s, vec_c_)
        sch.bind(ts_, tag_s)
        sch.bind(tr_, tag_r)
        sch.vectorize(vec_s)

        sch.reverse_compute_at(gemv, bx, preserve_unit_loops=True)
        tr_, batch_loop, *rest = sch.get_loops(gemv)[2:]
        ts_o, ts_i, tile_s_ = sch.split(sch.fuse(*rest), [None, ts, tile_s], preserve_unit_iters=True)
        ts_ = sch.fuse(ts_o, ts_i)
        sch.reorder(tile_s_, batch_loop, ts_, tr_)
        sch.bind(ts_, tag_s)
        sch.bind(tr_, tag_r)

        finish_partial_sums(sch, rf, rf2, v_shared, 4)

        consumers = sch.get_consumers(gemv)
        if consumers and is_broadcast_epilogue(sch, gemv, consumers[0]):
            sch.reverse_compute_at(consumers[0], bx)
            sch.set_scope(gemv, 0, "shared")
            _, _, _, *s = sch.get_loops(consumers[0])
            sch.bind(sch.split(sch.fuse(*s), [None, ts])[1], tag_s)
        elif consumers:  # (the unpadding block) computed where its rows are reduced
            sch.reverse_compute_at(consumers[0], bx, preserve_unit_loops=True)
            sch.fuse(*sch.get_loops(consumers[0])[3:])
            ts_o, ts_i, _ = sch.split(sch.get_loops(consumers[0])[-1], [None, ts, tile_s], preserve_unit_iters=True)
            sch.bind(sch.fuse(ts_o, ts_i), tag_s)
            sch.set_scope(gemv, 0, "local")
        return sch


__all__ = ["LowBatchGEMV"]
