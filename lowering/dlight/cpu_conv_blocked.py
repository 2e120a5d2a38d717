"""The default CPU schedule of a 2-D convolution in a channel-blocked layout, as topi's
``conv2d_NCHWc`` computes it: ``Y[n, F, y, x, f] += D[n, c // b, y * s + ry * d, x * s + rx * d,
c % b] * W[F, c // b, ry, rx, c % b, f]`` (NCHW{b}c data, OIHW{b}i{bo}o weights, NCHW{bo}c out:
the ``bo`` channels of a pixel contiguous), or with a plain NCHW input (a first conv of 3
channels): ``D[n, c, .., ..] * W[F, c, ry, rx, f]``; D the zero-padded input, and an
elementwise epilogue on the 5-D output (bias, batch norm, a residual add, relu).

It is ``cpu_conv``'s channel-vector implicit GEMM, on a layout that needs no transposition::

    n F_0 y (parallel) | x_0 | C ry rx cb | x_1 (unrolled, MR) | F_1 f_0 (unrolled) | f_v (vectorized)

with the reduction ``c`` split into ``(c // b, ry, rx, c % b)``: per step the tile's weight
vectors ``W[F, C, ry, rx, cb, :]`` and its MR broadcasts ``D[n, C, .., x + i * s, cb]`` walk
memory in order. The vectors run along the output block ``f`` (two vectors per block of 16 on
AVX2's 8 lanes), the tile is ``channel_tile``'s (whole blocks of channels), and the
accumulators, laid out ``[x, F, f]``, stay in registers over the whole reduction. The epilogue
is inlined into their copy out, which stores whole contiguous vectors of ``f``. The weights are
read as they are, already blocked (packed per tile as ``cpu_conv`` packs them, at compile time:
0.924 against 0.926 ms for a 1x1 of 64 -> 256 channels at 56x56, 2.068 against 2.075 ms for a
3x3 of 64 -> 64: no gain). The padding is computed first, in parallel, in vectors (read in place
instead: 2.25 against 2.16 ms for the 7x7 stride-2 first layer, 3 -> 64 channels at 224), and the
loop over a block's input lanes is left to LLVM (unrolled: 1.11 against 0.95 ms for that 1x1).
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad, FloorDiv, FloorMod, Var
from ...ir.function import PrimFunc
from ..schedule import Schedule
from ..schedule.layout import IndexMap
from ..schedule.loop_transform import uses_var
from .analysis import BlockInfo, CPURule, const_int, vector_lanes
from .cpu_conv import (accumulated_product, best_tile, inline_epilogues, register_tiles, try_conv_plan,
                       vector_registers)
from .cpu_tactics import vector_factor


class Conv2DBlocked(CPURule):
    """Register-tiled implicit-GEMM conv2d in NCHW{b}c (see the module docstring)."""

    name = "Conv2DBlocked"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc):
            return None
        return try_conv_plan(func, target, _blocked_plan, matcher=match_blocked_conv2d)


def match_blocked_conv2d(info: BlockInfo) -> tuple[BufferLoad, BufferLoad] | None:
    """The data and weight loads of a conv2d with a blocked output (iterators n F y x f c ry rx,
    see the module docstring; D's row and column any expressions of y, ry and x, rx: strides,
    dilation): a blocked input with ``c // b``, ``c % b`` (b D's last extent, c all its channels:
    no groups), or a plain NCHW one; None otherwise."""
    loads = accumulated_product(info, "SSSSSRRR")
    if loads is None:
        return None
    n, f_outer, y, x, f, c, ry, rx = (it.var for it in info.iters)
    channels = const_int(info.iters[5].extent)
    for data, weight in (loads, loads[::-1]):
        if data.buffer is weight.buffer or data.indices[0] is not n:
            continue
        shape = [const_int(e) for e in data.buffer.shape]
        if len(data.indices) == 5 and len(weight.indices) == 6:  # NCHW{b}c data, OIHW{b}i{bo}o weights
            block = shape[4]
            split = [data.indices[1], data.indices[4], weight.indices[1], weight.indices[4]]
            if (None in (shape[1], block) or channels != shape[1] * block
                    or not all(_splits(i, kind, c, block) for i, kind in zip(split, (FloorDiv, FloorMod) * 2))):
                continue
            rest = [weight.indices[i] for i in (0, 2, 3, 5)]
        elif len(data.indices) == 4 and len(weight.indices) == 5:  # NCHW data, OIHW{bo}o weights
            if channels != shape[1] or data.indices[1] is not c or weight.indices[1] is not c:
                continue
            rest = [weight.indices[i] for i in (0, 2, 3, 4)]
        else:
            continue
        if [id(i) for i in rest] != [id(f_outer), id(ry), id(rx), id(f)]:
            continue
        others = {id(v) for v in (f_outer, f, c)}
        if (uses_var(data.indices[2], others | {id(x), id(rx)})
                or uses_var(data.indices[3], others | {id(y), id(ry)})):
            continue
        return data, weight
    return None


def _splits(index: Any, kind: type, c: Var, block: int) -> bool:
    """Whether ``index`` is ``c // block`` (``kind`` FloorDiv) or ``c % block`` (FloorMod)."""
    return isinstance(index, kind) and index.a is c and const_int(index.b) == block


