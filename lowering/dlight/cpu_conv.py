"""The default CPU schedule of a 2-D convolution in NCHW as an implicit GEMM, for any window,
stride, padding, dilation and groups: ``Y[n, f, y, x] += D[n, g(f) * C' + c, y * s + ry * d,
x * s + rx * d] * W[f, c, ry, rx]`` (D the zero-padded input that the legalized
``R.nn.conv2d`` computes first), with an elementwise epilogue (bias, batch norm's scale and
shift, a residual add, relu).

Seen as a matrix product, the rows are an output row's pixels ``x``, the columns the output
channels ``f`` and the reduction runs over ``k = (c, ry, rx)``; nothing is copied into an
im2col matrix. The loops become, outermost first::

    n f_0 y (parallel) | x_0 | c ry rx | x_1 (unrolled, MR) | f_1 (unrolled, NV) | f_v (vectorized)

Per k, MR broadcasts of D, at offsets ``i * stride`` from one address whatever the stride and
the window, and NV vectors of W feed MR x NV FMAs into accumulators that stay in registers over
the whole reduction (a local buffer laid out ``[x, f]``). W is first copied into
``[f // T, c, ry, rx, f % T]`` (T = NV lanes-wide vectors), so a tile's weights per k are
contiguous: that block reads only W and is marked ``meta_schedule.layout_rewrite_preproc`` as
the Matmul rule marks its packed B, for LiftTransformParams (or, for constant weights,
``tvms.compile``'s folding) to run once per weight. A 1x1 convolution is thus a plain GEMM
over the pixels. The tile never straddles two groups (T divides a group's channels), so its
lanes share one input channel. A parallel task is one output row of one channel tile: the
tile's weights are reused along the row, the row's input slab along the channel tiles.
The elementwise epilogue is inlined into the accumulators' copy to Y (unrolled, along the
row), and the padding of the input is computed first, in parallel, in vectors. (Vectors of
pixels instead, as the first version of this rule had for 3x3 stride-1 convolutions only,
measured as fast at 56 pixels a row and half as fast at 28.) A short reduction is the exception:
an RGB image's first conv does 27 multiply-adds an output, so the copy out, one store an element,
costs as much as they do; there the vectors run along the row (``_pixel_vectors``: ShuffleNet's
3x3x3 -> 24 channels at stride 2, 0.116 against 0.245 ms with vectors of channels). So is a
grouped 1x1 conv whose groups fill vectors of channels badly while whole rows fill vectors of
pixels exactly (``_plane_vectors``, a GEMM over the plane: ShuffleNet's 6 -> 28 channels a group
at 56x56, 0.041 against 0.100 ms; 34 a group at 28x28 as fast as on padded groups, without the
crop).

A group whose output channels fill vectors badly (34 of 16 lanes: vectors of 2) is padded with
zero filters to whole vectors before this rule sees it, in Relax (``relax/pad_conv_groups.py``),
so that the padded conv is scheduled, and tuned, as any other. A depthwise
convolution (one input channel per group) has no vector of channels that share an input: its
vectors run along an output row instead (``window_rows``, which the Pool rule shares).
"""
from __future__ import annotations

from functools import partial
from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.expr import Add, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, const
from ...ir.dtype import DataType
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ..schedule import BlockRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .analysis import BlockInfo, CPURule, const_int, describe_block, describe_blocks, has_nested_blocks, vector_lanes
from .cpu_matmul import mark_weight_packing
from .cpu_shuffle import divisor_width
from .cpu_tactics import schedule_spatial_block, vector_factor


class Conv2D(CPURule):
    """Register-tiled implicit-GEMM NCHW conv2d (see the module docstring)."""

    name = "Conv2D"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        matched = match_conv(func) if isinstance(func, PrimFunc) else None
        if matched is None:
            return None
        _, conv, data, _, prologues, _ = matched
        plans: tuple = (_channel_vectors, _depthwise)
        if (width := pixel_vector_width(conv, data, target)) is not None:
            plans = (partial(_pixel_vectors, vec=width), *plans)
        elif (tile := plane_tile_for(conv, data, prologues, target)) is not None:
            plans = (partial(_plane_vectors, tile=tile), *plans)
        for plan in plans:  # (each on a fresh schedule: the first on the match's)
            sch = try_conv_plan(func, target, plan, matched)
            if sch is not None:
                return sch
            matched = None
        return None


