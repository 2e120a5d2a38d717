"""TVM 0.27's tile primitives in the script: ``T.cta.copy(A_smem[0:64], A[0:64])``,
``T.tile.sum(B[0:128, 0:4], A[0:128, 0:32, 0:4, 0:32], [1, 3], False, workspace={"w": W})``,
``T.tile.select(B[0:10, 0:10], A[0:10, 0:10], T.float32(1.0), lambda i, j: i < j)``.

Reading binds the arguments to the parameters of the op (ir/tile_primitive.py's table, TVM's
builder functions: positional or by name, the defaults filled in) and stores them as TVM does;
``workspace=`` and ``dispatch=`` are fields of their own, every other keyword an option. Printing
writes what TVM 0.27 prints: the stored arguments (less trailing Nones, less a source that is the
destination), the workspace, the dispatch, then the options by name. The ops a composed primitive
applies print as TVM prints them, ``I.Op("tirx.tile.add")``, and read back so.

A region of one element prints as TVM prints it, as that element (``C[0:1]`` as ``C[0]``). Read
back, an element where a parameter takes only a region is that region again; where it takes a
region or a scalar (an operand such as ``add``'s ``src1``), it stays the scalar, the element's
value: such a call does not read back as it was (nor does it in TVM). ``T.tile.exp(x)``,
``T.tile.max(x, y)``, ``T.tile.cast(x, "float16")`` and the like on expressions are those
expressions, as TVM's builder makes them (``_expression_form``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import arith
from ...ir.buffer import Buffer, BufferRegion
from ...ir.dtype import DataType
from ...ir.expr import BufferLoad, FloatImm, Op, PrimExpr, Var
from ...ir.node import EMPTY, FrozenDict
from ...ir.stmt import Evaluate
from ...ir.op import get_op
from ...ir.tile_primitive import (OP_PREFIX, OPS, PREFIX_OF_SCOPE, REQUIRED, SCOPE_OF_PREFIX, STORED_ORDER,
                                  LambdaExpr, Param, TilePrimitiveCall, printed_args)
from .. import syntax as S
from ..diagnostics import did_you_mean
from .arguments import bind_arguments
from .attrs import freeze_value
from .evaluator import Builtin, BufferSlice, _describe
from .rules import EXPR_BUILTINS, GLOBAL_NAMES, Namespace, ScriptFunction, parses, prints
from .text import quote

_REGION_LIKE = (Buffer, BufferSlice, BufferRegion)


def _read(prefix: str, op: str):
    scope = SCOPE_OF_PREFIX[prefix]

    def read(b: Any, call: S.Call, rest: list) -> TilePrimitiveCall:
        name = f"T.{prefix}.{op}"
        if any(isinstance(a, S.Starred) for a in call.args):
            raise b.error(call, "star arguments are not supported in TVMScript")
        values = [_evaluate(b, a, name) for a in call.args]
        options = {k: _evaluate(b, v, name) for k, v in call.kwargs}
        expression = _expression_form(b, call, prefix, op, values, options)
        if expression is not None:  # (a statement of it is T.evaluate of it, as in TVM)
            return Evaluate(expression, span=b.span(call))
        if "scope" in options:
            raise b.error(call, f"{name} runs at the scope its prefix names ({scope}); it takes no scope=")
        args = _bind(b, call, name, op, values, options)
        workspace, dispatch, config = _options(b, call, name, options)
        return TilePrimitiveCall(op, args, scope, workspace, dispatch, config, span=b.span(call))
    return read


def _expression_form(b: Any, call: Any, prefix: str, op: str, values: list, options: dict) -> PrimExpr | None:
    """What TVM's builder makes of ``T.tile.exp(x)``, ``T.tile.max(x, y)``, ``T.tile.cast(x,
    "float16")`` (or ``dtype="float16"``) on expressions, not buffers: the expression ``T.exp(x)``,
    ``T.max(x, y)``, ``T.Cast("float16", x)``; None for a tile primitive. (TVM's other scopes,
    ``T.cta.max(x, y)``, refuse expressions. TVM takes the expression wherever the first operand
    is one, dropping the arguments after it; tvms only for these exact forms, and reads
    ``T.tile.exp(C[0], C[0])``, a one-element region as TVM prints it, as the tile primitive.)"""
    is_expr = lambda v: isinstance(v, (PrimExpr, int, float)) and not isinstance(v, bool)  # noqa: E731
    if prefix != "tile" or not values or not all(is_expr(v) for v in values[:1 if op == "cast" else 2]):
        return None
    if op in ("exp", "exp2", "log2", "sqrt") and len(values) == 1 and not options \
            or op in ("max", "min") and len(values) == 2 and not options:
        return b.call_builtin(Builtin(op), values, {}, call)
    dtype = (values[1] if len(values) == 2 and not options else
             options["dtype"] if len(values) == 1 and set(options) == {"dtype"} else None)
    if op == "cast" and isinstance(dtype, str):
        return b.call_builtin(Builtin("Cast"), [dtype, values[0]], {}, call)
    return None


def _tile_expression(op: str) -> Any:
    """The reading of ``T.tile.<op>(...)`` inside an expression: its expression form, or an error."""

    def read(b: Any, args: list, kwargs: dict, syn: Any) -> PrimExpr:
        expression = _expression_form(b, syn, "tile", op, args, kwargs)
        if expression is None:
            raise b.error(syn, f"T.tile.{op}(...) cannot be used in an expression")
        return expression
    return read


def _bind(b: Any, call: Any, name: str, op: str, values: list, options: dict) -> tuple:
    """The arguments as TVM stores them, from the positional ``values`` and the ``options``
    that name a parameter (taken out of ``options``), the defaults filled in."""
    params = _layout(op, values)
    if len(values) > len(params):
        raise b.error(call, f"{name} takes at most {len(params)} arguments "
                            f"({', '.join(p.name for p in params)}), got {len(values)}")
    bound = bind_arguments(name, [p.name for p in params], values, options, lambda message: b.error(call, message))
    stored = {}
    for p in params:
        if p.name in bound and not (bound[p.name] is None and p.default == "dst"):
            value = bound[p.name]
        elif p.default is REQUIRED:
            raise b.error(call, f"{name} needs its argument {p.name!r} "
                                f"({', '.join(q.name for q in params if q.default is REQUIRED)} are required)")
        else:
            value = stored[params[0].name] if p.default == "dst" else p.default
        stored[p.name] = _convert(b, call, name, p, value)
    if op == "gemm_async" and (stored.get("SFA") is None) != (stored.get("SFB") is None):
        raise b.error(call, f"{name}'s scale factors SFA and SFB are given together (a block-scaled MMA) or not at all")
    if op == "gemm_async" and stored.get("SFA") is None:  # (stored without them: 6 arguments)
        stored.pop("SFA", None), stored.pop("SFB", None)
    return tuple(stored[n] for n in STORED_ORDER.get(op, stored))


def _options(b: Any, call: Any, name: str, options: dict) -> tuple:
    """(workspace, dispatch, the other options) of a call's keywords."""
    workspace = options.pop("workspace", None) or EMPTY
    if not isinstance(workspace, dict) or not all(isinstance(k, str) and isinstance(v, Buffer)
                                                   for k, v in workspace.items()):
        raise b.error(call, f"{name}'s workspace= is a dict of names to buffers, not {_describe(workspace)}")
    dispatch = options.pop("dispatch", None)
    if dispatch is not None and not isinstance(dispatch, str):
        raise b.error(call, f"{name}'s dispatch= names a variant (a string), not {_describe(dispatch)}")
    config = {}
    for key, value in options.items():
        if isinstance(value, LambdaExpr):
            raise b.error(call, f"{name}'s option {key}= cannot be a lambda (TVM prints it as metadata)")
        value = _option(b, value, call)
        b.check_data(value, call)
        config[key] = freeze_value(value)
    return FrozenDict(workspace), dispatch, FrozenDict(config)


