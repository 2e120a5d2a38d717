"""transform_layout with ``pad_value``: fill the places of the new layout that no element of the old
buffer goes to (TVM 0.27's plans, in its order of preference):

- a producer that walks the whole buffer row-major and stores nothing else gets loops over the new
  shape and writes ``T.if_then_else(padding, pad_value, value)``;
- otherwise a block ``buffer_<B>_padding`` after the last producer writes the padding;
- a buffer nothing writes (an input) gets a block ``buffer_<B>_assumptions`` stating
  ``T.assume(not padding or B[...] == pad_value)`` first.

The padding predicate comes from the map's inverse; tvms derives it for maps that keep each axis or
split it as ``((i + b) // c, ..., (i + b) % c)`` with ``0 <= b < c``, and refuses other maps. The new
statements are written in the old layout (indices through the inverse, ``B[v0 * 4 + v1]``);
transform_layout then moves every access to the new one, where the split folds back (``B[v0, v1]``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ...ir.analysis import substitute
from ...ir.buffer import Buffer, BufferRegion
from ...ir.dtype import DataType
from ...ir.expr import (DATA_PAR, EQ, LE, Add, And, BufferLoad, Call, FloorDiv, FloorMod, IntImm,
                        IterVar, LT, Mul, Not, Or, PrimExpr, Range, Sub, Var, const)
from ...ir.function import PrimFunc
from ...ir.op import get_op
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, Evaluate, For, IfThenElse, SeqStmt, Stmt, seq
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, walk
from .errors import ScheduleError
from .tree import replace_in, replace_stmts


@dataclass
class Padding:
    """The new indices (``axis0, ...``), the old indices as expressions of them and the predicate that
    holds on the padding (None: the map pads nothing)."""
    axes: list
    inverse: list
    predicate: PrimExpr | None

    def at(self, new_vars: list) -> tuple[list, PrimExpr | None]:
        """The inverse and the predicate over other variables of the new indices."""
        mapping = dict(zip(self.axes, new_vars))
        return [substitute(e, mapping) for e in self.inverse], substitute(self.predicate, mapping)

    def fresh(self) -> "Padding":
        """The same over new variables of the same names (each new loop nest defines its own)."""
        axes = [Var(a.name, a.dtype) for a in self.axes]
        return Padding(axes, *self.at(axes))


def split_padding(buffer: Buffer, index_map: Any) -> Padding:
    """The inverse and padding of ``index_map`` on ``buffer`` (constant shape), read off its splits."""
    old = list(index_map.initial_indices)
    # a new axis is named after the index it keeps whole, else axis<k> (as TVM's inverse names them)
    axes = [Var(e.name if isinstance(e, Var) else f"axis{k}", e.dtype)
            for k, e in enumerate(index_map.final_indices)]
    pieces: dict = {id(v): {} for v in old}
    for axis, e in zip(axes, index_map.final_indices):
        if isinstance(e, Var) and id(e) in pieces:
            kind, var, c, offset = "keep", e, None, 0
        elif isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0 \
                and (split := _shifted(e.a, pieces)) is not None and split[1] < e.b.value:
            kind, (var, offset), c = ("div" if isinstance(e, FloorDiv) else "mod"), split, e.b.value
        else:
            raise _unsupported(index_map, f"the new index {e.script()} is not i, (i + b) // c or (i + b) % c")
        if kind in pieces[id(var)]:
            raise _unsupported(index_map, f"'{var.name}' appears twice as {e.script()}")
        pieces[id(var)][kind] = (axis, c, offset)
    inverse, padded = [], []
    for var, extent in zip(old, buffer.shape):
        got = pieces[id(var)]
        if set(got) == {"keep"}:
            inverse.append(got["keep"][0])
        elif set(got) == {"div", "mod"} and got["div"][1:] == got["mod"][1:]:
            (outer, c, b), (inner, _, _) = got["div"], got["mod"]
            whole = Add(Mul(outer, const(c, outer.dtype)), inner)
            inverse.append(Sub(whole, const(b, whole.dtype)) if b else whole)
            if b:  # the first b places are padding
                padded.append(And(EQ(outer, const(0, outer.dtype)), LT(inner, const(b, inner.dtype))))
            rest = (extent.value + b) % c
            if rest:
                # as TVM's simplifier leaves it: the last place alone is ==
                past = EQ(inner, const(c - 1, inner.dtype)) if rest == c - 1 else LE(const(rest, inner.dtype), inner)
                padded.append(And(EQ(outer, const((extent.value + b) // c, outer.dtype)), past))
        else:
            raise _unsupported(index_map, f"'{var.name}' is not kept whole or split as ({var.name} // c, "
                                          f"{var.name} % c)")
    predicate = None
    for p in padded:  # padding wherever one of the split axes is past its end
        predicate = p if predicate is None else Or(predicate, p)
    return Padding(axes, inverse, predicate)


def _shifted(e: PrimExpr, pieces: dict) -> tuple | None:
    """(i, b) for an index ``i`` or ``i + b`` (b a constant, at least 0); None for anything else."""
    if isinstance(e, Var) and id(e) in pieces:
        return e, 0
    if isinstance(e, Add) and isinstance(e.a, Var) and id(e.a) in pieces and isinstance(e.b, IntImm) \
            and e.b.value >= 0:
        return e.a, e.b.value
    return None


def _unsupported(index_map: Any, why: str) -> ScheduleError:
    return ScheduleError(f"transform_layout: pad_value with the index map {index_map} is not supported by "
                         f"tvms ({why}); tvms pads maps that keep each axis whole or split it as "
                         f"((i + b) // c, (i + b) % c)")


def pad_value_map(pad_value: Any, buffer: Buffer, ndim: int) -> Any:
    """The pad value as TVM's IndexMap of the new indices, ``lambda indices_0, ...: (v,)``: a number
    of the buffer's kind is a constant of its dtype, a function is called with the new indices."""
    from .layout import IndexMap
    if isinstance(pad_value, (int, float, PrimExpr)) and not isinstance(pad_value, bool):
        fits = isinstance(pad_value, int) and not buffer.dtype.is_float or \
            isinstance(pad_value, float) and buffer.dtype.is_float
        value = pad_value if isinstance(pad_value, PrimExpr) else const(pad_value, buffer.dtype if fits else None)
        imap = IndexMap([Var(f"indices_{k}") for k in range(ndim)], [value])
    elif isinstance(pad_value, IndexMap):
        imap = pad_value
    elif callable(pad_value):
        names = list(inspect.signature(pad_value).parameters)
        if len(names) != ndim:
            raise ScheduleError(f"transform_layout: pad_value takes {len(names)} indices, the new layout has "
                                f"{ndim} dimensions")
        indices = [Var(n) for n in names]
        result = pad_value(*indices)
        values = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(values) != 1 or not isinstance(values[0], (int, float, PrimExpr)) or isinstance(values[0], bool):
            raise ScheduleError(f"transform_layout: pad_value must give one value, got {result!r}")
        imap = IndexMap(indices, [values[0] if isinstance(values[0], PrimExpr) else const(values[0])])
    else:
        raise ScheduleError(f"transform_layout: pad_value is a number, an expression or a function of the "
                            f"new indices, got {pad_value!r}")
    value = imap.final_indices[0]
    if value.dtype != buffer.dtype:
        raise ScheduleError(f"transform_layout: pad_value {value.script()} is {value.dtype}, buffer "
                            f"'{buffer.name}' holds {buffer.dtype}")
    if any(isinstance(n, BufferLoad) for n in walk(value)):
        raise ScheduleError(f"transform_layout: pad_value {value.script()} reads a buffer (not supported)")
    return imap


