"""transform_block_layout: give a block new iterators through an index map over its old ones.

``lambda i, j, k: (i * 128 + j, k)`` turns a block over ``(i, j, k)`` into one over
``(v0, v1)`` with ``v0`` in ``[0, 16384)``; the block's body and regions read the old iterators
back through the map's inverse (``i = v0 // 128``, ``j = v0 % 128``, ``k = v1``), and new loops
``ax0, ax1`` run the new iterators (TVM's ``TransformBlockLayout``). The block must sit alone
under its loops, bound to them one to one, and the map must be bijective and affine.
"""
from __future__ import annotations

import inspect
from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer, affine_pieces, is_bijective_affine
from ...ir.buffer import BufferRegion
from ...ir.expr import (DATA_PAR, Add, BufferLoad, Call, FloorDiv, FloorMod, IntImm, IterVar, Mul, PrimExpr, Range, Sub,
                        Var, const, is_const_int)
from ...ir.function import PrimFunc
from ...ir.structural import structural_equal
from ...ir.stmt import SERIAL, BlockRealize, BufferStore, For, Stmt
from ...ir.visitor import Mutator, walk
from .errors import ScheduleError
from .layout import IndexMap, linear_terms, mixed_radix
from .tree import enclosing_loops, replace_stmts


def transform_block_layout(func: PrimFunc, realize: BlockRealize, path: tuple,
                           index_map: Any) -> tuple[PrimFunc, IndexMap]:
    block = realize.block
    loops = enclosing_loops(path)
    _check_trivial_nest(realize, loops)
    if not isinstance(index_map, IndexMap):
        params = list(inspect.signature(index_map).parameters)
        if len(params) != len(block.iter_vars):
            raise ScheduleError(f"transform_block_layout: the index map takes {len(params)} indices, block "
                                f"'{block.name_hint}' has {len(block.iter_vars)} iterators")
        # (over the iterators' dtype, as TVM does: int64 iterators stay uncast)
        index_map = IndexMap.from_func(index_map, len(params), dtype=block.iter_vars[0].var.dtype if params else "int32")
    old_vars = [iv.var for iv in block.iter_vars]
    mapped = [substitute(e, dict(zip(index_map.initial_indices, old_vars))) for e in index_map.final_indices]
    projected = _projection(block, mapped)
    if projected is not None:
        new_iters, inverse = projected
        return _rebuild(func, realize, loops, new_iters, inverse, IterMapIndices(new_iters)), index_map
    if not all(isinstance(iv.dom.extent, IntImm) for iv in block.iter_vars):
        new_iters, inverse = _reordered(block, mapped)
        return _rebuild(func, realize, loops, new_iters, inverse), index_map
    extents = [_extent(iv, block.name_hint) for iv in block.iter_vars]
    domains = {id(v): (v, 0, n) for v, n in zip(old_vars, extents)}
    if not is_bijective_affine(mapped, domains):
        raise ScheduleError(f"transform_block_layout: the index map {index_map} is not bijective affine "
                            f"on the iterators of block '{block.name_hint}'")
    analyzer = Analyzer()
    for v, n in zip(old_vars, extents):
        analyzer.bind(v, 0, n)
    mapped = [analyzer.simplify(e) for e in mapped]
    new_extents = [analyzer.bound(e)[1] + 1 for e in mapped]
    kinds = {id(iv.var): iv.iter_type for iv in block.iter_vars}
    new_vars = [Var(f"v{k}", e.dtype) for k, e in enumerate(mapped)]
    new_iters = tuple(IterVar(Range(const(0, v.dtype), const(n, v.dtype)), v,
                              DATA_PAR if n == 1 else _iter_type(e, kinds, block.name_hint))
                      for v, e, n in zip(new_vars, mapped, new_extents))
    inverse = _inverse(mapped, old_vars, extents, new_vars, new_extents, block.name_hint)
    return _rebuild(func, realize, loops, new_iters, inverse), index_map