def around_reduction(func: PrimFunc) -> tuple | None:
    """``(schedule, prologues, reduction, epilogues)``: the blocks of a flat ``func`` that has one
    reduction (of constant extents), those before it and those after it (elementwise: injective,
    one loop per iterator); None for any other function."""
    sch = Schedule(func)
    if has_nested_blocks(sch):
        return None
    infos = describe_blocks(sch)
    found = [i for i, info in enumerate(infos) if info.is_reduction()]
    if len(found) != 1 or any(const_int(it.extent) is None for it in infos[found[0]].iters):
        return None
    epilogues = infos[found[0] + 1:]
    if any(not e.is_injective() or not e.trivial for e in epilogues):
        return None
    return sch, infos[:found[0]], infos[found[0]], epilogues


def match_conv(func: PrimFunc, matcher: Any = None) -> tuple | None:
    """``(schedule, conv, data, weight, prologues, epilogues)`` of ``func`` when it is a
    convolution (``matcher(conv)`` finds its data and weight loads: ``match_conv2d`` unless
    given) after the padding of its input or the filling of its weight, before an elementwise
    epilogue; None otherwise."""
    found = around_reduction(func)
    operands = None if found is None else (matcher or match_conv2d)(found[2])
    if operands is None:
        return None
    sch, prologues, conv, epilogues = found
    data, weight = operands
    if any(p.write().buffer not in (data.buffer, weight.buffer) or not p.is_injective() for p in prologues):
        return None  # only the padding of the input (or the filling of the weight) may come first
    return sch, conv, data, weight, prologues, epilogues


def try_conv_plan(func: PrimFunc, target: Any, plan: Any, matched: tuple | None = None,
                  matcher: Any = None) -> Schedule | None:
    """``plan(sch, conv, data, weight, epilogues, target)`` on a schedule of ``func`` when ``func``
    is a convolution (``matched``: its ``match_conv``, unchanged, else matched here with
    ``matcher``); the schedule, or None when the function is not one or the plan does not fit
    (the plan returns None; else whether its loops read the padding in place, inlined)."""
    matched = matched or match_conv(func, matcher)
    if matched is None:
        return None
    sch, conv, data, weight, prologues, epilogues = matched
    try:
        inline_padding = plan(sch, conv, data, weight, epilogues, target)
        if inline_padding is None:
            return None
        for pro in prologues:
            if pro.write().buffer is weight.buffer:  # (the padded weight: part of the packing)
                packed = sch.get_consumers(pro.rv)[0]
                sch.compute_inline(pro.rv)
                mark_weight_packing(sch, packed)
            elif inline_padding or _is_copy(pro):
                sch.compute_inline(pro.rv)  # (or no padding: a copy)
            else:
                schedule_spatial_block(sch, describe_block(sch, pro.rv), target)
    except ScheduleError:
        return None
    return sch


SHORT_REDUCTION = 32  # (input channels x window) at most this: the channel-vector plan's copy out
# costs as much as its FMAs (ShuffleNet's first conv, 3x3x3 -> 24 channels: 0.245 ms that way)


