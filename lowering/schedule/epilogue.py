"""fuse_reduction_epilogue: a reduction into ``temp`` followed by an epilogue ``D = temp + C``
becomes one reduction into ``D`` whose init is the epilogue on the reduction's identity
(``D = C``) and whose update adds to ``D`` directly.

As TVM 0.27 does it: the epilogue must load ``temp`` once and not scale it (no ``*``, ``/``, ``%``
on it); in a sum around the load, the other operand (the bias) is dropped from the update, since
the init holds it.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion
from ...ir.expr import (COMM_REDUCE, DATA_PAR, Add, BufferLoad, Div, FloatImm, FloorDiv, FloorMod, IntImm, Mod,
                        Mul, PrimExpr, const)
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, seq
from ...ir.visitor import Mutator, walk
from .errors import ScheduleError
from .tree import parent_block, replace_stmts


def fuse_reduction_epilogue(func: PrimFunc, reduction: BlockRealize, epilogue: BlockRealize,
                            path: tuple) -> PrimFunc:
    red, epi = reduction.block, epilogue.block
    name, ename = red.name_hint, epi.name_hint
    scope = parent_block(path)
    if len(red.writes) != 1:
        raise ScheduleError(f"fuse_reduction_epilogue: block '{name}' must write exactly one buffer")
    temp = red.writes[0].buffer
    if red.init is None or not any(iv.iter_type == COMM_REDUCE for iv in red.iter_vars):
        raise ScheduleError(f"fuse_reduction_epilogue: block '{name}' is not a reduction block")
    if not any(b is temp for b in scope.alloc_buffers):
        raise ScheduleError(f"fuse_reduction_epilogue: block '{name}' is an output block: its scope does not "
                            f"allocate buffer '{temp.name}'")
    if any(iv.iter_type != DATA_PAR for iv in epi.iter_vars):
        raise ScheduleError(f"fuse_reduction_epilogue: block '{ename}' is not a complete block")

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(f"fuse_reduction_epilogue: the body of block '{ename}' cannot be fused: {why}")
    if not (isinstance(epilogue.predicate, IntImm) and epilogue.predicate.value):
        raise refuse("it has a predicate")
    store = epi.body
    if not isinstance(store, BufferStore):
        raise refuse("it must be one store")
    loads = [n for e in (*store.indices, store.value) for n in walk(e)
             if isinstance(n, BufferLoad) and n.buffer is temp]
    if len(loads) != 1:
        raise refuse(f"it must load '{temp.name}' exactly once, it loads it {len(loads)} times")
    if _scales(store.value, temp):
        raise refuse(f"it scales '{temp.name}' (by *, / or %)")
    out = store.buffer
    red_vars = [iv.var for iv in red.iter_vars if iv.iter_type == DATA_PAR]
    epi_vars = [iv.var for iv in epi.iter_vars if iv.iter_type == DATA_PAR]
    if len(red_vars) != len(epi_vars):
        raise ScheduleError(f"fuse_reduction_epilogue: blocks '{name}' and '{ename}' have different numbers of "
                            f"data-parallel iterators")
    var_map = dict(zip(epi_vars, red_vars))
    analyzer = Analyzer()
    identity = const(0, out.dtype)
    init_value = _fold_zero(analyzer.simplify(substitute(_LoadsTo(temp, lambda load: identity).visit(store.value),
                                                         var_map)))
    init = BufferStore(out, init_value, tuple(substitute(i, var_map) for i in store.indices))
    body = _Update(temp, out, store.value, var_map).visit(red.body)
    writes = tuple(BufferRegion(out, tuple(substitute(r, var_map) for r in w.region)) if w.buffer is temp else w
                   for w in red.writes)
    reads = [BufferRegion(r.buffer, tuple(substitute(x, var_map) for x in r.region)) for r in epi.reads
             if r.buffer is not temp]
    reads += [r for r in red.reads if r.buffer is not temp and not any(x.buffer is r.buffer for x in reads)]
    fused = red.with_changes(init=init, body=body, writes=writes, reads=tuple(reads))
    # (TVM 0.27 keeps ``temp`` allocated, used or not)
    return replace_stmts(func, {id(scope): _Remove(reduction.block, fused, epilogue.block).visit(scope)})


def _scales(e: PrimExpr, temp: Buffer) -> bool:
    """Whether ``temp`` is loaded under a ``*``, ``/`` or ``%``."""
    for n in walk(e):
        if isinstance(n, (Mul, Div, Mod, FloorDiv, FloorMod)) and any(
                isinstance(x, BufferLoad) and x.buffer is temp for x in walk(n)):
            return True
    return False


def _fold_zero(e: PrimExpr) -> PrimExpr:
    """``0 + x`` and ``x + 0`` as ``x`` (TVM's simplifier does so for floats too)."""
    if isinstance(e, Add):
        a, b = _fold_zero(e.a), _fold_zero(e.b)
        if isinstance(a, (IntImm, FloatImm)) and a.value == 0:
            return b
        if isinstance(b, (IntImm, FloatImm)) and b.value == 0:
            return a
        return e if a is e.a and b is e.b else Add(a, b)
    return e


class _LoadsTo(Mutator):
    """Loads of ``buffer`` replaced by ``make(load)``."""

    def __init__(self, buffer: Buffer, make: Any):
        self.buffer, self.make = buffer, make

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        e = self.generic_visit(e)
        return self.make(e) if e.buffer is self.buffer else e


class _Apply(Mutator):
    """The epilogue with the load of ``temp`` replaced by the reduction's update; in a sum around
    that load, the other operand is dropped (TVM's GeneralizedEpilogueApplier, flag for flag)."""

    def __init__(self, temp: Buffer, update: PrimExpr):
        self.temp, self.update, self.found = temp, update, False

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        e = self.generic_visit(e)
        if e.buffer is self.temp:
            self.found = True
            return self.update
        return e

    def visit_Add(self, e: Add) -> Any:
        before, self.found = self.found, False
        a = self.visit(e.a)
        in_a, self.found = self.found, False
        b = self.visit(e.b)
        in_b = self.found
        if in_a or in_b:
            other = b if in_a else a
            if not (isinstance(other, BufferLoad) and other.buffer is self.temp):
                return a if in_a else b
            return Add(a, b)
        self.found = before
        return Add(a, b)


class _Update(Mutator):
    """The reduction's body writing ``out``: each store to ``temp`` stores the epilogue applied to
    its update."""

    def __init__(self, temp: Buffer, out: Buffer, epilogue: PrimExpr, var_map: dict):
        self.temp, self.out, self.epilogue, self.var_map = temp, out, epilogue, var_map

    def visit_BufferStore(self, s: BufferStore) -> Any:
        s = self.generic_visit(s)
        if s.buffer is not self.temp:
            return s
        update = _LoadsTo(self.temp, lambda load: BufferLoad(self.out, load.indices)).visit(s.value)
        value = substitute(_Apply(self.temp, update).visit(self.epilogue), self.var_map)
        return BufferStore(self.out, value, s.indices)

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        e = self.generic_visit(e)
        return BufferLoad(self.out, e.indices) if e.buffer is self.temp else e


class _Remove(Mutator):
    """The scope with the reduction block swapped for the fused one and the epilogue block, and
    the loops left empty by it, removed."""

    def __init__(self, old: Block, new: Block, gone: Block):
        self.old, self.new, self.gone = old, new, gone

    def visit_BlockRealize(self, r: BlockRealize) -> Any:
        if r.block is self.old:
            return r.with_changes(block=self.new)
        if r.block is self.gone:
            return None
        return self.generic_visit(r)

    def visit_For(self, loop: For) -> Any:
        body = self.visit(loop.body)
        return None if body is None else loop if body is loop.body else loop.with_changes(body=body)

    def visit_SeqStmt(self, s: SeqStmt) -> Any:
        kept = [x for x in (self.visit(c) for c in s.seq) if x is not None]
        return seq(kept) if kept else None

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e