def _rebuild(func: PrimFunc, realize: BlockRealize, loops: list, new_iters: tuple, inverse: dict,
             simplifier: Mutator | None = None) -> PrimFunc:
    """The block over ``new_iters`` (reading the old iterators as ``inverse`` says), under new
    loops ``ax0, ax1, ...`` that run them, in place of the old loops."""
    if simplifier is None:
        new_analyzer = Analyzer()
        for iv in new_iters:
            if isinstance(iv.dom.extent, IntImm):
                new_analyzer.bind(iv.var, 0, iv.dom.extent.value)
        simplifier = IndexSimplifier(new_analyzer)
    new_block = simplifier.visit(substitute(realize.block, inverse)).with_changes(iter_vars=new_iters)
    loop_vars = [Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(new_iters)]
    if loop_vars and not loops:
        raise ScheduleError(f"transform_block_layout: block '{realize.block.name_hint}' has no loops to "
                            f"replace with the new ones")
    body: Stmt = realize.with_changes(iter_values=tuple(loop_vars), block=new_block)
    for var, iv in reversed(list(zip(loop_vars, new_iters))):
        body = For(var, const(0, var.dtype), iv.dom.extent, SERIAL, body)
    return replace_stmts(func, {id(loops[0] if loops else realize): body})


def _projection(block: Any, mapped: list) -> tuple[tuple, dict] | None:
    """When the map keeps some iterators as they are, drops only iterators of extent 1 and adds
    constants (how NormalizePrimFunc drops unit iterators), the new iterators and the inverse,
    with symbolic extents allowed; None for any other map."""
    by_var = {id(iv.var): iv for iv in block.iter_vars}
    kept = [id(e) for e in mapped if isinstance(e, Var)]
    if (any(not isinstance(e, (Var, IntImm)) or isinstance(e, Var) and id(e) not in by_var for e in mapped)
            or len(set(kept)) != len(kept)
            or any(not is_const_int(iv.dom.min, 0) for iv in block.iter_vars)
            or any(id(iv.var) not in kept and not is_const_int(iv.dom.extent, 1) for iv in block.iter_vars)):
        return None
    new_iters, inverse = [], {}
    for k, e in enumerate(mapped):
        var = Var(f"v{k}", e.dtype)
        old = by_var.get(id(e))
        extent = old.dom.extent if old is not None else const(1, e.dtype)
        kind = old.iter_type if old is not None and not is_const_int(extent, 1) else DATA_PAR
        new_iters.append(IterVar(Range(const(0, e.dtype), extent), var, kind))
        if old is not None:
            inverse[old.var] = var
    for iv in block.iter_vars:
        inverse.setdefault(iv.var, const(0, iv.var.dtype))
    return tuple(new_iters), inverse


def _reordered(block: Any, mapped: list) -> tuple[tuple, dict]:
    """For a block of symbolic extents, the maps that only reorder iterators, drop unit ones,
    insert constant ones (``lambda i, j, k: (0, i, j, k)``) and fuse iterators of one kind in
    mixed radix: the new iterators and the inverse."""
    name = block.name_hint
    by_var = {id(iv.var): iv for iv in block.iter_vars}
    new_iters, inverse, seen = [], {}, set()
    for k, e in enumerate(mapped):
        v = Var(f"v{k}", e.dtype)
        if isinstance(e, IntImm):
            new_iters.append(IterVar(Range(const(0, e.dtype), const(1, e.dtype)), v, DATA_PAR))
        elif isinstance(e, Var) and id(e) in by_var and id(e) not in seen:
            old = by_var[id(e)]
            seen.add(id(e))
            new_iters.append(IterVar(old.dom, v, old.iter_type))
            inverse[e] = v
        elif (digits := _fused_digits(e, by_var, seen)) is not None:
            # (``i * 3 + j``, i of symbolic extent n: one iterator over n * 3)
            outer = by_var[id(digits[0][0])]
            extent = Analyzer().simplify(Mul(outer.dom.extent, const(digits[0][1], e.dtype)))
            new_iters.append(IterVar(Range(const(0, e.dtype), extent), v, outer.iter_type))
            for n, (var, stride) in enumerate(digits):
                seen.add(id(var))
                digit = v if stride == 1 else FloorDiv(v, const(stride, v.dtype))
                inverse[var] = digit if n == 0 else FloorMod(digit, by_var[id(var)].dom.extent)
        else:
            raise ScheduleError(f"transform_block_layout: block '{name}' has symbolic extents: only maps that "
                                f"reorder, drop, insert or fuse iterators are supported, not {e.script()}")
    for iv in block.iter_vars:
        if id(iv.var) not in seen:
            if not (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1):
                raise ScheduleError(f"transform_block_layout: the index map drops iterator '{iv.var.name}' "
                                    f"of block '{name}'")
            inverse[iv.var] = iv.dom.min
    return tuple(new_iters), inverse


