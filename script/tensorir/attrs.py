"""Attributes: ``T.attr(node, key, value)``, an ``AttrStmt`` (a scope, ``with T.attr(...):``, or
for the rest of the body; the thread launches among them print as ``T.launch_thread``, see
threads.py), and the attribute values and dicts of every construct (``T.func_attr``,
annotations, intrinsic attributes): frozen when read, with the keys in their canonical
spelling, and printed with the keys the dialect spells (``tir.noalias`` in the IR, ``tirx.noalias`` in TVM 0.27's text)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer
from ...ir.dtype import DataType
from ...ir.expr import PrimExpr, StringImm
from ...ir.module import MetadataRef, Target
from ...ir.node import FrozenDict, Node
from ...ir.stmt import AttrStmt, Stmt
from .. import syntax as S
from ..dialect import canonical_attr_key, dialect_attr_key
from .rules import TakesRest, parses, prints
from .text import format_float, quote
from .threads import is_launch, launch_scope


def norm_attrs(value: Any) -> FrozenDict:
    """An attribute dict as the IR stores it: keys in their canonical spelling, values frozen."""
    if not isinstance(value, dict):
        return value
    return FrozenDict({canonical_attr_key(k) if isinstance(k, str) else k: freeze_value(v)
                       for k, v in value.items()})


def freeze_value(value: Any) -> Any:
    """Attribute values as stored in the IR: dicts frozen, lists as tuples."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze_value(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze_value(v) for v in value)
    return value


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
        rhs = self.tir(f"attr({self.value(node)}, {quote(s.attr_key)}, {self.value(s.value)})")
        if concise:
            self.emit(rhs)
            self.continue_body(s.body, top, alone=True)
        else:
            self.emit(f"with {rhs}:")
            self.nested(s.body)

    def value(self, v: Any) -> str:
        """Attribute values: Python values, dicts, lists, targets and expressions."""
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, (int,)):
            return str(v)
        if isinstance(v, float):
            return format_float(v)
        if isinstance(v, str):
            return quote(v)
        if v is None:
            return "None"
        if isinstance(v, dict):
            return self.attr_dict(v)
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, MetadataRef):
            self.absent_metadata = True
            return f"metadata[{quote(v.key)}][{v.index}]"
        if isinstance(v, Target):
            return self.tir(f"target({self.attr_dict(v.config, sort=False)})")
        if isinstance(v, Buffer):
            return self.buffer(v)
        if isinstance(v, Node) and type(v) in self.expr_printers or isinstance(v, PrimExpr):
            return self.expr(v)
        if isinstance(v, DataType):
            return quote(str(v))
        raise TypeError(f"cannot print {type(v).__name__} {v!r}")

    def attr_dict(self, d: dict, sort: bool = True) -> str:
        items = [(dialect_attr_key(k, self.d) if isinstance(k, str) else k, v) for k, v in d.items()]
        if sort and all(isinstance(k, str) for k, _ in items):
            items.sort(key=lambda kv: kv[0])
        return "{" + ", ".join(f"{self.value(k)}: {self.value(v)}" for k, v in items) + "}"