@dataclass
class _Write:
    store: BufferStore
    realize: BlockRealize | None
    loops: list  # the loops the indices depend on, outermost first
    row_major: bool  # the loops walk the buffer's axes in order, each over all of it


def _writes(stmt: Any, buffer: Buffer, loops: list, bound: dict, realize: Any, out: list) -> None:
    if isinstance(stmt, BufferStore):
        if stmt.buffer is buffer:
            out.append(_write_info(stmt, buffer, loops, bound, realize))
    elif isinstance(stmt, SeqStmt):
        for s in stmt.seq:
            _writes(s, buffer, loops, bound, realize, out)
    elif isinstance(stmt, For):
        _writes(stmt.body, buffer, loops + [stmt], bound, realize, out)
    elif isinstance(stmt, BlockRealize):
        inner = dict(bound)
        inner.update({iv.var: substitute(v, bound) for iv, v in zip(stmt.block.iter_vars, stmt.iter_values)})
        for s in (stmt.block.init, stmt.block.body):
            _writes(s, buffer, loops, inner, stmt, out)
    elif isinstance(stmt, IfThenElse):
        for s in (stmt.then_case, stmt.else_case):
            _writes(s, buffer, loops, bound, realize, out)
    elif hasattr(stmt, "body"):  # lets, allocations, attributes, ...
        _writes(stmt.body, buffer, loops, bound, realize, out)