def _pixel_vectors(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                   target: Any, vec: int) -> bool:
    """A short reduction (an RGB image's first conv) with vectors of ``vec`` output pixels along
    the row: per k a tile's MR weights are broadcast and its NV vectors of input pixels loaded
    (strided by the conv's stride), and each output vector goes to Y in one contiguous store.
    With vectors of channels each output element is a store of its own, the cost that dominates
    when a pixel takes a few dozen multiply-adds. For the convs of ``pixel_vector_width``."""
    extents = [const_int(it.extent) for it in conv.iters]
    mr, nv = pixel_tile(extents[1], extents[3] // vec, vector_registers(target))
    n, f, y, x, c, ry, rx = conv.loops
    f_0, f_1 = sch.split(f, [None, mr])
    x_0, x_1, x_v = sch.split(x, [None, nv, vec])
    sch.reorder(n, f_0, y, x_0, c, ry, rx, f_1, x_1, x_v)
    sch.parallel(sch.fuse(n, f_0, y))
    _accumulate_in_vectors(sch, conv, weight, epilogues, target, mr, x_0, vec)
    return False


def _plane_vectors(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                   target: Any, tile: tuple[int, int, int]) -> bool:
    """A 1x1 convolution as a GEMM over the plane: a ``tile`` is MR output channels of a group
    by R whole rows, flattened into NV vectors; per k, MR broadcast weights and NV input vectors
    feed MR x NV FMAs, and the epilogue goes out in contiguous stores. For the convs of
    ``plane_tile_for``."""
    mr, rows, vec = tile
    n, f, y, x, c, ry, rx = conv.loops
    f_0, f_1 = sch.split(f, [None, mr])
    y_0, y_1 = sch.split(y, [None, rows])
    sch.reorder(n, f_0, y_0, c, ry, rx, f_1, y_1, x)
    sch.split(sch.fuse(y_1, x), [None, vec])
    outer = sch.fuse(n, f_0, y_0)
    sch.parallel(outer)
    _accumulate_in_vectors(sch, conv, weight, epilogues, target, mr, outer, vec)
    return False


def _accumulate_in_vectors(sch: Schedule, conv: BlockInfo, weight: BufferLoad, epilogues: list, target: Any,
                           mr: int, tile_loop: Any, vec: int) -> None:
    """The pixel-vector plans' common part, their loops split and ordered ``.. tile_loop | c ry
    rx | MR channels | vectors | lanes``: the weights packed by ``mr`` channels, the tile's
    accumulators in registers, the epilogue inlined into their copy out after ``tile_loop``, one
    store a vector of ``vec`` lanes (the copy's pixels flattened), the inner loops unrolled."""
    pack_weight(sch, conv, weight, mr)
    acc = sch.cache_write(conv.rv, 0, "local")
    inline_epilogues(sch, acc, epilogues, target)
    sch.reverse_compute_at(acc, tile_loop, preserve_unit_loops=True)
    *_, a_f, a_y, a_x = sch.get_loops(acc)
    a_p, a_v = sch.split(sch.fuse(a_y, a_x), [None, vec])
    init = sch.decompose_reduction(conv.rv, conv.loops[4])
    for inner in (sch.get_loops(conv.rv)[-3:], sch.get_loops(init)[-3:], (a_f, a_p, a_v)):
        sch.unroll(inner[0])
        sch.unroll(inner[1])
        sch.vectorize(inner[2])


def plane_tile_for(conv: BlockInfo, data: BufferLoad, prologues: list, target: Any) -> tuple[int, int, int] | None:
    """``plane_tile`` of a float32 1x1 stride-1 convolution that reads its input plane as it is
    (no padding pass among the ``prologues`` writes it; a copy inlines), with more than one input
    channel a group (a depthwise one is ``_depthwise``'s), when the plane-vector plan beats the
    channel-vector plan; else None."""
    extents = [const_int(it.extent) for it in conv.iters]
    groups = conv_groups(conv, data)
    if extents[5] * extents[6] != 1 or groups is None or extents[4] < 2 or \
            conv.write().buffer.dtype != DataType("float32") or not _reads_plane_in_place(conv, data) or \
            any(p.write().buffer is data.buffer and not _is_copy(p) for p in prologues):
        return None
    return plane_tile(groups, extents[4], extents[1] // groups, extents[2], extents[3], target)


def conv_groups(conv: BlockInfo, data: BufferLoad) -> int | None:
    """The conv's groups (input channels over a group's), or None when that is no whole number
    of groups of whole output channels (symbolic channels, hand-written TIR)."""
    channels, group_in, filters = const_int(data.buffer.shape[1]), const_int(conv.iters[4].extent), \
        const_int(conv.iters[1].extent)
    if channels is None or not group_in or channels % group_in or filters % (channels // group_in):
        return None
    return channels // group_in


def _reads_plane_in_place(conv: BlockInfo, data: BufferLoad) -> bool:
    """Whether the conv reads input row ``y`` and column ``x`` for output pixel ``(y, x)`` (its
    window at zero): no stride, no padding offset."""
    n, f, y, x, c, ry, rx = (it.var for it in conv.iters)
    at = {ry: const(0, ry.dtype), rx: const(0, rx.dtype)}
    row, column = (Analyzer().simplify(substitute(i, at)) for i in data.indices[2:])
    return row is y and column is x


def plane_tile(groups: int, group_in: int, group_out: int, height: int, width: int,
               target: Any) -> tuple[int, int, int] | None:
    """(MR channels, R rows, vector lanes) of the plane-vector plan for a 1x1 conv whose groups
    have ``group_out`` output channels, on planes of ``height`` x ``width``: R rows that fill
    vectors of the target's lanes exactly (a guarded last vector measured 3.5x slower, its
    masked accumulators out of the registers; a vector a row of 14 of 16 lanes 1.4x slower); the
    tile with the largest ``plane_speed``, then the most accumulators, within the vector
    registers less four. None when the channel-vector plan is as fast (``channel_speed``, on
    groups padded as PadConvGroups pads them) or no tile fits."""
    lanes = vector_lanes(target, 32)
    registers = vector_registers(target)
    options = [(mr, rows, lanes) for rows in range(1, height + 1) if height % rows == 0 and rows * width % lanes == 0
               for mr in range(1, group_out + 1)
               if group_out % mr == 0 and (mr + 1) * rows * width // lanes + 1 <= registers - 4]
    best = max(options, key=lambda t: (plane_speed(t, width), t[0] * t[1]), default=None)
    if best is None or plane_speed(best, width) <= channel_speed(groups, group_in, group_out, width, target):
        return None
    return best


def plane_speed(tile: tuple[int, int, int], width: int) -> float:
    """The share of the FMA ports an (MR, R, lanes) plane tile keeps busy: its MR broadcasts and
    NV vectors per k feed MR x NV FMAs, in 8 accumulators or more (its vectors are full)."""
    mr, rows, lanes = tile
    nv = rows * width // lanes
    return min(1.0, mr * nv / (mr + nv)) * min(1.0, mr * nv / 8)


def channel_speed(groups: int, group_in: int, group_out: int, width: int, target: Any) -> float:
    """``plane_speed``'s measure of the channel-vector plan: its tile's share of the FMA ports,
    its vectors' lanes against the target's, and the padding PadConvGroups would add."""
    from ..relax.pad_conv_groups import group_padding

    lanes = vector_lanes(target, 32)
    padded = group_padding(groups, group_in, group_out, 1, width, DataType("float32"), target)
    channels = padded or group_out
    tile = channel_tile(channels, width, lanes, vector_registers(target))
    if tile is None:
        return 0.0
    return tile_speed(tile) * tile[2] / lanes * group_out / channels


def pixel_vector_width(conv: BlockInfo, data: BufferLoad, target: Any) -> int | None:
    """The vector of the pixel-vector plan (the widest power of two dividing an output row) when
    the plan suits ``conv``: ungrouped, a reduction of SHORT_REDUCTION or less, and vectors of at
    least half the target's lanes; None otherwise."""
    extents = [const_int(it.extent) for it in conv.iters]
    lanes = vector_lanes(target, conv.write().buffer.dtype)
    vec = vector_factor(extents[3], lanes)
    if conv_groups(conv, data) != 1 or extents[4] * extents[5] * extents[6] > SHORT_REDUCTION:
        return None
    return vec if 2 * vec >= lanes else None


def pixel_tile(channels: int, row_vectors: int, registers: int) -> tuple[int, int]:
    """The (MR channels, NV vectors of pixels) tile of the pixel-vector plan: MR a divisor of the
    channels, NV of the row's vectors, the MR x NV accumulators, NV input vectors and a broadcast
    within the ``registers`` less four (the strided loads' shuffles); the most accumulators (FMAs
    per k step), then the fewest loads."""
    options = [(mr, nv) for mr in range(1, channels + 1) if channels % mr == 0
               for nv in range(1, row_vectors + 1) if row_vectors % nv == 0 and mr * nv + nv + 1 <= registers - 4]
    return max(options, key=lambda t: (t[0] * t[1], -t[1]))


def _is_copy(block: BlockInfo) -> bool:
    """Whether the block stores a load as it is (a padding of zero pixels)."""
    return isinstance(block.block.body, BufferStore) and isinstance(block.block.body.value, BufferLoad)


def _channel_vectors(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                     target: Any) -> bool | None:
    """The implicit GEMM with vectors along the output channels (any window, stride, groups)."""
    extents = [const_int(it.extent) for it in conv.iters]
    groups = conv_groups(conv, data)
    if not groups:
        return None
    lanes = vector_lanes(target, conv.write().buffer.dtype)
    registers = vector_registers(target)
    tile = channel_tile(extents[1] // groups, extents[3], lanes, registers)
    if tile is None:
        return None
    schedule_channel_vectors(sch, conv, weight, epilogues, target, *tile)
    return False


def _depthwise(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
               target: Any) -> bool | None:
    """One input channel per output channel (no vector of channels to share an input value):
    ``window_rows`` in vectors of any width, which read the padding in place (masked loads at the
    edges: measured 24 against 33 us for a 3x3 layer of 272 channels of 14x14 after a padding pass)."""
    if const_int(conv.iters[4].extent) != 1:
        return None
    n, f, y, x, c, ry, rx = conv.loops
    window_rows(sch, conv, data, [n, f, y], x, [c, ry, rx], epilogues, target, any_width=True)
    return True


def window_rows(sch: Schedule, info: BlockInfo, data: BufferLoad, rows: list, x: Any, window: list, epilogues: list,
                target: Any, any_width: bool = False) -> bool:
    """A reduction over a window of its input ``data`` (a depthwise convolution, a pooling) in
    rows: each parallel task is an output row (the fused loops ``rows``), accumulated in a local
    row over the ``window`` loops, the epilogue applied on its way out. Vectors run along the row
    ``x`` where it reads ``data`` contiguously and a vector has 4 lanes or more; otherwise the
    rows stay scalar and read the padding in place (measured, interleaved: rows of 14 in vectors
    of 2, 0.065 against 0.052 ms for a 3x3 depthwise layer of 272 channels; strided vector loads
    and a padding pass, 0.19 against 0.09 ms for one of 112 channels of 56x56, stride 2; vectors
    of 8 along 56-pixel rows of a pooling, 0.14 against 0.24 ms). ``any_width``: a vector is the
    largest divisor of the row up to the target's lanes, not only a power of two (a whole row of
    14 or 7 pixels: a 3x3 depthwise layer of 272 channels of 14x14, 24 against 41 us with scalar
    rows). Returns whether it vectorized."""
    block = info.rv
    column = info.iters[len(rows)]
    lanes = vector_lanes(target, info.write().buffer.dtype)
    extent = const_int(column.extent)
    width = divisor_width(extent, lanes) if any_width else vector_factor(extent, lanes)
    if width < 4 or not unit_stride(data.indices[-1], column.var, [it.var for it in info.iters[-len(window):]]):
        width = 1
    sch.reorder(*rows, *window, x)
    fused = sch.fuse(*rows)
    sch.parallel(fused)
    acc = sch.cache_write(block, 0, "local")
    inline_epilogues(sch, acc, epilogues, target)
    sch.reverse_compute_at(acc, fused)
    init = sch.decompose_reduction(block, window[0])
    if width > 1:
        for stage in (block, init, acc):
            sch.vectorize(sch.split(sch.get_loops(stage)[-1], [None, width])[1])
    return width > 1


def unit_stride(index: Any, x: Var, window: list) -> bool:
    """Whether ``index`` moves by one as ``x`` does (the window's iterators held at zero)."""
    at = lambda v: substitute(index, {x: const(v, x.dtype), **{w: const(0, w.dtype) for w in window}})
    step = Analyzer().simplify(Sub(at(1), at(0)))
    return isinstance(step, IntImm) and step.value == 1


def match_conv2d(info: BlockInfo) -> tuple[BufferLoad, BufferLoad] | None:
    """The data and weight loads of ``Y[n, f, y, x] = Y[n, f, y, x] + D[n, .., .., ..] *
    W[f, c, ry, rx]`` (iterators n f y x c ry rx, casts allowed; D's channel, row and column
    any expressions of them: groups, strides, dilation); None otherwise."""
    loads = accumulated_product(info, "SSSSRRR")
    if loads is None:
        return None
    n, f, y, x, c, ry, rx = (it.var for it in info.iters)
    for data, weight in (loads, loads[::-1]):
        if [id(i) for i in weight.indices] != [id(f), id(c), id(ry), id(rx)] or len(data.indices) != 4:
            continue
        if data.indices[0] is n and data.buffer is not weight.buffer:
            return data, weight
    return None


def accumulated_product(info: BlockInfo, kinds: str) -> list[BufferLoad] | None:
    """The two loads of ``Y[spatial iterators] = Y[..] + A[..] * B[..]`` (casts allowed) in a
    trivially bound block of iterators of ``kinds``; None otherwise."""
    if [it.kind for it in info.iters] != list(kinds) or len(info.loops) != len(kinds) or not info.trivial:
        return None
    store = info.block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    if [id(i) for i in store.indices] != [id(it.var) for it in info.spatial]:
        return None
    acc, product = store.value.a, store.value.b
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer) or not isinstance(product, Mul):
        return None
    loads = [p.value if isinstance(p, Cast) else p for p in (product.a, product.b)]
    return loads if all(isinstance(p, BufferLoad) for p in loads) else None


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


def vector_registers(target: Any) -> int:
    """How many vector registers the target has: 32 with AVX-512, else 16."""
    return 32 if vector_lanes(target, 32) >= 16 else 16


def register_tiles(group_channels: int, width: int, lanes: int, registers: int,
                   per_block: int = 1) -> list[tuple[int, int, int]]:
    """Every (MR pixels, NV vectors, lanes) tile of the channel-vector plan: vectors of the
    widest power of two up to ``lanes`` that divides a group's output channels, MR a divisor of
    the output row, NV of the group's vectors (whole blocks of ``per_block`` vectors), and the
    MR x NV accumulators, MR broadcasts and NV weight vectors within the vector ``registers``;
    none for one output channel per group."""
    if group_channels < 2:
        return []
    vec = vector_factor(group_channels, lanes)
    return [(mr, nv, vec) for mr in range(1, width + 1) if width % mr == 0
            for nv in range(per_block, registers, per_block)
            if (group_channels // vec) % nv == 0 and mr * nv + mr + nv < registers]


def channel_tile(group_channels: int, width: int, lanes: int, registers: int,
                 per_block: int = 1) -> tuple[int, int, int] | None:
    """The register tile (pixels MR, vectors of channels, lanes of a vector) of the channel-vector
    plan, of ``register_tiles``: vectors of the widest power of two up to ``lanes`` that divides
    a group's output channels (groups of 34: 2 lanes, still 1.6x the fallback's speed), MR a
    divisor of the row (a guarded last tile measured 5x slower), its MR x NV accumulators, MR
    broadcasts and NV vectors of W within the ``registers`` (11 x 2 on 32: spilled, 0.8x of
    5 x 4). Per k the tile's MR broadcasts of D (from L1: a few input rows) and NV vector loads of
    W (from L2 when a tile's weights outgrow L1: counted twice) share two load ports, and its
    MR x NV FMAs two FMA ports, each FMA 4 cycles deep: the tile is as fast as it can be when
    MR x NV >= MR + 2 NV and there are 8 accumulators or more; of those, the one with the most
    pixels (each weight load serves them all: 9 x 2 vectors measured 2x faster than 3 x 8 on a
    row of 27), then the largest. A short reduction does not change the choice: each output is
    one store whatever NV (the copy out runs along the row), and on SqueezeNet's first conv
    (k = 27, 64 channels, rows of 111) 3 x 4 measured as fast as 3 x 2 alone (0.56 against
    0.61 ms) and in the model (within 5%, either way). None for one output channel per group."""
    return best_tile(register_tiles(group_channels, width, lanes, registers, per_block))


def best_tile(options: list) -> tuple[int, int, int] | None:
    """``channel_tile``'s pick among ``options`` (see there); None when there is none."""
    return max(options, key=lambda t: (tile_speed(t), t[0], t[1]), default=None)


def tile_speed(tile: tuple[int, int, int]) -> float:
    """The share of the FMA ports a (MR, NV, lanes) tile of ``channel_tile`` keeps busy (see there)."""
    mr, nv = tile[0], tile[1]
    return min(1.0, mr * nv / (mr + 2 * nv)) * min(1.0, mr * nv / 8)


def inline_epilogues(sch: Schedule, acc: BlockRV, epilogues: list, target: Any) -> None:
    """Compute the elementwise epilogue as the accumulators go to memory (inlined into their
    copy, one block after the other); a block that does not inline, and those after it, stay
    blocks of their own, vectorized and parallel."""
    for k in range(len(epilogues)):
        try:
            sch.reverse_compute_inline(sch.get_consumers(acc)[0])
        except ScheduleError:
            for rest in epilogues[k:]:
                schedule_spatial_block(sch, describe_block(sch, rest.rv), target)
            return


def schedule_channel_vectors(sch: Schedule, conv: BlockInfo, weight: BufferLoad, epilogues: list, target: Any,
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
    inline_epilogues(sch, acc, epilogues, target)
    sch.reverse_compute_at(acc, x_0, preserve_unit_loops=True)
    a_n, a_f, a_y, a_x = sch.get_loops(acc)[-4:]
    init = sch.decompose_reduction(block, c)
    for stage in (block, init):
        inner = sch.get_loops(stage)
        sch.unroll(inner[-3])
        sch.unroll(inner[-2])
        sch.vectorize(inner[-1])
    # the copy out runs along the row: contiguous stores (along the channels, stores strided by a
    # whole channel measured 1.3x slower for a 1x1 of 16 input channels, where the copy counts)
    sch.reorder(a_n, a_y, a_f, a_x)
    sch.unroll(a_f)
    sch.unroll(a_x)


__all__ = ["Conv2D", "accumulated_product", "around_reduction", "best_tile", "match_conv", "match_conv2d", "pixel_tile",
           "try_conv_plan", "unit_stride", "vector_registers", "window_rows"]
