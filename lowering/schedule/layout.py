"""transform_layout: store a buffer in a new shape, mapping every access through an index map.

``lambda i, j: (i // 16, j // 16, i % 16, j % 16)`` turns a (128, 128) buffer into
(8, 8, 16, 16); each load, store and accessed region of the buffer is rewritten, and so is the
function parameter or the allocation that declares it. The map must be one-to-one on the
buffer (``injective.py``): one that drops an index or sends two elements to one place would lose
data, and is refused unless the caller vouches for it (``assume_injective_transform=True``).
A map with places no element goes to needs ``pad_value`` (``layout_pad.py``).
"""
from __future__ import annotations

import inspect
from math import prod
from typing import Any, Callable

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion
from ...ir.expr import Add, BinaryOp, BufferLoad, IntImm, Mul, PrimExpr, Range, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import BlockRealize, BufferStore
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, collect
from . import layout_pad
from .errors import ScheduleError
from .injective import Unchecked, collision
from .loop_transform import uses_var


def index_expr(value: Any, primitive: str) -> PrimExpr:
    """An index a user's function gave: an integer expression (a Python int is a constant)."""
    if isinstance(value, bool) or not isinstance(value, (int, PrimExpr)) or (
            isinstance(value, PrimExpr) and not value.dtype.is_integer):
        raise ScheduleError(f"{primitive}: an index is an integer expression, got {value!r}")
    return const(value) if isinstance(value, int) else value


class IndexMap:
    """A map from buffer indices to new indices, printed as the lambda it came from."""

    def __init__(self, initial_indices: list[Var], final_indices: list[PrimExpr]):
        self.initial_indices = list(initial_indices)
        self.final_indices = list(final_indices)

    @staticmethod
    def from_func(func: Callable, ndim: int, primitive: str = "transform_layout", what: str = "the buffer has",
                  unit: str = "dimensions", dtype: str = "int32") -> "IndexMap":
        if not callable(func):
            raise ScheduleError(f"{primitive}: the index map is a function of the indices, got {func!r}")
        names = list(inspect.signature(func).parameters)
        if len(names) != ndim:
            raise ScheduleError(f"{primitive}: the index map takes {len(names)} indices, {what} {ndim} {unit}")
        variables = [Var(n, dtype) for n in names]
        result = func(*variables)
        final = list(result) if isinstance(result, (list, tuple)) else [result]
        return IndexMap(variables, [index_expr(e, primitive) for e in final])

    def apply(self, indices: tuple, analyzer: Analyzer | None = None) -> tuple:
        mapping = dict(zip(self.initial_indices, indices))
        analyzer = analyzer or Analyzer()
        return tuple(analyzer.simplify(substitute(e, mapping)) for e in self.final_indices)

    def __str__(self) -> str:
        params = ", ".join(v.name for v in self.initial_indices)
        return f"lambda {params}: ({''.join(e.script() + ', ' for e in self.final_indices).rstrip(' ')})"

    __repr__ = __str__


class SampledIndexMap(IndexMap):
    """An index map whose expressions use sampled integers (TVM's index maps over ExprRVs, as
    MultiLevelTilingTensorCore's ``i0 // 16 // (v27 * v28)``): ``rvs`` pairs each placeholder
    variable of ``final_indices`` with its random variable. A schedule binds the placeholders
    to the values sampled now, so a trace replayed with other decisions follows them."""

    def __init__(self, initial_indices: list[Var], final_indices: list[PrimExpr], rvs: list[tuple[Var, Any]]):
        super().__init__(initial_indices, final_indices)
        self.rvs = list(rvs)

    def bind(self, value_of: Callable[[Any], int]) -> IndexMap:
        """The plain index map with each placeholder replaced by ``value_of(its random variable)``."""
        table = {var: const(int(value_of(rv)), var.dtype) for var, rv in self.rvs}
        analyzer = Analyzer()
        return IndexMap(self.initial_indices, [analyzer.simplify(substitute(e, table)) for e in self.final_indices])

    def remap(self, rv_map: dict) -> "SampledIndexMap":
        return SampledIndexMap(self.initial_indices, self.final_indices, [(v, rv_map[rv]) for v, rv in self.rvs])

    def text(self, names: dict) -> str:
        """The lambda with each placeholder written as its random variable's name in a trace."""
        table = {var: Var(names[rv], var.dtype) for var, rv in self.rvs}
        return str(IndexMap(self.initial_indices, [substitute(e, table) for e in self.final_indices]))


