"""Buffers in other memory scopes: cache_read, cache_write, set_scope and storage_align (and
unsafe_set_dtype, which swaps a buffer for another the same way set_scope does, and reindex,
a copy stage like a cache's, into a buffer indexed by the block's iterators).

A cache is a new buffer ``A_shared`` plus a copy block of the same name over loops ``ax0, ax1``
that covers the whole buffer, placed in the scope of the block: after the producer of the read
buffer (cache_read) or after the writer (cache_write). The cache buffer is allocated by the
scope's block.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer, binary
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.dtype import DataType
from ...ir.expr import DATA_PAR, Add, BufferLoad, Cast, IntImm, IterVar, PrimExpr, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import SERIAL, Block, BlockRealize, BufferStore, For, SeqStmt, Stmt, seq
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, Visitor, walk
from .errors import ScheduleError
from .loop_transform import nest
from .tree import blocks_under, parent_block, replace_in, replace_stmts


class BufferSwap(Mutator):
    """Replaces one buffer ``old`` by another ``new`` (or each key of the dict ``old`` by its value)
    in loads, stores, regions and allocations (and, with ``data=True``, its data pointer where the
    code passes it, as to an external call)."""

    def __init__(self, old: Buffer | dict, new: Buffer | None = None, data: bool = False):
        self.old, self.new = old, new
        self.swaps = dict(old) if isinstance(old, dict) else {old: new}
        self.datas = {o.data: n.data for o, n in self.swaps.items()} if data else {}

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return self.swaps.get(b, b)

    def visit_Var(self, v: Var) -> Var:
        return self.datas.get(v, v)


def _buffer(block: Block, regions: tuple, index: int, what: str) -> Buffer:
    if not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(f"{what}_buffer_index {index!r} is out of range: block '{block.name_hint}' "
                            f"{what}s {len(regions)} buffer(s)")
    return regions[index].buffer


def _scope_children(path: tuple) -> tuple[Block, list[Stmt]]:
    scope = parent_block(path)
    body = scope.body
    return scope, list(body.seq) if isinstance(body, SeqStmt) else [body]


def _position_of(children: list[Stmt], realize: BlockRealize) -> int:
    return next(i for i, child in enumerate(children) if any(r is realize for r in blocks_under(child)))


def copy_block(src: Buffer, dst: Buffer, name: str) -> Stmt:
    """``for ax0, ax1: dst[v0, v1] = src[v0, v1]`` over the whole buffer."""
    shape = src.shape  # (the variables take the type of their dimension, int64 for T.int64 ones)
    loop_vars = [Var(f"ax{i}", s.dtype) for i, s in enumerate(shape)]
    iters = [IterVar(Range(const(0, s.dtype), s), Var(f"v{i}", s.dtype), DATA_PAR) for i, s in enumerate(shape)]
    point = tuple(iv.var for iv in iters)
    region = tuple(Range(v, const(1, v.dtype)) for v in point)
    block = Block(tuple(iters), (), (), (BufferRegion(src, region),), (BufferRegion(dst, region),), name,
                  None, BufferStore(dst, BufferLoad(src, point), point))
    realize = BlockRealize(tuple(loop_vars), const(True), block)
    return nest(loop_vars, list(shape), realize)


def _insert(func: PrimFunc, scope: Block, children: list[Stmt], position: int, stmt: Stmt,
            new_buffer: Buffer, swaps: dict[int, Stmt]) -> PrimFunc:
    new_children = children[:position] + [stmt] + children[position:]
    new_children = [swaps.get(id(c), c) for c in new_children]
    new_scope = scope.with_changes(body=seq(new_children), alloc_buffers=scope.alloc_buffers + (new_buffer,))
    return replace_stmts(func, {id(scope): new_scope})


def _swap_in(children: list[Stmt], names: set | None, old: Buffer, new: Buffer, skip: int) -> dict:
    """Blocks (all readers of ``old``, or those named) in the scope's statements from ``skip`` on,
    rewritten to use ``new``; keyed by the id of the scope statement holding them."""
    swaps = {}
    for child in children[skip:]:
        table = {}
        for r in blocks_under(child):
            reads_old = any(x.buffer is old for x in r.block.reads)
            if (names is None and reads_old) or (names is not None and r.block.name_hint in names):
                table[id(r.block)] = BufferSwap(old, new).visit(r.block)
        if table:
            swaps[id(child)] = replace_in(child, table)
    return swaps


def cache_read(func: PrimFunc, realize: BlockRealize, path: tuple, index: int, scope_name: str,
               consumers: list[Block] | None) -> tuple[PrimFunc, Stmt]:
    """A copy ``A_shared`` of the buffer the block reads at ``index``, placed by TVM's cache location
    rule (after the buffer's only writer, before the first consumer; at the scope's start when no
    block writes it); the consumers (all readers when none is named) read the copy. Returns the
    function and the copy stage."""
    from .reindex_cache import cache_location, insert_at

    block = realize.block
    old = _buffer(block, block.reads, index, "read")
    new = decl_buffer(old.shape, old.dtype, f"{old.name}_{scope_name}", scope=scope_name)
    scope = parent_block(path)
    in_scope = blocks_under(scope.body)
    writers = [k for k, r in enumerate(in_scope) if any(w.buffer is old for w in r.block.writes)]
    # the readers after the writer (those before it read what was there before)
    readers = [r.block for r in in_scope[writers[-1] + 1 if writers else 0:]
               if any(x.buffer is old for x in r.block.reads)]
    writers = [in_scope[k].block for k in writers]
    chosen = consumers or readers
    if len(writers) > 1:
        raise ScheduleError(f"cache_read: buffer '{old.name}' has {len(writers)} writers in the scope of block "
                            f"'{block.name_hint}'")
    where, pos = cache_location(scope, writers[0], chosen) if writers else (scope, 0)
    if where is None or pos < 0:
        raise ScheduleError(f"cache_read: block '{block.name_hint}' is not after the writer of buffer "
                            f"'{old.name}' in its scope")
    stage = copy_block(old, new, new.name)
    table = {id(b): BufferSwap(old, new).visit(b) for b in chosen}
    return insert_at(func, where, pos, stage, table, scope, new), stage


def cache_write(func: PrimFunc, realize: BlockRealize, path: tuple, index: int, scope_name: str,
                consumers: list[str] | None) -> tuple[PrimFunc, str]:
    block = realize.block
    old = _buffer(block, block.writes, index, "write")
    new = decl_buffer(old.shape, old.dtype, f"{old.name}_{scope_name}", scope=scope_name)
    inside = {id(r) for r in blocks_under(realize)}  # (the block and those nested in it, a blockized one's)
    others = [r.block.name_hint for r in blocks_under(func.body)
              if id(r) not in inside and any(w.buffer is old for w in r.block.writes)]
    if others:
        raise ScheduleError(f"cache_write: buffer '{old.name}' of block '{block.name_hint}' is also "
                            f"written by block(s) {', '.join(repr(n) for n in others)}")
    scope, children = _scope_children(path)
    position = _position_of(children, realize) + 1
    sharing = [r.block.name_hint for r in blocks_under(children[position - 1])
               if id(r) not in inside and any(x.buffer is old for x in r.block.reads)]
    if sharing:  # readers inside the writer's loop nest: the write-back goes between, as TVM's
        from .reindex_cache import cache_location, insert_at  # (that module builds on this one)
        readers = [r.block for r in blocks_under(children[position - 1])
                   if id(r) not in inside and any(x.buffer is old for x in r.block.reads)]
        where, pos = cache_location(scope, block, readers)
        if where is None or pos < 0:
            raise ScheduleError(f"cache_write: block '{sharing[0]}' reads buffer '{old.name}' inside the loop "
                                f"nest of its writer '{block.name_hint}' before it writes it")
        stage = copy_block(new, old, new.name)
        return insert_at(func, where, pos, stage, {id(block): BufferSwap(old, new).visit(block)}, scope, new), stage
    swaps = {id(children[position - 1]): replace_in(children[position - 1],
                                                          {id(block): BufferSwap(old, new).visit(block)})}
    if consumers:
        swaps.update(_swap_in(children, set(consumers), old, new, position))
    stage = copy_block(new, old, new.name)
    return _insert(func, scope, children, position, stage, new, swaps), stage


def set_scope(func: PrimFunc, realize: BlockRealize, index: int, scope_name: str) -> PrimFunc:
    block = realize.block
    old = _buffer(block, block.writes, index, "write")
    if any(b is old for b in func.buffer_map.values()):
        raise ScheduleError(f"set_scope: buffer '{old.name}' written by block '{block.name_hint}' is a "
                            f"parameter of the function; only allocated buffers can change scope")
    new = decl_buffer(old.shape, old.dtype, f"{old.name}_{scope_name}", scope=scope_name,
                      elem_offset=old.elem_offset)  # (TVM copies the buffer, its offset too)
    return func.with_changes(body=BufferSwap(old, new).visit(func.body))  # type: ignore[return-value]


class _DTypeSwap(BufferSwap):
    """Swaps a buffer for one of another dtype: stores convert to it, loads convert back."""

    def visit_BufferStore(self, s: BufferStore) -> BufferStore:
        out = self.generic_visit(s)
        return out.with_changes(value=Cast(self.new.dtype, out.value)) if out.buffer is self.new else out

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        out = self.generic_visit(e)
        return Cast(self.old.dtype, out) if out.buffer is self.new else out


def unsafe_set_dtype(func: PrimFunc, realize: BlockRealize, index: int, dtype: str) -> PrimFunc:
    """The buffer the block writes at ``index`` stored as ``dtype`` (TVM's ``UnsafeSetDType``:
    unsafe, since the conversions may lose precision)."""
    block = realize.block
    old = _buffer(block, block.writes, index, "write")
    target = DataType(dtype)
    if old.dtype == target:
        return func
    if any(b is old for b in func.buffer_map.values()):
        raise ScheduleError(f"unsafe_set_dtype: buffer '{old.name}' written by block '{block.name_hint}' is a "
                            f"parameter of the function; only allocated buffers can change dtype")
    new = decl_buffer(old.shape, target, old.name, scope=old.scope, strides=old.strides,
                      elem_offset=old.elem_offset, data_alignment=old.data_alignment,
                      offset_factor=old.offset_factor, buffer_type=old.buffer_type,
                      axis_separators=old.axis_separators)
    return func.with_changes(body=_DTypeSwap(old, new).visit(func.body))  # type: ignore[return-value]


def storage_align(func: PrimFunc, realize: BlockRealize, index: int, axis: int, factor: int,
                  offset: int) -> PrimFunc:
    block = realize.block
    buffer = _buffer(block, block.writes, index, "write")
    if -len(buffer.shape) <= axis < 0:  # (counted from the last, as in TVM)
        axis += len(buffer.shape)
    if not 0 <= axis < len(buffer.shape):
        raise ScheduleError(f"storage_align: axis {axis} is out of range for buffer '{buffer.name}' "
                            f"of rank {len(buffer.shape)}")
    if factor <= 0 or not 0 <= offset < factor:
        raise ScheduleError(f"storage_align: need factor > 0 and 0 <= offset < factor, got factor "
                            f"{factor} and offset {offset}")
    annotations: dict[str, Any] = dict(block.annotations)
    annotations["buffer_dim_align"] = tuple(annotations.get("buffer_dim_align", ())) + (
        (index, axis, factor, offset),)
    return replace_stmts(func, {id(block): block.with_changes(annotations=FrozenDict(annotations))})


class _AccessIndices(Visitor):
    """The one index tuple with which a leaf block's body reads and writes ``buffer``."""

    def __init__(self, block: Block, buffer: Buffer):
        self.block, self.buffer, self.indices = block, buffer, None

    def note(self, indices: tuple) -> None:
        if self.indices is None:
            self.indices = indices
        elif not structural_equal(self.indices, indices):
            raise ScheduleError(f"reindex: block '{self.block.name_hint}' accesses buffer '{self.buffer.name}' "
                                f"with more than one index pattern")

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self.generic_visit(e)
        if e.buffer is self.buffer:
            self.note(e.indices)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.generic_visit(s)
        if s.buffer is self.buffer:
            self.note(s.indices)

    def visit_Block(self, b: Block) -> None:
        raise ScheduleError(f"reindex: block '{self.block.name_hint}' is not a leaf block (it holds "
                            f"block '{b.name_hint}')")

    def visit_Buffer(self, b: Buffer) -> None:
        pass  # (a buffer's own data pointer is not an access)

    def visit_Var(self, v: Var) -> None:
        if v is self.buffer.data:
            raise ScheduleError(f"reindex: block '{self.block.name_hint}' accesses buffer "
                                f"'{self.buffer.name}' opaquely")


