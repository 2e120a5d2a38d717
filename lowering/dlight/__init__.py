"""Default schedules (a CPU counterpart of TVM's DLight): rules that recognise a PrimFunc's
shape of computation and schedule it for the target, applied by ``ApplyDefaultSchedule``."""
from .base import (IS_SCHEDULED, ApplyDefaultSchedule, ScheduleRule, apply_rules, function_target,
                   is_scheduled, mark_scheduled)

__all__ = ["IS_SCHEDULED", "ApplyDefaultSchedule", "ScheduleRule", "apply_rules", "function_target",
           "is_scheduled", "mark_scheduled"]
