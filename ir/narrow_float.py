"""Arithmetic on the narrow floats (bfloat16, float8/6/4) computed in float32, as TVM's
BF16ComputeLegalize and FP8ComputeLegalize do: an expression of a narrow type becomes its
float32 computation (operands converted exactly), rounded to the narrow type once where the
value leaves it (a store, an explicit ``T.Cast``, a comparison reads the float32 value). What
remains of a narrow type for the code generator is moved, not computed: loads, stores,
``T.Cast`` to and from it (``codegen/llvm_narrow.py``), selects and shuffles of its bits.
The reference executor runs the same rewrite, so it computes what compiled code computes; the
lowering's pass is ``LegalizeNarrowFloat`` (lowering/tir/legalize_narrow.py).
"""
from __future__ import annotations

from . import expr as E
from .dtype import DataType
from .function import PrimFunc
from .visitor import Mutator, walk

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)
# calls that do not compute on their narrow operand's value (its bits, its address, or nothing); and
# the PTX dialect's instructions (tirx.ptx.*), whose operands are registers, read and written as bits
_MOVES = frozenset({"tir.reinterpret", "tir.undef", "tir.likely", "tir.vectorcombine",
                    "tir.max_value", "tir.min_value", "tir.address_of", "tir.type_annotation",
                    "tir.tvm_access_ptr", "tir.tvm_stack_make_array"})


def _moves(op: E.Op) -> bool:
    return op.name in _MOVES or op.name.startswith("tirx.ptx.")


def _narrow(e: E.PrimExpr) -> bool:
    return isinstance(e, E.PrimExpr) and e.dtype.is_narrow_float


def _f32(dtype: DataType) -> DataType:
    return DataType("float32").with_lanes_of(dtype)


def _computes(e: E.PrimExpr) -> bool:
    """Whether the narrow-typed ``e`` computes a new value (else it moves bits)."""
    if isinstance(e, (*_ARITH, E.Let)):
        return True
    if isinstance(e, E.Select):
        return _computes(e.true_value) or _computes(e.false_value)
    return isinstance(e, E.Call) and isinstance(e.op, E.Op) and not _moves(e.op)


class _Legalizer(Mutator):
    def wide(self, e: E.PrimExpr) -> E.PrimExpr:
        """The float32 value of the narrow-typed ``e``, computed in float32."""
        f32 = _f32(e.dtype)
        if isinstance(e, _ARITH):
            return type(e)(self.wide(e.a), self.wide(e.b))
        if isinstance(e, E.Select) and _computes(e):
            return E.Select(self.visit(e.condition), self.wide(e.true_value), self.wide(e.false_value))
        if isinstance(e, E.Let):
            return E.Let(e.var, self.visit(e.value), self.wide(e.body))
        if isinstance(e, E.Broadcast):
            return E.Broadcast(self.wide(e.value), e.lanes)
        if isinstance(e, E.Call) and _computes(e):
            return E.Call(f32, e.op, tuple(self.operand(a) for a in e.args), e.attrs, e.type_annotation)
        return E.Cast(f32, self.visit(e))  # (exact)

    def operand(self, e):
        return self.wide(e) if _narrow(e) else self.visit(e)

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        if _narrow(e) and _computes(e):
            return E.Cast(e.dtype, self.wide(e))
        if isinstance(e, E.CmpOp) and _narrow(e.a):
            return type(e)(self.wide(e.a), self.wide(e.b))
        if isinstance(e, E.Cast) and _narrow(e.value) and _computes(e.value):
            return E.Cast(e.dtype, self.wide(e.value))
        if isinstance(e, E.Call) and isinstance(e.op, E.Op) and not _moves(e.op) \
                and any(_narrow(a) for a in e.args):  # (T.isnan(x) of a bfloat16 x)
            return E.Call(e.dtype, e.op, tuple(self.operand(a) for a in e.args), e.attrs, e.type_annotation)
        return self.generic_visit(e)


def legalize_narrow(func: PrimFunc) -> PrimFunc:
    """``func`` with its narrow-float arithmetic computed in float32 (unchanged without any)."""
    if not any(_narrow(n) for n in walk(func.body)):
        return func
    return func.with_changes(body=_Legalizer().visit(func.body))


__all__ = ["legalize_narrow"]
