"""Plain statements: buffer stores ``A[i] = v``, scalar bindings (``x: T.int32 = v``, ``x = v``,
TVM 0.27's ``x: T.let[T.int32] = v``, ``with T.LetStmt(v) as x:``), ``assert`` / ``with
T.Assert(...)``, ``T.evaluate`` and bare calls, ``if``/``else``, ``while`` and ``return``.

A binding and an assert printed without a nested body take the rest of the enclosing body as
their own, as TVM reads them."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer, decl_buffer
from ...ir.dtype import DataType, float_literal_refusal, handle, is_dtype_name
from ...ir.errors import TVMSError
from ...ir.expr import BufferLoad, Call, FloatImm, IntImm, PointerType, PrimExpr, Var, const
from ...ir.op import get_op
from ...ir.stmt import (AllocBuffer, AssertStmt, BufferStore, DeclBuffer, Evaluate, IfThenElse, LetStmt, Stmt,
                         While, seq)
from .. import syntax as S
from .. import comments
from ..dialect import CLASSIC
from .evaluator import Builtin, BufferSlice, LetAnnotation, _describe
from .rules import Header, TakesRest, call_args, parses, prints
from .text import quote


def _converted(value: PrimExpr, dtype: DataType) -> PrimExpr:
    """A value stored into a buffer of another type, as TVM 0.27's parser stores it: cast to the
    buffer's type, a constant converted (``T.float32(1.5)`` into int32 is 1, as C truncates); a
    TVMSError where a constant has no value of the type."""
    if not isinstance(value, (IntImm, FloatImm)):
        return arith.cast(dtype, value)
    if dtype.is_float:
        refusal = float_literal_refusal(dtype, float(value.value))
        if refusal:
            raise TVMSError(refusal)
        return const(float(value.value), dtype)
    if not math.isfinite(value.value):
        raise TVMSError(f"{value.value} has no value in {dtype}")
    number = int(value.value)
    if not dtype.holds_int(number):
        raise TVMSError(f"{number} is out of the range of {dtype}")
    return const(number, dtype)


class StatementParsing:
    """Reading plain statements (mixed into the TIRBuilder)."""

    def stmt_Return(self, syn: S.Return, rest: list) -> Any:
        value = self.ev_expr(syn.value) if syn.value is not None else const(0)
        return Evaluate(Call(value.dtype, get_op("tir.ret"), (value,)), span=self.span(syn))

    # Python's ``break`` / ``continue`` read as TVM's parser reads them: T.break_loop() /
    # T.continue_loop() (which is how they print)
    def stmt_Break(self, syn: S.Break, rest: list) -> Any:
        return Evaluate(Call(DataType("void"), get_op("tir.break_loop"), ()), span=self.span(syn))

    def stmt_Continue(self, syn: S.Continue, rest: list) -> Any:
        return Evaluate(Call(DataType("void"), get_op("tir.continue_loop"), ()), span=self.span(syn))

    def stmt_AnnAssign(self, syn: S.AnnAssign, rest: list) -> Any:
        name = self.target_name(syn.target)
        ann = self.ev(syn.annotation)
        pointer = None
        if isinstance(ann, LetAnnotation):
            dtype, pointer = ann.dtype, ann.pointer
        elif isinstance(ann, PointerType) and syn.value is not None:  # x: T.handle("int64") = p
            dtype, pointer = handle, ann
        elif isinstance(ann, Builtin) and is_dtype_name(ann.path):
            dtype = DataType(ann.path)
        elif isinstance(ann, Buffer) and syn.value is None:
            self.define(name, ann)
            return Header()
        else:
            raise self.error(syn.annotation, f"expected a data type such as T.int32, got {_describe(ann)}")
        scalar = self.dialect is not CLASSIC and isinstance(ann, Builtin)
        if syn.value is None:
            if scalar:  # TVM 0.27: an uninitialised mutable scalar
                return self.declare_scalar(name, dtype, None, rest, syn)
            self.define(name, Var(name, dtype))
            return Header()
        value = self.ev_expr(syn.value)
        if isinstance(value, (IntImm,)) and value.dtype != dtype and isinstance(syn.value, (S.Constant, S.UnaryOp)):
            value = const(value.value, dtype)  # a literal takes the declared type
        if scalar:
            return self.declare_scalar(name, dtype, value, rest, syn)
        return self.let_stmt(name, dtype, value, rest, syn, pointer)

    def let_stmt(self, name: str, dtype: DataType, value: PrimExpr, rest: list, syn: Any,
                 pointer: PointerType | None = None, target: Any = None) -> Any:
        """``target``: the name of ``x = T.bind(...)``, where the statement's comments are."""
        if value.dtype != dtype:
            raise self.error(syn, f"{name!r} is declared {dtype} but the value is {value.dtype}")
        var = Var(name, dtype, pointer)
        span = self.assigned_span(syn, target) if target is not None else self.span(syn)
        return TakesRest(LetStmt(var, value, self.rest_body(rest, {name: var}), span=span))

    def declare_scalar(self, name: str, dtype: DataType, value: PrimExpr | None, rest: list,
                       syn: Any, scope: str = "local", target: Any = None) -> Any:
        """TVM 0.27's mutable scalar (``x: T.int32 = v``, or ``x = v`` for a new name): a
        one-element local buffer that later ``x = ...`` store into and ``x`` loads from.
        ``target``: the name of ``x = T.local_scalar(...)``, where the statement's comments are.
        The value is stored as into a buffer (``y: T.int8 = x + 1``: cast to int8)."""
        buf = replace(decl_buffer((1,), dtype, name, scope=self.scope_name(scope, syn)), scalar=True)
        store = self.store_into(BufferLoad(buf, (const(0),)), value, syn, syn) if value is not None else None
        body = self.rest_body(rest, {name: buf}) if rest else None
        if store is not None:
            body = seq([store, body]) if body is not None else store
        span = self.assigned_span(syn, target) if target is not None else self.span(syn)
        return TakesRest(AllocBuffer(buf, body if body is not None else Evaluate(const(0)), span=span))

    def assign_scalar(self, buf: Buffer, value: Any, value_syn: Any, syn: Any) -> Stmt:
        """``x = v`` into a mutable scalar (or any one-element buffer, as TVM 0.27 reads it)."""
        return self.store_into(BufferLoad(buf, (const(0),)), value, value_syn, syn)

    def buffer_store(self, target: S.Subscript, value_syn: Any) -> Stmt:
        dest = self.ev(target)
        if isinstance(dest, BufferSlice):
            dest = self.slice_load(dest, target)
        if not isinstance(dest, BufferLoad):
            raise self.error(target, f"only buffer elements can be assigned, not {_describe(dest)}")
        return self.store_into(dest, self.ev(value_syn), value_syn, target)

    def store_into(self, dest: BufferLoad, value: Any, value_syn: Any, target: Any) -> Stmt:
        if isinstance(value, BufferSlice):
            value = self.slice_load(value, value_syn)
        if isinstance(value, (int, float, bool)):
            refusal = dest.dtype.is_float and float_literal_refusal(dest.dtype, value)
            if refusal:
                raise self.error(value_syn, refusal)
            value = arith.to_expr(value, dest)
            if value.dtype != dest.dtype:
                value = const(value.value, dest.dtype.element_of)
        if not isinstance(value, PrimExpr):
            raise self.error(value_syn, f"expected an expression, got {_describe(value)}")
        if value.dtype.lanes != dest.dtype.lanes:  # (TVM refuses it too: no broadcast, no narrowing)
            where = f"buffer {dest.buffer.name!r} of {dest.buffer.dtype}"
            if dest.dtype != dest.buffer.dtype:
                where = f"{dest.dtype.lanes} lanes of {where}"
            raise self.error(value_syn, f"cannot store {_article(str(value.dtype))} {value.dtype} value into {where}")
        if value.dtype.element_of != dest.dtype.element_of:
            try:
                value = _converted(value, dest.dtype)
            except TVMSError as err:
                raise self.error(value_syn, f"cannot store into buffer {dest.buffer.name!r} of "
                                 f"{dest.buffer.dtype}: {err}") from None
        return BufferStore(dest.buffer, value, dest.indices, span=self.span(target))

    def stmt_If(self, syn: S.If, rest: list) -> Stmt:
        cond = self.ev_expr(syn.test)
        then = self.scoped(lambda: self.body(syn.body))
        orelse = self.scoped(lambda: self.body(syn.orelse)) if syn.orelse else None
        return IfThenElse(cond, then, orelse, span=self.span(syn))

    def stmt_While(self, syn: S.While, rest: list) -> Stmt:
        cond = self.ev_expr(syn.test)
        return While(cond, self.scoped(lambda: self.body(syn.body)), span=self.span(syn))

    def stmt_Assert(self, syn: S.Assert, rest: list) -> Any:
        cond = self.ev_expr(syn.test)
        kind, parts = "RuntimeError", ()
        if syn.msg is not None:
            msg = self.ev(syn.msg)
            if isinstance(msg, str):
                parts = (msg,)
            elif (isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], str)
                  and isinstance(msg[1], (list, tuple)) and all(isinstance(m, str) for m in msg[1])):
                kind, parts = msg[0], tuple(msg[1])
            else:
                raise self.error(syn.msg, "an assert message is a string, or (kind, [parts])")
        return TakesRest(AssertStmt(cond, parts, self.rest_body(rest), kind, span=self.span(syn)))

    @parses("with", "Assert")
    def with_assert(self, syn: S.With, call: S.Call) -> Stmt:
        args = [self.ev(a) for a in call.args]
        if len(args) != 2:
            raise self.error(call, "T.Assert takes a condition and a message")
        fake = S.Assert(call.args[0], call.args[1]).at(call, call)
        return self.stmt_Assert(fake, syn.body).stmt

    @parses("with", "LetStmt")
    def with_let(self, syn: S.With, call: S.Call) -> Stmt:
        if syn.target is None:
            raise self.error(call, "write 'with T.LetStmt(value) as name:'")
        name = self.target_name(syn.target)
        value = self.ev_expr(call.args[0])
        var = Var(name, value.dtype)
        return LetStmt(var, value, self.scoped(lambda: self.body(syn.body), {name: var}), span=self.span(call))


