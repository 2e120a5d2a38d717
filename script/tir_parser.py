"""Building TensorIR from syntax: functions, statements, loops and blocks, with explicit scopes.

Statements that TVM prints without a nested body (``x: T.int32 = v``, ``assert``,
``bx = T.launch_thread(...)``, ``B = T.decl_buffer(...)``) take the rest of the enclosing body
as their own body, exactly as TVM reads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..ir import arith
from ..ir.analysis import contains_block, infer_block_regions
from ..ir.buffer import DEFAULT_ALIGN, Buffer, MatchBufferRegion, decl_buffer
from ..ir.dtype import DataType, handle, is_dtype_name
from ..ir.errors import ScriptError, Source, TVMSError
from ..ir.expr import (COMM_REDUCE, Add, DATA_PAR, OPAQUE, ORDERED, THREAD_INDEX, BufferLoad, Call,
                       IntImm, IterVar, PointerType, PrimExpr, PrimType, Range, StringImm, Var,
                       const)
from ..ir.function import PrimFunc
from ..ir.node import EMPTY, FrozenDict
from ..ir.stmt import (PARALLEL, SERIAL, THREAD_BINDING, UNROLLED, VECTORIZED, Allocate,
                       AllocBuffer, AssertStmt, AttrStmt, Block, BlockRealize, BufferStore,
                       DeclBuffer, Evaluate, For, IfThenElse, LetStmt, Stmt, While, seq)
from ..ir.well_formed import verify_well_formed
from . import syntax as S
from .comments import add_below, carry, take
from .dialect import CLASSIC, Dialect, canonical_attr_key
from .tir_expr import (Builtin, BufferMethod, BufferSlice, ExprEvaluator, LetAnnotation, NewVar,
                       _describe, arith_extent, freeze_value)

_LOOP_KINDS = {"serial": SERIAL, "parallel": PARALLEL, "vectorized": VECTORIZED,
               "unroll": UNROLLED, "thread_binding": THREAD_BINDING}
_AXIS_KINDS = {"spatial": DATA_PAR, "reduce": COMM_REDUCE, "scan": ORDERED, "opaque": OPAQUE}
_REMAP_KINDS = {"S": DATA_PAR, "R": COMM_REDUCE}


@dataclass
class BlockFrame:
    name: str
    iter_vars: list = field(default_factory=list)
    iter_values: list = field(default_factory=list)
    predicate: PrimExpr | None = None
    reads: list | None = None
    writes: list | None = None
    annotations: dict = field(default_factory=dict)
    alloc_buffers: list = field(default_factory=list)
    match_buffers: list = field(default_factory=list)
    init: Stmt | None = None
    header_done: bool = False


@dataclass
class FunctionFrame:
    params: list = field(default_factory=list)
    buffer_map: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    root_allocs: list = field(default_factory=list)
    typevars: dict = field(default_factory=dict)  # module-level TypeVar names -> this function's Var
    # while the signature is read: scalar parameters' dtypes by name, and the size variables that
    # quoted buffer dimensions created (a later scalar parameter of that name is that variable)
    signature_dtypes: dict | None = None
    size_vars: dict = field(default_factory=dict)


def _norm_attrs(value: Any) -> FrozenDict:
    if not isinstance(value, dict):
        return value
    return FrozenDict({canonical_attr_key(k) if isinstance(k, str) else k: freeze_value(v)
                       for k, v in value.items()})


class TIRBuilder(ExprEvaluator):
    """Builds one PrimFunc from a ``def`` decorated with ``@T.prim_func``."""

    def __init__(self, source: Source, dialect: Dialect = CLASSIC, globals_: dict | None = None,
                 typevars: frozenset = frozenset()):
        self.source = source
        self.dialect = dialect
        self.scopes = [dict(globals_ or {})]
        self.typevar_names = typevars
        self.func: FunctionFrame | None = None
        self.blocks: list[BlockFrame] = []
        self.loop_doms: dict[Var, tuple[PrimExpr, PrimExpr]] = {}

    # ---------------------------------------------------------------- names
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

    # ---------------------------------------------------------------- functions
    def prim_func(self, fdef: S.FunctionDef, decorator_kwargs: dict) -> PrimFunc:
        self.func = frame = FunctionFrame()
        self.scopes.append({})
        frame.signature_dtypes = self.scalar_param_dtypes(fdef.params)
        for p in fdef.params:
            self.param(p, frame)
        frame.signature_dtypes = None
        ret_type = None
        if fdef.returns is not None:
            ret = self.ev(fdef.returns)
            if isinstance(ret, Builtin) and is_dtype_name(ret.path):
                ret_type = PrimType(DataType(ret.path))
            elif ret is not None:
                raise self.error(fdef.returns, f"a PrimFunc returns a data type such as T.int32, "
                                 f"not {_describe(ret)}")
        body = self.body(fdef.body, fdef)
        self.scopes.pop()
        if frame.root_allocs or (contains_block(body) and not _is_root_realize(body)):
            root = Block((), tuple(frame.root_allocs), (), (), (), "root", None, body)
            body = BlockRealize((), const(True), root)
        attrs = dict(frame.attrs)
        private = decorator_kwargs.get("private", False)
        if not private and "global_symbol" not in attrs:
            attrs["global_symbol"] = fdef.name
        s_tir = decorator_kwargs.get("s_tir")
        if s_tir is None:
            s_tir = contains_block(body)
        buffer_map = {p: frame.buffer_map[p] for p in frame.params if p in frame.buffer_map}
        func = PrimFunc(tuple(frame.params), FrozenDict(buffer_map), body, ret_type,
                        FrozenDict(attrs), bool(s_tir), span=self.span(fdef),
                        source_dialect=self.dialect.name)
        self.func = None
        if decorator_kwargs.get("check_well_formed", True):
            verify_well_formed(func)
        return func

    def assigned_span(self, call: Any, target: Any):
        """The span of the call in ``target = call``, with the comments of the statement."""
        span = self.span(call)
        comments = self.source.comments.get((target.line, target.col)) if self.source.comments else None
        return replace(span, comments=comments) if comments is not None and span is not None else span

    def param(self, p: S.Param, frame: FunctionFrame) -> None:
        if p.annotation is None:
            raise self.error(p, f"parameter {p.name!r} needs a type, such as T.handle, T.int32 "
                             f"or T.Buffer((128,), \"float32\")")
        if frame.signature_dtypes is not None:
            self.predefine_quoted_sizes(p.annotation)
        ann = self.ev(p.annotation)
        if isinstance(ann, Buffer):
            # the handle behind an inline buffer parameter is named as LegalizeOps names its
            # handles (var_<buffer>), so printing it as T.handle + T.match_buffer reads back alike
            var = Var(f"var_{p.name}", handle)
            buf = ann.with_changes(name=p.name, data=Var(p.name, handle, ann.data.type_annotation))
            frame.params.append(var)
            frame.buffer_map[var] = buf
            self.define(p.name, buf)
            return
        if isinstance(ann, Builtin) and ann.path == "handle":
            ann = PrimType(handle)
        if isinstance(ann, Builtin) and is_dtype_name(ann.path):
            ann = PrimType(DataType(ann.path))
        if isinstance(ann, PrimType):
            var = frame.size_vars.get(p.name) or Var(p.name, ann.dtype)
        elif isinstance(ann, PointerType):
            var = Var(p.name, handle, ann)
        else:
            raise self.error(p.annotation, f"parameter {p.name!r}: expected a type such as T.handle, "
                             f"T.int32 or T.Buffer(...), got {_describe(ann)}")
        frame.params.append(var)
        self.define(p.name, var)

    def scalar_param_dtypes(self, params: list) -> dict:
        """The dtypes that the signature's scalar parameters declare (``n: T.int64``), by name."""
        dtypes = {}
        for p in params:
            if isinstance(p.annotation, S.Attribute):
                ann = self.ev(p.annotation)
                if isinstance(ann, Builtin) and is_dtype_name(ann.path):
                    dtypes[p.name] = DataType(ann.path)
        return dtypes

    def quoted_size(self, text: str, syn: Any) -> PrimExpr:
        """A quoted dimension of a signature buffer, as TVM 0.27 prints a size over variables the
        signature has not defined yet (``T.Buffer(("(n + 1) // 2", 4))``): see
        ``define_quoted_names``."""
        expr = self.quoted_syntax(text, syn)
        self.define_quoted_names(expr)
        try:
            value = self.ev(expr)
        except ScriptError as e:
            raise self.error(syn, f"{_quoted_problem(text)}: {e.message}") from None
        return self.int_expr(value, syn)

    def quoted_syntax(self, text: str, syn: Any) -> Any:
        from .parser import parse_syntax

        if self.func is None or self.func.signature_dtypes is None:
            raise self.error(syn, f"{_quoted_problem(text)}; quoted sizes are read in a PrimFunc's "
                             f"signature only")
        try:
            stmts = parse_syntax(text, Source(text, "<size>")).body
        except ScriptError as e:
            raise self.error(syn, f"{_quoted_problem(text)}: {e.message}") from None
        if len(stmts) != 1 or not isinstance(stmts[0], S.ExprStmt):
            raise self.error(syn, _quoted_problem(text))
        return stmts[0].value

    def define_quoted_names(self, expr: Any) -> None:
        """A quoted size defines the names it reads that are not defined yet (or that name a module
        TypeVar and also a scalar parameter): with that parameter's dtype, else int32. The other
        dimensions and the parameter itself are then those variables."""
        frame = self.func
        for name in _names_in(expr):
            if any(name in scope for scope in self.scopes):
                continue
            if name in self.typevar_names:
                missing = name in frame.signature_dtypes  # the parameter shadows the TypeVar
            else:
                missing = not self.is_known(name)
            if missing:
                var = Var(name, frame.signature_dtypes.get(name, DataType("int32")))
                frame.size_vars[name] = var
                self.define(name, var)

    def predefine_quoted_sizes(self, annotation: Any) -> None:
        """The quoted sizes of a ``T.Buffer`` annotation define their names before any dimension
        is read, so ``T.Buffer(("n", n))`` reads as TVM reads it."""
        if not (isinstance(annotation, S.Call) and isinstance(annotation.func, S.Attribute)):
            return
        func = self.ev(annotation.func)
        if not (isinstance(func, Builtin) and func.path == "Buffer"):
            return
        shape = annotation.args[0] if annotation.args else dict(annotation.kwargs).get("shape")
        for dim in shape.elts if isinstance(shape, S.TupleExpr) else [shape]:
            if isinstance(dim, S.Constant) and isinstance(dim.value, str):
                self.define_quoted_names(self.quoted_syntax(dim.value, dim))

    # ---------------------------------------------------------------- bodies
    def body(self, stmts: list, owner: Any = None) -> Stmt:
        """The statements of a body; ``owner``: the block or function whose declarations
        (``T.reads``, ``T.func_attr``, ...) open it."""
        out: list[Stmt] = []
        i = 0
        while i < len(stmts):
            syn = stmts[i]
            rest = stmts[i + 1:]
            result = self.stmt(syn, rest)
            if isinstance(result, _TakesRest):
                out.append(result.stmt)
                break
            if result is None or isinstance(result, _Header):
                if owner is not None and not out:  # its comments go on
                    carry(self.source, syn, owner, "inside")
                elif rest:
                    carry(self.source, syn, rest[0])
                else:  # the body's last line: below what came before, or on its no-op
                    left = take(self.source, syn)
                    if left is not None:
                        out.append(add_below(out.pop(), left) if out else
                                   Evaluate(const(0), span=replace(self.span(syn), comments=left)))
            else:
                out.append(result)
            i += 1
        if not out:
            return Evaluate(const(0))
        return seq(out)

    def rest_body(self, rest: list, names: dict | None = None) -> Stmt:
        return self.scoped(lambda: self.body(rest), names)

    def stmt(self, syn: Any, rest: list) -> Any:
        method = getattr(self, "stmt_" + type(syn).__name__, None)
        if method is None:
            raise self.error(syn, f"this statement ({type(syn).__name__}) is not allowed in TensorIR")
        outer, self.current = self.current, syn
        try:
            result = method(syn, rest)
        except ScriptError:
            raise
        except TVMSError as e:  # from the IR layer: give it this statement's position
            raise self.error(syn, str(e)) from None
        except (IndexError, KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as e:
            # Python's own evaluation of the script's values failed (1 / 0, a bad index, ...)
            raise self.error(syn, f"cannot evaluate this statement: {_python_error(e)}") from None
        finally:
            self.current = outer
        if self.blocks and result is not None and not isinstance(result, _Header):
            self.blocks[-1].header_done = True
        return None if isinstance(result, _Header) else result

    def stmt_Pass(self, syn: S.Pass, rest: list) -> Any:
        return None

    def stmt_Import(self, syn: Any, rest: list) -> Any:
        return None

    def stmt_ExprStmt(self, syn: S.ExprStmt, rest: list) -> Any:
        value = syn.value
        if isinstance(value, S.Constant) and isinstance(value.value, str):
            return None  # a docstring
        if isinstance(value, S.Call):
            func = self.ev(value.func)
            if isinstance(func, Builtin) and func.path in STMT_BUILTINS:
                return STMT_BUILTINS[func.path](self, value, rest)
        result = self.ev(value)
        if isinstance(result, PrimExpr):
            return Evaluate(result, span=self.span(syn))
        raise self.error(syn, f"this expression statement has no effect ({_describe(result)})")

    def stmt_Return(self, syn: S.Return, rest: list) -> Any:
        value = self.ev_expr(syn.value) if syn.value is not None else const(0)
        from ..ir.op import get_op

        return Evaluate(Call(value.dtype, get_op("tir.ret"), (value,)), span=self.span(syn))

    def stmt_AugAssign(self, syn: S.AugAssign, rest: list) -> Any:
        target = S.BinOp(syn.target, syn.op, syn.value).at(syn.target, syn.value)
        return self.stmt_Assign(S.Assign([syn.target], target).at(syn, syn), rest)

    def stmt_Assign(self, syn: S.Assign, rest: list) -> Any:
        if len(syn.targets) != 1:
            raise self.error(syn, "chained assignment is not supported in TensorIR")
        target = syn.targets[0]
        if isinstance(target, S.Subscript):
            return self.buffer_store(target, syn.value)
        value_syn = syn.value
        if isinstance(value_syn, S.Call):
            func = self.ev(value_syn.func)
            if isinstance(func, Builtin) and func.path in ASSIGN_BUILTINS:
                return ASSIGN_BUILTINS[func.path](self, target, value_syn, rest)
            if isinstance(func, BufferMethod) and func.name == "view":
                return self.buffer_view(target, func, value_syn, rest)
        value = self.ev(value_syn)
        if isinstance(value, NewVar):
            self.define(self.target_name(target), Var(self.target_name(target), value.dtype))
            return _Header()
        if isinstance(value, Buffer):  # an alias, B = A
            self.define(self.target_name(target), value)
            return _Header()
        if isinstance(value, BufferSlice):
            value = self.slice_load(value, value_syn)
        if isinstance(value, (PrimExpr, int, float, bool)):
            expr = arith.to_expr(value)
            name = self.target_name(target)
            if self.lookup_local(name) is not None:
                raise self.error(target, f"{name!r} is already defined; TensorIR variables cannot be "
                                 f"reassigned (store into a buffer instead)")
            return self.let_stmt(name, expr.dtype, expr, rest, syn, scalar_decl=self.dialect is not CLASSIC)
        raise self.error(value_syn, f"cannot assign {_describe(value)} to a name in TensorIR")

    def target_name(self, target: Any) -> str:
        if not isinstance(target, S.Name):
            raise self.error(target, "expected a single name on the left of '='")
        return target.id

    def stmt_AnnAssign(self, syn: S.AnnAssign, rest: list) -> Any:
        name = self.target_name(syn.target)
        ann = self.ev(syn.annotation)
        scalar_decl = False
        if isinstance(ann, LetAnnotation):
            dtype = ann.dtype
        elif isinstance(ann, Builtin) and is_dtype_name(ann.path):
            dtype = DataType(ann.path)
            scalar_decl = self.dialect is not CLASSIC  # TVM 0.27's mutable-scalar spelling
        elif isinstance(ann, Buffer) and syn.value is None:
            self.define(name, ann)
            return _Header()
        else:
            raise self.error(syn.annotation, f"expected a data type such as T.int32, got {_describe(ann)}")
        if syn.value is None:
            self.define(name, Var(name, dtype))
            return _Header()
        value = self.ev_expr(syn.value)
        if isinstance(value, (IntImm,)) and value.dtype != dtype and isinstance(syn.value, (S.Constant, S.UnaryOp)):
            value = const(value.value, dtype)  # a literal takes the declared type
        return self.let_stmt(name, dtype, value, rest, syn, scalar_decl)

    def lookup_local(self, name: str) -> Any:
        for scope in reversed(self.scopes[1:]):
            if name in scope:
                return scope[name]
        return None

    def let_stmt(self, name: str, dtype: DataType, value: PrimExpr, rest: list, syn: Any,
                 scalar_decl: bool = False) -> Any:
        if value.dtype != dtype:
            raise self.error(syn, f"{name!r} is declared {dtype} but the value is {value.dtype}")
        var = Var(name, dtype)
        return _TakesRest(LetStmt(var, value, self.rest_body(rest, {name: var}), scalar_decl,
                                  span=self.span(syn)))

    def buffer_store(self, target: S.Subscript, value_syn: Any) -> Stmt:
        dest = self.ev(target)
        if isinstance(dest, BufferSlice):
            dest = self.slice_load(dest, target)
        if not isinstance(dest, BufferLoad):
            raise self.error(target, f"only buffer elements can be assigned, not {_describe(dest)}")
        value = self.ev(value_syn)
        if isinstance(value, BufferSlice):
            value = self.slice_load(value, value_syn)
        if isinstance(value, (int, float, bool)):
            value = arith.to_expr(value, dest)
            if value.dtype != dest.dtype:
                value = const(value.value, dest.dtype.element_of)
        if not isinstance(value, PrimExpr):
            raise self.error(value_syn, f"expected an expression, got {_describe(value)}")
        if value.dtype != dest.dtype and value.dtype.element_of != dest.dtype.element_of:
            raise self.error(value_syn, f"cannot store {_article(str(value.dtype))} {value.dtype} value into buffer "
                             f"{dest.buffer.name!r} of {dest.buffer.dtype}")
        return BufferStore(dest.buffer, value, dest.indices, span=self.span(target))

    def stmt_If(self, syn: S.If, rest: list) -> Stmt:
        cond = self.ev_expr(syn.test)
        then = self.scoped(lambda: self.body(syn.body))
        orelse = self.scoped(lambda: self.body(syn.orelse)) if syn.orelse else None
        return IfThenElse(cond, then, orelse, span=self.span(syn))

    def stmt_While(self, syn: S.While, rest: list) -> Stmt:
        cond = self.ev_expr(syn.test)
        return While(cond, self.scoped(lambda: self.body(syn.body)), span=self.span(syn))

    def stmt_Assert(self, syn: S.Assert, rest: list) -> Any:
        cond = self.ev_expr(syn.test)
        kind, parts = "RuntimeError", ()
        if syn.msg is not None:
            msg = self.ev(syn.msg)
            if isinstance(msg, str):
                parts = (msg,)
            elif (isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], str)
                  and isinstance(msg[1], (list, tuple)) and all(isinstance(m, str) for m in msg[1])):
                kind, parts = msg[0], tuple(msg[1])
            else:
                raise self.error(syn.msg, "an assert message is a string, or (kind, [parts])")
        return _TakesRest(AssertStmt(cond, parts, self.rest_body(rest), kind, span=self.span(syn)))

    # ---------------------------------------------------------------- loops
    def stmt_For(self, syn: S.For, rest: list) -> Stmt:
        it = syn.iter
        if not isinstance(it, S.Call):
            raise self.error(it, "a TensorIR loop iterates over range(...), T.grid(...), T.serial(...), ...")
        func = self.ev(it.func)
        if not isinstance(func, Builtin) or func.path not in _LOOP_KINDS and func.path != "grid":
            raise self.error(it.func, f"cannot loop over {_describe(func)}; use range, T.grid, "
                             f"T.serial, T.parallel, T.vectorized, T.unroll or T.thread_binding")
        targets = syn.target.elts if isinstance(syn.target, S.TupleExpr) else [syn.target]
        names = [self.target_name(t) for t in targets]
        args = [self.ev(a) for a in it.args]
        kwargs = {k: self.ev(v) for k, v in it.kwargs}
        if func.path == "grid":
            if kwargs:
                raise self.error(it, "T.grid takes only extents")
            if len(args) != len(names):
                raise self.error(syn.target, f"T.grid has {len(args)} extents but the loop names "
                                 f"{len(names)} variables")
            loops = [(name, const(0, self.int_expr(a, it).dtype), self.int_expr(a, it), SERIAL, None, EMPTY)
                     for name, a in zip(names, args)]
        else:
            if len(names) != 1:
                raise self.error(syn.target, f"{'range' if func.path == 'serial' else 'T.' + func.path} "
                                 f"defines one loop variable, not {len(names)}")
            loops = [self.loop_header(names[0], func.path, args, kwargs, it)]
        vars_ = []
        for name, lo, extent, _kind, _thread, _annotations in loops:
            var = Var(name, extent.dtype)
            vars_.append(var)
            self.loop_doms[var] = (lo, extent)
        body = self.scoped(lambda: self.body(syn.body), dict(zip(names, vars_)))
        for var, (_name, lo, extent, kind, thread, loop_annotations) in reversed(list(zip(vars_, loops))):
            binding = IterVar(None, Var("", var.dtype), THREAD_INDEX, thread) if thread else None
            body = For(var, lo, extent, kind, body, binding, loop_annotations, span=self.span(syn))
        return body

    def int_expr(self, value: Any, syn: Any) -> PrimExpr:
        if isinstance(value, (PrimExpr, int)) and not isinstance(value, bool):
            return arith.to_expr(value)
        raise self.error(syn, f"expected an integer extent, got {_describe(value)}")

    def loop_header(self, name: str, kind: str, args: list, kwargs: dict, syn: Any) -> tuple:
        thread = kwargs.pop("thread", None)
        annotations = _norm_attrs(kwargs.pop("annotations", None) or {})
        if kwargs:
            raise self.error(syn, f"unexpected argument {next(iter(kwargs))!r} for a loop")
        if kind == "thread_binding" and thread is None:
            raise self.error(syn, "T.thread_binding needs thread=\"threadIdx.x\" (or another thread)")
        if not 1 <= len(args) <= 2:
            raise self.error(syn, f"a loop takes an extent, or a start and an end; got {len(args)} "
                             f"argument{'s' if len(args) != 1 else ''}")
        if len(args) == 1:
            extent = self.int_expr(args[0], syn)
            lo = const(0, extent.dtype)
        else:
            lo, end = arith.match_types(self.int_expr(args[0], syn), self.int_expr(args[1], syn))
            extent = arith_extent(lo, end)
        return (name, lo, extent, _LOOP_KINDS[kind], thread, annotations)

    # ---------------------------------------------------------------- with-scopes
    def stmt_With(self, syn: S.With, rest: list) -> Any:
        item = syn.item
        if isinstance(item, S.Call):
            func = self.ev(item.func)
            if isinstance(func, Builtin) and func.path in WITH_BUILTINS:
                return WITH_BUILTINS[func.path](self, syn, item)
        raise self.error(item, "expected a TensorIR scope: T.block, T.init, T.launch_thread, T.attr, ...")

    def with_block(self, syn: S.With, call: S.Call) -> Stmt:
        args = [self.ev(a) for a in call.args]
        kwargs = {k: self.ev(v) for k, v in call.kwargs}
        name = args[0] if args else kwargs.get("name_hint", "")
        if not isinstance(name, str):
            raise self.error(call, "a block's name is a string")
        frame = BlockFrame(name)
        self.blocks.append(frame)
        try:
            body = self.scoped(lambda: self.body(syn.body, syn))
        finally:
            self.blocks.pop()
        block = Block(tuple(frame.iter_vars), tuple(frame.alloc_buffers), tuple(frame.match_buffers),
                      tuple(frame.reads or ()), tuple(frame.writes or ()), name, frame.init, body,
                      _norm_attrs(frame.annotations) if frame.annotations else EMPTY, span=self.span(call))
        if frame.reads is None or frame.writes is None:
            reads, writes = infer_block_regions(block)
            block = block.with_changes(reads=reads if frame.reads is None else block.reads,
                                       writes=writes if frame.writes is None else block.writes)
        if kwargs.get("no_realize"):
            return block
        predicate = frame.predicate if frame.predicate is not None else const(True)
        return BlockRealize(tuple(frame.iter_values), predicate, block, span=self.span(call))

    def current_block(self, syn: Any, what: str) -> BlockFrame:
        if not self.blocks:
            raise self.error(syn, f"{what} is only allowed inside a block")
        return self.blocks[-1]

    def with_init(self, syn: S.With, call: S.Call) -> Any:
        frame = self.current_block(call, "T.init()")
        carry(self.source, syn, syn.body[0])  # comments before `with T.init():` go inside
        frame.init = self.scoped(lambda: self.body(syn.body))
        return _Header()

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

    def with_scoped_assign(self, syn: S.With, call: S.Call) -> Stmt:
        """``with T.decl_buffer(...) as B:`` and the other allocations: the with-form that the
        printer uses when the statement is not the last of its body."""
        if syn.target is None:
            raise self.error(call, "write 'with ... as name:'")
        func = self.ev(call.func)
        result = ASSIGN_BUILTINS[func.path](self, syn.target, call, syn.body)
        return result.stmt if isinstance(result, _TakesRest) else result

    def with_assert(self, syn: S.With, call: S.Call) -> Stmt:
        args = [self.ev(a) for a in call.args]
        if len(args) != 2:
            raise self.error(call, "T.Assert takes a condition and a message")
        fake = S.Assert(call.args[0], call.args[1]).at(call, call)
        return self.stmt_Assert(fake, syn.body).stmt

    def with_let(self, syn: S.With, call: S.Call) -> Stmt:
        if syn.target is None:
            raise self.error(call, "write 'with T.LetStmt(value) as name:'")
        name = self.target_name(syn.target)
        value = self.ev_expr(call.args[0])
        var = Var(name, value.dtype)
        return LetStmt(var, value, self.scoped(lambda: self.body(syn.body), {name: var}), span=self.span(call))

    # ---------------------------------------------------------------- buffers
    def buffer_decl(self, name: str, args: list, kwargs: dict, syn: Any, scope_default: str = "global") -> Buffer:
        """T.Buffer / T.alloc_buffer / T.match_buffer / T.decl_buffer arguments to a Buffer."""
        kwargs = dict(kwargs)
        shape = args[0] if args else kwargs.pop("shape", None)
        if shape is None:
            raise self.error(syn, "a buffer needs a shape")
        dtype = args[1] if len(args) > 1 else kwargs.pop("dtype", "float32")
        kwargs.pop("dtype", None)
        if len(args) > 2:
            kwargs.setdefault("data", args[2])
        if isinstance(shape, (int, PrimExpr)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise self.error(syn, f"a buffer shape is a tuple, got {_describe(shape)}")
        dims = tuple(self.quoted_size(s, syn) if isinstance(s, str) else self.int_expr(s, syn)
                     for s in shape)
        dt = self.dtype_of(dtype, syn)
        data = kwargs.pop("data", None)
        if data is not None and not (isinstance(data, Var) and data.dtype == handle):
            raise self.error(syn, f"data= must be a handle variable, got {_describe(data)}")
        scope = kwargs.pop("scope", scope_default)
        strides = tuple(self.int_expr(s, syn) for s in (kwargs.pop("strides", None) or ()))
        elem_offset = kwargs.pop("elem_offset", None)
        if elem_offset is not None:
            elem_offset = self.int_expr(elem_offset, syn)
            if isinstance(elem_offset, IntImm) and elem_offset.value == 0:
                elem_offset = None
        align = kwargs.pop("align", -1)
        align = DEFAULT_ALIGN if align in (-1, None) else int(align)
        offset_factor = int(kwargs.pop("offset_factor", None) or 0)
        buffer_type = kwargs.pop("buffer_type", "default")
        if buffer_type == "auto":  # how buffer_type="auto_broadcast" is written
            buffer_type = "auto_broadcast"
        axis_separators = tuple(kwargs.pop("axis_separators", None) or ())
        if kwargs:
            raise self.error(syn, f"unexpected buffer argument {next(iter(kwargs))!r}")
        if data is None:
            data = Var(name, handle, PointerType(dt, scope))
        elif scope != "global" and data.type_annotation is None:
            data = Var(data.name, handle, PointerType(dt, scope))
        return decl_buffer(dims, dt, name, data=data, strides=strides, elem_offset=elem_offset,
                           data_alignment=align, offset_factor=offset_factor,
                           buffer_type=buffer_type, axis_separators=axis_separators,
                           span=self.span(syn))

    def buffer_view(self, target: Any, method: BufferMethod, call: S.Call, rest: list) -> Any:
        name = self.target_name(target)
        args = [self.ev(a) for a in call.args]
        kwargs = {k: self.ev(v) for k, v in call.kwargs}
        shape = tuple(args) if args and not isinstance(args[0], (tuple, list)) else (args[0] if args else ())
        base = method.buffer
        buf = self.buffer_decl(name, [shape], {"dtype": kwargs.pop("dtype", str(base.dtype)),
                                               "data": base.data, **kwargs}, call)
        return _TakesRest(DeclBuffer(buf, self.rest_body(rest, {name: buf}), span=self.assigned_span(call, target)))


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" or word.startswith(("int", "uint")) else "a"


def _python_error(e: Exception) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class _TakesRest:
    """A statement that took the rest of the body as its own."""

    __slots__ = ("stmt",)

    def __init__(self, stmt: Stmt):
        self.stmt = stmt


class _Header:
    """A statement that changed the enclosing block or function instead of making a statement."""

    __slots__ = ()


def _is_root_realize(body: Stmt) -> bool:
    return isinstance(body, BlockRealize) and not body.block.iter_vars and not body.iter_values


# ---------------------------------------------------------------- statement builtins
def _call_args(b: TIRBuilder, call: S.Call) -> tuple[list, dict]:
    return [b.ev(a) for a in call.args], {k: b.ev(v) for k, v in call.kwargs}


def _func_attr(b: TIRBuilder, call: S.Call, rest: list) -> Any:
    if b.func is None or b.blocks or len(b.scopes) != 2:  # scopes: the globals, the function
        raise b.error(call, "T.func_attr is only allowed at the top level of a function body")
    args, _ = _call_args(b, call)
    if len(args) != 1 or not isinstance(args[0], dict):
        raise b.error(call, "T.func_attr takes one dict")
    b.func.attrs.update(_norm_attrs(args[0]))
    return _Header()


def _where(b: TIRBuilder, call: S.Call, rest: list) -> Any:
    frame = b.current_block(call, "T.where")
    frame.predicate = b.ev_expr(call.args[0])
    return _Header()


def _regions(kind: str) -> Callable:
    def build(b: TIRBuilder, call: S.Call, rest: list) -> Any:
        frame = b.current_block(call, f"T.{kind}")
        values = [b.ev(a) for a in call.args]
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = list(values[0])
        regions = [b.to_region(v, a) for v, a in zip(values, call.args if len(call.args) == len(values) else [call] * len(values))]
        setattr(frame, kind, regions)
        return _Header()
    return build


def _block_attr(b: TIRBuilder, call: S.Call, rest: list) -> Any:
    frame = b.current_block(call, "T.block_attr")
    args, _ = _call_args(b, call)
    if len(args) != 1 or not isinstance(args[0], dict):
        raise b.error(call, "T.block_attr takes one dict")
    frame.annotations.update(args[0])
    return _Header()


def _evaluate(b: TIRBuilder, call: S.Call, rest: list) -> Any:
    return Evaluate(b.ev_expr(call.args[0]), span=b.span(call))


def _attr_stmt(b: TIRBuilder, call: S.Call, rest: list) -> Any:
    node, key, value = b.attr_args(call)
    return _TakesRest(AttrStmt(node, key, value, b.rest_body(rest), span=b.span(call)))


STMT_BUILTINS: dict[str, Callable] = {
    "func_attr": _func_attr, "where": _where, "reads": _regions("reads"),
    "writes": _regions("writes"), "block_attr": _block_attr, "sblock_attr": _block_attr,
    "evaluate": _evaluate, "attr": _attr_stmt,
}


def _new_axis(b: TIRBuilder, name: str, kind: str, dom: Any, binding: Any, call: S.Call,
              dtype: Any = None) -> None:
    frame = b.current_block(call, "T.axis")
    if frame.header_done:
        raise b.error(call, "block iterators must be declared at the top of the block")
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = arith.match_types(b.int_expr(dom[0], call), b.int_expr(dom[1], call))
        rng = Range(lo, arith_extent(lo, hi))
    else:
        extent = b.int_expr(dom, call)
        rng = Range(const(0, extent.dtype), extent)
    value = b.int_expr(binding, call)
    if dtype is not None:
        var_dtype = b.dtype_of(dtype, call)
    else:
        var_dtype = rng.extent.dtype
    if value.dtype != var_dtype:
        value = arith.cast(var_dtype, value)
    var = Var(name, var_dtype)
    frame.iter_vars.append(IterVar(rng, var, kind, span=b.span(call)))
    frame.iter_values.append(value)
    b.define(name, var)


def _axis(kind: str) -> Callable:
    def build(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
        args, kwargs = _call_args(b, call)
        if len(args) < 2 and "binding" not in kwargs:
            raise b.error(call, f"T.axis.{kind} takes a domain and a binding: T.axis.{kind}(128, i)")
        binding = args[1] if len(args) > 1 else kwargs["binding"]
        _new_axis(b, b.target_name(target), _AXIS_KINDS[kind], args[0], binding, call, kwargs.get("dtype"))
        return _Header()
    return build


def _axis_remap(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    args, _ = _call_args(b, call)
    if len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], (list, tuple)):
        raise b.error(call, "T.axis.remap takes a kinds string and a list of loop variables: "
                      "T.axis.remap(\"SSR\", [i, j, k])")
    kinds, loops = args
    targets = target.elts if isinstance(target, S.TupleExpr) else [target]
    if not (len(kinds) == len(loops) == len(targets)):
        raise b.error(call, f"T.axis.remap: {len(kinds)} kinds, {len(loops)} loop variables and "
                      f"{len(targets)} names must match")
    for kind, loop, t in zip(kinds, loops, targets):
        if kind not in _REMAP_KINDS:
            raise b.error(call, f"T.axis.remap: unknown iterator kind {kind!r}; use 'S' (spatial) or 'R' (reduce)")
        if not isinstance(loop, Var) or loop not in b.loop_doms:
            raise b.error(call, f"T.axis.remap binds loop variables, got {_describe(loop)}")
        lo, extent = b.loop_doms[loop]
        dom = extent if isinstance(lo, IntImm) and lo.value == 0 else (lo, arith.binary(Add, lo, extent))
        _new_axis(b, b.target_name(t), _REMAP_KINDS[kind], dom, loop, call)
    return _Header()


def _alloc_buffer_in_block(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = _call_args(b, call)
    buf = b.buffer_decl(name, args, kwargs, call)
    if b.blocks:
        b.blocks[-1].alloc_buffers.append(buf)
    elif b.func is not None:
        b.func.root_allocs.append(buf)
    b.define(name, buf)
    return _Header()


def _alloc_buffer(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    # The classic dialect's T.alloc_buffer allocates in the enclosing block; TVM 0.27's is a
    # statement that allocates for the rest of the body (its block form is sblock_alloc_buffer).
    if b.dialect.block_alloc == "alloc_buffer":
        return _alloc_buffer_in_block(b, target, call, rest)
    return _alloc_stmt("global")(b, target, call, rest)


def _alloc_stmt(scope: str) -> Callable:
    def build(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
        name = b.target_name(target)
        args, kwargs = _call_args(b, call)
        annotations = _norm_attrs(kwargs.pop("annotations", None) or {})
        buf = b.buffer_decl(name, args, kwargs, call, scope_default=scope)
        return _TakesRest(AllocBuffer(buf, b.rest_body(rest, {name: buf}), annotations or EMPTY,
                                      span=b.assigned_span(call, target)))
    return build


def _decl_buffer(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = _call_args(b, call)
    if kwargs.get("data") is None and len(args) < 3:
        return _alloc_stmt("global")(b, target, call, rest)
    buf = b.buffer_decl(name, args, kwargs, call)
    return _TakesRest(DeclBuffer(buf, b.rest_body(rest, {name: buf}), span=b.assigned_span(call, target)))


def _buffer_alias(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = _call_args(b, call)
    b.define(name, b.buffer_decl(name, args, kwargs, call))
    return _Header()


def _match_buffer(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = _call_args(b, call)
    if not args:
        raise b.error(call, "T.match_buffer takes a parameter (or region) and a shape")
    source, args = args[0], args[1:]
    if b.blocks:
        region = b.to_region(source, call)
        buf = b.buffer_decl(name, args, kwargs, call)
        b.blocks[-1].match_buffers.append(MatchBufferRegion(buf, region, span=b.span(call)))
    else:
        frame = b.func
        if frame is None or not isinstance(source, Var) or source not in frame.params:
            raise b.error(call, f"T.match_buffer outside a block matches a handle parameter of the "
                          f"function, not {_describe(source)}")
        if source in frame.buffer_map:
            raise b.error(call, f"parameter {source.name!r} is already bound to a buffer")
        buf = b.buffer_decl(name, args, kwargs, call)
        frame.buffer_map[source] = buf
    b.define(name, buf)
    return _Header()


def _launch_thread_assign(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    return _TakesRest(b.launch_thread(name, call, lambda names: b.rest_body(rest, names),
                                      b.assigned_span(call, target)))


def _allocate(b: TIRBuilder, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = _call_args(b, call)
    extents = args[0] if args else kwargs.get("extents")
    dtype = b.dtype_of(args[1] if len(args) > 1 else kwargs.get("dtype", "float32"), call)
    scope = args[2] if len(args) > 2 else kwargs.get("scope", "global")
    cond = args[3] if len(args) > 3 else kwargs.get("condition", True)
    annotations = _norm_attrs(kwargs.get("annotations") or {})
    var = Var(name, handle, PointerType(dtype, scope))
    return _TakesRest(Allocate(var, dtype, tuple(b.int_expr(e, call) for e in extents),
                               arith.to_expr(cond), b.rest_body(rest, {name: var}),
                               annotations or EMPTY, span=b.assigned_span(call, target)))


ASSIGN_BUILTINS: dict[str, Callable] = {
    "axis.spatial": _axis("spatial"), "axis.reduce": _axis("reduce"), "axis.scan": _axis("scan"),
    "axis.opaque": _axis("opaque"), "axis.remap": _axis_remap,
    "alloc_buffer": _alloc_buffer, "sblock_alloc_buffer": _alloc_buffer_in_block,
    "alloc_shared": _alloc_stmt("shared"), "alloc_local": _alloc_stmt("local"),
    "decl_buffer": _decl_buffer, "Buffer": _buffer_alias, "match_buffer": _match_buffer,
    "launch_thread": _launch_thread_assign, "allocate": _allocate,
}

WITH_BUILTINS: dict[str, Callable] = {
    "block": TIRBuilder.with_block, "sblock": TIRBuilder.with_block, "init": TIRBuilder.with_init,
    "launch_thread": TIRBuilder.with_launch_thread, "attr": TIRBuilder.with_attr,
    "LetStmt": TIRBuilder.with_let, "Assert": TIRBuilder.with_assert,
    **{name: TIRBuilder.with_scoped_assign for name in (
        "decl_buffer", "alloc_buffer", "alloc_shared", "alloc_local", "allocate")},
}


def _quoted_problem(text: str) -> str:
    return f"a quoted buffer dimension is an expression of sizes, got {text!r}"


def _names_in(syn: Any) -> list[str]:
    """The plain names an expression's syntax reads, first occurrence first."""
    names: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, S.Name):
            if node.id not in names:
                names.append(node.id)
        elif isinstance(node, S.Attribute):
            visit(node.value)
        elif isinstance(node, (list, tuple)):
            for item in node:
                visit(item)
        elif isinstance(node, S.Syn):
            for name in type(node).__slots__:
                visit(getattr(node, name))

    visit(syn)
    return names
