"""StmtSimplify (TVM's ``Simplify``): buffer indices in canonical form, decided ``if``s removed.

Indices are rewritten with the ranges of the enclosing loops (``ax0 * 100 + (h + ax1 + -1) * 10
+ (ax2 - 1)`` becomes ``ax0 * 100 + h * 10 + ax1 * 10 + ax2 - 11``; int32 and int64 ones, as
TVM's canonical form is for index types: a uint32 index stays as written); an ``if``'s condition is
simplified as TVM's analyzer does (``i * 4 < 16`` is ``i < 4``), and one decided keeps only the
branch that runs. The value of an integer ``let`` is put in place of its variable below it (the
``let`` itself stays, as TVM 0.27 leaves a binding statement); ``a > b`` becomes ``b < a`` (and
``>=`` ``<=``), as TVM writes comparisons; a product of constants and an added zero fold (what a
loop of one iteration left).
Other expressions are kept. ``stmt_simplify(func, values=True)`` (the tirx pipeline's, nearer
TVM's) also simplifies the integer values ``let`` binds and stores (``blockIdx.x`` launched once
is 0) and the int32/int64 and condition arguments of calls (``16 >> 2`` an unrolled loop left is 4;
a uint8 argument wraps, and stays as written), and drops a
store of a buffer's own element (``A[i] = A[i]``), as TVM's simplifier does; the s_tir pipeline
keeps what it printed before. Nearer TVM's ``Simplify`` besides, the tirx pipeline's simplifier
brings int32/int64 expressions to the canonical form (``(y * 8 + x) // 32`` is ``y // 4`` for x in
[0, 8)), simplifies an integer ``T.evaluate``, folds a cast of a constant (within the type's
literals: ``T.Cast("float16", 70000)`` stays a cast), ``x + 0.0`` and ``x * 1.0``, and lets each
branch of an ``if`` know its condition (``Analyzer.constraint``: ``tx == 0`` is True under
``if tx == 0``, ``tx // 32`` is 0 under ``if tx < 32``).
"""
from __future__ import annotations

from ...ir.arith import CANONICAL, Analyzer, index_typed
from ...ir.arith.bitwise import INTRINSICS, bitwise_binary
from ...ir.dtype import float_literal_refusal
from ...ir.expr import (GE, GT, LE, LT, Add, BufferLoad, Call, Cast, CommReducer, FloatImm, IntImm, Mul, Not, PrimExpr,
                        Sub, Var, const, is_const_int, wrap_int)
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore, Evaluate, IfThenElse, LetStmt, Stmt
from ...ir.structural import structural_equal
from ...ir.visitor import walk
from .loop_ranges import LoopRangeMutator
from .tir_pass import define_tir_pass


_BITWISE = {name: symbol for symbol, name in INTRINSICS.items() if symbol != "~"}  # (intrinsic -> operator)


