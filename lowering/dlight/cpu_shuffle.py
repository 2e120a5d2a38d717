"""``PlaneCopy``: the default CPU schedule of a function that only moves whole runs of its input,
such as ShuffleNet's channel shuffle (reshape to ``(G, C / G)``, transpose, reshape back: after
FuseOps one block copying planes from one order of the channels to another).

Its read indices come out of legalization as chains of ``//`` and ``%`` that the iterators'
ranges simplify (``x[0, c % 4 * 68 + c // 4, y, x]``); once simplified, the trailing indices the
read shares with the write (here ``y, x``: a whole plane) are one contiguous run on both sides.
Each parallel task copies one run, fused, in vectors of the largest divisor of the run up to the
target's lanes (the injective rule's vectors along rows of 14 had 2 lanes: 11 against 5 us per
shuffle of 272 channels of 14x14, single-threaded).
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.arith import Analyzer
from ...ir.buffer import BufferRegion
from ...ir.expr import BufferLoad, Range, const
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ..schedule import Schedule
from ..schedule.tree import find_block, replace_stmts
from .analysis import CPURule, const_int, flat_schedule, vector_lanes


def divisor_width(extent: int, lanes: int) -> int:
    """The widest vector, of at most ``lanes``, that divides ``extent``: any divisor, not only a
    power of two (a row of 14 in one vector, which LLVM widens to 16 lanes, 2 masked)."""
    return max(d for d in range(1, lanes + 1) if extent % d == 0)


class PlaneCopy(CPURule):
    """A single copying block whose trailing indices run whole (see the module docstring)."""

    name = "PlaneCopy"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = flat_schedule(func) if isinstance(func, PrimFunc) else None
        if found is None or len(found[1]) != 1:
            return None
        sch, (info,) = found
        store = info.block.body
        extents = [it.const_extent for it in info.iters]
        if (not info.is_injective() or not info.trivial or not isinstance(store, BufferStore)
                or not isinstance(store.value, BufferLoad) or None in extents or len(extents) < 2):
            return None
        iters = [it.var for it in info.iters]
        if [id(i) for i in store.indices] != [id(v) for v in iters]:
            return None
        analyzer = Analyzer()
        for v, extent in zip(iters, extents):
            analyzer.bind(v, 0, extent)
        load = store.value
        indices = tuple(analyzer.simplify(i) for i in load.indices)
        run = 0  # trailing dims read at the place written, of the same extent on both sides
        while (run < min(len(indices), len(iters) - 1) and indices[-1 - run] is iters[-1 - run]
               and const_int(load.buffer.shape[-1 - run]) == extents[-1 - run]):
            run += 1
        lanes = vector_lanes(target, store.buffer.dtype)
        size = prod(extents[len(extents) - run:])
        if run == 0 or size < lanes:
            return None
        new_load = BufferLoad(load.buffer, indices)
        region = BufferRegion(load.buffer, tuple(Range(i, const(1, i.dtype)) for i in indices))
        block = info.block.with_changes(body=store.with_changes(value=new_load), reads=(region,))
        sch = Schedule(replace_stmts(sch.mod["main"], {id(find_block(sch.mod["main"], block.name_hint)[0].block):
                                                       block}))
        copy_runs(sch, sch.get_loops(sch.get_sblock(block.name_hint)), run, lanes)
        return sch


def copy_runs(sch: Schedule, loops: list, run: int, lanes: int) -> None:
    """The last ``run`` of ``loops`` (a contiguous run on both sides) fused, in vectors of the
    widest divisor of its length up to ``lanes``; the others fused into the parallel tasks."""
    outer, inner = loops[:len(loops) - run], loops[len(loops) - run:]
    plane = sch.fuse(*inner) if run > 1 else inner[0]
    width = divisor_width(const_int(sch.get(plane).extent), lanes)
    if width > 1:
        sch.vectorize(sch.split(plane, [None, width])[1])
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])


__all__ = ["PlaneCopy", "copy_runs", "divisor_width"]
