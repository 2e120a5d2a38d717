"""``Elementwise``: the default CPU schedule of injective functions.

Elementwise chains after FuseOps (add + relu), broadcasts, casts, reshapes, take, concat and
transposes: every block writes each output element once and reduces nothing. The blocks that
can be inlined for free are; each block left gets its innermost loop vectorized where its store
is contiguous and the loops outside it fused and run in parallel when large enough (a block that
reads everything where it writes is fused whole first), and a transpose is tiled so that both
sides stay in the cache.
"""
from __future__ import annotations

from typing import Any

from ...ir.function import PrimFunc
from ..schedule import Schedule
from .analysis import CPURule, flat_schedule
from .cpu_tactics import schedule_spatial_block


class Elementwise(CPURule):
    """Schedules a function whose blocks are all injective; declines anything that reduces."""

    name = "Elementwise"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = flat_schedule(func)
        if found is None or not found[1] or not all(i.is_injective() and i.trivial for i in found[1]):
            return None
        sch, infos = found
        for info in infos:
            schedule_spatial_block(sch, info, target)
        return sch


__all__ = ["Elementwise"]
