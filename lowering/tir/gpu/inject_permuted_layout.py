"""InjectPermutedLayout: shared memory read and written in a swizzled layout, as TVM 0.27's
``s_tir.transform.InjectPermutedLayout`` lays it out (the cuda pipeline runs it after StmtSimplify).

Inside a block annotated ``permuted_layout`` (a non-empty string or a non-zero integer; the
annotation is dropped), every access to a shared buffer of two or more dimensions has its last
two indices (row, col) rewritten: the column's 8-element chunk (16 bytes of float16, one vector
load) is XORed with the row, so the eight rows an ldmatrix reads at the same column fall in
different banks. A row of 64 elements or more (a multiple of 64) takes ``chunk ^ (row % 8)``, a
row of 32 (a multiple of 32, with an even number of rows) ``chunk ^ (row % 8 // 2)``. The shared
operand of ``T.ptx_legacy.ldmatrix`` (and of ``mma_store_legacy``), a ``T.tvm_access_ptr`` with an
element offset, is rewritten the same way through its flat offset (ldmatrix's own offset folded in
and set to 0). The rewritten indices are simplified knowing the loops' and threads' ranges.
"""
from __future__ import annotations

import dataclasses

from ....ir.arith.analyzer import CANONICAL, Analyzer
from ....ir.buffer import Buffer
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, Call, IntImm, PrimExpr, StringImm, Var, const
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.stmt import Block, BufferStore, Stmt
from ..loop_ranges import LoopRangeMutator
from ..tir_pass import define_tir_pass

CHUNK = 8  # elements in one permuted chunk (16 bytes of float16)
ANNOTATION = "permuted_layout"


def _permutes(value) -> bool:
    if isinstance(value, (str, StringImm)):
        return str(value.value if isinstance(value, StringImm) else value) != ""
    if isinstance(value, (bool, int, IntImm)):
        return int(value.value if isinstance(value, IntImm) else value) != 0
    raise TVMSError(f"InjectPermutedLayout: invalid permuted layout annotation {value!r}")


def _row_size(buffer: Buffer) -> int:
    """The length of the buffer's rows (its last extent), checked to be one the layout takes."""
    if len(buffer.shape) < 2:
        raise TVMSError(f"InjectPermutedLayout: buffer {buffer.name!r} with shape {buffer.shape} "
                        f"should have at least 2 dimensions")
    rows, cols = buffer.shape[-2], buffer.shape[-1]
    if not (isinstance(rows, IntImm) and isinstance(cols, IntImm)):
        raise TVMSError(f"InjectPermutedLayout: buffer {buffer.name!r} needs a constant shape")
    if cols.value % 64:
        if cols.value % 32:
            raise TVMSError(f"InjectPermutedLayout: buffer {buffer.name!r}: a permuted layout needs its "
                            f"last extent divisible by 32 (it is {cols.value})")
        if rows.value % 2:
            raise TVMSError(f"InjectPermutedLayout: buffer {buffer.name!r}: a permuted layout of rows of "
                            f"32 needs an even number of rows (it has {rows.value})")
    return cols.value


class _Injector(LoopRangeMutator):
    def __init__(self, func: PrimFunc) -> None:
        super().__init__()
        self.analyzer = Analyzer(CANONICAL)  # (TVM's Simplify: multiples of a modulus drop out)
        self.by_data = {id(b.data): b for b in func.buffer_map.values()}
        self.permute = False

    def permuted(self, row: PrimExpr, col: PrimExpr, row_size: int) -> tuple[PrimExpr, PrimExpr]:
        # 8 chunks a row: chunk c of row r goes to c ^ (r % 8); 4 chunks a row: pairs of rows
        # share one pattern, c ^ (r % 8 // 2)
        # (TVM's simplifier goes into the XOR's operands; tvms's takes the call as a whole)
        simplify = self.analyzer.simplify
        row_sub = row % 8 if row_size % 64 == 0 else row % 8 // 2
        return row, simplify((simplify(col // CHUNK) ^ simplify(row_sub)) * CHUNK + col % CHUNK)

    def indices(self, buffer: Buffer, indices: tuple) -> tuple:
        row, col = self.permuted(indices[-2], indices[-1], _row_size(buffer))
        return (*indices[:-2], row, col)

    def touches(self, buffer: Buffer) -> bool:
        return self.permute and len(buffer.shape) >= 2 and buffer.scope.startswith("shared")

    def visit_Block(self, block: Block) -> Stmt:
        for iv in block.iter_vars:  # (TVM's analyzer knows the block's iterators' domains too)
            if iv.dom is not None and isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
                self.analyzer.bind(iv.var, iv.dom.min.value, iv.dom.extent.value)
        for b in block.alloc_buffers:
            self.by_data[id(b.data)] = b
        for m in block.match_buffers:
            self.by_data[id(m.buffer.data)] = m.buffer
        if ANNOTATION not in block.annotations or not _permutes(block.annotations[ANNOTATION]):
            return self.generic_visit(block)
        outer, self.permute = self.permute, True
        try:
            new = self.generic_visit(block)
        finally:
            self.permute = outer
        annotations = FrozenDict((k, v) for k, v in new.annotations.items() if k != ANNOTATION)
        return dataclasses.replace(new, annotations=annotations)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        if not self.touches(store.buffer):
            return store
        return dataclasses.replace(store, indices=self.indices(store.buffer, store.indices))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if not self.touches(load.buffer):
            return load
        return dataclasses.replace(load, indices=self.indices(load.buffer, load.indices))

    def access_ptr(self, ptr: PrimExpr, extra: PrimExpr | None = None) -> Call:
        """``T.tvm_access_ptr(type, data, offset, extent, rw)`` with its offset (plus ``extra``)
        permuted as the flat offset of an element of its buffer."""
        if not (isinstance(ptr, Call) and ptr.op.name == "tir.tvm_access_ptr"):
            raise TVMSError(f"InjectPermutedLayout: invalid access pointer for a permuted layout: {ptr}")
        data = ptr.args[1]
        if isinstance(data, Call) and data.op.name == "tir.buffer_data" and len(data.args) == 1:
            data = data.args[0]
        buffer = self.by_data.get(id(data)) if isinstance(data, Var) else None
        if buffer is None:
            raise TVMSError(f"InjectPermutedLayout: no buffer holds the data {ptr.args[1]} of {ptr}")
        row_size = _row_size(buffer)
        offset = ptr.args[2] if extra is None else ptr.args[2] + extra
        row, col = self.permuted(offset // row_size, offset % row_size, row_size)
        flat = self.analyzer.simplify(row * row_size + col)
        return dataclasses.replace(ptr, args=(*ptr.args[:2], flat, *ptr.args[3:]))

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        if not self.permute:
            return call
        args = call.args
        if call.op.name == "tir.ptx_legacy.ldmatrix":  # (..., smem_ptr, smem_offset)
            ptr = self.access_ptr(args[5], args[6])
            return dataclasses.replace(call, args=(*args[:5], ptr, const(0, args[6].dtype)))
        if call.op.name == "tir.mma_store_legacy":  # (m, n, dst_ptr, ...)
            return dataclasses.replace(call, args=(*args[:2], self.access_ptr(args[2]), *args[3:]))
        return call


def inject_permuted_layout(func: PrimFunc) -> PrimFunc:
    """The shared buffers of ``permuted_layout`` blocks accessed swizzled (see the module
    docstring)."""
    body = _Injector(func).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


InjectPermutedLayout = define_tir_pass("InjectPermutedLayout", inject_permuted_layout)

__all__ = ["InjectPermutedLayout", "inject_permuted_layout"]
