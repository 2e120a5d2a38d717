"""The CPU lowering pipeline: scheduled TensorIR in, loop-level TensorIR for the code generator out.

``lower_for_codegen(func)`` runs, in TVM's order: CanonicalizeLoop, LowerInitBlock,
PlanAndUpdateBufferAllocationLocation, ConvertBlocksToOpaque, CompactBufferAllocation,
LowerMatchBuffer, LowerOpaqueBlock, FlattenBuffer, StmtSimplify, VectorizeLoop, UnrollLoop,
UnswitchGuards (a tile's tail guards tested once per loop), LegalizeNarrowFloat (bfloat16 and
float8 arithmetic in float32), LowerIntrin.

The contract for the code generator: the returned function's body holds only these statements

* ``For`` with ``kind`` serial, parallel, vectorized (a loop VectorizeLoop could not turn into
  vector statements; generate it as a loop, vectorizing is an optimisation) or unroll (the extent
  is not a constant, or ``pragma_unroll_explicit`` 0 left the unrolling to LLVM);
  ``min``/``extent`` are int expressions, ``step`` is None; ``annotations`` may hold hints, never
  semantics;
* ``BufferStore`` / ``BufferLoad`` on one-dimensional buffers, with one index each; an index is
  a scalar int or a ``Ramp`` (then the value has as many lanes);
* ``DeclBuffer`` of the flat view of a parameter (same data pointer: ``A_1 = A.view(16384)``)
  and ``AllocBuffer`` of a one-dimensional buffer (annotation ``buffer_data_alignment``);
* ``LetStmt``, ``IfThenElse``, ``While`` (topi's binary search), ``Evaluate``, ``AttrStmt``
  (``pragma_*`` hints), ``AssertStmt``, ``SeqStmt``.

Expressions are scalar or vector arithmetic, comparisons, ``Select``, ``Cast``, ``Ramp``,
``Broadcast``, ``Let``, ``FloorDiv``/``FloorMod`` (floor semantics) and ``Div``/``Mod``
(truncating), and calls: ``T.call_llvm_pure_intrin(dtype, "llvm.<name>", args...)`` for math with
an LLVM intrinsic (``llvm.fmuladd`` included), the remaining ``tir.*`` math ops (``tanh``,
``sigmoid``, ``erf``, ...: libm or an expansion) and ``T.if_then_else``. No blocks, no
``match_buffer``, no multi-dimensional buffer. ``check_lowered`` raises a TVMSError otherwise.
"""
from __future__ import annotations

from ...ir.buffer import Buffer
from ...ir.errors import TVMSError
from ...ir.expr import BufferLoad
from ...ir.function import PrimFunc
from ...ir.stmt import (SERIAL, PARALLEL, UNROLLED, VECTORIZED, AllocBuffer, AssertStmt, AttrStmt,
                        BufferStore, DeclBuffer, Evaluate, For, IfThenElse, LetStmt, SeqStmt, While)
from ...ir.visitor import walk
from ...ir.stmt import Stmt
from .canonicalize_loop import canonicalize_loop
from .compact_buffer_allocation import compact_buffer_allocation
from .convert_blocks_to_opaque import convert_blocks_to_opaque
from .flatten_buffer import flatten_buffer
from .legalize_narrow import legalize_narrow
from .lower_init_block import lower_init_block
from .lower_intrin import lower_intrin
from .lower_match_buffer import lower_match_buffer
from .lower_opaque_block import lower_opaque_block
from .plan_buffer_allocation import plan_buffer_allocation
from .stmt_simplify import stmt_simplify
from .unroll_loop import unroll_loop_in_context
from .unswitch_guards import unswitch_guards
from .vectorize_loop import vectorize_loop

CPU_PIPELINE = (canonicalize_loop, lower_init_block, plan_buffer_allocation, convert_blocks_to_opaque,
                compact_buffer_allocation, lower_match_buffer, lower_opaque_block, flatten_buffer,
                stmt_simplify, vectorize_loop, unroll_loop_in_context, unswitch_guards, legalize_narrow, lower_intrin)

ALLOWED_STMTS = (For, BufferStore, DeclBuffer, AllocBuffer, LetStmt, IfThenElse, While, Evaluate, AttrStmt,
                 AssertStmt, SeqStmt)
ALLOWED_LOOP_KINDS = (SERIAL, PARALLEL, VECTORIZED, UNROLLED)


def lower_for_codegen(func: PrimFunc) -> PrimFunc:
    """``func`` lowered for a CPU code generator (see the module docstring for what remains)."""
    if not isinstance(func, PrimFunc):
        raise TVMSError(f"lower_for_codegen: expected a PrimFunc, got {type(func).__name__}")
    for step in CPU_PIPELINE:
        func = step(func)
    check_lowered(func)
    return func


def check_lowered(func: PrimFunc) -> None:
    """Raise a TVMSError if ``func``'s body leaves the code generator's contract."""
    for node in walk(func.body):
        if isinstance(node, Stmt) and not isinstance(node, ALLOWED_STMTS):
            raise TVMSError(f"lowered function still holds a {type(node).__name__}")
        if isinstance(node, For) and node.kind not in ALLOWED_LOOP_KINDS:
            raise TVMSError(f"lowered function still holds a {node.kind} loop")
        if isinstance(node, For) and not node.has_trivial_step:
            raise TVMSError(f"lowered function still holds loop {node.loop_var.name!r} with a step")
        if isinstance(node, (BufferLoad, BufferStore)) and not _is_flat(node.buffer):
            raise TVMSError(f"lowered function still accesses {node.buffer.name} with "
                            f"{len(node.indices)} indices")
        if isinstance(node, (AllocBuffer, DeclBuffer)) and not _is_flat(node.buffer):
            raise TVMSError(f"lowered function still declares the {len(node.buffer.shape)}-d "
                            f"buffer {node.buffer.name}")


def _is_flat(buffer: Buffer) -> bool:
    return len(buffer.shape) == 1


__all__ = ["lower_for_codegen", "check_lowered", "CPU_PIPELINE"]
