"""The default CPU schedule of a matmul: ``C[b.., i, j] += A[b.., i, k] * B[b.., k, j]`` (or B
stored as ``[j, k]``), with injective prologues inlined and an elementwise epilogue (bias, relu)
computed per block of the output.

The loops become, outermost first (the BLAS way, sized for a vector width of ``w`` lanes)::

    b.. i_0 j_c (parallel) | pack A | j_0 | i_1 | k | i_2 (unrolled, MR) | j_1 (vectorized, 2w)

A block of the output (parallel) is a row panel of ``MC`` rows, or a column chunk of one: row
panels alone, when their number is not a multiple of the threads, leave a thread idle at the
end (11 panels on 2 threads: 1.83x at best), so the columns are cut as well when that evens
out the threads' shares. The register tile is MR x 2w accumulators in three quarters of the
vector registers: 6 x 2 ymm with AVX2's 16 (enough independent FMA chains to cover the FMA
latency of both pipes; 8 x 2 measured 15-20% slower), 12 x 2 zmm with AVX-512's 32; per k, MR
broadcasts of A and two vector loads of B feed 2 MR FMAs. The tile is a local buffer
(cache_write) that lives in registers across the whole k loop and goes to C once.

Both operands are packed so the micro-kernel reads them with unit stride. B, once per call, into
panels ``[j // 2w, k, j % 2w]`` (a block at the top of the function: when B is a parameter
that nothing else reads, it is marked ``meta_schedule.layout_rewrite_preproc`` as TVM's
RewriteLayout marks it, for LiftTransformParams to run it once per weight). A, at the start of
each block of the output, into register-tile order ``[i // MR, k, i % MR]``: MR values per k
step, next to the next step's. k is blocked for L2 by the panel height: MC x K of packed A
(PANEL_BYTES) stays in L2 while every column tile of the block reuses it, each ``K x 2w``
panel of B (from L2/L3) serving the block's MC / MR register tiles.

Constant sizes the tiles do not divide are padded to whole tiles (pad_einsum): the packed A and
B get zero rows and columns, so the micro-kernel is the same for every tile, and only the
tile's copy to C is guarded (rows as a whole, columns element-wise). Symbolic row counts keep
guarded tail rows (``T.where``; the lowering's UnswitchGuards tests a tile's row guards once,
outside its k loop), and their columns are cut into chunks, so that the threads share a batch
of one row panel; a linear layer over a symbolic batch (B stored ``[j, k]``) packs its weight
once at the top and runs a 1-row tile for a single row (``_by_row_count``). The rule declines
what is not a matmul, and GEMV shapes (an ``i`` or ``j`` extent of 1).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...ir.expr import GE, Add, BufferLoad, Cast, FloorDiv, FloorMod, Mul, PrimExpr, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BufferStore, IfThenElse, SeqStmt
from ...ir.visitor import Mutator, walk
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .analysis import BlockInfo, CPURule, const_int, describe_block, inline_cheap_blocks, num_threads, vector_lanes

ACCUMULATOR_SHARE = 3 / 4  # of the vector registers hold the register tile; the rest B's two
# vectors, A's broadcast and the addresses (16 ymm: 6 x 2 tile, 8 x 2 measured 15-20% slower)
PANEL_BYTES = 384 * 1024  # a thread's packed A panel (MC x K) stays in L2 next to a B panel
MAX_PANEL_TILES = 12  # register tiles in a row panel
SYMBOLIC_CHUNKS = 4  # column chunks per core for a symbolic row count: the thread pool hands out
# a few tasks per thread, so that a thread that starts late leaves its shares to the others
PACK_MIN_ROWS = 16  # below this many rows packing B costs more than the strided loads
TILED_MIN_ROWS = 2  # a symbolic row count below this runs a 1-row register tile (see _by_row_count)
PREPROC = "meta_schedule.layout_rewrite_preproc"  # TVM's mark of a weight's layout rewrite


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
        try:
            sch, blocks, main = _blocks(func)
        except ScheduleError:
            return None
        if len(main) != 1 or not _one_loop_per_iterator(main[0]) or not main[0].is_reduction():
            return None
        info = main[0]
        shape = match_matmul(info)
        if shape is None or any(const_int(info.iters[p].extent) == 1 for p in (shape.i, shape.j)):
            return None  # not a matmul, or a matrix-vector product (the GEMV rule's)
        epilogues = [b for b in blocks if b is not info]
        if any(not b.is_injective() or not b.trivial for b in epilogues) or blocks[0] is not info:
            return None  # a prologue that did not inline, or a second reduction
        rows = info.iters[shape.i].extent
        try:
            scheduled = _scheduled(sch, info, shape, epilogues, target)
            if not shape.b_transposed or const_int(rows) is not None:
                return scheduled
            sch, blocks, (info,) = _blocks(func)  # (again, for a 1-row register tile: one row)
            few = _scheduled(sch, info, shape, [b for b in blocks if b is not info], target, mr=1)
        except ScheduleError:  # e.g. loops of symbolic extent in an order reorder can't change
            return None
        return _by_row_count(rows, scheduled, few)


def _blocks(func: PrimFunc) -> tuple:
    """A schedule of ``func`` with its cheap blocks inlined, its blocks, and the reductions among them."""
    sch = Schedule(func)
    blocks = inline_cheap_blocks(sch)
    return sch, blocks, [b for b in blocks if b.block.init is not None or "R" in b.kinds]


def _scheduled(sch: Schedule, info: BlockInfo, shape: MatmulShape, epilogues: list, target: Any,
               mr: int | None = None) -> Schedule:
    panel = schedule_matmul(sch, info, shape, target, mr)
    for epilogue in epilogues:
        schedule_epilogue(sch, panel, epilogue, vector_lanes(target, info.write().buffer.dtype))
    return sch


def _by_row_count(rows: PrimExpr, many: Schedule, few: Schedule) -> Schedule:
    """A symbolic row count with B stored ``[j, k]`` (a linear layer over a batch ``n``): B is
    packed once, at the top of the function (the packing LiftTransformParams runs once per weight),
    then ``rows >= TILED_MIN_ROWS`` run the register-tiled schedule and a single row the same
    schedule with a 1-row tile (the 6-row tile's guarded rows cost more than the product there;
    from two rows on, the 6-row tile's independent FMA chains win: at 4 rows 0.023 ms against
    0.036 for the seed MLP). Both read the same packed B. (Below 16 rows this was the Reduction
    rule's dot products over B as stored, and the weights were packed at every call: the seed MLP
    at batch 16 took 0.141 ms, now 0.066, as with a constant batch of 16.)"""
    many_func, few_func = many.mod["main"], few.mod["main"]
    many_root, few_root = many_func.body.block, few_func.body.block
    (packing, *many_rest), (few_packing, *few_rest) = (_top_level(r.body) for r in (many_root, few_root))
    packed, few_packed = (next(b for b in walk(p) if isinstance(b, Block)).writes[0].buffer
                          for p in (packing, few_packing))
    few_body = _SwapBuffer(few_packed, packed).visit(SeqStmt(tuple(few_rest)))
    dispatch = IfThenElse(GE(rows, const(TILED_MIN_ROWS, rows.dtype)), SeqStmt(tuple(many_rest)), few_body)
    allocs = many_root.alloc_buffers + tuple(b for b in few_root.alloc_buffers
                                             if b is not few_packed and all(b is not a for a in many_root.alloc_buffers))
    root = many_root.with_changes(body=SeqStmt((packing, dispatch)), alloc_buffers=allocs)
    return Schedule(many_func.with_changes(body=many_func.body.with_changes(block=root)))


def _top_level(body: Any) -> list:
    return list(body.seq) if isinstance(body, SeqStmt) else [body]


class _SwapBuffer(Mutator):
    """Every use of one buffer made a use of another (of the same shape)."""

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new = old, new

    def visit(self, node: Any) -> Any:
        return self.new if node is self.old else super().visit(node)


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


@dataclass(frozen=True)
class Tiling:
    """The sizes of a schedule: the register tile (``mr`` rows x ``nr`` columns, ``nr`` a multiple
    of the vector width), the register tiles in a row panel, and the column chunks a row panel is
    cut into so that the threads share the work evenly."""

    mr: int
    nr: int
    panel_tiles: int
    chunks: int


def accumulator_registers(target: Any, symbolic: bool = False) -> int:
    """The vector registers a register tile's accumulators may fill: ACCUMULATOR_SHARE of 16 (AVX2)
    or 32 (AVX-512; not for a symbolic row count, see ``register_rows``)."""
    registers = 32 if vector_lanes(target, 32) >= 16 and not symbolic else 16
    return int(registers * ACCUMULATOR_SHARE)


def register_rows(target: Any, symbolic: bool = False) -> int:
    """Rows of the register tile: two vectors of accumulators per row (16 registers with AVX2: 6
    rows; 32 with AVX-512: 12 rows). A symbolic row count (a batch, often small) keeps 16
    registers' 6 rows: half the guarded tail code to compile (0.2 s instead of 0.4 s for the MLP's
    first layer) and, at one row, fewer rows computed for nothing."""
    return accumulator_registers(target, symbolic) // 2


def plan_tiling(m: int | None, n: int | None, kk: int | None, lanes: int, mr: int, cores: int,
                item_bytes: int) -> Tiling:
    """Sizes for an ``m x n x kk`` product (None: symbolic): row panels of whole register tiles whose
    packed A (``panel_tiles * mr`` rows x ``kk``) fits PANEL_BYTES, in panels of even sizes; then as
    many column chunks (a divisor of the column tiles, up to ``cores``) as even out the threads'
    shares: 1024 rows in 11 panels leave one thread a panel more, in 22 blocks they do not. A
    symbolic row count (a batch: one panel at 64 rows) is cut into up to SYMBOLIC_CHUNKS chunks
    per core (the seed MLP's first layer at batch 64 was one task, and the second thread idle)."""
    nr = 2 * lanes if n is None or n > 2 * lanes else n  # a narrow j is one vector of n lanes
    depth = kk if kk is not None else 1024
    most = max(1, min(MAX_PANEL_TILES, PANEL_BYTES // (depth * mr * item_bytes)))
    col_tiles = -(-n // nr) if n is not None else 1
    if m is None:  # (a batch, often one panel: the columns give each thread its shares)
        return Tiling(mr, nr, most, max(c for c in range(1, SYMBOLIC_CHUNKS * cores + 1) if col_tiles % c == 0))
    tiles = -(-m // mr)
    panels = -(-tiles // most)
    panel_tiles = -(-tiles // panels)
    panels = -(-tiles // panel_tiles)
    chunks = min((c for c in range(1, cores + 1) if col_tiles % c == 0),
                 key=lambda c: -(-panels * c // cores) * -(-col_tiles // c))
    return Tiling(mr, nr, panel_tiles, chunks)


def schedule_matmul(sch: Schedule, info: BlockInfo, shape: MatmulShape, target: Any, mr: int | None = None) -> LoopRV:
    """Pad, tile, pack, keep the register tile (``mr`` rows, else the target's) in a local
    buffer, parallelize; the loop of one block of the output (a row panel, or a chunk of one)."""
    dtype = info.write().buffer.dtype
    lanes = vector_lanes(target, dtype)
    extent = [const_int(it.extent) for it in info.iters]
    m, n, kk = extent[shape.i], extent[shape.j], extent[shape.k]
    rows = mr or register_rows(target, symbolic=m is None)
    plan = plan_tiling(m, n, kk, lanes, rows, num_threads(target), max(1, dtype.bits // 8))
    if mr == 1:  # (rows one at a time: a panel of one row keeps the code small, 12 were unrolled)
        plan = replace(plan, panel_tiles=1)
    block = info.rv
    pad_rows = m is not None and m % plan.mr != 0
    pad_columns = n is not None and n % plan.nr != 0
    if pad_rows or pad_columns:  # whole register tiles: A, B and C get zero rows and columns
        sch.pad_einsum(block, [plan.mr if p == shape.i and pad_rows else plan.nr if p == shape.j and pad_columns
                               else 1 for p in range(len(info.iters))])
        info = describe_block(sch, block)
    loops = [it.loop for it in info.iters]
    i_0, i_1, i_2 = sch.split(loops[shape.i], [None, plan.panel_tiles, plan.mr])
    chunk = []
    if plan.chunks > 1:
        j_c, j_0, j_1 = sch.split(loops[shape.j], [plan.chunks, None, plan.nr])
        chunk = [j_c]
    else:
        j_0, j_1 = sch.split(loops[shape.j], [None, plan.nr])
    batch = [loops[p] for p in shape.batch]
    blocks = [*batch, i_0, *chunk]
    reorder_inside(sch, block, [*blocks, j_0, i_1, loops[shape.k], i_2, j_1])
    panel = parallel_outer(sch, blocks)
    b_packed = pack_b(sch, block, shape, plan.nr, pad_columns, m)
    if pad_rows or (m is not None and m >= PACK_MIN_ROWS):
        pack_a(sch, block, shape, plan.mr, panel, pad_rows)
    tile = sch.cache_write(block, 0, "local")  # the accumulators: registers
    sch.reverse_compute_at(tile, i_1)
    if pad_rows or pad_columns:  # the tile goes straight to C, its zero rows and columns left out
        sch.reverse_compute_inline(sch.get_consumers(tile)[0])
    init = sch.decompose_reduction(block, loops[shape.k])
    for stage in (block, init, tile):
        inner = sch.get_loops(stage)
        sch.unroll(inner[-2])
        sch.vectorize(inner[-1])
    if b_packed is not None:
        mark_weight_packing(sch, b_packed)
    return panel


def reorder_inside(sch: Schedule, block: BlockRV, order: list[LoopRV]) -> None:
    """Reorder the loops, leaving out those already outermost in place (a loop of symbolic
    extent can't be reordered)."""
    current = [sch.get(loop).loop_var for loop in sch.get_loops(block)]
    keep = 0
    while keep < len(order) and sch.get(order[keep]).loop_var is current[keep]:
        keep += 1
    if len(order) - keep > 1:
        sch.reorder(*order[keep:])


def pack_b(sch: Schedule, block: BlockRV, shape: MatmulShape, nr: int, padded: bool, m: int | None) -> BlockRV | None:
    """Copy B into panels ``[.., j // nr, k, j % nr]`` before the matmul, so the inner loop reads
    ``nr`` contiguous elements per k step: the copy pad_einsum made (zero columns) or a cache
    stage. Not worth it for a few rows of an unpadded B stored ``[k, j]``; the packing block."""
    reads = sch.get(block).reads
    b_buffer = reads[shape.b_read].buffer
    if padded:
        packed = next(p for p in sch.get_producers(block) if sch.get(p).writes[0].buffer is b_buffer)
    elif shape.b_transposed or (m is not None and m >= PACK_MIN_ROWS):
        packed = sch.cache_read(block, shape.b_read, "global", consumer_blocks=[block])
    else:
        return None
    source = sch.get(packed).reads[0].buffer
    sch.transform_layout(packed, ("write", 0), panel_map(source.shape, nr, shape.b_transposed))
    loops = sch.get_loops(packed)
    if padded:  # (the zero columns: masked lanes of the last vector of a row)
        sch.parallel(loops[0])
        if not shape.b_transposed:
            sch.vectorize(sch.split(loops[-1], [None, nr])[1])
        return packed
    if shape.b_transposed:  # a panel's rows side by side at each k: the stores are contiguous
        outer, across = sch.split(loops[-2], [None, nr])
        sch.reorder(outer, loops[-1], across)
        sch.vectorize(across)
        sch.parallel(loops[0] if len(loops) > 2 else outer)
        return packed
    _, vec = sch.split(loops[-1], [None, nr])  # a row of a panel at a time: contiguous both sides
    sch.vectorize(vec)
    sch.parallel(loops[0])
    return packed


def panel_map(b_shape: tuple, nr: int, transposed: bool) -> IndexMap:
    """``lambda .., k, j: (.., j // nr, k, j % nr)`` (from ``.., j, k`` when B is transposed)."""
    dtype = b_shape[-1].dtype
    indices = [Var(f"v{d}", dtype) for d in range(len(b_shape))]
    k, j = indices[-2:][::-1] if transposed else indices[-2:]
    width = const(nr, dtype)
    return IndexMap(indices, [*indices[:-2], FloorDiv(j, width), k, FloorMod(j, width)])


def pack_a(sch: Schedule, block: BlockRV, shape: MatmulShape, mr: int, panel: LoopRV, padded: bool) -> None:
    """Copy each block's rows of A into ``[.., i // mr, k, i % mr]`` at the start of the block (the
    copy pad_einsum made, with zero rows, or a cache stage): a register tile's ``mr`` values of A
    per k step are then contiguous, next to the next step's."""
    reads = sch.get(block).reads
    out = sch.get(block).writes[0].buffer
    a_buffer = next(r.buffer for n, r in enumerate(reads) if n != shape.b_read and r.buffer is not out)
    if padded:
        packed = next(p for p in sch.get_producers(block) if sch.get(p).writes[0].buffer is a_buffer)
    else:
        packed = sch.cache_read(block, [r.buffer for r in reads].index(a_buffer), "global", consumer_blocks=[block])
    # (A's rows are as a transposed B's columns: ``.., i, k -> .., i // mr, k, i % mr``)
    index_map = panel_map(sch.get(packed).writes[0].buffer.shape, mr, transposed=True)
    sch.transform_layout(packed, ("write", 0), index_map)
    sch.transform_block_layout(packed, index_map)  # loops over tiles, k, a tile's rows: contiguous stores
    sch.compute_at(packed, panel)
    sch.unroll(sch.get_loops(packed)[-1])


def mark_weight_packing(sch: Schedule, packed: BlockRV) -> None:
    """Mark the packing of B as TVM's RewriteLayout does when B is a parameter that nothing else
    reads: SplitLayoutRewritePreproc can then move it to a function of its own, and
    LiftTransformParams run it once per weight instead of once per call."""
    func = sch.mod["main"]
    source = sch.get(packed).reads[0].buffer
    if source not in func.buffer_map.values():
        return
    readers = [b for b in walk(func.body) if isinstance(b, Block) and any(r.buffer is source for r in b.reads)]
    if len(readers) == 1:
        sch.annotate(packed, PREPROC, const(True, "bool"))


def parallel_outer(sch: Schedule, loops: list[LoopRV]) -> LoopRV:
    """Run the batch loops, the row panels and their column chunks in parallel, fused into one
    loop (of symbolic extent too); the loop that holds one block of the output."""
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    sch.parallel(fused)
    return fused


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
