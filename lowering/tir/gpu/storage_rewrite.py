"""StorageRewrite, the part of it a GPU kernel needs: each kernel's allocations at its top.

In TVM 0.27 StorageRewrite plans memory: it attaches every allocation to its scope (inside a
kernel, the kernel's outermost thread launch), allocates there in the order the buffers are first
used, and lets allocations whose lifetimes do not overlap share memory. tvms does the first two
for kernels: the allocations inside an outermost ``T.launch_thread`` move right inside it, in the
order of first use, keeping only the ``tirx.volatile`` annotation. Not done: sharing memory
between allocations (a kernel whose buffers TVM would overlay keeps them apart: more memory, the
same results). Allocations outside kernels (a global scratch that one kernel writes and the next
reads) go to the top of the function, as TVM attaches them to its root, with the annotations a
kernel's keep (one sized by a variable bound inside the function stays where it is).
"""
from __future__ import annotations

from ....ir.expr import BufferLoad, Var
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, Stmt
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass

VOLATILE = "tir.volatile"


def _kept(alloc: AllocBuffer) -> FrozenDict:
    """The annotations StorageRewrite keeps on an allocation it plans."""
    return FrozenDict({k: v for k, v in alloc.annotations.items() if k == VOLATILE})


class _Unallocate(Mutator):
    """The allocations taken out (each replaced by its body), recorded in ``self.allocs``."""

    def __init__(self) -> None:
        self.allocs: dict = {}  # buffer -> annotations kept

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        self.allocs[alloc.buffer] = _kept(alloc)
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


class _Hoist(Mutator):
    """The allocations outside kernels whose sizes the function's parameters give, taken out
    (TVM attaches them to the function's root); kernels are not entered."""

    def __init__(self, known: set) -> None:
        self.known = known
        self.allocs: dict = {}  # buffer -> annotations kept

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        return attr if attr.attr_key == "thread_extent" else self.generic_visit(attr)

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        if not all(isinstance(v, Var) and v in self.known for e in alloc.buffer.shape for v in walk(e)
                   if isinstance(v, Var)):
            return self.generic_visit(alloc)  # (sized by a variable bound inside: it stays)
        self.allocs[alloc.buffer] = _kept(alloc)
        return self.visit(alloc.body)


def storage_rewrite(func: PrimFunc) -> PrimFunc:
    """``func`` with each kernel's allocations at the kernel's top, and the others (a global
    scratch between two kernels) at the function's."""
    body = _Kernels().visit(func.body)
    known = set(func.params) | {v for b in func.buffer_map.values() for e in (*b.shape, *b.strides)
                                for v in walk(e) if isinstance(v, Var)}
    hoist = _Hoist(known)
    body = hoist.visit(body)
    for buffer in reversed(_first_use_order(body, list(hoist.allocs))):
        body = AllocBuffer(buffer, body, hoist.allocs[buffer])
    return func if body is func.body else func.with_changes(body=body)


StorageRewrite = define_tir_pass("StorageRewrite", storage_rewrite)

__all__ = ["StorageRewrite", "storage_rewrite"]
