"""ThreadSync: ``T.tvm_storage_sync(scope)`` barriers where threads may race on ``scope`` memory.

Inside a kernel (under its first thread launch), the statements of each sequence are simulated
in order, as TVM's ThreadSyncPlanner does: the reads and writes of ``scope`` buffers since the
last barrier are kept, and a statement that writes what was read, or reads what was written, gets
a barrier before it, unless both touch the same single element of one buffer indexed by the
innermost thread (each thread then only sees its own element). A loop, an ``if`` or a ``while`` counts as one
statement with the accesses its body leaves exposed (those a loop's iterations can see
outside one element are relaxed to the whole loop); a loop body is checked a second time against
its own end for what the next iteration reads or writes. No barrier is placed under a
thread-dependent ``if`` (a TVMSError: not every thread would reach it). The buffers of
``shared.dyn`` count as one memory, as in TVM: MergeSharedMemoryAllocations later lays them out in
one allocation, where buffers that do not live together may share bytes. So do those of
``shared`` under ``tirx.merge_static_smem``, where the pass merges them too (TVM 0.27 keeps them
apart there, and its merged kernel races: tests/test_gpu_lowering.py,
test_thread_sync_sees_merged_static_shared_as_one_memory).
"""
from __future__ import annotations

from ....ir.buffer import pointer_data
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, Call, Ramp, Var
from ....ir.function import PrimFunc
from ....ir.stmt import (AllocBuffer, AssertStmt, AttrStmt, BufferStore, DeclBuffer, Evaluate, For,
                         IfThenElse, LetStmt, SeqStmt, Stmt, While, async_wait)
from ....ir.structural import structural_equal
from ....ir.visitor import Mutator, walk
from ...pass_registry import register_pass
from ..tir_pass import checked_prim_func_pass
from .merge_shared_memory_allocations import merges_static
from .threads import storage_sync

READ, WRITE, SYNC = "read", "write", "sync"


class _Access:
    """A read, write or barrier: the memory it touches (``data``: the buffer's data Var, or the
    scope for memory merged later), the buffer's own data Var (``buffer``) and its indices."""

    __slots__ = ("kind", "data", "buffer", "touched", "threads")

    def __init__(self, kind: str, data=None, buffer=None, touched: tuple = (), threads: tuple = ()) -> None:
        self.kind, self.data, self.buffer, self.touched, self.threads = kind, data, buffer, touched, threads


def _point(index):
    """The element an index names, or None for several (a vector index)."""
    return None if isinstance(index, Ramp) else index


def _uses(expr, var: Var) -> bool:
    return any(node is var for node in walk(expr))


def _conflict(prev: _Access, curr: _Access) -> bool:
    if prev.data is not curr.data:
        return False
    if prev.buffer is not curr.buffer:  # (merged later, the same index of two buffers is other bytes)
        return True
    thread = curr.threads[-1].var if curr.threads else None
    for a, b in zip(prev.touched, curr.touched):
        if a is None or b is None or not structural_equal(a, b):
            return True
        if thread is not None and not (_uses(a, thread) and _uses(b, thread)):
            return True
    return False


def _conflicts(prev: list, curr: _Access) -> bool:
    return any(_conflict(p, curr) for p in prev)


