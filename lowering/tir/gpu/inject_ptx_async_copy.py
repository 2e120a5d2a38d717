"""InjectPTXAsyncCopy: the copies of a software pipeline's asynchronous stage become ``cp.async``,
as TVM 0.27's pass of that name does (run by the cuda pipeline under ``tirx.use_async_copy``).

InjectSoftwarePipeline puts each statement of an async stage in ``T.attr(0, "async_scope", 1)``.
This pass drops those attributes and, inside them, turns a store into ``shared``/``shared.dyn``
memory of a load from global memory, of 4, 8 or 16 bytes, into
``T.s_tir.cp_async_raw(dtype, dst, dst_offset, src, src_offset, bytes)``: offsets in elements of
``dtype`` (the store's), the first lane's index of a vector (a ``Ramp`` of stride 1, or such a
``Ramp`` plus a ``Broadcast`` on the destination side). A store of ``T.if_then_else(c, load, 0)`` is the
predicated form (a seventh argument ``c``; where it is false the copy writes zeros, as cp.async's
source size 0 does), of one element only: TVM does not vectorize it. A destination that is a
merged byte buffer (MergeSharedMemoryAllocations) takes its offset in bytes. Other stores in the
scope stay as they are (a synchronous copy is still correct under the commit and wait groups).
"""
from __future__ import annotations

from ....ir.buffer import element_bytes
from ....ir.errors import TVMSError
from ....ir.expr import Add, Broadcast, BufferLoad, Call, FloatImm, IntImm, Mul, PrimExpr, Ramp, const
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.stmt import AttrStmt, BufferStore, Evaluate, Stmt
from ....ir.visitor import Mutator
from ..tir_pass import define_tir_pass

CP_ASYNC_BYTES = (4, 8, 16)


def _contiguous(ramp: PrimExpr) -> bool:
    return isinstance(ramp, Ramp) and isinstance(ramp.stride, IntImm) and ramp.stride.value == 1


def _first_lane(index: PrimExpr, store_side: bool) -> PrimExpr | None:
    """The offset of a contiguous vector access's first element (None for a pattern TVM does not
    take: a strided access is a gather or scatter, not one copy of consecutive bytes)."""
    if _contiguous(index):
        return index.base
    if store_side and isinstance(index, Add) and _contiguous(index.a) and isinstance(index.b, Broadcast):
        return Add(index.a.base, index.b.value)  # (a merged byte buffer: ramp + its offset)
    return None


def _scaled(offset: PrimExpr, factor: int) -> PrimExpr:
    if factor == 1:
        return offset
    if isinstance(offset, IntImm):
        return const(offset.value * factor, offset.dtype)
    return Mul(offset, const(factor, offset.dtype))


def _zero(e: PrimExpr) -> bool:
    value = e.value if isinstance(e, Broadcast) else e
    return isinstance(value, FloatImm) and value.value == 0.0


class _Injector(Mutator):
    def __init__(self) -> None:
        self.in_async = False

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        if s.attr_key != "async_scope":
            return self.generic_visit(s)
        if self.in_async:
            raise TVMSError("InjectPTXAsyncCopy: nested async scopes are not supported")
        self.in_async = True
        try:
            return self.visit(s.body)
        finally:
            self.in_async = False

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        if not self.in_async or s.buffer.scope not in ("shared", "shared.dyn"):
            return self.generic_visit(s)
        value = s.value
        if isinstance(value, BufferLoad):
            return self._copy(value, s, None) or self.generic_visit(s)
        if (isinstance(value, Call) and getattr(value.op, "name", None) == "tir.if_then_else"
                and isinstance(value.args[1], BufferLoad) and _zero(value.args[2])):
            return self._copy(value.args[1], s, value.args[0]) or self.generic_visit(s)
        return self.generic_visit(s)

    def _copy(self, load: BufferLoad, store: BufferStore, predicate: PrimExpr | None) -> Stmt | None:
        if load.buffer.scope != "global":
            return None
        if len(load.indices) != 1 or len(store.indices) != 1:
            raise TVMSError(f"InjectPTXAsyncCopy: the copy into {store.buffer.name!r} is not flattened "
                            f"(FlattenBuffer runs first)")
        lanes = load.indices[0].dtype.lanes
        size = lanes * element_bytes(load.buffer.dtype)
        if size not in CP_ASYNC_BYTES:
            return None
        factor = 1
        if store.buffer.dtype != load.buffer.dtype:  # (only a merged byte buffer of shared.dyn differs)
            if store.buffer.scope != "shared.dyn" or store.buffer.dtype.name != "uint8":
                raise TVMSError(f"InjectPTXAsyncCopy: a copy of {load.buffer.dtype} into the "
                                f"{store.buffer.dtype} buffer {store.buffer.name!r}")
            factor = element_bytes(load.buffer.dtype)
        if lanes == 1:
            src, dst = load.indices[0], store.indices[0]
        elif predicate is not None:
            return None  # (TVM takes a predicated copy of one element only)
        else:
            src, dst = _first_lane(load.indices[0], False), _first_lane(store.indices[0], True)
            if src is None or dst is None:
                return None
        args = (store.buffer.data, _scaled(dst, factor), load.buffer.data, src, const(size, "int32"))
        if predicate is not None:
            args += (predicate,)
        return Evaluate(Call(store.buffer.dtype, get_op("tir.s_tir.cp_async_raw"), args,
                             data_of=(store.buffer, None, load.buffer)))  # (TVM prints B.data for each)


def inject_ptx_async_copy(func: PrimFunc) -> PrimFunc:
    """``func`` with the global-to-shared copies of its async scopes as ``cp.async``."""
    body = _Injector().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


InjectPTXAsyncCopy = define_tir_pass("InjectPTXAsyncCopy", inject_ptx_async_copy)

__all__ = ["InjectPTXAsyncCopy", "inject_ptx_async_copy"]
