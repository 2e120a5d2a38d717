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
    """What TVM 0.27's CUDA pipeline applies, in its order (Matmul, GEMV, Reduction,
    GeneralReduction, Fallback), but for Matmul: with it, the CUDA code of a Relax model's matmul
    does not compile yet (``if (__1)`` on a non-bool CSE variable, test_cuda_runtime's
    test_a_relax_model_compiled_for_cuda_runs_on_the_reference_launcher); it joins the list when
    its kernels compile."""
    return [GEMV(), Reduction(), GeneralReduction(), Fallback()]


__all__ = ["Fallback", "GEMV", "GPURule", "GeneralReduction", "LowBatchGEMV", "Matmul", "RMSNorm", "Reduction",
           "Transpose", "default_rules"]