class Reindexed(Mutator):
    """The block with its accesses of ``old`` made accesses of ``new`` at ``indices``."""

    def __init__(self, old: Buffer, new: Buffer, indices: tuple):
        self.old, self.new, self.indices = old, new, indices

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        out = self.generic_visit(e)
        return BufferLoad(self.new, self.indices) if out.buffer is self.old else out

    def visit_BufferStore(self, s: BufferStore) -> BufferStore:
        out = self.generic_visit(s)
        return out.with_changes(buffer=self.new, indices=self.indices) if out.buffer is self.old else out


def reindex(func: PrimFunc, realize: BlockRealize, path: tuple, kind: str, index: int) -> tuple[PrimFunc, str]:
    """TVM's ``ReIndex``: a stage that copies the buffer the block accesses at (``kind``,
    ``index``) into (read) or out of (write) a new buffer ``<name>_reindex`` indexed by the block's
    iterators that the access uses; the block then accesses the new buffer at those iterators."""
    block = realize.block
    old = _buffer(block, block.reads if kind == "read" else block.writes, index, kind)
    collector = _AccessIndices(block, old)
    collector.visit(block.body)
    if collector.indices is None:
        raise ScheduleError(f"reindex: block '{block.name_hint}' does not access buffer '{old.name}' in its body")
    analyzer = Analyzer()
    for iv in block.iter_vars:
        if isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
            analyzer.bind(iv.var, iv.dom.min.value, iv.dom.extent.value)
    original = tuple(i if isinstance(i, (Var, IntImm)) else analyzer.simplify(i) for i in collector.indices)
    used = {id(n) for i in original for n in walk(i) if isinstance(n, Var)}
    covered = [iv for iv in block.iter_vars if id(iv.var) in used]
    new = decl_buffer(tuple(binary(Add, iv.dom.min, iv.dom.extent) for iv in covered), old.dtype,
                      f"{old.name}_reindex", scope=old.scope)
    # the copy stage: its iterators v0, v1, ... and loops ax0, ax1, ... over the covered iterators
    stage_vars = {id(iv.var): Var(f"v{k}", iv.var.dtype) for k, iv in enumerate(covered)}
    point = tuple(stage_vars[id(iv.var)] for iv in covered)
    target = tuple(substitute(i, {iv.var: stage_vars[id(iv.var)] for iv in covered}) for i in original)
    src, dst = (old, new) if kind == "read" else (new, old)
    src_at, dst_at = (target, point) if kind == "read" else (point, target)
    stage = Block(tuple(IterVar(iv.dom, stage_vars[id(iv.var)], DATA_PAR) for iv in covered), (), (),
                  (BufferRegion(src, tuple(Range(i, const(1, i.dtype)) for i in src_at)),),
                  (BufferRegion(dst, tuple(Range(i, const(1, i.dtype)) for i in dst_at)),),
                  f"{dst.name}_reindex", None, BufferStore(dst, BufferLoad(src, src_at), dst_at))
    loop_vars = [Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(covered)]
    body: Stmt = BlockRealize(tuple(loop_vars), const(True), stage)
    for var, iv in reversed(list(zip(loop_vars, covered))):
        body = For(var, iv.dom.min, iv.dom.extent, SERIAL, body)
    # the block accesses the new buffer at its covered iterators
    at = tuple(iv.var for iv in covered)
    region = tuple(Range(iv.var, const(1, iv.var.dtype)) for iv in covered)
    swap = Reindexed(old, new, at)
    new_block = block.with_changes(body=swap.visit(block.body),
                                   init=None if block.init is None else swap.visit(block.init),
                                   reads=_regions_of(block.reads, old, BufferRegion(new, region)),
                                   writes=_regions_of(block.writes, old, BufferRegion(new, region)))
    scope, children = _scope_children(path)
    position = _position_of(children, realize)
    child = children[position]
    chain = child
    while isinstance(chain, For) and chain is not realize:
        chain = chain.body
    if chain is not realize:
        raise ScheduleError(f"reindex: the loops around block '{block.name_hint}' are not a chain (a loop "
                            f"holds other statements beside it)")
    swaps = {id(child): replace_in(child, {id(block): new_block})}
    return _insert(func, scope, children, position + (kind == "write"), body, new, swaps), stage.name_hint


def _regions_of(regions: tuple, old: Buffer, replacement: BufferRegion) -> tuple:
    return tuple(replacement if r.buffer is old else r for r in regions)