def _fused_digits(e: PrimExpr, by_var: dict, seen: set) -> list | None:
    """``[(var, stride)]``, outermost first, of ``i * 12 + j * 4 + k`` over iterators of one kind,
    each not used yet, whose strides are the products of the inner (constant) extents."""
    terms = linear_terms(e)
    if terms is None or len(terms) < 2 or any(id(v) not in by_var or id(v) in seen for v, _ in terms):
        return None
    digits = mixed_radix(terms, lambda v: by_var[id(v)].dom.extent)
    if digits is None or len({by_var[id(v)].iter_type for v, _ in terms}) != 1:
        return None
    return digits


def _extent(iv: IterVar, name: str) -> int:
    if not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0 and isinstance(iv.dom.extent, IntImm)):
        raise ScheduleError(f"transform_block_layout: iterator '{iv.var.name}' of block '{name}' must start at "
                            f"0 and have a constant extent")
    return iv.dom.extent.value


def _check_trivial_nest(realize: BlockRealize, loops: list) -> None:
    name = realize.block.name_hint
    for outer, inner in zip(loops, loops[1:] + [realize]):
        if outer.body is not inner:
            raise ScheduleError(f"transform_block_layout: loop '{outer.loop_var.name}' holds more than "
                                f"block '{name}'")
        if not (isinstance(outer.min, IntImm) and outer.min.value == 0):
            raise ScheduleError(f"transform_block_layout: loop '{outer.loop_var.name}' does not start at 0")
    if len(realize.iter_values) != len(loops) or any(v is not loop.loop_var
                                                      for v, loop in zip(realize.iter_values, loops)):
        raise ScheduleError(f"transform_block_layout: block '{name}' must be bound to its loops one to one "
                            f"(each iterator to the loop at its position)")


def _iter_type(e: PrimExpr, kinds: dict, name: str) -> str:
    found = {kinds[id(n)] for n in walk(e) if isinstance(n, Var) and id(n) in kinds}
    if len(found) != 1:
        raise ScheduleError(f"transform_block_layout: the new iterator {e.script()} of block '{name}' mixes "
                            f"iterators of different kinds")
    return found.pop()


def _inverse(mapped: list, old_vars: list, extents: list, new_vars: list, new_extents: list,
             name: str) -> dict:
    """Each old iterator as an expression of the new ones: the sum of its digits, each read out of
    the new iterator that holds it (``(v // scale) % upper * lower``)."""
    pieces = affine_pieces(mapped, {id(v): (v, 0, n) for v, n in zip(old_vars, extents)})
    analyzer = Analyzer()
    for v, n in zip(new_vars, new_extents):
        analyzer.bind(v, 0, n)
    parts: dict = {id(v): [] for v in old_vars}
    for new, binding in zip(new_vars, pieces):
        for key, lower, upper, scale in binding:
            if not isinstance(key, Var):
                raise ScheduleError(f"transform_block_layout: block '{name}': the index map reads a sum of "
                                    f"iterators as one; give each iterator its own digits")
            digit: PrimExpr = FloorMod(FloorDiv(new, const(scale, new.dtype)), const(upper, new.dtype))
            parts[id(key)].append(Mul(digit, const(lower, new.dtype)) if lower != 1 else digit)
    inverse = {}
    for v, n in zip(old_vars, extents):
        terms = parts[id(v)]
        if not terms and n == 1:  # a unit iterator the map leaves out: at its only value
            inverse[v] = const(0, v.dtype)
            continue
        if not terms:
            raise ScheduleError(f"transform_block_layout: the index map drops iterator '{v.name}' of "
                                f"block '{name}'")
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        inverse[v] = analyzer.simplify(total)
    return inverse


