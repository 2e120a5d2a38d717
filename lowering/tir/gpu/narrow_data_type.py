"""NarrowDataType(32): int64 index arithmetic becomes int32 where every value fits.

TVM 0.27 narrows each int64 expression whose bounds fit in 32 bits. tvms does the case that
covers statically shaped kernels: when every int64 variable of the body is a loop or thread index
with a constant range and every int64 constant fits in int32, all the body's int64 integers
(constants, loop and thread indices, allocated and declared buffers' shapes) become int32,
except a loop under a ``pragma_*`` attribute (TVM leaves it).
A body with an int64 value of unknown range (a dynamic size ``n``) or with int64 data (an
argmax's indices) is left as it is (TVM would still narrow its index arithmetic).
"""
from __future__ import annotations

from ....ir.buffer import Buffer
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, Cast, IntImm, IterVar, PrimExpr, Var
from ....ir.function import PrimFunc
from ....ir.stmt import AttrStmt, BufferStore, DeclBuffer, For, Stmt
from ....ir.visitor import Mutator, walk
from ...pass_registry import register_pass
from ..tir_pass import checked_prim_func_pass

INT64, INT32 = DataType("int64"), DataType("int32")
LIMIT = 2 ** 31


def _pragma_loops(body: Stmt) -> set:
    """The variables of ``pragma_*`` attributes and of the loops they annotate: TVM leaves such
    a loop's type as it is."""
    kept: set = set()
    for node in walk(body):
        if isinstance(node, AttrStmt) and node.attr_key.startswith("pragma_") and isinstance(node.node, Var):
            kept.add(node.node)
            inner = node.body
            while isinstance(inner, AttrStmt) and inner.attr_key.startswith("pragma_"):
                inner = inner.body
            if isinstance(inner, For):
                kept.add(inner.loop_var)
    return kept


def _narrowable(func: PrimFunc, kept: set) -> bool:
    ranged: dict = {v: 0 for v in kept}
    for node in walk(func.body):
        if isinstance(node, For) and isinstance(node.min, IntImm) and isinstance(node.extent, IntImm):
            ranged[node.loop_var] = node.min.value + node.extent.value
        elif isinstance(node, AttrStmt) and isinstance(node.node, IterVar) and isinstance(node.value, IntImm):
            ranged[node.node.var] = node.value.value
    for node in walk(func.body):
        if isinstance(node, (BufferStore, BufferLoad)) and node.buffer.dtype.element_of == INT64:
            return False  # (int64 data: only index arithmetic may narrow, and tvms narrows all or nothing)
        if isinstance(node, IntImm) and node.dtype == INT64 and not -LIMIT <= node.value < LIMIT:
            return False
        if isinstance(node, Var) and node.dtype == INT64 and not (node in ranged and ranged[node] < LIMIT):
            return False
    return True


class _Narrow(Mutator):
    def __init__(self, params: set, kept: set) -> None:
        self.params = params  # the parameters' buffers keep their types
        self.kept = kept
        self.vars: dict = {}
        self.buffers: dict = {}

    def visit_IntImm(self, imm: IntImm) -> PrimExpr:
        return IntImm(INT32, imm.value) if imm.dtype == INT64 else imm

    def visit_Var(self, var: Var) -> Var:
        if var.dtype != INT64 or var in self.kept:
            return var
        if var not in self.vars:
            self.vars[var] = var.with_changes(dtype=INT32)
        return self.vars[var]

    def visit_For(self, loop: For) -> Stmt:
        if loop.loop_var in self.kept:
            return loop.with_changes(body=self.visit(loop.body))
        return self.generic_visit(loop)

    def visit_Cast(self, cast: Cast) -> PrimExpr:
        value = self.visit(cast.value)
        dtype = INT32 if cast.dtype == INT64 else cast.dtype
        return value if value.dtype == dtype else Cast(dtype, value)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        if buffer in self.params:
            return buffer
        if buffer not in self.buffers:
            self.buffers[buffer] = buffer.with_changes(
                shape=tuple(self.visit(s) for s in buffer.shape), strides=tuple(self.visit(s) for s in buffer.strides))
        return self.buffers[buffer]

    def generic_visit(self, node):
        result = super().generic_visit(node)
        if isinstance(result, DeclBuffer) and result is not node and result.data_of is not None:
            result = result.with_changes(data_of=None)  # (a narrowed view is a declaration of its own)
        return result


def narrow_data_type(func: PrimFunc) -> PrimFunc:
    """``func`` with its int64 indices as int32 when all of them fit (see the module docstring)."""
    kept = _pragma_loops(func.body)
    if not any(isinstance(n, (IntImm, Var)) and n.dtype == INT64 for n in walk(func.body)) or not _narrowable(func, kept):
        return func
    return func.with_changes(body=_Narrow(set(func.buffer_map.values()), kept).visit(func.body))


def NarrowDataType(target_bits: int = 32):  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.NarrowDataType(32)`` (only 32 bits, as TVM's pipeline)."""
    if target_bits != 32:
        raise TVMSError(f"NarrowDataType: only 32 target bits are supported, not {target_bits}")
    return checked_prim_func_pass(lambda func, mod, ctx: narrow_data_type(func), "NarrowDataType")


register_pass("NarrowDataType", NarrowDataType)

__all__ = ["NarrowDataType", "narrow_data_type"]
