"""Scope ids, TVM 0.27's tirx kernels: ``bx = T.cta_id([4])``, ``bx, by = T.cta_id([2, 3])``,
``tx = T.thread_id([128], dtype="uint32")``, ``lane = T.lane_id()`` (an extent the other ids give),
``cx, cy = T.cta_id_in_cluster([2, 1], preferred=[2, 2])``; a bare ``T.warp_id([4])`` defines an
unnamed id. Each is a ``ScopeIdDef`` over the rest of the body, printed flat (ir/scope_ids.py says
what they mean)."""
from __future__ import annotations

from typing import Any

from ...ir.expr import Var
from ...ir.stmt import SCOPE_ID_KINDS, ScopeIdDef
from .. import syntax as S
from .evaluator import _describe
from .rules import TakesRest, call_args, parses, prints

# kinds of one dimension, refused with more when read (as TVM's parser refuses them)
_ONE_DIMENSION = ("warpgroup_id", "warp_id", "warp_id_in_wg")


def _scope_id(kind: str):
    def read(b: Any, target: Any, call: S.Call, rest: list) -> Any:
        targets = None if target is None else target.elts if isinstance(target, S.TupleExpr) else [target]
        names = None if targets is None else [b.target_name(t) for t in targets]
        args, kwargs = call_args(b, call)
        dtype = b.dtype_of(kwargs.pop("dtype", "int32"), call)
        if dtype.name not in ("int32", "uint32"):
            raise b.error(call, f"a scope id is an int32 or a uint32, not {dtype}")
        preferred = kwargs.pop("preferred", None)
        if preferred is not None and kind != "cta_id_in_cluster":
            raise b.error(call, f"preferred= is a cluster's shape: T.cta_id_in_cluster only, not T.{kind}")
        if kwargs:
            raise b.error(call, f"unexpected argument {next(iter(kwargs))!r} of T.{kind}")
        if kind == "cta_id_in_pair" and args:
            raise b.error(call, "T.cta_id_in_pair() takes no extent (a pair is 2)")
        if len(args) > 1 or args and not isinstance(args[0], (list, tuple)):
            raise b.error(call, f"T.{kind} takes a list of extents, one a dimension: T.{kind}([4])")
        extents = tuple(b.int_expr(e, call) for e in args[0]) if args else None
        if extents is not None and not 1 <= len(extents) <= 3:
            raise b.error(call, f"T.{kind} has 1 to 3 dimensions, got {len(extents)}")
        if kind in _ONE_DIMENSION and extents is not None and len(extents) != 1:
            raise b.error(call, f"T.{kind} has one dimension, got {len(extents)}")
        count = len(extents) if extents is not None else 1
        if names is None and count != 1 or names is not None and len(names) != count:
            raise b.error(call, f"T.{kind} defines {count} id{'s' if count != 1 else ''}: name "
                                f"{'each' if count != 1 else 'it'} on the left of '='"
                                + (f", got {len(names)} name{'s' if len(names) != 1 else ''}" if names else ""))
        if preferred is not None:
            if not isinstance(preferred, (list, tuple)) or len(preferred) != count:
                raise b.error(call, f"preferred= gives one extent a dimension ({count}), got {_describe(preferred)}")
            preferred = tuple(b.int_expr(e, call) for e in preferred)
        ids = tuple(Var(name, dtype) for name in (names or ["v"]))
        span = b.assigned_span(call, target) if target is not None else b.span(call)
        return TakesRest(ScopeIdDef(ids, kind, extents, b.rest_body(rest, dict(zip(names or [], ids))),
                                    preferred, span=span))
    return read


for _kind in SCOPE_ID_KINDS:
    parses("assign", _kind)(_scope_id(_kind))
    parses("call", _kind)(lambda b, call, rest, _read=_scope_id(_kind): _read(b, None, call, rest))

_KIND_OF_SCOPES = {scopes: kind for kind, scopes in SCOPE_ID_KINDS.items()}


def _generic_scope_id(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    """``T.scope_id([4], "cta", "warp")``: the id of the scope ``cur`` within ``parent`` (printed
    by its name, ``T.warp_id([4])``)."""
    args = call.args
    scopes = tuple(b.ev(a) for a in args[1:3]) if len(args) == 3 else None
    kind = _KIND_OF_SCOPES.get(scopes) if scopes is not None else None
    if kind is None:
        raise b.error(call, f"T.scope_id takes extents, the enclosing scope and the scope counted, one of "
                            f"{', '.join(repr(p) + '/' + repr(c) for p, c in _KIND_OF_SCOPES)}")
    return _scope_id(kind)(b, target, S.Call(call.func, args[:1], call.kwargs).at(call, call), rest)


parses("assign", "scope_id")(_generic_scope_id)
parses("call", "scope_id")(lambda b, call, rest: _generic_scope_id(b, None, call, rest))


class ScopeIdPrinting:
    """Printing scope ids (mixed into the TIRPrinter)."""

    @prints(ScopeIdDef)
    def st_scope_id(self, s: ScopeIdDef, concise: bool, top: bool) -> None:
        args = []
        if s.extents is not None:
            args.append("[" + ", ".join(self.expr(e) for e in s.extents) + "]")
        if s.preferred is not None:
            args.append("preferred=[" + ", ".join(self.expr(e) for e in s.preferred) + "]")
        if s.ids[0].dtype.name != "int32":
            args.append(f'dtype="{s.ids[0].dtype}"')
        names = ", ".join(self.namer.define(v, v.name) for v in s.ids)
        self.emit(f"{names} = {self.tir(s.kind)}({', '.join(args)})")
        self.continue_body(s.body, top, flat=True)
