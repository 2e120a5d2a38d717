"""``Transpose``: a 2-d transpose (optionally fed by a decoding prologue), as TVM's
``dl.gpu.Transpose`` schedules it: tiles of 8 x 16 (CUDA) staged through shared memory, read
along the input's rows and written along the output's, the shared tile padded against bank
conflicts.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ..schedule import BlockRV, Schedule
from .gpu_base import (GPURule, detect_dominant_read, iter_sum, normalize_prim_func, target_kind,
                       try_inline_contiguous_spatial)


def _is_transpose(sch: Schedule, rv: BlockRV) -> bool:
    """``B[i, j] = A[j, i]``: a copy whose indices are the same expressions in another order."""
    store = sch.get(rv).body
    if not isinstance(store, BufferStore) or not isinstance(store.value, BufferLoad):
        return False
    lhs, rhs = [id(i) for i in store.indices], [id(i) for i in store.value.indices]
    return lhs != rhs and set(lhs) == set(rhs)


class Transpose(GPURule):
    name = "Transpose"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        kind = target_kind(target)
        len_tx, len_ty = (16, 8) if kind in ("cuda", "opencl") else (8, 4)
        unroll_depth = 256 if kind == "cuda" else 64
        sch = Schedule(func)
        blocks = normalize_prim_func(sch)
        if blocks is None:
            return None
        at = None
        for idx in reversed(range(len(blocks))):  # the last transpose, only injective blocks after it
            if _is_transpose(sch, blocks[idx].rv):
                at = idx
                break
            if not blocks[idx].is_injective():
                return None
        if at is None:
            return None
        transpose = blocks[at].rv
        prologue = None  # (a decoding block feeding the transpose)
        if at > 0:
            if try_inline_contiguous_spatial(sch, blocks[:at - 1]):
                return None
            prologue = blocks[at - 1].rv
        loops = sch.get_loops(transpose)
        if len(loops) != 2:
            return None
        c_factor = 1
        if prologue is not None:
            block = sch.get(prologue)
            read = detect_dominant_read(block)
            splits = None if read is None else iter_sum(
                read, {id(iv.var): iv.dom.extent for iv in block.iter_vars}, any_base=True)
            if splits is None:
                return None
            if splits:
                c_factor = splits[0].lower_factor
        i, j = loops
        i, vi = sch.split(i, factors=[None, c_factor], preserve_unit_iters=True)
        bi, ti = sch.split(i, factors=[None, len_ty], preserve_unit_iters=True)
        bj, tj = sch.split(j, factors=[None, len_tx], preserve_unit_iters=True)
        sch.reorder(bi, bj, ti, tj, vi)
        sch.bind(bi, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        sch.bind(ti, "threadIdx.y")
        sch.bind(tj, "threadIdx.x")
        len_vec = min(4, c_factor)
        _, vi = sch.split(vi, factors=[None, len_vec])
        if len_vec > 1:
            sch.vectorize(vi)
        # the tile read into shared memory, rows padded by one word against bank conflicts
        cache = sch.cache_read(transpose, read_buffer_index=0, storage_scope="shared")
        sch.compute_at(cache, bj)
        fused = sch.fuse(*sch.get_loops(cache)[2:])
        _, ty, tx, v = sch.split(fused, factors=[None, len_ty, len_tx, c_factor])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.unroll(v)
        sch.storage_align(block=cache, buffer_index=0, axis=0, factor=32, offset=1)
        sch.annotate(bi, ann_key="pragma_auto_unroll_max_step", ann_val=unroll_depth)
        sch.annotate(bi, ann_key="pragma_unroll_explicit", ann_val=1)
        if prologue is not None:
            sch.compute_inline(prologue)
        return sch


__all__ = ["Transpose"]
