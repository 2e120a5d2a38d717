"""LowerCrossThreadReduction: a reduction whose loops are bound to ``threadIdx`` becomes an allreduce.

As TVM 0.27 does it, for a reduction block (with ``T.init()``, reduction iterators) under a
reduction loop bound to a thread index, the outermost reduction loop is replaced by:

* when some reduction loop is serial (or the block has a predicate), ``<block>_in_thread_init``
  and ``<block>_in_thread``: each thread reduces its share into a local ``in_thread_<buf>``;
* ``<block>_cross_thread``: ``T.tvm_thread_allreduce`` under ``T.attr(comm_reducer,
  "reduce_scope", 0)`` combines the threads' values into a local ``cross_thread_<buf>``;
* ``<block>_write_back``: one thread (``T.where(tx == 0)``) stores the result;

all under the thread-bound reduction loops. The reducer (sum, product, min, max) is read from
the block's update, or, for several buffers reduced together, from the selections that update
them (argmax, argmin) or from two sums (a layer norm's mean and mean of squares, through ``T.let``
bindings: the in-thread block keeps them). Not done: TVM's broadcast of the result to later blocks outside the
thread loops.
"""
from __future__ import annotations

import math

from ....ir.analysis import substitute
from ....ir.buffer import Buffer, BufferRegion, decl_buffer
from ....ir.dtype import DataType, float_limits
from ....ir.errors import TVMSError
from ....ir.expr import (COMM_REDUCE, DATA_PAR, GE, GT, LE, LT, Add, And, BufferLoad, Call, CommReducer, FloatImm,
                         IntImm, Max, Min, Mul, PrimExpr, Range, Select, Var, const, is_const_int)
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.operators import BY_SYMBOL
from ....ir.stmt import AttrStmt, Block, BlockRealize, BufferStore, Evaluate, For, LetStmt, SeqStmt, Stmt
from ....ir.structural import structural_equal
from ....ir.visitor import Mutator, walk
from ...te.tensor import max_value, min_value
from ..tir_pass import define_tir_pass

COMBINERS = (Add, Mul, Min, Max)


def _stores(stmt: Stmt) -> list:
    stmts = stmt.seq if isinstance(stmt, SeqStmt) else (stmt,)
    return list(stmts) if all(isinstance(x, BufferStore) for x in stmts) else []


def _reducer(block: Block) -> tuple[CommReducer, list, list]:
    """The block's reducer, the values it combines in, and its updates (one per buffer)."""
    lets: dict = {}
    body = block.body
    while isinstance(body, LetStmt):  # (an argmax's update reads its new values through lets)
        lets[body.var] = substitute(body.value, lets)
        body = body.body
    inits, updates = _stores(block.init), _stores(body)
    if not updates or [u.buffer for u in updates] != [i.buffer for i in inits]:
        raise TVMSError(f"LowerCrossThreadReduction: block {block.name_hint!r} must initialize and update "
                        f"its reduction buffers with one store each")
    values = [substitute(u.value, lets) for u in updates]
    own = [BufferLoad(u.buffer, u.indices) for u in updates]
    identity = tuple(i.value for i in inits)
    if len(updates) == 1 and isinstance(values[0], COMBINERS):
        other = _combined_with(values[0], own[0])
        if other is not None:
            _check_identity(block, identity, [_IDENTITIES[type(values[0])](values[0].dtype)])
            x, y = Var("x0", values[0].dtype), Var("y0", values[0].dtype)
            return CommReducer((x,), (y,), (type(values[0])(x, y),), identity), [other], updates
    # two buffers summed together (a layer norm's sum and sum of squares): TVM's tuple-sum reducer
    others = [_combined_with(v, o) if isinstance(v, Add) else None for v, o in zip(values, own)]
    if len(updates) == 2 and all(o is not None for o in others):
        _check_identity(block, identity, [const(0, v.dtype) for v in values])
        xs = tuple(Var(f"x{i}", v.dtype) for i, v in enumerate(values))
        ys = tuple(Var(f"y{i}", v.dtype) for i, v in enumerate(values))
        return CommReducer(xs, ys, tuple(Add(x, y) for x, y in zip(xs, ys)), identity), others, updates
    # several buffers (argmax, argmin): each new value selects the buffer's own or another value
    if all(isinstance(v, Select) and structural_equal(v.true_value, o) for v, o in zip(values, own)):
        _check_identity(block, identity, _selection_identity(values, own))
        others = [v.false_value for v in values]
        xs = tuple(Var(f"x{i}", v.dtype) for i, v in enumerate(values))
        ys = tuple(Var(f"y{i}", v.dtype) for i, v in enumerate(values))
        rename = _Rename([*zip(own, xs), *zip(others, ys)])
        result = tuple(Select(rename.visit(v.condition), x, y) for v, x, y in zip(values, xs, ys))
        return CommReducer(xs, ys, result, identity), others, updates
    raise TVMSError(f"LowerCrossThreadReduction: the update of block {block.name_hint!r} is not a sum, "
                    f"product, min, max, a selection (argmax) or two sums of the buffers and the values")