class RangesMap(IndexMap):
    """annotate_buffer_access's map from a block's iterators to (begin, end) pairs, flattened;
    printed as TVM prints it, ``lambda vi, vj: [(vi - 1, vi + 1), (vj - 1, vj + 1)]``."""

    def __str__(self) -> str:
        params = ", ".join(v.name for v in self.initial_indices)
        ends = self.final_indices
        pairs = [ends[k].script() if ends[k] is ends[k + 1] else f"({ends[k].script()}, {ends[k + 1].script()})"
                 for k in range(0, len(ends), 2)]
        return f"lambda {params}: [{', '.join(pairs)}]"

    __repr__ = __str__


class _ToIndexType(Mutator):
    """An index map over another integer type (TVM's LegalizeIndexMapDType: a map written over
    int32 on an int64 buffer indexes in int64, its constants too)."""

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.vars: dict = {}

    def map(self, index_map: IndexMap) -> IndexMap:
        self.vars = {v: Var(v.name, self.dtype) for v in index_map.initial_indices}
        return IndexMap(list(self.vars.values()), [self.visit(e) for e in index_map.final_indices])

    def visit_Var(self, v: Var) -> Any:
        return self.vars.get(v, v)

    def visit_IntImm(self, e: IntImm) -> Any:
        return const(e.value, self.dtype)

    def visit_BinaryOp(self, e: BinaryOp) -> Any:
        return type(e)(self.visit(e.a), self.visit(e.b))


class _Relayout(Mutator):
    def __init__(self, old: Buffer, new: Buffer, index_map: IndexMap, analyzer: Analyzer | None = None):
        self.old, self.new, self.index_map, self.analyzer = old, new, index_map, analyzer or Analyzer()

    def visit_Block(self, node: Any) -> Any:
        # (as TVM's: the new indices simplified knowing each block iterator's range, a blockized
        # tile's v0_o * 16 + v0_i // 64 being v0_o // 4)
        for iv in node.iter_vars:
            if isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
                self.analyzer.bind(iv.var, iv.dom.min.value, iv.dom.extent.value)
        return self.generic_visit(node)

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return self.new if b is self.old else b

    def visit_Var(self, v: Var) -> Var:
        return v

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.new:
            return node
        return BufferLoad(self.new, self.index_map.apply(node.indices, self.analyzer))

    def visit_BufferStore(self, node: BufferStore) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.new:
            return node
        return BufferStore(self.new, node.value, self.index_map.apply(node.indices, self.analyzer))

    def visit_BufferRegion(self, node: BufferRegion) -> Any:
        if node.buffer is not self.old:
            return node
        if all(isinstance(r.extent, IntImm) and r.extent.value == 1 for r in node.region):
            mins = self.index_map.apply(tuple(r.min for r in node.region), self.analyzer)
            return BufferRegion(self.new, tuple(Range(m, const(1, m.dtype)) for m in mins))
        if not all(isinstance(r.extent, IntImm) for r in node.region):
            return BufferRegion.full(self.new)
        # each new index over the region (an offset within each old range): a point, a whole
        # offset's range (a blockized tile's ``v0_o // 4, 0:16``), else the whole dimension
        offsets = [Var(f"r{k}", r.min.dtype) for k, r in enumerate(node.region)]
        for var, r in zip(offsets, node.region):
            self.analyzer.bind(var, 0, r.extent.value)
        mapped = self.index_map.apply(tuple(r.min + v for r, v in zip(node.region, offsets)), self.analyzer)
        ranges = []
        for e, dim in zip(mapped, self.new.shape):
            used = [k for k, v in enumerate(offsets) if uses_var(e, {id(v)})]
            if not used:
                ranges.append(Range(e, const(1, e.dtype)))
                continue
            base = self.analyzer.simplify(substitute(e, {offsets[used[0]]: const(0, e.dtype)}))
            k = used[0]
            if len(used) == 1 and not uses_var(base, {id(offsets[k])}) and \
                    structural_equal(self.analyzer.simplify(e - base), offsets[k]):
                ranges.append(Range(base, node.region[k].extent))
            else:
                ranges.append(Range(const(0, dim.dtype), dim))
        return BufferRegion(self.new, tuple(ranges))


