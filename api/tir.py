"""``tvms.tir`` (also ``tvms.tirx``, TVM 0.27's name): TensorIR nodes and schedules, as ``tvm.tir``,
``tvm.tirx`` and ``tvm.s_tir`` spell them."""
import sys as _sys

from .ir import expr, stmt  # tvms.tir.expr / tvms.tir.stmt, as TVM's modules of those names
from .ir.buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from .ir.expr import *  # noqa: F401,F403  (Var, IntImm, Add, BufferLoad, Call, ...)
from .ir.function import PrimFunc
from .ir.stmt import *  # noqa: F401,F403  (BufferStore, For, Block, ...)
from .lowering.schedule import (BlockRV, ExprRV, Instruction, InstructionKind, LoopRV, Schedule,
                                 ScheduleError, ScheduleState, StmtSRef, Trace)
from .lowering.schedule.replay import apply_trace_text
from .lowering.schedule.tensorize import TensorIntrin
from .lowering import tir as transform  # the lowering passes (tvm.tir.transform), registered by name
from .lowering.build import build  # tvm.tirx.build(mod, target, pipeline="default")

SBlockRV = BlockRV  # TVM 0.27's name

for _name, _module in (("expr", expr), ("stmt", stmt)):  # so that `import tvms.tir.expr` works too
    _sys.modules[f"{__name__}.{_name}"] = _module
del _name, _module

__all__ = ["BlockRV", "Buffer", "build", "BufferRegion", "ExprRV", "Instruction", "InstructionKind", "LoopRV",
           "MatchBufferRegion", "PrimFunc", "SBlockRV", "Schedule", "ScheduleError", "ScheduleState", "StmtSRef",
           "TensorIntrin", "Trace", "apply_trace_text", "decl_buffer", "expr", "stmt", "transform"]
