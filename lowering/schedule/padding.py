"""decompose_padding: a padding block ``y[v] = T.if_then_else(6 <= v and v < 134, x[v - 6], 0)``
becomes a block ``block_pad_const`` filling the whole buffer with the constant, placed before a
loop the user picks, and the block itself writing only the in-bound part (``y[v + 6] = x[v]``).

As TVM 0.27 does it. The in-bound region of each iterator comes from the padding condition's
bounds on its binding (``3 <= i2_0 * 75 + ax1 < 228`` gives [3, 228)); a condition on anything
else than one iterator's binding, or a trivial one, is refused.
"""
from __future__ import annotations

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import BufferRegion
from ...ir.expr import (DATA_PAR, Add, GE, GT, LE, LT, Call, FloatImm, IntImm, IterVar, PrimExpr, Range, Sub,
                        Var, const)
from ...ir.function import PrimFunc
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, For, Stmt, seq
from .errors import ScheduleError
from .block_layout import IndexSimplifier
from .loop_transform import conjoin, conjuncts
from .tree import enclosing_loops, replace_in, replace_stmts


def decompose_padding(func: PrimFunc, realize: BlockRealize, path: tuple, loop: For) -> tuple[PrimFunc, str]:
    block = realize.block
    name = block.name_hint
    loops = list(reversed(enclosing_loops(path)))  # innermost first
    if not any(lp is loop for lp in loops):
        raise ScheduleError(f"decompose_padding: loop '{loop.loop_var.name}' is not an ancestor of block "
                            f"'{name}'")
    if any(iv.iter_type != DATA_PAR for iv in block.iter_vars) or len(block.writes) != 1 or block.init:
        raise ScheduleError(f"decompose_padding: block '{name}' is not a complete block (data-parallel "
                            f"iterators, one buffer written)")
    analyzer = Analyzer()
    for lp in loops:
        if not (isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)):
            raise ScheduleError(f"decompose_padding: loop '{lp.loop_var.name}' needs constant bounds")
        analyzer.bind(lp.loop_var, lp.min.value, lp.extent.value)
    value, predicate, region, pad_value = _padding_pattern(realize, analyzer)

    # the in-bound loops: from the innermost up through loops holding only one loop or the block
    inner_top = loops[0]
    for lp in loops:
        if lp is loop:
            inner_top = lp
            break
        if not isinstance(lp.body, (For, BlockRealize)):
            break
        inner_top = lp
    const_nest = _const_block(realize, pad_value, loops[:_index(loops, loop) + 1], analyzer)
    bound_nest = _in_bound_block(realize, value, predicate, region, loops[:_index(loops, inner_top) + 1],
                                 analyzer)
    if inner_top is loop:
        replacement = seq([const_nest, bound_nest])
    else:
        replacement = seq([const_nest, replace_in(loop, {id(inner_top): bound_nest})])
    return replace_stmts(func, {id(loop): replacement}), f"{name}_pad_const"


def _index(loops: list, loop: For) -> int:
    return next(i for i, lp in enumerate(loops) if lp is loop)


def _padding_pattern(realize: BlockRealize, analyzer: Analyzer) -> tuple:
    """(in-bound value, in-bound condition over the loops, in-bound region per iterator, pad value)."""
    block = realize.block

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(f"decompose_padding: block '{block.name_hint}' does not match the padding "
                             f"pattern: {why}")
    store = block.body
    if not isinstance(store, BufferStore):
        raise refuse("its body must be one store to the buffer it writes")
    call = store.value
    if not (isinstance(call, Call) and getattr(call.op, "name", None) == "tir.if_then_else"):
        raise refuse("the stored value must be T.if_then_else(in-bound condition, value, pad value)")
    condition, value, pad_value = call.args
    if not isinstance(pad_value, (IntImm, FloatImm)):
        raise refuse("the pad value must be a constant")
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    parts = conjuncts(substitute(condition, bindings)) + conjuncts(realize.predicate)
    predicate = simplify_condition([_drop_likely(p) for p in parts], analyzer)
    if isinstance(predicate, IntImm) and predicate.value:
        raise refuse("the in-bound predicate is trivial")
    region = _in_bound_region(list(realize.iter_values), conjuncts(predicate), analyzer)
    if region is None:
        raise refuse("the block iterators are not independent with respect to the padding condition")
    return value, predicate, region, pad_value


def _drop_likely(e: PrimExpr) -> PrimExpr:
    if isinstance(e, Call) and getattr(e.op, "name", None) == "tir.likely":
        return e.args[0]
    return e


def simplify_condition(parts: list, analyzer: Analyzer) -> PrimExpr:
    """The conjunction of ``parts`` with their sides simplified, ``a >= b`` written ``b <= a``,
    and the parts the ranges prove dropped (TVM's simplified form)."""
    kept = []
    for part in parts:
        if isinstance(part, (GE, GT)):
            part = (LE if isinstance(part, GE) else LT)(part.b, part.a)
        if isinstance(part, (LE, LT)):
            part = type(part)(analyzer.simplify(part.a), analyzer.simplify(part.b))
            proved = analyzer.prove(part)
            if proved is True:
                continue
            if proved is False:
                return const(False)
        elif isinstance(part, IntImm) and part.value:
            continue
        kept.append(part)
    return conjoin(kept) if kept else const(True)


