"""InjectVirtualThread: ``T.launch_thread("vthread.x", n)`` becomes n copies of the work.

As TVM 0.27 does it: the statements that depend on the virtual thread index (directly, or
through a variable or buffer computed from it) are found first. The first such statement on
each path is replicated, the index replaced by 0, 1, ... (unrolled below 16 copies when no loop
was passed on the way down), or wrapped in ``for vthread_x_s in range(n)``. An allocation the
virtual threads write, or every allocation for a ``cthread``, gets one copy per virtual thread
(the extent times n, each access offset by index times the extent). Variables a copied statement
defines are made anew in each copy, as TVM's ConvertSSA does.
"""
from __future__ import annotations

from collections import defaultdict

from ....ir.analysis import substitute
from ....ir.arith.analyzer import simplify
from ....ir.buffer import Buffer
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, IntImm, IterVar, PrimExpr, Var
from ....ir.function import PrimFunc
from ....ir.stmt import (SERIAL, AllocBuffer, AttrStmt, BufferStore, DeclBuffer, Evaluate, For,
                         IfThenElse, LetStmt, SeqStmt, Stmt, While)
from ....ir.visitor import Mutator, walk
from ..fresh_bindings import fresh_bindings
from ..tir_pass import define_tir_pass

UNROLL_LIMIT = 16  # fewer virtual threads than this, outside any loop: copies, not a loop


def _reads(expr) -> list:
    """The variables (buffers by their data) an expression reads, in order."""
    found = []
    for node in walk(expr):
        if isinstance(node, BufferLoad):
            found.append(node.buffer.data)
        elif isinstance(node, Var):
            found.append(node)
    return found


def touched_vars(body: Stmt, var: Var) -> set:
    """What depends on ``var`` in ``body``: variables, and buffers (by their data) written with
    a value or at an index that does."""
    touched = {var}
    affects: dict = defaultdict(list)

    def record(target, exprs: list) -> None:
        if target in touched:
            return
        reads = [r for e in exprs for r in _reads(e)]
        if any(r in touched for r in reads):
            touched.add(target)
        else:
            for r in reads:
                if r is not target:
                    affects[r].append(target)

    for node in walk(body):
        if isinstance(node, LetStmt):
            record(node.var, [node.value])
        elif isinstance(node, BufferStore):
            record(node.buffer.data, [node.value, *node.indices])
        elif isinstance(node, For):
            record(node.loop_var, [node.min, node.extent])
        elif isinstance(node, AllocBuffer):
            record(node.buffer.data, list(node.buffer.shape))
    pending = list(touched)
    while pending:
        for r in affects[pending.pop()]:
            if r not in touched:
                touched.add(r)
                pending.append(r)
    return touched