def blocked_tiles(channels: int, width: int, block: int, target: Any, dtype: Any = 32) -> list:
    """Every register tile (pixels, vectors, lanes) of ``channels`` output channels in blocks of
    ``block`` on rows of ``width`` (``register_tiles``, of whole blocks: vectors of the target's
    lanes or of a whole block, whichever is narrower); the first is ``channel_tile``'s choice."""
    lanes = vector_factor(block, vector_lanes(target, dtype))
    options = register_tiles(channels, width, lanes, vector_registers(target), block // lanes)
    best = best_tile(options)
    return [best] + [t for t in options if t != best] if best else []


def _blocked_plan(sch: Schedule, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, epilogues: list,
                  target: Any) -> bool | None:
    """The channel-vector plan on the blocked layout (see the module docstring) at
    ``channel_tile``'s register tile; False (the padding is its own pass), or None when no
    register tile fits."""
    extents = [const_int(it.extent) for it in conv.iters]
    tiles = blocked_tiles(extents[1] * extents[4], extents[3], extents[4], target, conv.write().buffer.dtype)
    if not tiles:
        return None
    schedule_blocked(sch, conv, data, epilogues, target, tiles[0])
    return False


def schedule_blocked(sch: Schedule, conv: BlockInfo, data: BufferLoad, epilogues: list, target: Any,
                     tile: tuple[int, int, int]) -> None:
    """The blocked plan at the register ``tile`` (MR pixels, NV vectors, lanes of a vector)."""
    mr, nv, vec = tile
    out_block = const_int(conv.iters[4].extent)
    block = conv.rv
    n, f_outer, y, x, f, c, ry, rx = conv.loops
    f_0, f_1 = sch.split(f_outer, [None, nv * vec // out_block])
    f_v0, f_v = sch.split(f, [None, vec])
    x_0, x_1 = sch.split(x, [None, mr])
    reduction = [c, ry, rx]
    if len(data.indices) == 5:  # (the input's channel blocks walked in order, their lanes innermost)
        c_0, c_1 = sch.split(c, [None, const_int(data.buffer.shape[4])])
        reduction = [c_0, ry, rx, c_1]
    sch.reorder(n, f_0, y, x_0, *reduction, x_1, f_1, f_v0, f_v)
    sch.parallel(sch.fuse(n, f_0, y))
    acc = sch.cache_write(block, 0, "local")
    dtype = conv.write().buffer.shape[0].dtype
    v = [Var(f"v{d}", dtype) for d in range(5)]
    sch.transform_layout(block, ("write", 0), IndexMap(v, [v[0], v[2], v[3], v[1], v[4]]))  # ([x, F, f])
    inline_epilogues(sch, acc, epilogues, target)
    sch.reverse_compute_at(acc, x_0, preserve_unit_loops=True)
    unroll_register_tile(sch, block, sch.decompose_reduction(block, reduction[0]))
    # the copy out: per chunk of F, MR pixels of contiguous whole vectors of f
    a_f, a_y, a_x, a_c = sch.get_loops(acc)[-4:]
    sch.reorder(a_y, a_f, a_x, a_c)
    copy_out_in_vectors(sch, [a_f, a_x], a_c, vec)


def unroll_register_tile(sch: Schedule, block: Any, init: Any) -> None:
    """The register tile of an accumulation (``block``) and of its zero fill (``init``): the
    three loops over pixels, vectors and the vector's chunks unrolled, the lanes vectorized."""
    for stage in (block, init):
        inner = sch.get_loops(stage)
        for loop in inner[-4:-1]:
            sch.unroll(loop)
        sch.vectorize(inner[-1])


def copy_out_in_vectors(sch: Schedule, outer: list, lanes: Any, vec: int) -> None:
    """A register tile's copy out: the ``outer`` loops unrolled, ``lanes`` in vectors of ``vec``."""
    chunks, vector = sch.split(lanes, [None, vec])
    for loop in (*outer, chunks):
        sch.unroll(loop)
    sch.vectorize(vector)


__all__ = ["Conv2DBlocked", "blocked_tiles", "copy_out_in_vectors", "match_blocked_conv2d", "schedule_blocked",
           "unroll_register_tile"]
