"""``Fallback``: a safe default CPU schedule for any function the other rules decline.

Free inlining first; then each block under the root on its own: an injective block gets the
Elementwise treatment (fused, vectorized where contiguous, parallel when large), a block that
reduces runs its leading spatial loop in parallel when there is enough work. A move that does
not apply to a block is skipped, so the rule always gives a schedule and never a wrong one.
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.function import PrimFunc
from ..schedule import Schedule, ScheduleError
from .analysis import BlockInfo, CPURule, flat_schedule
from .cpu_tactics import parallelize_outer, schedule_spatial_block


class Fallback(CPURule):
    """Always applies: what it cannot improve it leaves as it is."""

    name = "Fallback"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule:
        try:
            found = flat_schedule(func)
        except ScheduleError:  # no root block: nothing to schedule
            found = None
        if found is None:  # (blocks inside blocks may share scratch buffers: parallel loops could race)
            return Schedule(func)
        sch, infos = found
        for info in infos:
            try:
                if info.is_injective():
                    schedule_spatial_block(sch, info, target)
                else:
                    _parallel_spatial_prefix(sch, info)
            except ScheduleError:
                continue  # this block keeps what was done to it so far (each step is sound)
        return sch


def _parallel_spatial_prefix(sch: Schedule, info: BlockInfo) -> None:
    """Run the outermost loop in parallel when it iterates only spatial iterators."""
    if not info.trivial or not info.iters or info.iters[0].kind != "S" or not info.writes_where_iterators_say():
        return
    extents = [it.const_extent for it in info.iters]
    work = None if any(e is None for e in extents) else prod(extents)
    if info.iters[0].const_extent != 1:
        parallelize_outer(sch, info.loops[0], work)


__all__ = ["Fallback"]