def _layout(op: str, values: list) -> tuple[Param, ...]:
    """The parameters positional arguments bind to: TVM's function's, or the order TVM prints
    (the stored one), which a call of an op whose orders differ shows by its arguments."""
    params = OPS[op]
    if op == "reduce_negate" and len(values) > 2 and not isinstance(values[2], (str, Op)):
        return tuple(next(p for p in params if p.name == n) for n in STORED_ORDER[op])
    if op == "gemm_async" and len(values) > 3 and values[3] is not None and not isinstance(values[3], _REGION_LIKE):
        return tuple(p for p in params if p.name not in ("SFA", "SFB"))  # (no scale factors: 6 arguments)
    return params


def _evaluate(b: Any, syn: Any, name: str) -> Any:
    """An argument's value; a lambda is a predicate over int32 indices (TVM's LambdaExpr)."""
    if not isinstance(syn, S.Lambda):
        return b.ev(syn)
    params = tuple(Var(p, DataType("int32")) for p in syn.params)
    body = b.scoped(lambda: b.ev(syn.body), {v.name: v for v in params})
    if not isinstance(body, (PrimExpr, int, float, bool)):
        raise b.error(syn.body, f"the lambda of {name} gives an expression, not {_describe(body)}")
    return LambdaExpr(params, arith.to_expr(body), span=b.span(syn))


def _scalar(value: Any) -> Any:
    """A scalar as TVM's builder stores it: a Python float as a float32 constant, a Python bool
    kept (it prints ``True``, where ``T.bool(True)`` is an expression)."""
    if isinstance(value, bool) or value is None or isinstance(value, PrimExpr):
        return value
    if isinstance(value, float):
        return FloatImm(DataType("float32"), value)
    if isinstance(value, int):
        return arith.to_expr(value)
    return _NOT_SCALAR


