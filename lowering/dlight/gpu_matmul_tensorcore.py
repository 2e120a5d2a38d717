"""DLight's tensor-core matmul (TVM 0.27's ``MatmulTensorization`` and
``MatmulInt8Tensorization``): the normalized matmul ``C[s, i, j] += A[s, i, k] * B[s, j, k]``
computed in 16 x 16 x 16 WMMA tiles.

A thread block computes 128 x 128 outputs with 16 warps (``threadIdx.y``) of 32 threads, each
warp a 2 x 2 group of tiles held in ``wmma.accumulator`` fragments. Each step of 64 along k (16
for int8) the block copies the A and B slices to shared memory (4-wide vector copies, rows padded
against bank conflicts); each inner step of 16 a warp loads its A and B tiles into
``wmma.matrix_a`` / ``wmma.matrix_b`` fragments (B column-major: it is stored ``[j, k]``) and
multiplies them into its accumulators. Both k loops are marked for the cuda lowering's software
pipeline (ManifestSharedMemoryLocalStage, InjectSoftwarePipeline): the copies of the next step,
through registers, overlap the products of this one, in double-buffered tiles and fragments.
After the k loop
the accumulators go through shared memory to the output, any elementwise epilogue inlined into
that last copy. ``pad_einsum`` rounds i and j to 128 and k to the step, so any size works.

float16 accumulates in float32 when the output is float32, else in float16; int8 in int32. The
rule gives up (None) where an intrinsic does not match, as TVM's does; ``dlight.do_not_tensorize``
on the function turns it off.

tvms departs from TVM for a large float16 matmul (gpu_matmul_large.py says which are large):
the copies move 16-byte vectors (where k is in whole steps of 64 and the rows are contiguous; a
padded k makes them guarded scalar copies, as in TVM's); a B contiguous along j (``R.matmul``'s
B), which TVM's ``[j][k]`` staging reads 2 bytes a thread from rows far apart, is staged
``[k][j]`` as it is stored and read into row-major fragments; and accumulating in float16, warps
of 64 x 64 outputs (half the fragment loads a product of TVM's 16 warps of 32 x 32), 8 of them
computing a 128 x 256 tile where the columns are whole 256s, else 4 a 128 x 128 one. How the
warps divide a block's tile is a ``WarpTiles``; ``warp_variants`` lists the neighbours of the
large plan's, which the tuning space "tiles" (tune/tile_space.py) measures, also with ``cp.async``
copies (``WarpTiles.async_copy``). DLight's plan keeps its synchronous copies under
``tirx.use_async_copy``: at 4096^3 on an H200 the asynchronous pipeline was the slower in 11 of
the 15 tilings, the 5 fastest among them (the best: 0.376 ms against 0.335).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...ir.dtype import DataType
from ...ir.expr import IntImm
from ...ir.function import PrimFunc
from ..schedule import BlockRV, Schedule, ScheduleError
from ..schedule.tensor_intrin_cuda import get_wmma_intrin_group
from ..transform import PassContext
from .gpu_matmul import inline_consumer_chain, inline_producers, normalize, reduction_block
from .gpu_matmul_large import reads_along_k
from .gpu_utils import sm_version

MICRO = 16  # the WMMA tile (m = n = k)
WARP_SIZE = 32
VECTOR_SIZE = 4
LARGE_VECTOR_SIZE = 8  # (tvms's plan for a large float16 matmul: 16 bytes, one 128-bit load and store)
REGISTERS_PER_BLOCK = 65536  # (32-bit, on compute capability 7.0 and newer)


@dataclass(frozen=True)
class WarpTiles:
    """How a block's warps share its tile: ``warps`` along i and j, each ``tiles`` 16 x 16
    accumulators along i and j. ``async_copy``: the operands go to shared memory in
    asynchronous copies (``cp.async`` where the PassContext sets ``tirx.use_async_copy``), two k
    steps ahead in three buffers, as TVM's mma.sync sketch pipelines them, instead of through
    registers into two."""

    warps: tuple[int, int]
    tiles: tuple[int, int]
    async_copy: bool = False

    @property
    def block_tile(self) -> tuple[int, int]:
        return tuple(MICRO * w * t for w, t in zip(self.warps, self.tiles))


TVM_WARP_TILES = WarpTiles((4, 4), (2, 2))  # (TVM's: 16 warps of 32 x 32)
# the large plan accumulating in float16: warps of 64 x 64, 4 of them where the columns are not
# whole 256s (with float32 accumulators so many tiles spill registers, so those keep TVM's)
LARGE_F16_WARP_TILES = WarpTiles((2, 2), (4, 4))
# 8 such warps: at 4096^3 on an H200 0.335 ms against the 4 warps' 0.371, the best of the 30
# tilings measured, in two runs (benchmarks/README.md)
WIDE_F16_WARP_TILES = WarpTiles((2, 4), (4, 4))


def large_warp_tiles(out_dtype: str, cols: int) -> WarpTiles:
    """The large plan's warp tiles for a matmul accumulating in ``out_dtype`` with ``cols`` columns."""
    if out_dtype != "float16":
        return TVM_WARP_TILES
    return WIDE_F16_WARP_TILES if cols % 256 == 0 else LARGE_F16_WARP_TILES


