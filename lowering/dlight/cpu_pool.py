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
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ..schedule import Schedule, ScheduleError
from .analysis import CPURule, const_int, describe_block
from .cpu_conv import around_reduction, unit_stride, window_rows
from .cpu_tactics import schedule_spatial_block


class Pool(CPURule):
    """Rows of a window reduction over the last two axes (see the module docstring)."""

    name = "Pool"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = around_reduction(func) if isinstance(func, PrimFunc) else None
        if found is None:
            return None
        sch, prologues, pool, epilogues = found
        if pool.kinds[-2:] != "RR" or pool.kinds.count("S") < 3 or not pool.trivial:
            return None
        loads = [load for load in collect(pool.block.body.value, BufferLoad) if load.buffer is not pool.write().buffer]
        if len({id(load.buffer) for load in loads}) != 1 or not _windowed(pool, loads[0]):
            return None
        if any(p.write().buffer is not loads[0].buffer or not p.is_injective() for p in prologues):
            return None  # only the padding of the input may come first
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
