"""MatmulTiles: the shapes around DLight's plans for large cuda matmuls, as a tuning space.

In the two H200 runs that measured them (8 and 12 trials), no candidate of TVM's cuda space
(MultiLevelTiling's sampled tiles) beat DLight's default schedule of a 4096^3 matmul, which the
tuner measures first; sampled tiles seldom give the vector loads, the k-major staging and the
pipeline that the large plans write. Those plans fix one shape each (``SimtTiles()`` for float32, the large float16
plan's ``WarpTiles``), picked without measuring. This rule branches the space into one schedule
per shape of ``simt_variants`` or ``warp_variants`` (the whole Matmul rule with that shape, DLight's
own among them), so that the measurements choose. As ConvRegisterTile does for convs, a branch's
blocks are marked ``schedule_rule="None"`` so the rules after this one leave them as they are,
and a large matmul is not left to those rules as well (a branch has no sampled decision: the
search measures each once, then the task ends). A function that is not a large matmul under
cuda, or one whose plan would not be the large one (a float16 matmul the tensor-core plan does not
take), is left to the other rules.

Where the PassContext sets ``tirx.use_async_copy`` (as for the tuning call and for the build
after it: the builder's workers build under the caller's context) and the GPU has ``cp.async``
(sm_80 and later), each float16 shape is offered with asynchronous copies as well
(``WarpTiles.async_copy``: three buffers, two k steps ahead).
"""
from __future__ import annotations

from typing import Any

from ..dlight.gpu_matmul import schedule_matmul
from ..dlight.gpu_matmul_large import large_matmul, simt_variants
from ..dlight.gpu_matmul_tensorcore import async_copy_wanted, warp_variants
from .rule_apply_custom import leave_to_no_other_rule
from .schedule_rule import ScheduleRule


class MatmulTiles(ScheduleRule):
    """At the matmul block of a large cuda matmul (``large_matmul``): one branch per shape of
    its plan (``schedule_matmul`` declines a shape the plan it takes has not); the block as it
    was where no shape is taken."""

    def __init__(self) -> None:
        self.target: Any = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.target = context.target

    def apply(self, sch: Any, block: Any) -> list:
        large = large_matmul(sch.get(block), self.target)
        if large is None:
            return [sch]
        shapes = simt_variants(large) if large.takes_simt_plan else \
            warp_variants(large.out_dtype, async_copy_wanted(self.target), large.cols) \
            if large.takes_tensor_core_plan else []
        branches = [schedule_matmul(sch.copy(), self.target, shape=shape) for shape in shapes]
        branches = [branch for branch in branches if branch is not None]
        for branch in branches:
            leave_to_no_other_rule(branch)
        return branches or [sch]


__all__ = ["MatmulTiles"]