# what each combiner's buffer must start from, as TVM's reducers have it (another start would be
# counted once by every thread: TVM refuses it, "No matched reducer")
FLOAT32_MAX = float_limits("float32")[1]
_IDENTITIES = {Add: lambda dtype: const(0, dtype), Mul: lambda dtype: const(1, dtype),
               Min: max_value, Max: min_value}


def _selection_identity(values: list, own: list) -> list | None:
    """The start of an argmax (the index -1, the value the lowest of its type) or an argmin (the
    highest), told by the comparison that keeps the value buffer's own value; None for other
    selections."""
    if len(values) != 2:
        return None
    cond, mine = values[1].condition, own[1]
    for op, keeps_larger in ((GT, True), (GE, True), (LT, False), (LE, False)):
        if isinstance(cond, op) and (structural_equal(cond.a, mine) or structural_equal(cond.b, mine)):
            larger = keeps_larger == structural_equal(cond.a, mine)
            dtype = values[1].dtype
            return [const(-1, values[0].dtype), min_value(dtype) if larger else max_value(dtype)]
    return None


def _check_identity(block: Block, identity: tuple, expected: list | None) -> None:
    if expected is None or len(expected) != len(identity) or not all(
            i.dtype == e.dtype and _values_of(i) & _values_of(e) for i, e in zip(identity, expected)):
        want = "not known for this selection" if expected is None else ", ".join(e.script() for e in expected)
        raise TVMSError(f"LowerCrossThreadReduction: block {block.name_hint!r} initializes its reduction "
                        f"with {', '.join(i.script() for i in identity)}, not its reducer's identity ({want}): "
                        f"each thread would count it once (TVM's pass finds no matched reducer)")


def _values_of(e: PrimExpr) -> set:
    """The values a constant init stands for: a number, or ``T.min_value``/``T.max_value`` of its
    type; a bfloat16 extreme also as TVM writes it (float32's, -3.40282e38, which TVM's reducer
    takes as bfloat16's identity). Empty for anything else."""
    if isinstance(e, (IntImm, FloatImm)):
        value = e.value
    elif isinstance(e, Call) and e.op.name in ("tir.min_value", "tir.max_value") and not e.args:
        value = (min_value if e.op.name == "tir.min_value" else max_value)(e.dtype).value
    else:
        return set()
    if e.dtype.name == "bfloat16" and abs(value) == max_value(e.dtype).value:
        return {value, math.copysign(FLOAT32_MAX, value)}
    return {value}


def _combined_with(value: PrimExpr, own: BufferLoad) -> PrimExpr | None:
    """The operand that a combination (``own + x`` or ``x + own``) combines with the buffer's own
    value, or None when neither operand is it."""
    for mine, other in ((value.a, value.b), (value.b, value.a)):
        if structural_equal(mine, own):
            return other
    return None


class _Rename(Mutator):
    """Expressions replaced (structurally) by variables."""

    def __init__(self, pairs: list) -> None:
        self.pairs = pairs

    def visit(self, node):
        for expr, var in self.pairs:
            if isinstance(node, PrimExpr) and structural_equal(node, expr):
                return var
        return super().visit(node)


def _scratchpad(buffer: Buffer, kind: str) -> Buffer:
    return decl_buffer((1,), buffer.dtype, f"{kind}_thread_{buffer.name}", scope="local",
                       strides=(const(1, "int32"),))


def _region(buffer: Buffer) -> BufferRegion:
    return BufferRegion(buffer, (Range(const(0, "int32"), const(1, "int32")),))


def _at0(buffer: Buffer) -> BufferLoad:
    return BufferLoad(buffer, (const(0, "int32"),))


