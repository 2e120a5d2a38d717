"""The syntax tree of TVMScript text: a small Python-like AST built straight from the LALR parse.

Lark calls ``SyntaxBuilder`` while it parses (no intermediate parse tree), so each rule of
``grammars/tvmscript.lark`` has a method of the same name here. Every node records where it
starts and ends, for error messages.
"""
from __future__ import annotations

import ast as _pyast
from typing import Any

from lark import Token, Transformer, v_args

from ..ir.operators import BINARY, COMPARISONS, PREFIX


class Syn:
    """A syntax node: ``line``/``col`` where it starts, ``end_line``/``end_col`` where it ends."""

    __slots__ = ("line", "col", "end_line", "end_col")
    line: int
    col: int
    end_line: int
    end_col: int

    def at(self, first: Any, last: Any = None) -> "Syn":
        """Take the start of ``first`` and the end of ``last`` (syntax nodes or tokens)."""
        if last is None:
            last = first
        if type(first) is Token:
            self.line, self.col = first.line, first.column
        else:
            self.line, self.col = first.line, first.col
        if type(last) is Token:
            self.end_line, self.end_col = last.end_line, last.end_column
        else:
            self.end_line, self.end_col = last.end_line, last.end_col
        return self

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({fields})"


def _node(name: str, fields: str) -> type:
    """A syntax node class with the given fields and a plain positional constructor."""
    names = tuple(fields.split())
    # Generated like dataclasses generate theirs: a straight-line __init__ is several times
    # faster than a loop of setattr calls, and the parser makes one node per construct.
    body = "".join(f"    self.{n} = {n}\n" for n in names) or "    pass\n"
    namespace: dict = {}
    exec(f"def __init__(self, {', '.join(names)}):\n{body}", namespace)  # noqa: S102
    return type(name, (Syn,), {"__slots__": names, "__init__": namespace["__init__"]})


# expressions
Name = _node("Name", "id")
Constant = _node("Constant", "value")
Attribute = _node("Attribute", "value attr")
Call = _node("Call", "func args kwargs")
Subscript = _node("Subscript", "value indices")
Slice = _node("Slice", "lower upper step")
BinOp = _node("BinOp", "left op right")
UnaryOp = _node("UnaryOp", "op operand")
BoolOp = _node("BoolOp", "op values")
NotOp = _node("NotOp", "operand")
Compare = _node("Compare", "left ops comparators")
IfExp = _node("IfExp", "test body orelse")
TupleExpr = _node("TupleExpr", "elts")
ListExpr = _node("ListExpr", "elts")
DictExpr = _node("DictExpr", "keys values")
Lambda = _node("Lambda", "params body")
Starred = _node("Starred", "value double")
# statements
ExprStmt = _node("ExprStmt", "value")
Assign = _node("Assign", "targets value")
AnnAssign = _node("AnnAssign", "target annotation value")
AugAssign = _node("AugAssign", "target op value")
Return = _node("Return", "value")
Pass = _node("Pass", "")
Break = _node("Break", "")
Continue = _node("Continue", "")
Assert = _node("Assert", "test msg")
Import = _node("Import", "module names")
If = _node("If", "test body orelse")
For = _node("For", "target iter body")
While = _node("While", "test body")
With = _node("With", "item target body")
FunctionDef = _node("FunctionDef", "name params returns body decorators")
ClassDef = _node("ClassDef", "name bases body decorators")
Param = _node("Param", "name annotation default")
Module = _node("Module", "body comments")  # comments: as TVMScriptIndenter records them


def _span_of(items: list) -> tuple[Any, Any]:
    present = [x for x in items if x is not None]
    return present[0], present[-1]


