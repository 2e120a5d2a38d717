"""``Pool``: the default CPU schedule of a 2-D pooling as LegalizeOps writes it, ``P[.., y, x] =
max or sum over (ry, rx) of D[.., y * s + ry * d, x * s + rx * d]`` after the padding of the input
D, before an elementwise epilogue (the average's division by the window's size).

No other rule took it: it ran serially, the padding's conditions inlined into its innermost loop
(Inception v2's 3x3 average pool of 576 channels of 14x14 took 0.8 ms, onnxruntime's 0.06). It
is scheduled as the depthwise convolution it resembles (``cpu_conv.window_rows``): output rows
in parallel, each accumulated in vectors along the row, the epilogue applied on the way out, the
padding its own parallel, vectorized pass; with a stride, scalar rows that read the input in
place, the padding's conditions inlined (a pass of its own measured 1.5x slower there).

A max pool (no epilogue) with a stride and rows of 16 pixels or more is left to Fallback: its
serial loop, the window innermost, is one that LLVM's loop vectorizer turns into vectors of
pixels from interleaved loads, which the scalar rows are not (measured interleaved, AVX-512:
24x112x112 stride 2, 0.04 against 0.14 ms in rows; 64x56x56, 0.03 against 0.09; 256x56x56, 0.20
against 0.73; rows of 14, 320x28x28, 0.19 against 0.07, stay in rows; AVX2: rows of 28, 0.03
against 0.21; rows of 14, 0.09 against 0.07; generic x86-64: rows of 28, 0.04 against 0.28; rows of
14, even). An average pool's division is a pass of its own there: it stays in rows (64x56x56
stride 2, 0.12 against 0.09).

On channel-blocked data (NCHW16c, ``D[n, cb, y * s + ry, x * s + rx, lane]``; also a mean, sum or
max over H and W that keeps them) the lanes of a block are the vector: each parallel task is an
output row of one channel block, cut into tiles of pixels (a divisor of the row, at most
``PIXEL_ACCUMULATORS`` vectors) whose accumulators stay in registers over the window, each window
element one contiguous vector load per pixel, the epilogue applied on the way out. The padding is
read in place: its condition is the same for every lane, and LLVM makes the guarded load a masked
one (``vblendmps`` from memory on AVX-512, ``vmaskmovps`` on AVX2), which reads nothing of a
masked lane. Measured on one thread, interleaved (64-byte aligned buffers): on AVX-512 a max pool
3x3 stride 2 is as fast as Fallback's serial loop, which LLVM vectorizes along the lanes (both at
the L3's bandwidth: 64 channels 111x111, 0.047 ms; 128 of 55x55, 0.021), and it runs in
parallel; on AVX2 (blocks of 8) 4x faster than that loop (0.051 against 0.22 ms; 0.026 against
0.113); an average pool 3x3 stride 1 padded, 192 channels of 28x28, 0.026 against 0.050 ms (AVX2:
0.036 against 0.28), 2x2 stride 2 of 128 channels of 56x56, 0.023 against 0.177; SqueezeNet's
mean over 13x13 of 1008 channels, 0.006 against 0.092 ms. Tiles of 4 to 16 accumulators measured
alike (a tile only has to hide the latency of the max or add); the padding as a pass of its own
measured 4-5x slower (64 channels of 112x112: 0.24 against 0.05 ms).
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.expr import BufferLoad
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ..schedule import Schedule, ScheduleError
from .analysis import CPURule, const_int, describe_block, vector_lanes
from .cpu_conv import around_reduction, inline_epilogues, unit_stride, window_rows
from .cpu_tactics import parallelize_outer, schedule_spatial_block, vector_factor


PIXEL_ACCUMULATORS = 8  # vectors of a channel-blocked pool's tile of pixels (see the module docstring)


class Pool(CPURule):
    """Rows of a window reduction over the last two axes, or over the two before the lanes of a
    channel block (see the module docstring)."""

    name = "Pool"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = around_reduction(func) if isinstance(func, PrimFunc) else None
        if found is None:
            return None
        sch, prologues, pool, epilogues = found
        if pool.kinds[-2:] != "RR" or pool.kinds.count("S") < 3 or not pool.trivial:
            return None
        loads = [load for load in collect(pool.block.body.value, BufferLoad) if load.buffer is not pool.write().buffer]
        if len({id(load.buffer) for load in loads}) != 1:
            return None
        if any(p.write().buffer is not loads[0].buffer or not p.is_injective() for p in prologues):
            return None  # only the padding of the input may come first
        if _lane_windowed(pool, loads[0]):
            return _lane_pixels(sch, prologues, pool, epilogues, target)
        if not _windowed(pool, loads[0]):
            return None
        *rows, x, ry, rx = pool.loops
        if not epilogues and _long_strided_rows(pool, loads[0]):
            return None  # (Fallback's serial loop, which LLVM vectorizes: see the module docstring)
        try:
            vectorized = window_rows(sch, pool, loads[0], rows, x, [ry, rx], epilogues, target)
            for pad in prologues:  # (scalar rows read it in place, with its conditions)
                if vectorized:
                    schedule_spatial_block(sch, describe_block(sch, pad.rv), target)
                else:
                    sch.compute_inline(pad.rv)
        except ScheduleError:
            return None
        return sch


def _lane_pixels(sch: Schedule, prologues: list, pool: Any, epilogues: list, target: Any) -> Schedule | None:
    """The channel-blocked plan (see the module docstring)."""
    *rows, y, x, lane, ry, rx = pool.loops
    width = vector_factor(const_int(pool.iters[-3].extent), vector_lanes(target, pool.write().buffer.dtype))
    if width < 4:
        return None
    vectors = const_int(pool.iters[-3].extent) // width
    columns = const_int(pool.iters[-4].extent)
    tile = max((d for d in range(1, columns + 1) if columns % d == 0 and d * vectors <= PIXEL_ACCUMULATORS), default=1)
    try:
        x_o, x_i = sch.split(x, [None, tile])
        sch.reorder(*rows, y, x_o, ry, rx, x_i, lane)
        fused = sch.fuse(*rows, y)
        parallelize_outer(sch, fused, prod(const_int(it.extent) for it in pool.iters))
        acc = sch.cache_write(pool.rv, 0, "local")
        inline_epilogues(sch, acc, epilogues, target)
        sch.reverse_compute_at(acc, x_o)
        init = sch.decompose_reduction(pool.rv, ry)
        for stage in (pool.rv, init, acc):
            *_, pixels, channels = sch.get_loops(stage)
            sch.unroll(pixels)
            if vectors > 1:  # (a block of more lanes than a vector: whole vectors, unrolled)
                outer, channels = sch.split(channels, [None, width])
                sch.unroll(outer)
            sch.vectorize(channels)
        for pad in prologues:
            sch.compute_inline(pad.rv)
    except ScheduleError:
        return None
    return sch


def _lane_windowed(pool: Any, data: BufferLoad) -> bool:
    """Channel-blocked data: D's last index is the output's last iterator (the lanes of a
    channel block), its two before it the window's rows and columns, each of them the output's
    row and column and the window's iterator (or the window's alone: a mean over H and W), its
    others the other spatial iterators."""
    spatial = [it.var for it in pool.iters if it.kind == "S"]
    if len(spatial) < 4 or len(data.indices) != len(spatial) or data.indices[-1] is not spatial[-1]:
        return False
    y, x, ry, rx = spatial[-3], spatial[-2], pool.iters[-2].var, pool.iters[-1].var
    used = [{id(v) for v in collect(index, type(y))} for index in data.indices]
    return (id(ry) in used[-3] and used[-3] <= {id(y), id(ry)} and id(rx) in used[-2] and used[-2] <= {id(x), id(rx)}
            and all(used[k] <= {id(v) for v in spatial[:-3]} for k in range(len(spatial) - 3)))


def _long_strided_rows(pool: Any, data: BufferLoad) -> bool:
    """Whether the output rows have 16 pixels or more and read ``data`` with a stride."""
    column = pool.iters[-3]
    window = [it.var for it in pool.iters[-2:]]
    return const_int(column.extent) >= 16 and not unit_stride(data.indices[-1], column.var, window)


def _windowed(pool: Any, data: BufferLoad) -> bool:
    """D's last two indices use the last two spatial iterators and the window's two iterators
    each (a window along the rows and columns); its other indices the other spatial ones."""
    spatial = [it.var for it in pool.iters if it.kind == "S"]
    y, x, ry, rx = spatial[-2], spatial[-1], pool.iters[-2].var, pool.iters[-1].var
    if len(data.indices) != len(spatial):
        return False
    used = [{id(v) for v in collect(index, type(y))} for index in data.indices]
    return (used[-2] == {id(y), id(ry)} and used[-1] == {id(x), id(rx)}
            and all(used[k] <= {id(v) for v in spatial[:-2]} for k in range(len(spatial) - 2)))


__all__ = ["Pool"]
