"""rfactor: split a reduction into partial results along one loop, then a final reduction.

For ``B[vi] = B[vi] + A[vi, vk]`` over loops ``i, k_0, k_1`` (``vk = k_0 * 32 + k_1``) and the
loop ``k_1``, block ``B_rf`` accumulates ``B_rf[vi, vk_1]`` (``k_1`` becomes a spatial iterator
``vk_1``, inserted at ``factor_axis``) under the original loops, and block ``B`` sums
``B_rf[vi, vk_1]`` over ``vk_1`` under fresh copies of the loops ``i, k_1``.
"""
from __future__ import annotations

from ...ir.analysis import infer_block_regions, substitute
from ...ir.buffer import BufferRegion, decl_buffer
from ...ir.expr import (COMM_REDUCE, DATA_PAR, Add, BufferLoad, IntImm, IterVar, Max, Min, Mul, Range, Var,
                        const, is_const_int)
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, Stmt, seq
from ...ir.structural import structural_equal
from ...ir.visitor import collect
from .errors import ScheduleError
from .loop_transform import conjoin, conjuncts, uses_var
from .tree import enclosing_loops, parent_block, replace_in, replace_stmts

_COMBINERS = (Add, Mul, Max, Min)


def _reduction_parts(block: Block) -> tuple[BufferStore, type, object]:
    """The update store, its combiner class and the value combined in."""
    body, init = block.body, block.init
    name = block.name_hint
    if not (isinstance(body, BufferStore) and isinstance(init, BufferStore) and init.buffer is body.buffer):
        raise ScheduleError(f"rfactor: block '{name}' is not a reduction 'B[...] = B[...] op value' "
                            f"with a T.init() of the same buffer")
    value = body.value
    if isinstance(value, _COMBINERS):
        for own, other in ((value.a, value.b), (value.b, value.a)):
            if (isinstance(own, BufferLoad) and own.buffer is body.buffer
                    and structural_equal(tuple(own.indices), tuple(body.indices))):
                return body, type(value), other
    raise ScheduleError(f"rfactor: the update of block '{name}' is not 'B[...] = B[...] op value' with "
                        f"op one of +, *, max, min")


