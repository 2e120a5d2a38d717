"""LowerAutoCopy's tensor-core rules (TVM 0.27's memhammer_tensorcore_rewrite.cc).

The copy's two innermost loops are tiled (16x16 for WMMA, 8x8 for the m16n8k8 accumulator;
refused where their extents are not multiples, or the buffers' type is not the fragment's) and
each tile becomes one block:

- SharedToWmma: ``tvm_load_matrix_sync`` of a 16x16 float16 tile (row-major for matrix_a,
  column-major for matrix_b);
- WmmaToShared: ``tvm_store_matrix_sync`` of an accumulator tile;
- WmmaToGlobal, MmaToGlobal: a ``shared.dyn`` write stage below the tile loops
  (``auto_copy_stage``) filled tile by tile -- ``tvm_store_matrix_sync``, or for m16n8k8 each lane
  of the warp storing its two accumulator values of the 8x8 tile (row ``lane // 4``, columns
  ``lane % 4 * 2`` and the next) -- then copied out coalesced (with the block's other operands,
  where it computes more than a copy).

The shared buffers the tiles touch are padded by multiples of 8 elements.
"""
from __future__ import annotations

from ....ir.analysis import index_bounds, simplify, substitute
from ....ir.arith.operators import binary
from ....ir.buffer import BufferRegion, MatchBufferRegion, decl_buffer
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import (Add, BufferLoad, Call, FloorDiv, FloorMod, IntImm, IterVar, Mul, Range, StringImm, Sub,
                         THREAD_INDEX, Var, const)
from ....ir.op import get_op
from ....ir.stmt import SERIAL, VECTORIZED, AttrStmt, Block, BlockRealize, BufferStore, Evaluate, For, SeqStmt, Stmt
from .auto_copy_coalesce import coalesce
from ...scopes import GLOBAL, MMA_C, SHARED, WMMA_A, WMMA_B, WMMA_ACCUMULATOR
from .auto_copy_rule import ConstraintSet, OutputSet, accumulator_load, copies_between, nest_of, with_suffix, wrap
from .auto_copy_stage import insert_cache_stage

TILE_PADDING = 8  # (the least padding of a shared buffer a tensor-core tile touches)


def tile_innermost(stmt: Stmt, size: int, constraints: ConstraintSet) -> tuple[Stmt, For | None]:
    """The two innermost loops of the nest ``stmt`` split by ``size`` and reordered (outer i, outer
    j, inner i, inner j); the outer i loop, where the stage of a write goes. Refused where an
    extent is no multiple of ``size`` (TVM leaves the nest alone, and then matches the whole
    region to one fragment)."""
    loops, _ = nest_of(stmt, "tensor core", constraints, least=2, guarded=True)
    body = loops[-1].body
    rows, cols = loops[-2], loops[-1]
    if any(not (isinstance(loop.extent, IntImm) and loop.extent.value % size == 0) for loop in (rows, cols)):
        raise TVMSError(f"LowerAutoCopy (tensor core): block {constraints.block!r} copies loops whose extents are not "
                        f"multiples of the {size}x{size} tile")
    outer = [with_suffix(rows.loop_var, "_0"), with_suffix(cols.loop_var, "_0")]
    inner = [with_suffix(rows.loop_var, "_1"), with_suffix(cols.loop_var, "_1")]
    body = substitute(body, {loop.loop_var: binary(Add, binary(Mul, o, size), i)
                             for loop, o, i in zip((rows, cols), outer, inner)})
    for var, extent in reversed(list(zip(outer + inner, (rows.extent.value // size, cols.extent.value // size,
                                                          size, size)))):
        body = For(var, const(0), const(extent), SERIAL, body)
    return wrap(loops[:-2], body), body


def _relaxed(indices, buffer, loops) -> tuple:
    """The region ``indices`` cover as the two innermost ``loops`` run (TVM's RelaxIndices)."""
    doms = {loop.loop_var: (loop.min, loop.extent) for loop in loops[-2:]}
    region = []
    for index, extent in zip(indices, buffer.shape):
        bounds = index_bounds(index, doms)
        if bounds is None:
            region.append(Range(const(0, extent.dtype), extent))
        else:
            lo, hi = bounds
            region.append(Range(lo, simplify(binary(Add, binary(Sub, hi, lo), 1))))
    return tuple(region)


