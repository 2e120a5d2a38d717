"""LowerCrossThreadReduction: a reduction whose loops are bound to ``threadIdx`` becomes an allreduce.

As TVM 0.27 does it, for a reduction block (with ``T.init()``, reduction iterators) under a
reduction loop bound to a thread index, the outermost reduction loop is replaced by:

* when some reduction loop is serial (or the block has a predicate), ``<block>_in_thread_init``
  and ``<block>_in_thread``: each thread reduces its share into a local ``in_thread_<buf>``;
* ``<block>_cross_thread``: ``T.tvm_thread_allreduce`` under ``T.attr(comm_reducer,
  "reduce_scope", 0)`` combines the threads' values into a local ``cross_thread_<buf>``;
* ``<block>_write_back``: one thread (``T.where(tx == 0)``) stores the result;

all under the thread-bound reduction loops. The reducer (sum, product, min, max) is read from
the block's update. Not done (TVMSError or left as is): reductions of several buffers at once
(argmax), and TVM's broadcast of the result to later blocks outside the thread loops.
"""
from __future__ import annotations

from ....ir.analysis import substitute
from ....ir.buffer import Buffer, BufferRegion, decl_buffer
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import (COMM_REDUCE, DATA_PAR, Add, And, BufferLoad, Call, CommReducer, IntImm, IterVar, Max,
                         Min, Mul, PrimExpr, Range, Var, const, is_const_int)
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.operators import BY_SYMBOL
from ....ir.stmt import AttrStmt, Block, BlockRealize, BufferStore, Evaluate, For, SeqStmt, Stmt
from ....ir.structural import structural_equal
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass

COMBINERS = (Add, Mul, Min, Max)


def _reducer(block: Block) -> tuple[CommReducer, PrimExpr, BufferStore]:
    """The block's reducer, the value it combines in, and its update."""
    init, update = block.init, block.body
    if not (isinstance(init, BufferStore) and isinstance(update, BufferStore)):
        raise TVMSError(f"LowerCrossThreadReduction: block {block.name_hint!r} must reduce into one "
                        f"buffer (one init store, one update store)")
    value = update.value
    own = BufferLoad(update.buffer, update.indices)
    if isinstance(value, COMBINERS):
        for mine, other in ((value.a, value.b), (value.b, value.a)):
            if structural_equal(mine, own):
                x, y = Var("x0", value.dtype), Var("y0", value.dtype)
                reducer = CommReducer((x,), (y,), (type(value)(x, y),), (init.value,))
                return reducer, other, update
    raise TVMSError(f"LowerCrossThreadReduction: the update of block {block.name_hint!r} is not a "
                    f"sum, product, min or max of the buffer and a value")


def _scratchpad(buffer: Buffer, kind: str) -> Buffer:
    return decl_buffer((1,), buffer.dtype, f"{kind}_thread_{buffer.name}", scope="local",
                       strides=(const(1, "int32"),))


def _region(buffer: Buffer) -> BufferRegion:
    return BufferRegion(buffer, (Range(const(0, "int32"), const(1, "int32")),))


def _at0(buffer: Buffer) -> BufferLoad:
    return BufferLoad(buffer, (const(0, "int32"),))


class _Replace(Mutator):
    """The reduction buffer's accesses made the scratchpad's element 0."""

    def __init__(self, old: Buffer, new: Buffer) -> None:
        self.old, self.new = old, new

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        return _at0(self.new) if load.buffer is self.old else self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        if store.buffer is not self.old:
            return self.generic_visit(store)
        return BufferStore(self.new, self.visit(store.value), (const(0, "int32"),))


def _in_thread_loops(loop: For, realize: BlockRealize, new: BlockRealize | None) -> Stmt | None:
    """The loops under the outermost reduction loop with the block replaced by ``new`` and the
    thread-bound loops around it dropped (None when nothing is left)."""
    if loop is realize:
        return new
    if isinstance(loop, BlockRealize):
        return loop
    if isinstance(loop, SeqStmt):
        kept = [s for s in (_in_thread_loops(x, realize, new) for x in loop.seq) if s is not None]
        return None if not kept else kept[0] if len(kept) == 1 else SeqStmt(tuple(kept))
    if isinstance(loop, For):
        body = _in_thread_loops(loop.body, realize, new)
        if body is None:
            return None
        if loop.thread_binding is not None and any(
                isinstance(b, Block) and any(iv.iter_type == COMM_REDUCE for iv in b.iter_vars)
                for b in walk(loop)):
            return body
        return loop.with_changes(body=body)
    return loop


