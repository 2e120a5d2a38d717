"""PlanAndUpdateBufferAllocationLocation: each allocation moves down to where it is used.

A buffer allocated by a block (usually the root) moves to the lowest common ancestor of its
accesses. When that ancestor is a loop, the loop's body is wrapped in a new opaque block
(``with T.sblock(""):``) that allocates it and declares what the body reads and writes, so that
CompactBufferAllocation can later shrink the buffer to the part one iteration touches.
"""
from __future__ import annotations

import dataclasses

from ...ir.analysis import infer_block_regions
from ...ir.buffer import BufferRegion
from ...ir.expr import BufferLoad, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, Stmt
from ...ir.visitor import Mutator, Visitor
from .tir_pass import define_tir_pass


class _AccessScopes(Visitor):
    """For every allocated buffer, the lowest loop or block holding all its accesses."""

    def __init__(self) -> None:
        self.path: list = []  # the enclosing blocks and loops, outermost first
        self.owner: dict = {}  # buffer -> the block that allocates it
        self.lca: dict = {}  # buffer -> list of nodes (the common ancestor path)

    def touch(self, buffer: object) -> None:
        if buffer not in self.owner:
            return
        known = self.lca.get(buffer)
        if known is None:
            self.lca[buffer] = list(self.path)
            return
        n = 0
        while n < len(known) and n < len(self.path) and known[n] is self.path[n]:
            n += 1
        del known[n:]

    def visit_Block(self, block: Block) -> None:
        for buf in block.alloc_buffers:
            self.owner[buf] = block
        self.path.append(block)
        for region in (*block.reads, *block.writes):
            self.touch(region.buffer)
        for m in block.match_buffers:
            self.touch(m.source.buffer)
        self.generic_visit(block)
        self.path.pop()

    def visit_For(self, loop: For) -> None:
        self.path.append(loop)
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
        for buf, path in scopes.lca.items():
            owner = scopes.owner[buf]
            target = path[-1] if path else owner
            # the deepest block or loop below the owner; a block may only sink inside its own subtree
            if owner in path and target is not owner:
                self.moved.add(buf)
                self.placed.setdefault(id(target), []).append(buf)

    def visit_Block(self, block: Block) -> Block:
        arriving = self.placed.get(id(block), [])
        block = self.generic_visit(block)
        kept = tuple(b for b in block.alloc_buffers if b not in self.moved)
        return dataclasses.replace(block, alloc_buffers=kept + tuple(arriving))

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
    return func.with_changes(body=_Replanner(scopes).visit(func.body))


PlanAndUpdateBufferAllocationLocation = define_tir_pass("PlanAndUpdateBufferAllocationLocation",
                                                        plan_buffer_allocation)

__all__ = ["PlanAndUpdateBufferAllocationLocation", "plan_buffer_allocation"]
