"""Attributes: ``T.attr(node, key, value)``, an ``AttrStmt`` (a scope, ``with T.attr(...):``, or
for the rest of the body; the thread launches among them print as ``T.launch_thread``, see
threads.py), and the attribute values and dicts of every construct (``T.func_attr``,
annotations, intrinsic attributes): frozen when read, with the keys in their canonical
spelling, and printed with the keys the dialect spells (``tir.noalias`` in the IR, ``tirx.noalias`` in TVM 0.27's
text; a ``tir.`` key in TVM 0.27's text is another key: dialect.py)."""
from __future__ import annotations

from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer, BufferRegion
from ...ir.dtype import DataType
from ...ir.expr import PrimExpr, StringImm, const
from ...ir.index_map import IndexMap
from ...ir.module import MetadataRef, Target
from ...ir.node import FrozenDict, Node
from ...ir.stmt import AttrStmt, Stmt
from .. import syntax as S
from ..dialect import Dialect, canonical_attr_key, dialect_attr_key
from .rules import TakesRest, parses, prints
from .text import format_float, quote
from .threads import is_launch, launch_scope


def norm_attrs(value: Any, dialect: Dialect) -> FrozenDict:
    """An attribute dict of a text in ``dialect`` as the IR stores it: keys in their canonical
    spelling, values frozen."""
    if not isinstance(value, dict):
        return value
    return FrozenDict({canonical_attr_key(k, dialect) if isinstance(k, str) else k: freeze_value(v)
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
        return nest(self.attr_args(call), self.scoped(lambda: self.body(syn.body)), self.span(call))

    @parses("with", "hint")
    def with_hint(self, syn: S.With, call: S.Call) -> Stmt:
        return nest([self.hint_args(call)], self.scoped(lambda: self.body(syn.body)), self.span(call))

    def attr_args(self, call: S.Call) -> list[tuple]:
        """The (node, key, value) of ``T.attr(node, key, value)``; ``T.attr({key: value, ...})``
        is one attribute per key over the node 0, nested in order."""
        args = [self.ev(a) for a in call.args]
        if len(args) == 1 and isinstance(args[0], dict) and all(isinstance(k, str) for k in args[0]):
            return [(0, key, self.attr_value(value)) for key, value in args[0].items()]
        if len(args) != 3 or not isinstance(args[1], str):
            raise self.error(call, "T.attr takes a node, a key string and a value (or a dict of keys "
                             "and values)")
        node, key, value = args
        return [(node, key, self.attr_value(value))]

    def attr_value(self, value: Any) -> Any:
        if isinstance(value, (int, float, bool)) and not isinstance(value, str):
            return arith.to_expr(value)
        if isinstance(value, str):
            return StringImm(value)
        return value

    def hint_args(self, call: S.Call) -> tuple:
        """``T.hint("message", key=value, ...)``: an attribute ``tirx_hint`` over the dict (the
        message may be left out: it is then empty)."""
        args = [self.ev(a) for a in call.args]
        if len(args) > 1 or args and not isinstance(args[0], str):
            raise self.error(call, "T.hint takes a message string and keyword attributes")
        from .evaluator import BufferSlice  # (evaluator imports this module)

        node = {"message": args[0] if args else ""}
        for k, v in call.kwargs:
            value = self.ev(v)  # (a buffer slice, ``access=A[0:64]``, is the region it names)
            node[k] = value = self.to_region(value, v) if isinstance(value, BufferSlice) else value
            self.check_data(value, v)
        return FrozenDict({k: freeze_value(v) for k, v in node.items()}), HINT, const(1)


HINT = "tirx_hint"


def nest(attrs: list[tuple], body: Stmt, span: Any) -> Stmt:
    for node, key, value in reversed(attrs):
        body = AttrStmt(node, key, value, body, span=span)
    return body


@parses("call", "attr")
def _attr_stmt(b: Any, call: S.Call, rest: list) -> Any:
    return TakesRest(nest(b.attr_args(call), b.rest_body(rest), b.span(call)))


@parses("call", "device_entry")
def _device_entry(b: Any, call: S.Call, rest: list) -> Any:
    """``T.device_entry()``: where the device region of the function starts (an attribute over
    the node 0, which TVM 0.27 prints as ``T.attr({"tirx.device_entry": T.bool(True)})``)."""
    if call.args or call.kwargs:
        raise b.error(call, "T.device_entry takes no arguments")
    return TakesRest(nest([(0, "tirx.device_entry", const(True, "bool"))], b.rest_body(rest), b.span(call)))


@parses("call", "hint")
def _hint_stmt(b: Any, call: S.Call, rest: list) -> Any:
    return TakesRest(nest([b.hint_args(call)], b.rest_body(rest), b.span(call)))


def _is_dict_attr(s: Any) -> bool:
    """An attribute over the node 0: TVM 0.27 writes a run of them as one ``T.attr({...})``."""
    return isinstance(s, AttrStmt) and isinstance(s.node, int) and not isinstance(s.node, bool) and s.node == 0


class AttrPrinting:
    """Printing ``AttrStmt`` (mixed into the TIRPrinter)."""

    @prints(AttrStmt)
    def st_attr(self, s: AttrStmt, concise: bool, top: bool) -> None:
        if is_launch(s):  # (one frame less on the deep path of concise scopes)
            rhs, define = launch_scope(self, s)
            self.scope(concise, top, None, rhs, s.body, define, alone_body=True, frame=s)
            return
        node, body = s.node, s.body
        if isinstance(node, Buffer) and self.namer.get(node) is None:
            # a buffer an attribute names before its allocation (a tensor-core fragment's shape
            # and layout): declared here, as TVM 0.27 declares it, and allocated under that name
            self.emit(f"{self.define_buffer(node)} = {self.buffer_decl(node, 'Buffer', [], define_line=self.emit)}")
            concise = False  # (the attribute no longer has its frame alone)
        if s.attr_key == HINT and isinstance(node, dict) and isinstance(node.get("message"), str):
            parts = [quote(node["message"])] if node["message"] else []  # (an empty one is left out)
            parts += [f"{k}={self.value(v)}" for k, v in node.items() if k != "message"]
            rhs = self.tir(f"hint({', '.join(parts)})")
        elif self.d.name != "classic" and _is_dict_attr(s):
            items = [(s.attr_key, s.value)]
            # (an attribute of a statement of its own, with comments, keeps its own line)
            while _is_dict_attr(body) and (body.span == s.span or not (body.span and body.span.comments)):
                items.append((body.attr_key, body.value))
                body = body.body
            rhs = self.tir("attr({" + ", ".join(f"{quote(k)}: {self.value(v)}" for k, v in items) + "})")
        else:
            rhs = self.tir(f"attr({self.value(node)}, {quote(s.attr_key)}, {self.value(s.value)})")
        if concise:
            self.emit(rhs)
            self.continue_body(body, top, alone=True, frame=s)
        else:
            self.emit(f"with {rhs}:")
            self.nested(body, frame=s)

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
        if isinstance(v, IndexMap):
            return self.index_map(v)
        if isinstance(v, Target):
            return self.tir(f"target({self.attr_dict(v.config, sort=False)})")
        if isinstance(v, Buffer):
            return self.buffer(v)
        if isinstance(v, BufferRegion):
            return self.region(v)
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
