"""The cuda row's ``tirx`` pipeline: TVM 0.27's ``tirx_pipeline`` for a cuda target, as
``tvm.compile(mod, target, tir_pipeline="tirx")`` runs it (the passes tvms has; see
``../tirx_pipeline.py`` for the list and what it leaves out: no allocation planning, no
ThreadSync, no warp-memory or cross-thread-reduction lowering, no blocks), then SplitHostDevice
and the device passes TVM's tirx pipeline hands the kernels to: its ``finalize_device_passes``,
LowerWarpMemory, StmtSimplify, LowerIntrin (``tirx_pipeline`` returns these, not
``finalize_device_passes_tirx``'s LowerIntrin alone, which TVM 0.27 defines and never uses).
CUDA's LowerIket changes nothing tvms makes (no ``T.iket`` here); MakePackedAPI and the narrow
storage legalizations are the runtime's and the code generator's business, as in ``pipeline.py``.
"""
from __future__ import annotations

from ....ir.function import PrimFunc
from ....ir.module import IRModule
from ....ir.target import Target
from ..lower_tirx_opaque import refuse_blocks
from ..tirx_pipeline import run_steps, tirx_steps
from .annotate_entry_func import annotate_entry_func
from .pipeline import bind_cuda_target, finalize_kernels, vectorize_with_scalar_guards
from .split_host_device import split_host_device
from .verify_memory import verify_memory


def split_for_cuda_tirx(func: PrimFunc, target: Target) -> IRModule:
    """The tirx pipeline on ``func`` up to SplitHostDevice: the host function and its kernels."""
    func = bind_cuda_target(func, target)
    refuse_blocks(func)
    symbol = str(func.attrs.get("global_symbol", "main"))
    func = verify_memory(run_steps(func, tirx_steps(vectorize_with_scalar_guards)))
    return split_host_device(annotate_entry_func(IRModule({symbol: func})))


def lower_for_cuda_tirx(func: PrimFunc, target: Target) -> IRModule:
    """The host function and the finalized kernels of the tirx kernel ``func``."""
    return finalize_kernels(split_for_cuda_tirx(func, target))


__all__ = ["lower_for_cuda_tirx", "split_for_cuda_tirx"]
