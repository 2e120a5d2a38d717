"""Loop transformations that change the iteration space's shape: split, fuse, merge and reorder.

Each takes the PrimFunc and the loops (found by the schedule) and returns the new PrimFunc and
the new loop variables. Block bindings are rewritten and brought to canonical form; a split
that overshoots the extent guards the blocks with ``T.where``.
"""
from __future__ import annotations

from dataclasses import replace
from math import prod
from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer, Sum, divisible
from ...ir.expr import LT, Add, And, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.arith import is_bijective_affine
from ...ir.stmt import SERIAL, BlockRealize, For, SeqStmt, Stmt, seq
from ...ir.node import Node, walk_fields
from ...ir.visitor import Mutator
from .errors import ScheduleError
from .tree import enclosing_loops, find_loop, parent_block, replace_stmts, walk_with_path


def const_extent(loop: For, primitive: str) -> int:
    if not isinstance(loop.extent, IntImm) or not is_const_int(loop.min, 0):
        raise ScheduleError(f"{primitive}: loop '{loop.loop_var.name}' must start at 0 and have a "
                            f"constant extent, it is [{loop.min}, {loop.extent})")
    return loop.extent.value


def uses_var(e: Any, var_ids: set) -> bool:
    """Whether a variable of ``var_ids`` occurs in ``e`` (iterative, without generators: the
    schedule asks it of every binding of every block under a loop)."""
    stack: list = [e]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        if isinstance(n, Var):
            if id(n) in var_ids:
                return True
        elif isinstance(n, Node):
            for name, _, _ in walk_fields(type(n)):
                value = getattr(n, name)
                if value is not None and not isinstance(value, (str, int, float)):
                    push(value)
        elif isinstance(n, (tuple, list)):
            stack.extend(n)
        elif isinstance(n, dict):
            stack.extend(n.keys())
            stack.extend(n.values())
    return False


class _Rebind(Mutator):
    """Replaces loop variables in a loop body; block bindings are simplified afterwards."""

    def __init__(self, mapping: dict, analyzer: Analyzer, guard: PrimExpr | None = None):
        self.mapping = mapping
        self.ids = {id(v) for v in mapping}
        self.analyzer = analyzer
        self.guard = guard

    def visit(self, node: Any) -> Any:
        # an expression, buffer or region (no block inside) is rebuilt only where it holds a variable
        if not isinstance(node, Stmt) and not uses_var(node, self.ids):
            return node
        if isinstance(node, PrimExpr):
            return substitute(node, self.mapping)
        return super().visit(node)

    def visit_Var(self, v: Var) -> Any:
        return self.mapping.get(v, v)

    def visit_BlockRealize(self, r: BlockRealize) -> Any:
        values = tuple(self.analyzer.simplify(substitute(v, self.mapping)) if uses_var(v, self.ids) else v
                       for v in r.iter_values)
        predicate = substitute(r.predicate, self.mapping)
        if self.guard is not None:
            predicate = self.guard if is_const_int(predicate, 1) else And(predicate, self.guard)
        block = self.visit(r.block)
        if (all(a is b for a, b in zip(values, r.iter_values)) and predicate is r.predicate
                and block is r.block):
            return r
        return BlockRealize(values, predicate, block)


def conjuncts(e: PrimExpr) -> list[PrimExpr]:
    """The parts of a predicate ``a and b and ...``."""
    return conjuncts(e.a) + conjuncts(e.b) if isinstance(e, And) else [e]


def conjoin(parts: list[PrimExpr]) -> PrimExpr:
    result = parts[0] if parts else const(True)
    for part in parts[1:]:
        result = And(result, part)
    return result


def nest(loop_vars: list[Var], extents: list, body: Stmt) -> Stmt:
    """Serial loops over ``loop_vars`` (outermost first; extents ints or expressions) around ``body``."""
    for var, extent in zip(reversed(loop_vars), reversed(extents)):
        size = const(extent, var.dtype) if isinstance(extent, int) else extent
        body = For(var, const(0, var.dtype), size, SERIAL, body)
    return body


