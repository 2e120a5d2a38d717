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
from .gpu_general_reduction import GeneralReduction
from .gpu_reduction import Reduction
from .gpu_rmsnorm import RMSNorm
from .gpu_transpose import Transpose

# ---- merge point (dlight-mm): import Matmul, GEMV and LowBatchGEMV from gpu_matmul.py, gpu_gemv.py
# ---- and gpu_low_batch_gemv.py here, add them to __all__, and put Matmul(), GEMV() first below.


def default_rules() -> list[ScheduleRule]:
    """What TVM 0.27's CUDA pipeline applies, in its order: Matmul, GEMV, Reduction,
    GeneralReduction, Fallback (the matmul-family rules join at the merge point above)."""
    return [Reduction(), GeneralReduction(), Fallback()]


__all__ = ["Fallback", "GPURule", "GeneralReduction", "RMSNorm", "Reduction", "Transpose", "default_rules"]
