"""The schedule rule interface: given a schedule and one of its blocks, the schedules to go on with.

A rule returns ``[sch]`` to leave the block as it is (or after changing it in place), several
schedules to branch the design space, or none to drop the schedule. ``PostOrderApply`` calls it on
every block of the function; the rules of a target kind are listed in ``default_space.py``.
"""
from __future__ import annotations

import copy
from typing import Any

from ...ir.errors import TVMSError
from ...ir.target import host_cores


class ScheduleRule:
    """TVM's ``ScheduleRule``: subclasses override ``apply`` (and ``_initialize_with_tune_context``
    when they read the target)."""

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Told the task once before use (the target's cores, say); nothing to learn by default."""

    def apply(self, sch: Any, block: Any) -> list:
        raise TVMSError(f"{type(self).__name__} does not define apply(sch, block)")

    def clone(self) -> "ScheduleRule":
        return copy.deepcopy(self)

    @staticmethod
    def create(kind: str) -> list["ScheduleRule"]:
        """The default schedule rules of a target kind (``"llvm"``)."""
        from .space_generator import default_part
        parts = default_part(kind, "sch_rules")
        if not parts:
            raise TVMSError(f"no default schedule rules for target kind {kind!r}")
        return parts

    def __repr__(self) -> str:
        return f"meta_schedule.{type(self).__name__}"


def max_parallel_extent(context: Any, max_jobs_per_core: int) -> int:
    """How many parallel jobs a rule may make: the target's cores (``-num-cores``, else this
    machine's) times ``max_jobs_per_core``; -1 (no limit) when that is -1."""
    target = getattr(context, "target", None)
    if target is None:
        raise TVMSError("this schedule rule needs a TuneContext with a target")
    if max_jobs_per_core == -1:
        return -1
    return (target.num_cores or host_cores()) * max_jobs_per_core


PyScheduleRule = ScheduleRule  # TVM's base for rules written in Python: in tvms every rule is one
