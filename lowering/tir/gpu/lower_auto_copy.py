"""LowerAutoCopy: the copy blocks annotated ``auto_copy`` (a schedule's ``read_at``/``write_at``,
MetaSchedule's tensor-core rules) made into real GPU copies, as TVM 0.27's pass
(``s_tir.transform.LowerAutoCopy``, "memhammer") makes them.

Each ``auto_copy`` block (one write, and one read or a ``wmma.accumulator`` read among several)
goes through TVM's rules in TVM's order, each one rewriting the block's body where the copy's
memories are its own:

- InverseMapping (shared to global, ``auto_copy_coalesce``): loops over the written region;
- CoalescedAccess (global to shared and back): fused, split over the kernel's threads and a
  vector of the annotation's ``vector_bytes``;
- CreateLocalStage (global to shared, ``local_stage``; ``auto_copy_stage``): through registers;
- SharedToWmma, WmmaToShared (``auto_copy_tensor_core``): ``load_matrix_sync`` /
  ``store_matrix_sync`` on 16x16 tiles;
- WmmaToGlobal, MmaToGlobal: through a new ``shared.dyn`` stage, tile by tile (the m16n8k8
  accumulator with each lane's two values), then a coalesced copy out.

Then the shared buffers the rewritten copies touch are padded against bank conflicts
(``auto_copy_padding``) and every use of them is moved to the padded buffers. A copy a rule cannot
take (a loop nest that is not one store, an inverse tvms does not compute) is refused with a
TVMSError naming the block.
"""
from __future__ import annotations

from ....ir.errors import TVMSError
from ....ir.expr import IntImm, const, is_const_int
from ....ir.function import PrimFunc
from ....ir.stmt import Block, BlockRealize, For, IfThenElse, Stmt
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass
from .auto_copy_coalesce import coalesced_access, inverse_mapping
from .auto_copy_padding import AutoPadder
from .auto_copy_rule import ConstraintSet, OutputSet, annotation_int, loop_nest, wrap
from .auto_copy_stage import create_local_stage
from .auto_copy_tensor_core import mma_to_global, shared_to_wmma, wmma_to_global, wmma_to_shared

RULES = (inverse_mapping, coalesced_access, create_local_stage, shared_to_wmma, wmma_to_global, wmma_to_shared,
         mma_to_global)


def thread_extents(stmt: Stmt) -> dict:
    """The constant extent of each thread tag the function binds (TVM's ThreadExtentCollector;
    a block marked ``warp_execution`` runs threadIdx.x over a warp)."""
    extents = {}
    for node in walk(stmt):
        if isinstance(node, Block) and annotation_int(node.annotations.get("warp_execution", 0)):
            extents["threadIdx.x"] = 32
        elif isinstance(node, For) and node.thread_binding is not None and isinstance(node.extent, IntImm) \
                and node.thread_binding.iter_type == "ThreadIndex":
            extents[node.thread_binding.thread_tag] = node.extent.value
    return extents


class _AutoCopy(Mutator):
    def __init__(self, thread_extent: dict) -> None:
        self.thread_extent = thread_extent
        self.outer: list = []  # the loops around the statement visited (as they were)
        self.padder = AutoPadder()

    def visit_For(self, loop: For) -> Stmt:
        self.outer.append(loop)
        try:
            return self.generic_visit(loop)
        finally:
            self.outer.pop()

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        if annotation_int(block.annotations.get("auto_copy", 0)) and not is_const_int(realize.predicate, 1):
            # the bound (a padded result's write-back) is over the copy's loops, which the rules
            # re-make: it goes inside them (TVM leaves it outside, over variables gone)
            loops, inner = loop_nest(block.body)
            guarded = wrap(loops, IfThenElse(realize.predicate, inner))
            realize = realize.with_changes(predicate=const(True), block=block.with_changes(body=guarded))
        return self.generic_visit(realize)

    def visit_Block(self, block: Block) -> Stmt:
        block = self.generic_visit(block)
        if not annotation_int(block.annotations.get("auto_copy", 0)):
            allocs = self.padder.pad(block.alloc_buffers)
            changed = any(a is not b for a, b in zip(allocs, block.alloc_buffers))
            return block.with_changes(alloc_buffers=allocs) if changed else block
        if len(block.writes) != 1 or not block.reads:
            raise TVMSError(f"LowerAutoCopy: the auto_copy block {block.name_hint!r} must write one buffer and read one")
        read = block.reads[0]
        if len(block.reads) > 1:
            accumulators = [r for r in block.reads if r.buffer.scope == "wmma.accumulator"]
            if not accumulators:
                raise TVMSError(f"LowerAutoCopy: the auto_copy block {block.name_hint!r} reads several buffers, "
                                "none a wmma.accumulator")
            read = accumulators[-1]
        bits = read.buffer.dtype.bits
        constraints = ConstraintSet(self.thread_extent, tuple(self.outer), read, block.writes[0], bits,
                                    dict(block.annotations), block.name_hint)
        output = OutputSet()
        body = block.body
        for rule in RULES:
            body = rule(body, constraints, output)
        for buffer, padding in output.padding_min.items():
            self.padder.least(buffer, padding)
        self.padder.analyze(body, self.outer, self.thread_extent)
        allocs = self.padder.pad(block.alloc_buffers + tuple(output.alloc_buffers))
        return block.with_changes(body=body, alloc_buffers=allocs)


def lower_auto_copy(func: PrimFunc) -> PrimFunc:
    """``func`` with its ``auto_copy`` blocks lowered and its shared buffers padded (see the module)."""
    mutator = _AutoCopy(thread_extents(func.body))
    body = mutator.padder.rewrite(mutator.visit(func.body))
    return func if body is func.body else func.with_changes(body=body)


LowerAutoCopy = define_tir_pass("LowerAutoCopy", lower_auto_copy)

__all__ = ["LowerAutoCopy", "lower_auto_copy", "thread_extents", "RULES"]
