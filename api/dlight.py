"""``tvms.dlight``: default schedules without tuning, as ``tvm.s_tir.dlight`` spells them.

    import tvms.dlight as dl
    with tvms.target.Target("llvm"):
        mod = dl.ApplyDefaultSchedule(dl.cpu.GEMV(), dl.cpu.Reduction(), dl.cpu.Elementwise(),
                                      dl.cpu.Fallback())(mod)
    with tvms.target.Target("cuda"):
        mod = dl.ApplyDefaultSchedule(dl.gpu.Reduction(), dl.gpu.GeneralReduction(),
                                      dl.gpu.Fallback())(mod)
"""
import sys as _sys

from .lowering.dlight import ApplyDefaultSchedule, ScheduleRule, is_scheduled
from .lowering.dlight import cpu, gpu

# ``import tvms.dlight.cpu`` (and ``.gpu``) work too: the rules' modules are known under those names
_sys.modules[f"{__name__}.cpu"] = cpu
_sys.modules[f"{__name__}.gpu"] = gpu

__all__ = ["ApplyDefaultSchedule", "ScheduleRule", "cpu", "gpu", "is_scheduled"]
