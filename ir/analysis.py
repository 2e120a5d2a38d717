"""Analyses of TensorIR that the parser and later passes share: does a statement hold blocks,
and which buffer regions does a block read and write."""
from __future__ import annotations

from typing import Any

from .buffer import Buffer, BufferRegion
from .expr import Add, BufferLoad, Call, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Range, Sub, Var, const
from .arith import Analyzer, simplify
from .stmt import Block, BlockRealize, BufferStore, For, Stmt
from .node import walk_fields
from .visitor import Mutator, Visitor, collect, walk


def contains_block(stmt: Stmt) -> bool:
    return any(isinstance(n, (Block, BlockRealize)) for n in walk(stmt))


def collect_statements(stmt: Stmt, kind: type | tuple) -> list:
    """The statements of the given class(es) in ``stmt``, in pre-order. Unlike ``collect`` it
    does not go into expressions (no statement sits inside one), which makes it several times
    cheaper on loop nests: the printer asks it once per function."""
    found: list = []
    stack: list = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            found.append(n)
        for name, _, _ in reversed(walk_fields(type(n))):
            value = getattr(n, name)
            if isinstance(value, Stmt):
                stack.append(value)
            elif isinstance(value, (tuple, list)):
                stack.extend(v for v in reversed(value) if isinstance(v, Stmt))
    return found


class _Substitute(Mutator):
    def __init__(self, mapping: dict) -> None:
        self.mapping = mapping

    def visit_Var(self, v: Var) -> Any:
        return self.mapping.get(v, v)


def substitute(expr: Any, mapping: dict) -> Any:
    """``expr`` with variables replaced as ``mapping`` (Var -> PrimExpr) says."""
    return _Substitute(mapping).visit(expr) if mapping else expr


