"""reindex_cache_read and reindex_cache_write: a cache like cache_read/cache_write whose buffer
is indexed by an index map of the block's iterators (``lambda i, j: (j, i // 2, i % 2)``), as in
reindex; the copy block runs over the block's own loops, named as they are.

As TVM 0.27 does it: the copy goes where TVM's cache location rule puts it: in the innermost
loop (or the scope) holding the producer and the first consumer, between them.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.expr import DATA_PAR, BufferLoad, IntImm, IterVar, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, Stmt, seq
from ...ir.visitor import walk
from .cache import Reindexed, _buffer
from .errors import ScheduleError
from .layout import IndexMap
from .tree import blocks_under, enclosing_loops, parent_block, replace_in, replace_stmts


class _Location:
    """TVM's cache location: the statement (scope block or loop) whose body gets the copy, and
    the position in that body, for a copy after ``block`` and before the first ``related`` block."""

    def __init__(self, block: Block, related: list, scope: Block):
        self.block, self.related, self.scope = block, related, scope
        self.seen_block = self.seen_related = False
        self.where: Any = None
        self.pos = -1

    def visit(self, s: Any) -> None:
        if isinstance(s, SeqStmt):
            before, self.seen_block = self.seen_block, False
            for i, child in enumerate(s.seq):
                if self.pos != -1:
                    break
                self.visit(child)
                if self.seen_block and self.seen_related and self.pos == -1:
                    self.pos = i
                    break
                if self.seen_related:
                    break
            self.seen_block = self.seen_block or before
        elif isinstance(s, BlockRealize):
            self.visit(s.block)
        elif isinstance(s, Block):
            if s is self.scope:
                self.visit(s.body)
                if self.seen_related and self.where is None:
                    self.where = s
                    if not self.seen_block and self.pos == -1:
                        self.pos = 0
            elif s is self.block:
                self.seen_block = True
            elif any(s is r for r in self.related):
                self.seen_related = True
        elif isinstance(s, For):
            self.visit(s.body)
            if self.seen_block and self.seen_related and self.where is None and self.pos != -1:
                self.where = s
        else:
            for c in (getattr(s, "body", None), getattr(s, "then_case", None), getattr(s, "else_case", None)):
                if c is not None:
                    self.visit(c)


def cache_location(scope: Block, block: Block | None, related: list) -> tuple[Any, int]:
    if block is None or not related:
        body = scope.body
        return scope, (0 if block is None else len(body.seq) if isinstance(body, SeqStmt) else 1)
    loc = _Location(block, related, scope)
    loc.visit(scope)
    return loc.where, loc.pos


def insert_at(func: PrimFunc, where: Any, pos: int, stage: Stmt, table: dict, scope: Block,
              buffer: Buffer) -> PrimFunc:
    """``func`` with ``stage`` at ``pos`` of ``where``'s body, the statements of ``table`` replaced
    and ``buffer`` allocated by ``scope``."""
    def put(body: Stmt) -> Stmt:
        body = replace_in(body, table) if table else body
        items = list(body.seq) if isinstance(body, SeqStmt) else [body]
        return seq(items[:pos] + [stage] + items[pos:])
    if where is scope:
        new_scope = scope.with_changes(body=put(scope.body), alloc_buffers=scope.alloc_buffers + (buffer,))
    else:
        new_scope = replace_in(scope, {**table, id(where): where.with_changes(body=put(where.body))})
        new_scope = new_scope.with_changes(alloc_buffers=new_scope.alloc_buffers + (buffer,))
    return replace_stmts(func, {id(scope): new_scope})


def reindex_cache(func: PrimFunc, realize: BlockRealize, path: tuple, index: int, scope_name: str,
                  index_map: Any, is_read: bool) -> tuple[PrimFunc, str, IndexMap]:
    primitive = "reindex_cache_read" if is_read else "reindex_cache_write"
    block = realize.block
    old = _buffer(block, block.reads if is_read else block.writes, index, "read" if is_read else "write")
    region = next(r for r in (block.reads if is_read else block.writes) if r.buffer is old)
    imap = index_map if isinstance(index_map, IndexMap) else IndexMap.from_func(
        index_map, len(block.iter_vars), primitive, f"block '{block.name_hint}' has", "iterators")
    if len(imap.initial_indices) != len(block.iter_vars):
        raise ScheduleError(f"{primitive}: the index map takes {len(imap.initial_indices)} indices, block "
                            f"'{block.name_hint}' has {len(block.iter_vars)} iterators")
    scope = parent_block(path)
    in_scope = blocks_under(scope.body)
    writers = [r for r in in_scope if any(w.buffer is old for w in r.block.writes)]
    if not is_read and writers != [realize]:
        raise ScheduleError(f"{primitive}: block '{block.name_hint}' must be the only writer of buffer "
                            f"'{old.name}' in its scope")
    if any(not (isinstance(r.extent, IntImm) and r.extent.value == 1) for r in region.region):
        raise ScheduleError(f"{primitive}: block '{block.name_hint}' must access buffer '{old.name}' at a single "
                            f"point, it accesses a region")
    new_indices = imap.apply(tuple(iv.var for iv in block.iter_vars))
    old_indices = [r.min for r in region.region]
    used_new = {id(v) for e in new_indices for v in walk(e) if isinstance(v, Var)}
    used_old = {id(v) for e in old_indices for v in walk(e) if isinstance(v, Var)}
    covered = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if (id(iv.var) in used_new) != (id(iv.var) in used_old):
            raise ScheduleError(f"{primitive}: iterator '{iv.var.name}' of block '{block.name_hint}' appears in "
                                f"only one of the buffer's indices [{', '.join(e.script() for e in old_indices)}] "
                                f"and the new indices [{', '.join(e.script() for e in new_indices)}]")
        if id(iv.var) in used_new:
            covered.append((iv, value))
    shape = []
    analyzer = Analyzer()
    for var, iv in zip(imap.initial_indices, block.iter_vars):
        if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
            raise ScheduleError(f"{primitive}: iterator '{iv.var.name}' of block '{block.name_hint}' has a "
                                f"symbolic domain")
        analyzer.bind(var, iv.dom.min.value, iv.dom.extent.value)
    for e in imap.final_indices:
        b = analyzer.bound(e)
        if b is None:
            raise ScheduleError(f"{primitive}: cannot bound the new index {e.script()}")
        shape.append(const(b[1] + 1, e.dtype))
    new = decl_buffer(shape, old.dtype, f"{old.name}_{scope_name}", scope=scope_name)
    # where the copy goes, and the loops it runs over (those binding the covered iterators)
    if is_read:
        producer = writers[0].block if len(writers) == 1 else None
        where, pos = cache_location(scope, producer, [block]) if producer is not None else (scope, 0)
    else:
        readers = [r.block for r in in_scope if r is not realize and any(x.buffer is old for x in r.block.reads)]
        where, pos = cache_location(scope, block, readers)
    loops = enclosing_loops(path)
    if where is not scope:
        loops = loops[next(i for i, lp in enumerate(loops) if lp is where) + 1:]
    bound = {id(v) for _, value in covered for v in walk(value) if isinstance(v, Var)}
    loops = [lp for lp in loops if id(lp.loop_var) in bound]
    mapping: dict = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    iters = []
    for iv, _ in covered:
        mapping[iv.var] = Var(iv.var.name, iv.var.dtype)
        iters.append(IterVar(iv.dom, mapping[iv.var], DATA_PAR))
    old_at = tuple(substitute(e, mapping) for e in old_indices)
    new_at = tuple(substitute(e, mapping) for e in new_indices)
    src, dst, src_at, dst_at = (old, new, old_at, new_at) if is_read else (new, old, new_at, old_at)
    stage_block = Block(tuple(iters), reads=(BufferRegion(src, _points(src_at)),),
                        writes=(BufferRegion(dst, _points(dst_at)),), name_hint=new.name,
                        body=BufferStore(dst, BufferLoad(src, src_at), dst_at))
    stage: Stmt = BlockRealize(tuple(substitute(v, mapping) for _, v in covered), const(True), stage_block)
    for lp in reversed(loops):
        stage = For(mapping[lp.loop_var], lp.min, lp.extent, "serial", stage)
    swap = Reindexed(old, new, new_indices)
    new_block = block.with_changes(
        body=swap.visit(block.body), init=None if block.init is None else swap.visit(block.init),
        reads=_swap_regions(block.reads, old, new, new_indices), writes=_swap_regions(block.writes, old, new,
                                                                                     new_indices))
    return insert_at(func, where, pos, stage, {id(block): new_block}, scope, new), new.name, imap


def _points(at: tuple) -> tuple:
    return tuple(Range(e, const(1, e.dtype)) for e in at)


def _swap_regions(regions: tuple, old: Buffer, new: Buffer, at: tuple) -> tuple:
    return tuple(BufferRegion(new, _points(at)) if r.buffer is old else r for r in regions)