def _fragment(name: str, scope: str, dtype: DataType, rows: int, strided: bool):
    """A buffer matched to one tile: ``src``/``tgt``, of its own offset (and strides)."""
    strides = (Var("s1"), Var("s0")) if strided else ()
    return decl_buffer((rows, rows), dtype, name, scope=scope, strides=strides, elem_offset=Var(f"{name}_elem_offset"),
                       data_alignment=64, offset_factor=rows)


def _tile_block(name: str, source, source_region, target, target_region, src, tgt, body: Stmt) -> BlockRealize:
    """A block copying one tile: reading ``source_region``, writing ``target_region``, matching
    ``src`` and ``tgt`` to them."""
    reads = (BufferRegion(source, source_region),)
    writes = (BufferRegion(target, target_region),)
    block = Block(iter_vars=(), match_buffers=(MatchBufferRegion(src, reads[0]), MatchBufferRegion(tgt, writes[0])),
                  reads=reads, writes=writes, name_hint=name, body=body)
    return BlockRealize((), const(True), block)


def _access_ptr(buffer, mask: int) -> Call:
    """``T.tvm_access_ptr(T.type_annotation(dtype), buffer.data, elem_offset, strides[0] * 16, mask)``."""
    annotation = Call(buffer.dtype, get_op("tir.type_annotation"), ())
    return Call(DataType("handle"), get_op("tir.tvm_access_ptr"),
                (annotation, buffer.data, buffer.elem_offset, binary(Mul, buffer.strides[0], 16), const(mask)),
                data_of=(None, buffer, None, None, None))


def _matrix_sync(op: str, fragment, shared, layout: str, mask: int) -> Evaluate:
    offset = fragment.elem_offset
    index = binary(Add, binary(FloorDiv, offset, 256), binary(FloorDiv, binary(FloorMod, offset, 256), 16))
    return Evaluate(Call(DataType("handle"), get_op(op),
                         (fragment.data, const(16), const(16), const(16), index, _access_ptr(shared, mask),
                          shared.strides[0], StringImm(layout)),
                         data_of=(fragment, None, None, None, None, None, None, None)))


def _check_types(source, target, types: tuple, constraints: ConstraintSet) -> None:
    """Refuse a tile copy between buffers not both of one of the fragment's ``types``."""
    if source.dtype != target.dtype or str(source.dtype) not in types:
        raise TVMSError(f"LowerAutoCopy (tensor core): block {constraints.block!r} copies {source.dtype} to "
                        f"{target.dtype}; the fragment holds one of {', '.join(types)}")


def rewrite_wmma_load(stmt: Stmt, constraints: ConstraintSet) -> Stmt:
    loops, store = nest_of(stmt, "shared to wmma", constraints, least=2)
    load = store.value
    if not isinstance(load, BufferLoad):
        raise TVMSError(f"LowerAutoCopy (shared to wmma): block {constraints.block!r} must copy one load")
    source, target = load.buffer, store.buffer
    _check_types(source, target, ("float16",), constraints)  # (the fragments below are float16's)
    src = _fragment("src", source.scope, DataType("float16"), 16, strided=True)
    tgt = _fragment("tgt", target.scope, DataType("float16"), 16, strided=False)
    layout = "row_major" if target.scope == "wmma.matrix_a" else "col_major"
    body = _matrix_sync("tir.tvm_load_matrix_sync", tgt, src, layout, 1)
    block = _tile_block("wmma_load", source, _relaxed(load.indices, source, loops),
                        target, _relaxed(store.indices, target, loops), src, tgt, body)
    return wrap(loops[:-2], block)