class _Injector:
    def __init__(self, var: Var, num_threads: int, touched: set, allow_share: bool) -> None:
        self.var = var
        self.num_threads = num_threads
        self.touched = touched
        self.allow_share = allow_share
        self.injected = False
        self.saw_touched = False
        self.trigger = False  # (a cthread: every store and call is per virtual thread)
        self.loop_depth = 0
        self.strides: dict = {}  # data of an enlarged allocation -> its per-thread extent
        self.buffers: dict = {}  # old buffer -> the enlarged one

    # -- expressions
    def expr(self, e: PrimExpr) -> PrimExpr:
        injector = self

        class _Exprs(Mutator):
            def visit_Var(self, v: Var) -> Var:
                if v in injector.touched:
                    injector.saw_touched = True
                return v

            def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
                return injector.access(self.generic_visit(load))

        return _Exprs().visit(e)

    def access(self, node):
        if node.buffer.data in self.touched:
            self.saw_touched = True
        stride = self.strides.get(node.buffer.data)
        if stride is None:
            return node
        if len(node.indices) != 1:
            raise TVMSError("InjectVirtualThread: expects flattened buffers (run FlattenBuffer first)")
        return node.with_changes(buffer=self._enlarged(node.buffer, stride),
                                 indices=(simplify(node.indices[0] + self.var * stride),))

    def _enlarged(self, buffer: Buffer, stride: PrimExpr) -> Buffer:
        if buffer not in self.buffers:
            self.buffers[buffer] = buffer.with_changes(shape=(buffer.shape[0] * self.num_threads,))
        return self.buffers[buffer]

    # -- statements
    def stmt(self, s: Stmt) -> Stmt:
        result = self._dispatch(s)
        if self.saw_touched or self.trigger:
            if not self.injected:
                return self.inject(result, False)
            self.saw_touched = self.trigger = False
        return result

    def _dispatch(self, s: Stmt) -> Stmt:
        if isinstance(s, Evaluate):
            self.trigger = not self.allow_share
            return s.with_changes(value=self.expr(s.value))
        if isinstance(s, BufferStore):
            value = self.expr(s.value)
            indices = tuple(self.expr(i) for i in s.indices)
            self.trigger = not self.allow_share
            return self.access(s.with_changes(value=value, indices=indices))
        if isinstance(s, SeqStmt):
            seq = []
            for child in s.seq:
                seq.append(self._fresh_depth(child))
            return s.with_changes(seq=tuple(seq))
        if isinstance(s, While):
            raise TVMSError("InjectVirtualThread: a while loop under a virtual thread is not supported")
        if isinstance(s, For):
            extent = self.expr(s.extent)
            if self.saw_touched and not self.injected:
                result = self.inject(s, True)
                self.loop_depth += 1
                return result
            self.saw_touched = False
            body = self.stmt(s.body)
            self.loop_depth += 1
            return s.with_changes(extent=extent, body=body)
        if isinstance(s, IfThenElse):
            condition = self.expr(s.condition)
            if self.saw_touched and not self.injected:
                return self.inject(s, True)
            self.saw_touched = False
            then_case = self.stmt(s.then_case)
            else_case = None
            if s.else_case is not None:
                depth, self.loop_depth = self.loop_depth, 0
                else_case = self.stmt(s.else_case)
                self.loop_depth = max(depth, self.loop_depth)
            return s.with_changes(condition=condition, then_case=then_case, else_case=else_case)
        if isinstance(s, (AttrStmt, LetStmt)):
            value = self.expr(s.value) if isinstance(s.value, PrimExpr) else s.value
            if self.saw_touched and not self.injected:
                return self.inject(s, True)
            self.saw_touched = False
            return s.with_changes(value=value, body=self._fresh_depth(s.body))
        if isinstance(s, AllocBuffer):
            shape = tuple(self.expr(x) for x in s.buffer.shape)
            if self.saw_touched and not self.injected:
                return self.inject(s, True)
            self.saw_touched = False
            buffer = s.buffer
            if buffer.data in self.touched or not self.allow_share:
                if len(shape) != 1:
                    raise TVMSError("InjectVirtualThread: expects flattened allocations (run FlattenBuffer first)")
                self.strides[buffer.data] = shape[0]
                buffer = self._enlarged(buffer, shape[0])
            return s.with_changes(buffer=buffer, body=self._fresh_depth(s.body))
        if isinstance(s, DeclBuffer):
            return s.with_changes(body=self._fresh_depth(s.body))
        return s

    def _fresh_depth(self, s: Stmt) -> Stmt:
        """``s`` visited as the next statement of a sequence (its loops counted on their own)."""
        depth, self.loop_depth = self.loop_depth, 0
        result = self.stmt(s)
        self.loop_depth = max(self.loop_depth, depth)
        return result

    def inject(self, s: Stmt, before_mutation: bool) -> Stmt:
        self.saw_touched = self.trigger = False
        self.injected = True
        if before_mutation:
            s = self.stmt(s)
        self.injected = self.saw_touched = False
        if self.loop_depth == 0 and self.num_threads < UNROLL_LIMIT:
            copies = [substitute(s, {self.var: IntImm(self.var.dtype, i)}) for i in range(self.num_threads)]
            copies = copies[:1] + [fresh_bindings(c) for c in copies[1:]]
            flat = [x for c in copies for x in (c.seq if isinstance(c, SeqStmt) else (c,))]
            return SeqStmt(tuple(flat))
        index = Var(f"{self.var.name}.s", self.var.dtype)
        return For(index, IntImm(self.var.dtype, 0), IntImm(self.var.dtype, self.num_threads), SERIAL,
                   substitute(s, {self.var: index}))


class _VirtualThreads(Mutator):
    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        attr = self.generic_visit(attr)
        if attr.attr_key != "virtual_thread" or not isinstance(attr.node, IterVar):
            return attr
        if not isinstance(attr.value, IntImm):
            raise TVMSError(f"InjectVirtualThread: the extent of {attr.node.thread_tag} must be a constant")
        var = attr.node.var
        injector = _Injector(var, attr.value.value, touched_vars(attr.body, var),
                             allow_share=attr.node.thread_tag.startswith("vthread"))
        return injector.stmt(attr.body)


def inject_virtual_thread(func: PrimFunc) -> PrimFunc:
    """``func`` with its virtual threads turned into copies (or loops) of their work."""
    body = _VirtualThreads().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


InjectVirtualThread = define_tir_pass("InjectVirtualThread", inject_virtual_thread)

__all__ = ["InjectVirtualThread", "inject_virtual_thread", "touched_vars"]
