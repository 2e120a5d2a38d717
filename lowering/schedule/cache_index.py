"""cache_index: index computations of a block (``vi // 4 + vj // 4``) precomputed into buffers
``index_var_0, ...`` by blocks ``index_0, ...`` placed before it, the block loading them instead.

As TVM 0.27 does it: the candidates are the largest pure computations (no loads, more than one
node) of the block's store, counted with simplified forms merged; with ``cse_thresh`` > 0 one
seen fewer times gives way to its own largest sub-computations, which inherit its count. Those
seen ``cse_thresh`` times or more are cached, the largest first.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import BufferRegion, decl_buffer
from ...ir.expr import (DATA_PAR, Broadcast, BufferLoad, Call, FloatImm, IntImm, IterVar, PrimExpr, Ramp, Range,
                        StringImm, Var, const)
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, Stmt, seq
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, children
from .cache import _position_of, _scope_children
from .errors import ScheduleError
from .tree import replace_in, replace_stmts

_IMPURE = {"tir.call_extern", "tir.call_packed", "tir.call_pure_extern", "tir.call_llvm_intrin"}


def _size(e: PrimExpr) -> int:
    return 1 + sum(_size(c) for c in children(e) if isinstance(c, PrimExpr))


def _pure(e: PrimExpr) -> bool:
    if isinstance(e, BufferLoad):
        return False
    if isinstance(e, Call) and getattr(e.op, "name", "") in _IMPURE:
        return False
    return all(_pure(c) for c in children(e) if isinstance(c, PrimExpr))


def _eligible(e: PrimExpr) -> bool:
    return not isinstance(e, (Ramp, Broadcast)) and _size(e) > 1 and _pure(e)


def _leaf(e: Any) -> bool:
    return isinstance(e, (IntImm, FloatImm, StringImm, Var))


def _largest(e: Any, found: list) -> None:
    """The largest eligible computations under ``e`` (in visiting order, repeats kept)."""
    if not isinstance(e, PrimExpr):
        for c in children(e):
            if isinstance(c, (PrimExpr, Stmt)):
                _largest(c, found)
        return
    if _leaf(e):
        return
    if _eligible(e):
        found.append(e)
        return
    for c in children(e):
        if isinstance(c, PrimExpr):
            _largest(c, found)


class _Table:
    """Computations with counts, equivalent ones (equal once simplified) merged."""

    def __init__(self) -> None:
        self.items: list = []  # [expr, normal form, count], the largest first

    @staticmethod
    def normal(e: PrimExpr) -> PrimExpr:
        return Analyzer().simplify(e)

    def find(self, e: PrimExpr) -> list | None:
        n = self.normal(e)
        return next((item for item in self.items if structural_equal(item[1], n)), None)

    def add(self, e: PrimExpr, count: int, ordered: bool) -> None:
        item = self.find(e)
        if item is not None:
            item[2] += count
            return
        new = [e, self.normal(e), count]
        if not ordered:
            self.items.append(new)
            return
        at = next((i for i, it in enumerate(self.items) if _size(it[0]) < _size(e)), len(self.items))
        self.items.insert(at, new)


def _computations(store: BufferStore, thresh: int) -> list[PrimExpr]:
    found: list = []
    _largest(store, found)
    table = _Table()
    for e in found:
        table.add(e, 1, False)
    i = 0
    while i < len(table.items):
        expr, _, count = table.items[i]
        if count < thresh:
            direct: list = []
            for c in children(expr):
                if isinstance(c, PrimExpr):
                    _largest(c, direct)
            for sub in direct:
                table.add(sub, count, True)
        i += 1
    chosen: list = []

    def post_order(e: PrimExpr) -> None:
        for c in children(e):
            if isinstance(c, PrimExpr):
                post_order(c)
        n = _Table.normal(e)
        for expr, norm, count in table.items:
            if count >= thresh and structural_equal(norm, n) and not any(x is expr for x in chosen):
                chosen.append(expr)
    post_order(store.value)
    return sorted(chosen, key=lambda e: -_size(e))  # (stable: equal sizes keep their order)


def cache_index(func: PrimFunc, realize: BlockRealize, path: tuple, scope_name: str,
                thresh: int) -> tuple[PrimFunc, list[str]]:
    block = realize.block
    if not isinstance(thresh, int) or thresh < 0:
        raise ScheduleError(f"cache_index: cse_thresh must be a non-negative integer, got {thresh!r}")
    stores = [n for n in _stores(block.body)]
    if len(stores) != 1:
        raise ScheduleError(f"cache_index: block '{block.name_hint}' must hold one store, it holds {len(stores)}")
    exprs = _computations(stores[0], thresh)
    if not exprs:
        raise ScheduleError(f"cache_index: block '{block.name_hint}' computes no index worth caching")
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    ranges = {lp.loop_var: (lp.min, lp.extent) for lp in path if isinstance(lp, For)}
    analyzer = Analyzer()
    for var, (lo, ext) in ranges.items():
        if not (isinstance(lo, IntImm) and isinstance(ext, IntImm)):
            raise ScheduleError(f"cache_index: loop '{var.name}' around block '{block.name_hint}' needs constant "
                                f"bounds")
        analyzer.bind(var, lo.value, ext.value)
    stages, buffers, loads = [], [], []
    for k, expr in enumerate(exprs):
        used = _vars_in_order(expr)
        loops = []
        for v in used:
            if v not in bindings:
                raise ScheduleError(f"cache_index: the index {expr.script()} uses '{v.name}', which is not an "
                                    f"iterator of block '{block.name_hint}'")
            loops.extend(x for x in _vars_in_order(bindings[v]) if x not in loops)
        if len(loops) != len(used) or any(x not in ranges for x in loops):
            raise ScheduleError(f"cache_index: the iterators of {expr.script()} must each be bound to one loop "
                                f"around block '{block.name_hint}'")
        shape = []
        for v in used:
            b = analyzer.bound(bindings[v])
            if b is None:
                raise ScheduleError(f"cache_index: cannot bound iterator '{v.name}' of block '{block.name_hint}'")
            shape.append(const(b[1] + 1, "int32"))
        buffer = decl_buffer(shape, expr.dtype, f"index_var_{k}", scope=scope_name, strides=(const(1, "int32"),))
        loop_vars = {x: Var(f"ax{d}", x.dtype) for d, x in enumerate(loops)}
        iters = [IterVar(Range(const(0, v.dtype), ranges[x][1]), Var(f"v{d}", v.dtype), DATA_PAR)
                 for d, (v, x) in enumerate(zip(used, loops))]
        point = tuple(iv.var for iv in iters)
        new_block = Block(tuple(iters), writes=(BufferRegion(buffer, tuple(Range(p, const(1, p.dtype))
                                                                           for p in point)),),
                          name_hint=f"index_{k}",
                          body=BufferStore(buffer, substitute(expr, dict(zip(used, point))), point))
        stmt: Stmt = BlockRealize(tuple(substitute(bindings[v], loop_vars) for v in used), const(True), new_block)
        for x in reversed(loops):
            stmt = For(loop_vars[x], const(0, loop_vars[x].dtype), ranges[x][1], "serial", stmt)
        stages.append(stmt)
        buffers.append(buffer)
        loads.append((expr, BufferLoad(buffer, tuple(used))))
    new_store = stores[0]
    for expr, load in loads:
        new_store = _Replace(expr, load).visit(new_store)
    scope, kids = _scope_children(path)
    at = _position_of(kids, realize)
    kids = [replace_in(kid, {id(stores[0]): new_store}) if i == at else kid for i, kid in enumerate(kids)]
    new_scope = scope.with_changes(body=seq(kids[:at] + stages + kids[at:]),
                                   alloc_buffers=scope.alloc_buffers + tuple(buffers))
    return replace_stmts(func, {id(scope): new_scope}), [f"index_{k}" for k in range(len(exprs))]


def _stores(s: Any) -> list:
    if isinstance(s, BufferStore):
        return [s]
    if isinstance(s, (Block, BlockRealize)):
        return []
    return [x for c in children(s) if isinstance(c, Stmt) for x in _stores(c)]


def _vars_in_order(e: PrimExpr) -> list[Var]:
    """The variables of ``e`` in post-order, each once."""
    found: list = []

    def visit(x: Any) -> None:
        for c in children(x):
            if isinstance(c, PrimExpr):
                visit(c)
        if isinstance(x, Var) and x not in found:
            found.append(x)
    visit(e)
    return found


class _Replace(Mutator):
    """Replaces, outermost first, the expressions equivalent to ``expr`` by ``load``."""

    def __init__(self, expr: PrimExpr, load: PrimExpr):
        self.norm, self.load = _Table.normal(expr), load

    def visit(self, node: Any) -> Any:
        if isinstance(node, PrimExpr) and not _leaf(node) and structural_equal(_Table.normal(node), self.norm):
            return self.load
        return super().visit(node)
