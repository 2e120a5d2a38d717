"""compute_at and reverse_compute_at: move a block under a loop of its consumer or producer.

The moved block computes, in each iteration of the loop, just the region the blocks under the
loop need (compute_at) or produce (reverse_compute_at). That region is found per buffer
dimension as the bounds of the access over the loops inside the target loop, the target loop and
those around it staying symbolic. New loops ``ax0, ax1, ...`` cover the region's dimensions of
more than one element; a dimension of one element binds the iterator directly.
"""
from __future__ import annotations

from dataclasses import replace
from functools import reduce
from math import gcd

from ...ir.analysis import substitute
from ...ir.arith import CANONICAL, Analyzer, Sum
from ...ir.arith.split_sum import SplitTerm
from ...ir.buffer import Buffer
from ...ir.expr import (GE, LT, Add, And, FloorDiv, FloorMod, IntImm, IterVar, Mul, PrimExpr, Sub, Var, const,
                        is_const_int)
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, For, SeqStmt, Stmt, seq
from ...ir.structural import structural_equal
from ...ir.visitor import walk
from ..scopes import GLOBAL, can_relax_under_thread, storage_rank
from .errors import ScheduleError
from .tree import (blocks_under, enclosing_loops, find_block, find_loop, parent_block, remove_block,
                   replace_stmts, walk_with_path)


def _symbolic_bounds(e: PrimExpr, inner: dict[int, tuple[Var, int, int]],
                     outer: dict[int, tuple[Var, int, int]] | None = None) -> tuple[PrimExpr, PrimExpr] | None:
    """[lo, hi] of ``e`` as the ``inner`` loops range over their domains; other variables stay.
    A term mixing inner and ``outer`` loop variables is bounded when it takes one value over all
    of them (``(co_0 * 64 + co_1 * 8 + co_2) // 128`` with co_0 < 2: always 0), as TVM's analyzer,
    which knows the outer loops' ranges, finds."""
    analyzer, everything = Analyzer(), Analyzer()
    for var, lo, extent in inner.values():
        analyzer.bind(var, lo, extent)
        everything.bind(var, lo, extent)
    for var, lo, extent in (outer or {}).values():
        everything.bind(var, lo, extent)
    s = analyzer.canonical(e)
    fixed, low, high = [], 0, 0
    canonical = everything.with_mode(CANONICAL)
    for t in [u for term in s.terms for u in _digits(canonical, term, e.dtype)]:
        if any(isinstance(n, Var) and id(n) in inner for n in _vars(t.index)):
            b = analyzer.term_bound(t)
            if b is None and (whole := everything.term_bound(t)) is not None and whole[0] == whole[1]:
                b = whole
            if b is None:
                return None
            a, c = b[0] * t.scale, b[1] * t.scale
            low, high = low + min(a, c), high + max(a, c)
        elif (whole := everything.term_bound(t)) is not None and whole[0] == whole[1]:
            low, high = low + whole[0] * t.scale, high + whole[0] * t.scale  # (``co_0 // 2``, co_0 < 2)
        else:
            fixed.append(t)
    rest = Sum(tuple(fixed), s.base)
    dtype = e.dtype
    return (analyzer.simplify(Add(analyzer.to_expr(rest, dtype), const(low, dtype))),
            analyzer.simplify(Add(analyzer.to_expr(rest, dtype), const(high, dtype))))


def _digits(canonical: Analyzer, t: SplitTerm, dtype) -> tuple[SplitTerm, ...]:
    """A division or modulo term split into its digits by the CANONICAL analyzer, which knows every
    loop's range, as TVM's analyzer simplifies it: ``(bx * 16 + ty) % 256`` is ``bx % 16 * 16 + ty``
    for ``ty`` < 16, ``(hi * 16 + lo) // 8`` is ``hi * 2 + lo // 8``; a quotient the outer loops
    alone decide loses its inner loops (``(f0 * 2 + f1) % 4 // 2`` is ``f0 % 2``), exact where a
    bound would widen it."""
    if t.lower == 1 and t.upper is None:
        return (t,)
    split = canonical.canonical(canonical.to_expr(Sum((t,), 0), dtype))
    return split.terms if not split.base else (t,)