def linear_terms(e: PrimExpr) -> list[tuple[Var, int]] | None:
    """``[(var, coefficient)]`` of a sum of variables times constants (``i * 96 + j * 32 + k``),
    None for another expression."""
    terms, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Add):
            stack += [x.b, x.a]
        elif isinstance(x, Var):
            terms.append((x, 1))
        elif isinstance(x, Mul) and isinstance(x.a, Var) and isinstance(x.b, IntImm):
            terms.append((x.a, x.b.value))
        else:
            return None
    return terms


def mixed_radix(terms: list, extent_of: Any) -> list | None:
    """``terms`` (``[(key, coefficient)]`` of ``i * 12 + j * 4 + k``) outermost first, when they are
    the digits of a mixed-radix number: the innermost coefficient 1, each other the product of the
    constant extents (``extent_of(key)``) below it; the outermost extent may be symbolic. None
    otherwise."""
    ordered = sorted(terms, key=lambda t: -t[1])
    stride = 1
    for k, (key, coefficient) in enumerate(reversed(ordered)):
        if coefficient != stride:
            return None
        if k < len(ordered) - 1:
            extent = extent_of(key)
            if not isinstance(extent, IntImm):
                return None
            stride *= extent.value
    return ordered


def _fused_extent(e: PrimExpr, extents: dict) -> PrimExpr | None:
    """The extent of a new index that is an old index, a constant, or old indices fused in
    mixed radix (``i0 * e1 + i1``, ``e1`` the extent of ``i1``); None for anything else."""
    if isinstance(e, Var):
        return extents.get(id(e))
    if isinstance(e, IntImm):
        return const(e.value + 1, e.dtype) if e.value >= 0 else None
    if isinstance(e, Add) and isinstance(e.a, Mul) and isinstance(e.b, Var):
        inner, outer = extents.get(id(e.b)), _fused_extent(e.a.a, extents)
        if inner is not None and outer is not None and structural_equal(e.a.b, inner):
            return Analyzer().simplify(Mul(outer, inner))
    return None


def _symbolic_shape(buffer: Buffer, index_map: IndexMap) -> tuple:
    """The new shape of a buffer of symbolic shape, for maps that only insert unit dimensions and
    fuse dimensions, or drop unit ones (one-to-one, no padding, by construction)."""
    extents = {id(v): e for v, e in zip(index_map.initial_indices, buffer.shape)}
    used = [id(v) for e in index_map.final_indices for v in collect(e, Var)]
    dropped = [e for v, e in extents.items() if v not in used]
    shape = tuple(_fused_extent(e, extents) for e in index_map.final_indices)
    if None in shape or len(used) != len(set(used)) or not all(is_const_int(e, 1) for e in dropped):
        raise ScheduleError(f"transform_layout: buffer '{buffer.name}' has a symbolic shape; only maps that "
                            f"fuse or insert dimensions are supported there, not {index_map}")
    return shape


def _new_shape(buffer: Buffer, index_map: IndexMap) -> tuple:
    analyzer = Analyzer()
    for var, extent in zip(index_map.initial_indices, buffer.shape):
        analyzer.bind(var, 0, extent.value)
    shape = []
    for e in index_map.final_indices:
        b = analyzer.bound(e)
        if b is None or b[0] < 0:
            raise ScheduleError(f"transform_layout: cannot bound the new index {e.script()} of buffer "
                                f"'{buffer.name}' (it must be non-negative and bounded)")
        shape.append(const(b[1] + 1, e.dtype))
    return tuple(shape)


def _tuple_text(exprs: tuple) -> str:
    return "(" + ", ".join(e.script() for e in exprs) + ("," if len(exprs) == 1 else "") + ")"


