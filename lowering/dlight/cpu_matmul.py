"""The default CPU schedule of a matmul: ``C[b.., i, j] += A[b.., i, k] * B[b.., k, j]`` (or B
stored as ``[j, k]``), with injective prologues inlined and an elementwise epilogue (bias, relu)
computed per row panel.

The loops become, outermost first (the BLAS way, sized for a vector width of ``w`` lanes)::

    b.. i_0 (parallel) | k_0 | j_0 | i_1 | k_1 | i_2 (unrolled, MR) | j_1 (vectorized, 2w)

so that a row panel of ``MC`` rows is one thread's work, a ``KC`` slice of B's panel (``KC`` x 2w,
16 KiB) stays in L1 while ``MC / MR`` register tiles use it, and each register tile (MR x 2w
accumulators: 12 ymm registers on AVX2, enough independent FMA chains to cover the FMA latency
of both pipes; 8 measured 15-20% slower) stays in registers across its ``k_1`` loop: per k, MR
broadcasts of A and two vector loads of B feed 2 MR FMAs. B is first copied into contiguous
panels ``[j // 2w, k, j % 2w]`` (a cache_read stage with transform_layout), so the inner loop
reads it with unit stride; the init is a block of its own (decompose_reduction).

Sizes that the tiles do not divide, and symbolic sizes, get guarded tails (``T.where``); the
lowering's UnswitchGuards tests a tile's row guards once, outside its k loop, so only the tail
tile pays for them. The rule declines what is not a matmul, and GEMV shapes (an ``i`` or ``j``
extent of 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.expr import GE, Add, BufferLoad, Cast, FloorDiv, FloorMod, Mul, PrimExpr, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore, IfThenElse
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .analysis import BlockInfo, CPURule, const_int, inline_cheap_blocks, num_threads, vector_lanes

MR = 6  # rows of the register tile (unrolled): 6 x 2 vectors of accumulators, 12 of 16 ymm
MC = 72  # rows of a thread's panel: its slice of A (MC x KC) stays in L2
KC_RANGE = (128, 256)  # the k slice: a divisor of K in this range (no guard in the hot loop);
# KC x 2 vectors of B (16 KiB at KC = 256) then stay in L1 (KC = 512 measured 2x slower)
PACK_MIN_ROWS = 16  # below this many rows packing B costs more than the strided loads


@dataclass(frozen=True)
class MatmulShape:
    """Which iterators of the main block are the batch ones, i, j and k, and how B is laid out."""

    batch: tuple[int, ...]  # positions of the batch iterators among the block's iterators
    i: int
    j: int
    k: int
    b_read: int  # index of B among the block's reads
    b_transposed: bool  # B is indexed [.., j, k]


class Matmul(CPURule):
    """Register-tiled, B-packed, parallel matmul (see the module docstring)."""

    name = "Matmul"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc):
            return None
        sch = Schedule(func)
        try:
            blocks = inline_cheap_blocks(sch)
        except ScheduleError:
            return None
        main = [b for b in blocks if b.block.init is not None or "R" in b.kinds]
        if len(main) != 1 or not _one_loop_per_iterator(main[0]) or not main[0].is_reduction():
            return None
        info = main[0]
        shape = match_matmul(info)
        if shape is None or any(const_int(info.iters[p].extent) == 1 for p in (shape.i, shape.j)):
            return None  # not a matmul, or a matrix-vector product (the GEMV rule's)
        epilogues = [b for b in blocks if b is not info]
        if any(not b.is_injective() or not b.trivial for b in epilogues) or blocks[0] is not info:
            return None  # a prologue that did not inline, or a second reduction
        lanes = vector_lanes(target, info.write().buffer.dtype)
        try:
            panel = schedule_matmul(sch, info, shape, lanes, num_threads(target))
        except ScheduleError:  # e.g. loops of symbolic extent in an order reorder can't change
            return None
        for epilogue in epilogues:
            schedule_epilogue(sch, panel, epilogue, lanes)
        rows = info.iters[shape.i].extent
        if shape.b_transposed and const_int(rows) is None:
            return _by_row_count(func, rows, sch, target)
        return sch


def _by_row_count(func: PrimFunc, rows: PrimExpr, packed: Schedule, target: Any) -> Schedule:
    """A symbolic row count with B stored ``[j, k]`` (a linear layer over a batch ``n``): packing
    B pays for many rows, but at one row it costs ten times the product. The function then runs,
    lowered, the packed schedule when ``rows >= PACK_MIN_ROWS`` and else the row-by-row dot
    products of the Reduction rule (vector partial sums along ``k``, B read as stored)."""
    from ..tir import lower_for_codegen
    from .cpu_reduction import Reduction

    few = Reduction().apply(func, target, False)
    if few is None:
        return packed
    many_rows, few_rows = (lower_for_codegen(s.mod["main"]) for s in (packed, few))
    body = IfThenElse(GE(rows, const(PACK_MIN_ROWS, rows.dtype)), many_rows.body, few_rows.body)
    return Schedule(many_rows.with_changes(body=body))


def _one_loop_per_iterator(info: BlockInfo) -> bool:
    """Each iterator is bound to a loop of its own, in any order (an untiled block)."""
    return len(info.loops) == len(info.iters) and all(it.loop is not None for it in info.iters)


def match_matmul(info: BlockInfo) -> MatmulShape | None:
    """The roles of the block's iterators when its body is ``C[.., i, j] = C[.., i, j] + A[.., i, k]
    * B[.., k, j]`` (B may be ``[.., j, k]``, operands may be cast); None otherwise."""
    store = info.block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    acc, product = store.value.a, store.value.b
    if not _same_load(acc, store):
        acc, product = product, acc
    if not _same_load(acc, store) or not isinstance(product, Mul):
        return None
    loads = [_strip_cast(product.a), _strip_cast(product.b)]
    if not all(isinstance(x, BufferLoad) and all(isinstance(i, Var) for i in x.indices) for x in loads):
        return None
    position = {id(it.var): p for p, it in enumerate(info.iters)}
    reduce = [p for p, it in enumerate(info.iters) if it.kind == "R"]
    out = [position.get(id(v)) for v in store.indices]
    if len(reduce) != 1 or len(out) < 2 or None in out or len(set(out)) != len(out):
        return None
    k, (i, j), batch = reduce[0], out[-2:], tuple(out[:-2])
    if len(out) + 1 != len(info.iters):
        return None
    a_load, b_load = loads if _indexes(loads[0], position, i) else loads[::-1]
    a_pos = [position.get(id(v)) for v in a_load.indices]
    b_pos = [position.get(id(v)) for v in b_load.indices]
    if a_pos[-2:] != [i, k] or b_pos[-2:] not in ([k, j], [j, k]):
        return None
    if any(p not in batch for p in a_pos[:-2] + b_pos[:-2]):
        return None
    b_read = next((n for n, r in enumerate(info.block.reads) if r.buffer is b_load.buffer), None)
    if b_read is None or b_load.buffer is a_load.buffer:
        return None
    return MatmulShape(batch, i, j, k, b_read, b_pos[-2:] == [j, k])


def _strip_cast(e: PrimExpr) -> PrimExpr:
    return e.value if isinstance(e, Cast) else e


def _same_load(e: PrimExpr, store: BufferStore) -> bool:
    return (isinstance(e, BufferLoad) and e.buffer is store.buffer
            and all(a is b for a, b in zip(e.indices, store.indices)) and len(e.indices) == len(store.indices))


def _indexes(load: BufferLoad, position: dict, p: int) -> bool:
    return any(position.get(id(v)) == p for v in load.indices)


def k_slice(k_extent: int | None) -> int | None:
    """The k slice: the largest divisor of K in ``KC_RANGE`` (None: no slicing, K is small,
    symbolic or has no such divisor)."""
    low, high = KC_RANGE
    if k_extent is None or k_extent <= high:
        return None
    return next((kc for kc in range(high, low - 1, -1) if k_extent % kc == 0), None)


def schedule_matmul(sch: Schedule, info: BlockInfo, shape: MatmulShape, lanes: int, cores: int) -> LoopRV:
    """Tile, pack, decompose and parallelize the main block; the loop of one row panel."""
    loops = [it.loop for it in info.iters]  # (in iterator order)
    extent = [const_int(it.extent) for it in info.iters]
    m, n, kk = extent[shape.i], extent[shape.j], extent[shape.k]
    nr = 2 * lanes if n is None or n > 2 * lanes else n  # a narrow j is one vector of n lanes
    i_0, i_1, i_2 = sch.split(loops[shape.i], [None, rows_per_panel(m, cores) // MR, MR])
    j_0, j_1 = sch.split(loops[shape.j], [None, nr])
    kc = k_slice(kk)
    k_0, k_1 = sch.split(loops[shape.k], [None, kc]) if kc else (None, loops[shape.k])
    batch = [loops[p] for p in shape.batch]
    order = [*batch, i_0, *([k_0] if k_0 else []), j_0, i_1, k_1, i_2, j_1]
    reorder_inside(sch, info.rv, order)
    if packing_pays(shape, m, n, kk, nr):
        pack_b(sch, info.rv, shape, nr)
    init = sch.decompose_reduction(info.rv, k_0 if k_0 else k_1)
    sch.unroll(i_2)
    sch.vectorize(j_1)
    init_loops = sch.get_loops(init)
    sch.unroll(init_loops[-2])
    sch.vectorize(init_loops[-1])
    return parallel_outer(sch, [*batch, i_0])


def reorder_inside(sch: Schedule, block: BlockRV, order: list[LoopRV]) -> None:
    """Reorder the loops, leaving out those already outermost in place (a loop of symbolic
    extent can't be reordered)."""
    current = [sch.get(loop).loop_var for loop in sch.get_loops(block)]
    keep = 0
    while keep < len(order) and sch.get(order[keep]).loop_var is current[keep]:
        keep += 1
    if len(order) - keep > 1:
        sch.reorder(*order[keep:])


def rows_per_panel(m: int | None, cores: int) -> int:
    """About MC rows (whole register tiles), in a number of panels the cores share evenly:
    1024 rows make 16 panels of 66, not 15 of 72 (8 and 7 panels: 1.78x at best on 2 cores)."""
    if m is None:
        return MC
    tiles = -(-m // MR)
    panels = -(-tiles // (MC // MR))
    panels = -(-panels // cores) * cores
    return -(-tiles // panels) * MR


def packing_pays(shape: MatmulShape, m: int | None, n: int | None, kk: int | None, nr: int) -> bool:
    """Pack B when its panels tile it exactly and either it is stored [j, k] (a vector load then
    needs the copy) or there are several panels and enough rows to reuse them. A symbolic row
    count may be 1 (a batch of one): the copy would then cost more than the product."""
    if n is None or kk is None or n % nr:
        return False
    return shape.b_transposed or (n > nr and m is not None and m >= PACK_MIN_ROWS)


def pack_b(sch: Schedule, block: BlockRV, shape: MatmulShape, nr: int) -> None:
    """Copy B into panels ``[.., j // nr, k, j % nr]`` before the matmul: the inner loop then
    reads ``nr`` contiguous elements per k step."""
    packed = sch.cache_read(block, shape.b_read, "global")
    source = sch.get(packed).reads[0].buffer
    sch.transform_layout(packed, ("write", 0), panel_map(source.shape, nr, shape.b_transposed))
    loops = sch.get_loops(packed)
    if shape.b_transposed:  # a panel's rows side by side at each k: the stores are contiguous
        outer, across = sch.split(loops[-2], [None, nr])
        sch.reorder(outer, loops[-1], across)
        sch.vectorize(across)
        sch.parallel(loops[0] if len(loops) > 2 else outer)
        return
    _, vec = sch.split(loops[-1], [None, nr])  # a row of a panel at a time: contiguous both sides
    sch.vectorize(vec)
    sch.parallel(loops[0])


def panel_map(b_shape: tuple, nr: int, transposed: bool) -> IndexMap:
    """``lambda .., k, j: (.., j // nr, k, j % nr)`` (from ``.., j, k`` when B is transposed)."""
    dtype = b_shape[-1].dtype
    indices = [Var(f"v{d}", dtype) for d in range(len(b_shape))]
    k, j = indices[-2:][::-1] if transposed else indices[-2:]
    width = const(nr, dtype)
    return IndexMap(indices, [*indices[:-2], FloorDiv(j, width), k, FloorMod(j, width)])


def parallel_outer(sch: Schedule, loops: list[LoopRV]) -> LoopRV:
    """Run the batch loops and the row panels in parallel (fused when all are constant); the
    loop that holds one row panel."""
    extents = [const_int(sch.get(loop).extent) for loop in loops]
    if len(loops) > 1 and None not in extents:
        fused = sch.fuse(*loops)
        sch.parallel(fused)
        return fused
    sch.parallel(loops[0])
    return loops[-1]


def schedule_epilogue(sch: Schedule, panel: LoopRV, epilogue: BlockInfo, lanes: int) -> None:
    """Compute an elementwise epilogue right after each row panel (while it is in cache) and
    vectorize its rows; an epilogue that cannot move stays after the matmul."""
    try:
        sch.reverse_compute_at(epilogue.rv, panel)
    except ScheduleError:
        return
    inner = sch.get_loops(epilogue.rv)[-1]
    width = const_int(sch.get(inner).extent)
    if width is not None and width % lanes == 0:
        _, vec = sch.split(inner, [None, lanes])
        sch.vectorize(vec)


__all__ = ["Matmul", "MatmulShape", "match_matmul"]
