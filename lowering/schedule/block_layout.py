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
from ...ir.expr import DATA_PAR, BufferLoad, FloorDiv, FloorMod, IntImm, IterVar, Mul, PrimExpr, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import SERIAL, BlockRealize, BufferStore, For, Stmt
from ...ir.visitor import Mutator, walk
from .errors import ScheduleError
from .layout import IndexMap, linear_terms
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
        index_map = IndexMap.from_func(index_map, len(params))
    old_vars = [iv.var for iv in block.iter_vars]
    mapped = [substitute(e, dict(zip(index_map.initial_indices, old_vars))) for e in index_map.final_indices]
    if not all(isinstance(iv.dom.extent, IntImm) for iv in block.iter_vars):
        new_iters, inverse = _reordered(block, mapped)
        return _rebuilt(func, realize, loops, block, new_iters, inverse), index_map
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
    return _rebuilt(func, realize, loops, block, new_iters, inverse), index_map


def _rebuilt(func: PrimFunc, realize: BlockRealize, loops: list, block: Any, new_iters: tuple,
             inverse: dict) -> PrimFunc:
    """The block over ``new_iters`` (reading the old iterators through ``inverse``), under new
    loops ``ax0, ax1, ..`` bound one to one."""
    new_analyzer = Analyzer()
    for iv in new_iters:
        if isinstance(iv.dom.extent, IntImm):
            new_analyzer.bind(iv.var, 0, iv.dom.extent.value)
    new_block = IndexSimplifier(new_analyzer).visit(substitute(block, inverse)).with_changes(iter_vars=new_iters)
    loop_vars = [Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(new_iters)]
    body: Stmt = realize.with_changes(iter_values=tuple(loop_vars), block=new_block)
    for var, iv in reversed(list(zip(loop_vars, new_iters))):
        body = For(var, const(0, var.dtype), iv.dom.extent, SERIAL, body)
    return replace_stmts(func, {id(loops[0] if loops else realize): body})


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
    terms.sort(key=lambda t: -t[1])
    stride = 1
    for var, s in reversed(terms):
        extent = by_var[id(var)].dom.extent
        if s != stride or (var is not terms[0][0] and not isinstance(extent, IntImm)):
            return None
        stride *= extent.value if isinstance(extent, IntImm) else 1
    if len({by_var[id(v)].iter_type for v, _ in terms}) != 1:
        return None
    return terms


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