class _StmtSimplifier(LoopRangeMutator):
    def __init__(self, values: bool = False) -> None:
        super().__init__()
        if values:  # (TVM's Simplify runs its canonical simplifier: ``(y * 8 + x) // 32`` is ``y // 4`` for x < 8)
            self.analyzer = Analyzer(CANONICAL)
        self.inlined: dict = {}  # let variable -> its value
        self.values = values

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.inlined.get(var, var)

    def visit_LetStmt(self, let: LetStmt) -> Stmt:
        value = self.visit(let.value)
        if self.values:
            value = self.bound_value(value)
        if value.dtype.is_integer and value.dtype.lanes == 1 and _pure(value):
            self.inlined[let.var] = value
        return let.with_changes(value=value, body=self.visit(let.body))

    def index(self, e: PrimExpr) -> PrimExpr:
        e = self.visit(e)
        # (TVM's canonical form is for index types, int32 and int64: ``100 + x`` in int8 stays, it wraps)
        return self.analyzer.simplify(e) if index_typed(e) else e

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        return BufferLoad(load.buffer, tuple(self.index(i) for i in load.indices))

    def bound_value(self, value: PrimExpr) -> PrimExpr:
        if isinstance(value, Call):
            args = tuple(self.index(a) if isinstance(a, PrimExpr) else a for a in value.args)
            return value if all(a is b for a, b in zip(args, value.args)) else value.with_changes(args=args)
        value = self.index(value)
        # (a thread index launched once is 0, as TVM binds a variable of extent 1 to its minimum; the
        # ranges a branch's condition narrows do not count: TVM keeps ``tx`` under ``if tx == 0``)
        bounds = self.analyzer.bound(value, constrained=False) \
            if value.dtype.is_integer and value.dtype.lanes == 1 else None
        if bounds is not None and bounds[0] == bounds[1] and not isinstance(value, IntImm):
            return IntImm(value.dtype, bounds[0])
        return value

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        value = self.visit(store.value)
        if self.values and value.dtype.is_integer and value.dtype.lanes == 1 and _pure(value):
            value = self.bound_value(value)  # (an integer stored: simplified as TVM's simplifier does)
        store = BufferStore(store.buffer, value, tuple(self.index(i) for i in store.indices), span=store.span)
        if self.values and _reads_itself(store):
            return Evaluate(const(0, "int32"))
        return store

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        if not self.values:
            return call
        # (index arguments and conditions, as index(): ``x * 2 // 2`` in uint8 wraps, and stays as written)
        args = tuple(self.analyzer.simplify(a) if isinstance(a, PrimExpr) and (index_typed(a) or _is_condition(a))
                     and _pure(a) else a for a in call.args)
        if getattr(call.op, "name", "") == "tir.if_then_else" and isinstance(args[0], IntImm):
            return args[1] if args[0].value else args[2]  # (a decided T.if_then_else is its branch, as TVM's)
        symbol = _BITWISE.get(getattr(call.op, "name", ""))
        if symbol is not None and len(args) == 2 and all(isinstance(a, IntImm) for a in args) \
                and (symbol not in ("<<", ">>") or 0 <= args[1].value < args[0].dtype.bits):
            folded = bitwise_binary(symbol, *args)  # (``16 >> k`` of a loop UnrollLoop unrolled)
            if isinstance(folded, IntImm):
                return folded  # (a shift by its width or more stays a call: a branch not taken may hold it)
        return call if all(a is b for a, b in zip(args, call.args)) else call.with_changes(args=args)

    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        value = self.visit(s.value)
        if self.values and not isinstance(value, Call) and value.dtype.is_integer and value.dtype.lanes == 1 \
                and _pure(value):
            value = self.index(value)  # (an integer evaluated for nothing: simplified as TVM simplifies any)
        return s if value is s.value else s.with_changes(value=value)

    def visit_Cast(self, e: Cast) -> PrimExpr:
        e = self.generic_visit(e)
        if self.values and isinstance(e.value, IntImm) and e.dtype.lanes == 1 and not e.value.dtype.is_bool:
            if e.dtype.is_integer and not e.dtype.is_bool:
                # (a constant's cast folds, as TVM's; one out of the type's range stays a cast, the C
                # compiler's conversion, where TVM refuses to fold it)
                value = e.value.value
                return IntImm(e.dtype, value) if wrap_int(value, e.dtype) == value else e
            if e.dtype.element_of.name in ("float16", "float32", "float64") \
                    and float_literal_refusal(e.dtype, float(e.value.value)) is None:
                return FloatImm(e.dtype, float(e.value.value))  # (beyond the type's literals: a cast, as convert())
        return e

    def visit_Mul(self, e: Mul) -> PrimExpr:
        e = self.generic_visit(e)
        if isinstance(e.a, IntImm) and isinstance(e.b, IntImm) and e.dtype.lanes == 1:
            return IntImm(e.dtype, wrap_int(e.a.value * e.b.value, e.dtype))  # (a substituted loop's zero)
        if self.values:
            for one, other in ((e.a, e.b), (e.b, e.a)):
                if _is_float_constant(one, 1.0) and other.dtype == one.dtype:
                    return other  # (x * 1.0 is x; TVM's x * 0.0 is 0.0 is not kept: it is not, for inf and NaN)
        return e

    def visit_Add(self, e: Add) -> PrimExpr:
        e = self.generic_visit(e)
        for zero, other in ((e.a, e.b), (e.b, e.a)):
            if is_const_int(zero, 0) and other.dtype.lanes == 1 and other.dtype.is_integer:
                return other  # (a zero of the other integer width, from an int64 loop kept by NarrowDataType)
            if self.values and _is_float_constant(zero, 0.0) and other.dtype == zero.dtype:
                return other  # (x + 0.0 is x, as TVM's constant folding has it)
        return e

    def visit_Sub(self, e: Sub) -> PrimExpr:
        e = self.generic_visit(e)
        return e.a if self.values and _is_float_constant(e.b, 0.0) and e.a.dtype == e.b.dtype else e

    def visit_CommReducer(self, reducer: CommReducer) -> CommReducer:  # (an attribute's node: kept)
        return reducer

    def visit_GT(self, e: GT) -> PrimExpr:  # (TVM's simplifier writes ``a > b`` as ``b < a``)
        e = self.generic_visit(e)
        return LT(e.b, e.a)

    def visit_GE(self, e: GE) -> PrimExpr:
        e = self.generic_visit(e)
        return LE(e.b, e.a)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.analyzer.simplify(self.visit(s.condition))
        if isinstance(cond, IntImm):
            if cond.value:
                return self.visit(s.then_case)
            return self.visit(s.else_case) if s.else_case is not None else Evaluate(const(0, "int32"))
        if not self.values:
            s = self.generic_visit(s)
            return s.with_changes(condition=cond)
        # (tirx: each branch knows its condition, as TVM's ConstraintContext: ``tx == 0`` under
        # ``if tx == 0`` is True)
        with self.analyzer.constraint(cond, derive=True):
            then_case = self.visit(s.then_case)
        else_case = s.else_case
        if else_case is not None:
            with self.analyzer.constraint(self.analyzer.simplify(Not(cond))):
                else_case = self.visit(else_case)
        return s.with_changes(condition=cond, then_case=then_case, else_case=else_case)


