"""``tvms.dlight``: default schedules without tuning, as ``tvm.s_tir.dlight`` spells them.

    import tvms.dlight as dl
    with tvms.target.Target("llvm"):
        mod = dl.ApplyDefaultSchedule(dl.cpu.GEMV(), dl.cpu.Reduction(), dl.cpu.Elementwise(),
                                      dl.cpu.Fallback())(mod)
"""
import sys as _sys

from .lowering.dlight import ApplyDefaultSchedule, ScheduleRule, is_scheduled
from .lowering.dlight import cpu

# ``import tvms.dlight.cpu`` works too: the rules' module is known under that name
_sys.modules[f"{__name__}.cpu"] = cpu

__all__ = ["ApplyDefaultSchedule", "ScheduleRule", "cpu", "is_scheduled"]