class _Planner:
    """Finds the statements that need a barrier before them (``self.syncs``, by identity)."""

    def __init__(self, scope: str, merged: bool) -> None:
        self.scope = scope
        self.merged = merged  # whether the scope's buffers are merged later into one allocation
        self.syncs: set = set()
        self.threads: list = []
        self.in_device = False
        self.conditions = 0
        self.seqs: list = [[]]

    def _memory(self, data):
        """What an access of ``data`` touches (one memory for all buffers merged later)."""
        return self.scope if self.merged else data

    def _expr_accesses(self, expr) -> list:
        found = []
        # (TVM's planner sees no access in ``T.address_of(buf[i])``, only in its indices: a pointer
        # handed to a call, ``T.cuda.atomic_add(T.address_of(count[0]), 1)``, is the call's affair)
        addressed = {id(node.args[0]) for node in walk(expr)
                     if isinstance(node, Call) and getattr(node.op, "name", "") == "tir.address_of"}
        for node in walk(expr):
            if isinstance(node, BufferLoad) and self._enabled(node.buffer) and id(node) not in addressed:
                found.append(_Access(READ, self._memory(node.buffer.data), node.buffer.data,
                                     tuple(map(_point, node.indices)), tuple(self.threads)))
            elif (isinstance(node, Call) and getattr(node.op, "name", "") == "tir.tvm_storage_sync"
                  and node.args[0].value != "warp"):
                found.append(_Access(SYNC))
            elif (isinstance(node, Call) and getattr(node.op, "name", "") == "tir.tvm_access_ptr" and self.in_device
                  and getattr(pointer_data(node.args[1]).type_annotation, "storage_scope", None) == self.scope):
                # (a pointer handed to a call, a WMMA load or store: a range, read or written by its mask)
                mask = int(node.args[4].value)
                data = pointer_data(node.args[1])
                found += [_Access(kind, self._memory(data), data, (None,), tuple(self.threads))
                          for kind, bit in ((READ, 1), (WRITE, 2)) if mask & bit]
        return found

    def _enabled(self, buffer) -> bool:
        return self.in_device and buffer.scope == self.scope

    def _add(self, stmt: Stmt, accesses: list) -> None:
        self.seqs[-1].append((stmt, accesses))

    def visit(self, stmt: Stmt) -> None:
        if isinstance(stmt, SeqStmt):
            for s in stmt.seq:
                self.visit(s)
        elif isinstance(stmt, BufferStore):
            own = ([_Access(WRITE, self._memory(stmt.buffer.data), stmt.buffer.data,
                            tuple(map(_point, stmt.indices)), tuple(self.threads))]
                   if self._enabled(stmt.buffer) else [])
            self._add(stmt, own + self._expr_accesses(stmt.value)
                      + [a for i in stmt.indices for a in self._expr_accesses(i)])
        elif isinstance(stmt, Evaluate):
            accesses = self._expr_accesses(stmt.value)
            if accesses:
                self._add(stmt, accesses)
        elif isinstance(stmt, LetStmt):
            self._add(stmt, self._expr_accesses(stmt.value))
            self.visit(stmt.body)
        elif isinstance(stmt, AttrStmt) and stmt.attr_key == "thread_extent":
            self._launch(stmt)
        elif isinstance(stmt, (AttrStmt, AllocBuffer, DeclBuffer, AssertStmt)):
            self.visit(stmt.body)
        elif isinstance(stmt, For):
            accesses = self._nested(stmt.body, stmt)
            relaxed = [a if a.kind == SYNC else _Access(a.kind, a.data, a.buffer, tuple(
                None if t is None or _uses(t, stmt.loop_var) else t for t in a.touched), a.threads)
                for a in accesses]
            if relaxed:
                self._add(stmt, relaxed)
        elif isinstance(stmt, (IfThenElse, While)):
            self.conditions += 1
            if isinstance(stmt, IfThenElse):
                accesses = self._nested(stmt.then_case, None)
                if stmt.else_case is not None:
                    accesses += self._nested(stmt.else_case, None)
            else:
                accesses = self._nested(stmt.body, None)
            self.conditions -= 1
            self._add(stmt, accesses)

    def _launch(self, attr: AttrStmt) -> None:
        self.threads.append(attr.node)
        if self.in_device:
            self.visit(attr.body)
        else:
            self.in_device = True
            self._nested(attr.body, None)  # (a kernel's end syncs every thread anyway)
            self.in_device = False
        self.threads.pop()

    def _nested(self, body: Stmt, loop: For | None) -> list:
        self.seqs.append([])
        self.visit(body)
        return self._summarize(self.seqs.pop(), loop)

    def _mark(self, stmt: Stmt) -> None:
        if self.conditions:
            raise TVMSError("ThreadSync: a barrier would be needed inside a thread-dependent condition")
        self.syncs.add(id(stmt))

    def _summarize(self, seq: list, loop: For | None) -> list:
        reads: list = []
        writes: list = []
        for stmt, accesses in seq:
            sync = id(stmt) in self.syncs
            if sync:
                reads, writes = [], []
            for a in accesses:
                if (a.kind == READ and _conflicts(writes, a)) or (a.kind == WRITE and _conflicts(reads, a)):
                    sync = True
                    break
                if a.kind == SYNC:
                    reads, writes = [], []
            if sync:
                reads, writes = [], []
            for a in accesses:
                if a.kind == SYNC:
                    reads, writes = [], []
                else:
                    (reads if a.kind == READ else writes).append(a)
            if sync:
                self._mark(stmt)
        if loop is not None:  # what the next iteration does against what this one left
            for stmt, accesses in seq:
                if id(stmt) in self.syncs or not (reads or writes):
                    break
                if any((a.kind == READ and _conflicts(writes, a)) or
                       (a.kind == WRITE and _conflicts(reads, a)) for a in accesses):
                    self._mark(stmt)
                    break
                if any(a.kind == SYNC for a in accesses):
                    reads, writes = [], []
        head: list = []
        tail: list = []
        synced = 0
        barrier = _Access(SYNC, threads=tuple(self.threads))
        for stmt, accesses in seq:
            events = ([barrier] if id(stmt) in self.syncs else []) + accesses
            for a in events:
                if a.kind == SYNC:
                    if synced:
                        tail = []
                    else:
                        head.append(barrier)
                    synced += 1
                else:
                    (tail if synced else head).append(a)
        return head + tail


