"""InferFragment: each tensor-core fragment allocation gets its tile and layout, as TVM 0.27 does.

The WMMA calls name their fragment and tile shape (``T.tvm_load_matrix_sync(F, 16, 16, 16, ...,
"col_major")``, ``T.tvm_fill_fragment``, ``T.tvm_store_matrix_sync``); CUDA declares a fragment's
shape and an operand's layout in its type. So the allocation of each fragment is wrapped in
``T.attr(F, "fragment_shape", "16, 16, 16")`` and, for ``wmma.matrix_a``/``matrix_b``, in
``T.attr(F, "fragment_layout", "row_major")`` outside it (an accumulator too where a fill
shapes it first, as in TVM). Calls that disagree on a fragment's
shape or layout, and a ``T.tvm_mma_sync`` of fragments that no call shapes or of different
shapes, are errors.
"""
from __future__ import annotations

from ....ir.errors import TVMSError
from ....ir.expr import Call, IntImm, StringImm, Var
from ....ir.function import PrimFunc
from ....ir.stmt import AllocBuffer, AttrStmt, Stmt
from ....ir.visitor import Mutator, walk
from ..tir_pass import define_tir_pass

_OPERANDS = ("wmma.matrix_a", "wmma.matrix_b")


def _scope(data: Var) -> str:
    return getattr(getattr(data, "type_annotation", None), "storage_scope", "") or "global"


def fragments(body: Stmt) -> dict:
    """Each fragment's data Var -> ((m, n, k), layout or ""), from the calls that shape it."""
    found: dict = {}
    mma = []
    for n in walk(body):
        name = getattr(getattr(n, "op", None), "name", None) if isinstance(n, Call) else None
        if name == "tir.tvm_mma_sync":
            mma.append(n)
        if name not in ("tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync", "tir.tvm_fill_fragment"):
            continue
        data, *mnk = n.args[:4]
        if not isinstance(data, Var) or not all(isinstance(x, IntImm) for x in mnk):
            raise TVMSError(f"InferFragment: {name[4:]} needs a fragment and a constant m, n, k")
        shape = tuple(x.value for x in mnk)
        operand = _scope(data) in _OPERANDS
        # (as TVM: a fill says row_major, of an accumulator too; a load or store the operands' layout)
        layout = "row_major" if name == "tir.tvm_fill_fragment" else n.args[7].value if operand else ""
        before = found.setdefault(data, (shape, layout))
        if before[0] != shape or operand and before[1] != layout:
            raise TVMSError(f"InferFragment: fragment {data.name!r} is used as {before} and as {(shape, layout)}")
    for call in mma:
        shapes = [found.get(a, (None,))[0] for a in call.args[0:8:2]]
        if None in shapes or len(set(shapes)) != 1:
            raise TVMSError(f"InferFragment: tvm_mma_sync on fragments that are not all filled or loaded with "
                            f"one shape ({', '.join(a.name for a in call.args[0:8:2])})")
    return found


class _Annotate(Mutator):
    def __init__(self, found: dict):
        self.found = found

    def visit_AllocBuffer(self, s: AllocBuffer) -> Stmt:
        stmt = self.generic_visit(s)
        info = self.found.get(s.buffer.data)
        if info is None:
            return stmt
        (m, n, k), layout = info
        stmt = AttrStmt(s.buffer, "fragment_shape", StringImm(f"{m}, {n}, {k}"), stmt)
        return AttrStmt(s.buffer, "fragment_layout", StringImm(layout), stmt) if layout else stmt


def infer_fragment(func: PrimFunc) -> PrimFunc:
    found = fragments(func.body)
    if not found:
        return func
    return func.with_changes(body=_Annotate(found).visit(func.body))


InferFragment = define_tir_pass("InferFragment", infer_fragment)
