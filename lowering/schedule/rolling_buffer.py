"""rolling_buffer: a producer computed per tile of its consumer (after compute_at) keeps only
one tile's window of the buffer it writes, indexed modulo the window along the rolling axis;
tiles after the first skip the elements the previous tile already computed.

As TVM 0.27 does it: the region the block writes per iteration of the loop around it and its
consumers is found by relaxing the loops below that loop; the rolling axis is the first of the
block's loops (outermost first) that some dimension's start ``v * stride`` or ``v * stride // d``
strides by, with tiles overlapping (window wider than the stride). Every block of the scope makes
its iterator at the rolling axis's position opaque, as TVM's rewriter does.
"""
from __future__ import annotations

from math import ceil
from typing import Any

from ...ir.analysis import infer_block_regions, substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer
from ...ir.expr import (LE, LT, OPAQUE, Add, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, Or, PrimExpr, Range, Sub,
                        Var, const)
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt
from ...ir.visitor import Mutator
from .cache import _buffer
from .compute_at import _symbolic_bounds
from .errors import ScheduleError
from .padding import simplify_condition
from .loop_transform import conjuncts
from .tree import blocks_under, enclosing_loops, find_block, parent_block, replace_stmts


def rolling_buffer(func: PrimFunc, realize: BlockRealize, path: tuple, index: int) -> PrimFunc:
    block = realize.block
    name = block.name_hint
    buffer = _buffer(block, block.writes, index, "write")
    scope = parent_block(path)
    if scope is None or not any(b is buffer for b in scope.alloc_buffers):
        raise ScheduleError(f"rolling_buffer: block '{name}' is an output block: its scope does not allocate "
                            f"buffer '{buffer.name}'")
    in_scope = blocks_under(scope.body)
    if any(r is not realize and any(w.buffer is buffer for w in r.block.writes) for r in in_scope):
        raise ScheduleError(f"rolling_buffer: block '{name}' is required to have only RAW dependencies: "
                            f"another block writes buffer '{buffer.name}'")
    consumers = [r for r in in_scope if any(x.buffer is buffer for x in r.block.reads)]
    lca = _common_loop(func, [realize] + consumers)
    if lca is None:
        raise ScheduleError(f"rolling_buffer: the lowest common ancestor of block '{name}' and its consumers "
                            f"is not a loop; tile them so that it is")
    loops = enclosing_loops(path)
    inner = loops[next(i for i, lp in enumerate(loops) if lp is lca) + 1:]
    relaxed = {id(lp.loop_var): (lp.loop_var, lp.min.value, lp.extent.value) for lp in inner
               if isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)}
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    region = []
    for r, size in zip(next(w for w in block.writes if w.buffer is buffer).region, buffer.shape):
        bounds = _symbolic_bounds(substitute(r.min, bindings), relaxed)
        top = _symbolic_bounds(substitute(Sub(Add(r.min, r.extent), const(1, r.min.dtype)), bindings), relaxed)
        if bounds is None or top is None:
            region.append(Range(const(0, size.dtype), size))  # (covers the whole dimension)
        else:
            region.append(Range(bounds[0], Analyzer().simplify(Add(Sub(top[1], bounds[0]), const(1, size.dtype)))))
    axis_vars, overlaps = _rolling_pattern(region)
    axis = next((axis_vars.index(lp.loop_var) for lp in loops if lp.loop_var in axis_vars), None)
    if axis is None:
        raise ScheduleError(f"rolling_buffer: the region {_text(buffer, region)} that block '{name}' writes "
                            f"per iteration of loop '{lca.loop_var.name}' has no dimension matching a rolling "
                            f"pattern such as hh.outer * stride + hh.inner")
    extent = region[axis].extent
    new = buffer.with_changes(shape=tuple(extent if d == axis else s for d, s in enumerate(buffer.shape)))
    rewriter = _Roll(buffer, new, axis, extent, axis_vars, overlaps, scope)
    return replace_stmts(func, {id(scope): rewriter.visit(scope)})


def _text(buffer: Buffer, region: list) -> str:
    ends = [Analyzer().simplify(Add(r.min, r.extent)).script() for r in region]
    return f"{buffer.name}[" + ", ".join(f"{r.min.script()}:{end}" for r, end in zip(region, ends)) + "]"