class _Inserter(Mutator):
    def __init__(self, scope: str, syncs: set) -> None:
        self.scope = scope
        self.syncs = syncs

    def visit(self, node):
        result = super().visit(node)
        if isinstance(node, Stmt) and id(node) in self.syncs:
            return SeqStmt((storage_sync(self.scope), result))
        return result


class _AfterAsyncWaits(Mutator):
    """A barrier first thing after each wait for cp.async groups (``async_wait_queue_scope``): the
    copies other threads issued are only complete for all once every thread has waited, which the
    planner, blind to asynchronous writes, cannot see (TVM's ThreadSyncAfterWaitQueueInserter)."""

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        s = self.generic_visit(s)
        if s.attr_key != "async_wait_queue_scope":
            return s
        _, body = async_wait(s, "ThreadSync", cuda=False)  # (TVM's pass takes any queue)
        return s.with_changes(body=s.body.with_changes(body=SeqStmt((storage_sync("shared"), body))))


def thread_sync(func: PrimFunc, storage_scope: str = "shared") -> PrimFunc:
    """``func`` with barriers for ``storage_scope`` memory where its threads would race."""
    merged = storage_scope == "shared.dyn" or (storage_scope == "shared" and merges_static())
    body = _AfterAsyncWaits().visit(func.body) if storage_scope == "shared" else func.body
    planner = _Planner(storage_scope, merged)
    planner.visit(body)
    if planner.syncs:
        body = _Inserter(storage_scope, planner.syncs).visit(body)
    return func if body is func.body else func.with_changes(body=body)


def ThreadSync(storage_scope: str = "shared"):  # noqa: N802 (TVM's name)
    """The pass: ``tvm.s_tir.transform.ThreadSync(storage_scope)``."""
    return checked_prim_func_pass(lambda func, mod, ctx: thread_sync(func, storage_scope), "ThreadSync")


register_pass("ThreadSync", ThreadSync)

__all__ = ["ThreadSync", "thread_sync"]