class _CrossThreadReduction(Mutator):
    def __init__(self) -> None:
        self.loops: list = []
        self.blocks: list = []
        self.replaced: dict = {}  # id(outermost reduction loop) -> its replacement
        self.new_buffers: dict = {}  # id(scope block) -> scratchpads to allocate there

    def visit_For(self, loop: For) -> Stmt:
        self.loops.append(loop)
        result = self.generic_visit(loop)
        self.loops.pop()
        return self.replaced.get(id(loop), result)

    def visit_Block(self, block: Block) -> Stmt:
        self.blocks.append(block)
        outer_loops, self.loops = self.loops, []
        result = self.generic_visit(block)
        self.loops = outer_loops
        self.blocks.pop()
        added = self.new_buffers.get(id(block))
        return result.with_changes(alloc_buffers=result.alloc_buffers + tuple(added)) if added else result

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        loops = self._reduction_loops(realize)
        if loops:
            self._lower(realize, loops)
            return realize  # (replaced with the loop around it)
        return self.generic_visit(realize)

    def _reduction_loops(self, realize: BlockRealize) -> list:
        block = realize.block
        if not self.blocks or block.init is None or not any(iv.iter_type == COMM_REDUCE for iv in block.iter_vars):
            return []
        if any(iv.iter_type not in (DATA_PAR, COMM_REDUCE) for iv in block.iter_vars):
            return []
        touched = {v for iv, value in zip(block.iter_vars, realize.iter_values) if iv.iter_type == COMM_REDUCE
                   for v in walk(value) if isinstance(v, Var)}
        loops = [loop for loop in self.loops if loop.loop_var in touched]
        return loops if any(loop.thread_binding is not None for loop in loops) else []

    def _lower(self, realize: BlockRealize, loops: list) -> None:
        block = realize.block
        for loop in loops:
            if loop.thread_binding is not None and not loop.thread_binding.thread_tag.startswith("threadIdx."):
                raise TVMSError(f"LowerCrossThreadReduction: reduction loop {loop.loop_var.name} may only be "
                                f"bound to threadIdx.x/y/z, not {loop.thread_binding.thread_tag}")
        if self.loops[-len(loops):] != loops:
            raise TVMSError(f"LowerCrossThreadReduction: the reduction loops of block {block.name_hint!r} "
                            f"must be the innermost loops around it")
        reducer, rhs, update = _reducer(block)
        target = update.buffer
        bound = [loop for loop in loops if loop.thread_binding is not None]
        in_thread = len(bound) < len(loops) or not is_const_int(realize.predicate, 1)
        cross = _scratchpad(target, "cross")
        scratch = [cross]
        stmts: list = []
        if in_thread:
            mine = _scratchpad(target, "in")
            scratch.append(mine)
            stmts.append(BlockRealize((), const(True), Block(
                iter_vars=(), writes=(_region(mine),), name_hint=f"{block.name_hint}_in_thread_init",
                body=BufferStore(mine, reducer.identity_element[0], (const(0, "int32"),)))))
            reduce_block = block.with_changes(writes=(_region(mine),), name_hint=f"{block.name_hint}_in_thread",
                                              body=_Replace(target, mine).visit(block.body), init=None)
            inner = _in_thread_loops(loops[0], realize, realize.with_changes(block=reduce_block))
            if inner is not None:
                stmts.append(inner)
            values, reads, iter_vars, bindings = (_at0(mine),), (_region(mine),), (), ()
        else:
            values, reads, iter_vars, bindings = (rhs,), block.reads, block.iter_vars, realize.iter_values
        args = (IntImm(DataType("uint32"), 1), *values, const(True), _at0(cross), *(l.loop_var for l in bound))
        allreduce = Evaluate(Call(DataType("handle"), get_op("tir.tvm_thread_allreduce"), args))
        stmts.append(BlockRealize(bindings, const(True), Block(
            iter_vars=iter_vars, reads=reads, writes=(_region(cross),), name_hint=f"{block.name_hint}_cross_thread",
            body=AttrStmt(reducer, "reduce_scope", const(0, "int32"), allreduce))))
        stmts.append(self._write_back(realize, update, cross, loops, bound))
        result: Stmt = SeqStmt(tuple(stmts))
        for loop in reversed(bound):
            result = loop.with_changes(body=result)
        self.replaced[id(loops[0])] = result
        self.new_buffers.setdefault(id(self.blocks[-1]), []).extend(scratch)

    @staticmethod
    def _write_back(realize: BlockRealize, update: BufferStore, cross: Buffer, loops: list, bound: list) -> Stmt:
        block = realize.block
        renamed = {iv.var: iv.var.with_changes() for iv in block.iter_vars if iv.iter_type != COMM_REDUCE}
        iter_vars = tuple(iv.with_changes(var=renamed[iv.var]) for iv in block.iter_vars if iv.var in renamed)
        bindings = tuple(v for iv, v in zip(block.iter_vars, realize.iter_values) if iv.var in renamed)
        loop_vars = {loop.loop_var for loop in loops}
        predicate: PrimExpr = const(True)
        for part in _conjuncts(realize.predicate):  # (the parts not about the reduction)
            if not any(v in loop_vars for v in walk(part)):
                predicate = _and(predicate, part)
        if update.buffer.scope != "local":
            for loop in bound:
                predicate = _and(predicate, BY_SYMBOL["=="].build(loop.loop_var, 0))
        region = tuple(substitute(r, renamed) for r in block.writes[0].region)
        store = BufferStore(update.buffer, _at0(cross), tuple(substitute(i, renamed) for i in update.indices))
        return BlockRealize(bindings, predicate, Block(
            iter_vars=iter_vars, reads=(_region(cross),), writes=(BufferRegion(update.buffer, region),),
            name_hint=f"{block.name_hint}_write_back", body=store))


def _and(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return b if is_const_int(a, 1) else And(a, b)


def _conjuncts(predicate: PrimExpr) -> list:
    """The operands of a chain of ``and`` (TVM reads only a chain's operands, not a lone
    condition)."""
    if not isinstance(predicate, And):
        return []
    found = []
    for side in (predicate.a, predicate.b):
        found.extend(_conjuncts(side) if isinstance(side, And) else [side])
    return found


def lower_cross_thread_reduction(func: PrimFunc) -> PrimFunc:
    """``func`` with its thread-bound reductions as in-thread, cross-thread and write-back blocks."""
    body = _CrossThreadReduction().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


LowerCrossThreadReduction = define_tir_pass("LowerCrossThreadReduction", lower_cross_thread_reduction)

__all__ = ["LowerCrossThreadReduction", "lower_cross_thread_reduction"]
