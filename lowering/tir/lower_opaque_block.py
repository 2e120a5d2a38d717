"""LowerOpaqueBlock: opaque blocks disappear, leaving plain loops, ``if``s and allocations.

A block's predicate becomes an ``if`` (inside the block's loops where it names their variables:
TVM 0.27's reverse_compute_inline into a copy block bounds each element so), its ``alloc_buffers`` become ``T.alloc_buffer``
statements around its body (annotated with the data alignment, as TVM does), and a serial loop
of extent 1 without annotations is replaced by its body with the loop variable set to the min.
Loop annotations named ``pragma_*`` become ``T.attr`` statements around the loop. A thread-bound
loop becomes a thread launch, ``with T.launch_thread("blockIdx.x", 48) as bx:``, which is how GPU
code generators (and the reference executor) expect thread indices (a ``vthread`` one is a
``virtual_thread`` attribute, which InjectVirtualThread expands).
"""
from __future__ import annotations

from ...ir.buffer import DEFAULT_ALIGN
from ...ir.errors import TVMSError
from ...ir.expr import THREAD_INDEX, Add, IterVar, Range, StringImm, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import SERIAL, THREAD_BINDING, AllocBuffer, AttrStmt, Block, BlockRealize, For, IfThenElse, Stmt
from ...ir.analysis import substitute
from ...ir.visitor import Mutator, walk
from .compact_buffer_allocation import storage_aligns
from .tir_pass import define_tir_pass

PRAGMA_PREFIX = "pragma_"


def _allocation_annotations(alignment: int, aligns: dict) -> FrozenDict:
    annotations = {"buffer_allocated_addr": (), "buffer_data_alignment": alignment}
    if aligns:  # (storage_align's rows, kept with the allocation as TVM does, buffer index -1)
        annotations["buffer_dim_align"] = tuple((-1, dim, factor, offset)
                                                for dim, (factor, offset) in sorted(aligns.items()))
    return FrozenDict(annotations)



def _guard_inside_loops(block: Block, predicate) -> tuple[Block, bool]:
    """``block`` with ``predicate`` as an ``if`` inside the loops of its body whose variables it
    names (True), or unchanged (False) where it names none of them."""
    named = {id(v) for v in walk(predicate) if isinstance(v, Var)}
    loops, inner = [], block.body
    while isinstance(inner, For) and any(id(v) in named for v in _loop_vars(inner)):
        loops.append(inner)
        inner = inner.body
    if not loops:
        return block, False
    if any(id(v) in named for v in _loop_vars(inner)):
        raise TVMSError(f"LowerOpaqueBlock: the predicate of block {block.name_hint!r} names a loop variable "
                        f"of its body below other statements")
    body: Stmt = IfThenElse(predicate, inner)
    for loop in reversed(loops):
        body = loop.with_changes(body=body)
    return block.with_changes(body=body), True


def _loop_vars(stmt: Stmt) -> list:
    return [node.loop_var for node in walk(stmt) if isinstance(node, For)]


class _BlockLowerer(Mutator):
    def __init__(self, aligns: dict) -> None:
        self.aligns = aligns  # buffer -> {dim: (factor, offset)} (storage_align)

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        if realize.block.iter_vars:
            raise TVMSError(f"LowerOpaqueBlock: block {realize.block.name_hint!r} still has iterators; "
                            f"run ConvertBlocksToOpaque first")
        if is_const_int(realize.predicate, 1):
            return self.visit(realize.block)
        block, guarded = _guard_inside_loops(realize.block, realize.predicate)
        body = self.visit(block)
        return body if guarded else IfThenElse(realize.predicate, body)

    def visit_Block(self, block: Block) -> Stmt:
        if block.match_buffers:
            raise TVMSError(f"LowerOpaqueBlock: block {block.name_hint!r} still has match_buffers; "
                            f"run LowerMatchBuffer first")
        if block.init is not None:
            raise TVMSError(f"LowerOpaqueBlock: block {block.name_hint!r} still has an init; "
                            f"run LowerInitBlock first")
        body = self.visit(block.body)
        for buffer in reversed(block.alloc_buffers):
            body = AllocBuffer(buffer, body, _allocation_annotations(buffer.data_alignment or DEFAULT_ALIGN,
                                                                     self.aligns.get(buffer, {})))
        return body

    def visit_For(self, loop: For) -> Stmt:
        body = self.visit(loop.body)
        if loop.kind == THREAD_BINDING:
            return _launch_thread(loop, body)
        if (loop.kind == SERIAL and is_const_int(loop.extent, 1) and not loop.annotations
                and loop.thread_binding is None):
            return substitute(body, {loop.loop_var: loop.min})
        kept = {k: v for k, v in loop.annotations.items() if not k.startswith(PRAGMA_PREFIX)}
        result: Stmt = loop.with_changes(body=body, annotations=FrozenDict(kept))
        for key, value in reversed([(k, v) for k, v in loop.annotations.items()
                                    if k.startswith(PRAGMA_PREFIX)]):
            if isinstance(value, str):
                value = StringImm(value)
            elif isinstance(value, int):
                value = const(value, "int32")
            result = AttrStmt(loop.loop_var, key, value, result)
        return result


def _launch_thread(loop: For, body: Stmt) -> Stmt:
    if loop.thread_binding is None:
        raise TVMSError(f"LowerOpaqueBlock: loop {loop.loop_var.name} is thread-bound to no thread")
    if not is_const_int(loop.min, 0):  # a launched thread index counts from 0
        body = substitute(body, {loop.loop_var: Add(loop.loop_var, loop.min)})
    thread = IterVar(Range(const(0, loop.extent.dtype), loop.extent), loop.loop_var, THREAD_INDEX,
                     loop.thread_binding.thread_tag)
    key = "virtual_thread" if loop.thread_binding.thread_tag.startswith("vthread") else "thread_extent"
    return AttrStmt(thread, key, loop.extent, body)


def lower_opaque_block(func: PrimFunc) -> PrimFunc:
    """``func`` without blocks."""
    return func.with_changes(body=_BlockLowerer(storage_aligns(func)).visit(func.body))


LowerOpaqueBlock = define_tir_pass("LowerOpaqueBlock", lower_opaque_block)

__all__ = ["LowerOpaqueBlock", "lower_opaque_block"]
