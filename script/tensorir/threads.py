"""Threads: ``T.launch_thread`` (``with ... as tx:``, or ``tx = T.launch_thread(...)`` for the
rest of the body), an ``AttrStmt`` with the key ``thread_extent`` (``virtual_thread`` for a
``vthread`` tag) over the thread's IterVar. (``T.thread_binding`` loops are in loops.py.)"""
from __future__ import annotations

from typing import Any, Callable

from ...ir.expr import THREAD_INDEX, IterVar, Range, Var, const
from ...ir.stmt import AttrStmt, Stmt
from .. import syntax as S
from .rules import TakesRest, parses
from .text import quote


class ThreadParsing:
    """Reading thread launches (mixed into the TIRBuilder)."""

    @parses("with", "launch_thread")
    def with_launch_thread(self, syn: S.With, call: S.Call) -> Stmt:
        if syn.target is None:
            raise self.error(call, "write 'with T.launch_thread(...) as name:'")
        name = self.target_name(syn.target)
        return self.launch_thread(name, call, lambda names: self.scoped(lambda: self.body(syn.body), names))

    def launch_thread(self, name: str, call: S.Call, build_body: Callable, span: Any = None) -> Stmt:
        args = [self.ev(a) for a in call.args]
        if len(args) != 2 or not isinstance(args[0], str):
            raise self.error(call, "T.launch_thread takes a thread tag such as \"threadIdx.x\" and an extent")
        tag, extent = args[0], self.int_expr(args[1], call)
        var = Var(name, extent.dtype)
        iv = IterVar(Range(const(0, extent.dtype), extent), var, THREAD_INDEX, tag)
        key = "virtual_thread" if tag.startswith("vthread") else "thread_extent"
        return AttrStmt(iv, key, extent, build_body({name: var}), span=span or self.span(call))


@parses("assign", "launch_thread")
def _launch_thread_assign(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    return TakesRest(b.launch_thread(name, call, lambda names: b.rest_body(rest, names),
                                      b.assigned_span(call, target)))


def is_launch(p: Any, s: AttrStmt) -> bool:
    """Whether an AttrStmt prints as ``T.launch_thread``: a thread's extent over a thread
    variable not defined yet."""
    return (s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, IterVar)
            and p.namer.get(s.node.var) is None)


def launch_scope(p: Any, s: AttrStmt) -> tuple[str, Callable[[], str]]:
    """The ``T.launch_thread(...)`` call of a launch, and what defines its thread variable."""
    node = s.node
    rhs = f"T.launch_thread({quote(node.thread_tag)}, {p.expr(s.value)})"
    return rhs, lambda: p.namer.define(node.var, node.var.name)