def index_bounds(expr: PrimExpr, doms: dict) -> tuple[PrimExpr, PrimExpr] | None:
    """[lo, hi] of an affine ``expr`` (with floordiv and floormod by positive constants) as the loop
    variables in ``doms`` range over their domains."""
    if isinstance(expr, Var):
        if expr in doms:
            lo, extent = doms[expr]
            return lo, simplify(Sub(Add(lo, extent), const(1, lo.dtype)))
        return expr, expr
    if isinstance(expr, IntImm):
        return expr, expr
    if isinstance(expr, (Add, Sub)):
        a, b = index_bounds(expr.a, doms), index_bounds(expr.b, doms)
        if a is None or b is None:
            return None
        if isinstance(expr, Add):
            return simplify(Add(a[0], b[0])), simplify(Add(a[1], b[1]))
        return simplify(Sub(a[0], b[1])), simplify(Sub(a[1], b[0]))
    if isinstance(expr, Mul):
        for x, c in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(c, IntImm):
                r = index_bounds(x, doms)
                if r is None:
                    return None
                lo, hi = simplify(Mul(r[0], c)), simplify(Mul(r[1], c))
                return (lo, hi) if c.value >= 0 else (hi, lo)
        return None
    if isinstance(expr, (FloorDiv, FloorMod)) and isinstance(expr.b, IntImm) and expr.b.value > 0 \
            and any(isinstance(n, Var) and n in doms for n in walk(expr.a)):
        r = index_bounds(expr.a, doms)
        if r is None:
            return None
        c = expr.b.value
        if isinstance(expr, FloorDiv):  # (monotone)
            return tuple(const(x.value // c, expr.dtype) if isinstance(x, IntImm) else simplify(FloorDiv(x, expr.b))
                         for x in r)
        if isinstance(r[0], IntImm) and isinstance(r[1], IntImm) and r[0].value // c == r[1].value // c:
            return const(r[0].value % c, expr.dtype), const(r[1].value % c, expr.dtype)
        return const(0, expr.dtype), const(c - 1, expr.dtype)
    if isinstance(expr, Call) and getattr(expr.op, "name", None) == "tir.if_then_else":
        return _union_bounds(index_bounds(expr.args[1], doms), index_bounds(expr.args[2], doms))
    used = {n for n in walk(expr) if isinstance(n, Var)}
    return (expr, expr) if not used & set(doms) else None


def _union_bounds(a: tuple | None, b: tuple | None) -> tuple | None:
    """Bounds covering both (TVM's interval union): equal or constant ones, else unknown."""
    from .structural import structural_equal

    if a is None or b is None:
        return None
    if all(isinstance(x, IntImm) for x in a + b):
        return (a[0] if a[0].value <= b[0].value else b[0]), (a[1] if a[1].value >= b[1].value else b[1])
    return a if structural_equal(a[0], b[0]) and structural_equal(a[1], b[1]) else None


class _AccessCollector(Visitor):
    def __init__(self, block: Block):
        self.doms: dict[Var, tuple] = {}
        self.reads: dict[Buffer, list] = {}
        self.writes: dict[Buffer, list] = {}
        self.local = set(block.alloc_buffers)
        self.matched = {m.buffer: m.source for m in block.match_buffers}

    def record(self, table: dict, buffer: Buffer, ranges: list) -> None:
        if buffer in self.local:
            return
        if buffer in self.matched:
            source = self.matched[buffer]
            buffer, ranges = source.buffer, list(source.region)
        table.setdefault(buffer, []).append(ranges)

    def point_ranges(self, buffer: Buffer, indices: tuple) -> list:
        ranges = []
        for i, index in enumerate(indices):
            b = index_bounds(index, self.doms)
            if b is None:
                extent = buffer.shape[i]
                ranges.append(Range(const(0, extent.dtype), extent))
            else:
                lo, hi = b
                ranges.append(Range(lo, simplify(Add(Sub(hi, lo), const(1, lo.dtype)))))
        return ranges

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.record(self.reads, node.buffer, self.point_ranges(node.buffer, node.indices))
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.visit(node.value)
        for i in node.indices:
            self.visit(i)
        self.record(self.writes, node.buffer, self.point_ranges(node.buffer, node.indices))

    def visit_For(self, node: For) -> None:
        self.doms[node.loop_var] = (node.min, node.extent)
        self.generic_visit(node)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        inner = node.block
        binding = dict(zip((iv.var for iv in inner.iter_vars), node.iter_values))
        for table, regions in ((self.reads, inner.reads), (self.writes, inner.writes)):
            for region in regions:
                ranges = []
                for r in region.region:
                    lo_b = index_bounds(substitute(r.min, binding), self.doms)
                    hi_b = index_bounds(substitute(simplify(Sub(Add(r.min, r.extent), const(1, r.min.dtype))), binding), self.doms)
                    if lo_b is None or hi_b is None:
                        ranges = None
                        break
                    ranges.append(Range(lo_b[0], simplify(Add(Sub(hi_b[1], lo_b[0]), const(1, lo_b[0].dtype)))))
                if ranges is None:
                    ranges = [Range(const(0, e.dtype), e) for e in region.buffer.shape]
                self.record(table, region.buffer, ranges)


def _union(buffer: Buffer, accesses: list) -> BufferRegion:
    from .structural import structural_equal

    first = accesses[0]
    if all(structural_equal(first, other) for other in accesses[1:]):
        return BufferRegion(buffer, tuple(first))
    merged = []
    analyzer = Analyzer()
    for dim, rng in enumerate(first):  # (TVM's union evaluates the bounds: constants fold)
        los = [analyzer.simplify(a[dim].min) for a in accesses]
        his = [analyzer.simplify(Add(a[dim].min, a[dim].extent)) for a in accesses]
        if all(isinstance(x, IntImm) for x in los + his):
            lo, hi = min(x.value for x in los), max(x.value for x in his)
            merged.append(Range(const(lo, rng.min.dtype), const(hi - lo, rng.min.dtype)))
        elif all(structural_equal(los[0], x) for x in los) and all(structural_equal(his[0], x) for x in his):
            merged.append(rng)
        else:
            extent = buffer.shape[dim]
            merged.append(Range(const(0, extent.dtype), extent))
    return BufferRegion(buffer, tuple(merged))


def infer_block_regions(block: Block) -> tuple[tuple, tuple]:
    """The (reads, writes) a block's body accesses, as TVM completes a block without
    T.reads/T.writes. With an init statement, the written buffers are not also reads."""
    collector = _AccessCollector(block)
    if block.init is not None:
        collector.visit(block.init)
    collector.visit(block.body)
    writes = tuple(_union(b, acc) for b, acc in collector.writes.items())
    excluded = set(collector.writes) if block.init is not None else set()
    reads = tuple(_union(b, acc) for b, acc in collector.reads.items() if b not in excluded)
    return reads, writes


def entry_vars(func: Any) -> list:
    """The variables a caller of the PrimFunc ``func`` supplies, in the order of a compiled
    entry's slots: each parameter (a buffer parameter as its data pointer), then the symbolic
    sizes, strides and offsets of the parameters' buffers, each once."""
    found: list = []
    seen: set = set()
    values = [func.buffer_map[p].data if p in func.buffer_map else p for p in func.params]
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is not None:
            values += [*buf.shape, *buf.strides, buf.elem_offset]
    for v in values:
        if isinstance(v, Var) and id(v) not in seen:
            seen.add(id(v))
            found.append(v)
    return found


def written_params(func: Any) -> tuple:
    """Indices of the buffer parameters ``func`` stores into (its outputs, in TVM's
    destination-passing style)."""
    stored = {id(s.buffer.data) for s in collect(func.body, BufferStore)}
    return tuple(k for k, p in enumerate(func.params)
                 if (b := func.buffer_map.get(p)) is not None and id(b.data) in stored)


def controls_loop(body: Stmt, nested: bool = True) -> bool:
    """Whether ``body`` holds a ``T.break_loop()`` / ``T.continue_loop()`` that leaves the loop
    whose body it is (``nested``: or one that leaves any loop inside it)."""
    from .op import loop_control
    from .stmt import Evaluate, While
    from .visitor import children

    stack: list = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, Evaluate) and loop_control(node.value):
            return True
        if nested or node is body or not isinstance(node, (For, While)):  # (inner loops own theirs)
            stack.extend(c for c in children(node) if isinstance(c, Stmt))
    return False
