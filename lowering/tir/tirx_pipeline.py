"""TVM 0.27's ``tirx`` TIR pipeline (``tvm.tirx.compilation_pipeline.tirx_pipeline``), the passes
tvms has, in TVM's order and by TVM's names, for kernels written in the tirx language (scope ids,
``T.ptx.*``, ``T.cuda.*``, thread bindings and barriers written by hand):

    LowerTIRx, UnifyThreadBinding, StmtSimplify, LowerTIRxOpaque, FlattenBuffer,
    (BF16ComputeLegalize), NarrowDataType, VectorizeLoop, UnrollLoop, StmtSimplify,
    CommonSubexprElim (unless ``tir.disable_cse_tir``), (FP8ComputeLegalize), VerifyMemory,
    AnnotateEntryFunc, SplitHostDevice, ...

Unlike ``s_tir`` it plans no allocation (each stays where it was written), inserts no barrier
(no ThreadSync: a kernel syncs where it says ``T.cuda.cta_sync()``), lowers no warp memory nor
cross-thread reduction, and takes no blocks: a function with ``T.sblock`` is refused, as TVM's
LowerTIRx refuses it. The cuda row finishes in ``gpu/tirx_pipeline.py``; the llvm row here.
"""
from __future__ import annotations

from typing import Callable

from ...ir import stmt as S
from ...ir.function import PrimFunc
from ...ir.visitor import Mutator
from ..transform import PassContext
from .canonicalize_loop import canonicalize_loop
from .flatten_buffer import flatten_buffer
from .gpu.common_subexpr_elim import common_subexpr_elim
from .gpu.lower_tirx import lower_tirx
from .gpu.narrow_data_type import narrow_data_type
from .gpu.thread_binding import unify_thread_binding
from .legalize_narrow import legalize_narrow
from .lower_intrin import lower_intrin
from .lower_tirx_opaque import lower_tirx_opaque, refuse_blocks
from .pipeline import check_lowered
from .stmt_simplify import stmt_simplify
from .unroll_loop import unroll_loop_in_context
from .vectorize_loop import vectorize_loop

Step = tuple[str, Callable[[PrimFunc], PrimFunc]]  # (TVM's pass name, what tvms runs for it)


def _without_vectorizing(func: PrimFunc) -> PrimFunc:
    """VectorizeLoop(False), TVM's ``tir.disable_vectorize``: vectorized loops run as serial ones."""
    return func.with_changes(body=_Serial().visit(func.body))


class _Serial(Mutator):
    def visit_For(self, loop: S.For) -> S.Stmt:
        loop = self.generic_visit(loop)
        return loop.with_changes(kind=S.SERIAL) if loop.kind == S.VECTORIZED else loop


def _lower_tirx_as_tvm(func: PrimFunc) -> PrimFunc:
    return lower_tirx(func, warp_helper=True)


def _simplify_as_tvm(func: PrimFunc) -> PrimFunc:
    return stmt_simplify(func, values=True)


def tirx_steps(vectorize: Callable[[PrimFunc], PrimFunc] = vectorize_loop) -> list[Step]:
    """The tirx pipeline up to VerifyMemory under the current PassContext (TVM's config keys:
    ``tir.disable_vectorize``, ``tir.disable_cse_tir``). BF16/FP8ComputeLegalize are the code
    generators' business in tvms (``legalize_narrow`` on llvm; CUDA computes them natively)."""
    config = PassContext.current().config
    if config.get("tir.disable_vectorize", False):
        vectorize = _without_vectorizing
    steps: list[Step] = [("tirx.LowerTIRx", _lower_tirx_as_tvm), ("s_tir.UnifyThreadBinding", unify_thread_binding),
                         ("tirx.StmtSimplify", _simplify_as_tvm), ("tirx.LowerTIRxOpaque", lower_tirx_opaque),
                         ("tirx.FlattenBuffer", flatten_buffer), ("tirx.NarrowDataType", narrow_data_type),
                         ("tirx.VectorizeLoop", vectorize), ("tirx.UnrollLoop", unroll_loop_in_context),
                         ("tirx.StmtSimplify", _simplify_as_tvm)]
    if not config.get("tir.disable_cse_tir", False):
        steps.append(("tirx.CommonSubexprElim", common_subexpr_elim))
    return steps


def run_steps(func: PrimFunc, steps: list[Step]) -> PrimFunc:
    for _, step in steps:
        func = step(func)
    return func


def lower_for_codegen_tirx(func: PrimFunc) -> PrimFunc:
    """The llvm row's ``tirx`` lowering: the pipeline's passes (a CPU function has no device part
    to split), then what tvms's LLVM code generator needs besides (loops counted from 0 in steps
    of 1, narrow floats computed in float32: ``CanonicalizeLoop`` and ``legalize_narrow``, as in
    the s_tir lowering) and LowerIntrin, TVM's last host pass."""
    refuse_blocks(func)
    func = run_steps(func, tirx_steps())
    func = lower_intrin(legalize_narrow(canonicalize_loop(func)))
    check_lowered(func)
    return func


__all__ = ["lower_for_codegen_tirx", "run_steps", "tirx_steps"]
