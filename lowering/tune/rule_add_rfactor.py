"""AddRFactor: split a reduction with little spatial parallelism and rfactor one of its halves."""
from __future__ import annotations

from typing import Any

from ...ir.errors import TVMSError
from ...ir.expr import COMM_REDUCE, DATA_PAR
from .rule_analysis import loop_iter_type, needs_rfactor, site
from .rule_random_compute_location import RANDOM_COMPUTE_PRODUCER
from .schedule_rule import ScheduleRule, max_parallel_extent


class AddRFactor(ScheduleRule):
    """``AddRFactor(max_jobs_per_core=16, max_innermost_factor=None)``: for a reduction block
    whose spatial loops are fewer than its reduction (or than the cores can use), the reduction
    loops are fused, split in two by ``sample_perfect_tile``, and each half tried as the rfactor
    loop; the schedule as it was stays as the last branch."""

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: "int | None" = None) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = -1 if max_innermost_factor is None else int(max_innermost_factor)
        self.max_parallel_extent = -1

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.max_parallel_extent = max_parallel_extent(context, self.max_jobs_per_core)

    def apply(self, sch: Any, block: Any) -> list:
        _, realize, path = site(sch, block)
        if not needs_rfactor(realize, path, self.max_parallel_extent):
            return [sch]
        original = sch.copy()
        original.seed(sch.fork_seed())
        fused, n_spatial = reorder_and_fuse_reduction_loops(sch, block)
        factors = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=self.max_innermost_factor)
        branches = []
        for split in sch.split(fused, factors):
            branch = sch.copy()
            branch.seed(sch.fork_seed())
            try:
                block_rf = branch.rfactor(split, n_spatial)
                if len(branch.get_loops(block_rf)) <= n_spatial:
                    raise TVMSError("rfactor left no reduction loop")
                branch.annotate(block, RANDOM_COMPUTE_PRODUCER, 1)
            except TVMSError:
                continue
            branches.append(branch)
        return branches + [original]


def reorder_and_fuse_reduction_loops(sch: Any, block: Any) -> tuple[Any, int]:
    """Spatial loops outside, reduction loops inside, the reductions fused into one loop."""
    loops = sch.get_loops(block)
    kinds = [loop_iter_type(sch.get(loop)) for loop in loops]
    spatial = [loop for loop, kind in zip(loops, kinds) if kind == DATA_PAR]
    reduction = [loop for loop, kind in zip(loops, kinds) if kind == COMM_REDUCE]
    if spatial + reduction != loops:
        sch.reorder(*spatial, *reduction)
    return (sch.fuse(*reduction) if len(reduction) > 1 else reduction[0]), len(spatial)
