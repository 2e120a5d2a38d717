"""The default GPU schedule of a matrix-vector product (TVM 0.27's ``dl.gpu.GEMV``, its
inner-reduction form under a cuda target).

The rule takes a function whose one reduction block computes ``y[(b,) s] += W[(b,) s, r] *
x[(b,) r]`` (after cheap spatial blocks are inlined; an injective epilogue may follow), with the
reduction innermost in the matrix's layout. The block's loops are normalized to ``(batch, s, r,
c)``; then each thread block computes ``TS`` outputs (``threadIdx.y``), each with ``TR``
threads along ``r`` (``threadIdx.x``) that accumulate ``VEC_C``-wide partial sums in registers
(two ``rfactor`` stages), the vector is loaded into registers in ``VEC_LOAD``-byte pieces, the
matrix staged in shared memory when it fits, and the partial sums are reduced across the
threads at the end. ``TS, TR`` are 16 x 32 for constant sizes and 1 x 64 for symbolic ones.

tvms schedules what TVM schedules this way; a reduction that is not innermost (TVM's
outer-reduction schedule), a grouped reduction index, and targets other than cuda are declined.
"""
from __future__ import annotations

from typing import Any

from ...ir.buffer import BufferRegion
from ...ir.expr import Add, BufferLoad, IntImm, PrimExpr, Var
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BufferStore
from ...ir.visitor import collect
from ..schedule import BlockRV, Schedule, ScheduleError
from .gpu_base import GPUBlockInfo, normalize_prim_func
from .gpu_utils import (GPURule, dtype_bytes, get_extent, max_num_threads, max_shared_memory_per_block, target_kind,
                        try_inline_contiguous_spatial)

UNROLL = 256  # (cuda: the unroll annotation of the reduction loops)


def max_factor(n: Any, factors: list[int]) -> int:
    """The largest of ``factors`` dividing ``n`` (1 when none does)."""
    return next((f for f in sorted(factors, reverse=True) if isinstance(n, int) and n % f == 0), 1)


def iter_vars_used(block: Block, region: BufferRegion) -> set[int]:
    """The block iterators the (point) region's indices use."""
    own = {id(iv.var) for iv in block.iter_vars}
    return {id(v) for r in region.region for v in collect(r.min, Var) if id(v) in own}


def reduction_operand(block: Block) -> PrimExpr | None:
    """``Y`` of a body ``X[..] = X[..] + Y``."""
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    acc = store.value.a
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer and len(acc.indices) == len(store.indices)
            and all(a is b for a, b in zip(acc.indices, store.indices))):
        return None
    return store.value.b


def _point_regions(block: Block) -> bool:
    return all(isinstance(r.extent, IntImm) and r.extent.value == 1
               for region in (*block.reads, *block.writes) for r in region.region)


def vector_buffers(sch: Schedule, info: GPUBlockInfo) -> list | None:
    """The buffers read with fewer iterators than the block has (the vectors), when the block
    is a matrix-vector product; None otherwise (TVM's ``is_gemv``)."""
    block = sch.get(info.rv)
    if not (info.is_reduction() and len(block.reads) >= 2 and len(block.writes) == 1
            and reduction_operand(block) is not None and _point_regions(block)
            and iter_vars_used(block, block.writes[0])):
        return None
    count = len(block.iter_vars)
    found = [r.buffer for r in block.reads if 0 < len(iter_vars_used(block, r)) < count]
    return found if 0 < len(found) < len(block.reads) else None


def dominant_read(block: Block) -> BufferRegion:
    """The read using the most iterators (the first of those)."""
    return max(block.reads, key=lambda r: (len(iter_vars_used(block, r)), -block.reads.index(r)))