def _interval(e: PrimExpr, inner: dict[int, tuple[Var, int, int]]) -> tuple[PrimExpr, PrimExpr] | None:
    """[lo, hi] of ``e`` by interval arithmetic with symbolic ends, the ``inner`` loops over their
    domains (``(w + rw_0) // 2`` with w < 8: ``[rw_0 // 2, (rw_0 + 7) // 2]``, a size that varies
    with rw_0, as TVM's integer sets give it); None for what it cannot bound."""
    if isinstance(e, IntImm):
        return e, e
    if isinstance(e, Var):
        if id(e) not in inner:
            return e, e
        _, lo, extent = inner[id(e)]
        return const(lo, e.dtype), const(lo + extent - 1, e.dtype)
    if not isinstance(e, (Add, Sub, Mul, FloorDiv, FloorMod)):
        return None
    a = _interval(e.a, inner)
    if a is None:
        return None
    if isinstance(e, (Add, Sub)):
        b = _interval(e.b, inner)
        if b is None:
            return None
        return (Add(a[0], b[0]), Add(a[1], b[1])) if isinstance(e, Add) else (Sub(a[0], b[1]), Sub(a[1], b[0]))
    if not isinstance(e.b, IntImm):
        return None
    c = e.b.value
    if isinstance(e, Mul):
        return (Mul(a[0], e.b), Mul(a[1], e.b)) if c >= 0 else (Mul(a[1], e.b), Mul(a[0], e.b))
    if c <= 0:
        return None
    if isinstance(e, FloorDiv):
        return FloorDiv(a[0], e.b), FloorDiv(a[1], e.b)
    return const(0, e.dtype), const(c - 1, e.dtype)


def _vars(e: PrimExpr) -> list:
    return [n for n in walk(e) if isinstance(n, Var)]


def _region_under(loop: For, buffer: Buffer, writes: bool, around: list[For]) -> list[tuple[PrimExpr, PrimExpr]]:
    """Per dimension, [lo, hi] of what the blocks under ``loop`` write (or read) of ``buffer``;
    a loop of ``around`` (the loop and those outside it) of one iteration is its value there, as
    TVM's analyzer binds it, and one bound to threads that all see the buffer is covered whole."""
    units = {n.loop_var: n.min for n in around if is_const_int(n.extent, 1)}
    outer = {id(n.loop_var): (n.loop_var, n.min.value, n.extent.value) for n in around
             if isinstance(n.min, IntImm) and isinstance(n.extent, IntImm)}
    # (reverse_compute_at relaxes no thread loop outside ``loop``, as TVM's RelaxBufferRegions)
    shared_by = [] if writes else _threads_sharing(around, buffer.scope)
    found: list | None = None
    for node, path in walk_with_path(loop.body, (loop,)):
        # (a block inside another is covered by the outer one's regions, as TVM sees the scope)
        if not isinstance(node, BlockRealize) or any(isinstance(p, BlockRealize) for p in path):
            continue
        regions = node.block.writes if writes else node.block.reads
        inner_loops = [n for n in enclosing_loops(path) if n is not loop]
        inner = {id(n.loop_var): (n.loop_var, n.min.value, n.extent.value) for n in inner_loops + shared_by
                 if isinstance(n.min, IntImm) and isinstance(n.extent, IntImm)}
        symbolic = {id(n.loop_var): n for n in inner_loops if id(n.loop_var) not in inner}
        binding = dict(zip((iv.var for iv in node.block.iter_vars), node.iter_values))
        for region in regions:
            if region.buffer is not buffer:
                continue
            dims = []
            for r in region.region:
                used = [symbolic[id(v)] for v in _vars(substitute(r.min, binding)) if id(v) in symbolic]
                if used:  # (its range cannot be bounded by a number: the region would be wrong)
                    raise ScheduleError(f"the access of block '{node.block.name_hint}' to '{buffer.name}' "
                                        f"under loop '{loop.loop_var.name}' varies with loop "
                                        f"'{used[0].loop_var.name}' of symbolic extent")
                # (a loop of one iteration outside is its value: ``bx * 16 + ty`` is ``ty`` there)
                first = substitute(substitute(r.min, binding), units)
                last = substitute(substitute(Sub(Add(r.min, r.extent), const(1, r.min.dtype)), binding), units)
                lo = _symbolic_bounds(first, inner, outer) or _interval(first, inner)
                hi = _symbolic_bounds(last, inner, outer) or _interval(last, inner)
                if lo is None or hi is None:
                    raise ScheduleError(f"cannot bound the access of block '{node.block.name_hint}' to "
                                        f"'{buffer.name}' under loop '{loop.loop_var.name}'")
                dims.append((substitute(lo[0], units), substitute(hi[1], units)))
            found = dims if found is None else [_union(a, b) for a, b in zip(found, dims)]
    if found is None:
        raise ScheduleError(f"no block under loop '{loop.loop_var.name}' {'writes' if writes else 'reads'} "
                            f"buffer '{buffer.name}'")
    return found