def _scalar_alloc(scope: str | None):
    """``x = T.local_scalar("int32")`` (``T.shared_scalar``, ``T.alloc_scalar(dtype, scope)``):
    a mutable scalar without a value yet."""
    def build(b: Any, target: Any, call: S.Call, rest: list) -> Any:
        args, kwargs = call_args(b, call)
        dtype = b.dtype_of(args[0] if args else kwargs.get("dtype", "float32"), call)
        where = scope or (args[1] if len(args) > 1 else kwargs.get("scope", "global"))
        return b.declare_scalar(b.target_name(target), dtype, None, rest, call, where, target)
    return build


parses("assign", "local_scalar")(_scalar_alloc("local"))
parses("assign", "shared_scalar")(_scalar_alloc("shared"))
parses("assign", "alloc_scalar")(_scalar_alloc(None))


@parses("assign", "bind", "Bind")
def _bind(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    """``x = T.bind(value)``: an immutable binding (TVM 0.27 prints ``x: T.let[T.int32] = value``)."""
    args, kwargs = call_args(b, call)
    if len(args) != 1:
        raise b.error(call, "T.bind takes the value to bind")
    value = b.ev_expr(call.args[0])
    return b.let_stmt(b.target_name(target), value.dtype, value, rest, call, target=target)


@parses("call", "static_assert")
def _static_assert(b: Any, call: S.Call, rest: list) -> Any:
    """``T.static_assert(cond, message)``: checked when the script is read; leaves no statement."""
    args, _ = call_args(b, call)
    if not 1 <= len(args) <= 2:
        raise b.error(call, "T.static_assert takes a condition and a message")
    cond = args[0].value if isinstance(args[0], IntImm) else args[0]
    if not isinstance(cond, (bool, int)):
        raise b.error(call, f"T.static_assert needs a condition known when the script is read, got "
                      f"{_describe(args[0])}")
    if not cond:
        raise b.error(call, f"static assertion failed{': ' + str(args[1]) if len(args) > 1 else ''}")
    return Header()


@parses("call", "buffer_store")
def _buffer_store_call(b: Any, call: S.Call, rest: list) -> Any:
    """``T.buffer_store(A, value, [i, j])``: the builder's spelling of ``A[i, j] = value``."""
    if len(call.args) != 3 or not isinstance(call.args[2], (S.ListExpr, S.TupleExpr)):
        raise b.error(call, "T.buffer_store takes a buffer, a value and a list of indices")
    target = S.Subscript(call.args[0], list(call.args[2].elts)).at(call, call)
    return b.buffer_store(target, call.args[1])


@parses("call", "Return")
def _return_call(b: Any, call: S.Call, rest: list) -> Any:
    return b.stmt_Return(S.Return(call.args[0] if call.args else None).at(call, call), rest)


@parses("with", "While")
def _with_while(b: Any, syn: S.With, call: S.Call) -> Any:
    """``with T.While(cond):``: the builder's spelling of a while loop."""
    if len(call.args) != 1:
        raise b.error(call, "T.While takes the loop condition")
    return b.stmt_While(S.While(call.args[0], syn.body).at(syn, syn), [])


@parses("with", "If")
def _with_if(b: Any, syn: S.With, call: S.Call) -> Any:
    """``with T.If(cond):`` holding ``with T.Then():`` and optionally ``with T.Else():``."""
    branches: dict = {}
    for part in syn.body:
        func = b.ev(part.item.func) if isinstance(part, S.With) and isinstance(part.item, S.Call) else None
        kind = func.path if isinstance(func, Builtin) else None
        if kind not in ("Then", "Else") or kind in branches:
            raise b.error(part, "the body of 'with T.If(...)' is one 'with T.Then():' and at most one "
                          "'with T.Else():'")
        branches[kind] = part.body
        if part.body:  # (the branch's own line makes no statement: its comments open the branch)
            comments.carry(b.source, part, part.body[0])
    if "Then" not in branches or len(call.args) != 1:
        raise b.error(call, "write 'with T.If(cond):' around 'with T.Then():' (and 'with T.Else():')")
    return b.stmt_If(S.If(call.args[0], branches["Then"], branches.get("Else", [])).at(syn, syn), [])


@parses("call", "evaluate")
def _evaluate(b: Any, call: S.Call, rest: list) -> Any:
    return Evaluate(b.ev_expr(call.args[0]), span=b.span(call))


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" or word.startswith(("int", "uint")) else "a"


class StatementPrinting:
    """Printing plain statements (mixed into the TIRPrinter)."""

    @prints(BufferStore)
    def st_store(self, s: BufferStore, concise: bool, top: bool) -> None:
        if self.prints_as_scalar(s.buffer, s.indices):
            self.emit(f"{self.buffer(s.buffer)} = {self.expr(s.value)}")
            return
        self.emit(f"{self.buffer(s.buffer)}[{self.indices(s.indices)}] = {self.expr(s.value)}")

    @prints(Evaluate)
    def st_evaluate(self, s: Evaluate, concise: bool, top: bool) -> None:
        if self.d.name != "classic" and isinstance(s.value, Call) and s.value.op is get_op("tir.ret"):
            self.emit(f"return {self.expr(s.value.args[0])}")  # TVM 0.27's Return statement
        elif isinstance(s.value, Call):
            self.emit(self.expr(s.value))
        else:
            self.emit(f"T.evaluate({self.expr(s.value)})")

    @prints(IfThenElse)
    def st_if(self, s: IfThenElse, concise: bool, top: bool) -> None:
        self.emit(f"if {self.expr(s.condition)}:")
        self.nested(s.then_case, frame=s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.nested(s.else_case, frame=s.else_case)

    @prints(While)
    def st_while(self, s: While, concise: bool, top: bool) -> None:
        self.emit(f"while {self.expr(s.condition)}:")
        self.nested(s.body, frame=s)

    @prints(LetStmt)
    def st_let(self, s: LetStmt, concise: bool, top: bool) -> None:
        value = self.expr(s.value)
        decl = s.body
        if concise and isinstance(decl, DeclBuffer) and decl.buffer.data is s.var and self.d.name != "classic" \
                and s.var.name == decl.buffer.name:
            # TVM 0.27: B = T.decl_buffer(..., data=<the pointer's value>), which reads as a let of
            # a pointer named as the buffer (a pointer let under its own name prints as written)
            rhs = self.buffer_decl(decl.buffer, "decl_buffer", [], data=value)
            self.emit(f"{self.define_buffer(decl.buffer)} = {rhs}")
            self.continue_body(decl.body, top)
            return
        if concise:
            name = self.namer.define(s.var, s.var.name)
            ann = s.var.type_annotation
            kind = self.type_doc(ann) if isinstance(ann, PointerType) else f"T.{s.var.dtype}"
            self.emit(f"{name}: {kind if self.d.name == 'classic' else f'T.let[{kind}]'} = {value}")
            self.continue_body(s.body, top, flat=True)
        else:
            self.scope(False, top, None, f"T.LetStmt({value})", s.body,
                       lambda: self.namer.define(s.var, s.var.name))

    @prints(AssertStmt)
    def st_assert(self, s: AssertStmt, concise: bool, top: bool) -> None:
        if s.error_kind == "RuntimeError" and len(s.message) == 1 and self.d.name == "classic":
            msg = quote(s.message[0])
        else:
            msg = f"({quote(s.error_kind)}, [{', '.join(quote(m) for m in s.message)}])"
        if concise:
            self.emit(f"assert {self.expr(s.condition)}, {msg}")
            self.continue_body(s.body, top, flat=True)
        else:
            self.emit(f"with T.Assert({self.expr(s.condition)}, {msg}):")
            self.nested(s.body)
