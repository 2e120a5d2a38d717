"""blockize: the subtree under a loop becomes the body of a new outer block ``B_o``.

Each iterator's binding divides into a part over the loops outside (the outer iterator ``vi_o``)
and a part over the loops inside (the inner iterator ``vi_i``): ``vi = vi_o * 16 + vi_i``. The
outer block reads and writes the regions the inner block touches over one outer iteration.
"""
from __future__ import annotations

from ...ir.analysis import infer_block_regions, substitute
from ...ir.arith import Analyzer, Sum
from ...ir.expr import DATA_PAR, Add, FloorDiv, IntImm, IterVar, Mul, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, For, Stmt
from ...ir.structural import structural_equal
from .errors import ScheduleError
from .loop_transform import conjoin, conjuncts, uses_var
from .tree import blocks_under, find_loop, replace_stmts


def blockize(func: PrimFunc, loop: For) -> tuple[PrimFunc, str]:
    realizes = blocks_under(loop.body)
    if len(realizes) != 1:
        raise ScheduleError(f"blockize: loop '{loop.loop_var.name}' must hold exactly one block, it holds "
                            f"{len(realizes)}")
    realize = realizes[0]
    block = realize.block
    name = block.name_hint
    chain, node = [], loop
    while isinstance(node, For):
        if not (isinstance(node.min, IntImm) and isinstance(node.extent, IntImm)):
            raise ScheduleError(f"blockize: loop '{node.loop_var.name}' needs constant bounds")
        chain.append(node)
        node = node.body
    if node is not realize:
        raise ScheduleError(f"blockize: the loops under '{loop.loop_var.name}' must form a single nest "
                            f"around block '{name}'")
    analyzer = Analyzer(iter_map_order=True)  # (TVM divides the bindings by iter maps: terms keep their order)
    for n in chain:
        analyzer.bind(n.loop_var, n.min.value, n.extent.value)
    inner_ids = {id(n.loop_var) for n in chain}
    outer_iters, outer_values, inner_iters, inner_values, mapping = [], [], [], [], {}
    parts = []  # (original iterator, outer var, inner iterator or None, its binding, has an outer part)
    for iv, value in zip(block.iter_vars, realize.iter_values):
        s = analyzer.canonical(value)
        inner = Sum(tuple(t for t in s.terms if uses_var(t.index, inner_ids)), 0)
        outer = Sum(tuple(t for t in s.terms if not uses_var(t.index, inner_ids)), s.base)
        bound = analyzer.sum_bound(inner)
        if bound is None or bound[0] < 0:
            raise ScheduleError(f"blockize: the binding of '{iv.var.name}' in block '{name}' cannot be "
                                f"divided at loop '{loop.loop_var.name}'")
        size = bound[1] + 1
        extent = analyzer.canonical(iv.dom.extent)  # (symbolic when padded to a multiple: (n + 127) // 128 * 128)
        if (extent.base % size or any(t.scale % size for t in extent.terms) or outer.base % size
                or any(t.scale % size for t in outer.terms)):
            raise ScheduleError(f"blockize: the binding of '{iv.var.name}' in block '{name}' is not "
                                f"divisible by the subspace of loop '{loop.loop_var.name}'")
        dtype = iv.var.dtype
        vo = Var(f"{iv.var.name}_o", dtype)
        outer_extent = analyzer.simplify(FloorDiv(iv.dom.extent, const(size, dtype)))
        if len(outer.terms) > 1 and isinstance(outer_extent, Mul) and isinstance(outer_extent.b, IntImm):
            # (TVM multiplies a fused binding's extents from the innermost: 2 * 4 * E is 8 * E)
            outer_extent = Mul(outer_extent.b, outer_extent.a)
        outer_iters.append(IterVar(Range(const(0, dtype), outer_extent), vo, iv.iter_type))
        outer_values.append(analyzer.to_expr(analyzer.scale_down(outer, size), dtype))
        if size == 1:
            mapping[iv.var] = vo
            parts.append((iv, vo, None, None, True))
            continue
        vi = Var(f"{iv.var.name}_i", dtype)
        inner_iters.append(IterVar(Range(const(0, dtype), const(size, dtype)), vi, iv.iter_type))
        inner_values.append(analyzer.to_expr(inner, dtype))
        has_outer = bool(outer.terms) or outer.base != 0
        mapping[iv.var] = Add(Mul(vo, const(size, dtype)), vi) if has_outer else vi
        parts.append((iv, vo, inner_iters[-1], inner_values[-1], has_outer))
    reads = tuple(substitute(r, mapping) for r in block.reads)
    writes = tuple(substitute(w, mapping) for w in block.writes)
    if block.init is not None:  # the update now reads what it accumulates into
        reads = tuple(w for w in writes if not any(structural_equal(w, r) for r in reads)) + reads
    inner_block = Block(tuple(inner_iters), block.alloc_buffers, block.match_buffers, reads, writes, name,
                        None, substitute(block.body, mapping), block.annotations)
    # Guards on the outer loops alone move to the outer block (its init must obey them too).
    guards = conjuncts(realize.predicate)
    outer_guard = conjoin([g for g in guards if not uses_var(g, inner_ids)])
    inner_guards = [g for g in guards if uses_var(g, inner_ids)]
    body = _rebuild(chain, BlockRealize(tuple(inner_values), conjoin(inner_guards), inner_block))
    init = None if block.init is None else _outer_init(block, chain, parts, inner_guards)
    probe = Block(tuple(outer_iters), init=init, body=body, name_hint=f"{name}_o")
    reads, writes = infer_block_regions(probe)
    outer_block = probe.with_changes(reads=reads, writes=writes)
    outer = BlockRealize(tuple(outer_values), outer_guard, outer_block)
    func = replace_stmts(func, {id(find_loop(func, loop.loop_var)[0]): outer})
    return func, f"{name}_o"