@v_args(inline=True)
class SyntaxBuilder(Transformer):
    """Builds syntax nodes while Lark parses; one method per grammar rule."""

    # ---- atoms
    def name(self, tok: Token) -> Syn:
        return Name(str(tok)).at(tok)

    def integer(self, tok: Token) -> Syn:
        try:
            return Constant(int(tok.replace("_", ""))).at(tok)
        except ValueError:  # over Python's limit on decimal digits (sys.get_int_max_str_digits)
            raise _syntax_error(tok, f"integer literal too long ({len(tok)} digits)") from None

    def radix_integer(self, tok: Token) -> Syn:  # (0x1F, 0o17, 0b101, as Python reads them)
        return Constant(int(tok, 0)).at(tok)

    def floating(self, tok: Token) -> Syn:
        return Constant(float(tok)).at(tok)

    def string(self, tok: Token) -> Token:
        return tok

    def strings(self, *toks: Token) -> Syn:
        value = "".join(_pyast.literal_eval(str(t)) for t in toks)
        return Constant(value).at(toks[0], toks[-1])

    def const_none(self, tok: Token) -> Syn:
        return Constant(None).at(tok)

    def const_true(self, tok: Token) -> Syn:
        return Constant(True).at(tok)

    def const_false(self, tok: Token) -> Syn:
        return Constant(False).at(tok)

    def empty_tuple(self, lpar: Token, rpar: Token) -> Syn:
        return TupleExpr([]).at(lpar, rpar)

    def paren_tuple(self, t: Syn) -> Syn:
        return t

    def exprlist(self, *elts: Any) -> Syn:
        elts = [e for e in elts if e is not None]
        return TupleExpr(elts).at(elts[0], elts[-1])

    def items(self, *elts: Any) -> list:
        return [e for e in elts if e is not None]

    def list(self, open_: Token, items: list | None, close: Token) -> Syn:
        return ListExpr(items or []).at(open_, close)

    def set(self, open_: Token, items: list, close: Token) -> Syn:
        raise _syntax_error(open_, "set literals are not TVMScript")

    def dict_item(self, k: Syn, v: Syn) -> tuple:
        return (k, v)

    def dict_items(self, *pairs: Any) -> list:
        return [p for p in pairs if p is not None]

    def dict(self, open_: Token, pairs: list | None, close: Token) -> Syn:
        pairs = pairs or []
        return DictExpr([k for k, _ in pairs], [v for _, v in pairs]).at(open_, close)

    # ---- operators
    def opchain(self, *items: Any) -> Syn:
        return _Climber(items).parse(0)

    def ternary(self, body: Syn, test: Syn, orelse: Syn) -> Syn:
        return IfExp(test, body, orelse).at(body, orelse)

    def lambda_params(self, *names: Token) -> list:
        return [n for n in names if n is not None]

    def lambdef(self, params: list | None, body: Syn) -> Syn:
        params = params or []
        return Lambda([str(p) for p in params], body).at(params[0] if params else body, body)

    # ---- postfix
    def call(self, func: Syn, arguments: list | None = None) -> Syn:
        args, kwargs = [], []
        for a in arguments or []:
            (kwargs.append(a) if isinstance(a, tuple) else args.append(a))
        last = (kwargs[-1][1] if kwargs else None) or (args[-1] if args else func)
        return Call(func, args, kwargs).at(func, last)

    def arguments(self, *args: Any) -> list:
        return [a for a in args if a is not None]

    def kwarg(self, name: Token, value: Syn) -> tuple:
        return (str(name), value)

    def star_arg(self, value: Syn) -> Syn:
        return Starred(value, False).at(value)

    def star_kwargs(self, value: Syn) -> Syn:
        return Starred(value, True).at(value)

    def getitem(self, value: Syn, indices: list) -> Syn:
        return Subscript(value, indices).at(value, indices[-1])

    def subscripts(self, *subs: Any) -> list:
        return [s for s in subs if s is not None]

    def slice(self, lower: Any, upper: Any, step: Any = None) -> Syn:
        node = Slice(lower, upper, step)
        present = [x for x in (lower, upper, step) if x is not None]
        return node.at(present[0], present[-1]) if present else _keyword_like(node)

    def getattr(self, value: Syn, attr: Token) -> Syn:
        return Attribute(value, str(attr)).at(value, attr)

    # ---- statements
    def expr_stmt(self, value: Syn) -> Syn:
        return ExprStmt(value).at(value)

    def assign(self, *parts: Syn) -> Syn:
        return Assign(list(parts[:-1]), parts[-1]).at(parts[0], parts[-1])

    def ann_assign(self, target: Syn, annotation: Syn, value: Syn | None = None) -> Syn:
        return AnnAssign(target, annotation, value).at(target, value or annotation)

    def aug_assign(self, target: Syn, op: Token, value: Syn) -> Syn:
        return AugAssign(target, str(op)[:-1], value).at(target, value)

    def return_stmt(self, kw: Token, value: Syn | None = None) -> Syn:
        return Return(value).at(kw, value or kw)

    def pass_stmt(self, kw: Token) -> Syn:
        return Pass().at(kw)

    def break_stmt(self, kw: Token) -> Syn:
        return Break().at(kw)

    def continue_stmt(self, kw: Token) -> Syn:
        return Continue().at(kw)

    def assert_stmt(self, test: Syn, msg: Syn | None) -> Syn:
        return Assert(test, msg).at(test, msg or test)

    def import_stmt(self, *parts: Any) -> Syn:
        return _keyword_like(Import(parts[0], parts[1:]))

    def dotted_name(self, *names: Token) -> str:
        return ".".join(names)

    def import_names(self, *names: Any) -> list:
        return list(names)

    def import_name(self, name: Token, alias: Token | None) -> tuple:
        return (str(name), str(alias) if alias else None)

    def suite(self, *stmts: Syn) -> list:
        return list(stmts)

    def if_stmt(self, test: Syn, body: list, *rest: Any) -> Syn:
        *elifs, orelse = rest
        # fold "elif" into a nested "if" in the else branch, as Python's own AST does
        for e_test, e_body in reversed(elifs):
            inner = If(e_test, e_body, orelse or []).at(e_test, (orelse or e_body)[-1])
            orelse = [inner]
        return If(test, body, orelse or []).at(test, (orelse or body)[-1])

    def elif_clause(self, test: Syn, body: list) -> tuple:
        return (test, body)

    def for_stmt(self, target: Syn, iter_: Syn, body: list) -> Syn:
        return For(target, iter_, body).at(target, body[-1])

    def while_stmt(self, test: Syn, body: list) -> Syn:
        return While(test, body).at(test, body[-1])

    def with_stmt(self, item: Syn, *rest: Any) -> Syn:
        # "as TARGET" is optional; Lark leaves no placeholder for an inlined optional rule
        body = rest[-1]
        target = rest[0] if len(rest) == 2 else None
        return With(item, target, body).at(item, body[-1])

    def param(self, name: Token, annotation: Syn | None, default: Syn | None) -> Syn:
        return Param(str(name), annotation, default).at(name, default or annotation or name)

    def params(self, *ps: Any) -> list:
        return [p for p in ps if p is not None]

    def funcdef(self, name: Token, params: list | None, returns: Syn | None, body: list) -> Syn:
        return FunctionDef(str(name), params or [], returns, body, []).at(name, body[-1])

    def classdef(self, name: Token, bases: list | None, body: list) -> Syn:
        return ClassDef(str(name), bases or [], body, []).at(name, body[-1])

    def decorator(self, expr: Syn) -> Syn:
        return expr

    def decorated(self, *parts: Syn) -> Syn:
        *decorators, definition = parts
        definition.decorators = list(decorators)
        return definition

    def start(self, *stmts: Syn) -> Syn:
        node = Module([s for s in stmts if isinstance(s, Syn)], [])
        node.line = node.col = node.end_line = node.end_col = 1
        return node