class IndexSimplifier(Mutator):
    """The indices of loads, stores and regions simplified by ``analyzer``."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        out = self.generic_visit(e)
        return out.with_changes(indices=tuple(self.analyzer.simplify(i) for i in out.indices))

    def visit_BufferStore(self, s: BufferStore) -> Any:
        out = self.generic_visit(s)
        return out.with_changes(indices=tuple(self.analyzer.simplify(i) for i in out.indices))

    def visit_BufferRegion(self, r: BufferRegion) -> Any:
        out = self.generic_visit(r)
        simplify = self.analyzer.simplify
        return out.with_changes(region=tuple(Range(simplify(x.min), simplify(x.extent)) for x in out.region))


class IterMapIndices(Mutator):
    """The access indices as TVM's block access simplifier leaves them: an index list whose
    every index is a sum of distinct block iterators times constants plus a constant (each sum a
    mixed-radix number) is written in iterator-map form (``v1 + -8``, ``v1 * -1 + 5``, unit
    iterators dropped); any other index list is simplified by the analyzer. Indices under an
    ``if_then_else`` stay as written (TVM simplifies them knowing the condition, which keeps them)."""

    def __init__(self, iters: tuple):
        self.extents = {id(iv.var): iv.dom.extent for iv in iters}
        self.vars = {id(iv.var): iv.var for iv in iters}
        self.analyzer = Analyzer()
        for iv in iters:
            if isinstance(iv.dom.extent, IntImm):
                self.analyzer.bind(iv.var, 0, iv.dom.extent.value)

    def visit_Call(self, e: Call) -> Any:
        return e if getattr(e.op, "name", "") == "tir.if_then_else" else self.generic_visit(e)

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        out = self.generic_visit(e)
        return out.with_changes(indices=self.normal(out.indices))

    def visit_BufferStore(self, s: BufferStore) -> Any:
        out = self.generic_visit(s)
        return out.with_changes(indices=self.normal(out.indices))

    def visit_BufferRegion(self, r: BufferRegion) -> Any:
        out = self.generic_visit(r)
        mins = self.normal(tuple(x.min for x in out.region))
        return out.with_changes(region=tuple(Range(m, x.extent) for m, x in zip(mins, out.region)))

    def normal(self, indices: tuple) -> tuple:
        sums = [self._linear(i) for i in indices]
        used = [v for s in sums if s is not None for v, _ in s[0]]
        if any(s is None for s in sums) or len(set(used)) != len(used):
            return tuple(self._in_range(self.analyzer.simplify(i)) for i in indices)
        out = []
        for index, (terms, base) in zip(indices, sums):
            if not terms and isinstance(index, Var):
                out.append(index)  # (a unit iterator stays itself, not 0)
                continue
            expr: PrimExpr | None = None
            for v, scale in terms:
                term = self.vars[v] if scale == 1 else Mul(self.vars[v], const(scale, index.dtype))
                expr = term if expr is None else expr + term
            if expr is None or base:
                expr = const(base, index.dtype) if expr is None else expr + const(base, index.dtype)
            out.append(index if structural_equal(expr, index) else expr)  # (what stays keeps its node)
        return tuple(out)

    def _linear(self, e: PrimExpr) -> tuple[list, int] | None:
        """``e`` as ([(iterator id, scale)], base), terms by falling scale and mixed-radix; None
        for anything else."""
        coeffs: dict = {}
        base = 0
        stack = [(e, 1)]
        while stack:
            x, k = stack.pop()
            if isinstance(x, IntImm):
                base += k * x.value
            elif isinstance(x, Var) and id(x) in self.extents:
                if not is_const_int(self.extents[id(x)], 1):
                    coeffs[id(x)] = coeffs.get(id(x), 0) + k
            elif isinstance(x, (Add, Sub)):
                stack += [(x.a, k), (x.b, k if isinstance(x, Add) else -k)]
            elif isinstance(x, Mul) and isinstance(x.b, IntImm):
                stack.append((x.a, k * x.b.value))
            elif isinstance(x, Mul) and isinstance(x.a, IntImm):
                stack.append((x.b, k * x.a.value))
            else:
                return None
        terms = sorted(((v, c) for v, c in coeffs.items() if c), key=lambda t: -abs(t[1]))
        # (outer scales of either sign; the innermost, of several, +1)
        radix = mixed_radix([(v, abs(c)) for v, c in terms], self.extents.get)
        if len(terms) > 1 and (terms[-1][1] != 1 or radix is None):
            return None
        return terms, base

    def _in_range(self, e: PrimExpr) -> PrimExpr:
        """``v % n`` is ``v`` for an iterator ``v`` of extent ``n`` (a symbolic one too)."""
        if isinstance(e, FloorMod) and isinstance(e.a, Var) and id(e.a) in self.extents:
            if structural_equal(e.b, self.extents[id(e.a)]):
                return e.a
        if isinstance(e, (Add, Sub, Mul, FloorDiv, FloorMod)):
            a, b = self._in_range(e.a), self._in_range(e.b)
            return e if a is e.a and b is e.b else e.with_changes(a=a, b=b)
        return e