def async_copy_wanted(target: Any) -> bool:
    """Whether the PassContext asks for ``cp.async`` copies (``tirx.use_async_copy``) and
    ``target`` has them (sm_80 and later)."""
    return bool(PassContext.current().config.get("tirx.use_async_copy")) and sm_version(target) >= 80


def warp_variants(out_dtype: str, async_copy: bool = False, cols: int = 256) -> list[WarpTiles]:
    """The large float16 plan's warp tiles accumulating in ``out_dtype`` (for ``cols`` columns),
    then their neighbours: 2 or 4 warps along i and j, 2 or 4 tiles a warp along each, blocks
    of 64 to 256 along each, whose accumulators take less than half the registers a thread may
    have (else they spill: ptxas for sm_90 spills 16 warps of 4 x 4 float16 tiles, or of 4 x 2
    float32 ones). ``async_copy``: each followed by itself with asynchronous copies."""
    variants = [large_warp_tiles(out_dtype, cols)]
    for warps in ((2, 2), (4, 2), (2, 4), (4, 4)):
        for tiles in ((2, 2), (4, 2), (2, 4), (4, 4)):
            variant = WarpTiles(warps, tiles)
            if variant not in variants and _accumulators_fit(variant, out_dtype) and max(variant.block_tile) <= 256:
                variants.append(variant)
    if async_copy:
        variants = [shape for variant in variants for shape in (variant, replace(variant, async_copy=True))]
    return variants


