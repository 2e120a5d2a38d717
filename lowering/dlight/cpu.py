"""``tvms.dlight.cpu``: the default schedule rules for CPU targets, and the list tvms applies."""
from __future__ import annotations

from .base import ScheduleRule
from .cpu_conv import Conv2D
from .cpu_conv_blocked import Conv2DBlocked
from .cpu_elementwise import Elementwise
from .cpu_fallback import Fallback
from .cpu_gemv import GEMV
from .cpu_matmul import Matmul
from .cpu_pool import Pool
from .cpu_reduction import Reduction
from .cpu_shuffle import ChannelBlocks, PlaneCopy
from .cpu_winograd import Winograd


def default_rules() -> list[ScheduleRule]:
    """The rules in the order they are tried: the most specific first, Fallback last."""
    return [Winograd(), Conv2D(), Conv2DBlocked(), Matmul(), GEMV(), Reduction(), Pool(), ChannelBlocks(), PlaneCopy(),
            Elementwise(), Fallback()]


__all__ = ["ChannelBlocks", "Conv2D", "Conv2DBlocked", "Elementwise", "Fallback", "GEMV", "Matmul", "PlaneCopy",
           "Pool", "Reduction", "Winograd", "default_rules"]
