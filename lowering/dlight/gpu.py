"""``tvms.dlight.gpu``: the default schedule rules for GPU targets (TVM's ``dl.gpu``), and the
list TVM 0.27's CUDA pipeline applies (``default_rules``).

    import tvms.dlight as dl
    with tvms.target.Target("cuda"):
        mod = dl.ApplyDefaultSchedule(dl.gpu.Reduction(), dl.gpu.GeneralReduction(),
                                      dl.gpu.Fallback())(mod)
"""
from __future__ import annotations

from .base import ScheduleRule
from .gpu_base import GPURule
from .gpu_fallback import Fallback
from .gpu_gemv import GEMV
from .gpu_general_reduction import GeneralReduction
from .gpu_low_batch_gemv import LowBatchGEMV
from .gpu_matmul import Matmul
from .gpu_reduction import Reduction
from .gpu_rmsnorm import RMSNorm
from .gpu_transpose import Transpose


def default_rules() -> list[ScheduleRule]:
    """What TVM 0.27's CUDA pipeline applies, in its order."""
    return [Matmul(), GEMV(), Reduction(), GeneralReduction(), Fallback()]


__all__ = ["Fallback", "GEMV", "GPURule", "GeneralReduction", "LowBatchGEMV", "Matmul", "RMSNorm", "Reduction",
           "Transpose", "default_rules"]
