"""PlanAndUpdateBufferAllocationLocation: each allocation moves down to where it is used.

A buffer allocated by a block (usually the root) moves to the lowest common ancestor of its
accesses. When that ancestor is a loop, the loop's body is wrapped in a new opaque block
(``with T.sblock(""):``) that allocates it and declares what the body reads and writes, so that
CompactBufferAllocation can later shrink the buffer to the part one iteration touches.

As TVM's detector, it knows the GPU hierarchy and reductions: a global buffer is allocated no
deeper than the ``blockIdx`` loops (one allocation for the kernel, not one per block), and what
a reduction block writes no deeper than the loops its reduction iterators are bound to (the
accumulator lives across the reduction).
"""
from __future__ import annotations

import dataclasses

from ...ir.analysis import infer_block_regions
from ...ir.buffer import BufferRegion
from ...ir.expr import COMM_REDUCE, DATA_PAR, BufferLoad, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, Stmt
from ...ir.visitor import Mutator, Visitor, walk
from .tir_pass import define_tir_pass


class _AccessScopes(Visitor):
    """For every allocated buffer, the lowest loop or block holding all its accesses."""

    def __init__(self) -> None:
        self.path: list = []  # the enclosing blocks and loops, outermost first
        self.owner: dict = {}  # buffer -> the block that allocates it
        self.order: dict = {}  # buffer -> its place among the allocations (they keep their order)
        self.lca: dict = {}  # buffer -> list of nodes (the common ancestor path)
        self.loop_parents: dict = {}  # loop var -> the path above its loop
        self.block_loops: list = []  # the paths to the blockIdx-bound loops (the loops included)

    def touch(self, buffer: object, path: list | None = None) -> None:
        if buffer not in self.owner:
            return
        path = self.path if path is None else path
        known = self.lca.get(buffer)
        if known is None:
            self.lca[buffer] = list(path)
            return
        n = 0
        while n < len(known) and n < len(path) and known[n] is path[n]:
            n += 1
        del known[n:]

    def finish(self) -> None:
        """Global buffers no deeper than any blockIdx loop."""
        for buf in list(self.lca):
            if buf.scope == "global":
                for path in self.block_loops:
                    self.touch(buf, path)

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        reduce_path = None
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type == DATA_PAR:
                continue
            paths = [self.loop_parents[v] for v in walk(value) if isinstance(v, Var) and v in self.loop_parents]
            if not paths:
                continue
            highest = min(paths, key=len)
            if iv.iter_type == COMM_REDUCE:
                reduce_path = highest if reduce_path is None or len(highest) < len(reduce_path) else reduce_path
            else:
                for region in realize.block.writes:
                    self.touch(region.buffer, highest)
        if reduce_path is not None:
            for region in realize.block.writes:
                self.touch(region.buffer, reduce_path)
        self.generic_visit(realize)

    def visit_Block(self, block: Block) -> None:
        for buf in block.alloc_buffers:
            self.owner[buf] = block
            self.order[buf] = len(self.order)
        self.path.append(block)
        for region in (*block.reads, *block.writes):
            self.touch(region.buffer)
        for m in block.match_buffers:
            self.touch(m.source.buffer)
        self.generic_visit(block)
        self.path.pop()

    def visit_For(self, loop: For) -> None:
        self.loop_parents[loop.loop_var] = list(self.path)
        self.path.append(loop)
        if loop.thread_binding is not None and loop.thread_binding.thread_tag.startswith("blockIdx."):
            self.block_loops.append(list(self.path))
        self.generic_visit(loop)
        self.path.pop()

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self.touch(load.buffer)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.touch(store.buffer)
        self.generic_visit(store)

    def visit_BufferRegion(self, region: BufferRegion) -> None:
        self.touch(region.buffer)


class _Replanner(Mutator):
    def __init__(self, scopes: _AccessScopes) -> None:
        self.moved: set = set()
        self.placed: dict = {}  # id(block or loop) -> buffers to allocate there
        self.internal: dict = {}  # id(block) -> buffers now allocated in or below it
        for buf, path in sorted(scopes.lca.items(), key=lambda item: scopes.order[item[0]]):
            owner = scopes.owner[buf]
            target = path[-1] if path else owner
            # the deepest block or loop below the owner; a block may only sink inside its own subtree
            if owner in path and target is not owner:
                self.moved.add(buf)
                self.placed.setdefault(id(target), []).append(buf)
                for node in path[path.index(owner) + 1:]:
                    if isinstance(node, Block):
                        self.internal.setdefault(id(node), set()).add(buf)

    def visit_Block(self, block: Block) -> Block:
        arriving = self.placed.get(id(block), [])
        inside = self.internal.get(id(block), set())  # (no longer read or written from outside)
        block = self.generic_visit(block)
        kept = tuple(b for b in block.alloc_buffers if b not in self.moved)
        return dataclasses.replace(block, alloc_buffers=kept + tuple(arriving),
                                   reads=tuple(r for r in block.reads if r.buffer not in inside),
                                   writes=tuple(r for r in block.writes if r.buffer not in inside))

    def visit_For(self, loop: For) -> Stmt:
        arriving = self.placed.get(id(loop), [])
        loop = self.generic_visit(loop)
        if not arriving:
            return loop
        scope = Block(iter_vars=(), alloc_buffers=tuple(arriving), name_hint="", body=loop.body)
        reads, writes = infer_block_regions(scope)
        scope = dataclasses.replace(scope, reads=reads, writes=writes)
        return loop.with_changes(body=BlockRealize((), const(True), scope))


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """``func`` with every block-allocated buffer allocated where it is used."""
    scopes = _AccessScopes()
    scopes.visit(func.body)
    scopes.finish()
    return func.with_changes(body=_Replanner(scopes).visit(func.body))


PlanAndUpdateBufferAllocationLocation = define_tir_pass("PlanAndUpdateBufferAllocationLocation",
                                                        plan_buffer_allocation)

__all__ = ["PlanAndUpdateBufferAllocationLocation", "plan_buffer_allocation"]