def rfactor(func: PrimFunc, realize: BlockRealize, path: tuple, loop: For, factor_axis: int) -> tuple[PrimFunc, str]:
    block = realize.block
    name = block.name_hint
    store, combiner, rhs = _reduction_parts(block)
    loops = enclosing_loops(path)
    if not any(node is loop for node in loops):
        raise ScheduleError(f"rfactor: loop '{loop.loop_var.name}' is not a loop of block '{name}'")
    for outer, inner in zip(loops, loops[1:] + [realize]):
        if outer.body is not inner:
            raise ScheduleError(f"rfactor: the loops of block '{name}' must form a single nest")
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values) if iv.iter_type == DATA_PAR]
    reduce = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values) if iv.iter_type == COMM_REDUCE]
    if len(spatial) + len(reduce) != len(block.iter_vars):
        raise ScheduleError(f"rfactor: block '{name}' has iterators that are neither spatial nor reduction")
    in_spatial = lambda node: any(uses_var(v, {id(node.loop_var)}) for _, v in spatial)  # noqa: E731
    in_reduce = lambda node: any(uses_var(v, {id(node.loop_var)}) for _, v in reduce)  # noqa: E731
    if not in_reduce(loop) or in_spatial(loop):
        raise ScheduleError(f"rfactor: loop '{loop.loop_var.name}' must iterate only the reduction of "
                            f"block '{name}'")
    if any(in_spatial(node) and in_reduce(node) for node in loops):
        raise ScheduleError(f"rfactor: a loop of block '{name}' iterates both its output and its reduction")
    if not isinstance(loop.extent, IntImm) or not is_const_int(loop.min, 0):
        raise ScheduleError(f"rfactor: loop '{loop.loop_var.name}' must start at 0 with a constant extent")
    out = store.buffer
    if not 0 <= factor_axis <= len(out.shape):
        raise ScheduleError(f"rfactor: factor_axis {factor_axis} is out of range for buffer '{out.name}' "
                            f"of rank {len(out.shape)}")

    def iter_of(node: For, kind: str) -> IterVar:
        return IterVar(Range(node.min, node.extent), Var(f"v{node.loop_var.name}", node.loop_var.dtype), kind)

    # The block that computes partial results: the rfactor loop is spatial, other reduction loops stay.
    # (TVM's order: the rfactor iterator, then the block's own in their order, where a reduction
    # iterator bound through the rfactor loop gives way to one per loop of its binding)
    rf_iter = iter_of(loop, DATA_PAR)
    rf_iters, rf_values = [rf_iter], [loop.loop_var]
    loop_of = {id(node.loop_var): node for node in loops}
    made = {loop.loop_var: rf_iter.var}
    old_reduce = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == DATA_PAR or not uses_var(value, {id(loop.loop_var)}):
            rf_iters.append(iv)
            rf_values.append(value)
            continue
        for var in collect(value, Var):
            if id(var) in loop_of and var not in made:
                it = iter_of(loop_of[id(var)], COMM_REDUCE)
                made[var] = it.var
                rf_iters.append(it)
                rf_values.append(var)
        old_reduce[iv.var] = substitute(value, made)
    shape = list(out.shape)
    shape.insert(factor_axis, loop.extent)
    # (TVM copies the buffer: its offset keeps the type of the old first dimension)
    rf_buffer = decl_buffer(shape, out.dtype, f"{out.name}_rf", scope=out.scope, elem_offset=out.offset)
    rf_index = list(store.indices)
    rf_index.insert(factor_axis, rf_iter.var)
    rf_index_t = tuple(rf_index)
    rf_value = combiner(BufferLoad(rf_buffer, rf_index_t), substitute(rhs, old_reduce))
    rf_block = Block(tuple(rf_iters), (), (), (), (),
                     f"{name}_rf", BufferStore(rf_buffer, block.init.value, rf_index_t),
                     BufferStore(rf_buffer, rf_value, rf_index_t), block.annotations)
    reads, writes = infer_block_regions(rf_block)
    # the block's own read regions carry over as TVM substitutes them, unsimplified
    # (``v2 * 2 + (vk_0 * 2 + vk_1)``)
    given = {id(r.buffer): r for r in block.reads}
    reads = tuple(BufferRegion(r.buffer, tuple(Range(substitute(x.min, old_reduce), substitute(x.extent, old_reduce))
                                               for x in given[id(r.buffer)].region))
                  if id(r.buffer) in given else r for r in reads)
    rf_block = rf_block.with_changes(reads=reads, writes=writes)
    rf_realize = BlockRealize(tuple(rf_values), realize.predicate, rf_block)

    # The final reduction over the partial results, under copies of the spatial loops and the rf loop.
    kept = [node for node in loops if node is loop or in_spatial(node)]
    kept_ids = {id(node) for node in kept}
    reduce_vars = {id(node.loop_var) for node in loops if id(node) not in kept_ids}
    copies = {node.loop_var: Var(node.loop_var.name, node.loop_var.dtype) for node in kept}
    wb_rf = IterVar(rf_iter.dom, Var(rf_iter.var.name, rf_iter.var.dtype), COMM_REDUCE)
    wb_spatial = [IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), iv.iter_type) for iv, _ in spatial]
    renamed = {iv.var: new.var for (iv, _), new in zip(spatial, wb_spatial)}
    out_index = tuple(substitute(i, renamed) for i in store.indices)
    partial_index = list(out_index)
    partial_index.insert(factor_axis, wb_rf.var)
    wb_value = combiner(BufferLoad(out, out_index), BufferLoad(rf_buffer, tuple(partial_index)))
    wb_block = Block((wb_rf,) + tuple(wb_spatial), (), (),
                     (BufferRegion(rf_buffer, tuple(Range(i, const(1)) for i in partial_index)),),
                     (BufferRegion(out, tuple(Range(i, const(1)) for i in out_index)),), name,
                     BufferStore(out, block.init.value, out_index), BufferStore(out, wb_value, out_index),
                     block.annotations)
    wb_values = (copies[loop.loop_var],) + tuple(substitute(v, copies) for _, v in spatial)
    # The predicate's conditions on the reduction loops stay with the partial sums (the write-back
    # sums whole partial buffers, as TVM's); those on the spatial loops guard the write-back too.
    kept_vars = {id(node.loop_var) for node in kept if node is not loop}
    spatial_conds = [substitute(c, copies) for c in conjuncts(realize.predicate)
                     if not is_const_int(c, 1) and uses_var(c, kept_vars) and not uses_var(c, reduce_vars)]
    write_back: Stmt = BlockRealize(wb_values, conjoin(spatial_conds), wb_block)
    for node in reversed(kept):
        write_back = node.with_changes(loop_var=copies[node.loop_var], body=write_back)

    top = loops[0]
    rf_nest = replace_in(top, {id(realize): rf_realize})
    return _place(func, parent_block(path), top, rf_nest, write_back, rf_buffer), f"{name}_rf"


def _place(func: PrimFunc, scope: Block, top: For, rf_nest: Stmt, write_back: Stmt, rf_buffer) -> PrimFunc:
    children = list(scope.body.seq) if isinstance(scope.body, SeqStmt) else [scope.body]
    at = next((i for i, child in enumerate(children) if child is top), None)
    if at is None:
        raise ScheduleError(f"rfactor: the loop nest of loop '{top.loop_var.name}' must sit directly in "
                            f"its block's scope")
    children[at:at + 1] = [rf_nest, write_back]
    new_scope = scope.with_changes(body=seq(children), alloc_buffers=scope.alloc_buffers + (rf_buffer,))
    return replace_stmts(func, {id(scope): new_scope})
