"""``tvms.dlight.gpu``: the default schedule rules for GPU targets (TVM's ``dl.gpu``), and the
list TVM 0.27's CUDA pipeline applies."""
from __future__ import annotations

from .base import ScheduleRule
from .gpu_fallback import Fallback
from .gpu_general_reduction import GeneralReduction
from .gpu_reduction import Reduction
from .gpu_rmsnorm import RMSNorm
from .gpu_transpose import Transpose

# --- merge point: the matmul-family rules (gpu_matmul.py, gpu_gemv.py, gpu_low_batch_gemv.py)
# --- are imported here, added to __all__, and put first in default_rules() as TVM orders them.


def default_rules() -> list[ScheduleRule]:
    """TVM 0.27's CUDA pipeline: Matmul, GEMV, Reduction, GeneralReduction, Fallback."""
    return [Reduction(), GeneralReduction(), Fallback()]


__all__ = ["Fallback", "GeneralReduction", "RMSNorm", "Reduction", "Transpose", "default_rules"]
