"""read_at and write_at: under a loop, the region of a buffer that the blocks in one iteration of
the loop read (write) is copied into (out of) a buffer of another scope by an ``auto_copy``
block, and those blocks use the copy.

As TVM 0.27 does it: the region is relaxed over the loops inside the loop and, above it, over the
thread loops the storage scope is shared by (``shared``: threadIdx and vthread; ``global``: all);
the copy block's iterators ``v0, ...`` stand for the loops its region depends on.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.expr import DATA_PAR, Add, BufferLoad, IntImm, IterVar, Range, Sub, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, Stmt, seq
from ...ir.visitor import walk
from ..scopes import can_relax_under_thread
from .cache import BufferSwap, _buffer
from .compute_at import _symbolic_bounds, _union
from .errors import ScheduleError
from .tree import enclosing_loops, parent_block, replace_in, replace_stmts, walk_with_path

def read_write_at(func: PrimFunc, loop: For, loop_path: tuple, realize: BlockRealize, index: int, scope_name: str,
                  is_read: bool) -> tuple[PrimFunc, Stmt]:
    primitive = "read_at" if is_read else "write_at"
    block = realize.block
    src = _buffer(block, block.reads if is_read else block.writes, index, "read" if is_read else "write")
    dst = decl_buffer(src.shape, src.dtype, f"{src.name}_{scope_name}", scope=scope_name)
    outer = enclosing_loops(loop_path)
    relax_above = [lp for lp in outer + [loop] if lp.thread_binding is not None
                   and can_relax_under_thread(scope_name, lp.thread_binding.thread_tag)]
    subtrees = list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]
    readers, writers, dims = [], [], None
    for i, tree in enumerate(subtrees):
        for node, path in walk_with_path(tree, loop_path + (loop,)):
            inside = path[len(loop_path) + 1:]
            if not isinstance(node, BlockRealize) or any(isinstance(p, BlockRealize) for p in inside):
                continue
            b = node.block
            has_r = any(r.buffer is src for r in b.reads)
            has_w = any(w.buffer is src for w in b.writes)
            if has_r and i not in readers:
                readers.append(i)
            if has_w and i not in writers:
                writers.append(i)
            if not (has_r if is_read else has_w):
                continue
            relaxed = [lp for lp in inside if isinstance(lp, For)] + relax_above
            inner = {id(lp.loop_var): (lp.loop_var, lp.min.value, lp.extent.value) for lp in relaxed
                     if isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)}
            bindings = {iv.var: v for iv, v in zip(b.iter_vars, node.iter_values)}
            for region in (b.reads if is_read else b.writes):
                if region.buffer is not src:
                    continue
                box = []
                for r in region.region:
                    lo = _symbolic_bounds(substitute(r.min, bindings), inner)
                    last = Sub(Add(r.min, r.extent), const(1, r.min.dtype))
                    hi = _symbolic_bounds(substitute(last, bindings), inner)
                    if lo is None or hi is None:
                        raise ScheduleError(f"{primitive}: cannot bound the access of block '{b.name_hint}' to "
                                            f"buffer '{src.name}' under loop '{loop.loop_var.name}'")
                    box.append((lo[0], hi[1]))
                dims = box if dims is None else [_union(a, c) for a, c in zip(dims, box)]
    if is_read:
        if not readers or (writers and writers[-1] >= readers[0]):
            raise ScheduleError(f"{primitive}: under loop '{loop.loop_var.name}', buffer '{src.name}' must be read "
                                f"after every write of it")
        at, first, last = readers[0], readers[0], len(subtrees)
    else:
        if not writers or (readers and readers[-1] > writers[-1]):
            raise ScheduleError(f"{primitive}: under loop '{loop.loop_var.name}', buffer '{src.name}' must not be "
                                f"read after its last write")
        at, first, last = writers[-1] + 1, 0, writers[-1] + 1
    analyzer = Analyzer()
    domain = [Range(analyzer.simplify(lo), analyzer.simplify(Sub(Add(hi, const(1, hi.dtype)), lo)))
              for lo, hi in dims]
    swap = BufferSwap(src, dst)
    subtrees = [swap.visit(t) if first <= i < last else t for i, t in enumerate(subtrees)]
    loops = {lp.loop_var: lp for lp in outer + [loop]}
    copy = _copy_block(src, dst, domain, loops, is_read, f"{src.name}_{scope_name}", primitive)
    new_loop = loop.with_changes(body=seq(subtrees[:at] + [copy] + subtrees[at:]))
    scope = parent_block(loop_path)
    new_scope = replace_in(scope, {id(loop): new_loop})
    new_scope = new_scope.with_changes(alloc_buffers=new_scope.alloc_buffers + (dst,))
    return replace_stmts(func, {id(scope): new_scope}), copy


def _copy_block(src: Buffer, dst: Buffer, domain: list, loops: dict, is_read: bool, name: str,
                primitive: str) -> BlockRealize:
    """The ``auto_copy`` block copying ``domain``; the loop variables the domain uses become its
    iterators ``v0, v1, ...`` (in order of appearance), ranging over their loops."""
    mapping: dict = {}
    iters, values = [], []

    def rename(e: Any) -> Any:
        for v in [n for n in walk(e) if isinstance(n, Var)]:
            if v in mapping:
                continue
            lp = loops.get(v)
            if lp is None:
                raise ScheduleError(f"{primitive}: the copied region depends on '{v.name}', which is not a loop "
                                    f"around the copy")
            mapping[v] = Var(f"v{len(iters)}", v.dtype)
            iters.append(IterVar(Range(lp.min, lp.extent), mapping[v], DATA_PAR))
            values.append(v)
        return substitute(e, mapping)
    domain = [Range(rename(r.min), rename(r.extent)) for r in domain]
    loop_vars = [Var(f"ax{i}", "int32") for i in range(len(domain))]
    # (a region from 0 indexes with the loop variable alone, as TVM's folding of 0 + v gives)
    indices = tuple(v if is_const_int(r.min, 0) else Add(r.min, v) for r, v in zip(domain, loop_vars))
    copy_from, copy_to = (src, dst) if is_read else (dst, src)
    body: Stmt = BufferStore(copy_to, BufferLoad(copy_from, indices), indices)
    for v, r in reversed(list(zip(loop_vars, domain))):
        body = For(v, const(0, "int32"), r.extent, "serial", body)
    block = Block(tuple(iters), reads=(BufferRegion(copy_from, tuple(domain)),),
                  writes=(BufferRegion(copy_to, tuple(domain)),), name_hint=name, body=body,
                  annotations=FrozenDict({"auto_copy": True}))
    return BlockRealize(tuple(values), const(True), block)