def rewrite_wmma_store(stmt: Stmt, constraints: ConstraintSet) -> Stmt:
    loops, store = nest_of(stmt, "wmma store", constraints, least=2, guarded=True)  # (whole tiles of scratch)
    load = accumulator_load(store.value, ("wmma.accumulator",), constraints.block)
    source, target = load.buffer, store.buffer
    _check_types(source, target, ("float16", "float32", "int32"), constraints)
    src = _fragment("src", source.scope, source.dtype, 16, strided=False)
    tgt = _fragment("tgt", target.scope, source.dtype, 16, strided=True)
    body = _matrix_sync("tir.tvm_store_matrix_sync", src, tgt, "row_major", 2)
    block = _tile_block("wmma_store", source, _relaxed(load.indices, source, loops),
                        target, _relaxed(store.indices, target, loops), src, tgt, body)
    return wrap(loops[:-2], block)


def rewrite_mma_store(stmt: Stmt, constraints: ConstraintSet) -> Stmt:
    """Each 8x8 accumulator tile stored by the warp's lanes, two values each (the m16n8k8
    fragment layout: lane ``tx`` holds row ``tx // 4``, columns ``tx % 4 * 2`` and ``+ 1``)."""
    loops, store = nest_of(stmt, "mma store", constraints, least=2, guarded=True)  # (whole tiles of scratch)
    load = accumulator_load(store.value, ("m16n8k8.matrixC",), constraints.block)
    source, target = load.buffer, store.buffer
    _check_types(source, target, ("float16", "float32"), constraints)
    src = _fragment("src", source.scope, source.dtype, 8, strided=False)
    tgt = _fragment("tgt", target.scope, source.dtype, 8, strided=True)
    tx, vec = Var("tx"), Var("vec")
    index = (binary(FloorDiv, tx, 4), binary(Add, binary(Mul, binary(FloorMod, tx, 4), 2), vec))
    lanes = For(vec, const(0), const(2), VECTORIZED, BufferStore(tgt, BufferLoad(src, index), index))
    body = AttrStmt(IterVar(Range(const(0), const(32)), tx, THREAD_INDEX, "threadIdx.x"), "thread_extent",
                    const(32), lanes)
    block = _tile_block("mma_store", source, _relaxed(load.indices, source, loops),
                        target, _relaxed(store.indices, target, loops), src, tgt, body)
    return wrap(loops[:-2], block)


def shared_to_wmma(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not (copies_between(constraints, SHARED, WMMA_A) or copies_between(constraints, SHARED, WMMA_B)):
        return stmt
    output.padding_min[constraints.read_region.buffer] = TILE_PADDING
    return rewrite_wmma_load(tile_innermost(stmt, 16, constraints)[0], constraints)


def wmma_to_shared(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not copies_between(constraints, WMMA_ACCUMULATOR, SHARED):
        return stmt
    output.padding_min[constraints.write_region.buffer] = TILE_PADDING
    return rewrite_wmma_store(tile_innermost(stmt, 16, constraints)[0], constraints)


def _through_shared(stmt: Stmt, constraints: ConstraintSet, output: OutputSet, size: int, store_tile) -> Stmt:
    """The accumulator copied to global through a ``shared.dyn`` stage: tiles of ``size`` stored
    by ``store_tile``, the stage copied out coalesced."""
    tiled, compute_at = tile_innermost(stmt, size, constraints)
    loops, pair, stage = insert_cache_stage(tiled, True, "shared.dyn", compute_at, constraints.outer_loops,
                                            constraints.block)
    use, fill = pair.seq
    output.alloc_buffers.append(stage)
    output.padding_min[stage] = TILE_PADDING
    return wrap(loops, SeqStmt((store_tile(use, constraints), coalesce(fill, constraints))))


def wmma_to_global(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not copies_between(constraints, WMMA_ACCUMULATOR, GLOBAL):
        return stmt
    return _through_shared(stmt, constraints, output, 16, rewrite_wmma_store)


def mma_to_global(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not copies_between(constraints, MMA_C, GLOBAL):
        return stmt
    return _through_shared(stmt, constraints, output, 8, rewrite_mma_store)


__all__ = ["shared_to_wmma", "wmma_to_shared", "wmma_to_global", "mma_to_global", "tile_innermost"]
