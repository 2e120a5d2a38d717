"""The Relax dataflow pattern language, shaped like TVM's ``relax.dpl``.

::

    from tvms.relax.dpl import is_op, wildcard
    lhs, rhs = wildcard(), wildcard()
    pattern = is_op("relax.nn.relu")(is_op("relax.matmul")(lhs, rhs))
    pattern.match(call, var2val)                  # True / False
    pattern.extract_matched_expr(call, var2val)   # {pattern: expr, ...} or None

A pattern is a tree of ``DFPattern`` objects; patterns are compared by identity, so one
pattern object used twice must match the very same expression both times. Relax is in
A-normal form (every call is bound to a variable), so the matcher follows a variable to the
value it is bound to in ``var2val`` (``get_var2val(func)``), as TVM's matcher does:
``is_op("relax.add")(is_op("relax.matmul")(...), b)`` matches ``add(lv, b)`` when
``lv = matmul(...)`` earlier in the block (and ``is_var`` does not match ``lv``: only
variables that ``var2val`` does not bind, such as parameters). ``add`` and ``multiply`` match
their arguments in either order.

Not here (yet): TVM's used-by constraints between patterns (``PatternSeq``, ``used_by``,
``only_used_by``, ``^``, ``>>``, ``PatternContext``), ``FunctionPattern`` and ``has_ty``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import IntImm, Op, PrimExpr
from ...ir.module import GlobalVar
from ...ir.node import Node
from ...ir.op import get_op
from ...ir.relax_op import lookup
from ...ir.struct_info import TensorStructInfo
from ...ir.structural import structural_equal
from ...ir.visitor import walk
from .expr_functor import PyExprMutator

# Calls whose two arguments may be matched in either order, as in TVM.
_COMMUTATIVE = ("relax.add", "relax.multiply")


@dataclass(frozen=True, eq=False)
class DFPattern:
    """A dataflow pattern. ``p(a, b)`` is a call pattern, ``p | q`` either, ``p & q`` both,
    ``~p`` anything but ``p``."""

    def __call__(self, *args: "DFPattern", varg_default_wildcard: bool = False,
                 add_constraint: bool = True) -> "CallPattern":
        # add_constraint (TVM's used-by bookkeeping) is accepted for TVM's spelling only
        return CallPattern(self, args, varg_default_wildcard)

    def __or__(self, other: "DFPattern") -> "OrPattern":
        return OrPattern(self, other)

    def __and__(self, other: "DFPattern") -> "AndPattern":
        return AndPattern(self, other)

    def __invert__(self) -> "NotPattern":
        return NotPattern(self)

    def has_attr(self, attrs: dict) -> "AttrPattern":
        return AttrPattern(self, dict(attrs))

    def has_dtype(self, dtype: str) -> "DataTypePattern":
        return DataTypePattern(self, DataType(dtype))

    def has_shape(self, shape: Any) -> "ShapePattern":
        if not isinstance(shape, (list, tuple)) and not isinstance(shape, PrimExpr):
            raise TVMSError("has_shape takes a list or tuple of dimensions, such as [1, 784]")
        return ShapePattern(self, tuple(shape) if isinstance(shape, (list, tuple)) else (shape,))

    def match(self, expr: Any, var2val: dict | None = None) -> bool:
        """Whether ``expr`` matches; ``var2val`` maps variables to the values they are bound to."""
        return self.extract_matched_expr(expr, var2val) is not None

    def extract_matched_expr(self, expr: Any, var2val: dict | None = None) -> dict | None:
        """``{sub-pattern: the expression it matched}`` for every part of the pattern that took
        part in the match, or None when ``expr`` does not match."""
        matcher = Matcher(var2val or {})
        return dict(matcher.memo) if matcher.visit(self, expr) else None


@dataclass(frozen=True, eq=False)
class WildcardPattern(DFPattern):
    """Anything."""


@dataclass(frozen=True, eq=False)
class ExprPattern(DFPattern):
    """One expression (an operator for ``is_op``), by identity or structure."""

    expr: Any


@dataclass(frozen=True, eq=False)
class VarPattern(DFPattern):
    """A Relax variable, of the given name when one is given."""

    name_hint: str = ""


@dataclass(frozen=True, eq=False)
class DataflowVarPattern(VarPattern):
    """A dataflow variable, of the given name when one is given."""


@dataclass(frozen=True, eq=False)
class GlobalVarPattern(DFPattern):
    """A function of the module, of the given name when one is given."""

    name_hint: str = ""


@dataclass(frozen=True, eq=False)
class ExternFuncPattern(DFPattern):
    """A packed function by its global symbol (any when empty)."""

    global_symbol: str = ""


@dataclass(frozen=True, eq=False)
class ConstantPattern(DFPattern):
    """A tensor constant."""


@dataclass(frozen=True, eq=False)
class CallPattern(DFPattern):
    """A call of ``op`` on ``args``; with ``varg_default_wildcard`` the call may have more
    arguments than the pattern lists."""

    op: DFPattern
    args: tuple = ()
    varg_default_wildcard: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        for a in (self.op, *self.args):
            if not isinstance(a, DFPattern):
                raise TVMSError(f"a call pattern takes patterns, got {type(a).__name__}")


@dataclass(frozen=True, eq=False)
class TuplePattern(DFPattern):
    """A tuple whose fields match in order."""

    fields: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __getitem__(self, index: int | None) -> "TupleGetItemPattern":
        if index is not None and index < 0:
            index += len(self.fields)
        if index is not None and not 0 <= index < len(self.fields):
            raise TVMSError("TuplePattern index out of range")
        return TupleGetItemPattern(self, -1 if index is None else index)

    def __len__(self) -> int:
        return len(self.fields)


@dataclass(frozen=True, eq=False)
class UnorderedTuplePattern(TuplePattern):
    """A tuple whose fields match in some order."""


@dataclass(frozen=True, eq=False)
class TupleGetItemPattern(DFPattern):
    """``t[index]``; index -1 matches any index."""

    tuple_value: DFPattern
    index: int = -1


@dataclass(frozen=True, eq=False)
class _PairPattern(DFPattern):
    left: DFPattern
    right: DFPattern


@dataclass(frozen=True, eq=False)
class OrPattern(_PairPattern):
    """``left | right``: either one (the left is tried first)."""


@dataclass(frozen=True, eq=False)
class AndPattern(_PairPattern):
    """``left & right``: both, on the same expression."""


@dataclass(frozen=True, eq=False)
class NotPattern(DFPattern):
    """``~pattern``: anything that does not match ``reject``."""

    reject: DFPattern


@dataclass(frozen=True, eq=False)
class DataTypePattern(DFPattern):
    """``pattern`` whose value is a tensor of ``dtype``."""

    pattern: DFPattern
    dtype: DataType


@dataclass(frozen=True, eq=False)
class ShapePattern(DFPattern):
    """``pattern`` whose value is a tensor of this shape."""

    pattern: DFPattern
    shape: tuple


@dataclass(frozen=True, eq=False)
class PrimArrPattern(DFPattern):
    """A shape value (``R.shape([...])``) with these dimensions."""

    shape: tuple


@dataclass(frozen=True, eq=False)
class AttrPattern(DFPattern):
    """``pattern`` whose call (or function) has these attribute values."""

    pattern: DFPattern
    attrs: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- constructors


def wildcard() -> WildcardPattern:
    return WildcardPattern()


def is_op(op_name: str) -> ExprPattern:
    """The operator named ``op_name`` (``"relax.matmul"``); call it to make a call pattern."""
    if lookup(op_name) is None:
        raise TVMSError(f"is_op: unknown Relax operator {op_name!r}")
    return ExprPattern(get_op(op_name))


def is_expr(expr: Any) -> ExprPattern:
    return ExprPattern(expr)


def is_const() -> ConstantPattern:
    return ConstantPattern()


def is_var(name: str = "") -> VarPattern:
    return VarPattern(name)


def is_dfv(name: str = "") -> DataflowVarPattern:
    return DataflowVarPattern(name)


def is_gv(name: str = "") -> GlobalVarPattern:
    return GlobalVarPattern(name)


def is_tuple(fields: Any, unordered: bool = False) -> TuplePattern:
    if not isinstance(fields, (list, tuple)):
        raise TVMSError("is_tuple takes a list or tuple of patterns")
    return UnorderedTuplePattern(tuple(fields)) if unordered else TuplePattern(tuple(fields))


def is_tuple_get_item(tuple_value: DFPattern, index: int | None = None) -> TupleGetItemPattern:
    return TupleGetItemPattern(tuple_value, -1 if index is None else index)


def is_shape(shape: Any) -> PrimArrPattern:
    if not isinstance(shape, (list, tuple)):
        raise TVMSError("is_shape takes a list or tuple of dimensions")
    return PrimArrPattern(tuple(shape))


def has_dtype(dtype: str, pattern: DFPattern | None = None) -> DataTypePattern:
    return (pattern or wildcard()).has_dtype(dtype)


def has_attr(attrs: dict, pattern: DFPattern | None = None) -> AttrPattern:
    return (pattern or wildcard()).has_attr(attrs)


def reject(pattern: DFPattern) -> NotPattern:
    return NotPattern(pattern)


def _dps_call(op_name: str, func: DFPattern, args: Any) -> CallPattern:
    args = wildcard() if args is None else (TuplePattern(tuple(args))
                                            if isinstance(args, (list, tuple)) else args)
    return is_op(op_name)(func, args)


def is_call_tir(func_name: str, args: Any = None) -> CallPattern:
    """``R.call_tir(cls.<func_name>, (args...), ...)``; ``args`` None matches any arguments."""
    return _dps_call("relax.call_tir", GlobalVarPattern(func_name), args)


def is_call_dps_packed(func_name: str, args: Any = None) -> CallPattern:
    """``R.call_dps_packed("<func_name>", (args...), ...)``."""
    return _dps_call("relax.call_dps_packed", ExternFuncPattern(func_name), args)


def is_call_packed(func_name: str, args: Any = None) -> CallPattern:
    """``R.call_packed("<func_name>", args...)``; ``args`` None matches any arguments."""
    if args is None:
        return is_op("relax.call_packed")(ExternFuncPattern(func_name), varg_default_wildcard=True)
    return is_op("relax.call_packed")(ExternFuncPattern(func_name), *args)


# --------------------------------------------------------------------------- matching


class Matcher:
    """Matches one pattern against one expression. ``memo`` records what each sub-pattern
    matched; a failed alternative takes its records back."""

    def __init__(self, var2val: dict):
        self.var2val = var2val
        self.memo: dict = {}

    def follow(self, expr: Any) -> Any:
        """The value a bound variable stands for (through chains of ``y = x``)."""
        seen = 0
        while isinstance(expr, rx.Var) and expr in self.var2val and seen < 1000:
            expr, seen = self.var2val[expr], seen + 1
        return expr

    def visit(self, pattern: DFPattern, expr: Any) -> bool:
        if not isinstance(pattern, DFPattern):
            raise TVMSError(f"not a pattern: {type(pattern).__name__}")
        # a bound variable stands for its value, for every kind of pattern (so is_var only
        # matches variables bound outside the block, such as parameters), as in TVM
        target = self.follow(expr)
        if pattern in self.memo:
            return self.memo[pattern] is target
        saved = dict(self.memo)
        if getattr(self, "m_" + type(pattern).__name__)(pattern, target):
            self.memo[pattern] = target
            return True
        self.memo = saved
        return False

    def m_WildcardPattern(self, p: WildcardPattern, e: Any) -> bool:
        return True

    def m_ExprPattern(self, p: ExprPattern, e: Any) -> bool:
        if e is p.expr:
            return True
        if isinstance(p.expr, Op):
            return isinstance(e, Op) and e.name == p.expr.name
        return isinstance(e, Node) and not isinstance(e, rx.Var) and structural_equal(e, p.expr)

    def m_VarPattern(self, p: VarPattern, e: Any) -> bool:
        return isinstance(e, rx.Var) and (not p.name_hint or e.name == p.name_hint)

    def m_DataflowVarPattern(self, p: DataflowVarPattern, e: Any) -> bool:
        return isinstance(e, rx.DataflowVar) and self.m_VarPattern(p, e)

    def m_GlobalVarPattern(self, p: GlobalVarPattern, e: Any) -> bool:
        return isinstance(e, GlobalVar) and (not p.name_hint or e.name_hint == p.name_hint)

    def m_ExternFuncPattern(self, p: ExternFuncPattern, e: Any) -> bool:
        return isinstance(e, rx.ExternFunc) and (not p.global_symbol
                                                 or e.global_symbol == p.global_symbol)

    def m_ConstantPattern(self, p: ConstantPattern, e: Any) -> bool:
        return isinstance(e, rx.Constant)

    def m_CallPattern(self, p: CallPattern, e: Any) -> bool:
        if not isinstance(e, rx.Call) or not self.visit(p.op, e.op):
            return False
        args = e.args
        if len(p.args) > len(args) or (len(p.args) < len(args) and not p.varg_default_wildcard):
            return False
        if self.all_match(p.args, args[:len(p.args)]):
            return True
        if isinstance(e.op, Op) and e.op.name in _COMMUTATIVE and len(p.args) == 2:
            return self.all_match(p.args, (args[1], args[0]))
        return False

    def all_match(self, patterns: tuple, exprs: tuple) -> bool:
        saved = dict(self.memo)
        if all(self.visit(p, x) for p, x in zip(patterns, exprs)):
            return True
        self.memo = saved
        return False

    def m_TuplePattern(self, p: TuplePattern, e: Any) -> bool:
        return isinstance(e, rx.Tuple) and len(e.fields) == len(p.fields) \
            and self.all_match(p.fields, e.fields)

    def m_UnorderedTuplePattern(self, p: UnorderedTuplePattern, e: Any) -> bool:
        if not isinstance(e, rx.Tuple) or len(e.fields) != len(p.fields):
            return False
        return any(self.all_match(p.fields, tuple(order))
                   for order in itertools.permutations(e.fields))

    def m_TupleGetItemPattern(self, p: TupleGetItemPattern, e: Any) -> bool:
        return isinstance(e, rx.TupleGetItem) and p.index in (-1, e.index) \
            and self.visit(p.tuple_value, e.tuple_value)

    def m_OrPattern(self, p: OrPattern, e: Any) -> bool:
        return self.visit(p.left, e) or self.visit(p.right, e)

    def m_AndPattern(self, p: AndPattern, e: Any) -> bool:
        return self.all_match((p.left, p.right), (e, e))

    def m_NotPattern(self, p: NotPattern, e: Any) -> bool:
        saved = dict(self.memo)
        hit = self.visit(p.reject, e)
        self.memo = saved
        return not hit

    def m_DataTypePattern(self, p: DataTypePattern, e: Any) -> bool:
        sinfo = getattr(e, "struct_info", None)
        return isinstance(sinfo, TensorStructInfo) and sinfo.dtype == p.dtype \
            and self.visit(p.pattern, e)

    def m_ShapePattern(self, p: ShapePattern, e: Any) -> bool:
        sinfo = getattr(e, "struct_info", None)
        dims = sinfo.dims if isinstance(sinfo, TensorStructInfo) else None
        return dims is not None and _same_dims(p.shape, dims) and self.visit(p.pattern, e)

    def m_PrimArrPattern(self, p: PrimArrPattern, e: Any) -> bool:
        return isinstance(e, rx.ShapeExpr) and _same_dims(p.shape, e.values)

    def m_AttrPattern(self, p: AttrPattern, e: Any) -> bool:
        attrs = getattr(e, "attrs", None) if isinstance(e, (rx.Call, rx.Function)) else None
        if attrs is None:
            return False
        for key, want in p.attrs.items():
            if key not in attrs or not _same_attr(attrs[key], want):
                return False
        return self.visit(p.pattern, e)


def _same_dims(want: tuple, have: tuple) -> bool:
    if len(want) != len(have):
        return False
    for w, h in zip(want, have):
        if isinstance(w, int):
            if not (isinstance(h, IntImm) and h.value == w):
                return False
        elif not structural_equal(w, h, map_free_vars=False):
            return False
    return True


def _same_attr(have: Any, want: Any) -> bool:
    if isinstance(want, (list, tuple)):
        return isinstance(have, (list, tuple)) and len(have) == len(want) \
            and all(_same_attr(h, w) for h, w in zip(have, want))
    if isinstance(have, (IntImm,)):
        have = have.value
    if isinstance(have, DataType) and isinstance(want, str):
        return str(have) == want
    return have == want


# --------------------------------------------------------------------------- rewriting


def get_var2val(func: rx.Function) -> dict:
    """Every variable bound in ``func`` mapped to its value (TVM's ``analysis.get_var2val``)."""
    return {b.var: b.value for b in walk(func) if isinstance(b, rx.VarBinding)}


def rewrite_call(pattern: DFPattern, rewriter: Callable[[Any, dict], Any],
                 func: rx.Function) -> rx.Function:
    """``func`` with every call that matches ``pattern`` replaced by ``rewriter(call, matches)``
    (``matches``: sub-pattern -> expression), repeated until nothing changes; then, as TVM
    does, trivial bindings are canonicalized and bindings left unused removed. (TVM 0.27 also
    eliminates common subexpressions there; tvms has no such pass yet.)

    >>> rewrite_call(is_op("relax.nn.relu")(wildcard()),
    ...              lambda call, m: relax.op.nn.gelu(call.args[0]), func)
    """
    from .passes import canonicalize_bindings, remove_unused_bindings

    for _ in range(100):  # each round rewrites what the last one produced; a bound stops cycles
        new = _CallRewriter(pattern, rewriter, get_var2val(func)).visit_expr(func)
        if new is func:
            break
        func = new
    return remove_unused_bindings(canonicalize_bindings(func))


class _CallRewriter(PyExprMutator):
    """Rewrites the calls that match, after their arguments (each round sees the function
    as the round before left it, through ``var2val``)."""

    def __init__(self, pattern: DFPattern, rewriter: Callable, var2val: dict):
        super().__init__()
        self.pattern, self.rewriter, self.var2val = pattern, rewriter, var2val

    def visit_call_(self, call: rx.Call) -> Any:
        call = self.visit_expr_post_order(call)
        if not isinstance(call, rx.Call):
            return call
        matches = self.pattern.extract_matched_expr(call, self.var2val)
        if matches is None:
            return call
        new = self.rewriter(call, matches)
        return call if new is None else new


__all__ = ["AndPattern", "AttrPattern", "CallPattern", "ConstantPattern", "DFPattern",
           "DataTypePattern", "DataflowVarPattern", "ExprPattern", "ExternFuncPattern",
           "GlobalVarPattern", "Matcher", "NotPattern", "OrPattern", "PrimArrPattern",
           "ShapePattern", "TupleGetItemPattern", "TuplePattern", "UnorderedTuplePattern",
           "VarPattern", "WildcardPattern", "get_var2val", "has_attr", "has_dtype",
           "is_call_dps_packed", "is_call_packed", "is_call_tir", "is_const", "is_dfv", "is_expr",
           "is_gv", "is_op", "is_shape", "is_tuple", "is_tuple_get_item", "reject",
           "rewrite_call", "wildcard"]
