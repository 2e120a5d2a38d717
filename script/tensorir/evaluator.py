"""Evaluating TVMScript expressions to IR: names and their scopes, operators (through the one
operator table), buffer accesses, and the calls of ``T.*`` builtins that make expressions (the
builtins themselves are rules of the construct modules: ``T.Cast`` in exprs, ``T.Buffer`` in
buffers; dtype constructors and intrinsics are read here)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...ir import arith, op as op_registry, ptx
from ...ir.buffer import Buffer, BufferRegion
from ...ir.dtype import SHORTHANDS as DTYPE_SHORTHANDS, DataType, float_literal_refusal, is_dtype_name
from ...ir.errors import ScriptError, Source, TVMSError
from ...ir.index_map import IndexMap
from ...ir.module import GlobalVar
from ...ir.expr import (Add, BufferLoad, Call, CommReducer, FloatImm, IntImm, Mul, PointerType, PrimExpr, PrimType,
                        Ramp, Range, StringImm, Sub, Var, const, is_vscale, lane_count)
from ...ir.node import EMPTY
from .. import syntax as S
from ..dialect import CLASSIC, Dialect
from ..diagnostics import did_you_mean, error, span_of
from ...ir.operators import BY_SYMBOL, CMP
from .arguments import bind_arguments
from .attrs import freeze_value
from .rules import (EXPR_BUILTINS, GLOBAL_NAMES, OPERATOR_HOOKS, SUBSCRIPT_BUILTINS, Namespace, ScriptFunction,
                    statement_builtin_names)


@dataclass(frozen=True)
class Builtin:
    """A reference to ``T.<path>`` not yet called."""

    path: str


@dataclass(frozen=True)
class NewVar:
    """``T.int64()``: a variable declaration waiting for the name it is assigned to."""

    dtype: DataType


@dataclass(frozen=True)
class BufferSlice:
    """``A[0:16, j]``: a subscript with slices; a region in T.reads, a vector access elsewhere."""

    buffer: Buffer
    indices: tuple  # PrimExpr or (start, stop) pairs


@dataclass(frozen=True)
class BufferMethod:
    buffer: Buffer
    name: str


@dataclass(frozen=True)
class ModuleFunctions:
    """The module's class name inside its PrimFuncs: ``Module.f(x)`` calls the module's PrimFunc
    ``f`` (TVM's call of a GlobalVar), whose result has the type ``f`` declares it returns."""

    name: str
    globals: dict  # function name -> GlobalVar
    returns: dict  # PrimFunc name -> its result type (void when it returns nothing)


@dataclass(frozen=True)
class FunctionRef:
    """``Module.f`` not yet called; ``result`` is None when ``f`` is not a PrimFunc."""

    gv: GlobalVar
    result: DataType | None


@dataclass(frozen=True)
class LetAnnotation:
    """``T.let[T.int32]`` (or ``T.let[T.handle("float32", "global")]``) as a variable annotation."""

    dtype: DataType
    pointer: PointerType | None = None


# Names that mean the T module, the I module, or ``range``.
T_NAMES = frozenset({"T", "tir"})


class ExprEvaluator:
    """Evaluates syntax nodes to IR values within the scopes the statement builder keeps."""

    source: Source
    scopes: list[dict[str, Any]]

    # ---------------------------------------------------------------- errors and scopes
    current: Any = None  # the statement being read: where errors go when a node has no position

    def error(self, syn: Any, message: str, note: str | None = None) -> ScriptError:
        if not getattr(syn, "line", 0):
            syn = self.current
        return error(self.source, syn, message, note)

    def span(self, syn: Any) -> Any:
        return span_of(self.source, syn)

    def lookup(self, name: str, syn: Any) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in T_NAMES:
            return Builtin("")
        if name in GLOBAL_NAMES:
            return GLOBAL_NAMES[name]
        if name == "range":
            return Builtin("serial")
        known = [n for scope in self.scopes for n in scope]
        raise self.error(syn, f"undefined variable {name!r}{did_you_mean(name, known)}")

    # ---------------------------------------------------------------- evaluation
    def ev(self, syn: Any) -> Any:
        method = getattr(self, "ev_" + type(syn).__name__, None)
        if method is None:
            raise self.error(syn, f"this {type(syn).__name__} expression is not supported in TensorIR")
        try:
            return method(syn)
        except ScriptError:
            raise
        except TVMSError as e:
            raise self.error(syn, str(e)) from None

    def ev_expr(self, syn: Any, like: PrimExpr | None = None) -> PrimExpr:
        value = self.ev(syn)
        if isinstance(value, BufferSlice):
            return self.slice_load(value, syn)
        if isinstance(value, (PrimExpr, int, float, bool)):
            return arith.to_expr(value, like)
        raise self.error(syn, f"expected an expression, got {_describe(value)}")

    def ev_Name(self, syn: S.Name) -> Any:
        value = self.lookup(syn.id, syn)
        if isinstance(value, Buffer) and self.reads_as_scalar(value):  # TVM 0.27's mutable scalar: a value
            return BufferLoad(value, (const(0),), span=self.span(syn))
        return value

    def reads_as_scalar(self, buffer: Buffer) -> bool:
        """A mutable scalar (TVM 0.27), or a one-element parameter of a function not declared
        s_tir, which TVM 0.27 lays out and so writes as one too (``A = A + 1``)."""
        func = getattr(self, "func", None)  # (a function being read: the scoped evaluator's)
        return buffer.scalar or (func is not None and self.dialect is not CLASSIC and not func.s_tir
                                 and buffer.one_element and buffer in func.buffer_map.values())

    def ev_buffer_base(self, syn: Any) -> Any:
        """The value of ``x`` in ``x[...]`` / ``x.attr``: a mutable scalar as its buffer."""
        return self.lookup(syn.id, syn) if isinstance(syn, S.Name) else self.ev(syn)

    def ev_Constant(self, syn: S.Constant) -> Any:
        return syn.value

    def ev_TupleExpr(self, syn: S.TupleExpr) -> tuple:
        return tuple(self.ev(e) for e in syn.elts)

    def ev_ListExpr(self, syn: S.ListExpr) -> list:
        return [self.ev(e) for e in syn.elts]

    def ev_DictExpr(self, syn: S.DictExpr) -> dict:
        """Dicts are attribute values: keys are hashable, values are data the IR can hold (not
        a builtin or a declaration, which nothing could print back; a slice is the region it
        names, as in TVM)."""
        out = {}
        for k, v in zip(syn.keys, syn.values):
            key, value = self.ev(k), self.ev(v)
            if isinstance(value, BufferSlice):
                value = self.to_region(value, v)
            try:
                hash(key)
            except TypeError:  # a list, a dict
                raise self.error(k, f"a dict key must be a string or a number, not {_describe(key)}") from None
            self.check_data(value, v)
            out[key] = value
        return out

    def check_data(self, value: Any, syn: Any) -> None:
        if isinstance(value, (Builtin, NewVar, BufferSlice, BufferMethod, LetAnnotation, ModuleFunctions,
                              FunctionRef)):
            raise self.error(syn, f"{_describe(value)} is not a value an attribute can hold")
        if isinstance(value, (list, tuple)):
            for item in value:
                self.check_data(item, syn)

    def ev_Attribute(self, syn: S.Attribute) -> Any:
        base = self.ev_buffer_base(syn.value)
        if isinstance(base, Builtin):
            path = f"{base.path}.{syn.attr}" if base.path else DTYPE_SHORTHANDS.get(syn.attr, syn.attr)
            if not base.path and not is_builtin_name(path):
                heads = {n.split(".")[0] for n in all_builtin_names()}  # (T.ctaa: T.cta, not T.cta.max)
                raise self.error(syn, f"unknown builtin 'T.{path}'"
                                 f"{did_you_mean('T.' + path, ['T.' + n for n in sorted(heads)])}")
            return Builtin(path)
        if isinstance(base, Namespace):
            return base.attribute(self, syn.attr, syn)
        if isinstance(base, (PrimType, PointerType)) and syn.attr == "ty":  # (T.handle().ty)
            return base
        if isinstance(base, ModuleFunctions):
            if syn.attr not in base.globals:
                raise self.error(syn, f"module {base.name!r} has no function {syn.attr!r}"
                                 f"{did_you_mean(syn.attr, list(base.globals))}")
            return FunctionRef(base.globals[syn.attr], base.returns.get(syn.attr))
        if isinstance(base, Buffer):
            if syn.attr == "data":
                return base.data
            if syn.attr == "shape":
                return base.shape
            if syn.attr == "strides":
                return base.strides
            if syn.attr == "elem_offset":
                return base.offset
            if syn.attr == "dtype":
                return str(base.dtype)
            if syn.attr in ("view", "local", "permute", "access_ptr"):
                return BufferMethod(base, syn.attr)
            if syn.attr == "source" and self.reads_as_scalar(base):  # TVM 0.27's region of a scalar: x.source[0]
                return base
        raise self.error(syn, f"{_describe(base)} has no attribute {syn.attr!r}")

    def ev_Subscript(self, syn: S.Subscript) -> Any:
        base = self.ev_buffer_base(syn.value)
        if isinstance(base, Buffer):
            return self.subscript_buffer(base, syn)
        if isinstance(base, Builtin):
            if base.path in SUBSCRIPT_BUILTINS:
                return SUBSCRIPT_BUILTINS[base.path](self, syn)
            if base.path == "Buffer":  # the older T.Buffer[(128, 128), "float32"]
                args = [self.ev(i) for i in syn.indices]
                return self.call_builtin(base, args, {}, syn)
            if base.path == "ptx":  # T.ptx["ld.global.b32"]: T.ptx.ld.global_.b32
                text = self.ev(syn.indices[0]) if len(syn.indices) == 1 else None
                if not isinstance(text, str) or not text:
                    raise self.error(syn, "T.ptx[...] takes an instruction's PTX text, e.g. T.ptx[\"ld.global.b32\"]")
                return Builtin(".".join(["ptx", *(ptx.escape(t) for t in text.split("."))]))
            if base.path == "let":
                ann = self.ev(syn.indices[0])
                if isinstance(ann, PointerType):
                    return LetAnnotation(DataType("handle"), ann)
                return LetAnnotation(self.dtype_of(ann, syn))
        if isinstance(base, (tuple, list)) and len(syn.indices) == 1:
            index = self.ev(syn.indices[0])
            if not isinstance(index, int) or isinstance(index, bool) or not -len(base) <= index < len(base):
                raise self.error(syn, f"index {index!r} is out of range for {len(base)} item(s)")
            return base[index]
        raise self.error(syn, f"cannot subscript {_describe(base)}")

    def subscript_buffer(self, buffer: Buffer, syn: S.Subscript) -> Any:
        items: list = []
        sliced = False
        # ``S[()]`` indexes a 0-d buffer (TVM's spelling)
        indices = syn.indices
        if len(indices) == 1 and isinstance(indices[0], S.TupleExpr) and not indices[0].elts:
            indices = []
        for index in indices:
            if isinstance(index, S.Slice):
                step = 1
                if index.step is not None:  # A[0:8:2]: a vector access only (a region has no step)
                    step = self.ev(index.step)
                    step = step.value if isinstance(step, IntImm) else step
                    if not isinstance(step, int) or isinstance(step, bool) or step == 0:
                        raise self.error(index.step, f"a slice step is a nonzero constant integer, "
                                         f"not {_describe(step)}")
                if index.upper is None:
                    raise self.error(syn, "a slice needs an end")
                start = self.ev_expr(index.lower) if index.lower is not None else None
                stop = self.ev_expr(index.upper, start)
                if start is None or (isinstance(start, IntImm) and stop.dtype.is_integer):
                    # `:n` and `0:n` start at a zero of n's type (an int32 0 beside an int64 end
                    # printed back with a cast, one more at each round)
                    start = IntImm(stop.dtype, start.value if start is not None else 0)
                self.check_index(start, index.lower or index, "a slice bound")
                self.check_index(stop, index.upper, "a slice bound")
                items.append((start, stop, step))
                sliced = True
            else:
                items.append(self.check_index(self.ev_expr(index), index, "a buffer index"))
        if len(items) != len(buffer.shape):
            raise self.error(syn, f"buffer {buffer.name!r} has {len(buffer.shape)} dimension"
                             f"{'s' if len(buffer.shape) != 1 else ''} but is indexed with "
                             f"{len(items)} ind{'ices' if len(items) != 1 else 'ex'}")
        if sliced:
            return BufferSlice(buffer, tuple(items))
        return BufferLoad(buffer, tuple(items), span=self.span(syn))

    def check_index(self, index: PrimExpr, syn: Any, what: str) -> PrimExpr:
        # a float index has no element to address (and a float region printed back as start +
        # extent would differ at each round)
        if not index.dtype.is_integer:
            raise self.error(syn, f"{what} must be an integer, not {_describe(index)}")
        return index

    def slice_load(self, value: BufferSlice, syn: Any) -> PrimExpr:
        """``A[i:i + 8]`` read as a vector: each slice becomes a Ramp of ``ceil(extent / step)``
        lanes, a number or, over a scalable extent, ``T.vscale() * k``."""
        indices = []
        for item in value.indices:
            if isinstance(item, tuple):
                start, stop, step = item
                lanes = slice_lanes(arith_extent(start, stop), step)
                if isinstance(lanes, int) and (lanes <= 0 or step <= 0):
                    raise self.error(syn, "a vector slice needs a positive length and a positive step")
                if lanes is None:
                    raise self.error(syn, "a vector slice needs a constant length (or T.vscale() * k "
                                     "lanes, a multiple of its step)")
                indices.append(Ramp(start, const(step, start.dtype), lanes))
            else:
                indices.append(item)
        return BufferLoad(value.buffer, tuple(indices), span=self.span(syn))

    def vector_lanes(self, value: Any, syn: Any) -> Any:
        """The lanes of ``T.Ramp`` / ``T.Broadcast``: a number, or ``T.vscale() * k`` (which
        ``k * T.vscale()`` also spells, as in TVM)."""
        if isinstance(value, IntImm) or (isinstance(value, int) and not isinstance(value, bool)):
            return int(value.value if isinstance(value, IntImm) else value)
        if isinstance(value, Mul) and is_vscale(value.b):
            value = Mul(value.b, value.a)
        try:
            lane_count(value)
        except TVMSError:
            raise self.error(syn, f"the lanes of a vector are a constant or T.vscale() * k, not "
                             f"{_describe(value)}") from None
        return value

    def to_region(self, value: Any, syn: Any) -> BufferRegion:
        if isinstance(value, Buffer):
            return BufferRegion.full(value)
        if isinstance(value, BufferLoad):
            return BufferRegion(value.buffer, tuple(Range(i, const(1, i.dtype)) for i in value.indices))
        if isinstance(value, BufferSlice):
            if any(isinstance(i, tuple) and i[2] != 1 for i in value.indices):
                raise self.error(syn, "a buffer region has no slice step")
            return BufferRegion(value.buffer, tuple(
                Range(i[0], arith_extent(i[0], i[1])) if isinstance(i, tuple) else Range(i, const(1, i.dtype))
                for i in value.indices))
        raise self.error(syn, f"expected a buffer region such as A[i, 0:16], got {_describe(value)}")

    # The operators take their operands evaluated, so that a subclass that looks at the values
    # first (the Relax parser) evaluates each operand once, not once per level of nesting.
    def ev_BinOp(self, syn: S.BinOp) -> Any:
        return self.binary(syn, self.ev(syn.left), self.ev(syn.right))

    def binary(self, syn: S.BinOp, left: Any, right: Any) -> Any:
        if not (isinstance(left, (PrimExpr, int, float)) and isinstance(right, (PrimExpr, int, float))):
            for hook in OPERATOR_HOOKS:  # (operands of another kind: a layout's 4 @ Axis.laneid)
                result = hook(self, syn, left, right)
                if result is not NotImplemented:
                    return result
        a, b = self.as_operand(left, syn.left), self.as_operand(right, syn.right)
        op = BY_SYMBOL.get(syn.op)
        if op is None or op.build is None or op.precedence == CMP:
            raise self.error(syn, f"the operator {syn.op!r} is not supported in TensorIR")
        return op.build(a, b)

    def operand(self, syn: Any) -> Any:
        return self.as_operand(self.ev(syn), syn)

    def as_operand(self, value: Any, syn: Any) -> Any:
        if isinstance(value, BufferSlice):
            return self.slice_load(value, syn)
        if not isinstance(value, (PrimExpr, int, float, bool)):
            raise self.error(syn, f"expected an expression, got {_describe(value)}")
        return value

    def ev_UnaryOp(self, syn: S.UnaryOp) -> Any:
        return self.unary(syn, self.ev(syn.operand))

    def unary(self, syn: S.UnaryOp, operand: Any) -> Any:
        value = self.as_operand(operand, syn.operand)
        if syn.op == "-":
            return arith.negate(value)
        if syn.op == "+":
            return value
        if syn.op == "~":
            return arith.bitwise_not(value)
        raise self.error(syn, f"the operator {syn.op!r} is not supported in TensorIR")

    def ev_NotOp(self, syn: S.NotOp) -> Any:
        return arith.logical_not(self.operand(syn.operand))

    def ev_BoolOp(self, syn: S.BoolOp) -> Any:
        op = BY_SYMBOL[syn.op]
        result = self.operand(syn.values[0])
        for v in syn.values[1:]:
            result = op.build(result, self.operand(v))
        return result

    def ev_Compare(self, syn: S.Compare) -> Any:
        return self.compare(syn, self.ev(syn.left))

    def compare(self, syn: S.Compare, left: Any) -> Any:
        left = self.as_operand(left, syn.left)
        result = None
        for op, right_syn in zip(syn.ops, syn.comparators):
            right = self.operand(right_syn)
            one = BY_SYMBOL[op].build(left, right)
            result = one if result is None else BY_SYMBOL["and"].build(result, one)
            left = right
        return result

    def ev_Call(self, syn: S.Call) -> Any:
        func = self.ev(syn.func)
        if isinstance(func, Builtin) and func.path == "comm_reducer":
            return self.comm_reducer(syn)
        if isinstance(func, Builtin) and func.path == "index_map":
            if len(syn.args) != 1 or not isinstance(syn.args[0], S.Lambda) or syn.kwargs:
                raise self.error(syn, "T.index_map takes a lambda of the indices")
            return self.ev(syn.args[0])
        args = [self.ev(a) for a in syn.args if not isinstance(a, S.Starred)]
        if any(isinstance(a, S.Starred) for a in syn.args):
            raise self.error(syn, "star arguments are not supported in TVMScript")
        kwargs = {k: self.ev(v) for k, v in syn.kwargs}
        if isinstance(func, Builtin):
            return self.call_builtin(func, args, kwargs, syn)
        if isinstance(func, BufferMethod):
            return self.buffer_method(func, args, kwargs, syn)
        if isinstance(func, FunctionRef):
            return self.call_function(func, args, kwargs, syn)
        if isinstance(func, ScriptFunction):
            return func.call(self, args, kwargs, syn)
        raise self.error(syn.func, f"{_describe(func)} is not callable")

    def call_function(self, func: FunctionRef, args: list, kwargs: dict, syn: Any) -> Call:
        """``Module.f(a, b)``: a call of the module's PrimFunc ``f`` with scalar (or handle)
        arguments, typed by what ``f`` returns."""
        gv = func.gv
        if func.result is None:
            raise self.error(syn, f"a PrimFunc calls the module's PrimFuncs only; {gv.name_hint!r} is not one")
        if kwargs:
            raise self.error(syn, f"{gv.name_hint}(...) takes positional arguments only")
        call_args = []
        for a in args:
            value = self.call_arg(a, syn)
            if not isinstance(value, PrimExpr):  # (a buffer passes as its data: A.data)
                raise self.error(syn, f"{_describe(value)} cannot be an argument of {gv.name_hint}(...); "
                                 f"pass a value or a pointer such as {getattr(value, 'name', 'A')}.data")
            call_args.append(value)
        return Call(func.result, gv, tuple(call_args))


    def comm_reducer(self, syn: S.Call) -> CommReducer:
        if len(syn.args) != 2 or not isinstance(syn.args[0], S.Lambda) \
                or not isinstance(syn.args[1], (S.ListExpr, S.TupleExpr)):
            raise self.error(syn, "T.comm_reducer takes a lambda and a list of identity elements")
        lam = syn.args[0]
        n = len(lam.params) // 2
        identity = [self.ev_expr(e) for e in syn.args[1].elts]
        if len(lam.params) != 2 * n or len(identity) != n:
            raise self.error(lam, "the reducer lambda takes two arguments per identity element")
        lhs = tuple(Var(p, identity[i].dtype) for i, p in enumerate(lam.params[:n]))
        rhs = tuple(Var(p, identity[i].dtype) for i, p in enumerate(lam.params[n:]))
        self.scopes.append({v.name: v for v in lhs + rhs})
        try:
            body = self.ev(lam.body)
        finally:
            self.scopes.pop()
        result = tuple(arith.to_expr(r) for r in (body if isinstance(body, tuple) else (body,)))
        return CommReducer(lhs, rhs, result, tuple(identity))

    def ev_Lambda(self, syn: S.Lambda) -> IndexMap:
        """``lambda i, j: (j, i)``: an index map (``T.index_map``, R.layout_transform's
        attribute), over int64 indices as TVM makes them."""
        variables = tuple(Var(p, DataType("int64")) for p in syn.params)
        self.scopes.append({v.name: v for v in variables})
        try:
            body = self.ev(syn.body)
        finally:
            self.scopes.pop()
        final = body if isinstance(body, tuple) else (body,)
        return IndexMap(variables, tuple(arith.to_expr(e, variables[0] if variables else None) for e in final))

    def buffer_method(self, method: BufferMethod, args: list, kwargs: dict, syn: Any) -> Any:
        raise self.error(syn, f"{method.buffer.name}.{method.name}(...) is only allowed as a statement "
                         f"that defines a buffer")

    # ---------------------------------------------------------------- T.* builtins
    def call_builtin(self, func: Builtin, args: list, kwargs: dict, syn: Any) -> Any:
        path = func.path
        handler = EXPR_BUILTINS.get(path)  # (filled by the construct modules: exprs, buffers)
        if handler is not None:
            return handler(self, args, kwargs, syn)
        if is_dtype_name(path):
            return self.dtype_constructor(DataType(path), args, kwargs, syn)
        info = op_registry.lookup_script_name(path)
        if info is not None:
            return self.intrinsic(info, args, kwargs, syn)
        if path in statement_builtin_names():
            raise self.error(syn, f"T.{path}(...) cannot be used in an expression")
        namespace = path.split(".")[0]
        if namespace == "ptx" and ".".join(path.split(".")[:2]) in EXPR_BUILTINS:  # T.ptx.ld.global_.b32(...)
            from .ptx_calls import read_ptx_chain  # (the construct modules import this one)
            return read_ptx_chain(self, path, args, kwargs, syn)
        known = ["T." + n for n in all_builtin_names() if n.startswith(namespace + ".")]
        raise self.error(syn, f"unknown builtin 'T.{path}'{did_you_mean('T.' + path, known)}")

    def dtype_constructor(self, dtype: DataType, args: list, kwargs: dict, syn: Any) -> Any:
        if not args:
            return NewVar(dtype)
        if len(args) != 1:
            raise self.error(syn, f"T.{dtype}(...) takes one value")
        value = args[0]
        if isinstance(value, bool) or isinstance(value, (int, float)):
            if dtype.is_float:
                refusal = float_literal_refusal(dtype, value)
                if refusal:
                    raise self.error(syn, refusal)
                return FloatImm(dtype, float(value))
            if isinstance(value, float) and not value.is_integer():
                raise self.error(syn, f"{value!r} is not a value of type {dtype}")
            if not isinstance(value, bool) and (dtype.is_integer or dtype.is_bool) and not dtype.holds_int(int(value)):
                raise self.error(syn, f"{int(value)} is out of the range of {dtype}")
            return const(int(value) if not isinstance(value, bool) else value, dtype)
        if isinstance(value, str) and dtype.is_float and value in ("inf", "-inf", "nan"):
            return FloatImm(dtype, float(value))
        if isinstance(value, PrimExpr):
            return arith.cast(dtype, value)
        raise self.error(syn, f"T.{dtype}(...) needs a number, got {_describe(value)}")

    def intrinsic(self, info: op_registry.OpInfo, args: list, kwargs: dict, syn: Any) -> Call:
        explicit = pointer = None
        written = [self.named_data(a) for a in syn.args] if isinstance(syn, S.Call) else []
        if "dtype" in kwargs:  # the older spelling: T.tvm_access_ptr(..., dtype="handle")
            kwargs = dict(kwargs)
            explicit = self.dtype_of(kwargs.pop("dtype"), syn)
        elif info.result in ("dtype", "dtype_last"):
            if not args:
                raise self.error(syn, f"T.{info.script_name} needs the result data type as its "
                                 f"{'first' if info.result == 'dtype' else 'last'} argument")
            first = info.result == "dtype"
            given = args[0] if first else args[-1]
            if isinstance(given, PointerType):  # T.handle("float32", "global").ty: a typed pointer
                explicit, pointer = DataType("handle"), given
            else:
                explicit = self.dtype_of(given, syn)
            args = args[1:] if first else args[:-1]
            written = written[1:] if first else written[:-1]
        if info.params and kwargs:
            args, kwargs = self.bind_keywords(info, args, kwargs, syn), {}
        lo, hi = info.arity
        if info.defaults and hi - len(info.defaults) <= len(args) < hi:
            args = [*args, *info.defaults[len(args) - hi:]]  # what TVM's function fills in
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = str(lo) if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise self.error(syn, f"T.{info.script_name} takes {want} argument{'s' if want != '1' else ''}, "
                             f"got {len(args)}")
        for i in info.strings:
            if i < len(args) and not isinstance(args[i], str):
                raise self.error(syn, f"T.{info.script_name}'s argument {i + 1} must be a string literal, "
                                      f"got {_describe(args[i])}")
        if info.result == "return_type" and "return_type" in kwargs:  # (T.cuda.func_call's result type)
            explicit = self.dtype_of(kwargs["return_type"], syn)
        call_args = tuple(self.call_arg(a, syn) for a in args)
        try:
            dtype = explicit if explicit is not None else op_registry.result_dtype(info, call_args, None)
        except TVMSError as e:
            raise self.error(syn, str(e)) from None
        attrs = freeze_value(kwargs) if kwargs else EMPTY
        data_of = tuple(b if isinstance(a, Var) and b is not None and b.data is a else None
                        for a, b in zip(call_args, written)) if any(written) else ()
        return Call(dtype, op_registry.get_op(info.name), call_args, attrs, pointer, data_of)

    def bind_keywords(self, info: op_registry.OpInfo, args: list, kwargs: dict, syn: Any) -> list:
        """The arguments in order, the keywords placed where TVM's function names its parameters
        (``T.nki.matmul(r, a, b, accum=False)``); a parameter left out before a given one takes
        its default, as in the function."""
        params, name = info.params, f"T.{info.script_name}"
        named = dict(kwargs)
        bound = bind_arguments(name, params, args, named, lambda message: self.error(syn, message))
        if named:
            raise self.error(syn, f"{name} has no parameter {next(iter(named))!r}; its parameters are {', '.join(params)}")
        defaults = dict(zip(params[len(params) - len(info.defaults):], info.defaults))
        for param in params:
            if param not in bound:
                if param not in defaults:
                    raise self.error(syn, f"{name} needs its argument {param!r}")
                bound[param] = defaults[param]
        return [*(bound[p] for p in params), *args[len(params):]]

    def named_data(self, syn: Any) -> Buffer | None:
        """The buffer ``B`` of an argument written ``B.data`` (TVM prints the buffer named)."""
        if isinstance(syn, S.Attribute) and syn.attr == "data":
            base = self.ev_buffer_base(syn.value)
            return base if isinstance(base, Buffer) else None
        return None

    def call_arg(self, value: Any, syn: Any) -> Any:
        if isinstance(value, str):
            return StringImm(value)
        if isinstance(value, BufferSlice):
            return self.slice_load(value, syn)
        if isinstance(value, (PrimExpr, int, float, bool)):
            return arith.to_expr(value)
        if isinstance(value, (Buffer, CommReducer)):
            return value
        raise self.error(syn, f"{_describe(value)} cannot be an argument of an intrinsic")

    def dtype_of(self, value: Any, syn: Any) -> DataType:
        if isinstance(value, Builtin) and is_dtype_name(value.path):
            return DataType(value.path)
        if isinstance(value, PrimType):  # TVM 0.27 writes the handle type as T.handle().ty
            return value.dtype
        if isinstance(value, str):
            try:
                return DataType(value)
            except TVMSError as e:
                raise self.error(syn, str(e)) from None
        raise self.error(syn, f"expected a data type such as \"float32\", got {_describe(value)}")


@dataclass
class FunctionFrame:
    """What a function being read collects besides its body."""

    params: list = field(default_factory=list)
    buffer_map: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    root_allocs: list = field(default_factory=list)
    typevars: dict = field(default_factory=dict)  # module-level TypeVar names -> this function's Var
    # while the signature is read: scalar parameters' dtypes by name, and the size variables that
    # quoted buffer dimensions created (a later scalar parameter of that name is that variable)
    signature_dtypes: dict | None = None
    size_vars: dict = field(default_factory=dict)
    stride_vars: list = field(default_factory=list)  # the new stride variables of the annotation read
    s_tir: bool = False  # decorated s_tir=True: TVM 0.27 gives its allocations no layout
    env_threads: dict = field(default_factory=dict)  # T.env_thread variables -> their thread tags
    # variables declared ``x = T.int64()`` that no loop binds yet (a later ``for x in`` may)
    unbound: set = field(default_factory=set)


class ScopedEvaluator(ExprEvaluator):
    """An expression evaluator with its own scopes of names: what both the TensorIR statement
    builder and the Relax builder (for symbolic sizes, ``T.int64(...)``, prim values) read
    expressions with. A module-level TypeVar is one variable per function."""

    def __init__(self, source: Source, dialect: Dialect = CLASSIC, globals_: dict | None = None,
                 typevars: frozenset = frozenset()):
        self.source = source
        self.dialect = dialect
        self.scopes = [dict(globals_ or {})]
        self.typevar_names = typevars
        self.func: FunctionFrame | None = None

    def lookup(self, name: str, syn: Any) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if self.func is not None and name in self.typevar_names:
            var = self.func.typevars.get(name)
            if var is None:  # each function gets its own variable for a module-level TypeVar
                var = self.func.typevars[name] = Var(name, DataType("int64"))
            return var
        return ExprEvaluator.lookup(self, name, syn)

    def is_known(self, name: str) -> bool:
        try:
            self.lookup(name, None)
        except ScriptError:
            return False
        return True

    def define(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def scoped(self, body: Callable[[], Any], names: dict | None = None) -> Any:
        self.scopes.append(dict(names or {}))
        try:
            return body()
        finally:
            self.scopes.pop()

    def lookup_local(self, name: str) -> Any:
        """A name defined inside the function (not a global), or None."""
        for scope in reversed(self.scopes[1:]):
            if name in scope:
                return scope[name]
        return None

    def int_expr(self, value: Any, syn: Any) -> PrimExpr:
        if isinstance(value, (PrimExpr, int)) and not isinstance(value, bool):
            return arith.to_expr(value)
        raise self.error(syn, f"expected an integer extent, got {_describe(value)}")


def arith_extent(start: PrimExpr, stop: PrimExpr) -> PrimExpr:
    """``stop - start``. The printer writes an end as ``start + extent`` (or the extent alone
    when the start is 0), so those forms give back the very extent; others are simplified
    (``i + 16 - i`` is 16)."""
    from ...ir.arith import simplify
    from ...ir.structural import structural_equal

    if isinstance(start, IntImm) and start.value == 0 and stop.dtype == start.dtype:
        return stop
    if isinstance(stop, Add) and structural_equal(stop.a, start) and not isinstance(stop.b, IntImm):
        return stop.b
    return simplify(arith.binary(Sub, stop, start))


def slice_lanes(extent: PrimExpr, step: int) -> Any:
    """The lanes of ``start:start + extent:step``: ``ceil(extent / step)`` (TVM's count for a
    positive step), or ``T.vscale() * k`` when the extent is vscale times a multiple of the step;
    None when the extent is neither."""
    factor, scalable = 1, False
    for term in _product_terms(extent):
        if is_vscale(term) and not scalable:
            scalable = True
        elif isinstance(term, IntImm):
            factor *= term.value
        else:
            return None
    if not scalable:
        return -(-factor // step)
    if factor % step or factor // step <= 0:
        return None
    return Mul(Call(DataType("int32"), op_registry.get_op("tir.vscale"), ()), IntImm(DataType("int32"), factor // step))


def _product_terms(e: PrimExpr) -> list:
    return _product_terms(e.a) + _product_terms(e.b) if isinstance(e, Mul) else [e]


def _describe(value: Any) -> str:
    if isinstance(value, Builtin):
        return f"T.{value.path}" if value.path else "the module T"
    if isinstance(value, Buffer):
        return f"buffer {value.name!r}"
    if isinstance(value, ModuleFunctions):
        return f"the module {value.name}"
    if isinstance(value, FunctionRef):
        return f"the function {value.gv.name_hint}"
    if isinstance(value, Var):
        return f"variable {value.name!r}"
    if isinstance(value, PrimExpr):
        return f"a {value.dtype} expression"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, NewVar):
        return f"a new T.{value.dtype} variable (T.{value.dtype}() declares one: n = T.{value.dtype}())"
    if isinstance(value, (int, float)):
        return repr(value)
    if value is None:
        return "None"
    if isinstance(getattr(value, "description", None), str):  # (script values that say what they are)
        return value.description
    return {dict: "a dict", list: "a list", tuple: "a tuple"}.get(type(value), type(value).__name__)


def all_builtin_names() -> list[str]:
    return sorted(set(EXPR_BUILTINS) | statement_builtin_names() | set(op_registry.script_names())
                  | {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "bfloat16", "bool"})


def is_builtin_name(path: str) -> bool:
    """Whether ``T.<path>`` is a name tvms knows (a statement, an expression builtin, a dtype or
    a TensorIR operator); what the parser accepts and the inventory test counts."""
    return (path in EXPR_BUILTINS or path in statement_builtin_names() or is_dtype_name(path)
            or path in DTYPE_SHORTHANDS or op_registry.lookup_script_name(path) is not None
            or op_registry.is_namespace(path)
            or any(name.startswith(path + ".") for name in statement_builtin_names()))  # (T.cta of T.cta.copy)