def _accumulators_fit(variant: WarpTiles, out_dtype: str) -> bool:
    """Whether a thread's share of the accumulators (a 16 x 16 tile is 8 values a lane) is less
    than half the registers it may have (a block's 64K, at most 255 a thread)."""
    threads = WARP_SIZE * variant.warps[0] * variant.warps[1]
    registers = variant.tiles[0] * variant.tiles[1] * 8 * DataType(out_dtype).bits // 32
    return 2 * registers < min(255, REGISTERS_PER_BLOCK // threads)


def schedule_tensor_core(func: PrimFunc, in_dtype: str, scope: str = "shared.dyn", large: bool = False,
                         warp_tiles: WarpTiles | None = None) -> Schedule | None:
    """The WMMA schedule of ``func`` (a matmul ``normalize`` accepts) whose operands are
    ``in_dtype``, staging through ``scope``; None where TVM's rule gives up (or a primitive
    refuses: the SIMT schedule then takes it). ``large``: tvms's plan for a large float16 matmul
    (the module docstring); ``warp_tiles``: its warps' tiles, instead of the plan's own."""
    return tensor_core_plan(Schedule(func), in_dtype, scope, large, warp_tiles)


def tensor_core_plan(sch: Schedule, in_dtype: str, scope: str = "shared.dyn", large: bool = False,
                     warp_tiles: WarpTiles | None = None) -> Schedule | None:
    """``schedule_tensor_core`` on ``sch``, a schedule of the function as it was written (which
    a refusal leaves half done: give a copy)."""
    if "dlight.do_not_tensorize" in sch.mod[sch.func_working_on or "main"].attrs:
        return None
    try:
        return _schedule(sch, in_dtype, scope, large, warp_tiles)
    except ScheduleError:
        return None


def _schedule(sch: Schedule, in_dtype: str, scope: str, large: bool, warp_tiles: WarpTiles | None) -> Schedule | None:
    int8 = in_dtype == "int8"
    k_inner = 1 if int8 else 4  # tiles along k per shared-memory step
    align = (32, 16) if int8 else (16, 8)  # storage_align's factor and offset
    main = reduction_block(sch, sch.get_child_blocks(sch.get_block("root")))
    if main is None:
        return None
    if warp_tiles is None:  # (the large plan's for the output's columns, else TVM's)
        out = sch.get(main).writes[0].buffer
        cols = out.shape[-1].value if isinstance(out.shape[-1], IntImm) else 0
        warp_tiles = large_warp_tiles(str(out.dtype), cols) if large else TVM_WARP_TILES
    (warps_i, warps_j), (tiles_i, tiles_j) = warp_tiles.warps, warp_tiles.tiles
    # blockIdx.x, blockIdx.y, warps, tiles per warp
    i_factors, j_factors = [None, 1, warps_i, tiles_i], [1, None, warps_j, tiles_j]
    normalize(sch, main)
    sch.pad_einsum(main, [1, MICRO * i_factors[2] * i_factors[3], MICRO * j_factors[2] * j_factors[3], MICRO * k_inner])

    batch, i, j, k = sch.get_loops(main)
    i, i_tile = sch.split(i, factors=[None, MICRO])
    j, j_tile = sch.split(j, factors=[None, MICRO])
    k, k_tile = sch.split(k, factors=[None, MICRO])
    sch.reorder(i, j, k, i_tile, j_tile, k_tile)
    inner = main
    outer = sch.blockize(i_tile)

    i0, i1, i2, i3 = sch.split(i, factors=i_factors)
    j0, j1, j2, j3 = sch.split(j, factors=j_factors)
    k0, k1 = sch.split(k, factors=[None, k_inner])
    if warp_tiles.async_copy:  # (the copies of A and B, then the inner pipeline's prologue, body and epilogue)
        sch.annotate(k0, "software_pipeline_async_stages", [0])
        sch.annotate(k0, "software_pipeline_stage", [0, 0, 1, 2, 2])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 3, 2, 4])
    else:  # (each copy twice: to registers, then to shared memory)
        sch.annotate(k0, "software_pipeline_order", [0, 3, 1, 4, 5, 2, 6])
        sch.annotate(k0, "software_pipeline_stage", [0, 0, 0, 0, 0, 1, 1])
    sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3)
    block_x, block_y, warp = sch.fuse(i0, j0), sch.fuse(i1, j1), sch.fuse(j2, i2)
    for loop, tag in ((batch, "blockIdx.z"), (block_x, "blockIdx.x"), (block_y, "blockIdx.y"), (warp, "threadIdx.y")):
        sch.bind(loop, tag)

    warps = i_factors[2] * j_factors[2]
    vector = LARGE_VECTOR_SIZE if large else VECTOR_SIZE
    b_row_major = False
    stages = []
    for index in (0, 1):  # A and B to shared memory, all threads of the block copying
        stage = sch.cache_read(outer, index, scope)
        if large:  # (B read along j where it is stored: staged [k][j], rows of j copied)
            inline_producers(sch, stage)
            b_row_major = index == 1 and reads_along_k(sch, stage) is False
        if b_row_major:
            sch.transform_layout(stage, ("write", 0), lambda s, j, k: (s, k, j))
        sch.compute_at(stage, k0)
        if b_row_major:
            sch.reorder(*reversed(sch.get_loops(stage)[-2:]))
        fused = sch.fuse(*sch.get_loops(stage)[-2:])
        _, ty, tx, vec = sch.split(fused, factors=[None, warps, WARP_SIZE, vector])
        sch.bind(tx, "threadIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.vectorize(vec)
        sch.storage_align(stage, 0, axis=-2, factor=align[0], offset=align[1])
        if not warp_tiles.async_copy:
            sch.annotate(stage, "tirx.manifest_shared_memory_local_stage", 1)
            sch.annotate(stage, "double_buffer_scope", 0)
        stages.append(stage)
    for stage in stages:
        inline_producers(sch, stage)

    fragments = [sch.cache_read(outer, index, f"wmma.matrix_{'ab'[index]}") for index in (0, 1)]
    for fragment in fragments:
        sch.compute_at(fragment, k1)
    write_back = sch.cache_write(outer, 0, scope)
    sch.storage_align(write_back, 0, -2, 16, 4)
    store = sch.cache_write(outer, 0, "wmma.accumulator")
    sch.reverse_compute_at(store, warp)
    sch.reverse_compute_at(write_back, warp)
    _tile_2d(sch, store)
    init = sch.get_child_blocks(sch.decompose_reduction(outer, k0))[0]

    group = get_wmma_intrin_group(scope, scope, in_dtype, "int32" if int8 else "float32", trans_b=not b_row_major)
    for fragment, intrin in zip(fragments, (group["load_a"], group["load_b"])):
        outer_i, outer_j = _tile_2d(sch, fragment)
        sch.unroll(outer_i)
        sch.unroll(outer_j)
        sch.tensorize(sch.get_loops(fragment)[-2], intrin)
    if not _tensorize_accumulation(sch, init, store, inner, group):
        # (a float16 accumulator: the float32 intrinsics do not match it)
        group = get_wmma_intrin_group(scope, scope, in_dtype, "float16", trans_b=not b_row_major)
        if int8 or not _tensorize_accumulation(sch, init, store, inner, group):
            return None
    inline_consumer_chain(sch, write_back)
    fused = sch.fuse(*sch.get_loops(write_back)[-2:])
    _, tx, vec = sch.split(fused, factors=[None, WARP_SIZE, VECTOR_SIZE])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return sch


def _tile_2d(sch: Schedule, block: BlockRV) -> tuple[Any, Any]:
    """Split the block's last two loops into 16 x 16 tiles, the tile loops innermost; the two
    outer loops."""
    i, j = sch.get_loops(block)[-2:]
    i0, i1 = sch.split(i, factors=[None, MICRO])
    j0, j1 = sch.split(j, factors=[None, MICRO])
    sch.reorder(i0, j0, i1, j1)
    return i0, j0


def _tensorize_accumulation(sch: Schedule, init: BlockRV, store: BlockRV, compute: BlockRV, group: dict) -> bool:
    """Tensorize the accumulator's zero fill, its store and the product with ``group``; False
    when one of them does not match."""
    try:
        sch.tensorize(sch.get_loops(init)[-2], group["init"])
        sch.tensorize(sch.get_loops(store)[-2], group["store"])
        sch.tensorize(sch.get_loops(compute)[-3], group["compute"])
    except ScheduleError:
        return False
    return True


__all__ = ["TVM_WARP_TILES", "WarpTiles", "async_copy_wanted", "large_warp_tiles", "schedule_tensor_core",
           "tensor_core_plan", "warp_variants"]
