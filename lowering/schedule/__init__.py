"""TensorIR schedules: primitives that rewrite loops and blocks, samplers, and replayable traces."""
from .errors import ScheduleError
from .random_vars import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .state import ScheduleState, StmtSRef
from .trace import Instruction, InstructionKind, Trace

__all__ = ["BlockRV", "ExprRV", "Instruction", "InstructionKind", "LoopRV", "Schedule", "ScheduleError",
           "ScheduleState", "StmtSRef", "Trace"]
