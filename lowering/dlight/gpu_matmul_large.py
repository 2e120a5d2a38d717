"""tvms's own cuda schedule for large float32 matmuls, and which matmuls are large (TVM's DLight
has no such plans; the float16 one is in gpu_matmul_tensorcore.py).

TVM's SIMT tiles (``gpu_matmul.py``: 32 x 64 outputs a block, 4 x 4 a thread) read 8 values
from shared memory for every 16 FMAs; on an H200 that schedule ran a 4096^3 matmul at 0.37x
of cuBLAS. Where a matmul is big enough to fill a large GPU with bigger tiles, this plan gives each
thread 4 x as many outputs for 2 x the shared-memory reads:

* a block computes 64 x 128 outputs with 8 x 16 threads; each thread 2 x 2 virtual threads of
  4 x 4 outputs, 32 rows (64 columns) apart, so a warp's reads of one k step are whole vectors
  without bank conflicts (of the 36 shapes ``simt_variants`` lists, the fastest at 4096^3 on an
  H200 in two runs: 3.22 ms, against 3.31 for 128 x 128 with 16 x 16 threads);
* A and B are staged in shared memory k-major (``[k][i]``, ``[k][j]``), so the 4 rows (columns)
  a virtual thread needs at one k are one ``float4`` load: 4 vector loads per 64 FMAs;
* a step of 8 along k, software-pipelined: the next step's global loads (vectors along the axis
  the operand is stored by, found where the copy reads it, its producers inlined:
  ``reads_along_k``; staged in registers by ManifestSharedMemoryLocalStage) are issued before this
  step's FMAs, and stored into the other half of the double-buffered tiles after them.

A matmul is large (``large_matmul``) when its sizes are constant, its rows and columns multiples
of 128 and it has at least ``MIN_TILES`` such tiles; this plan takes the float32 ones whose
reduction is a multiple of 8 (no padding). The rest keep TVM's tiles (the schedules TVM's
goldens pin, all below that size).

The plan's shape is a ``SimtTiles`` (DLight's is ``SimtTiles()``); ``simt_variants`` lists its
neighbours (blocks of 32 to 256 rows and columns, 64 to 256 threads, 4 x 4 to 8 x 16 outputs a
thread, steps of 8 or 16), which the tuning space "tiles" (tune/tile_space.py) measures side by
side.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.expr import Add, BufferLoad, IntImm
from ...ir.stmt import Block
from ...ir.visitor import walk
from ..schedule import BlockRV, Schedule
from ..schedule.layout import linear_terms
from .gpu_matmul import I, J, K, S, inline_consumer_chain, inline_producers, iter_kinds
from .gpu_utils import target_kind

TILE = 128  # outputs a block computes along i and along j (of DLight's plan; a large matmul has whole tiles)
MICRO = 4  # outputs a virtual thread computes along i and along j (one float4)
VECTOR = 4
MIN_TILES = 256  # (two waves of 128 x 128 tiles on a GPU of 128 SMs)
UNROLL = 256


@dataclass(frozen=True)
class SimtTiles:
    """The shape of a float32 plan: ``threads`` along i and j a block, ``virtual`` threads along
    i and j a thread (each ``MICRO`` x ``MICRO`` outputs), steps of ``k_step`` along k."""

    threads: tuple[int, int] = (8, 16)
    virtual: tuple[int, int] = (2, 2)
    k_step: int = 8

    @property
    def tile(self) -> tuple[int, int]:
        """The outputs a block computes along i and along j."""
        return tuple(v * t * MICRO for v, t in zip(self.virtual, self.threads))

    @property
    def copies_evenly(self) -> bool:
        """Whether each operand's step (``tile x k_step`` values) is whole vectors for every thread."""
        vectors = self.threads[0] * self.threads[1] * VECTOR
        return all(x * self.k_step % vectors == 0 for x in self.tile)


