"""The default GPU schedule of a matmul (TVM 0.27's ``dl.gpu.Matmul``, its SIMT variant).

A function with one reduction block of the shape ``C[S.., I.., J..] += A[S.., I.., K..] *
B[S.., J.., K..]`` (each operand read at plain iterator indices, in any layout, extent-1
iterators allowed anywhere) is first normalized: ``reindex`` copies A, B and C into buffers
indexed ``[s, i, k]``, ``[s, j, k]`` and ``[s, i, j]`` (the iterators of a kind fused), and the
block itself iterates ``(s, i, j, k)``. ``pad_einsum`` rounds i, j and k up to the tile sizes,
so symbolic and ragged sizes need no guard in the hot loop.

The tiles (for cuda and rocm): a thread block computes 32 rows x 64 columns with 8 x 16
threads, each thread a 4 x 4 register tile (its innermost 2 columns vectorized). Each step of
16 along k, the block's threads copy the A and B slices into shared memory (2-wide vector
loads; rows padded by ``storage_align`` against bank conflicts). The accumulator lives in
``local`` memory and is written back, through any elementwise epilogue inlined into the
write-back, after the k loop.

Other GPU kinds get TVM's generic configuration (8 x 8 threads, no vectors). A cuda target of
compute capability 7.0 or newer first tries TVM's tensor-core variant for float16 and int8
matmuls whose constant i, j and k exceed 64 (gpu_matmul_tensorcore.py), and keeps this schedule
where that gives up. Large matmuls on cuda (gpu_matmul_large.py) get tvms's own plans instead:
float32 in 64 x 128 tiles of 8 x 8 a thread, float16 in bigger warp tiles, B staged as it is
stored (TVM has no such plans).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.expr import COMM_REDUCE, DATA_PAR, Add, IntImm, Mul, PrimExpr, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block
from ...ir.visitor import collect
from ..schedule import BlockRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .gpu_utils import GPURule, sm_version, target_kind

# iterator kinds of a matmul block: batch (in A, B and C), rows, columns, reduction, unit
S, I, J, K, T = "S", "I", "J", "K", "T"
TENSOR_CORE_MIN_EXTENT = 64  # (TVM: a constant i, j or k this small or smaller keeps SIMT)


@dataclass(frozen=True)
class Config:
    block_size_x: int = 8
    block_size_y: int = 8
    vthread_x: int = 1
    vthread_y: int = 1
    micro_size_x: int = 4
    micro_size_y: int = 4
    micro_size_k: int = 8
    vector_size: int = 1
    unroll: int = 256  # (0: no unroll annotation)
    storage_align: bool = False


CUDA_CONFIG = Config(block_size_x=8, block_size_y=16, micro_size_k=16, vector_size=2, storage_align=True)


def config_for(target: Any) -> Config:
    return CUDA_CONFIG if target_kind(target) in ("cuda", "rocm") else Config()


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _axes(region: Any) -> set[int] | None:
    """The variables a point access uses (None when it reads more than one element)."""
    if any(not _is_one(r.extent) for r in region.region):
        return None
    return {id(v) for r in region.region for v in collect(r.min, Var)}


def iter_kinds(block: Block) -> tuple[list, list, list, list] | None:
    """The kinds of the iterators of the operands A and B, of C, and of the block, when the
    block is a matmul ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` up to layout; else None."""
    if len(block.reads) != 2 or len(block.writes) != 1:
        return None
    axes = [_axes(block.reads[0]), _axes(block.reads[1]), _axes(block.writes[0])]
    if None in axes:
        return None
    a, b, c = axes
    kinds = []
    for iv in block.iter_vars:
        v = id(iv.var)
        if _is_one(iv.dom.extent):
            kind = T
        elif iv.iter_type == DATA_PAR:
            kind = S if v in a and v in b and v in c else I if v in a and v in c else \
                J if v in b and v in c else None
        elif iv.iter_type == COMM_REDUCE:
            kind = K if v in a and v in b and v not in c else None
        else:
            kind = None
        if kind is None:
            return None
        kinds.append(kind)
    if not {I, J, K} <= set(kinds):
        return None
    of = [[kind for kind, iv in zip(kinds, block.iter_vars) if id(iv.var) in axis] for axis in axes]
    return of[0], of[1], of[2], kinds


def fusion_map(kinds: list[str], extents: list[PrimExpr], order: tuple[str, ...]) -> IndexMap:
    """``lambda i0, i1, ..: (fused S, fused I, ..)`` in ``order``: the iterators of one kind
    fused in their order, unit iterators dropped, a kind without iterators 0."""
    inputs = [Var(f"i{n}", e.dtype) for n, e in enumerate(extents)]
    fused: dict[str, PrimExpr] = {}
    for kind, var, extent in zip(kinds, inputs, extents):
        if kind != T:
            fused[kind] = Add(Mul(fused[kind], extent), var) if kind in fused else var
    return IndexMap(inputs, [fused.get(kind, const(0, extents[0].dtype)) for kind in order])


def index_maps(block: Block) -> tuple[IndexMap, IndexMap, IndexMap, IndexMap] | None:
    """The maps normalizing the block, A, B and C (TVM's ``get_index_map``)."""
    found = iter_kinds(block)
    if found is None:
        return None
    a, b, c, kinds = found
    extents = [iv.dom.extent for iv in block.iter_vars]
    maps = []
    for kinds_of, region, order in ((a, block.reads[0], (S, I, K)), (b, block.reads[1], (S, J, K)),
                                    (c, block.writes[0], (S, I, J))):
        used = _axes(region)
        own = [e for e, iv in zip(extents, block.iter_vars) if id(iv.var) in used]
        maps.append(fusion_map(kinds_of, own, order))
    return (fusion_map(kinds, extents, (S, I, J, K)), *maps)


def reduction_block(sch: Schedule, blocks: list[BlockRV]) -> BlockRV | None:
    """The one reduction block, when every block is spatial or a reduction (TVM's
    ``get_reduction_blocks``)."""
    types = [{iv.iter_type for iv in sch.get(rv).iter_vars} for rv in blocks]
    if any(t not in ({DATA_PAR}, {DATA_PAR, COMM_REDUCE}) for t in types):
        return None
    reductions = [rv for rv, t in zip(blocks, types) if t == {DATA_PAR, COMM_REDUCE}]
    return reductions[0] if len(reductions) == 1 else None


def _chain(sch: Schedule, block: BlockRV, step: Any) -> list[BlockRV]:
    """The producers (or consumers) of a block, depth first, theirs after each."""
    result = []
    for nxt in step(block):
        result.append(nxt)
        result.extend(_chain(sch, nxt, step))
    return result


def _try(action: Any, block: BlockRV) -> bool:
    try:
        action(block)
    except ScheduleError:
        return False
    return True


def inline_producers(sch: Schedule, block: BlockRV) -> None:
    """Inline every producer of ``block`` that will go, until none does."""
    while sum(_try(sch.compute_inline, p) for p in _chain(sch, block, sch.get_producers)):
        pass


def inline_consumers(sch: Schedule, block: BlockRV) -> None:
    """Inline every consumer of ``block`` that will go (a spatial one into its own consumers,
    an epilogue into ``block``), until none does."""
    while True:
        consumers = _chain(sch, block, sch.get_consumers)
        inlined = sum(_try(sch.compute_inline, c) for c in consumers)
        inlined += sum(_try(sch.reverse_compute_inline, c) for c in consumers)
        if not inlined:
            return


def inline_consumer_chain(sch: Schedule, block: BlockRV) -> None:
    """Inline the whole epilogue into the write-back ``block``: a consumer that also reads
    another producer gets that producer inlined into it first."""
    inline_consumers(sch, block)
    remaining = sch.get_consumers(block)
    if not remaining:
        return
    written = sch.get(block)
    for consumer in remaining:
        for producer in sch.get_producers(consumer):
            if sch.get(producer) is not written:
                inline_producers(sch, producer)
                sch.compute_inline(producer)
    inline_consumers(sch, block)
    if sch.get_consumers(block):
        raise ScheduleError("Matmul: an epilogue could not be inlined into the write-back")


class Matmul(GPURule):
    """Shared-memory tiled matmul with register tiles (see the module docstring).
    ``large_tiles=False`` keeps TVM's schedules for large matmuls too."""

    name = "Matmul"

    def __init__(self, large_tiles: bool = True) -> None:
        self.large_tiles = large_tiles

    def __repr__(self) -> str:
        return "Matmul()" if self.large_tiles else "Matmul(large_tiles=False)"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        return schedule_matmul(Schedule(func), target, self.large_tiles)

    @staticmethod
    def tensor_core_variant(block: Block, target: Any) -> str | None:
        """The operands' type where TVM tries its tensor-core schedule first: a cuda target of
        compute capability 7.0 or newer, no constant i, j or k of 64 or less, and int8 into int32
        or float16 into float16 or float32."""
        if target_kind(target) != "cuda" or sm_version(target) < 70:
            return None
        extents = [iv.dom.extent for iv in block.iter_vars[1:]]
        if any(isinstance(e, IntImm) and e.value <= TENSOR_CORE_MIN_EXTENT for e in extents):
            return None
        types = (str(block.reads[0].buffer.dtype), str(block.writes[0].buffer.dtype))
        return types[0] if types in (("int8", "int32"), ("float16", "float16"), ("float16", "float32")) else None


def schedule_matmul(sch: Schedule, target: Any, large_tiles: bool = True, shape: Any = None) -> Schedule | None:
    """The Matmul rule on ``sch``, a schedule of the function as written (a refusal leaves it
    half done: give a copy); None where the rule declines. ``shape``: a large plan's shape
    (a ``SimtTiles`` or ``WarpTiles``) instead of DLight's own; None where the plan the rule
    takes has no such shape (a float16 matmul left to SIMT, say)."""
    from .gpu_matmul_large import SimtTiles, large_matmul, schedule_large_tiles  # (they build on this module)
    from .gpu_matmul_tensorcore import WarpTiles, large_warp_tiles, tensor_core_plan

    as_written = sch.copy()  # (the tensor-core plan starts from the function as written)
    try:
        main = reduction_block(sch, sch.get_child_blocks(sch.get_block("root")))
        if main is None or index_maps(sch.get(main)) is None:
            return None
        large = large_matmul(sch.get(main), target) if large_tiles else None
        normalize(sch, main)
        in_dtype = Matmul.tensor_core_variant(sch.get(main), target)
        tensor_core = in_dtype is not None and large is not None and large.takes_tensor_core_plan
        simt = large is not None and large.takes_simt_plan
        if shape is not None and not (isinstance(shape, WarpTiles) and tensor_core or isinstance(shape, SimtTiles) and simt):
            return None  # (the plan the rule takes has no such shape: a float16 matmul left to SIMT, say)
        if in_dtype is not None:
            warp_tiles = shape if isinstance(shape, WarpTiles) else \
                large_warp_tiles(large.out_dtype, large.cols) if tensor_core else None
            tensorized = tensor_core_plan(as_written, in_dtype, large=tensor_core, warp_tiles=warp_tiles)
            if tensorized is not None or isinstance(shape, WarpTiles):
                return tensorized
        if simt:
            schedule_large_tiles(sch, main, shape if isinstance(shape, SimtTiles) else SimtTiles())
        else:
            schedule_simt(sch, main, config_for(target))
    except ScheduleError:  # (a function without a root block, a primitive refusing)
        return None
    return sch


def normalize(sch: Schedule, main: BlockRV) -> None:
    """Reindex A, B and C and give the block the iterators ``(s, i, j, k)``."""
    reindex_a = sch.reindex(main, ("read", 0))
    reindex_b = sch.reindex(main, ("read", 1))
    reindex_c = sch.reindex(main, ("write", 0))
    block_map, a_map, b_map, c_map = index_maps(sch.get(main))
    sch.transform_layout(reindex_a, ("write", 0), a_map)
    sch.transform_layout(reindex_b, ("write", 0), b_map)
    sch.transform_layout(reindex_c, ("read", 0), c_map)
    sch.transform_block_layout(main, block_map)


def schedule_simt(sch: Schedule, main: BlockRV, config: Config) -> None:
    """Tile, bind, stage A and B in shared memory and accumulate in registers."""
    c = config
    x_tile = c.vthread_x * c.block_size_x * c.micro_size_x
    y_tile = c.vthread_y * c.block_size_y * c.micro_size_y
    sch.pad_einsum(main, [1, x_tile, y_tile, c.micro_size_k])
    batch, x, y, k = sch.get_loops(main)
    by, vy, ty, yi = sch.split(y, [None, c.vthread_y, c.block_size_y, c.micro_size_y])
    bx, vx, tx, xi = sch.split(x, [None, c.vthread_x, c.block_size_x, c.micro_size_x])
    ko, ki = sch.split(k, [None, c.micro_size_k])
    sch.reorder(by, bx, vy, vx, ty, tx, ko, ki, xi, yi)
    by = sch.fuse(batch, by)
    for loop, tag in ((bx, "blockIdx.x"), (by, "blockIdx.y"), (vy, "vthread.y"), (vx, "vthread.x"),
                      (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, tag)
    if c.micro_size_y % c.vector_size == 0:
        sch.vectorize(sch.split(yi, [None, c.vector_size])[1])
    if c.unroll > 0:
        sch.annotate(tx, "pragma_auto_unroll_max_step", c.unroll)
        sch.annotate(tx, "pragma_unroll_explicit", 1)

    write_back = sch.cache_write(main, 0, "local")
    sch.reverse_compute_at(write_back, tx, preserve_unit_loops=True)
    if c.micro_size_x % c.vector_size == 0:
        sch.vectorize(sch.split(sch.get_loops(write_back)[-1], [None, c.vector_size])[1])

    stages = []
    for index in (0, 1):
        stage = sch.cache_read(main, index, "shared")
        depth = len(sch.get_loops(stage))
        sch.compute_at(stage, ko, preserve_unit_loops=True)
        fused = sch.fuse(*sch.get_loops(stage)[-depth:])
        ty_, tx_, _, vec = sch.split(fused, [c.block_size_y, c.block_size_x, None, c.vector_size])
        sch.vectorize(vec)
        sch.bind(ty_, "threadIdx.y")
        sch.bind(tx_, "threadIdx.x")
        if c.storage_align:
            sch.storage_align(stage, 0, axis=1, factor=8, offset=c.vector_size)
        stages.append(stage)
    for stage in stages:
        inline_producers(sch, stage)
    inline_consumer_chain(sch, write_back)
    sch.decompose_reduction(main, ko)


__all__ = ["Matmul", "index_maps", "iter_kinds", "schedule_matmul"]