def _outer_init(block: Block, chain: list[For], parts: list, inner_guards: list) -> Stmt:
    """The outer block's init: the original init over the spatial inner iterators (``vi_i_init``),
    under copies of the loops they are bound to."""
    spatial = [(iv, vo, inner, value, has_outer) for iv, vo, inner, value, has_outer in parts
               if iv.iter_type == DATA_PAR and inner is not None]
    used = [n for n in chain if any(uses_var(value, {id(n.loop_var)}) for _, _, _, value, _ in spatial)]
    loop_map = {n.loop_var: Var(n.loop_var.name, n.loop_var.dtype) for n in used}
    mapping, iters, values = {}, [], []
    for iv, vo, inner, value, has_outer in parts:
        if inner is None:
            mapping[iv.var] = vo
            continue
        if iv.iter_type != DATA_PAR:
            continue
        var = Var(f"{inner.var.name}_init", inner.var.dtype)
        iters.append(IterVar(inner.dom, var, DATA_PAR))
        values.append(substitute(value, loop_map))
        mapping[iv.var] = Add(Mul(vo, inner.dom.extent), var) if has_outer else var
    init_block = Block(tuple(iters), (), (), (), tuple(substitute(w, mapping) for w in block.writes),
                       f"{block.name_hint}_init", None, substitute(block.init, mapping))
    absent = {id(n.loop_var) for n in chain} - {id(v) for v in loop_map}
    guard = conjoin([substitute(g, loop_map) for g in inner_guards if not uses_var(g, absent)])
    stmt: Stmt = BlockRealize(tuple(values), guard, init_block)
    for node in reversed(used):
        stmt = node.with_changes(loop_var=loop_map[node.loop_var], body=stmt)
    return stmt


def _rebuild(chain: list[For], inner: BlockRealize) -> For:
    body = inner
    for node in reversed(chain):
        body = node.with_changes(body=body)
    return body