def _write_info(store: BufferStore, buffer: Buffer, loops: list, bound: dict, realize: Any) -> _Write:
    indices = [substitute(i, bound) for i in store.indices]
    used = {id(n) for i in indices for n in walk(i) if isinstance(n, Var)}
    depths = [k for k, lp in enumerate(loops) if id(lp.loop_var) in used]
    nest = loops[depths[0]:depths[-1] + 1] if depths else []
    row_major = bool(nest) and len(nest) == len(buffer.shape) == len(indices) and all(
        i is lp.loop_var and isinstance(lp.min, IntImm) and lp.min.value == 0 and lp.kind == SERIAL
        and structural_equal(lp.extent, dim) for i, lp, dim in zip(indices, nest, buffer.shape))
    return _Write(store, realize, nest, row_major)


def _loops(axes: list, shape: tuple, body: Stmt) -> Stmt:
    for var, extent in reversed(list(zip(axes, shape))):
        body = For(var, const(0, var.dtype), extent, SERIAL, body)
    return body


def _padding_block(name: str, padding: Padding, shape: tuple, predicate: PrimExpr, make: Any) -> tuple:
    """A nest over the new shape around a block with iterators ``v_axis0, ...``; ``make(point, pred,
    iters)`` gives its (reads, writes, body) from the old-layout point, the predicate on the iterators
    and the iterators."""
    iters = [Var(f"v_{a.name}", a.dtype) for a in padding.axes]
    point, on_iters = padding.at(iters)
    reads, writes, body = make(point, on_iters, iters)
    block = Block(tuple(IterVar(Range(const(0, v.dtype), n), v, DATA_PAR) for v, n in zip(iters, shape)),
                  reads=reads, writes=writes, name_hint=name, body=body)
    return _loops(padding.axes, shape, BlockRealize(tuple(padding.axes), predicate, block)), iters


def pad(func: PrimFunc, old: Buffer, shape: tuple, padding: Padding, pad_value: Any) -> tuple[PrimFunc, list]:
    """``func`` with the padding of ``old`` filled (or assumed), still in the old layout; also the new
    variables, whose ranges are those of the new axes."""
    indices, value = pad_value.initial_indices, pad_value.final_indices[0]
    writes: list = []
    _writes(func.body, old, [], {}, None, writes)
    point_of = lambda point: (BufferRegion(old, tuple(Range(p, const(1, p.dtype)) for p in point)),)
    if not writes:
        def assume(point: list, pred: PrimExpr, iters: list) -> tuple:
            held = EQ(BufferLoad(old, tuple(point)), substitute(value, dict(zip(indices, iters))))
            return point_of(point), (), Evaluate(Call(DataType("bool"), get_op("tir.assume"),
                                                      (Or(Not(pred), held),)))
        nest, iters = _padding_block(f"buffer_{old.name}_assumptions", padding, shape, const(True), assume)
        return _prepend(func, old, nest), padding.axes + iters
    replaced: dict = {}
    new_vars: list = []
    for w in writes:
        if w.row_major and id(w.loops[0]) not in replaced:
            nest_padding = padding.fresh()
            got = _replace(w, old, shape, nest_padding, indices, value)
            if got is not None:
                replaced[id(w.loops[0])], more = got
                new_vars += nest_padding.axes + more
    if replaced:
        return replace_stmts(func, replaced), new_vars
    last = writes[-1]
    anchor = last.loops[0] if last.loops else last.realize
    if anchor is None or anchor is func.body:
        raise ScheduleError(f"transform_layout: buffer '{old.name}' is written outside any block or loop")

    def fill(point: list, pred: PrimExpr, iters: list) -> tuple:
        return (), point_of(point), BufferStore(old, substitute(value, dict(zip(indices, iters))), tuple(point))
    nest, iters = _padding_block(f"buffer_{old.name}_padding", padding, shape, padding.predicate, fill)
    return replace_stmts(func, {id(anchor): seq([anchor, nest])}), padding.axes + iters