@dataclass(frozen=True)
class LargeMatmul:
    """What the large-matmul plans need to know of a matmul block: its operands' and its
    output's types, its reduction's extent, its rows and columns (as the normalized block has
    them: a batch of A alone counts in the rows; whole tiles of 128)."""

    in_dtype: str
    out_dtype: str
    k: int
    rows: int = TILE
    cols: int = TILE

    @property
    def takes_simt_plan(self) -> bool:
        """float32, the reduction in whole steps: this module's schedule."""
        return self.in_dtype == self.out_dtype == "float32" and self.k % SimtTiles().k_step == 0

    @property
    def takes_tensor_core_plan(self) -> bool:
        """float16 operands: tvms's variant of the tensor-core schedule (gpu_matmul_tensorcore.py)."""
        return self.in_dtype == "float16"


def large_matmul(block: Block, target: Any) -> LargeMatmul | None:
    """A matmul block (before ``normalize``) of constant sizes under a cuda target, with rows
    and columns in whole 128 x 128 tiles and at least ``MIN_TILES`` of them; else None."""
    if target_kind(target) != "cuda":
        return None
    found = iter_kinds(block)
    if found is None:
        return None
    kinds = found[3]
    extents = {S: 1, I: 1, J: 1, K: 1}
    for kind, iv in zip(kinds, block.iter_vars):
        if not isinstance(iv.dom.extent, IntImm):
            return None
        if kind in extents:
            extents[kind] *= iv.dom.extent.value
    if extents[I] % TILE or extents[J] % TILE or extents[S] * extents[I] * extents[J] < MIN_TILES * TILE * TILE:
        return None
    operands = {str(read.buffer.dtype) for read in block.reads}
    if len(operands) != 1:
        return None
    return LargeMatmul(operands.pop(), str(block.writes[0].buffer.dtype), extents[K], extents[I], extents[J])


def simt_variants(large: LargeMatmul) -> list[SimtTiles]:
    """DLight's plan, then its neighbours that fit ``large`` (its rows and columns whole tiles, its
    reduction whole steps): 64 to 256 threads a block, 1 or 2 virtual threads along i and j
    (not 1 x 1: TVM's 4 x 4 a thread) or 2 along one and 4 along the other (8 x 16 outputs a
    thread: 128 FMAs for 6 vector reads of shared memory, against 64 for 4; in under 200
    registers, no spills, as ptxas assembles them for sm_90), steps of 8 or 16, each operand's
    step whole vectors for every thread."""
    if not large.takes_simt_plan:
        return []
    variants = [SimtTiles()]
    for threads in ((16, 16), (16, 8), (8, 16), (8, 8)):
        for virtual in ((2, 2), (2, 1), (1, 2), (2, 4), (4, 2)):
            for k_step in (8, 16):
                tiles = SimtTiles(threads, virtual, k_step)
                fits = large.k % k_step == 0 and large.rows % tiles.tile[0] == 0 and large.cols % tiles.tile[1] == 0
                if tiles not in variants and tiles.copies_evenly and fits:
                    variants.append(tiles)
    return variants


def reads_along_k(sch: Schedule, stage: BlockRV) -> bool | None:
    """Whether a copy block of a normalized operand (iterators ``s, x, k``; its producers inlined,
    so it reads the operand where it is stored) reads consecutive elements along k (True) or
    along x (False), by the flat index of its loads that use both x and k (else of those that use
    either): None where they disagree, or none steps by one element."""
    block = sch.get(stage)
    if len(block.iter_vars) != 3:
        return None
    _, x, k = (iv.var for iv in block.iter_vars)
    steps = [_flat_steps(load) for load in walk(block.body) if isinstance(load, BufferLoad)]
    steps = [step for step in steps if step is not None and (x in step or k in step)]
    both = [step for step in steps if x in step and k in step]
    verdicts = {True if step.get(k) == 1 else False if step.get(x) == 1 else None for step in both or steps}
    return verdicts.pop() if len(verdicts) == 1 else None


