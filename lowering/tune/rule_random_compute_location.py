"""RandomComputeLocation: compute a block under the root at a sampled loop of its consumer."""
from __future__ import annotations

from typing import Any

from ..schedule.tree import child_blocks, enclosing_loops
from .rule_analysis import has_been_multi_level_tiled, site, under_root_only
from .schedule_rule import ScheduleRule

RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"


class RandomComputeLocation(ScheduleRule):
    """For a block directly under the root, alone in its outer loop, not tiled, with consumers:
    ``compute_at`` the place ``sample_compute_location`` picks. A block AddRFactor marked
    (``meta_schedule.random_compute_producer``) has its rfactor producer placed the same way."""

    def apply(self, sch: Any, block: Any) -> list:
        if not self._wanted(sch, block):
            return [sch]
        producer = None
        if site(sch, block)[1].block.annotations.get(RANDOM_COMPUTE_PRODUCER):
            (producer,) = sch.get_producers(block)
            sch.unannotate(block, RANDOM_COMPUTE_PRODUCER)
        self._compute_at_sampled(sch, block)
        if producer is not None:
            self._compute_at_sampled(sch, producer)
        return [sch]

    @staticmethod
    def _wanted(sch: Any, block: Any) -> bool:
        _, realize, path = site(sch, block)
        if not under_root_only(path):
            return False
        loops = enclosing_loops(path)
        if not loops or len(child_blocks(loops[0])) > 1 or has_been_multi_level_tiled(realize.block):
            return False
        return bool(sch.copy().get_consumers(block))  # (a look that leaves no step in the trace)

    @staticmethod
    def _compute_at_sampled(sch: Any, block: Any) -> None:
        sch.compute_at(block, sch.sample_compute_location(block), preserve_unit_loops=True)
