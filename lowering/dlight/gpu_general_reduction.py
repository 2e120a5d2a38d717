"""``GeneralReduction``: chains of reductions over the same rows ending in an elementwise block
(softmax, layer norm, variance), as TVM's ``dl.gpu.GeneralReduction`` schedules them.

Every block shares the leading spatial loops, fused into one ``blockIdx.x``: each thread block
computes one row. The last block's innermost loop and each reduction's trailing reduction loops
are split by the thread count, the threads running ``threadIdx.x`` over the row; the
intermediate results live in shared memory.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import IntImm, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.structural import structural_equal
from ...ir.visitor import collect
from ..schedule import Schedule
from ..schedule.layout import IndexMap
from .gpu_base import (GPUBlockInfo, GPURule, describe, normalize_prim_func, target_kind,
                       try_inline_contiguous_spatial)


class GeneralReduction(GPURule):
    name = "GeneralReduction"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        kind = target_kind(target)
        len_tx = 256 if kind in ("cuda", "opencl") else 64
        unroll_depth = 256 if kind == "cuda" else 64
        sch = Schedule(func)
        infos = try_inline_contiguous_spatial(sch, normalize_prim_func(sch))
        if not infos:
            return None
        dom_kind = infos[0].dom_kind()
        num_leading_s = len(dom_kind) - len(dom_kind.lstrip("S"))
        num_trailing_r = len(dom_kind) - len(dom_kind.rstrip("R"))
        last = infos[-1]
        if len(last.iters) < len(dom_kind):
            if not last.iters:  # a scalar result: every block in one thread
                _private_buffers_local(sch, infos)
                for i, info in enumerate(infos):
                    sch.bind(sch.add_unit_loop(info.rv), "blockIdx.x" if i == 0 else "threadIdx.x")
                return sch
            sch.transform_block_layout(last.rv, _align_layout(infos[0], last))
            last = describe(sch, last.rv, last.reduction_block)
        if (num_trailing_r == 0 or any(b.dom_kind() != dom_kind for b in infos[1:-1])
                or not last.is_injective() or len(last.iters) > len(dom_kind)):
            return None
        if "R" not in last.dom_kind():
            _spatial_loops_first(sch, infos)
        loops = sch.get_loops(last.rv)
        bx = sch.fuse(*loops[:num_leading_s])
        r_loop, tx = sch.split(loops[-1], [None, len_tx])
        sch.reorder(tx, r_loop)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        _unroll(sch, r_loop, unroll_depth)
        for info in reversed(infos[:-1]):
            block = info.rv
            for i in range(len(sch.get(block).writes)):
                sch.set_scope(block, buffer_index=i, storage_scope="shared")
            sch.compute_at(block, bx, preserve_unit_loops=True)
            r_loop = sch.fuse(*sch.get_loops(block)[-num_trailing_r:])
            r_loop, tx = sch.split(r_loop, [None, len_tx])
            sch.reorder(tx, r_loop)
            sch.bind(tx, "threadIdx.x")
            _unroll(sch, r_loop, unroll_depth)
        return sch


def _private_buffers_local(sch: Schedule, infos: list[GPUBlockInfo]) -> None:
    """A buffer that a block without real loops allocates and writes and no other block touches
    lives in registers (``local``): its kernel is the only one that sees it."""
    blocks = [sch.get(info.rv) for info in infos]
    allocated = {id(b) for b in sch.get(sch.get_block("root")).alloc_buffers}
    for k, (info, block) in enumerate(zip(infos[:-1], blocks[:-1])):
        if not all(is_const_int(sch.get(lp).extent, 1) for lp in sch.get_loops(info.rv)):
            continue
        elsewhere = {id(r.buffer) for j, other in enumerate(blocks) if j != k for r in (*other.reads, *other.writes)}
        for i, w in enumerate(block.writes):
            if w.buffer.scope == "global" and id(w.buffer) in allocated and id(w.buffer) not in elsewhere:
                sch.set_scope(info.rv, i, "local")


def _unroll(sch: Schedule, loop: Any, depth: int) -> None:
    sch.annotate(loop, ann_key="pragma_auto_unroll_max_step", ann_val=depth)
    sch.annotate(loop, ann_key="pragma_unroll_explicit", ann_val=1)


def _align_layout(first: GPUBlockInfo, last: GPUBlockInfo) -> IndexMap:
    """A map giving the last block as many iterators as the first: each of its iterators at the
    first position of equal extent (in order), zeros elsewhere; zeros in front when they do not
    all match."""
    inputs = [Var(f"i{k}", it.var.dtype) for k, it in enumerate(last.iters)]
    dtype = inputs[0].dtype
    matched: list = []
    for it in first.iters:
        k = len(matched) - matched.count(None)
        if k < len(inputs) and _same_extent(it.dom, last.iters[k].dom):
            matched.append(inputs[k])
        else:
            matched.append(None)
    if len(matched) - matched.count(None) == len(inputs):
        outputs = [const(0, dtype) if m is None else m for m in matched]
    else:
        outputs = [const(0, dtype)] * (len(first.iters) - len(inputs)) + inputs
    return IndexMap(inputs, outputs)


def _same_extent(a: Any, b: Any) -> bool:
    return structural_equal(a, b) or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)


def _spatial_loops_first(sch: Schedule, infos: list[GPUBlockInfo]) -> None:
    """In the last (spatial) block, the loops indexing what the reductions wrote (and unit loops)
    go outermost, so they line up with the reductions' spatial loops."""
    reduced = {id(w.buffer) for info in infos[:-1] for w in sch.get(info.rv).writes}
    block = sch.get(infos[-1].rv)
    loops = sch.get_loops(infos[-1].rv)
    loop_of = {id(iv.var): sch.get(lp).loop_var for iv, lp in zip(block.iter_vars, loops)}
    spatial = set()
    for region in block.reads:
        if id(region.buffer) in reduced:
            for r in region.region:
                for v in collect(r.min, Var) + collect(r.extent, Var):
                    if id(v) in loop_of:
                        spatial.add(id(loop_of[id(v)]))
    first, rest = [], []
    for lp in loops:
        loop = sch.get(lp)
        (first if id(loop.loop_var) in spatial or _same_extent(loop.extent, const(1, "int64")) else rest).append(lp)
    sch.reorder(*first, *rest)


__all__ = ["GeneralReduction"]