def normalize(sch: Schedule, info: GPUBlockInfo) -> bool | None:
    """Order the block's loops ``(batch, s, r, c)`` and fuse each group (a unit loop where a group
    is empty); whether the reduction is innermost in the dominant read. None when the dominant
    read's indices are not plain iterators (the affine forms TVM also takes are declined)."""
    block = sch.get(info.rv)
    read = dominant_read(block)
    kinds = {id(it.var): it for it in info.iters}
    axes = [r.min for r in read.region if not isinstance(r.min, IntImm)]
    if not axes or any(not isinstance(a, Var) or id(a) not in kinds for a in axes):
        return None
    used = [iter_vars_used(block, region) for region in (*block.writes, *block.reads)]
    batch, spatial, reduce = [], [], []
    for var in axes:
        it = kinds[id(var)]
        if it.kind == "R":
            reduce.append(it.loop_rv)
        elif all(id(var) in u for u in used):
            batch.append(it.loop_rv)
        else:
            spatial.append(it.loop_rv)
    if not spatial or not reduce:
        return None
    inner = kinds[id(axes[-1])].kind == "R"
    c_loops = [sch.add_unit_loop(info.rv)]
    batch = batch or [sch.add_unit_loop(info.rv)]
    sch.reorder(*batch, *spatial, *reduce, *c_loops)
    sch.fuse(*batch)
    sch.fuse(*spatial)
    sch.fuse(*reduce)
    return inner


def matched_gemv(sch: Schedule) -> tuple[GPUBlockInfo, GPUBlockInfo | None, list] | None:
    """The product block, its epilogue and its vector buffers, after inlining (TVM's checks)."""
    blocks = try_inline_contiguous_spatial(sch, normalize_prim_func(sch))
    if blocks is None or len(blocks) not in (1, 2):
        return None
    epilogue = blocks[1] if len(blocks) == 2 else None
    if epilogue is not None and not epilogue.is_injective():
        return None
    info = blocks[0]
    if len(info.iters) not in (2, 3):  # [B, S, R] = [B, S, R] * [B, R], or [S, R] = [S, R] * [R]
        return None
    vectors = vector_buffers(sch, info)
    return None if vectors is None else (info, epilogue, vectors)


class GEMV(GPURule):
    """Matrix-vector products with cross-thread partial sums (see the module docstring)."""

    name = "GEMV"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        if target_kind(target) != "cuda":
            return None
        sch = Schedule(func)
        try:
            matched = matched_gemv(sch)
            if matched is None:
                return None
            info, epilogue, vectors = matched
            if normalize(sch, info) is not True:
                return None
            return schedule_inner_reduction(sch, target, info.rv, vectors, epilogue)
        except ScheduleError:
            return None