def _threads_sharing(around: list[For], scope: str) -> list[For]:
    """The thread-bound loops of ``around`` whose threads all see a buffer of ``scope``, so the
    region computed covers every thread of them (TVM's CanRelaxStorageUnderThread): a shared
    buffer is one per thread block (threadIdx and vthread loops relax); a global buffer relaxes
    none (TVM's LoopDomainOfSRefTreePath adds these loops only for a scope below global)."""
    if storage_rank(scope) == GLOBAL:  # (a global buffer relaxes nothing outside the loop)
        return []
    return [n for n in around if n.thread_binding is not None
            and can_relax_under_thread(scope, n.thread_binding.thread_tag)]


def _union(a: tuple, b: tuple) -> tuple:
    analyzer = Analyzer()
    lo = analyzer.canonical(Sub(a[0], b[0]))
    hi = analyzer.canonical(Sub(a[1], b[1]))
    if lo.terms or hi.terms:
        raise ScheduleError("the blocks under the loop access regions whose union is not a box")
    return (a[0] if lo.base <= 0 else b[0], a[1] if hi.base >= 0 else b[1])


def _loop_analyzer(around: list[For]) -> Analyzer:
    analyzer = Analyzer()
    for node in around:
        if isinstance(node.min, IntImm) and isinstance(node.extent, IntImm):
            analyzer.bind(node.loop_var, node.min.value, node.extent.value)
    return analyzer


def _solve_affine(iter_vars: tuple, indices: list, required: list, around: list[For],
                  primitive: str) -> dict | None:
    """The block variables' ranges that cover ``required`` when ``indices`` are a one-to-one dense
    mixed-radix map of them (``vg * 48 + vl`` with vl < 48: vg is the index // 48, vl its % 48),
    as TVM inverts an affine iteration map; None for any other map (``vg * 48 + vl`` with vl < 34
    skips values: no inverse). Below a digit that varies over the region, a digit that does not
    run over its whole domain covers it (compute_at; TVM's range of its values at the region's two
    ends would miss what lies between) or is refused (reverse_compute_at: the consumer would
    read what other iterations produce)."""
    # (a symbolic extent, None here, can only be the highest place of an index)
    extents = {id(iv.var): iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else None
               for iv in iter_vars if is_const_int(iv.dom.min, 0)}
    if len(extents) != len(iter_vars):
        return None
    analyzer, used, places = _loop_analyzer(around).with_mode(CANONICAL), set(), []
    for index in indices:
        s = Analyzer().canonical(index)
        reach = 1
        for t in sorted(s.terms, key=lambda t: t.scale):
            if (not isinstance(t.index, Var) or id(t.index) not in extents or id(t.index) in used
                    or t.lower != 1 or t.upper is not None or reach is None or t.scale != reach):
                return None
            used.add(id(t.index))
            reach = None if extents[id(t.index)] is None else reach * extents[id(t.index)]
        places.append((s.base, sorted(s.terms, key=lambda t: -t.scale)))
    if any((n is None or n > 1) and var_id not in used for var_id, n in extents.items()):
        return None
    ranges = {}
    for (base, terms), (low, high), index in zip(places, required, indices):
        exact = True
        for k, t in enumerate(terms):  # the highest place first
            n = extents[id(t.index)]
            ends = []
            for point in (low, high):
                q = FloorDiv(Sub(point, const(base, index.dtype)), const(t.scale, index.dtype))
                ends.append(analyzer.simplify(q if k == 0 else FloorMod(q, const(n, index.dtype))))
            if not exact and not (is_const_int(ends[0], 0) and is_const_int(ends[1], n - 1)):
                if primitive == "reverse_compute_at":  # (the consumer would read other iterations' elements)
                    raise ScheduleError(f"{primitive}: what one iteration of the loop produces is no "
                                        f"box of the consumer's iterators in {index.script()}")
                ends = [const(0, index.dtype), const(n - 1, index.dtype)]
            diff = analyzer.canonical(Sub(ends[1], ends[0]))
            exact = exact and not diff.terms and diff.base == 0
            ranges[id(t.index)] = tuple(ends)
    return ranges