def _flat_steps(load: BufferLoad) -> dict | None:
    """Each variable's step in the flat index of ``load`` (by its strides, else row-major; none
    for a variable of a dimension above a symbolic one); None where an index is not a sum of
    variables times constants and constants."""
    buffer = load.buffer
    if buffer.strides:
        if not all(isinstance(stride, IntImm) for stride in buffer.strides):
            return None
        strides = [stride.value for stride in buffer.strides]
    else:
        strides, stride = [], 1
        for dim in reversed(buffer.shape):
            strides.insert(0, stride)
            stride = stride * dim.value if isinstance(dim, IntImm) and stride is not None else None
    flat: dict = {}
    for index, stride in zip(load.indices, strides):
        terms = _affine_terms(index)
        if terms is None:
            return None
        for var, coefficient in terms:
            if stride is not None:  # (a dimension above a symbolic one: no constant step)
                flat[var] = flat.get(var, 0) + coefficient * stride
    return flat


def _affine_terms(e: Any) -> list | None:
    """``linear_terms`` of ``e`` with its constant terms dropped (``vk + 64``)."""
    if isinstance(e, IntImm):
        return []
    if isinstance(e, Add):
        a, b = _affine_terms(e.a), _affine_terms(e.b)
        return None if a is None or b is None else a + b
    return linear_terms(e)


def schedule_large_tiles(sch: Schedule, main: BlockRV, tiles: SimtTiles = SimtTiles()) -> None:
    """Schedule the normalized float32 matmul ``main`` (iterators ``s, i, j, k``) of a
    ``LargeMatmul`` that ``takes_simt_plan``, in the shape ``tiles``."""
    batch, i, j, k = sch.get_loops(main)
    bi, vi, ti, mi = sch.split(i, [None, tiles.virtual[0], tiles.threads[0], MICRO])
    bj, vj, tj, mj = sch.split(j, [None, tiles.virtual[1], tiles.threads[1], MICRO])
    ko, ki = sch.split(k, [None, tiles.k_step])
    sch.reorder(bi, bj, vi, vj, ti, tj, ko, ki, mi, mj)
    bi = sch.fuse(batch, bi)
    for loop, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (vi, "vthread.y"), (vj, "vthread.x"),
                      (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        sch.bind(loop, tag)
    sch.annotate(tj, "pragma_auto_unroll_max_step", UNROLL)
    sch.annotate(tj, "pragma_unroll_explicit", 1)

    write_back = sch.cache_write(main, 0, "local")
    sch.reverse_compute_at(write_back, tj, preserve_unit_loops=True)
    sch.vectorize(sch.get_loops(write_back)[-1])

    for index in (0, 1):
        _stage_in_shared(sch, main, index, ko, tiles.threads)
    for index in (0, 1):  # a virtual thread's 4 rows (columns) at one k: one vector load
        fragment = sch.cache_read(main, index, "local")
        sch.compute_at(fragment, ki, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(fragment)[-1])
    inline_consumer_chain(sch, write_back)
    sch.decompose_reduction(main, ko)
    # (ko's body: A to registers, A to shared, B to registers, B to shared, the FMAs)
    sch.annotate(ko, "software_pipeline_stage", [0, 0, 0, 0, 1])
    sch.annotate(ko, "software_pipeline_order", [0, 3, 1, 4, 2])


def _stage_in_shared(sch: Schedule, main: BlockRV, index: int, ko: Any, threads: tuple[int, int]) -> None:
    """A k step of operand ``index`` copied to shared memory k-major, all threads copying vectors
    along the axis contiguous in global memory (along k where neither is)."""
    stage = sch.cache_read(main, index, "shared")
    inline_producers(sch, stage)
    along_x = reads_along_k(sch, stage) is False
    sch.transform_layout(stage, ("write", 0), lambda s, x, k: (s, k, x))
    sch.compute_at(stage, ko, preserve_unit_loops=True)
    _, x, k = sch.get_loops(stage)[-3:]
    if along_x:
        sch.reorder(k, x)
    fused = sch.fuse(*sch.get_loops(stage)[-3:])
    _, ty, tx, vector = sch.split(fused, [None, *threads, VECTOR])
    sch.vectorize(vector)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.annotate(stage, "tirx.manifest_shared_memory_local_stage", 1)
    sch.annotate(stage, "double_buffer_scope", 0)


__all__ = ["LargeMatmul", "SimtTiles", "large_matmul", "reads_along_k", "schedule_large_tiles", "simt_variants"]