def schedule_inner_reduction(sch: Schedule, target: Any, gemv: BlockRV, vectors: list,
                             epilogue: GPUBlockInfo | None) -> Schedule | None:
    batch, s, r, c = sch.get_loops(gemv)
    len_s = get_extent(sch, batch) * get_extent(sch, s) if isinstance(get_extent(sch, batch), int) and \
        isinstance(get_extent(sch, s), int) else None
    len_r, len_c = get_extent(sch, r), get_extent(sch, c)
    ts, tr = (16, 32) if len_s is not None else (1, 64)
    while ts * tr > max_num_threads(target):
        if ts > 1:
            ts //= 2
        else:
            tr //= 2
    tile_s = 1
    tile_r = len_c if len_c > 1 else max(max_factor(len_r, [tr, tr * 2, tr * 4, tr * 8]) // tr, 1)
    vec_c = min(max_factor(tile_r, [1, 2, 4, 8]), 4)
    return _apply(sch, target, gemv, vectors, epilogue, ts, tr, tile_s, tile_r, vec_c)


def _apply(sch: Schedule, target: Any, gemv: BlockRV, vectors: list, epilogue: GPUBlockInfo | None,
           ts: int, tr: int, tile_s: int, tile_r: int, vec_c: int) -> Schedule | None:
    tag_s, tag_r, load_v_vec, vec_load = "threadIdx.y", "threadIdx.x", 8, 4
    unit, s, r, c = sch.get_loops(gemv)
    s = sch.fuse(unit, s)
    r = sch.fuse(r, c)
    rf, rf2, (bx, ts_, tr_, r) = rfactor_partial_sums(sch, gemv, s, r, (ts, tr, tile_s, tile_r, vec_c), 0)

    load_v_shared = fit_in_shared_memory(vectors, target)
    aq_local = sch.cache_read(rf, 1, "local")
    depth = len(sch.get_loops(aq_local))
    sch.compute_at(aq_local, r, preserve_unit_loops=True)
    cache_loops = sch.get_loops(aq_local)[-depth:]
    fused = cache_loops[0] if len(cache_loops) == 1 else sch.fuse(*cache_loops[-2:])
    aq_vec = max(1, vec_load // dtype_bytes(sch.get(aq_local).reads[0].buffer.dtype))
    _, vec = sch.split(fused, [None, aq_vec], preserve_unit_iters=True)
    sch.vectorize(vec)

    if load_v_shared and len(vectors) != 1:
        return None
    v_shared = stage_in_shared_memory(sch, rf, tr_, ts, tr, load_v_vec) if load_v_shared else None

    # tile_s * tr * vec_c partial sums to tile_s * tr
    sch.reverse_compute_at(rf2, bx, preserve_unit_loops=True)
    tr_, vec_c_, *rest = sch.get_loops(rf2)[1:]
    ts_o, ts_i, tile_s_ = sch.split(sch.fuse(*rest), [None, ts, tile_s], preserve_unit_iters=True)
    tile_s_, vec_s = sch.split(tile_s_, [None, max_factor(tile_s, [1, 2, 4, 8])], preserve_unit_iters=True)
    ts_ = sch.fuse(ts_o, ts_i)
    sch.reorder(ts_, tr_, tile_s_, vec_s, vec_c_)
    sch.bind(ts_, tag_s)
    sch.bind(tr_, tag_r)
    sch.vectorize(vec_s)

    # tile_s * tr partial sums to tile_s
    sch.reverse_compute_at(gemv, bx, preserve_unit_loops=True)
    tr_, *rest = sch.get_loops(gemv)[1:]
    ts_o, ts_i, tile_s_ = sch.split(sch.fuse(*rest), [None, ts, tile_s], preserve_unit_iters=True)
    ts_ = sch.fuse(ts_o, ts_i)
    sch.reorder(tile_s_, ts_, tr_)
    sch.bind(ts_, tag_s)
    sch.bind(tr_, tag_r)

    finish_partial_sums(sch, rf, rf2, v_shared, 3)

    if epilogue is not None:
        schedule_epilogue(sch, gemv, epilogue.rv, bx, ts, tr, tile_s, tag_s)
    return sch


def rfactor_partial_sums(sch: Schedule, gemv: BlockRV, s: Any, r: Any, tiles: tuple, lead: int) -> tuple:
    """Each thread block computes ``ts * tile_s`` outputs, ``tr`` threads each summing ``vec_c``
    lanes of the reduction: an rfactor to ``tr * vec_c`` partial sums (its loops bound and its
    lanes vectorized), then one to ``tr``. The two rfactor blocks and the first one's loops
    ``(bx, ts, tr, r)`` (after ``lead`` loops of its own, the batch of a low-batch product)."""
    ts, tr, tile_s, tile_r, vec_c = tiles
    sch.split(s, [None, ts, tile_s], preserve_unit_iters=True)
    r, tr_, tile_r_vec_n, vec_c_ = sch.split(r, [None, tr, tile_r // vec_c, vec_c], preserve_unit_iters=True)
    sch.reorder(r, tile_r_vec_n, tr_, vec_c_)
    rf = sch.rfactor(sch.fuse(tr_, vec_c_), 0)
    tr_, _ = sch.split(sch.get_loops(gemv)[lead + 3], [tr, None], preserve_unit_iters=True)
    rf2 = sch.rfactor(tr_, 0)
    bx, ts_, tile_s_, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)[lead:]
    tr_, vec_c_ = sch.split(tr_vec_c, [tr, None], preserve_unit_iters=True)
    sch.reorder(bx, ts_, tr_, r, tile_s_, tile_r_vec_n, vec_c_)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ts_, "threadIdx.y")
    sch.bind(tr_, "threadIdx.x")
    sch.vectorize(vec_c_)
    return rf, rf2, (bx, ts_, tr_, r)


def fit_in_shared_memory(vectors: list, target: Any) -> bool:
    """Whether the vectors, of constant shapes, fit in a thread block's shared memory."""
    total = 0
    for buf in vectors:
        if not all(isinstance(dim, IntImm) for dim in buf.shape):
            return False
        size = dtype_bytes(buf.dtype)
        for dim in buf.shape:
            size *= dim.value
        total += size
    return total <= max_shared_memory_per_block(target)


def stage_in_shared_memory(sch: Schedule, rf: BlockRV, tr_loop: Any, ts: int, tr: int, load_v_vec: int) -> BlockRV:
    """Copy the vector (the partial sums' first read) into shared memory at each ``tr`` thread,
    all the block's threads loading ``width``-wide pieces."""
    v_shared = sch.cache_read(rf, 0, "shared")
    sch.compute_at(v_shared, tr_loop, preserve_unit_loops=True)
    last = sch.get_loops(v_shared)[-1]
    extent = get_extent(sch, last)
    width = max(min(max_factor(extent, [ts * tr, ts * tr * 2, ts * tr * 4, ts * tr * 8]) // ts // tr,
                    load_v_vec), 1) if isinstance(extent, int) else load_v_vec
    _, ty, tx, vec = sch.split(last, [None, ts, tr, width], preserve_unit_iters=True)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return v_shared


def finish_partial_sums(sch: Schedule, rf: BlockRV, rf2: BlockRV, v_shared: BlockRV | None, at: int) -> None:
    """Split both partial-sum blocks' initialization out, keep their sums in registers and unroll
    their loop ``at`` (and the shared copy's outer loop)."""
    sch.decompose_reduction(rf, sch.get_loops(rf)[at])
    sch.decompose_reduction(rf2, sch.get_loops(rf2)[-1])
    sch.set_scope(rf, 0, "local")
    sch.set_scope(rf2, 0, "local")
    for block in (rf, rf2):
        loop = sch.get_loops(block)[at]
        sch.annotate(loop, "pragma_auto_unroll_max_step", UNROLL)
        sch.annotate(loop, "pragma_unroll_explicit", 1)
    if v_shared is not None:
        loop = sch.get_loops(v_shared)[-4]
        sch.annotate(loop, "pragma_unroll_explicit", UNROLL)
        sch.annotate(loop, "pragma_vectorize", 1)


def is_broadcast_epilogue(sch: Schedule, block: BlockRV, epilogue: BlockRV) -> bool:
    """Whether the epilogue reads the product with fewer iterators than it has (of extent > 1)."""
    written = {id(w.buffer) for w in sch.get(block).writes}
    ep = sch.get(epilogue)
    count = sum(1 for iv in ep.iter_vars if not (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1))
    return any(id(r.buffer) in written and len(iter_vars_used(ep, r)) < count for r in ep.reads)


def schedule_epilogue(sch: Schedule, gemv: BlockRV, epilogue: BlockRV, bx: Any, ts: int, tr: int,
                      tile_s: int, tag_s: str) -> None:
    """After the last reduction, in the same thread block: a broadcast epilogue reads the
    products from shared memory, spread over the ``x`` threads; an elementwise one computes each
    output where it was reduced."""
    if is_broadcast_epilogue(sch, gemv, epilogue):
        sch.reverse_compute_at(epilogue, bx)
        sch.set_scope(gemv, 0, "shared")
        _, _, *s = sch.get_loops(epilogue)
        _, tx = sch.split(sch.fuse(*s), [None, tr])
        sch.bind(tx, "threadIdx.x")
        return
    sch.reverse_compute_at(epilogue, bx, preserve_unit_loops=True)
    sch.fuse(*sch.get_loops(epilogue)[1:])
    ts_tile_s = sch.get_loops(epilogue)[-1]
    ts_o, ts_i, _ = sch.split(ts_tile_s, [None, ts, tile_s], preserve_unit_iters=True)
    sch.bind(sch.fuse(ts_o, ts_i), tag_s)
    sch.set_scope(gemv, 0, "local")


__all__ = ["GEMV", "is_broadcast_epilogue", "max_factor", "normalize", "reduction_operand", "vector_buffers"]
