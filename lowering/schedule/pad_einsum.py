"""pad_einsum: the iterators of an Einsum-like block (every buffer indexed by plain iterators,
each buffer accessed once) are rounded up to multiples of ``padding``; the buffers indexed by a
padded iterator are replaced by padded copies ``A_pad``, filled before the block (zero outside the
original shape) and copied back after it for the buffers the block writes.

As TVM 0.27 does it: the loops bound directly to a padded iterator take the padded extent, and the
copy blocks ``A_pad`` run over loops ``i0, i1`` with iterators ``v0, v1``.
"""
from __future__ import annotations

from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.expr import (DATA_PAR, LT, Add, And, BufferLoad, Call, FloorDiv, IntImm, IterVar, Mul, PrimExpr, Range,
                        Sub, Var, const)
from ...ir.function import PrimFunc
from ...ir.op import get_op
from ...ir.stmt import Block, BlockRealize, BufferStore, For, Stmt, seq
from ...ir.visitor import Mutator
from .cache import _position_of, _scope_children
from .errors import ScheduleError
from .loop_transform import nest
from .tree import replace_stmts


def pad_einsum(func: PrimFunc, realize: BlockRealize, path: tuple, padding: list) -> PrimFunc:
    block = realize.block
    name = block.name_hint
    if (len(padding) != len(block.iter_vars)
            or any(not isinstance(p, int) or isinstance(p, bool) or p <= 0 for p in padding)):
        raise ScheduleError(f"pad_einsum: the padding of block '{name}' must be {len(block.iter_vars)} positive "
                            f"integers, got {list(padding)}")
    _check_einsum(block)
    analyzer = Analyzer()
    padded: dict = {}  # iterator or loop variable -> padded extent
    loops: dict = {}  # loop variable -> padded extent
    for iv, value, pad in zip(block.iter_vars, realize.iter_values, padding):
        dom = iv.dom.extent
        step = const(pad, dom.dtype)
        new = analyzer.simplify(Mul(FloorDiv(Add(dom, const(pad - 1, dom.dtype)), step), step))
        if _same(new, dom, analyzer):
            continue
        padded[iv.var] = new
        if isinstance(value, Var):
            padded[value] = loops[value] = new
    reads, writes, buffers, swaps = [], [], [], {}
    for regions, out in ((block.reads, reads), (block.writes, writes)):
        for region in regions:
            if not any(r.min in padded for r in region.region if isinstance(r.min, Var)):
                continue
            old = region.buffer
            shape = [const(1, r.min.dtype) if isinstance(r.min, IntImm) else padded.get(r.min, size)
                     for r, size in zip(region.region, old.shape)]
            new = decl_buffer(shape, old.dtype, f"{old.name}_pad", scope=old.scope)
            swaps[old] = new
            buffers.append(new)
            out.append(_copy(old, new, out is reads, analyzer))
    scope, children = _scope_children(path)
    at = _position_of(children, realize)
    changed = _Pad(padded, loops, swaps).visit(children[at])
    body = seq(children[:at] + reads + [changed] + writes + children[at + 1:])
    new_scope = scope.with_changes(body=body, alloc_buffers=scope.alloc_buffers + tuple(buffers))
    return replace_stmts(func, {id(scope): new_scope})


def _check_einsum(block: Block) -> None:
    seen: set = set()
    for region in block.reads + block.writes:
        trivial = all(isinstance(r.extent, IntImm) and r.extent.value == 1 and isinstance(r.min, (IntImm, Var))
                      for r in region.region)
        if id(region.buffer) in seen or not trivial:
            raise ScheduleError(f"pad_einsum: block '{block.name_hint}' is not a computation of Einsum "
                                f"pattern (each buffer accessed once, at plain iterators)")
        seen.add(id(region.buffer))


def _copy(old: Buffer, new: Buffer, is_read: bool, analyzer: Analyzer) -> Stmt:
    """``new[v] = T.if_then_else(v < shape, old[v], 0)`` over ``new`` (read), or ``old[v] = new[v]``
    over ``old`` (write)."""
    shape = new.shape if is_read else old.shape
    loop_vars = [Var(f"i{d}", s.dtype) for d, s in enumerate(shape)]
    iters = tuple(IterVar(Range(const(0, s.dtype), s), Var(f"v{d}", s.dtype), DATA_PAR) for d, s in enumerate(shape))
    point = tuple(iv.var for iv in iters)
    region = tuple(Range(v, const(1, v.dtype)) for v in point)
    if is_read:
        bounds = [LT(v, s) for v, s, p in zip(point, old.shape, new.shape)
                  if not _same(p, s, analyzer)]
        guard = bounds[0] if bounds else const(True)
        for b in bounds[1:]:
            guard = And(guard, b)
        value = Call(old.dtype, get_op("tir.if_then_else"), (guard, BufferLoad(old, point), const(0, old.dtype)))
        store, src, dst = BufferStore(new, value, point), old, new
    else:
        store, src, dst = BufferStore(old, BufferLoad(new, point), point), new, old
    block = Block(iters, reads=(BufferRegion(src, region),), writes=(BufferRegion(dst, region),),
                  name_hint=new.name, body=store)
    return nest(loop_vars, list(shape), BlockRealize(tuple(loop_vars), const(True), block))


def _same(a: PrimExpr, b: PrimExpr, analyzer: Analyzer) -> bool:
    diff = analyzer.simplify(Sub(a, b))
    return isinstance(diff, IntImm) and diff.value == 0


class _Pad(Mutator):
    """The statement holding the block with padded loops, iterator domains and buffers."""

    def __init__(self, padded: dict, loops: dict, swaps: dict):
        self.padded, self.loops, self.swaps = padded, loops, swaps

    def visit_For(self, loop: For) -> For:
        loop = self.generic_visit(loop)
        extent = self.loops.get(loop.loop_var)
        return loop if extent is None else loop.with_changes(extent=extent)

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        iters = tuple(iv.with_changes(dom=Range(iv.dom.min, self.padded[iv.var])) if iv.var in self.padded else iv
                      for iv in block.iter_vars)
        return block.with_changes(iter_vars=iters, alloc_buffers=(), match_buffers=())

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.swaps.get(buffer, buffer)

    def visit_Var(self, v: Var) -> Var:
        return v