def _solve_dimwise(indices: list, required: list, around: list[For], primitive: str) -> dict:
    """Per buffer dimension, the range of the one block variable its index names that covers the
    required [lo, hi] (``v``, ``v * c``, ``x // c``; ``v % c`` constrains nothing), as TVM solves
    an index that is no affine map; any other index is refused, as TVM refuses it."""
    analyzer, ranges = _loop_analyzer(around), {}
    for index, (low, high) in zip(indices, required):
        provided = Analyzer().simplify(index)
        if isinstance(provided, IntImm):
            continue
        solved = _solve_index(provided, low, high, analyzer, primitive)
        if solved is not None:
            var, dim = solved
            ranges[id(var)] = _union(ranges[id(var)], dim) if id(var) in ranges else dim
    return ranges


def _solve_index(e: PrimExpr, low: PrimExpr, high: PrimExpr, analyzer: Analyzer, primitive: str):
    if isinstance(e, Var):
        return e, (low, high)
    if isinstance(e, Mul) and (isinstance(e.a, Var) or isinstance(e.b, Var)):
        var, c = (e.a, e.b) if isinstance(e.a, Var) else (e.b, e.a)
        if primitive == "reverse_compute_at" and not is_const_int(c, 1):
            # (a consumer at [low // c, high // c] would read elements that other iterations of
            # the loop produce, stale once the buffer lives in the loop; TVM's iteration-map
            # check fails on such a read)
            raise ScheduleError(f"{primitive}: the read {e.script()} of the consumer strides over "
                                f"what one iteration of the loop produces")
        return var, (analyzer.simplify(FloorDiv(low, c)), analyzer.simplify(FloorDiv(high, c)))
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value >= 1:
        c = e.b
        wider = (analyzer.simplify(Mul(low, c)), analyzer.simplify(Add(Mul(high, c), const(c.value - 1, c.dtype))))
        return _solve_index(e.a, *wider, analyzer, primitive)
    if isinstance(e, FloorMod) and isinstance(e.a, Var):
        return None  # (``v % c`` takes every value whatever v's range: no constraint on v)
    raise ScheduleError(f"{primitive}: TensorRegion pattern match failed: {e.script()}")


def _rebuild_block(realize: BlockRealize, bounds: dict, preserve_unit_loops: bool, around: list[For]) -> Stmt:
    """``realize`` over new loops that cover ``bounds`` (id of an iterator -> [lo, hi], from the
    regions of the buffers it accesses; an iterator not there covers its whole domain)."""
    block = realize.block
    analyzer = Analyzer(iter_map_order=True)  # (``fused % 8 + ax1``, as TVM writes it)
    loop_vars, extents, values = [], [], []
    whole: set = set()
    for iv in block.iter_vars:
        if id(iv.var) in bounds:
            lo, hi = _within_domain(*bounds[id(iv.var)], iv, around)
            extent = analyzer.simplify(Sub(hi, lo))
            # (a size that varies with an outer loop gives a loop of that extent: a dynamic loop,
            # which DisallowDynamicLoop rejects in tuning, as TVM's does)
            size = extent.value + 1 if isinstance(extent, IntImm) else \
                analyzer.simplify(Add(extent, const(1, extent.dtype)))
        else:  # an iterator the buffer access does not name: its whole domain
            lo, size = iv.dom.min, iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else iv.dom.extent
            if not isinstance(size, int):
                whole.add(id(iv.var))  # (a loop as long as its symbolic domain: nothing to guard)
        if isinstance(size, int) and size == 1 and not preserve_unit_loops:
            values.append(analyzer.simplify(lo))
            continue
        var = Var(f"ax{len(loop_vars)}", iv.var.dtype)
        loop_vars.append(var)
        extents.append(size)
        # (a constant start stays first, unfolded, as TVM writes ``1 + ax0``)
        values.append(Add(lo, var) if isinstance(lo, IntImm) and lo.value else analyzer.simplify(Add(lo, var)))
    guard = _domain_guard(block, values, around, loop_vars, extents, whole)
    stmt: Stmt = BlockRealize(tuple(values), guard, block)
    for var, size in zip(reversed(loop_vars), reversed(extents)):
        stmt = For(var, const(0, var.dtype), const(size, var.dtype) if isinstance(size, int) else size, "serial", stmt)
    return stmt


