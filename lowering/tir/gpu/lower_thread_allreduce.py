"""LowerThreadAllreduce: ``T.tvm_thread_allreduce`` becomes warp shuffles or a shared-memory tree.

Inside ``T.attr(comm_reducer, "reduce_scope", 0)``, ``T.tvm_thread_allreduce(n, values...,
cond, results..., threads...)`` combines ``values`` over the threads named last (the reduce
threads; the other launched ``threadIdx`` make independent groups) and leaves the result in
every thread's ``results`` buffers. As TVM 0.27 lowers it for cuda:

* a reduction over at most a warp (32) of contiguous threads, or over whole warps, is done with
  ``T.tvm_warp_shuffle_down`` halving steps in local buffers ``red_buf0``/``t0`` under the
  ``T.tvm_warp_activemask()`` mask; over one warp the result is broadcast from lane 0 with
  ``T.tvm_warp_shuffle``; over several, each warp's result goes through a shared staging buffer
  to a second shuffle round in the first warp, and from there to a shared ``red_result``;
* any other reduction is a tree in a shared buffer ``red_buf0`` with ``T.tvm_storage_sync``
  between the steps (``"warp"`` barriers around the in-warp steps, which read through ``let``s).

The result buffers' allocations become the buffer holding the result (a shared one is marked
``tirx.volatile``), and their loads read it.
"""
from __future__ import annotations

from ....ir.analysis import substitute
from ....ir.buffer import Buffer
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import (BufferLoad, Call, Cast, IntImm, PrimExpr, Select, Var, const, is_const_int)
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.op import get_op
from ....ir.operators import BY_SYMBOL
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, DeclBuffer, Evaluate, IfThenElse, Stmt
from ....ir.visitor import Mutator
from ..tir_pass import define_tir_pass
from ...scopes import thread_dim, thread_rank
from .threads import Bind, local_buffer, sequence, storage_sync, target_attr

VOLATILE = "tir.volatile"
WARP_TARGETS = ("cuda", "rocm", "metal", "webgpu")


def _flatten(threads: list) -> tuple[PrimExpr, int]:
    """The flat index and the total extent of (dim, var, extent) threads, x fastest."""
    index: PrimExpr | None = None
    total = 1
    for _, var, extent in sorted(threads, key=lambda t: t[0]):
        index = var if index is None else index + var * total
        total *= extent
    return (const(0, "int32") if index is None else index), total


def _in_group(group_index: PrimExpr, stride: int, index: PrimExpr) -> PrimExpr:
    """``group_index * stride + index`` (just ``index`` for the one group: TVM folds the zero
    whatever the index's type)."""
    return index if is_const_int(group_index, 0) else group_index * stride + index


def _combine(combiner, a: list, b: list) -> list:
    return [substitute(r, {**dict(zip(combiner.lhs, a)), **dict(zip(combiner.rhs, b))})
            for r in combiner.result]


def _shuffle(op: str, mask: Buffer | None, value: PrimExpr, lane_or_delta, warp_size: int) -> PrimExpr:
    mask_value = BufferLoad(mask, (const(0, "int32"),)) if mask is not None else const(0, "int32")
    return Call(value.dtype, get_op(f"tir.{op}"),
                (mask_value, value, const(lane_or_delta, "int32") if isinstance(lane_or_delta, int)
                 else lane_or_delta, const(warp_size, "int32"), const(warp_size, "int32")))


def _equal(a: PrimExpr, b) -> PrimExpr:
    return BY_SYMBOL["=="].build(a, b)


def _at(buffer: Buffer, index) -> BufferLoad:
    return BufferLoad(buffer, (const(index, "int32") if isinstance(index, int) else index,))


def _store(buffer: Buffer, value: PrimExpr, index) -> BufferStore:
    return BufferStore(buffer, value, (const(index, "int32") if isinstance(index, int) else index,))