def _prepend(func: PrimFunc, old: Buffer, nest: Stmt) -> PrimFunc:
    """``nest`` first in the block that allocates ``old`` (the root block for a parameter)."""
    scope = func.body
    for node in walk(func.body):
        if isinstance(node, BlockRealize) and any(b is old for b in node.block.alloc_buffers):
            scope = node
    if not isinstance(scope, BlockRealize):
        raise ScheduleError(f"transform_layout: the function has no root block to state the padding of "
                            f"'{old.name}' in")
    block = scope.block.with_changes(body=seq([nest, scope.block.body]))
    return replace_stmts(func, {id(scope): scope.with_changes(block=block)})


def _replace(w: _Write, old: Buffer, shape: tuple, padding: Padding, indices: list,
             value: PrimExpr) -> tuple[Stmt, list] | None:
    """The loops of a row-major producer replaced by loops over the new shape whose stores write
    ``T.if_then_else(padding, pad_value, value)``; None where the loop body stores anything else."""
    body = w.loops[-1].body
    for s in walk(body):
        if isinstance(s, BufferStore) and not (s.buffer is old and len(s.indices) == len(w.store.indices) and all(
                structural_equal(a, b) for a, b in zip(s.indices, w.store.indices))):
            return None
    remap = {lp.loop_var: e for lp, e in zip(w.loops, padding.inverse)}
    new_index, predicate, more = list(padding.axes), padding.predicate, []
    realize = w.realize
    iters = realize.block.iter_vars if realize is not None else ()
    first = next((k for k, iv in enumerate(iters) if iv.var is w.store.indices[0]), None)
    if first is not None and all(k < len(iters) and iters[k].var is i and iters[k].iter_type == DATA_PAR
                                 for k, i in enumerate(w.store.indices, first)):
        # the block's own iterators index the buffer: it gets iterators over the new axes
        more = [Var(f"v_{a.name}", a.dtype) for a in padding.axes]
        point, predicate = padding.at(more)
        remap.update(zip(w.store.indices, point))
        n = len(w.store.indices)
        new_iters = (iters[:first] + tuple(IterVar(Range(const(0, v.dtype), d), v, DATA_PAR)
                                           for v, d in zip(more, shape)) + iters[first + n:])
        values = realize.iter_values[:first] + tuple(padding.axes) + realize.iter_values[first + n:]
        body = replace_in(body, {id(realize): realize.with_changes(
            iter_values=values, block=realize.block.with_changes(iter_vars=new_iters))})
        new_index = more
    pad_here = substitute(value, dict(zip(indices, new_index)))
    at = tuple(padding.at(new_index)[0])

    class _Stores(Mutator):
        def visit_BufferStore(self, s: BufferStore) -> Any:
            s = self.generic_visit(s)
            if s.buffer is not old:
                return s
            chosen = Call(old.dtype, get_op("tir.if_then_else"), (predicate, pad_here, s.value))
            return BufferStore(old, chosen, at)

    body = _Stores().visit(substitute(body, remap))
    return _loops(padding.axes, shape, body), more
