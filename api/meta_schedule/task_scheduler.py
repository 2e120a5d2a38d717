"""``tvms.meta_schedule.task_scheduler``: which task gets the next trials (re-exports only)."""
from ..lowering.tune.task_scheduler import GradientBased, RoundRobin, TaskRecord, TaskScheduler

create = TaskScheduler.create

__all__ = ["GradientBased", "RoundRobin", "TaskRecord", "TaskScheduler", "create"]