class _AllreduceLowerer(Mutator):
    def __init__(self, target) -> None:
        self.kind = target.kind if target is not None else ""
        self.warp_size = target_attr(target, "thread_warp_size", 1)
        self.max_threads = target_attr(target, "max_num_threads", -1)
        self.thread_extents: list = []
        self.combiners: list = []
        self.load_remap: dict = {}    # data var of a result buffer -> the load that replaces it
        self.buffer_remap: dict = {}  # data var of a result buffer -> the buffer holding it
        self.need_mask = self.kind not in ("metal", "webgpu")

    # -- the context
    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        stack = (self.thread_extents if attr.attr_key == "thread_extent" else
                 self.combiners if attr.attr_key == "reduce_scope" else None)
        if stack is None:
            return self.generic_visit(attr)
        stack.append(attr if attr.attr_key == "thread_extent" else attr.node)
        try:
            return self.generic_visit(attr)
        finally:
            stack.pop()

    def visit_Evaluate(self, stmt: Evaluate) -> Stmt:
        stmt = self.generic_visit(stmt)
        call = stmt.value
        if isinstance(call, Call) and getattr(call.op, "name", "") == "tir.tvm_thread_allreduce":
            return self._allreduce(call)
        return stmt

    # -- rewriting the result buffers
    def visit_AllocBuffer(self, alloc: AllocBuffer) -> Stmt:
        body = self.visit(alloc.body)
        new = self.buffer_remap.get(alloc.buffer.data)
        if new is None:
            return alloc if body is alloc.body else alloc.with_changes(body=body)
        annotations = dict(alloc.annotations)
        if new.scope == "shared":
            annotations[VOLATILE] = True
        return AllocBuffer(new, body, FrozenDict(annotations))

    def visit_DeclBuffer(self, decl: DeclBuffer) -> Stmt:
        body = self.visit(decl.body)
        data = decl.buffer.data
        if data in self.buffer_remap or data in self.load_remap:
            return body  # (a view of a result buffer: its accesses now name what replaced it)
        return decl if body is decl.body else decl.with_changes(body=body)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        if load.buffer.data in self.load_remap:
            return self.load_remap[load.buffer.data]
        load = self.generic_visit(load)
        new = self.buffer_remap.get(load.buffer.data)
        return load if new is None else load.with_changes(buffer=new)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        replacement = self.load_remap.get(store.buffer.data)
        if replacement is not None:
            return store.with_changes(buffer=replacement.buffer, indices=replacement.indices)
        new = self.buffer_remap.get(store.buffer.data)
        return store if new is None else store.with_changes(buffer=new)

    # -- the reduction
    def _allreduce(self, call: Call) -> Stmt:
        if not self.combiners:
            raise TVMSError("LowerThreadAllreduce: T.tvm_thread_allreduce outside a reduce_scope")
        combiner = self.combiners[-1]
        size = len(combiner.result)
        if not is_const_int(call.args[0], size):
            raise TVMSError(f"LowerThreadAllreduce: the allreduce combines {call.args[0]} values, "
                            f"its reducer {size}")
        cond = call.args[size + 1]
        values = list(call.args[1:size + 1])
        if not is_const_int(cond, 1):
            values = [Select(cond, v, init) for v, init in zip(values, combiner.identity_element)]
        dtypes = [v.dtype for v in values]
        results = [a.value if isinstance(a, Cast) else a for a in call.args[size + 2:2 * size + 2]]
        if not all(isinstance(r, BufferLoad) for r in results):
            raise TVMSError("LowerThreadAllreduce: the allreduce's results must be buffer elements")
        buffers = [r.buffer for r in results]
        reduce_vars = {a for a in call.args[2 * size + 2:] if isinstance(a, Var)}
        reduce, group = [], []
        for attr in self.thread_extents:
            tag = attr.node.thread_tag
            if thread_rank(tag) != 1:
                continue
            if thread_dim(tag) < 0:
                raise TVMSError(f"LowerThreadAllreduce: a virtual thread ({tag}) cannot take part in "
                                f"a cross-thread reduction")
            if not isinstance(attr.value, IntImm):
                raise TVMSError(f"LowerThreadAllreduce: the extent of {tag} must be a constant")
            if attr.value.value == 1:
                continue
            entry = (thread_dim(tag), attr.node.var, attr.value.value)
            (reduce if attr.node.var in reduce_vars else group).append(entry)
        if len(reduce) != len(reduce_vars):
            raise TVMSError("LowerThreadAllreduce: not every reduce thread is launched around the allreduce")
        reduce_index, reduce_extent = _flatten(reduce)
        group_index, group_extent = _flatten(group)
        contiguous = 1
        for _, var, extent in sorted(reduce + group, key=lambda t: t[0]):
            if var not in reduce_vars:
                break
            contiguous *= extent
        if self._is_warp_reduction(dtypes, group_extent, reduce_extent, contiguous):
            return self._warp_allreduce(combiner, values, dtypes, buffers, reduce_index, reduce_extent,
                                        group_index, group_extent)
        return self._tree_allreduce(combiner, values, dtypes, buffers, reduce_index, reduce_extent,
                                    group_index, group_extent, contiguous)

    def _is_warp_reduction(self, dtypes: list, group_extent: int, reduce_extent: int,
                           contiguous: int) -> bool:
        if self.kind not in WARP_TARGETS:
            return False
        if self.kind == "rocm" and any(d.bits * d.lanes != 32 for d in dtypes):
            return False
        for d in dtypes:
            if d.is_float and d.bits == 16:
                if d.lanes > 2:
                    return False
            elif d.lanes > 1 or not 4 <= (d.bits + 7) // 8 <= 8:
                return False
        if not self.thread_extents or contiguous != reduce_extent:
            return False
        if self.kind == "rocm":
            return reduce_extent == self.warp_size
        if reduce_extent == 1:
            return False
        subwarp = self.warp_size % reduce_extent == 0
        multiwarp = (self.max_threads != -1 and self.max_threads <= self.warp_size * self.warp_size
                     and reduce_extent % self.warp_size == 0)
        return subwarp or multiwarp or (group_extent == 1 and reduce_extent <= self.warp_size)

    def _warp_round(self, combiner, values: list, dtypes: list, reduce_index: PrimExpr,
                    reduce_extent: int, predicate, items: list) -> tuple[list, list]:
        """One shuffle-down reduction over ``reduce_extent`` lanes; appends its statements to
        ``items``, returns (the result buffers, the scratch buffers it needs allocated)."""
        reds = [local_buffer(f"red_buf{i}", d) for i, d in enumerate(dtypes)]
        temps = [local_buffer(f"t{i}", d) for i, d in enumerate(dtypes)]
        loads = [_store(r, v, 0) for r, v in zip(reds, values)]
        items.extend(loads if predicate is None else [IfThenElse(predicate, sequence(loads))])
        mask = None
        if self.need_mask:
            mask = local_buffer("mask", DataType("uint32"))
            items.append(_store(mask, Call(DataType("uint32"), get_op("tir.tvm_warp_activemask"), ()), 0))
            temps.append(mask)
        offset = 1
        while offset * 2 < reduce_extent:
            offset *= 2
        while offset > 0:
            for red, temp in zip(reds, temps):
                items.append(_store(temp, _shuffle("tvm_warp_shuffle_down", mask, _at(red, 0), offset,
                                                   self.warp_size), 0))
            combined = _combine(combiner, [_at(r, 0) for r in reds], [_at(t, 0) for t in temps])
            stores = [_store(r, c, 0) for r, c in zip(reds, combined)]
            if offset * 2 > reduce_extent:  # lanes past the extent hold nothing to combine
                items.append(IfThenElse(reduce_index + offset < reduce_extent, sequence(stores)))
            else:
                items.extend(stores)
            offset //= 2
        return reds, temps

    def _warp_allreduce(self, combiner, values, dtypes, buffers, reduce_index, reduce_extent,
                        group_index, group_extent) -> Stmt:
        items: list = []
        allocs: list = []
        if reduce_extent <= self.warp_size:
            reds, allocs = self._warp_round(combiner, values, dtypes, reduce_index, reduce_extent, None, items)
            mask = allocs[-1] if self.need_mask else None
            for red in reds:  # every lane takes lane 0's result: no predicated store after
                items.append(_store(red, _shuffle("tvm_warp_shuffle", mask, _at(red, 0),
                                                  reduce_extent * group_index, self.warp_size), 0))
            results = [_at(r, 0) for r in reds]
        else:
            n_warps = reduce_extent // self.warp_size
            staging = [local_buffer("red_buf_staging", b.dtype, "shared", const(n_warps * group_extent, reduce_index.dtype))
                       for b in buffers]
            allocs.extend(staging)
            reds, temps = self._warp_round(combiner, values, dtypes, reduce_index, self.warp_size, None, items)
            allocs.extend(temps + reds)
            items.append(IfThenElse(_equal(reduce_index % self.warp_size, 0), sequence(
                [_store(s, _at(r, 0), _in_group(group_index, n_warps, reduce_index // self.warp_size))
                 for s, r in zip(staging, reds)])))
            items.append(storage_sync("shared"))
            second = [_at(s, _in_group(group_index, n_warps, reduce_index)) for s in staging]
            reds, temps = self._warp_round(combiner, second, dtypes, reduce_index, n_warps,
                                           reduce_index < n_warps, items)
            allocs.extend(temps + reds)
            shared = [local_buffer("red_result", b.dtype, "shared", const(group_extent, reduce_index.dtype))
                      for b in buffers]
            items.append(IfThenElse(_equal(reduce_index, 0), sequence(
                [_store(s, _at(r, 0), group_index) for s, r in zip(shared, reds)])))
            items.append(storage_sync("shared"))
            results = [_at(s, group_index) for s in shared]
        for buffer, result in zip(buffers, results):
            self.load_remap[buffer.data] = result
            self.buffer_remap[buffer.data] = result.buffer
        return sequence(allocs + items)

    def _tree_allreduce(self, combiner, values, dtypes, buffers, reduce_index, reduce_extent,
                        group_index, group_extent, contiguous) -> Stmt:
        if reduce_extent == 1:  # nothing to combine
            return sequence([_store(b, v, 0) for b, v in zip(buffers, values)])
        shared = [local_buffer(f"red_buf{i}", d, "shared", const(group_extent * reduce_extent, group_index.dtype))
                  for i, d in enumerate(dtypes)]

        def at(offset: int = 0) -> PrimExpr:
            index = reduce_index + offset if offset else reduce_index
            return group_index * reduce_extent + index if group_extent > 1 else index

        def loads(offset: int) -> list:
            return _combine(combiner, [_at(s, at()) for s in shared], [_at(s, at(offset)) for s in shared])

        def stores(new: list) -> Stmt:
            return sequence([_store(s, v, at()) for s, v in zip(shared, new)])

        # (the first barrier: a previous reduction may still be reading the buffer)
        items: list = [storage_sync("shared"), *[_store(s, v, at()) for s, v in zip(shared, values)],
                       storage_sync("shared")]
        align = 1
        while align < reduce_extent:
            align *= 2
        if align > reduce_extent:
            align //= 2
            items += [IfThenElse(reduce_index < reduce_extent - align, stores(loads(align))),
                      storage_sync("shared")]
        warp_aligned = group_extent == 1 or contiguous % self.warp_size == 0
        while align > contiguous or align > self.warp_size or not warp_aligned:
            if align == 1:
                break
            align //= 2
            items += [IfThenElse(reduce_index < align, stores(loads(align))), storage_sync("shared")]
        if align > 1:  # the rest within one warp: reads and writes apart, no divergence
            in_warp: list = []
            condition = reduce_index < align // 2
            while align > 1:
                align //= 2
                lets = [Var(f"w_{align}_{i}", v.dtype) for i, v in enumerate(loads(align))]
                in_warp += [Bind(w, v) for w, v in zip(lets, loads(align))]
                in_warp += [storage_sync("warp"), stores(lets), storage_sync("warp")]
            items += [IfThenElse(condition, sequence(in_warp)), storage_sync("shared")]
        for buffer, s in zip(buffers, shared):
            self.load_remap[buffer.data] = _at(s, group_index * reduce_extent if group_extent > 1 else 0)
            self.buffer_remap[buffer.data] = s
        return sequence(items)


def lower_thread_allreduce(func: PrimFunc) -> PrimFunc:
    """``func`` with its cross-thread allreduces lowered for its target."""
    lowerer = _AllreduceLowerer(func.attrs.get("target"))
    body = lowerer.visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


LowerThreadAllreduce = define_tir_pass("LowerThreadAllreduce", lower_thread_allreduce)

__all__ = ["LowerThreadAllreduce", "lower_thread_allreduce"]
