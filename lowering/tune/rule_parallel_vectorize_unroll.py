"""ParallelizeVectorizeUnroll: mark the root block with how far to parallelize, vectorize and
unroll; the postprocessor RewriteParallelVectorizeUnroll turns the marks into loop kinds."""
from __future__ import annotations

from typing import Any

from .rule_analysis import is_root, is_spatial_prim_func, site
from .schedule_rule import ScheduleRule, max_parallel_extent

PARALLEL, VECTORIZE = "meta_schedule.parallel", "meta_schedule.vectorize"
UNROLL_EXPLICIT, UNROLL_IMPLICIT = "meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit"


class ParallelizeVectorizeUnroll(ScheduleRule):
    """``ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=16,
    unroll_max_steps=None, unroll_explicit=True)``: on the root block, the parallel extent
    (cores x ``max_jobs_per_core``), the vector extent, and an unroll depth sampled from
    ``unroll_max_steps`` (not for a purely spatial function). -1 or None leaves a mark out."""

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 16,
                 unroll_max_steps: "list | None" = None, unroll_explicit: bool = True) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = list(unroll_max_steps or [])
        self.unroll_explicit = unroll_explicit
        self.max_parallel_extent = -1

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.max_parallel_extent = max_parallel_extent(context, self.max_jobs_per_core)

    def apply(self, sch: Any, block: Any) -> list:
        fname, _, path = site(sch, block)
        if not is_root(path):
            return [sch]
        if self.max_jobs_per_core != -1:
            sch.annotate(block, PARALLEL, self.max_parallel_extent)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, VECTORIZE, self.max_vectorize_extent)
        if self.unroll_max_steps and not is_spatial_prim_func(sch.mod[fname]):
            n = len(self.unroll_max_steps)
            max_step = sch.sample_categorical(self.unroll_max_steps, [1.0 / n] * n)
            sch.annotate(block, UNROLL_EXPLICIT if self.unroll_explicit else UNROLL_IMPLICIT, max_step)
        return [sch]
