"""cache_inplace: a block that reads and writes a buffer in place (an external call on
``data.data``) works on a copy in another scope: a stage copies the region in before it and a
stage of the same name copies it out after it, both next to the block in its innermost loop.

As TVM 0.27 does it (the stages are named ``<buffer>_<scope>`` alike, and run over the block's
read and write regions with loops ``ax0, ...``).
"""
from __future__ import annotations

from typing import Any

from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.expr import DATA_PAR, Add, BufferLoad, IntImm, IterVar, Range, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, SeqStmt, Stmt, seq
from .cache import BufferSwap, _buffer
from .errors import ScheduleError
from .loop_transform import nest
from .tree import blocks_under, enclosing_loops, parent_block, replace_in, replace_stmts


def region_copy(src: Buffer, dst: Buffer, region: BufferRegion, name: str) -> Stmt:
    """``for ax0, ...: dst[v0, ...] = src[v0, ...]`` over ``region`` (of either buffer), the
    iterators ranging over the whole buffer (TVM's full-region cache stage)."""
    loop_vars = [Var(f"ax{i}", r.extent.dtype) for i, r in enumerate(region.region)]
    iters = tuple(IterVar(Range(const(0, s.dtype), s), Var(f"v{i}", r.extent.dtype), DATA_PAR)
                  for i, (r, s) in enumerate(zip(region.region, region.buffer.shape)))
    point = tuple(iv.var for iv in iters)
    at = tuple(Range(v, const(1, v.dtype)) for v in point)
    block = Block(iters, reads=(BufferRegion(src, at),), writes=(BufferRegion(dst, at),), name_hint=name,
                  body=BufferStore(dst, BufferLoad(src, point), point))
    values = tuple(v if isinstance(r.min, IntImm) and r.min.value == 0 else Add(r.min, v)
                   for r, v in zip(region.region, loop_vars))
    return nest(loop_vars, [r.extent for r in region.region], BlockRealize(values, const(True), block))


def cache_inplace(func: PrimFunc, realize: BlockRealize, path: tuple, index: int,
                  scope_name: str) -> tuple[PrimFunc, list[Stmt]]:
    block = realize.block
    old = _buffer(block, block.reads, index, "read")
    read = next(r for r in block.reads if r.buffer is old)
    write = next((w for w in block.writes if w.buffer is old), None)
    if write is None:
        raise ScheduleError(f"cache_inplace: block '{block.name_hint}' reads buffer '{old.name}' but does not "
                            f"write it")
    scope = parent_block(path)
    others = [r.block.name_hint for r in blocks_under(scope.body) if r is not realize
              and any(x.buffer is old for x in r.block.reads + r.block.writes)]
    if others:
        raise ScheduleError(f"cache_inplace: block '{others[0]}' also accesses buffer '{old.name}' of block "
                            f"'{block.name_hint}'")
    new = decl_buffer(old.shape, old.dtype, f"{old.name}_{scope_name}", scope=scope_name)
    stage_in = region_copy(old, new, read, new.name)
    stage_out = region_copy(new, old, write, new.name)
    loops = enclosing_loops(path)
    holder: Any = loops[-1] if loops else scope
    kids = list(holder.body.seq) if isinstance(holder.body, SeqStmt) else [holder.body]
    at = next(i for i, kid in enumerate(kids) if any(r is realize for r in blocks_under(kid)))
    swapped = realize.with_changes(block=BufferSwap(old, new, data=True).visit(block))
    kid = replace_in(kids[at], {id(realize): swapped})
    body = seq(kids[:at] + [stage_in, kid, stage_out] + kids[at + 1:])
    if holder is scope:
        new_scope = scope.with_changes(body=body)
    else:
        new_scope = replace_in(scope, {id(holder): holder.with_changes(body=body)})
    new_scope = new_scope.with_changes(alloc_buffers=new_scope.alloc_buffers + (new,))
    return replace_stmts(func, {id(scope): new_scope}), [stage_in, stage_out]