def _reads_itself(store: BufferStore) -> bool:
    """Whether ``store`` writes back the element it reads: the same buffer (two views of one
    allocation at other offsets, shapes or strides are other elements), the same indices."""
    value = store.value
    if not isinstance(value, BufferLoad):
        return False
    a, b = value.buffer, store.buffer
    same = a is b or (a.data is b.data and a.dtype == b.dtype and structural_equal(
        (a.elem_offset, tuple(a.shape), tuple(a.strides)), (b.elem_offset, tuple(b.shape), tuple(b.strides))))
    return same and structural_equal(tuple(value.indices), tuple(store.indices))


def _is_condition(e: PrimExpr) -> bool:
    return e.dtype.is_bool and e.dtype.lanes == 1


def _is_float_constant(e: PrimExpr, value: float) -> bool:
    return isinstance(e, FloatImm) and e.dtype.lanes == 1 and e.value == value


def _pure(e: PrimExpr) -> bool:
    return not any(isinstance(n, (Call, BufferLoad)) for n in walk(e))


def stmt_simplify(func: PrimFunc, values: bool = False) -> PrimFunc:
    """``func`` with its buffer indices simplified (``values``: see the module)."""
    return func.with_changes(body=_StmtSimplifier(values).visit(func.body))


StmtSimplify = define_tir_pass("StmtSimplify", stmt_simplify)

__all__ = ["StmtSimplify", "stmt_simplify"]