def _check_one_to_one(buffer: Buffer, index_map: IndexMap, new_shape: tuple) -> None:
    """Refuse a map that sends two elements of ``buffer`` to one place of the new layout."""
    extents = [e.value for e in buffer.shape]
    what = f"the index map {index_map} on buffer '{buffer.name}' of shape {tuple(extents)}"
    try:
        found = collision(index_map.initial_indices, index_map.final_indices, extents,
                          [e.value for e in new_shape])
    except Unchecked as e:
        raise ScheduleError(f"transform_layout: cannot check that {what} is one-to-one ({e}); pass "
                            f"assume_injective_transform=True if it is") from None
    if found is not None:
        first, second = (", ".join(f"{v.name}={point[v]}" for v in index_map.initial_indices) for point in found)
        place = index_map.apply(tuple(const(found[0][v]) for v in index_map.initial_indices))
        raise ScheduleError(f"transform_layout: {what} is not one-to-one: it sends ({first}) and ({second}) "
                            f"both to {_tuple_text(place)}, so the new layout would lose data")


def transform_layout(func: PrimFunc, realize: BlockRealize, buffer_type: str, index: int, index_map: Any,
                     pad_value: Any = None, assume_injective: bool = False) -> tuple[PrimFunc, IndexMap, Any]:
    """``func`` with the buffer relayout, the index map and the pad value as an IndexMap (or None)."""
    block = realize.block
    regions = {"read": block.reads, "write": block.writes}.get(buffer_type)
    if regions is None or not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(f"transform_layout: block '{block.name_hint}' has no {buffer_type} buffer {index}")
    old = regions[index].buffer
    if not isinstance(index_map, IndexMap):
        # the indices take the dtype of the buffer's shape (TVM's LegalizeIndexMapDType: int64 for an
        # int64 shape, so the map's constants are T.int64 too)
        index_map = IndexMap.from_func(index_map, len(old.shape), dtype=old.shape[0].dtype if old.shape else "int32")
    elif len(index_map.initial_indices) != len(old.shape):
        raise ScheduleError(f"transform_layout: the index map takes {len(index_map.initial_indices)} indices, "
                            f"the buffer has {len(old.shape)} dimensions")
    elif old.shape and index_map.initial_indices and index_map.initial_indices[0].dtype != old.shape[0].dtype:
        index_map = _ToIndexType(str(old.shape[0].dtype)).map(index_map)
    symbolic = not all(isinstance(e, IntImm) for e in old.shape)
    shape = _symbolic_shape(old, index_map) if symbolic else _new_shape(old, index_map)
    if pad_value is not None and symbolic:
        raise ScheduleError(f"transform_layout: buffer '{old.name}' has a symbolic shape: no pad_value")
    if pad_value is not None:
        pad_value = layout_pad.pad_value_map(pad_value, old, len(shape))
    analyzer = Analyzer()
    if not assume_injective and not symbolic:
        _check_one_to_one(old, index_map, shape)
        if prod(e.value for e in shape) > prod(e.value for e in old.shape):  # (constant: _new_shape checked)
            if pad_value is None:
                raise ScheduleError(f"transform_layout: the index map {index_map} on buffer '{old.name}' of shape "
                                    f"{tuple(e.value for e in old.shape)} gives shape "
                                    f"{tuple(e.value for e in shape)}, which would introduce padding: give "
                                    f"pad_value, or assume_injective_transform=True to leave the padding undefined")
            padding = layout_pad.split_padding(old, index_map)
            func, new_vars = layout_pad.pad(func, old, shape, padding, pad_value)
            for k, var in enumerate(new_vars):  # the new loops, then each block's new iterators
                analyzer.bind(var, 0, shape[k % len(shape)].value)
    new = old.with_changes(shape=shape)
    body = _Relayout(old, new, index_map, analyzer).visit(func.body)
    buffer_map = FrozenDict({p: (new if b is old else b) for p, b in func.buffer_map.items()})
    return func.with_changes(body=body, buffer_map=buffer_map), index_map, pad_value  # type: ignore[return-value]
