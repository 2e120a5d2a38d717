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

Every other 2-D convolution (any kernel size, stride, padding, dilation, groups; 1x1 ones are
plain GEMMs) gets the transposed tiling, vectors along the output channels instead of the
pixels (``schedule_channel_vectors``)::

    n f_0 y (parallel) | x_0 | c ry rx | x_1 (unrolled, MR) | f_1 (unrolled) | f_v (vectorized)

Per k, MR broadcasts of D, at offsets ``i * stride`` from one address whatever the stride,
and the f tile's vectors of W (packed ``[f // T, c, ry, rx, f % T]``, T = f_1 x f_v, lifted
as above) feed the MR x f_1 accumulators. A row's pixel count that MR does not divide leaves a
guarded last tile (whole pixels, not lanes). The tile never straddles two groups (T divides
the channels of a group), so the lanes share one input channel. The accumulators sit in a
local buffer laid out ``[x, f]`` (vectors of f); the elementwise epilogue is inlined into their
copy to Y. Depthwise convolutions (one input channel per group) keep the pixels in the vectors:
``schedule_depthwise``.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import Add, BufferLoad, Cast, FloorDiv, FloorMod, Mul, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ..schedule import Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .analysis import BlockInfo, CPURule, const_int, describe_block, describe_blocks, has_nested_blocks, vector_lanes
from .cpu_matmul import accumulator_registers, mark_weight_packing, schedule_epilogue
from .cpu_tactics import schedule_spatial_block

MAX_TILE_ROWS = 12  # output channels of a register tile


class Conv2D(CPURule):
    """Register-tiled implicit-GEMM NCHW conv2d (see the module docstring)."""

    name = "Conv2D"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc):
            return None
        for plan in (_pixel_vectors, _channel_vectors):  # (each on a fresh schedule)
            sch = _try_plan(func, target, plan)
            if sch is not None:
                return sch
        return None


def _try_plan(func: PrimFunc, target: Any, plan: Any) -> Schedule | None:
    """``plan(sch, conv, data, weight, epilogues, target)`` on a schedule of ``func`` when ``func``
    is a conv2d (after the padding of its input, before an elementwise epilogue); the schedule,
    or None when the function is not one or the plan does not fit."""
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
    if any(const_int(it.extent) is None for it in conv.iters):
        return None
    try:
        if not plan(sch, conv, data, weight, epilogues, target):
            return None
        for pad in prologues:
            if isinstance(pad.block.body, BufferStore) and isinstance(pad.block.body.value, BufferLoad):
                sch.compute_inline(pad.rv)  # (no padding: a copy)
            else:
                schedule_spatial_block(sch, describe_block(sch, pad.rv), target)
    except ScheduleError:
        return None
    return sch


def _pixel_vectors(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                   target: Any) -> bool:
    """The implicit GEMM with vectors along an output row (stride and dilation 1, groups 1)."""
    if not _unit_window(conv, data):
        return False
    lanes = vector_lanes(target, conv.write().buffer.dtype)
    tile = register_tile(const_int(conv.iters[3].extent), lanes, accumulator_registers(target))
    if tile is None:
        return False
    rows = schedule_conv(sch, conv, weight, *tile)
    for epilogue in epilogues:
        schedule_epilogue(sch, rows, epilogue, lanes)
    return True


