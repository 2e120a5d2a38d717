"""``Reduction``: one reduction (a sum ``X[s] = X[s] + f(...)``), with an optional elementwise
or broadcasting epilogue, as TVM's ``dl.gpu.Reduction`` schedules it.

The spatial iterators are fused into one loop and so are the reduction ones, in the order the
block's dominant read walks memory. When the read is contiguous along the reduction
("inner reduction"), each block of threads reduces one output: ``rfactor`` gives every
``threadIdx.x`` a partial sum in registers, and a cross-thread step adds them. When it is
contiguous along a spatial iterator ("inner spatial"), ``threadIdx.x`` runs over up to 16
outputs and ``threadIdx.y`` over 16 slices of the reduction.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import Add, BufferLoad, IntImm, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BufferStore
from ...ir.structural import structural_equal
from ..schedule import BlockRV, Schedule
from .gpu_base import (GPUBlockInfo, GPURule, detect_dominant_read, is_broadcast_epilogue, iter_sum,
                       normalize_prim_func, suggest_threads_per_block, try_inline_contiguous_spatial)


def _is_sum(block: Block) -> bool:
    """``X[i] = X[i] + y``, the left operand the very element stored."""
    store = block.body
    return (isinstance(store, BufferStore) and isinstance(store.value, Add)
            and isinstance(store.value.a, BufferLoad) and store.value.a.buffer is store.buffer
            and structural_equal(tuple(store.value.a.indices), tuple(store.indices), map_free_vars=True))


class Reduction(GPURule):
    name = "Reduction"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        sch = Schedule(func)
        infos = try_inline_contiguous_spatial(sch, normalize_prim_func(sch))
        if infos is None or len(infos) not in (1, 2):
            return None
        epilogue = infos[1] if len(infos) == 2 else None
        if epilogue is not None and not epilogue.is_injective():
            return None
        info = infos[0]
        block = sch.get(info.rv)
        if (not info.is_reduction() or "R" not in info.dom_kind() or len(block.writes) != 1
                or not _is_sum(block)):
            return None
        read = detect_dominant_read(block)
        splits = None if read is None else iter_sum(read, {id(iv.var): iv.dom.extent for iv in block.iter_vars})
        domains = None if splits is None else _spatial_domains(info, splits)
        if domains is None:
            return None
        plan = _normalize(sch, info, splits)
        if plan is None:
            return None
        inner_reduction, c_factor, loop_order, s_split_index = plan
        if inner_reduction:
            _inner_reduction(sch, target, info.rv, c_factor, epilogue, loop_order, s_split_index)
        elif _write_back_stays_affine(domains):
            _inner_spatial(sch, info.rv, domains[-1], c_factor, epilogue, loop_order, s_split_index)
        else:
            return None
        return sch


def _spatial_domains(info: GPUBlockInfo, splits: list) -> list | None:
    """The extents of the spatial loops ``_normalize`` fuses, in the read's order (a split
    iterator counts with its quotient's extent, unit iterators the read skips at the end)."""
    by_var = {id(it.var): it for it in info.iters}
    domains, seen = [], set()
    for split in splits:
        it = by_var.get(id(split.source))
        if it is None:
            return None
        if it.kind == "S":
            if id(it.var) in seen:
                return None
            seen.add(id(it.var))
            domains.append(split.extent if split.lower_factor > 1 else it.dom)
    for it in info.iters:
        if it.kind == "S" and id(it.var) not in seen:
            if not it.dom_is(1):
                return None
            domains.append(it.dom)
    return domains if len(domains) == sum(it.kind == "S" for it in info.iters) else None


def _inner_spatial_threads(extent: Any) -> int:
    """The largest divisor of the innermost spatial extent up to 16 (1 for a symbolic one)."""
    if not isinstance(extent, IntImm):
        return 1
    return next(k for k in range(16, 0, -1) if extent.value % k == 0)


def _write_back_stays_affine(domains: list) -> bool:
    """Whether the write-back's bindings stay quasi-affine: fewer than three div/mod parts, one
    per non-unit outer dimension and one for a partial innermost tile."""
    parts = sum(1 for d in domains[:-1] if not is_const_int(d, 1))
    inner = domains[-1]
    if not isinstance(inner, IntImm) or _inner_spatial_threads(inner) < inner.value:
        parts += 1
    return parts < 3


def _normalize(sch: Schedule, info: GPUBlockInfo, splits: list) -> tuple | None:
    """Fuse the spatial loops into one and the reduction loops into one, in the read's order (a
    split iterator ``i // c`` gets its loop split by ``c``, the ``c`` part innermost); whether the
    innermost read iterator reduces, the spatial split factor, and where each spatial iterator's
    loop went."""
    by_var = {id(it.var): it for it in info.iters}
    s_loops, r_loops, c_loops, c_factor = [], [], [], None
    s_split_loop = s_split_index = None
    inner_reduction = False
    for split in splits:
        it = by_var.pop(id(split.source))
        loop = it.loop_rv
        inner_reduction = it.kind == "R"
        if split.lower_factor > 1:
            if c_loops:
                return None
            s_split_loop, s_split_index = loop, len(s_loops)
            loop, c_loop = sch.split(loop, factors=[None, split.lower_factor])
            c_loops.append(c_loop)
            if not inner_reduction:
                c_factor = split.lower_factor
        (r_loops if inner_reduction else s_loops).append(loop)
    for it in by_var.values():
        if it.kind != "S" or not it.dom_is(1):
            return None
        s_loops.append(it.loop_rv)
    spatial_loops = [it.loop_rv for it in info.iters if it.loop_rv in s_loops or it.loop_rv is s_split_loop]
    loop_order = {}
    for i, loop in enumerate(spatial_loops):
        for j, s_loop in enumerate(s_loops):
            if loop is s_loop:
                loop_order[i] = j
                break
            if loop is s_split_loop:
                loop_order[i] = s_split_index
                break
    if not s_loops or not r_loops or len(s_loops) != sum(it.kind == "S" for it in info.iters):
        return None
    if not c_loops:
        c_loops = [sch.add_unit_loop(info.rv)]
    sch.reorder(*s_loops, *r_loops, *c_loops)
    sch.fuse(*s_loops)
    sch.fuse(*r_loops)
    return inner_reduction, c_factor, loop_order, s_split_index