def resolve_factors(loop: For, factors: list, extent: int) -> list[int]:
    name = loop.loop_var.name
    if not factors:
        raise ScheduleError(f"split: no factors given for loop '{name}'")
    holes = [i for i, f in enumerate(factors) if f is None or f == -1]
    if len(holes) > 1:
        raise ScheduleError(f"split: only one factor of loop '{name}' can be None or -1, got {factors}")
    for f in factors:
        if f is not None and f != -1 and (not isinstance(f, int) or f <= 0):
            raise ScheduleError(f"split: the factors of loop '{name}' must be positive integers, got {f!r}")
    known = prod(f for f in factors if f is not None and f != -1)
    result = list(factors)
    if holes:
        result[holes[0]] = -(-extent // known)
    if prod(result) < extent:
        raise ScheduleError(f"split: the product of factors {result} is less than the extent "
                            f"{extent} of loop '{name}'")
    return result


def symbolic_factors(loop: For, factors: list) -> tuple[list, bool]:
    """The sizes of a split of a loop ``[0, n)`` of symbolic extent: the one hole becomes
    ``(n + known - 1) // known``, so the tail is guarded, as for a split that overshoots; an extent
    that ``known`` divides (``n * 8`` by 8) splits exactly. Also says whether it did."""
    holes = [i for i, f in enumerate(factors) if f is None or f == -1]
    if len(holes) != 1 or any(not isinstance(f, int) or f <= 0 for i, f in enumerate(factors) if i != holes[0]):
        raise ScheduleError(f"split: loop '{loop.loop_var.name}' has the symbolic extent {loop.extent}: "
                            f"give constant factors and one None, got {factors}")
    known = prod(f for i, f in enumerate(factors) if i != holes[0])
    dtype = loop.extent.dtype
    sizes: list = list(factors)
    analyzer = Analyzer()
    whole = analyzer.canonical(loop.extent)
    if whole.base % known == 0 and all(t.scale % known == 0 for t in whole.terms):
        # (``n * 5`` split by 5: ``n`` exactly, and no tail to guard)
        exact = Sum(tuple(replace(t, scale=t.scale // known) for t in whole.terms), whole.base // known)
        sizes[holes[0]] = analyzer.to_expr(exact, dtype)
        return sizes, True
    sizes[holes[0]] = analyzer.simplify(FloorDiv(Add(loop.extent, const(known - 1, dtype)), const(known, dtype)))
    return sizes, False


def split(func: PrimFunc, loop: For, factors: list, preserve_unit_iters: bool,
          disable_predication: bool) -> tuple[PrimFunc, list[Var]]:
    exact = False
    if is_const_int(loop.min, 0) and not isinstance(loop.extent, IntImm):
        extent, (sizes, exact) = loop.extent, symbolic_factors(loop, factors)
    else:
        extent = const_extent(loop, "split")
        sizes = resolve_factors(loop, factors, extent)
    old = loop.loop_var
    dtype = old.dtype
    new_vars = [Var(f"{old.name}_{i}", dtype) for i in range(len(sizes))]
    parts: list[PrimExpr] = [const(0, dtype) if isinstance(size, int) and size == 1 and not preserve_unit_iters
                             else v for v, size in zip(new_vars, sizes)]
    value = parts[0]
    for part, size in zip(parts[1:], sizes[1:]):  # ((v0 * f1 + v1) * f2 + v2), zeros left out
        factor = const(size, dtype) if isinstance(size, int) else size
        scaled = value if is_const_int(value, 0) or is_const_int(factor, 1) else Mul(value, factor)
        value = part if is_const_int(scaled, 0) else scaled if is_const_int(part, 0) else Add(scaled, part)
    guard = None
    if not isinstance(extent, int) and not disable_predication and not exact and not divisible(extent, prod(
            size for size in sizes if isinstance(size, int))):
        guard = LT(value, extent)
    elif isinstance(extent, int) and prod(sizes) != extent and not disable_predication:
        guard = LT(value, const(extent, dtype))
    body = _Rebind({old: value}, Analyzer(iter_map_order=True), guard).visit(loop.body)
    return replace_stmts(func, {id(loop): nest(new_vars, sizes, body)}), new_vars


def fuse(func: PrimFunc, loops: list[For], preserve_unit_iters: bool) -> tuple[PrimFunc, Var]:
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise ScheduleError(f"fuse: the loops can't be fused because the outer loop "
                                f"'{outer.loop_var.name}' is not the parent of the inner loop "
                                f"'{inner.loop_var.name}' (or has other statements in its body)")
    dtype = max((loop.loop_var.dtype for loop in loops), key=lambda t: t.bits)  # (TVM: the widest)
    fused = Var("_".join(loop.loop_var.name for loop in loops) + "_fused", dtype)
    symbolic = [loop for loop in loops if not isinstance(loop.extent, IntImm)]
    if symbolic:
        return _fuse_symbolic(func, loops, dtype)
    extents = [const_extent(loop, "fuse") for loop in loops]
    total = prod(extents)
    mapping: dict = {}
    for i, (loop, extent) in enumerate(zip(loops, extents)):
        if extent == 1:  # (TVM's fuse binds a unit loop to 0, whatever preserve_unit_iters says)
            mapping[loop.loop_var] = const(0, dtype)
            continue
        # (TVM's form: an inner loop is ``fused % (stride * extent) // stride``, which a predicate keeps)
        stride = prod(extents[i + 1:])
        value: PrimExpr = fused if i == 0 else FloorMod(fused, const(stride * extent, dtype))
        mapping[loop.loop_var] = value if stride == 1 else FloorDiv(value, const(stride, dtype))
    analyzer = Analyzer(iter_map_order=True)
    analyzer.bind(fused, 0, total)
    body = _Rebind(mapping, analyzer).visit(loops[-1].body)
    new_loop = For(fused, const(0, dtype), const(total, dtype), SERIAL, body)
    return replace_stmts(func, {id(loops[0]): new_loop}), fused


def _fuse_symbolic(func: PrimFunc, loops: list[For], dtype: Any) -> tuple[PrimFunc, Var]:
    """``fuse`` where some extent is symbolic: the same bindings, with strides that are products
    of extents (``fused // 16``, ``fused % n``)."""
    for loop in loops:
        if not is_const_int(loop.min, 0):
            raise ScheduleError(f"fuse: loop '{loop.loop_var.name}' must start at 0")
    analyzer = Analyzer(iter_map_order=True)

    def product(extents: list) -> PrimExpr:
        total: PrimExpr = const(1, dtype)
        for e in extents:
            total = analyzer.simplify(Mul(total, e))
        return total

    fused = Var("_".join(loop.loop_var.name for loop in loops) + "_fused", dtype)
    mapping: dict = {}
    for i, loop in enumerate(loops):
        if is_const_int(loop.extent, 1):
            mapping[loop.loop_var] = const(0, dtype)
            continue
        stride = product([inner.extent for inner in loops[i + 1:]])
        # (below loops of one iteration only, the value cannot wrap: no ``%``); a middle loop
        # reads ``fused % (n * 4) // 4``, the form TVM's iterator maps give a split of a split
        if not any(not is_const_int(outer.extent, 1) for outer in loops[:i]):
            value: PrimExpr = fused if is_const_int(stride, 1) else FloorDiv(fused, stride)
        elif is_const_int(stride, 1):
            value = FloorMod(fused, loop.extent)
        else:
            value = FloorDiv(FloorMod(fused, product([loop.extent, stride])), stride)
        mapping[loop.loop_var] = value
    body = _Rebind(mapping, analyzer).visit(loops[-1].body)
    new_loop = For(fused, const(0, dtype), product([loop.extent for loop in loops]), SERIAL, body)
    return replace_stmts(func, {id(loops[0]): new_loop}), fused


def merge(func: PrimFunc, found: list[tuple[For, tuple]]) -> tuple[PrimFunc, Var]:
    """TVM's ``merge``: loop nests of equal extents under the loops' lowest common ancestor become
    one nest (its variables named ``<var>_m`` after the first nest's) whose innermost loop runs
    the given loops' bodies in order; it takes the place of the last nest.

    ``found`` holds each loop with its ancestors (outermost first).
    """
    paths = [path + (loop,) for loop, path in found]
    depth = 0  # the lowest common ancestor is paths[0][depth - 1]
    while all(len(p) > depth + 1 for p in paths) and all(p[depth] is paths[0][depth] for p in paths):
        depth += 1
    nests = []  # per loop: its loops below the common ancestor, innermost first
    for (loop, path), full in zip(found, paths):
        if parent_block(path) is not parent_block(paths[0][:-1]):
            raise ScheduleError("merge: expected the loops to be under the same block scope")
        nest = [n for n in reversed(full[depth:]) if isinstance(n, For)]
        for inner, outer in zip(nest, nest[1:]):
            if outer.body is not inner:
                raise ScheduleError(f"merge: loop '{inner.loop_var.name}' is not the only child of loop "
                                    f"'{outer.loop_var.name}'")
        for n in nest:
            if n.annotations or n.thread_binding is not None:
                raise ScheduleError(f"merge: loop '{n.loop_var.name}' has annotations or a thread binding")
            if not is_const_int(n.min, 0):
                raise ScheduleError(f"merge: loop '{n.loop_var.name}' does not start at 0")
        nests.append(nest)
    first = nests[0]
    analyzer = Analyzer()
    for nest in nests[1:]:
        if len(nest) != len(first):
            raise ScheduleError("merge: the loops' nesting depths below their common ancestor differ")
        for a, b in zip(first, nest):
            if not is_const_int(analyzer.simplify(Sub(a.extent, b.extent)), 0):
                raise ScheduleError(f"merge: the extents of loops '{a.loop_var.name}' ({a.extent.script()}) and "
                                    f"'{b.loop_var.name}' ({b.extent.script()}) differ")
    new_vars = [Var(f"{n.loop_var.name}_m", n.loop_var.dtype) for n in first]
    bodies = [substitute(nest[0].body, {n.loop_var: v for n, v in zip(nest, new_vars)}) for nest in nests]
    merged: Stmt = For(new_vars[0], const(0, "int32"), first[0].extent, SERIAL, seq(bodies))
    inner_var = new_vars[0]
    for var, n in zip(new_vars[1:], first[1:]):
        merged = For(var, const(0, "int32"), n.extent, SERIAL, merged)
    table: dict = {id(nest[-1]): SeqStmt(()) for nest in nests[:-1]}  # (spliced away)
    table[id(nests[-1][-1])] = merged
    return replace_stmts(func, table), inner_var


def reorder(func: PrimFunc, loops: list[For]) -> PrimFunc:
    names = [loop.loop_var.name for loop in loops]
    seen: set = set()
    for loop in loops:
        if id(loop) in seen:
            raise ScheduleError(f"reorder: loop '{loop.loop_var.name}' appears in the input array "
                                f"for multiple times")
        seen.add(id(loop))
    # The deepest loop's ancestors must hold every given loop, in one chain of single children.
    paths = {id(loop): find_loop(func, loop.loop_var)[1] for loop in loops}
    deepest = max(loops, key=lambda loop: len(paths[id(loop)]))
    chain = enclosing_loops(paths[id(deepest)]) + [deepest]
    chain_ids = [id(loop) for loop in chain]
    if not all(id(loop) in chain_ids for loop in loops):
        raise ScheduleError(f"reorder: the loops {names} are not in a single chain "
                            f"(one is not an ancestor of the others)")
    top = min(chain_ids.index(id(loop)) for loop in loops)
    segment = chain[top:]
    for outer, inner in zip(segment, segment[1:]):
        if outer.body is not inner:
            raise ScheduleError(f"reorder: loop '{outer.loop_var.name}' has statements besides "
                                f"loop '{inner.loop_var.name}' in its body, so the loops {names} "
                                f"are not a single chain")
    _check_affine(func, segment)
    order = iter(loops)
    arranged = [next(order) if id(loop) in seen else loop for loop in segment]
    body: Stmt = segment[-1].body
    for loop in reversed(arranged):
        body = loop.with_changes(body=body)
    return replace_stmts(func, {id(segment[0]): body})


SYMBOLIC_EXTENT = 1 << 40


def _check_affine(func: PrimFunc, segment: list[For]) -> None:
    """Every block under the reordered loops must bind its iterators affinely to its loops."""
    seg_ids = {id(loop.loop_var) for loop in segment}
    outer = enclosing_loops(find_loop(func, segment[0].loop_var)[1])
    # an outer loop of symbolic extent only offsets the bindings: count it as 0
    offsets = {n.loop_var: const(0, n.loop_var.dtype) for n in outer
               if not (isinstance(n.extent, IntImm) and isinstance(n.min, IntImm))}
    for node, path in walk_with_path(segment[0]):
        if not isinstance(node, BlockRealize):
            continue
        # a loop of symbolic extent below them counts as a very long one (its digits are its own)
        loops = {id(n.loop_var): (n.loop_var, n.min.value, n.extent.value if isinstance(n.extent, IntImm)
                                  else SYMBOLIC_EXTENT)
                 for n in outer + enclosing_loops(path)
                 if isinstance(n.min, IntImm) and (isinstance(n.extent, IntImm) or n.loop_var not in offsets)}
        values = [substitute(v, offsets) for v in node.iter_values if uses_var(v, seg_ids)]
        if values and not is_bijective_affine(values, loops):
            raise ScheduleError(f"reorder: the bindings of block '{node.block.name_hint}' are not an "
                                f"affine, one-to-one map of the loops")