def _channel_vectors(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                     target: Any) -> bool:
    """The implicit GEMM with vectors along the output channels (any window, stride, groups)."""
    extents = [const_int(it.extent) for it in conv.iters]
    groups = const_int(data.buffer.shape[1]) // extents[4] if const_int(data.buffer.shape[1]) else None
    if not groups or extents[1] % groups:
        return False
    lanes = vector_lanes(target, conv.write().buffer.dtype)
    tile = channel_tile(extents[1] // groups, extents[3], lanes, accumulator_registers(target))
    if tile is None:
        return False
    schedule_channel_vectors(sch, conv, weight, epilogues, *tile)
    return True


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
    """The data and weight loads of ``Y[n, f, y, x] = Y[n, f, y, x] + D[n, .., .., ..] *
    W[f, c, ry, rx]`` (iterators n f y x c ry rx, casts allowed; D's channel, row and column
    any expressions of them: groups, strides, dilation); None otherwise."""
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
        if data.indices[0] is n and data.buffer is not weight.buffer:
            return data, weight
    return None


def _unit_window(info: BlockInfo, data: BufferLoad) -> bool:
    """D is read at ``[n, c, y + ry, x + rx]``: stride and dilation 1, one group."""
    n, f, y, x, c, ry, rx = (it.var for it in info.iters)
    return data.indices[1] is c and _sum_of(data.indices[2], y, ry) and _sum_of(data.indices[3], x, rx)


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
    pack_weight(sch, conv, weight, mr)
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


def pack_weight(sch: Schedule, conv: BlockInfo, weight: BufferLoad, rows: int) -> None:
    """Copy W into ``[f // rows, c, ry, rx, f % rows]`` (zero rows past F) before the conv, so a
    tile's ``rows`` weights per k are contiguous; marked for LiftTransformParams."""
    block = conv.rv
    w_read = next(i for i, r in enumerate(sch.get(block).reads) if r.buffer is weight.buffer)
    packed = sch.cache_read(block, w_read, "global", consumer_blocks=[block])
    dtype = weight.buffer.shape[0].dtype
    v = [Var(f"v{d}", dtype) for d in range(4)]
    rows_map = IndexMap(v, [FloorDiv(v[0], const(rows, dtype)), v[1], v[2], v[3], FloorMod(v[0], const(rows, dtype))])
    zero = const(0, weight.buffer.dtype) if const_int(conv.iters[1].extent) % rows else None
    sch.transform_layout(packed, ("write", 0), rows_map, pad_value=zero)
    sch.parallel(sch.get_loops(packed)[0])
    mark_weight_packing(sch, packed)


def channel_tile(group_channels: int, width: int, lanes: int, accumulators: int) -> tuple[int, int, int] | None:
    """The register tile (pixels MR, vectors of channels, lanes of a vector) of the channel-vector
    plan: vectors of the widest power of two up to ``lanes`` that divides a group's output
    channels (at least 4), tiles whose channels divide a group's, at most ``accumulators``
    vectors, with the most FMAs per load (MR x NV per MR + NV) times the share of a row's
    tiles that is real pixels (a row of 7 in tiles of 4: 7 / 8). None when no vector fits."""
    vec = lanes
    while vec >= 4 and group_channels % vec:
        vec //= 2
    if vec < 4:
        return None
    best, best_key = None, None
    for nv in range(1, accumulators + 1):
        if (group_channels // vec) % nv:
            continue
        for mr in range(1, min(width, accumulators // nv) + 1):
            used = width / (-(-width // mr) * mr)
            key = (used * mr * nv / (mr + nv), mr * nv)
            if best_key is None or key > best_key:
                best, best_key = (mr, nv, vec), key
    return best


def schedule_channel_vectors(sch: Schedule, conv: BlockInfo, weight: BufferLoad, epilogues: list,
                             mr: int, nv: int, vec: int) -> None:
    """The channel-vector plan (see the module docstring)."""
    block = conv.rv
    n, f, y, x, c, ry, rx = conv.loops
    f_0, f_1, f_v = sch.split(f, [None, nv, vec])
    x_0, x_1 = sch.split(x, [None, mr])
    sch.reorder(n, f_0, y, x_0, c, ry, rx, x_1, f_1, f_v)
    sch.parallel(sch.fuse(n, f_0, y))
    pack_weight(sch, conv, weight, nv * vec)
    acc = sch.cache_write(block, 0, "local")
    dtype = conv.write().buffer.shape[0].dtype
    v = [Var(f"v{d}", dtype) for d in range(4)]
    sch.transform_layout(block, ("write", 0), IndexMap(v, [v[0], v[2], v[3], v[1]]))  # (vectors of f)
    for epilogue in epilogues:  # computed on the tile's way to memory
        sch.reverse_compute_inline(sch.get_consumers(acc)[0])
    sch.reverse_compute_at(acc, x_0, preserve_unit_loops=True)
    a_n, a_f, a_y, a_x = sch.get_loops(acc)[-4:]
    a_f1, a_fv = sch.split(a_f, [nv, vec])
    sch.reorder(a_n, a_y, a_x, a_f1, a_fv)
    init = sch.decompose_reduction(block, c)
    for stage in (block, init, acc):
        inner = sch.get_loops(stage)
        sch.unroll(inner[-3])
        sch.unroll(inner[-2])
        sch.vectorize(inner[-1])


__all__ = ["Conv2D", "match_conv2d"]