def _within_domain(lo: PrimExpr, hi: PrimExpr, iv: IterVar, around: list[For]) -> tuple[PrimExpr, PrimExpr]:
    """The region [lo, hi] of an iterator cut to its domain where that leaves constant bounds, or
    the domain where the region surely covers it (TVM's BlockVarDomainInfo.Simplify): a split
    tile larger than the iterator's domain covers the domain, not the tile."""
    if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
        return lo, hi
    dom_lo, dom_hi = iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value - 1
    analyzer = _loop_analyzer(around)
    low, high = analyzer.simplify(lo), analyzer.simplify(hi)
    if isinstance(low, IntImm) and isinstance(high, IntImm):
        return const(max(low.value, dom_lo), lo.dtype), const(min(high.value, dom_hi), hi.dtype)
    low_bound, high_bound = analyzer.bound(lo), analyzer.bound(hi)
    if low_bound is not None and high_bound is not None and low_bound[1] <= dom_lo and high_bound[0] >= dom_hi:
        return const(dom_lo, lo.dtype), const(dom_hi, hi.dtype)
    return lo, hi


def _domain_guard(block: Block, values: list, around: list[For], loop_vars: list, extents: list,
                  whole: set) -> PrimExpr:
    """``T.where`` keeping each binding inside its iterator's domain where the region overshoots it
    (a split that does not divide leaves the accessed region larger than the buffer); iterators
    of ``whole`` run over their whole domain."""
    analyzer = _loop_analyzer(around)
    for var, size in zip(loop_vars, extents):
        largest = (size, size) if isinstance(size, int) else analyzer.bound(size)
        if largest is not None:  # (a loop of varying extent: bounded by its largest)
            analyzer.bind(var, 0, largest[1])
    units = {var: const(0, var.dtype) for var, size in zip(loop_vars, extents) if isinstance(size, int) and size == 1}
    conds: list[PrimExpr] = []
    for iv, value in zip(block.iter_vars, values):
        if id(iv.var) in whole:
            continue
        if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
            conds.extend(_symbolic_domain_guard(iv, value, around, analyzer, units))
            continue
        lo, end = iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value
        b = analyzer.bound(value)
        if b is None or b[0] < lo:
            conds.append(GE(value, const(lo, value.dtype)))
        if b is None or b[1] >= end:
            conds.append(_below(analyzer, value, end, {id(v) for v in loop_vars}))
    guard = conds[0] if conds else const(True)
    for cond in conds[1:]:
        guard = And(guard, cond)
    return guard