def _order_spatial(sch: Schedule, s: list, loop_order: dict, s_split_index: int, factor: int) -> tuple:
    """Put the write-back's spatial loops back in the reduction's order, split off the unrolled
    part of the split one, and fuse the rest: (fused loop, the split-off part)."""
    ordered = [s[loop_order[i]] for i in range(len(s))]
    sch.reorder(*ordered)
    ordered[s_split_index], c = sch.split(ordered[s_split_index], factors=[None, factor])
    sch.reorder(*ordered, c)
    return sch.fuse(*ordered), c


def _inner_reduction(sch: Schedule, target: Any, block: BlockRV, unroll_spatial_factor: int | None,
                     epilogue: GPUBlockInfo | None, loop_order: dict, s_split_index: int | None) -> None:
    _, r, _ = sch.get_loops(block)
    (len_tx,) = suggest_threads_per_block(target, [sch.get(r).extent])
    _, tx = sch.split(r, factors=[None, len_tx])
    rf = sch.rfactor(tx, 0)  # each thread's partial sum
    bx, r, tx, _ = sch.get_loops(rf)
    sch.reorder(bx, tx, r)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.annotate(tx, ann_key="pragma_auto_unroll_max_step", ann_val=256)
    sch.annotate(tx, ann_key="pragma_unroll_explicit", ann_val=1)
    sch.set_scope(rf, 0, "local")
    sch.decompose_reduction(rf, r)
    sch.reverse_compute_at(block, bx, preserve_unit_loops=True)  # the sum of the partial sums
    _, tx, *s = sch.get_loops(block)
    if unroll_spatial_factor:
        fused, c = _order_spatial(sch, s, loop_order, s_split_index, unroll_spatial_factor)
        sch.reorder(fused, tx, c)
    else:
        sch.reorder(sch.fuse(*s), tx)
    sch.bind(tx, "threadIdx.x")
    if epilogue is not None:
        sch.reverse_compute_at(epilogue.rv, bx, preserve_unit_loops=True)
        if is_broadcast_epilogue(sch, block, epilogue.rv):
            sch.set_scope(block, 0, "shared")  # every thread reads each sum
            _, *s = sch.get_loops(epilogue.rv)
            _, tx = sch.split(sch.fuse(*s), factors=[None, len_tx])
            sch.bind(tx, "threadIdx.x")
        else:
            sch.set_scope(block, 0, "local")


def _inner_spatial(sch: Schedule, block: BlockRV, s_factor: Any, unroll_spatial_factor: int | None,
                   epilogue: GPUBlockInfo | None, loop_order: dict, s_split_index: int | None) -> None:
    s, r, _ = sch.get_loops(block)
    # threadIdx.x divides the innermost spatial extent, so the write-back fits in the same scope
    len_tx, len_ty = _inner_spatial_threads(s_factor), 16
    sch.split(s, factors=[None, len_tx])
    _, ty = sch.split(r, factors=[None, len_ty])
    rf = sch.rfactor(ty, 0)
    bx, tx, r, ty, _ = sch.get_loops(rf)
    sch.reorder(bx, tx, ty, r)
    sch.bind(tx, "threadIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.set_scope(rf, 0, "local")
    sch.decompose_reduction(rf, r)
    sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
    _, r, *s = sch.get_loops(block)
    if unroll_spatial_factor:
        fused, c = _order_spatial(sch, s, loop_order, s_split_index, unroll_spatial_factor)
        sch.reorder(fused, c, r)
    else:
        fused = sch.fuse(*s)
        sch.reorder(fused, r)
    sch.bind(fused, "threadIdx.x")
    sch.bind(r, "threadIdx.y")
    if epilogue is not None:
        sch.reverse_compute_at(epilogue.rv, bx, preserve_unit_loops=True)
        _, *s = sch.get_loops(epilogue.rv)
        if is_broadcast_epilogue(sch, block, epilogue.rv):
            sch.set_scope(block, 0, "shared")
            _, tx, ty = sch.split(sch.fuse(*s), factors=[None, len_tx, len_ty])
            sch.bind(tx, "threadIdx.x")
            sch.bind(ty, "threadIdx.y")
        else:  # elementwise: the spatial part left goes to threadIdx.x
            sch.set_scope(block, 0, "local")
            tx, _ = sch.split(sch.fuse(*s), factors=[len_tx, None])
            sch.bind(tx, "threadIdx.x")


__all__ = ["Reduction"]
