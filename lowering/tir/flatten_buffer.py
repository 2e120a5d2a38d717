"""FlattenBuffer: every buffer becomes one-dimensional; indices become row-major offsets.

Each parameter buffer gets a flat view declared at the top of the body (``A_1 = A.view(16384)``,
or ``T.decl_buffer((n,), data=A.data)`` when it was already flat), allocations shrink to one
dimension, and ``A[i, j]`` becomes ``A_1[i * 128 + j]``, simplified with the ranges of the
enclosing loops (``i_0 * 4096 + i_1 * 128 + j``, as TVM prints it), the terms over loop and thread
variables before the rest (``tx + off[0]``: TVM's iteration-map simplification). A buffer with strides (a
storage-aligned allocation) flattens to its outermost stride times its outermost extent, an
index to the sum of index times stride. Axis separators are not supported.
"""
from __future__ import annotations

from functools import reduce
from operator import mul

from ...ir.arith import Analyzer, Sum, match_types
from ...ir.arith.split_sum import sum_to_expr
from ...ir.buffer import Buffer, decl_buffer
from ...ir.errors import TVMSError
from ...ir.expr import Add, BufferLoad, IntImm, IterVar, Mul, PrimExpr, Var, const
from ...ir.function import PrimFunc
from ...ir.stmt import AllocBuffer, AttrStmt, BufferStore, DeclBuffer, For, Stmt
from ...ir.visitor import walk
from .loop_ranges import LoopRangeMutator
from .tir_pass import define_tir_pass


def flat_buffer(buffer: Buffer) -> Buffer:
    """The one-dimensional buffer over the same data as ``buffer``."""
    if buffer.axis_separators:
        raise TVMSError(f"FlattenBuffer: buffer {buffer.name} has axis separators")
    if buffer.strides:
        extent: PrimExpr = Mul(*match_types(buffer.strides[0], buffer.shape[0]))
        if isinstance(buffer.strides[0], IntImm) and isinstance(buffer.shape[0], IntImm):
            extent = const(buffer.strides[0].value * buffer.shape[0].value, buffer.shape[0].dtype)
    elif not all(isinstance(s, IntImm) for s in buffer.shape):
        extent = reduce(Mul, buffer.shape) if buffer.shape else const(1, "int32")
    else:
        extent = const(reduce(mul, (s.value for s in buffer.shape), 1), buffer.shape[0].dtype
                       if buffer.shape else "int32")
    return decl_buffer((extent,), buffer.dtype, buffer.name, data=buffer.data,
                       elem_offset=buffer.elem_offset, data_alignment=buffer.data_alignment,
                       offset_factor=buffer.offset_factor, buffer_type=buffer.buffer_type)


def iterators_first(analyzer: Analyzer, index: PrimExpr, iterators: set) -> PrimExpr:
    """``index`` (simplified) as TVM's FlattenBuffer leaves it after its iteration-map simplification:
    the terms over loop and thread variables (``iterators``, their ids) first, then what does not
    depend on them, summed apart (``off[0] + tx`` is ``tx + off[0]``, ``off[0] + 1 + tx`` is
    ``tx + (off[0] + 1)``). An index whose loop variables are not all plain terms of positive scale
    (``off[0] + 127 - tx``: TVM's map fails) stays as it is."""
    s = analyzer.canonical(index)
    loops = [t for t in s.terms if isinstance(t.index, Var) and id(t.index) in iterators]
    rest = [t for t in s.terms if not (isinstance(t.index, Var) and id(t.index) in iterators)]
    if not loops or not rest or any(t.scale < 0 for t in loops) \
            or any(isinstance(v, Var) and id(v) in iterators for t in rest for v in walk(t.index)):
        return index
    return Add(sum_to_expr(Sum(tuple(loops), 0), index.dtype), sum_to_expr(Sum(tuple(rest), s.base), index.dtype))


class _Flattener(LoopRangeMutator):
    def __init__(self, flats: dict) -> None:
        super().__init__()
        self.flats = flats  # original Buffer -> flat Buffer
        self.iterators: set = set()  # ids of the loop and thread variables (of any extent) seen

    def visit_For(self, loop: For) -> Stmt:
        self.iterators.add(id(loop.loop_var))
        return super().visit_For(loop)

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key in ("thread_extent", "virtual_thread") and isinstance(attr.node, IterVar):
            self.iterators.add(id(attr.node.var))
        return super().visit_AttrStmt(attr)

    def flat_of(self, buffer: Buffer) -> Buffer:
        flat = self.flats.get(buffer)
        if flat is None:
            raise TVMSError(f"FlattenBuffer: buffer {buffer.name} is used outside its declaration")
        return flat

    def offset(self, buffer: Buffer, indices: tuple) -> tuple:
        if not indices:
            return (const(0, "int32"),)
        if buffer.strides:
            linear = Mul(*match_types(indices[0], buffer.strides[0]))
            for stride, index in zip(buffer.strides[1:], indices[1:]):
                linear = Add(*match_types(linear, Mul(*match_types(index, stride))))
            return (linear,) if linear.dtype.lanes > 1 else (self.analyzer.simplify(linear),)
        linear = indices[0]
        for extent, index in zip(buffer.shape[1:], indices[1:]):
            # (indices of two widths meet as TVM's operators make them: the narrower is cast)
            product = Mul(*match_types(linear, extent))
            linear = Add(*match_types(product, index))
        if linear.dtype.lanes > 1:  # vector indices are left as written
            return (linear,)
        if not (linear.dtype.is_int and linear.dtype.bits in (32, 64)):
            return (linear,)  # (TVM's canonical form is for int32 and int64: a uint32 index stays as written)
        return (iterators_first(self.analyzer, self.analyzer.simplify(linear), self.iterators),)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        load = self.generic_visit(load)
        if load.buffer in self.flats.values():
            return load
        return BufferLoad(self.flat_of(load.buffer), self.offset(load.buffer, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        value = self.visit(store.value)
        indices = tuple(self.visit(i) for i in store.indices)
        return BufferStore(self.flat_of(store.buffer), value, self.offset(store.buffer, indices), span=store.span)

    def visit_AllocBuffer(self, alloc: AllocBuffer) -> AllocBuffer:
        self.flats[alloc.buffer] = flat = flat_buffer(alloc.buffer)
        return AllocBuffer(flat, self.visit(alloc.body), alloc.annotations)

    def visit_DeclBuffer(self, decl: DeclBuffer) -> DeclBuffer:
        self.flats[decl.buffer] = flat = flat_buffer(decl.buffer)
        return DeclBuffer(flat, self.visit(decl.body), decl.data_of)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:  # buffers are rewritten where accessed
        return buffer


def flatten_buffer(func: PrimFunc) -> PrimFunc:
    """``func`` with only one-dimensional buffers."""
    flats = {buf: flat_buffer(buf) for buf in func.buffer_map.values()}
    body = _Flattener(dict(flats)).visit(func.body)
    for buf in reversed(list(func.buffer_map.values())):
        body = DeclBuffer(flats[buf], body, buf)  # (A_1 = A.view(16384))
    return func.with_changes(body=body)


FlattenBuffer = define_tir_pass("FlattenBuffer", flatten_buffer)

__all__ = ["FlattenBuffer", "flatten_buffer", "flat_buffer"]
