"""``tvms.tir``: TensorIR schedules, as ``tvm.tir`` (and ``tvm.s_tir``) spell them."""
from .lowering.schedule import (BlockRV, ExprRV, Instruction, InstructionKind, LoopRV, Schedule,
                                 ScheduleError, ScheduleState, StmtSRef, Trace)
from .lowering.schedule.replay import apply_trace_text
from .lowering import tir as transform  # the lowering passes (tvm.tir.transform), registered by name

SBlockRV = BlockRV  # TVM 0.27's name

__all__ = ["BlockRV", "ExprRV", "Instruction", "InstructionKind", "LoopRV", "SBlockRV", "Schedule",
           "ScheduleError", "ScheduleState", "StmtSRef", "Trace", "apply_trace_text", "transform"]