def _common_loop(func: PrimFunc, realizes: list) -> For | None:
    """The innermost statement enclosing all of ``realizes`` when it is a loop."""
    paths = [find_block(func, r.block.name_hint)[1] for r in realizes]
    common = None
    for nodes in zip(*paths):
        if any(n is not nodes[0] for n in nodes):
            break
        if not isinstance(nodes[0], SeqStmt):  # (not a place of its own in TVM's tree)
            common = nodes[0]
    return common if isinstance(common, For) else None


def _rolling_pattern(region: list) -> tuple[list, list]:
    """Per dimension, the loop variable its start strides by (None: no overlap) and the overlap."""
    axis_vars, overlaps = [], []
    for r in region:
        var, stride = _stride(r.min)
        overlap = 0
        if var is not None:
            if not isinstance(r.extent, IntImm):
                var = None
            else:
                overlap = r.extent.value - stride
                var = var if overlap > 0 else None
        axis_vars.append(var)
        overlaps.append(overlap)
    return axis_vars, overlaps


def _stride(e: PrimExpr) -> tuple[Var | None, int]:
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and isinstance(e.a, Mul) and \
            isinstance(e.a.a, Var) and isinstance(e.a.b, IntImm):
        return e.a.a, ceil(e.a.b.value / e.b.value)
    if isinstance(e, Mul) and isinstance(e.a, Var) and isinstance(e.b, IntImm):
        return e.a, e.b.value
    if isinstance(e, Var):
        return e, 1
    if isinstance(e, IntImm):
        return None, 0
    raise ScheduleError(f"rolling_buffer: the region start {e.script()} matches no rolling pattern such as "
                        f"hh.outer * stride + hh.inner")


class _Roll(Mutator):
    def __init__(self, old: Buffer, new: Buffer, axis: int, extent: PrimExpr, axis_vars: list, overlaps: list,
                 scope: Block):
        self.old, self.new, self.axis, self.extent = old, new, axis, extent
        self.axis_vars, self.overlaps, self.scope = axis_vars, overlaps, scope
        self.stored = False  # a store to the buffer was just rewritten: its realize gets the guard

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return self.new if b is self.old else b

    def visit_Var(self, v: Var) -> Var:
        return v

    def _indices(self, indices: tuple) -> tuple:
        return tuple(FloorMod(i, self.extent) if d == self.axis else i for d, i in enumerate(indices))

    def visit_BufferStore(self, s: BufferStore) -> Any:
        out = self.generic_visit(s)
        if s.buffer is self.old:
            self.stored = True
            return out.with_changes(indices=self._indices(out.indices))
        return out

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        out = self.generic_visit(e)
        return out.with_changes(indices=self._indices(out.indices)) if e.buffer is self.old else out

    def visit_Block(self, block: Block) -> Block:
        out = self.generic_visit(block)
        if block is self.scope:
            return out
        iters = tuple(iv.with_changes(iter_type=OPAQUE) if d == self.axis else iv
                      for d, iv in enumerate(out.iter_vars))
        reads, writes = infer_block_regions(out)

        def regions(rs: tuple, inferred: tuple) -> tuple:
            found = [x for x in inferred if x.buffer is self.new]
            return tuple(found[0] if r.buffer is self.new and found else r for r in rs)
        return out.with_changes(iter_vars=iters, reads=regions(out.reads, reads), writes=regions(out.writes, writes))

    def visit_BlockRealize(self, r: BlockRealize) -> Any:
        out = self.generic_visit(r)
        if not self.stored:
            return out
        self.stored = False
        parts = conjuncts(out.predicate)
        for d, (var, overlap) in enumerate(zip(self.axis_vars, self.overlaps)):
            if var is None or overlap <= 0 or d >= len(r.iter_values):
                continue
            first = Analyzer().simplify(substitute(r.iter_values[d], {var: const(0, var.dtype)}))
            parts.append(Or(LT(var, const(1, var.dtype)), LE(const(overlap, first.dtype), first)))
        return out.with_changes(predicate=simplify_condition(parts, Analyzer()))