class _Replace(Mutator):
    """The reduction buffers' accesses made their scratchpads' element 0."""

    def __init__(self, mapping: dict) -> None:
        self.mapping = mapping

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        new = self.mapping.get(load.buffer)
        return _at0(new) if new is not None else self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        new = self.mapping.get(store.buffer)
        if new is None:
            return self.generic_visit(store)
        return BufferStore(new, self.visit(store.value), (const(0, "int32"),))


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
        reducer, rhs, updates = _reducer(block)
        targets = [u.buffer for u in updates]
        bound = [loop for loop in loops if loop.thread_binding is not None]
        in_thread = len(bound) < len(loops) or not is_const_int(realize.predicate, 1)
        cross = [_scratchpad(t, "cross") for t in targets]
        scratch = list(cross)
        stmts: list = []
        if in_thread:
            mine = [_scratchpad(t, "in") for t in targets]
            scratch += mine
            inits = [BufferStore(m, v, (const(0, "int32"),)) for m, v in zip(mine, reducer.identity_element)]
            stmts.append(BlockRealize((), const(True), Block(
                iter_vars=(), writes=tuple(map(_region, mine)), name_hint=f"{block.name_hint}_in_thread_init",
                body=inits[0] if len(inits) == 1 else SeqStmt(tuple(inits)))))
            reduce_block = block.with_changes(writes=tuple(map(_region, mine)), name_hint=f"{block.name_hint}_in_thread",
                                              body=_Replace(dict(zip(targets, mine))).visit(block.body), init=None)
            inner = _in_thread_loops(loops[0], realize, realize.with_changes(block=reduce_block))
            if inner is not None:
                stmts.append(inner)
            values, reads, iter_vars, bindings = tuple(map(_at0, mine)), tuple(map(_region, mine)), (), ()
        else:
            values, reads, iter_vars, bindings = tuple(rhs), block.reads, block.iter_vars, realize.iter_values
        args = (IntImm(DataType("uint32"), len(targets)), *values, const(True), *map(_at0, cross),
                *(l.loop_var for l in bound))
        allreduce = Evaluate(Call(DataType("handle"), get_op("tir.tvm_thread_allreduce"), args))
        stmts.append(BlockRealize(bindings, const(True), Block(
            iter_vars=iter_vars, reads=reads, writes=tuple(map(_region, cross)),
            name_hint=f"{block.name_hint}_cross_thread",
            body=AttrStmt(reducer, "reduce_scope", const(0, "int32"), allreduce))))
        stmts.append(self._write_back(realize, updates, cross, loops, bound))
        result: Stmt = SeqStmt(tuple(stmts))
        for loop in reversed(bound):
            result = loop.with_changes(body=result)
        self.replaced[id(loops[0])] = result
        self.new_buffers.setdefault(id(self.blocks[-1]), []).extend(scratch)

    @staticmethod
    def _write_back(realize: BlockRealize, updates: list, cross: list, loops: list, bound: list) -> Stmt:
        block = realize.block
        renamed = {iv.var: iv.var.with_changes() for iv in block.iter_vars if iv.iter_type != COMM_REDUCE}
        iter_vars = tuple(iv.with_changes(var=renamed[iv.var]) for iv in block.iter_vars if iv.var in renamed)
        bindings = tuple(v for iv, v in zip(block.iter_vars, realize.iter_values) if iv.var in renamed)
        loop_vars = {loop.loop_var for loop in loops}
        predicate: PrimExpr = const(True)
        for part in _conjuncts(realize.predicate):  # (the parts not about the reduction)
            if not any(v in loop_vars for v in walk(part)):
                predicate = _and(predicate, part)
        if updates[0].buffer.scope != "local":
            for loop in bound:
                predicate = _and(predicate, BY_SYMBOL["=="].build(loop.loop_var, 0))
        region = tuple(substitute(r, renamed) for r in block.writes[0].region)
        stores = [BufferStore(u.buffer, _at0(c), tuple(substitute(i, renamed) for i in u.indices))
                  for u, c in zip(updates, cross)]
        return BlockRealize(bindings, predicate, Block(
            iter_vars=iter_vars, reads=tuple(map(_region, cross)),
            writes=tuple(BufferRegion(u.buffer, region) for u in updates),
            name_hint=f"{block.name_hint}_write_back", body=stores[0] if len(stores) == 1 else SeqStmt(tuple(stores))))


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
