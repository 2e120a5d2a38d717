"""loop_partition: a loop ``[0, 128)`` becomes consecutive loops ``[0, 2)``, ``[2, 3)``, ...
each in a block of its own (``B_i0_partition``, ...) under one block ``B_i_common``.

As TVM 0.27 does it: each partition is a copy of the loop's body with fresh loops and block
iterators. The block bound directly to the partitioned loop gets that iterator's domain cut to
the partition and is renamed ``B_i0``; its read and write regions of buffers indexed by plain
variables become the iterators' domains (TVM's rule, kept for identical output). Other blocks in
the copy are only renamed.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.buffer import BufferRegion
from ...ir.dtype import DataType
from ...ir.expr import BufferLoad, IntImm, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, For, seq
from ...ir.visitor import Mutator, Visitor
from .errors import ScheduleError
from .tree import replace_stmts


def resolve_bounds(loop: For, factors: list) -> list[int]:
    """The partitions' upper bounds from the sizes ``factors`` (one may be None: the rest of
    the loop); a part of the loop left after the given sizes is one more partition."""
    name = loop.loop_var.name
    if not (isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)):
        raise ScheduleError(f"loop_partition: the min and extent of loop '{name}' must be known at compile "
                            f"time, it is [{loop.min}, {loop.min} + {loop.extent})")
    if loop.min.value != 0:  # (TVM's partitions then overlap or run backwards)
        raise ScheduleError(f"loop_partition: loop '{name}' must start at 0, it starts at {loop.min}")
    if not factors:
        raise ScheduleError(f"loop_partition: no factors given for loop '{name}'")
    holes = [i for i, f in enumerate(factors) if f is None]
    if len(holes) > 1:
        raise ScheduleError(f"loop_partition: only one factor of loop '{name}' can be None, got {factors}")
    for i, f in enumerate(factors):
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f <= 0):
            raise ScheduleError(f"loop_partition: factor {i} of loop '{name}' must be a positive integer, "
                                f"got {f!r}")
    extent = loop.extent.value
    total = sum(f for f in factors if f is not None)
    if total >= extent:
        raise ScheduleError(f"loop_partition: the sum of factors {factors} is larger than or equal to the "
                            f"extent {extent} of loop '{name}'")
    sizes = [extent - total if f is None else f for f in factors] + ([] if holes else [extent - total])
    return [sum(sizes[:i + 1]) for i in range(len(sizes))]


def loop_partition(func: PrimFunc, loop: For, factors: list) -> tuple[PrimFunc, list[Var]]:
    name = loop.loop_var.name
    if loop.annotations or loop.thread_binding is not None:
        raise ScheduleError(f"loop_partition: loop '{name}' has an annotation or a thread binding")
    bounds = resolve_bounds(loop, factors)
    block_name = f"{_first_block_name(loop.body, name)}_{name}"
    dtype = loop.loop_var.dtype if loop.loop_var.dtype.bits >= 32 else DataType("int32")
    partitions, new_vars, low = [], [], 0
    for i, high in enumerate(bounds):
        var = Var(f"{name}{i}", dtype)
        body = _Partition(var, low, high).visit(substitute(loop.body, {loop.loop_var: var}))
        new_loop = For(var, const(low, dtype), const(high - low, dtype), SERIAL, body)
        partitions.append(_opaque(f"{block_name}{i}_partition", new_loop))
        new_vars.append(var)
        low = high
    common = _opaque(f"{block_name}_common", seq(partitions))
    return replace_stmts(func, {id(loop): common}), new_vars


def _opaque(name: str, body: Any) -> BlockRealize:
    return BlockRealize((), const(True), Block((), name_hint=name, body=body))


def _first_block_name(stmt: Any, loop_name: str) -> str:
    while isinstance(stmt, For):
        stmt = stmt.body
    if not isinstance(stmt, BlockRealize):
        raise ScheduleError(f"loop_partition: loop '{loop_name}' must hold a nest of loops around one block")
    return stmt.block.name_hint


class _Partition(Mutator):
    """Gives a copy of the loop's body fresh loops and iterators, renames its blocks and cuts
    the domain of the iterator bound to the partition's loop variable."""

    def __init__(self, var: Var, low: int, high: int):
        self.var, self.low, self.high = var, low, high
        self.bound_index = -1  # the iterator of the realize just entered bound to ``var`` (TVM's walk)

    def visit_For(self, loop: For) -> For:
        loop = self.generic_visit(loop)
        return substitute(loop, {loop.loop_var: Var(loop.loop_var.name, loop.loop_var.dtype)})

    def visit_BlockRealize(self, realize: BlockRealize) -> BlockRealize:
        self.bound_index = next((i for i, v in enumerate(realize.iter_values) if v is self.var), -1)
        return self.generic_visit(realize)

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        renamed = f"{block.name_hint}_{self.var.name}"
        index, self.bound_index = self.bound_index, -1
        if not block.iter_vars or index < 0:
            return block.with_changes(name_hint=renamed)
        cut = block.iter_vars[index]
        dtype = cut.var.dtype
        iters = tuple(iv.with_changes(dom=Range(const(self.low, dtype), const(self.high - self.low, dtype)))
                      if iv is cut else iv for iv in block.iter_vars)
        doms = {iv.var.name: iv.dom for iv in iters}
        indices = _plain_indices(block.body)
        try:
            writes = tuple(_region(r, indices, doms) for r in block.writes)
            reads = tuple(_region(r, indices, doms) for r in block.reads)
        except KeyError as e:
            raise ScheduleError(f"loop_partition: block '{block.name_hint}' indexes a buffer with {e}, which is "
                                f"not one of its iterators") from None
        block = block.with_changes(iter_vars=iters, name_hint=renamed, reads=reads, writes=writes)
        return substitute(block, {iv.var: Var(iv.var.name, iv.var.dtype) for iv in iters})


def _plain_indices(body: Any) -> dict:
    """Buffer name -> the names of the variables indexing its first access that uses only plain
    variables (stores before their values, in program order)."""
    found: dict = {}

    class Walk(Visitor):
        def visit_BufferStore(self, node: BufferStore) -> None:
            self.note(node)
            self.generic_visit(node)

        def visit_BufferLoad(self, node: BufferLoad) -> None:
            self.note(node)
            self.generic_visit(node)

        def note(self, node: Any) -> None:
            if all(isinstance(i, Var) for i in node.indices):
                found.setdefault(node.buffer.name, [i.name for i in node.indices])

    Walk().visit(body)
    return found


def _region(region: BufferRegion, indices: dict, doms: dict) -> BufferRegion:
    names = indices.get(region.buffer.name)
    if names is None:
        return region
    return BufferRegion(region.buffer, tuple(doms[n] for n in names))
