"""TensorIR expressions: the ``T.*`` builtins that build them (``T.Cast``, ``T.Select``,
``T.Ramp``, ``T.Broadcast``, ``T.Let``, ``T.min``/``T.max``/``T.floordiv``..., the node
constructors ``T.Add``..., ``T.target``, ``T.handle``) and how every expression node prints.

Operators come from the one operator table (ir/operators.py): ``a + b`` is read through it
by the evaluator and printed through it here, with Python's precedence; an operation that the
operator would fold when read back (two numbers, ``x + 0``) prints as its node, ``T.Add(x, 0)``.
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir import arith, op as op_registry
from ...ir.buffer import Buffer
from ...ir.dtype import DataType
from ...ir.index_map import IndexMap
from ...ir.expr import (And, Broadcast, BufferLoad, Call, Cast, CommReducer, Div, FloatImm, FloorDiv,
                        FloorMod, IntImm,
                        IterVar, Let, Max, Min, Mod, Mul, Not, Or, PointerType, PrimExpr, PrimType, Ramp, Select,
                        Shuffle, StringImm, TensorMapType, Var)
from ...ir.module import GlobalVar, Target
from ...ir.operators import ATOM, BINARY, BY_NODE, BY_SYMBOL, CMP, MUL, NOT, UNARY
from .evaluator import _describe
from .attrs import freeze_value
from .rules import EXPR_BUILTINS, PRINT_EXPR
from .text import display_add, format_float, quote


# ---------------------------------------------------------------- reading: the T.* builtins
def _binary_builtin(cls: type, fold: bool = False, name: str | None = None) -> Callable:
    """``T.Add(a, b)`` builds the node as written, of operands of one type; ``fold``:
    ``T.floordiv(a, b)`` matches the types, folds constants and neutral operands as TVM's
    operator functions do. ``name``: a function of integers only (``T.truncdiv``: of floats,
    Div is ``/``)."""
    def build(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        if len(args) != 2:
            raise ev.error(syn, f"T.{name or cls.__name__} takes two arguments")
        a, b = (x if isinstance(x, (int, float)) and not isinstance(x, bool) else ev.call_arg(x, syn)
                for x in args)
        if not fold:
            a, b = arith.to_expr(a), arith.to_expr(b)
            if a.dtype != b.dtype:
                raise ev.error(syn, f"the operands of T.{cls.__name__} have one type, got {a.dtype} and {b.dtype}")
            return cls(a, b)
        a, b = arith.match_types(a, b)
        if name is not None and not a.dtype.is_integer:
            raise ev.error(syn, f"T.{name} takes integers, not {a.dtype} (divide floats with /)")
        return arith.binary(cls, a, b)
    return build


def _fixed(n: int, name: str, build: Callable) -> Callable:
    def check(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        if len(args) != n:
            raise ev.error(syn, f"T.{name} takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        return build(ev, args, kwargs, syn)
    return check


def _cast(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    return Cast(ev.dtype_of(args[0], syn), ev.call_arg(args[1], syn))


def _select(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.Select(c, t, f)``: the node, whose values have one type (TVM matches none)."""
    c, t, f = (ev.call_arg(a, syn) for a in args)
    if t.dtype != f.dtype:
        raise ev.error(syn, f"the values of T.Select have one type, got {t.dtype} and {f.dtype}")
    return Select(c, t, f)


