"""TransformMmaBufferLayout: the m16n8k8 fragment buffers become each thread's registers, as TVM
0.27's ``s_tir.transform.TransformMmaBufferLayout`` lays them out (the cuda pipeline runs it after
InjectSoftwarePipeline).

A block's buffer in scope ``m16n8k8.matrixA``, ``.matrixB`` or ``.matrixC`` holds a warp's
fragments; each of its 32 threads keeps a part of every tile. The buffer is replaced by a
``local`` one of the same name and type whose last two extents (rows, cols) become the tiles and
one thread's part of a tile:

- matrixA, tiles of 32 x 8: ``(rows // 32, cols // 8, 4, 2)``;
- matrixB, tiles of 8 x 32: ``(rows // 8, cols // 32, 1, 8)``;
- matrixC, tiles of 16 x 8: ``(rows // 16, cols // 8, 2, 2)``, the accumulator element (i, j)
  at ``[i // 8 // 2, j // 8, i // 8 % 2, j % 8 % 2]`` (TVM's ``tirx.index_map_m16n8k8.matrixC``).

The accesses of matrixA and matrixB go through ``ldmatrix`` and ``mma`` pointers, whose offsets are
already per thread; a load or store of them is refused, as TVM 0.27 refuses it (a schedule not yet
tensorized). The loads and stores of matrixC are re-indexed. As in TVM,
the blocks' declared reads and writes keep naming the old buffers.
"""
from __future__ import annotations

import dataclasses

from ....ir.arith.analyzer import CANONICAL, Analyzer
from ....ir.buffer import Buffer, decl_buffer
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, IntImm, PrimExpr, Var
from ....ir.function import PrimFunc
from ....ir.stmt import Block, BufferStore, Stmt
from ....ir.visitor import Mutator
from ..tir_pass import define_tir_pass

# scope -> (tile rows, tile cols, one thread's part of a tile)
TILES = {"m16n8k8.matrixA": (32, 8, (4, 2)), "m16n8k8.matrixB": (8, 32, (1, 8)),
         "m16n8k8.matrixC": (16, 8, (2, 2))}


def _local_buffer(buffer: Buffer) -> Buffer:
    rows, cols, part = TILES[buffer.scope]
    shape = buffer.shape
    if len(shape) < 2 or not all(isinstance(e, IntImm) for e in shape[-2:]) \
            or shape[-2].value % rows or shape[-1].value % cols:
        raise TVMSError(f"TransformMmaBufferLayout: buffer {buffer.name!r} in {buffer.scope} needs a "
                        f"constant shape ending in multiples of ({rows}, {cols}), not {shape}")
    tiles = (shape[-2].value // rows, shape[-1].value // cols)
    return decl_buffer((*shape[:-2], *tiles, *part), buffer.dtype, buffer.name, scope="local")


def _accumulator_indices(indices: tuple) -> tuple:
    """Where the matrixC element (i, j) lies in its thread's registers (simplified as TVM's
    IndexMap.MapIndices simplifies, knowing no ranges)."""
    if len(indices) != 2:
        raise TVMSError(f"TransformMmaBufferLayout: an m16n8k8.matrixC access takes 2 indices, not {len(indices)}")
    i, j = indices
    simplify = Analyzer(CANONICAL).simplify
    # (TVM's map says j % 8 % 2, which its simplifier makes j % 2; tvms's keeps the nested form)
    return tuple(simplify(e) for e in (i // 8 // 2, j // 8, i // 8 % 2, j % 2))


class _Transformer(Mutator):
    def __init__(self) -> None:
        self.buffers: dict[int, Buffer] = {}  # old buffer id -> its local replacement
        self.data: dict[int, Var] = {}  # old data var id -> the replacement's

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return buffer  # (a declared region keeps its buffer; accesses are rewritten below)

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.data.get(id(var), var)  # (a fragment's data pointer, as ldmatrix and mma take it)

    def visit_Block(self, block: Block) -> Stmt:
        allocs = []
        for b in block.alloc_buffers:
            if b.scope in TILES:
                new = self.buffers[id(b)] = _local_buffer(b)
                self.data[id(b.data)] = new.data
                b = new
            allocs.append(b)
        body = self.visit(block.body)
        if body is block.body and all(a is b for a, b in zip(allocs, block.alloc_buffers)):
            return block
        return dataclasses.replace(block, alloc_buffers=tuple(allocs), body=body)

    def _moved(self, access):
        new = self.buffers.get(id(access.buffer))
        if new is None:
            return access
        scope = access.buffer.scope
        if scope != "m16n8k8.matrixC":  # (their offsets are per thread only in ldmatrix and mma)
            raise TVMSError(f"TransformMmaBufferLayout requires {scope} buffers to be accessed through opaque "
                            f"ldmatrix/mma_sync operations, but found an explicit {type(access).__name__} of "
                            f"{access.buffer.name!r}")
        return dataclasses.replace(access, buffer=new, indices=_accumulator_indices(access.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return self._moved(self.generic_visit(store))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        return self._moved(self.generic_visit(load))


def transform_mma_buffer_layout(func: PrimFunc) -> PrimFunc:
    """The m16n8k8 fragment buffers of ``func`` as per-thread local ones (see the module
    docstring)."""
    body = _Transformer().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


TransformMmaBufferLayout = define_tir_pass("TransformMmaBufferLayout", transform_mma_buffer_layout)

__all__ = ["TransformMmaBufferLayout", "transform_mma_buffer_layout"]
