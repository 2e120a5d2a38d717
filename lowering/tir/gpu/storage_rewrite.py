"""StorageRewrite, the part of it a GPU kernel needs: each kernel's allocations at its top.

In TVM 0.27 StorageRewrite plans memory: it attaches every allocation to its scope (inside a
kernel, the kernel's outermost thread launch), allocates there in the order the buffers are first
used, and lets allocations whose lifetimes do not overlap share memory. tvms does the first two
for kernels: the allocations inside an outermost ``T.launch_thread`` move right inside it, in the
order of first use, keeping only the ``tirx.volatile`` annotation. Not done: sharing memory
between allocations (a kernel whose buffers TVM would overlay keeps them apart: more memory, the
same results) and allocations outside kernels (left where they are).
"""
from __future__ import annotations

from ....ir.expr import BufferLoad
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, Stmt
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass

VOLATILE = "tir.volatile"


class _Unallocate(Mutator):
    """The allocations taken out (each replaced by its body), recorded in ``self.allocs``."""

    def __init__(self) -> None:
        self.allocs: dict = {}  # buffer -> annotations kept

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        kept = {k: v for k, v in alloc.annotations.items() if k == VOLATILE}
        self.allocs[alloc.buffer] = FrozenDict(kept)
        return self.visit(alloc.body)


def _first_use_order(body: Stmt, buffers: list) -> list:
    wanted = set(buffers)
    order: dict = {}
    for node in walk(body):
        if isinstance(node, (BufferLoad, BufferStore)) and node.buffer in wanted:
            order.setdefault(node.buffer, None)
    return list(order) + [b for b in buffers if b not in order]


class _Kernels(Mutator):
    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key != "thread_extent":
            return self.generic_visit(attr)
        taker = _Unallocate()
        body = taker.visit(attr.body)
        for buffer in reversed(_first_use_order(body, list(taker.allocs))):
            body = AllocBuffer(buffer, body, taker.allocs[buffer])
        return attr.with_changes(body=body)  # (the kernel's inner launches stay below)


def storage_rewrite(func: PrimFunc) -> PrimFunc:
    """``func`` with each kernel's allocations at the kernel's top."""
    body = _Kernels().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


StorageRewrite = define_tir_pass("StorageRewrite", storage_rewrite)

__all__ = ["StorageRewrite", "storage_rewrite"]