def _if_then_else(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.if_then_else(c, t, f)``: its values' types matched as an operator's operands are."""
    c, t, f = (ev.call_arg(a, syn) for a in args)
    t, f = arith.match_types(t, f)
    return ev.intrinsic(op_registry.info_of(op_registry.get_op("tir.if_then_else")), [c, t, f], kwargs, syn)


def _ramp(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    base, stride = ev.call_arg(args[0], syn), ev.call_arg(args[1], syn)
    for name, value in (("base", base), ("stride", stride)):
        if isinstance(value, PrimExpr) and value.dtype.lanes != 1:
            raise ev.error(syn, f"the {name} of T.Ramp is a scalar, got {value.dtype}")
    base, stride = arith.match_types(base, stride)
    return Ramp(base, stride, ev.vector_lanes(args[2], syn))


def _broadcast(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    return Broadcast(ev.call_arg(args[0], syn), ev.vector_lanes(args[1], syn))


def _shuffle(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    vectors, indices = args
    if not isinstance(vectors, (list, tuple)) or not vectors or not isinstance(indices, (list, tuple)):
        raise ev.error(syn, "T.Shuffle takes a list of vectors and a list of lane indices")
    vectors = tuple(ev.call_arg(v, syn) for v in vectors)
    if len({v.dtype.element_of for v in vectors}) != 1:
        raise ev.error(syn, "the vectors of T.Shuffle have one element type")
    total = sum(v.dtype.lanes for v in vectors)
    lanes = tuple(_int_value(ev, i, syn) for i in indices)
    if any(not 0 <= i < total for i in lanes):
        raise ev.error(syn, f"a T.Shuffle index is a lane of the {total} lanes of its vectors")
    return Shuffle(vectors, tuple(IntImm(DataType("int32"), i) for i in lanes))


def _let_expr(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    where = kwargs.get("where")
    if not isinstance(where, dict) or len(where) != 1:
        raise ev.error(syn, "T.Let(body, where={var: value}) binds exactly one variable")
    (var, value), = where.items()
    if not isinstance(var, Var):  # the key names the bound variable
        raise ev.error(syn, f"T.Let binds a variable, not {_describe(var)}")
    return Let(var, ev.call_arg(value, syn), ev.call_arg(args[0], syn))


def _int_value(ev: Any, value: Any, syn: Any) -> int:
    if isinstance(value, IntImm):
        return value.value
    if isinstance(value, int):
        return value
    raise ev.error(syn, f"expected a constant integer, got {_describe(value)}")


def _target(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    config = args[0] if args else kwargs
    if isinstance(config, str):
        config = {"kind": config}
    return Target(freeze_value(config))


def _handle(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
    """``T.handle`` / ``T.handle("float32", "global")`` as a parameter type."""
    given = args[0] if args else kwargs.get("dtype")
    if given in _TENSOR_MAP_NAMES:  # (as TVM's T.handle reads them)
        return _tensor_map(ev, [], {}, syn)
    dtype = ev.dtype_of(given, syn) if given is not None else DataType("void")
    scope = args[1] if len(args) > 1 else kwargs.get("storage_scope", "global")
    if dtype.is_void and scope == "global":  # (an untyped pointer: T.handle, as TVM prints it)
        return PrimType(DataType("handle"))
    return PointerType(dtype, scope)


_TENSOR_MAP_NAMES = ("TensorMap", "tensormap", "CUtensorMap", "cuTensorMap")


def _tensor_map(ev: Any, args: list, kwargs: dict, syn: Any) -> PointerType:
    """``T.TensorMap()``: the type of a handle to a CUDA tensor-map descriptor."""
    if args or kwargs:
        raise ev.error(syn, "T.TensorMap() takes no arguments")
    return PointerType(TensorMapType())


def _bitwise_builtin(symbol: str) -> Callable:
    """``T.bitwise_and(a, b)`` ... ``T.shift_right(a, b)``, ``T.bitwise_not(a)``: what TVM's
    functions build, the same as the operators (``a & b``, ``~a``): type checks and folding."""
    def build(ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        operands = [x if isinstance(x, int) and not isinstance(x, bool) else ev.call_arg(x, syn) for x in args]
        return arith.bitwise_not(*operands) if symbol == "~" else arith.bitwise_binary(symbol, *operands)
    return build


_BITWISE_BUILTINS = {name.removeprefix("tir."): symbol for symbol, name in arith.BITWISE_INTRINSICS.items()}
_NODE_BUILTINS = [op.node for op in BINARY if op.node is not None] + [Mod, Min, Max]
EXPR_BUILTINS.update({
    "Cast": _fixed(2, "Cast", _cast),
    "Select": _fixed(3, "Select", _select),
    "if_then_else": _fixed(3, "if_then_else", _if_then_else),
    "Ramp": _fixed(3, "Ramp", _ramp),
    "Broadcast": _fixed(2, "Broadcast", _broadcast),
    "Let": _let_expr,
    "Shuffle": _fixed(2, "Shuffle", _shuffle),
    "min": _binary_builtin(Min, fold=True), "max": _binary_builtin(Max, fold=True),
    "truncdiv": _binary_builtin(Div, fold=True, name="truncdiv"), "truncmod": _binary_builtin(Mod, fold=True),
    "floordiv": _binary_builtin(FloorDiv, fold=True), "floormod": _binary_builtin(FloorMod, fold=True),
    **{cls.__name__: _binary_builtin(cls) for cls in _NODE_BUILTINS},  # T.Add, T.FloorDiv, T.LT ...
    "Not": _fixed(1, "Not", lambda ev, a, k, s: Not(ev.call_arg(a[0], s))),
    "target": _target,
    "handle": _handle,
    "TensorMap": _tensor_map,
    **{name: _fixed(1 if symbol == "~" else 2, name, _bitwise_builtin(symbol))
       for name, symbol in _BITWISE_BUILTINS.items()},
})


# ---------------------------------------------------------------- printing
def _would_fold(e: Any) -> bool:
    """Whether building ``e``'s operation from its operands would fold it (two numbers, ``x + 0``)
    or refuse it (``x // 0``); for ``and`` / ``or``, whether TVM's logical_and / logical_or would
    (a constant operand: TVM prints ``T.And(T.bool(True), x)``, though its parser keeps
    ``T.bool(True) and x`` as written)."""
    if isinstance(e, (And, Or)):
        return isinstance(e.a, IntImm) or isinstance(e.b, IntImm)
    return not arith.builds_as_written(type(e), e.a, e.b)


# the TIR intrinsics that TVM prints as Python's bitwise operators
_BITWISE_SYMBOLS = {name: symbol for symbol, name in arith.BITWISE_INTRINSICS.items()}


class ExprPrinting:
    """Printing expressions (mixed into the TIRPrinter)."""

    def ex_int(self, e: IntImm) -> tuple[str, int]:
        if e.dtype.is_bool:
            return self.tir(f"bool({bool(e.value)})"), ATOM
        if e.dtype.name == "int32":
            return str(e.value), ATOM
        return self.tir(f"{e.dtype}({e.value})"), ATOM

    def ex_float(self, e: FloatImm) -> tuple[str, int]:
        return self.tir(f"{e.dtype}({format_float(e.value)})"), ATOM

    def ex_string(self, e: StringImm) -> tuple[str, int]:
        return quote(e.value), ATOM

    def ex_var(self, e: Var) -> tuple[str, int]:
        return self.var(e), ATOM

    @staticmethod
    def ex_function(name: str, node_name: str) -> Callable:
        """``T.min(a, b)``, or ``T.Min(a, b)`` when ``T.min`` would fold it when read back."""
        def build(p: Any, e: Any) -> tuple[str, int]:
            return p.tir(f"{node_name if _would_fold(e) else name}({p.expr(e.a)}, {p.expr(e.b)})"), ATOM
        return build

    def ex_binary(self, e: Any) -> tuple[str, int]:
        op = BY_NODE[type(e)]
        symbol, prec = op.symbol, op.precedence
        # (what the operator would fold when read back prints as the node it is)
        if _would_fold(e):
            return self.tir(f"{type(e).__name__}({self.expr(e.a)}, {self.expr(e.b)})"), ATOM
        # the right operand is parenthesized on equal precedence (a - (b - c)); comparisons also
        # on the left, since Python would read a < b == c as a chain
        left = self.child(e.a, prec, on_equal=prec == CMP)
        right = self.child(e.b, prec, on_equal=True)
        return f"{left} {symbol} {right}", prec

    def ex_div(self, e: Div) -> tuple[str, int]:
        if e.a.dtype.is_float and arith.builds_as_written(Div, e.a, e.b):
            return f"{self.child(e.a, MUL)} / {self.child(e.b, MUL, True)}", MUL
        return self.tir(f"Div({self.expr(e.a)}, {self.expr(e.b)})"), ATOM

    def ex_not(self, e: Not) -> tuple[str, int]:
        return f"not {self.child(e.a, NOT)}", NOT

    def ex_select(self, e: Select) -> tuple[str, int]:
        return self.tir(f"Select({self.expr(e.condition)}, {self.expr(e.true_value)}, {self.expr(e.false_value)})"), ATOM

    def ex_cast(self, e: Cast) -> tuple[str, int]:
        return self.tir(f"Cast({quote(str(e.dtype))}, {self.expr(e.value)})"), ATOM

    def ex_ramp(self, e: Ramp) -> tuple[str, int]:
        return self.tir(f"Ramp({self.expr(e.base)}, {self.expr(e.stride)}, {self.lanes(e.lanes)})"), ATOM

    def ex_broadcast(self, e: Broadcast) -> tuple[str, int]:
        return self.tir(f"Broadcast({self.expr(e.value)}, {self.lanes(e.lanes)})"), ATOM

    def lanes(self, lanes: Any) -> str:
        return str(lanes) if isinstance(lanes, int) else self.expr(lanes)  # (T.vscale() * 4)

    def ex_shuffle(self, e: Shuffle) -> tuple[str, int]:
        vectors = ", ".join(self.expr(v) for v in e.vectors)
        return self.tir(f"Shuffle([{vectors}], [{', '.join(self.expr(i) for i in e.indices)}])"), ATOM

    def ex_let(self, e: Let) -> tuple[str, int]:
        # TVM writes the let variable's definition before the statement (v = T.int32())
        name = self.var(e.var)
        return self.tir(f"Let({self.expr(e.body)}, where={{{name}: {self.expr(e.value)}}})"), ATOM

    def ex_load(self, e: BufferLoad) -> tuple[str, int]:
        if self.prints_as_scalar(e.buffer, e.indices):
            return self.buffer(e.buffer), ATOM
        # (a vector load keeps T.Ramp, as TVM prints it; a store's ramp is a slice)
        return f"{self.buffer(e.buffer)}[{self.indices(e.indices, slices=False)}]", ATOM

    def data_of(self, buffer: Buffer) -> str:
        """``A.data``; of a mutable scalar, whose name alone is its value, ``A.source.data``."""
        scalar = self.d.name != "classic" and (buffer.is_scalar or id(buffer) in self.laid_out)
        return f"{self.namer.get(buffer)}{'.source' if scalar else ''}.data"

    def prints_as_scalar(self, buffer: Buffer, indices: tuple) -> bool:
        """TVM 0.27 writes a mutable scalar's element as its bare name (``x = x + 1``)."""
        return (self.d.name != "classic" and (buffer.is_scalar or id(buffer) in self.laid_out)
                and len(indices) == 1
                and isinstance(indices[0], IntImm) and indices[0].value == 0)

    def indices(self, indices: tuple, slices: bool = True) -> str:
        parts = []
        for index in indices:
            if slices and isinstance(index, Ramp) and isinstance(index.stride, IntImm):
                stride = index.stride.value
                if isinstance(index.lanes, int):
                    extent = IntImm(index.base.dtype, index.lanes * stride)
                else:  # scalable: start + T.vscale() * 4 * 2
                    extent = index.lanes if stride == 1 else Mul(index.lanes, IntImm(index.lanes.dtype, stride))
                stop = display_add(index.base, extent)
                step = "" if index.stride.value == 1 else f":{self.expr(index.stride)}"
                parts.append(f"{self.expr(index.base)}:{self.expr(stop)}{step}")
            else:
                parts.append(self.expr(index))
        return ", ".join(parts) if parts else "()"  # a 0-d buffer: ``S[()]``

    def ex_call(self, e: Call) -> tuple[str, int]:
        symbol = None if e.attrs else _BITWISE_SYMBOLS.get(getattr(e.op, "name", None))
        if symbol is not None and len(e.args) == (1 if symbol == "~" else 2):  # as TVM prints them
            if symbol == "~":
                return f"~{self.child(e.args[0], UNARY)}", UNARY
            prec = BY_SYMBOL[symbol].precedence
            return f"{self.child(e.args[0], prec)} {symbol} {self.child(e.args[1], prec, on_equal=True)}", prec
        if isinstance(e.op, GlobalVar):  # a call of the module's function: Module.f(...), as
            # TVM prints it (a function printed alone names it bare, as TVM does)
            head = f"{self.module_name}.{e.op.name_hint}" if self.module_name else e.op.name_hint
            args = [self.expr(a) for a in e.args]
        else:
            info = op_registry.info_of(e.op)
            head = self.tir(f"{info.script_name}")
            args = [self.call_arg(a, b) for a, b in zip(e.args, e.data_of)] + [self.expr(a) for a in e.args[len(e.data_of):]]
            result = self.dtype_arg(e.dtype) if e.type_annotation is None else f"{self.type_doc(e.type_annotation)}.ty"
            if info.result == "dtype":
                args.insert(0, result)
            elif info.result == "dtype_last":
                args.append(result)
        args += [f"{k}={self.call_attr(e, v)}" for k, v in e.attrs.items()]
        return f"{head}({', '.join(args)})", ATOM

    def call_attr(self, e: Call, value: Any) -> str:
        if getattr(e.op, "name", None) == "tir.cuda.func_call" and isinstance(value, tuple):
            # (its lazy_args, the argument indices: TVM 0.27 prints them as a Python tuple)
            return f"({', '.join(self.value(v) for v in value)}{',' if len(value) == 1 else ''})"
        return self.value(value)

    def call_arg(self, a: Any, data_of: Buffer | None) -> str:
        """An argument written as the data of ``data_of`` prints so while that buffer is in scope."""
        if data_of is not None and data_of.data is a and self.namer.get(data_of) is not None:
            return self.data_of(data_of)
        return self.expr(a)

    def dtype_arg(self, dtype: DataType) -> str:
        """A data type as an argument: ``"int32"``; TVM 0.27 writes the handle type as the type
        of a handle variable."""
        if dtype.is_handle and self.d.name != "classic":
            return self.tir("handle().ty")
        return quote(str(dtype))

    def ex_reducer(self, e: CommReducer) -> tuple[str, int]:
        self.namer.push()
        params = [self.namer.define(v, v.name) for v in e.lhs + e.rhs]
        result = [self.expr(r) for r in e.result]
        self.namer.pop()
        body = result[0] if len(result) == 1 else "(" + ", ".join(result) + ")"
        identity = ", ".join(self.expr(i) for i in e.identity_element)
        return self.tir(f"comm_reducer(lambda {', '.join(params)}: {body}, [{identity}])"), ATOM

    def index_map(self, m: IndexMap) -> str:
        """``T.index_map(lambda i, j: (j, i))``, the lambda's variables named in a scope of their own."""
        self.namer.push()
        try:
            params = ", ".join(self.namer.define(v, v.name) for v in m.initial_indices)
            final = ", ".join(self.expr(e) for e in m.final_indices)
        finally:
            self.namer.pop()
        return self.tir(f"index_map(lambda {params}: ({final}{',' if len(m.final_indices) == 1 else ''}))")

    def ex_iter_var(self, e: IterVar) -> tuple[str, int]:
        return self.var(e.var), ATOM


PRINT_EXPR.update({
    IntImm: ExprPrinting.ex_int, FloatImm: ExprPrinting.ex_float, StringImm: ExprPrinting.ex_string,
    Not: ExprPrinting.ex_not, Select: ExprPrinting.ex_select, Cast: ExprPrinting.ex_cast,
    Ramp: ExprPrinting.ex_ramp, Broadcast: ExprPrinting.ex_broadcast, Let: ExprPrinting.ex_let,
    BufferLoad: ExprPrinting.ex_load, Shuffle: ExprPrinting.ex_shuffle, Call: ExprPrinting.ex_call, CommReducer: ExprPrinting.ex_reducer,
    IterVar: ExprPrinting.ex_iter_var,
    Min: ExprPrinting.ex_function("min", "Min"), Max: ExprPrinting.ex_function("max", "Max"),
    Mod: ExprPrinting.ex_function("truncmod", "Mod"),
    Var: ExprPrinting.ex_var,
})
PRINT_EXPR.update({cls: ExprPrinting.ex_binary for cls in BY_NODE if cls is not Div})
PRINT_EXPR[Div] = ExprPrinting.ex_div  # "/" only between floats