def _in_bound_region(values: list, parts: list, analyzer: Analyzer) -> list | None:
    """Per binding ``e``, the range [lo, hi] of ``e`` where every part of the condition holds;
    None when a part bounds no binding."""
    bounds = [analyzer.bound(e) for e in values]
    if any(b is None for b in bounds):
        return None
    lows, highs = [b[0] for b in bounds], [b[1] for b in bounds]
    for part in parts:
        if not isinstance(part, (LE, LT)):
            return None
        slack = 1 if isinstance(part, LT) else 0  # a < b: b - a - 1 >= 0
        diff = Sub(part.b, part.a)
        for k, e in enumerate(values):
            rest = analyzer.simplify(Sub(diff, e))  # e + c >= slack: e >= slack - c
            if isinstance(rest, IntImm):
                lows[k] = max(lows[k], slack - rest.value)
                break
            rest = analyzer.simplify(Sub(Sub(const(0, e.dtype), diff), e))  # c - e >= slack: e <= c - slack
            if isinstance(rest, IntImm) and not isinstance(e, IntImm):
                highs[k] = min(highs[k], -rest.value - slack)
                break
        else:
            return None
    return [Range(const(lo, e.dtype), const(hi - lo + 1, e.dtype)) for lo, hi, e in zip(lows, highs, values)]


def _simplify(e: PrimExpr, analyzer: Analyzer) -> PrimExpr:
    """``analyzer.simplify``, which also gives a variable of a unit loop as its one value."""
    e = analyzer.simplify(e)
    b = analyzer.bound(e) if isinstance(e, Var) else None
    return const(b[0], e.dtype) if b is not None and b[0] == b[1] else e


def _fresh(var: Var) -> Var:
    return Var(var.name, var.dtype)


def _const_block(realize: BlockRealize, pad_value: PrimExpr, loops: list, analyzer: Analyzer) -> Stmt:
    """The nest ``for ...: block_pad_const: buf[...] = pad value`` over the loops up to the chosen one."""
    block = realize.block
    mapping: dict = {iv.var: _fresh(iv.var) for iv in block.iter_vars}
    iters = tuple(IterVar(iv.dom, mapping[iv.var], DATA_PAR) for iv in block.iter_vars)
    new_vars = [_fresh(lp.loop_var) for lp in loops]
    mapping.update((lp.loop_var, v) for lp, v in zip(loops, new_vars))

    def rewrite(e: PrimExpr) -> PrimExpr:
        return _simplify(substitute(e, mapping), analyzer)
    write = block.writes[0]
    store = block.body
    new_block = Block(iters, writes=(BufferRegion(write.buffer, tuple(
        Range(rewrite(r.min), rewrite(r.extent)) for r in write.region)),),
        name_hint=f"{block.name_hint}_pad_const",
        body=BufferStore(store.buffer, pad_value, tuple(rewrite(i) for i in store.indices)))
    nest: Stmt = BlockRealize(tuple(rewrite(v) for v in realize.iter_values),
                              simplify_condition(conjuncts(substitute(realize.predicate, mapping)), analyzer),
                              new_block)
    for lp, var in zip(loops, new_vars):
        nest = For(var, lp.min, lp.extent, SERIAL, nest)
    return nest


def _in_bound_block(realize: BlockRealize, value: PrimExpr, predicate: PrimExpr, region: list, loops: list,
                    analyzer: Analyzer) -> Stmt:
    """The nest of the block itself over the in-bound region only: an iterator bound to one of the
    loops moves that loop's range to start at 0."""
    block = realize.block
    ranges = {lp.loop_var: (lp.min, lp.extent) for lp in loops}
    mapping: dict = {}
    iters, bindings = [], []
    for iv, binding, r in zip(block.iter_vars, realize.iter_values, region):
        var = _fresh(iv.var)
        dom = Range(const(0, var.dtype), r.extent)
        iters.append(IterVar(dom, var, DATA_PAR))
        mapping[iv.var] = _plus(var, r.min)
        if isinstance(binding, Var) and binding in ranges:
            ranges[binding] = (dom.min, dom.extent)
            bindings.append(binding)
            mapping[binding] = _plus(binding, r.min)
            analyzer.bind(binding, 0, dom.extent.value)
        else:
            bindings.append(analyzer.simplify(Sub(binding, r.min)))

    def rewrite(e: PrimExpr) -> PrimExpr:
        return _simplify(substitute(e, mapping), analyzer)

    def regions(rs: tuple) -> tuple:
        return tuple(BufferRegion(b.buffer, tuple(Range(rewrite(x.min), rewrite(x.extent)) for x in b.region))
                     for b in rs)
    store = block.body
    new_block = Block(tuple(iters), reads=regions(block.reads), writes=regions(block.writes),
                      name_hint=block.name_hint,
                      body=BufferStore(store.buffer, IndexSimplifier(analyzer).visit(substitute(value, mapping)),
                                       tuple(rewrite(i) for i in store.indices)))
    nest: Stmt = BlockRealize(tuple(bindings), simplify_condition(
        conjuncts(substitute(predicate, mapping)), analyzer), new_block)
    for lp in loops:
        low, extent = ranges[lp.loop_var]
        nest = lp.with_changes(min=low, extent=extent, body=nest)
    return nest


def _plus(var: Var, offset: PrimExpr) -> PrimExpr:
    return var if isinstance(offset, IntImm) and offset.value == 0 else Add(var, offset)