_NOT_SCALAR = object()


def _convert(b: Any, call: Any, name: str, p: Param, value: Any) -> Any:
    what = f"{name}'s {p.name}"
    if value is None and p.default is None:
        return None
    if p.kind in ("region", "operand") and isinstance(value, _REGION_LIKE) or p.kind == "region" and \
            isinstance(value, BufferLoad):  # (TVM prints a region of one element A[0:1] as A[0])
        return value if isinstance(value, BufferRegion) else b.to_region(value, call)
    if p.kind == "region":
        raise b.error(call, f"{what} is a buffer region such as A[0:16], not {_describe(value)}")
    if p.kind == "axes":
        items = value if isinstance(value, (list, tuple)) else [value]
        axes = tuple(_scalar(v) for v in items)
        if any(a is _NOT_SCALAR or isinstance(a, bool) or a is None for a in axes):
            raise b.error(call, f"{what} is an axis or a list of axes, not {_describe(value)}")
        return axes
    if p.kind == "op":
        if isinstance(value, str) and value in OPS:
            return get_op(OP_PREFIX + value)
        if isinstance(value, Op) and value.name.startswith(OP_PREFIX) and value.name[len(OP_PREFIX):] in OPS:
            return value
        raise b.error(call, f"{what} names a tile op such as \"add\", not {_describe(value)}"
                            + (did_you_mean(value, list(OPS)) if isinstance(value, str) else ""))
    if p.kind == "lambda":
        if not isinstance(value, LambdaExpr):
            raise b.error(call, f"{what} is a lambda of the destination's indices, not {_describe(value)}")
        return value
    scalar = _scalar(value)
    if scalar is _NOT_SCALAR or scalar is None:
        raise b.error(call, f"{what} is {'a buffer region or ' if p.kind == 'operand' else ''}a scalar, "
                            f"not {_describe(value)}")
    return scalar


def _option(b: Any, value: Any, call: Any) -> Any:
    """An option's value as TVM keeps it (a Python number stays one; a slice is its region)."""
    if isinstance(value, BufferSlice):
        return b.to_region(value, call)
    if isinstance(value, (list, tuple)):
        return [_option(b, v, call) for v in value]
    if isinstance(value, dict):
        return {k: _option(b, v, call) for k, v in value.items()}
    return value


for _prefix in SCOPE_OF_PREFIX:
    for _op in OPS:
        parses("call", f"{_prefix}.{_op}")(_read(_prefix, _op))
for _op in ("exp", "exp2", "log2", "sqrt", "max", "min", "cast"):
    EXPR_BUILTINS[f"tile.{_op}"] = _tile_expression(_op)


@dataclass(frozen=True)
class _IRNamespace(Namespace):
    """``I`` inside a function: ``I.Op("tirx.tile.add")``, how TVM prints a composed tile
    primitive's ops."""

    description = "the namespace I"

    def attribute(self, ev: Any, name: str, syn: Any) -> Any:
        if name != "Op":
            raise ev.error(syn, f"'I.{name}' has no meaning inside a TensorIR function (I.Op names a tile op)")
        return _OpByName()


@dataclass(frozen=True)
class _OpByName(ScriptFunction):
    description = "I.Op"

    def call(self, ev: Any, args: list, kwargs: dict, syn: Any) -> Op:
        if len(args) != 1 or kwargs or not isinstance(args[0], str):
            raise ev.error(syn, "I.Op takes an operator's name, such as \"tirx.tile.add\"")
        return get_op(args[0])


GLOBAL_NAMES.setdefault("I", _IRNamespace())


class TilePrimitivePrinting:
    """Printing tile primitives (mixed into the TIRPrinter)."""

    @prints(TilePrimitiveCall)
    def st_tile_primitive(self, s: TilePrimitiveCall, concise: bool, top: bool) -> None:
        parts = [self.tile_arg(a) for a in printed_args(s)]
        if s.workspace:
            parts.append("workspace={" + ", ".join(f"{quote(k)}: {self.buffer(s.workspace[k])}"
                                                   for k in sorted(s.workspace)) + "}")
        if s.dispatch is not None:
            parts.append(f"dispatch={quote(s.dispatch)}")
        parts += [f"{k}={self.value(s.config[k])}" for k in sorted(s.config)]
        self.emit(self.tir(f"{PREFIX_OF_SCOPE[s.scope]}.{s.op}({', '.join(parts)})"))

    def tile_arg(self, a: Any) -> str:
        if isinstance(a, Op):
            self.uses_ir_namespace = True
            return f"I.Op({quote(a.name)})"
        if isinstance(a, LambdaExpr):
            self.namer.push()
            try:
                params = ", ".join(self.namer.define(v, v.name) for v in a.params)
                return f"lambda {params}: {self.expr(a.body)}"
            finally:
                self.namer.pop()
        return self.value(a)
