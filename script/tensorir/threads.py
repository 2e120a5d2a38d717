"""Threads: ``T.launch_thread`` (``with ... as tx:``, or ``tx = T.launch_thread(...)`` for the
rest of the body), an ``AttrStmt`` with the key ``thread_extent`` (``virtual_thread`` for a
``vthread`` tag) over the thread's IterVar; a variable that several launches share is declared
by ``tx = T.env_thread("threadIdx.x")`` and launched as ``T.launch_thread(tx, 32)``.
(``T.thread_binding`` loops are in loops.py.)"""
from __future__ import annotations

from typing import Any, Callable

from ...ir.dtype import DataType
from ...ir.expr import THREAD_INDEX, IterVar, Range, Var, const
from ...ir.stmt import AttrStmt, Stmt
from .. import syntax as S
from .rules import Header, TakesRest, call_args, parses
from .text import quote


class ThreadParsing:
    """Reading thread launches (mixed into the TIRBuilder)."""

    @parses("with", "launch_thread")
    def with_launch_thread(self, syn: S.With, call: S.Call) -> Stmt:
        name = self.target_name(syn.target) if syn.target is not None else None
        return self.launch_thread(name, call, lambda names: self.scoped(lambda: self.body(syn.body), names))

    def launch_thread(self, name: str | None, call: S.Call, build_body: Callable, span: Any = None) -> Stmt:
        """``T.launch_thread("threadIdx.x", 32)`` (a new thread variable ``name``), or
        ``T.launch_thread(tx, 32)`` of a variable that ``T.env_thread`` declared."""
        args = [self.ev(a) for a in call.args]
        declared = self.func.env_threads.get(args[0]) if args and isinstance(args[0], Var) and self.func else None
        if len(args) != 2 or not (isinstance(args[0], str) or declared is not None):
            raise self.error(call, "T.launch_thread takes a thread tag such as \"threadIdx.x\" (or a "
                             "variable of T.env_thread) and an extent")
        extent = self.int_expr(args[1], call)
        if declared is not None:
            var, tag, names = args[0], declared, {}
        else:
            if name is None:
                raise self.error(call, "write 'with T.launch_thread(...) as name:'")
            var, tag = Var(name, extent.dtype), args[0]
            names = {name: var}
        iv = IterVar(Range(const(0, extent.dtype), extent), var, THREAD_INDEX, tag)
        key = "virtual_thread" if tag.startswith("vthread") else "thread_extent"
        return AttrStmt(iv, key, extent, build_body(names), span=span or self.span(call))


@parses("assign", "launch_thread")
def _launch_thread_assign(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    return TakesRest(b.launch_thread(name, call, lambda names: b.rest_body(rest, names),
                                      b.assigned_span(call, target)))


@parses("assign", "env_thread")
def _env_thread(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    """``tx = T.env_thread("threadIdx.x")``: a thread variable that later launches use."""
    name = b.target_name(target)
    args, _ = call_args(b, call)
    if len(args) != 1 or not isinstance(args[0], str) or b.func is None:
        raise b.error(call, "T.env_thread takes a thread tag such as \"threadIdx.x\" (in a PrimFunc)")
    var = Var(name, DataType("int32"))
    b.func.env_threads[var] = args[0]
    b.define(name, var)
    return Header()


@parses("call", "launch_thread")
def _launch_thread_call(b: Any, call: S.Call, rest: list) -> Any:
    return TakesRest(b.launch_thread(None, call, lambda names: b.rest_body(rest, names)))


def is_launch(s: Any) -> bool:
    """Whether a statement is a thread launch (printed ``T.launch_thread``): a thread's extent."""
    return (isinstance(s, AttrStmt) and s.attr_key in ("thread_extent", "virtual_thread")
            and isinstance(s.node, IterVar))


def launch_scope(p: Any, s: AttrStmt) -> tuple[str, Callable[[], str] | None]:
    """The ``T.launch_thread(...)`` call of a launch, and what defines its thread variable."""
    node = s.node
    extent = p.expr(s.value)
    if p.namer.get(node.var) is None and id(node.var) in p.relaunched:
        # declared once where the function starts, as TVM's T.env_thread, then launched by name
        name = p.namer.define(node.var, node.var.name, p.func_frame)
        p.definitions_of(node.var).append(f"{name} = {p.tir('env_thread')}({quote(node.thread_tag)})")
    if p.namer.get(node.var) is not None:
        return f"T.launch_thread({p.var(node.var)}, {extent})", None
    rhs = f"T.launch_thread({quote(node.thread_tag)}, {extent})"
    return rhs, lambda: p.namer.define(node.var, node.var.name)