def _below(analyzer: Analyzer, value: PrimExpr, end: int, inner: set) -> PrimExpr:
    """``value < end``; with ``value = outer * g + r``, ``r`` (the new loops' part) in [0, g) and g
    dividing ``end``, the same as ``outer < end / g`` (``ax2_0 * 8 + ax0 < 256``: ``ax2_0 < 32``),
    as TVM's simplifier writes it."""
    s = analyzer.canonical(value)
    outer = [t for t in s.terms if not any(id(v) in inner for v in _vars(t.index))]
    rest = Sum(tuple(t for t in s.terms if t not in outer), s.base)
    g = reduce(gcd, (t.scale for t in outer), 0)
    bound = analyzer.sum_bound(rest)
    if g <= 1 or end % g or bound is None or bound[0] < 0 or bound[1] >= g:
        return LT(value, const(end, value.dtype))
    quotient = Sum(tuple(replace(t, scale=t.scale // g) for t in outer), 0)
    return LT(analyzer.to_expr(quotient, value.dtype), const(end // g, value.dtype))


def _symbolic_domain_guard(iv: IterVar, value: PrimExpr, around: list[For], analyzer: Analyzer,
                           units: dict) -> list[PrimExpr]:
    """The conditions keeping ``value`` in a symbolic domain: none when it is a loop variable
    whose loop has exactly that domain (a row loop ``for i in range(n)`` bound to ``i``), give
    or take new loops of one iteration (``units``)."""
    simplify = Analyzer().simplify
    plain = simplify(substitute(value, units))  # (new loops of one iteration are 0)
    # a loop's own variable over that domain, or ``fused // c`` with the loop running n * c times
    var, c = (plain.a, plain.b) if isinstance(plain, FloorDiv) and isinstance(plain.b, IntImm) else (plain, None)
    for node in around:
        if var is node.loop_var and structural_equal(node.min, iv.dom.min) and (c is None or is_const_int(node.min, 0)):
            if structural_equal(simplify(node.extent), iv.dom.extent if c is None else simplify(Mul(iv.dom.extent, c))):
                return []
    if is_const_int(iv.dom.min, 0) and _tiles_domain(value, iv.dom.extent, around, analyzer):
        return []
    if is_const_int(iv.dom.min, 0) and _non_negative(value, around, analyzer):
        return [LT(value, iv.dom.extent)]  # (the lower bound holds: TVM proves it and leaves it out)
    return [GE(value, iv.dom.min), LT(value, Add(iv.dom.min, iv.dom.extent))]


def _non_negative(value: PrimExpr, around: list[For], analyzer: Analyzer) -> bool:
    """Whether ``value`` is a sum of non-negative multiples of loop variables over ``[0, m)``."""
    starts = {id(node.loop_var) for node in around if is_const_int(node.min, 0)}
    s = analyzer.canonical(value)
    return s.base >= 0 and all(t.scale > 0 and isinstance(t.index, Var) and t.upper is None and
                               (id(t.index) in starts or (analyzer.bound(t.index) or (-1,))[0] >= 0)
                               for t in s.terms)


def _tiles_domain(value: PrimExpr, extent: PrimExpr, around: list[For], analyzer: Analyzer) -> bool:
    """Whether ``value`` is ``v * c + rest`` with ``v`` a loop over ``[0, m)``, ``rest`` in
    ``[0, c)`` and ``extent`` being ``m * c``: a tile of a padded symbolic domain (a loop over
    ``(n + 31) // 32`` tiles of 32 rows covers ``(n + 31) // 32 * 32`` exactly). ``analyzer``
    knows the constant loops."""
    for node in around:
        if isinstance(node.extent, IntImm) or not is_const_int(node.min, 0):
            continue
        rest = analyzer.simplify(substitute(value, {node.loop_var: const(0, node.loop_var.dtype)}))
        tile = analyzer.simplify(Sub(value, rest))
        if tile is node.loop_var:
            size = const(1, tile.dtype)
        elif isinstance(tile, Mul) and tile.a is node.loop_var and isinstance(tile.b, IntImm):
            size = tile.b
        else:
            continue
        bound = analyzer.bound(rest)
        if (bound is not None and 0 <= bound[0] and bound[1] < size.value
                and structural_equal(analyzer.simplify(Mul(node.extent, size)), analyzer.simplify(extent))):
            return True
    return False


def _check_same_scope(realize: BlockRealize, path: tuple, loop: For, loop_path: tuple, primitive: str) -> None:
    name = realize.block.name_hint
    if any(node is loop for node in path):
        raise ScheduleError(f"{primitive}: loop '{loop.loop_var.name}' is an ancestor of block '{name}'")
    if parent_block(path) is not parent_block(loop_path):
        raise ScheduleError(f"{primitive}: block '{name}' and loop '{loop.loop_var.name}' are not in the "
                            f"same scope")


def compute_at(func: PrimFunc, realize: BlockRealize, path: tuple, loop: For, loop_path: tuple,
               preserve_unit_loops: bool, reverse: bool) -> PrimFunc:
    primitive = "reverse_compute_at" if reverse else "compute_at"
    block = realize.block
    name = block.name_hint
    _check_same_scope(realize, path, loop, loop_path, primitive)
    if reverse:  # (what the block reads of each buffer produced under the loop)
        accesses = [r for r in block.reads if any(
            any(w.buffer is r.buffer for w in b.block.writes) for b in blocks_under(loop.body))]
        if not accesses:
            raise ScheduleError(f"reverse_compute_at: block '{name}' reads no buffer that the blocks "
                                f"under loop '{loop.loop_var.name}' produce")
        produced = {id(r.buffer) for r in accesses}
        others = [b for b in blocks_under(func.body) if b not in blocks_under(loop.body)
                  and any(id(w.buffer) in produced for w in b.block.writes)]
        buffer = accesses[0].buffer
    else:
        if any(w.buffer is b for w in block.writes for b in func.buffer_map.values()):
            raise ScheduleError(f"compute_at: block '{name}' is an output block (it writes a function "
                                f"parameter)")
        # several outputs (argmax's index and value) must be written at the same place
        if not block.writes or any(not structural_equal(tuple(r.min for r in w.region),
                                                        tuple(r.min for r in block.writes[0].region))
                                   for w in block.writes[1:]):
            raise ScheduleError(f"compute_at: block '{name}' must write one buffer, or several at the "
                                f"same indices")
        served = [w for w in block.writes
                  if any(x.buffer is w.buffer for b in blocks_under(loop.body) for x in b.block.reads)]
        accesses = [served[0] if served else block.writes[0]]
        buffer = accesses[0].buffer
        written = {id(w.buffer) for w in block.writes}
        others = [b for b in blocks_under(func.body) if b not in blocks_under(loop.body)
                  and b is not realize and any(id(x.buffer) in written for x in b.block.reads)]
    if others:
        raise ScheduleError(f"{primitive}: block '{others[0].block.name_hint}' outside loop "
                            f"'{loop.loop_var.name}' also {'writes' if reverse else 'reads'} buffer "
                            f"'{buffer.name}' of block '{name}'")
    around = enclosing_loops(loop_path) + [loop]
    bounds: dict = {}
    for accessed in accesses:
        if any(r.extent is not None and not is_const_int(r.extent, 1) for r in accessed.region):
            raise ScheduleError(f"{primitive}: block '{name}' must access '{accessed.buffer.name}' one "
                                f"element at a time")
        dims = _region_under(loop, accessed.buffer, reverse, around)
        indices = [r.min for r in accessed.region]
        solved = _solve_affine(block.iter_vars, indices, dims, around, primitive) or \
            _solve_dimwise(indices, dims, around, primitive)
        for var_id, dim in solved.items():  # (several buffers: the union of what they give)
            bounds[var_id] = _union(bounds[var_id], dim) if var_id in bounds else dim
    moved = _rebuild_block(realize, bounds, preserve_unit_loops, around)
    # The block leaves its place, then goes into the loop's body next to the blocks it serves.
    func = remove_block(func, realize, primitive)
    loop = find_loop(func, loop.loop_var)[0]
    children = list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]
    buffers = {id(a.buffer) for a in accesses}
    serves = [i for i, child in enumerate(children)
              if any(any(id(x.buffer) in buffers for x in (r.block.writes if reverse else r.block.reads))
                     for r in blocks_under(child))]
    at = serves[-1] + 1 if reverse else serves[0]
    children.insert(at, moved)
    func = replace_stmts(func, {id(loop): loop.with_changes(body=seq(children))})
    if find_block(func, name) is None:
        raise ScheduleError(f"{primitive}: block '{name}' was lost")
    _check_order(func, buffer, name, reverse, primitive)
    return func


def _check_order(func: PrimFunc, buffer: Buffer, name: str, reverse: bool, primitive: str) -> None:
    """The moved block must still run after what it reads and before what reads it."""
    order = [r.block for r in blocks_under(func.body)]
    index = next(i for i, b in enumerate(order) if b.name_hint == name)
    moved = order[index]
    for i, b in enumerate(order):
        if b is moved:
            continue
        writes_mine = any(w.buffer is x.buffer for w in b.writes for x in moved.reads)
        reads_mine = any(x.buffer is w.buffer for x in b.reads for w in moved.writes)
        if (writes_mine and i > index) or (reads_mine and i < index):
            raise ScheduleError(f"{primitive}: moving block '{name}' there would break its dependence "
                                f"on block '{b.name_hint}'")


__all__ = ["compute_at"]
