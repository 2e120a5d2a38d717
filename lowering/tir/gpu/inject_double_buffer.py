"""InjectDoubleBuffer: a buffer filled in ``T.attr(B.data, "double_buffer_scope", 1)`` inside a
loop gets two halves, as TVM 0.27's pass does, so that iteration ``i`` fills the half ``(i + 1) % 2``
for the next iteration while it reads the half ``i % 2`` filled by the previous one.

The loop ``for i in range(n)`` becomes: the fill for ``i = 0`` (a prologue), then ``for i_outer in
range((n - 1) // s)`` whose body is ``s`` copies (``s`` is the PassContext option
``s_tir.InjectDoubleBuffer`` ``{"split_loop": s}``, 1 by default) of the loop's body with the fill
guarded by ``i + 1 < n`` and marked ``double_buffer_write``, then the last iterations, each
guarded by ``i < n``, without the mark (``s`` of 0: the loop stays whole, its fill guarded).
The buffer (flat: FlattenBuffer has run) is allocated twice as large around all of it. A buffer
whose data pointer is used other than by loads and stores is left alone.
"""
from __future__ import annotations

from typing import Any

from ....ir.analysis import substitute
from ....ir.arith.operators import binary
from ....ir.errors import TVMSError
from ....ir.expr import LT, Add, BufferLoad, Div, FloorMod, IntImm, Mul, PrimExpr, Sub, Var, const
from ....ir.function import PrimFunc
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, For, IfThenElse, Stmt, seq
from ....ir.visitor import Mutator, Visitor
from ...transform import PassContext
from ..fresh_bindings import fresh_bindings
from ..tir_pass import define_tir_pass

SCOPE, WRITE = "double_buffer_scope", "double_buffer_write"
CONFIG = "s_tir.InjectDoubleBuffer"


class _Detector(Visitor):
    """The buffers marked ``double_buffer_scope`` whose data is used only through loads and stores."""

    def __init__(self) -> None:
        self.marked: set = set()

    def visit_AttrStmt(self, attr: AttrStmt) -> None:
        if attr.attr_key == SCOPE and isinstance(attr.node, Var):
            self.marked.add(attr.node)
            self.visit(attr.value)
            self.visit(attr.body)
        else:
            self.generic_visit(attr)

    def visit_Buffer(self, buffer) -> None:
        return None  # (a load or store names its buffer, not a use of the pointer)

    def visit_Var(self, var: Var) -> None:
        self.marked.discard(var)


class _Entry:
    def __init__(self) -> None:
        self.stride: PrimExpr | None = None
        self.loop: For | None = None
        self.write: Var | None = None  # (stands for the half written, replaced in each copy)
        self.read: PrimExpr | None = None
        self.doubled = None  # the buffer twice as large


