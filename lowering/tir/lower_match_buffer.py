"""LowerMatchBuffer: accesses through a ``T.match_buffer`` view go to the buffer it matches.

``Asub = T.match_buffer(A[io * 4:io * 4 + 4, jo * 4:jo * 4 + 4], (4, 4))`` makes ``Asub[ii, jj]``
read ``A[io * 4 + ii, jo * 4 + jj]``. A view of lower rank matches the source's trailing
dimensions; the leading ones must have extent 1 and are pinned to their region's start. The
view's own variables that the body uses as values (opaque accesses such as
``T.tvm_access_ptr(..., Asub.data, Asub.elem_offset, Asub.strides[0] * 4, 1)``) become the
source's: its data pointer, the region's element offset and the source's strides. Views whose
sizes are used as values are not supported.
"""
from __future__ import annotations

import dataclasses

from ...ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from ...ir.errors import TVMSError
from ...ir import arith
from ...ir.expr import Add, BufferLoad, IntImm, Mul, PrimExpr, Range, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BufferStore
from ...ir.visitor import Mutator, Visitor
from .tir_pass import define_tir_pass


def _source_indices(match: MatchBufferRegion, indices: tuple) -> tuple:
    region = match.source.region
    lead = len(region) - len(indices)
    if lead < 0:
        raise TVMSError(f"LowerMatchBuffer: {match.buffer.name} has more dimensions than its source region")
    for r in region[:lead]:
        if not (isinstance(r.extent, IntImm) and r.extent.value == 1):
            raise TVMSError(f"LowerMatchBuffer: {match.buffer.name} drops a dimension of extent "
                            f"other than 1 of {match.source.buffer.name}")
    return tuple(r.min for r in region[:lead]) + tuple(
        r.min if is_const_int(i, 0) else Add(r.min, i) for r, i in zip(region[lead:], indices))


def _field_values(match: MatchBufferRegion) -> dict:
    """The view's data, offset and stride variables -> their values in the source."""
    view, region, source = match.buffer, match.source.region, match.source.buffer
    strides = list(source.strides)
    if not strides:  # compact: row-major over the source's shape
        step = const(1, source.index_dtype)
        for extent in reversed(source.shape):
            strides.insert(0, step)
            step = arith.binary(Mul, step, extent)
    offset = source.offset
    for r, stride in zip(region, strides):
        offset = arith.binary(Add, offset, arith.binary(Mul, r.min, stride))
    values = {view.data: source.data}
    if isinstance(view.elem_offset, Var):
        values[view.elem_offset] = arith.simplify(offset)
    trailing = strides[len(strides) - len(view.shape):] if view.shape else []
    values.update((declared, actual) for declared, actual in zip(view.strides, trailing)
                  if isinstance(declared, Var))
    return values


class _ValueVars(Visitor):
    """The variables used as values: not those inside the buffers that accesses name."""

    def __init__(self) -> None:
        self.found: list = []

    def visit_Var(self, v: Var) -> None:
        self.found.append(v)

    def visit_Buffer(self, b: Buffer) -> None:
        pass


def _value_vars(stmt: object) -> list:
    finder = _ValueVars()
    finder.visit(stmt)
    return finder.found



class _MatchLowerer(Mutator):
    def __init__(self) -> None:
        self.matches: dict = {}  # view Buffer -> MatchBufferRegion
        self.values: dict = {}  # a view's data/offset/stride Var -> its value in the source

    def visit_Block(self, block: Block) -> Block:
        for m in block.match_buffers:
            m = self.generic_visit(m)  # the source region may itself go through a view
            self._check_sizes_unused(m.buffer, block)
            self.matches[m.buffer] = m
            self.values.update(_field_values(m))
        return self.generic_visit(dataclasses.replace(block, match_buffers=()))

    def _check_sizes_unused(self, view: Buffer, block: Block) -> None:
        sizes = {id(e) for e in view.shape if isinstance(e, Var)}
        if any(id(v) in sizes for v in _value_vars(block.body)):
            raise TVMSError(f"LowerMatchBuffer: the body uses a size of {view.name} as a value; "
                            f"only its data, offset and strides can be lowered")

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.values.get(v, v)

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return b  # (a view's accesses go to its source; the others keep their buffers)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        load = self.generic_visit(load)
        m = self.matches.get(load.buffer)
        if m is None:
            return load
        return BufferLoad(m.source.buffer, _source_indices(m, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        store = self.generic_visit(store)
        m = self.matches.get(store.buffer)
        if m is None:
            return store
        return BufferStore(m.source.buffer, store.value, _source_indices(m, store.indices))

    def visit_BufferRegion(self, br: BufferRegion) -> BufferRegion:
        br = self.generic_visit(br)
        m = self.matches.get(br.buffer)
        if m is None:
            return br
        starts = _source_indices(m, tuple(r.min for r in br.region))
        extents = [const(1, "int32")] * (len(starts) - len(br.region)) + [r.extent for r in br.region]
        return BufferRegion(m.source.buffer, tuple(Range(s, e) for s, e in zip(starts, extents)))


def lower_match_buffer(func: PrimFunc) -> PrimFunc:
    """``func`` with no ``match_buffer`` inside blocks."""
    return func.with_changes(body=_MatchLowerer().visit(func.body))


LowerMatchBuffer = define_tir_pass("LowerMatchBuffer", lower_match_buffer)

__all__ = ["LowerMatchBuffer", "lower_match_buffer"]
