"""The parser core of TensorIR: a ``@T.prim_func``'s statements, dispatched by their form
(``T.x(...)``, ``x = T.x(...)``, ``with T.x(...):``, ``for ... in T.x(...)``) through the one
rule table (rules.py) to the construct modules, with explicit scopes.

Statements that TVM prints without a nested body (``x: T.int32 = v``, ``assert``,
``bx = T.launch_thread(...)``, ``B = T.decl_buffer(...)``) take the rest of the enclosing body
as their own body, exactly as TVM reads them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer
from ...ir.errors import ScriptError, Source, TVMSError
from ...ir.expr import PrimExpr, Var, const, is_const_int
from ...ir.stmt import Evaluate, Stmt, seq
from .. import syntax as S
from ..comments import add_below, carry, take
from ..dialect import CLASSIC, Dialect
from .attrs import AttrParsing
from . import exprs, layouts, ptx_calls, sugar  # noqa: F401  (register the T.* expression builtins)
from .blocks import BlockFrame, BlockParsing
from .buffers import BufferParsing
from .evaluator import Builtin, BufferMethod, BufferSlice, NewVar, ScopedEvaluator, _describe
from .functions import FunctionParsing
from .loops import LoopParsing
from .rules import PARSE, Declaration, Header, TakesRest
from . import scope_ids, tile_primitives  # noqa: F401  (their parse rules)
from .statements import StatementParsing
from .threads import ThreadParsing
from .views import ViewParsing


class TIRBuilder(ScopedEvaluator, FunctionParsing, StatementParsing, LoopParsing, BlockParsing,
                 BufferParsing, ViewParsing, ThreadParsing, AttrParsing):
    """Builds one PrimFunc from a ``def`` decorated with ``@T.prim_func``."""

    def __init__(self, source: Source, dialect: Dialect = CLASSIC, globals_: dict | None = None,
                 typevars: frozenset = frozenset()):
        super().__init__(source, dialect, globals_, typevars)
        self.blocks: list[BlockFrame] = []
        self.loop_doms: dict[Var, tuple[PrimExpr, PrimExpr]] = {}
        self.free_buffers: set = set()  # (ids of the buffers a ``B = T.Buffer(...)`` statement declared)
        self.opening_owner: Any = None  # the owner of the body being read while no statement is made yet

    def assigned_span(self, call: Any, target: Any):
        """The span of the call in ``target = call``, with the comments of the statement."""
        span = self.span(call)
        comments = self.source.comments.get((target.line, target.col)) if self.source.comments else None
        return replace(span, comments=comments) if comments is not None and span is not None else span

    # ---------------------------------------------------------------- bodies
    def body(self, stmts: list, owner: Any = None) -> Stmt:
        """The statements of a body; ``owner``: the block or function whose declarations
        (``T.reads``, ``T.func_attr``, ...) open it."""
        out: list[Stmt] = []
        i = 0
        while i < len(stmts):
            syn = stmts[i]
            rest = stmts[i + 1:]
            # (a statement that reads the rest of the body itself opens it as this one would)
            self.opening_owner = owner if not out else None
            result = self.stmt(syn, rest)
            if isinstance(result, TakesRest):
                out.append(result.stmt)
                break
            if result is None or isinstance(result, Declaration):
                if isinstance(result, Declaration) and rest:
                    carry(self.source, syn, rest[0])
                elif owner is not None and not out:  # its comments go on
                    carry(self.source, syn, owner, "inside")
                elif rest:
                    carry(self.source, syn, rest[0])
                else:  # the body's last line: below what came before, or on its no-op
                    left = take(self.source, syn)
                    if left is not None:
                        out.append(add_below(out.pop(), left) if out else
                                   Evaluate(const(0), span=replace(self.span(syn), comments=left)))
            else:
                out.append(result)
            i += 1
        if not out:
            return Evaluate(const(0))
        return seq(out)

    def rest_body(self, rest: list, names: dict | None = None) -> Stmt:
        return self.scoped(lambda: self.body(rest), names)

    def stmt(self, syn: Any, rest: list) -> Any:
        method = getattr(self, "stmt_" + type(syn).__name__, None)
        if method is None:
            raise self.error(syn, f"this statement ({type(syn).__name__}) is not allowed in TensorIR")
        outer, self.current = self.current, syn
        try:
            result = method(syn, rest)
        except ScriptError:
            raise
        except TVMSError as e:  # from the IR layer: give it this statement's position
            raise self.error(syn, str(e)) from None
        except (IndexError, KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as e:
            # Python's own evaluation of the script's values failed (1 / 0, a bad index, ...)
            raise self.error(syn, f"cannot evaluate this statement: {_python_error(e)}") from None
        finally:
            self.current = outer
        if self.blocks and result is not None and not isinstance(result, Header):
            self.blocks[-1].header_done = True
        return None if isinstance(result, Header) and not isinstance(result, Declaration) else result

    def stmt_Pass(self, syn: S.Pass, rest: list) -> Any:
        return None

    def stmt_Import(self, syn: Any, rest: list) -> Any:
        return None

    def stmt_ExprStmt(self, syn: S.ExprStmt, rest: list) -> Any:
        value = syn.value
        if isinstance(value, S.Constant) and isinstance(value.value, str):
            return None  # a docstring
        if isinstance(value, S.Call):
            func = self.ev(value.func)
            rule = PARSE["call"].get(func.path) if isinstance(func, Builtin) else None
            if rule is not None:
                return rule(self, value, rest)
        result = self.ev(value)
        if isinstance(result, PrimExpr):
            return Evaluate(result, span=self.span(syn))
        raise self.error(syn, f"this expression statement has no effect ({_describe(result)})")

    def stmt_AugAssign(self, syn: S.AugAssign, rest: list) -> Any:
        target = S.BinOp(syn.target, syn.op, syn.value).at(syn.target, syn.value)
        return self.stmt_Assign(S.Assign([syn.target], target).at(syn, syn), rest)

    def stmt_Assign(self, syn: S.Assign, rest: list) -> Any:
        if len(syn.targets) != 1:
            raise self.error(syn, "chained assignment is not supported in TensorIR")
        target = syn.targets[0]
        if isinstance(target, S.Subscript):
            return self.buffer_store(target, syn.value)
        value_syn = syn.value
        if (isinstance(target, S.TupleExpr) and isinstance(value_syn, S.TupleExpr)
                and len(target.elts) == len(value_syn.elts)):
            # ``a, b = 1, A[2]``: one assignment after the other, as TVM binds them
            each = [S.Assign([t], v).at(t, v) for t, v in zip(target.elts, value_syn.elts)]
            return TakesRest(self.body(each + list(rest), self.opening_owner))
        if isinstance(value_syn, S.Call):
            func = self.ev(value_syn.func)
            rule = PARSE["assign"].get(func.path) if isinstance(func, Builtin) else None
            if rule is not None:
                return rule(self, target, value_syn, rest)
            if isinstance(func, BufferMethod) and func.name == "view":
                return self.buffer_view(target, func, value_syn, rest)
            if isinstance(func, BufferMethod) and func.name == "local":
                return self.buffer_local(target, func, value_syn, rest)
            if isinstance(func, BufferMethod) and func.name == "permute":
                return self.buffer_permute(target, func, value_syn, rest)
        value = self.ev(value_syn)
        if isinstance(value, NewVar):
            name = self.target_name(target)
            sized = self.func.size_vars.get(name) if self.func is not None else None
            # ``n = T.int32()`` after a signature whose quoted size made n: that very variable
            if sized is not None and sized.dtype == value.dtype:
                self.define(name, sized)
                return Header()  # (printed with the signature's sizes, first in the function)
            var = Var(name, value.dtype)
            self.define(name, var)
            if self.func is not None:
                self.func.unbound.add(var)
            return Declaration()
        if isinstance(value, Buffer):  # an alias, B = A
            self.define(self.target_name(target), value)
            return Header()
        if isinstance(value, BufferSlice):
            value = self.slice_load(value, value_syn)
        if isinstance(value, (PrimExpr, int, float, bool)):
            name = self.target_name(target)
            known = self.lookup_local(name)
            if isinstance(known, Buffer) and (known.scalar or (
                    self.dialect is not CLASSIC and len(known.shape) == 1 and is_const_int(known.shape[0], 1))):
                return self.assign_scalar(known, value, value_syn, target)
            if known is not None:
                raise self.error(target, f"{name!r} is already defined; TensorIR variables cannot be "
                                 f"reassigned (store into a buffer instead)")
            expr = arith.to_expr(value)
            if self.dialect is not CLASSIC:  # TVM 0.27: a new name is a mutable scalar
                return self.declare_scalar(name, expr.dtype, expr, rest, syn)
            return self.let_stmt(name, expr.dtype, expr, rest, syn)
        raise self.error(value_syn, f"cannot assign {_describe(value)} to a name in TensorIR")

    def target_name(self, target: Any) -> str:
        if not isinstance(target, S.Name):
            raise self.error(target, "expected a single name on the left of '='")
        return target.id

    # ---------------------------------------------------------------- the forms with rules
    def stmt_For(self, syn: S.For, rest: list) -> Stmt:
        it = syn.iter
        if not isinstance(it, S.Call):
            raise self.error(it, "a TensorIR loop iterates over range(...), T.grid(...), T.serial(...), ...")
        func = self.ev(it.func)
        rule = PARSE["for"].get(func.path) if isinstance(func, Builtin) else None
        if rule is None:
            raise self.error(it.func, f"cannot loop over {_describe(func)}; use range, T.grid, "
                             f"T.serial, T.parallel, T.vectorized, T.unroll or T.thread_binding")
        return rule(self, syn, func, rest)

    def stmt_With(self, syn: S.With, rest: list) -> Any:
        item = syn.item
        if isinstance(item, S.Call):
            func = self.ev(item.func)
            rule = PARSE["with"].get(func.path) if isinstance(func, Builtin) else None
            if rule is not None:
                return rule(self, syn, item)
        raise self.error(item, "expected a TensorIR scope: T.block, T.init, T.launch_thread, T.attr, ...")

def _python_error(e: Exception) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
