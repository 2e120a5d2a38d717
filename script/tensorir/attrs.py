"""``T.attr(node, key, value)``: an ``AttrStmt`` (a scope, ``with T.attr(...):``, or for the
rest of the body); the thread launches among them print as ``T.launch_thread`` (threads.py)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir.expr import StringImm
from ...ir.stmt import AttrStmt, Stmt
from .. import syntax as S
from .rules import TakesRest, parses, prints
from .text import quote
from .threads import is_launch, launch_scope


class AttrParsing:
    """Reading ``T.attr`` (mixed into the TIRBuilder)."""

    @parses("with", "attr")
    def with_attr(self, syn: S.With, call: S.Call) -> Stmt:
        node, key, value = self.attr_args(call)
        return AttrStmt(node, key, value, self.scoped(lambda: self.body(syn.body)), span=self.span(call))

    def attr_args(self, call: S.Call) -> tuple:
        args = [self.ev(a) for a in call.args]
        if len(args) != 3 or not isinstance(args[1], str):
            raise self.error(call, "T.attr takes a node, a key string and a value")
        node, key, value = args
        if isinstance(value, (int, float, bool)) and not isinstance(value, str):
            value = arith.to_expr(value)
        if isinstance(value, str):
            value = StringImm(value)
        return node, key, value


@parses("call", "attr")
def _attr_stmt(b: Any, call: S.Call, rest: list) -> Any:
    node, key, value = b.attr_args(call)
    return TakesRest(AttrStmt(node, key, value, b.rest_body(rest), span=b.span(call)))


class AttrPrinting:
    """Printing ``AttrStmt`` (mixed into the TIRPrinter)."""

    @prints(AttrStmt)
    def st_attr(self, s: AttrStmt, concise: bool, top: bool) -> None:
        if is_launch(self, s):  # (one frame less on the deep path of concise scopes)
            rhs, define = launch_scope(self, s)
            self.scope(concise, top, None, rhs, s.body, define, alone_body=True)
            return
        node = s.node
        rhs = f"T.attr({self.value(node)}, {quote(s.attr_key)}, {self.value(s.value)})"
        if concise:
            self.emit(rhs)
            self.continue_body(s.body, top, alone=True)
        else:
            self.emit(f"with {rhs}:")
            self.nested(s.body)