class _Injector(Mutator):
    def __init__(self, marked: set, split: int) -> None:
        self.entries = {data: _Entry() for data in marked}
        self.split = split
        self.loops: list = []
        self.before: dict = {}  # id(loop) -> the prologue statements
        self.allocs: dict = {}  # id(loop) -> the doubled buffers allocated around it
        self.pending: list = []  # the doubled buffers' entries whose allocation waits for their loop
        self.in_scope = False

    def doubled(self, buffer, entry: _Entry):
        if entry.doubled is None:
            if len(buffer.shape) != 1:
                raise TVMSError(f"InjectDoubleBuffer expects flat 1-d buffers ({buffer.name!r} has shape "
                                f"{len(buffer.shape)}-d): has FlattenBuffer been run?")
            entry.doubled = buffer.with_changes(shape=(binary(Add, buffer.shape[0], entry.stride),))
        return entry.doubled

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key == SCOPE and attr.node in self.entries:
            return self.produce(attr)
        return self.generic_visit(attr)

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        entry = self.entries.get(alloc.buffer.data)
        if entry is None:
            return self.generic_visit(alloc)
        if len(alloc.buffer.shape) != 1:
            raise TVMSError(f"InjectDoubleBuffer expects flat 1-d buffers ({alloc.buffer.name!r}): has FlattenBuffer "
                            "been run?")
        entry.stride = alloc.buffer.shape[0]
        self.pending.append((entry, alloc))
        return self.visit(alloc.body)  # (allocated again, doubled, around its loop)

    def visit_For(self, loop: For) -> Stmt:
        self.loops.append(loop)
        stmt = self.generic_visit(loop)
        for entry, alloc in list(self.pending):
            if entry.loop is not None:
                self.allocs.setdefault(id(entry.loop), []).append((entry, alloc))
                self.pending.remove((entry, alloc))
        if id(loop) in self.before:
            stmt = seq(self.before[id(loop)] + [self.split_loop(stmt) if self.split else stmt])
        for entry, alloc in reversed(self.allocs.get(id(loop), [])):
            stmt = AllocBuffer(self.doubled(alloc.buffer, entry), stmt, alloc.annotations)
        self.loops.pop()
        return stmt

    def split_loop(self, loop: For) -> Stmt:
        """The loop's remaining iterations in steps of ``split``, then the last ones, guarded."""
        if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
            raise TVMSError("InjectDoubleBuffer: the loop around a double buffer must start at 0")
        dtype = loop.loop_var.dtype
        factor = const(self.split, dtype)
        outer_extent = binary(Div, binary(Sub, loop.extent, const(1, dtype)), factor)
        tail = binary(Mul, outer_extent, factor)
        outer = Var(f"{loop.loop_var.name}.outer", dtype)
        copies = [substitute(loop.body, {loop.loop_var: binary(Add, binary(Mul, outer, factor), const(k, dtype))})
                  for k in range(self.split)]
        body = seq(copies[:1] + [fresh_bindings(c) for c in copies[1:]])
        last = _StripWrite().visit(loop.body)
        tails = []
        for k in range(self.split):
            index = binary(Add, tail, const(k, dtype))
            tails.append(IfThenElse(binary(LT, index, loop.extent), fresh_bindings(substitute(last, {loop.loop_var: index}))))
        return seq([For(outer, loop.min, outer_extent, loop.kind, body), *tails])

    def produce(self, attr: AttrStmt) -> Stmt:
        """The fill of the next iteration's half, guarded; the first fill goes before the loop."""
        if not self.loops:
            raise TVMSError("InjectDoubleBuffer: a double buffer scope must be inside a loop")
        entry = self.entries[attr.node]
        loop = self.loops[-1]
        entry.loop = loop
        var, dtype = loop.loop_var, loop.loop_var.dtype
        shifted = binary(Add, var, const(1, dtype))
        entry.write = Var(f"{var.name}.db", dtype)
        entry.read = binary(FloorMod, var, const(2, dtype))
        self.in_scope = True
        body = self.visit(attr.body)
        self.in_scope = False
        zero = const(0, dtype)
        self.before.setdefault(id(loop), []).append(substitute(body, {entry.write: zero, var: zero}))
        body = substitute(body, {var: shifted, entry.write: binary(FloorMod, shifted, const(2, dtype))})
        doubled = entry.doubled if entry.doubled is not None else self.doubled_of(attr.node, entry)
        return IfThenElse(binary(LT, shifted, loop.extent), AttrStmt(doubled.data, WRITE, const(1), body))

    def doubled_of(self, data: Var, entry: _Entry):
        for pending, alloc in self.pending:
            if pending is entry:
                return self.doubled(alloc.buffer, entry)
        raise TVMSError(f"InjectDoubleBuffer: no allocation of {data.name!r} around its double buffer scope")

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        entry = self.entries.get(store.buffer.data)
        if entry is None or entry.write is None:
            return store
        if not self.in_scope:
            raise TVMSError(f"InjectDoubleBuffer: buffer {store.buffer.name!r} is written outside its double buffer scope")
        return store.with_changes(buffer=self.doubled(store.buffer, entry),
                                  indices=(binary(Add, binary(Mul, entry.write, entry.stride), store.indices[0]),))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        entry = self.entries.get(load.buffer.data)
        if entry is None or entry.read is None:
            return load
        return load.with_changes(buffer=self.doubled(load.buffer, entry),
                                 indices=(binary(Add, binary(Mul, entry.read, entry.stride), load.indices[0]),))


class _StripWrite(Mutator):
    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        return self.visit(attr.body) if attr.attr_key == WRITE else self.generic_visit(attr)


def inject_double_buffer(func: PrimFunc) -> PrimFunc:
    """``func`` with its marked buffers double-buffered (see the module)."""
    detector = _Detector()
    detector.visit(func.body)
    if not detector.marked:
        return func
    split = split_loop_of(PassContext.current().config.get(CONFIG) or {})
    body = _Injector(detector.marked, split).visit(func.body)
    return func.with_changes(body=body)


def split_loop_of(options: Any) -> int:
    """The ``split_loop`` a ``{"s_tir.InjectDoubleBuffer": {...}}`` pass-context entry asks for:
    0 (the loop is not split), 1 (TVM's default) or a positive even number."""
    if not isinstance(options, dict):
        raise TVMSError(f"{CONFIG}: expected an object of options, got {type(options).__name__}")
    unknown = sorted(set(options) - {"split_loop"})
    if unknown:
        raise TVMSError(f"{CONFIG}: unknown option(s) {unknown}; known: ['split_loop']")
    split = options.get("split_loop", 1)
    if not isinstance(split, int) or isinstance(split, bool) or split < 0 or split > 1 and split % 2:
        raise TVMSError(f"{CONFIG}: split_loop takes 0 (no split), 1 or a positive even number, not {split!r}")
    return split


InjectDoubleBuffer = define_tir_pass("InjectDoubleBuffer", inject_double_buffer)

__all__ = ["InjectDoubleBuffer", "inject_double_buffer", "split_loop_of"]