# Binding powers (left, right) and prefix powers, from the one operator table (Python's order:
# or < and < not < comparisons < | < ^ < & < shifts < + - < * / // % @ < unary - + ~ < **)
_COMPARISONS = COMPARISONS
_BINARY_BP = {op.symbol: op.binding_powers for op in BINARY}
_PREFIX_BP = {symbol: 2 * level - 1 for symbol, level in PREFIX.items()}


class _Climber:
    """Gives a flat ``[prefix...] operand (op [prefix...] operand)*`` sequence its tree."""

    __slots__ = ("items", "pos")

    def __init__(self, items: tuple):
        self.items = items
        self.pos = 0

    def parse(self, min_bp: int) -> Syn:
        items = self.items
        first = items[self.pos]
        self.pos += 1
        if isinstance(first, Token):  # a prefix operator
            operand = self.parse(_PREFIX_BP[str(first)])
            if first == "not":
                lhs = NotOp(operand).at(first, operand)
            else:
                lhs = UnaryOp(str(first), operand).at(first, operand)
        else:
            lhs = first
        chained = None  # the Compare (or BoolOp) this loop is extending
        while self.pos < len(items):
            op = str(items[self.pos])
            lbp, rbp = _BINARY_BP[op]
            if lbp < min_bp:
                break
            self.pos += 1
            rhs = self.parse(rbp)
            if op in _COMPARISONS:
                if isinstance(chained, Compare) and chained is lhs:
                    lhs.ops.append(op)
                    lhs.comparators.append(rhs)
                    lhs.end_line, lhs.end_col = rhs.end_line, rhs.end_col
                else:
                    lhs = chained = Compare(lhs, [op], [rhs]).at(lhs, rhs)
            elif op in ("and", "or"):
                if isinstance(chained, BoolOp) and chained is lhs and lhs.op == op:
                    lhs.values.append(rhs)
                    lhs.end_line, lhs.end_col = rhs.end_line, rhs.end_col
                else:
                    lhs = chained = BoolOp(op, [lhs, rhs]).at(lhs, rhs)
            else:
                lhs = BinOp(lhs, op, rhs).at(lhs, rhs)
        return lhs


def _keyword_like(node: Syn) -> Syn:
    # Anonymous tokens ("None", "pass", "()") are filtered out by Lark, so their exact place is
    # unknown here; the builder above fixes up positions from neighbours where it matters.
    node.line = node.col = node.end_line = node.end_col = 0
    return node


def _syntax_error(where: Syn, message: str) -> Exception:
    from .diagnostics import SyntaxProblem

    return SyntaxProblem(message, where)


def dotted(syn: Any) -> str | None:
    """``tvm.script.ir_module`` for an attribute chain of names, else None."""
    if isinstance(syn, Name):
        return syn.id
    if isinstance(syn, Attribute):
        base = dotted(syn.value)
        return f"{base}.{syn.attr}" if base else None
    return None
