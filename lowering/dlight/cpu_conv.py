"""The default CPU schedule of a 2-D convolution in NCHW as an implicit GEMM:
``Y[n, f, y, x] += D[n, c, y + ry, x + rx] * W[f, c, ry, rx]`` (D the zero-padded input that the
legalized ``R.nn.conv2d`` computes first, stride and dilation 1), with an elementwise epilogue.

Seen as a matrix product, the rows are the output channels ``f``, the columns an output row's
pixels ``x`` and the reduction runs over ``k = (c, ry, rx)``: row ``k`` of the right-hand matrix
is the run ``D[n, c, y + ry, rx:rx + X]``, already contiguous in the padded input, so no im2col
copy is needed. The loops become, outermost first::

    n y (parallel) | f_0 | x_0 | c ry rx | f_1 (unrolled, MR) | x_u (unrolled, u) | x_v (vectorized)

The register tile is MR channels x u vectors of pixels, the vectors as wide as divides the row
(56 pixels: 8 lanes, ymm), MR x u filling the Matmul rule's accumulator registers with the most
FMAs per load (AVX-512's 24: 3 channels x 7 vectors; AVX2's 12: 12 x 1). The tile lives in a
local buffer (registers) over the whole reduction; per k, MR broadcasts of W and u loads of D
feed MR x u FMAs. W is first copied into ``[f // MR, c, ry, rx, f % MR]`` (zero rows past F),
so a tile's MR weights per k are contiguous: that block reads only W and is marked for
LiftTransformParams as the Matmul rule marks its packed B. One output row per parallel task:
its input slab (C x 3 rows) stays in cache while every channel tile uses it. The padded input
is computed first, in parallel over its channels, in vectors (the padding columns masked).
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import Add, BufferLoad, Cast, FloorDiv, FloorMod, Mul, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ..schedule import Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .analysis import BlockInfo, CPURule, const_int, describe_blocks, has_nested_blocks, vector_lanes
from .cpu_matmul import accumulator_registers, mark_weight_packing, schedule_epilogue

MAX_TILE_ROWS = 12  # output channels of a register tile


class Conv2D(CPURule):
    """Register-tiled implicit-GEMM NCHW conv2d (see the module docstring)."""

    name = "Conv2D"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc):
            return None
        sch = Schedule(func)
        if has_nested_blocks(sch):
            return None
        infos = describe_blocks(sch)
        convs = [i for i, info in enumerate(infos) if info.is_reduction()]
        if len(convs) != 1:
            return None
        conv = infos[convs[0]]
        operands = match_conv2d(conv)
        if operands is None:
            return None
        data, weight = operands
        prologues, epilogues = infos[:convs[0]], infos[convs[0] + 1:]
        if any(p.write().buffer is not data.buffer or not p.is_injective() for p in prologues):
            return None  # only the padding of the input may come first
        if any(not e.is_injective() or not e.trivial for e in epilogues):
            return None
        lanes = vector_lanes(target, conv.write().buffer.dtype)
        tile = register_tile(const_int(conv.iters[3].extent), lanes, accumulator_registers(target))
        if tile is None or const_int(conv.iters[1].extent) is None:
            return None
        try:
            rows = schedule_conv(sch, conv, weight, *tile)
            for pad in prologues:  # (the padding columns: masked lanes)
                loops = sch.get_loops(pad.rv)
                sch.parallel(sch.fuse(*loops[:2]))
                sch.vectorize(sch.split(loops[-1], [None, tile[2]])[1])
        except ScheduleError:
            return None
        for epilogue in epilogues:
            schedule_epilogue(sch, rows, epilogue, lanes)
        return sch


def register_tile(width: int | None, lanes: int, accumulators: int) -> tuple[int, int, int] | None:
    """The register tile (channels, vectors along a row, lanes of a vector): vectors of the
    widest power of two up to ``lanes`` that divides the row (56 pixels: 8), then the tile of
    at most ``accumulators`` vectors with the most FMAs per load (MR x u FMAs for MR
    broadcasts and u loads; 24 accumulators: 3 x 7 vectors, 12: 12 x 1). None when the row is
    not a multiple of 4 lanes."""
    if width is None:
        return None
    vec = lanes
    while vec >= 4 and width % vec:
        vec //= 2
    if vec < 4:
        return None
    options = [(min(MAX_TILE_ROWS, accumulators // u), u) for u in range(1, accumulators + 1)
               if (width // vec) % u == 0 and accumulators // u >= 1]
    mr, u = max(options, key=lambda o: (o[0] * o[1] / (o[0] + o[1]), o[0] * o[1]))
    return mr, u, vec


def match_conv2d(info: BlockInfo) -> tuple[BufferLoad, BufferLoad] | None:
    """The data and weight loads of ``Y[n, f, y, x] = Y[n, f, y, x] + D[n, c, y + ry, x + rx] *
    W[f, c, ry, rx]`` (iterators n f y x c ry rx, casts allowed); None otherwise."""
    if [it.kind for it in info.iters] != list("SSSSRRR") or len(info.loops) != 7 or not info.trivial:
        return None
    n, f, y, x, c, ry, rx = (it.var for it in info.iters)
    store = info.block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    if [id(i) for i in store.indices] != [id(n), id(f), id(y), id(x)]:
        return None
    acc, product = store.value.a, store.value.b
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer) or not isinstance(product, Mul):
        return None
    loads = [p.value if isinstance(p, Cast) else p for p in (product.a, product.b)]
    if not all(isinstance(p, BufferLoad) for p in loads):
        return None
    for data, weight in (loads, loads[::-1]):
        if [id(i) for i in weight.indices] != [id(f), id(c), id(ry), id(rx)] or len(data.indices) != 4:
            continue
        if [id(i) for i in data.indices[:2]] == [id(n), id(c)] and _sum_of(data.indices[2], y, ry) \
                and _sum_of(data.indices[3], x, rx):
            return data, weight
    return None


def _sum_of(e: Any, a: Var, b: Var) -> bool:
    return isinstance(e, Add) and {id(e.a), id(e.b)} == {id(a), id(b)}


def schedule_conv(sch: Schedule, conv: BlockInfo, weight: BufferLoad, mr: int, u: int, vec: int):
    """Tile, pack W, keep the tile in registers, parallelize over output rows; the row loop."""
    block = conv.rv
    n, f, y, x, c, ry, rx = conv.loops
    f_0, f_1 = sch.split(f, [None, mr])
    x_0, x_u, x_v = sch.split(x, [None, u, vec])
    sch.reorder(n, y, f_0, x_0, c, ry, rx, f_1, x_u, x_v)
    rows = sch.fuse(n, y)
    sch.parallel(rows)
    w_read = next(i for i, r in enumerate(sch.get(block).reads) if r.buffer is weight.buffer)
    packed = sch.cache_read(block, w_read, "global", consumer_blocks=[block])
    dtype = weight.buffer.shape[0].dtype
    v = [Var(f"v{d}", dtype) for d in range(4)]
    rows_map = IndexMap(v, [FloorDiv(v[0], const(mr, dtype)), v[1], v[2], v[3], FloorMod(v[0], const(mr, dtype))])
    zero = const(0, weight.buffer.dtype) if const_int(conv.iters[1].extent) % mr else None
    sch.transform_layout(packed, ("write", 0), rows_map, pad_value=zero)
    sch.parallel(sch.get_loops(packed)[0])
    mark_weight_packing(sch, packed)
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, x_0)
    sch.split(sch.get_loops(acc)[-1], [u, vec])
    init = sch.decompose_reduction(block, c)
    for stage in (block, init, acc):
        inner = sch.get_loops(stage)
        sch.unroll(inner[-3])
        sch.unroll(inner[-2])
        sch.vectorize(inner[-1])
    return rows


__all__ = ["Conv2D", "match_conv2d"]
