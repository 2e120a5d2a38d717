"""``@T.prim_func``: the signature (scalar and handle parameters, buffers inline as
``A: T.Buffer(...)`` or by ``T.match_buffer``, TVM 0.27's quoted sizes such as
``T.Buffer(("(n + 1) // 2", 4))``), ``T.func_attr``, the return type, and the root block that
holds the function-level allocations."""
from __future__ import annotations

from typing import Any

from ...ir.analysis import collect_statements, contains_block
from ...ir.buffer import Buffer
from ...ir.dtype import DataType, handle, is_dtype_name
from ...ir.errors import ScriptError, Source
from ...ir.expr import PointerType, PrimExpr, PrimType, TupleType, Var, const
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import AllocBuffer, AttrStmt, Block, BlockRealize, Stmt
from ...ir.visitor import collect
from .. import syntax as S
from .blocks import implicit_root
from .evaluator import Builtin, FunctionFrame, _describe
from .attrs import norm_attrs
from .rules import Header, call_args, parses
from .text import ParamUsed, comments_of, def_name
from .buffers import laid_out_scalar
from .threads import is_launch


PERSISTENT = "tir.persistent_kernel"  # (``tirx.persistent_kernel`` in TVM 0.27's text)


def _is_persistent(f: PrimFunc) -> bool:
    """Whether TVM 0.27 decorates ``f`` ``persistent=True``: whenever the attribute is present,
    whatever its value (``{"tirx.persistent_kernel": False}`` prints so too, and reads back true)."""
    return PERSISTENT in f.attrs


class FunctionParsing:
    """Reading ``@T.prim_func`` (mixed into the TIRBuilder)."""

    def prim_func(self, fdef: S.FunctionDef, decorator_kwargs: dict) -> PrimFunc:
        self.func = frame = FunctionFrame(s_tir=bool(decorator_kwargs.get("s_tir")))
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
        if decorator_kwargs.get("persistent"):  # (TVM 0.27's persistent kernel: an attribute)
            attrs[PERSISTENT] = True
        s_tir = decorator_kwargs.get("s_tir")
        if s_tir is None:
            s_tir = contains_block(body)
        buffer_map = {p: frame.buffer_map[p] for p in frame.params if p in frame.buffer_map}
        func = PrimFunc(tuple(frame.params), FrozenDict(buffer_map), body, ret_type,
                        FrozenDict(attrs), bool(s_tir), span=self.span(fdef),
                        source_dialect=self.dialect.name)
        self.func = None
        # (no well-formedness check here: TVM's parser reads accesses out of bounds, which its own
        # passes print, and contradicting iteration kinds; the build refuses them, ir/well_formed.py)
        return func

    def param(self, p: S.Param, frame: FunctionFrame) -> None:
        if p.annotation is None:
            raise self.error(p, f"parameter {p.name!r} needs a type, such as T.handle, T.int32 "
                             f"or T.Buffer((128,), \"float32\")")
        if frame.signature_dtypes is not None:
            self.predefine_quoted_sizes(p.annotation)
        ann = self.ev(p.annotation)
        scalar = (isinstance(ann, Builtin) and is_dtype_name(ann.path) and ann.path != "handle") or \
            (isinstance(ann, PrimType) and ann.dtype != handle)
        if not scalar and p.name in frame.size_vars:
            raise self.error(p, f"{p.name} is already bound to a non-PrimVar value: a quoted size of "
                             f"the signature names it")  # (TVM's words)
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
        from ..parser import parse_syntax

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
        kwargs = dict(annotation.kwargs)
        shape = annotation.args[0] if annotation.args else kwargs.get("shape")
        strides = _elements(kwargs.get("strides"))
        for dim in [*_elements(shape), *strides]:
            if not (isinstance(dim, S.Constant) and isinstance(dim.value, str)):
                continue
            if any(dim is s for s in strides) and self.new_stride_name(dim.value):
                # a new variable of the buffer's own (TVM's stride "s0"), though a name defined
                # before: the strides after it may name it
                var = Var(dim.value, DataType("int32"))
                self.func.stride_vars.append(var)
                self.define(dim.value, var)
            else:
                self.define_quoted_names(self.quoted_syntax(dim.value, dim))

    def new_stride_name(self, text: str) -> bool:
        """Whether a quoted stride of a signature buffer names a new variable (``"s0"``, as TVM
        prints a stride variable of the buffer's own), not a scalar parameter."""
        return text.isidentifier() and text not in self.func.signature_dtypes


def _shared_threads_and_scalars(f: PrimFunc) -> tuple[set, set]:
    """One walk of the body: the ids of the thread variables several launches share (TVM
    declares them with ``T.env_thread``) and, in a function without blocks, of the one-element
    allocations that TVM 0.27 lays out and so writes as scalars (``x: T.int32``); its one-element
    parameters too (``A = v`` stores into ``A: T.Buffer((1,), ...)``)."""
    seen: set = set()
    shared: set = set()
    laid_out: set = {id(b) for b in f.buffer_map.values() if not f.s_tir and b.one_element}
    for node in collect_statements(f.body, (AttrStmt, AllocBuffer)):
        if is_launch(node):
            key = id(node.node.var)
            (shared if key in seen else seen).add(key)
        elif not f.s_tir and isinstance(node, AllocBuffer) and laid_out_scalar(node.buffer):
            laid_out.add(id(node.buffer))
    return shared, laid_out


def _elements(syn: Any) -> list:
    """The items of a tuple or list literal; a single other expression alone."""
    if syn is None:
        return []
    return list(syn.elts) if isinstance(syn, (S.TupleExpr, S.ListExpr)) else [syn]


def _is_root_realize(body: Stmt) -> bool:
    return isinstance(body, BlockRealize) and not body.block.iter_vars and not body.iter_values


@parses("call", "func_attr")
def _func_attr(b: Any, call: S.Call, rest: list) -> Any:
    if b.func is None or b.blocks or len(b.scopes) != 2:  # scopes: the globals, the function
        raise b.error(call, "T.func_attr is only allowed at the top level of a function body")
    args, _ = call_args(b, call)
    if len(args) != 1 or not isinstance(args[0], dict):
        raise b.error(call, "T.func_attr takes one dict")
    b.func.attrs.update(norm_attrs(args[0], b.dialect))
    return Header()


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


class FunctionPrinting:
    """Printing ``@T.prim_func`` (mixed into the TIRPrinter)."""

    def prim_func(self, f: PrimFunc, name: str, decorate_s_tir: bool) -> list[str]:
        self.uses_tir = True  # (@T.prim_func, and its statements' T.<name> calls)
        # A handle parameter prints inline as ``A: T.Buffer(...)`` unless the body uses the
        # handle itself; finding that out costs a walk of the whole body, so print optimistically
        # and start again without that parameter inlined when the body turns out to use it.
        if self.d.typevar_header is not None:  # TVM 0.27: a scalar parameter may size a signature buffer
            self.scalar_params = {id(p) for p in f.params if p not in f.buffer_map}
        inlined = self.inlinable_params(f)
        mark, indent, waiting = len(self.lines), self.indent, len(self.awaiting)
        released = self.release_shadowed_names(f)
        try:
            while True:
                self.inlined = inlined
                try:
                    self.root_comment_at = None
                    notes = comments_of(f)
                    head = self.comments_before(notes) if notes is not None else []
                    self.prim_func_once(f, name, decorate_s_tir, inlined)
                    if notes is not None:  # (its own comments go after the generated root line)
                        self.comments_after(notes, head, self.root_comment_at)
                    return self.lines
                except ParamUsed as used:
                    while len(self.namer.frames) > 1:
                        self.namer.pop()
                    del self.lines[mark:]
                    del self.awaiting[waiting:]  # (the marks of the attempt's commented nodes)
                    self.pending.clear()
                    self.indent = indent
                    inlined = inlined - {used.param}
        finally:
            for taken in released:
                self.namer.used[taken] = self.namer.used.get(taken, 0) + 1
            self.scalar_params = set()

    def release_shadowed_names(self, f: PrimFunc) -> list[str]:
        """Module TypeVar names that a scalar parameter of ``f`` may take while ``f`` prints
        (``n: T.int64`` beside ``n = TypeVar("n")``): those ``f`` does not read as TypeVars."""
        names = set(self.typevars.values())
        candidates = [p for p in f.params if p not in f.buffer_map and p.name in names]
        if not candidates:  # (the common case: no walk of the function)
            return []
        read = {self.typevars[id(v)] for v in collect(f, Var) if id(v) in self.typevars}
        released = []
        for p in candidates:
            name = p.name
            if name not in read and self.namer.used.get(name) == 1 and name not in released:
                del self.namer.used[name]
                released.append(name)
        return released

    def prim_func_once(self, f: PrimFunc, name: str, decorate_s_tir: bool, inlined: set) -> None:
        name = def_name(name)
        namer = self.namer
        self.func_body, self.use_frames = f.body, None  # (where free variables are used: when one is met)
        namer.push()
        self.func_frame = len(namer.frames) - 1
        self.relaunched, self.laid_out = _shared_threads_and_scalars(f)
        self.in_s_tir = f.s_tir
        dec_args = []
        if f.is_private:
            dec_args.append("private=True")
        if decorate_s_tir and f.s_tir:
            dec_args.append("s_tir=True")
        persistent = self.d.name != "classic" and _is_persistent(f)
        if persistent:
            dec_args.append("persistent=True")
        self.emit_aside("@T.prim_func" + (f"({', '.join(dec_args)})" if dec_args else ""))
        params = []
        defined: set = set()
        # per inlined buffer: the sizes its quoted dimensions define, (name, var, a whole dimension?)
        self.signature_sizes = []
        for p in f.params:
            if p in inlined:
                buf = f.buffer_map[p]
                self.signature_sizes.append([])
                params.append(f"{self.define_buffer(buf)}: "
                              f"{self.buffer_decl(buf, 'Buffer', [], dtype_always=True, signature=defined)}")
            else:
                ann = p.type_annotation if p.type_annotation is not None else PrimType(p.dtype)
                params.append(f"{namer.get(p) or namer.define(p, p.name)}: {self.type_doc(ann)}")
                defined.add(id(p))
        ret = ""
        if f.ret_type is not None and not (isinstance(f.ret_type, TupleType) and not f.ret_type.fields):
            ret = f" -> {self.type_doc(f.ret_type)}"
        self.emit(f"def {name}({', '.join(params)}){ret}:")
        self.indent += 1
        for sizes in self.signature_sizes:
            for n, v, whole in sizes:
                if not whole:
                    self.emit(f"{n} = {self.var_creation(v)}")
            dims = [(n, v) for n, v, whole in sizes if whole]
            if dims:
                self.emit(f"{', '.join(n for n, _ in dims)} = {', '.join(self.var_creation(v) for _, v in dims)}")
        attrs = {k: v for k, v in f.attrs.items()
                 if not (k == "global_symbol" and v == name) and not (k == PERSISTENT and persistent)}
        if attrs:
            self.emit(f"T.func_attr({self.attr_dict(attrs)})")
        for p in f.params:
            if p in f.buffer_map and p not in inlined:
                buf = f.buffer_map[p]
                self.top_level(lambda buf=buf, p=p: self.emit(
                    f"{self.define_buffer(buf)} = {self.buffer_decl(buf, 'match_buffer', [self.var(p)])}"))
        root = implicit_root(f.body)
        if root is not None:
            self.root_comment_at = len(self.lines)
            self.emit_aside(f'# with T.{self.d.block}("root"):')
            for buf in root.alloc_buffers:
                self.top_level(lambda buf=buf: self.emit(
                    f"{self.define_buffer(buf)} = {self.buffer_decl(buf, self.d.block_alloc, [])}"))
            self.body(root.body, top=True)
        else:
            self.body(f.body, top=True)
        self.indent -= 1
        namer.pop()

    def inlinable_params(self, f: PrimFunc) -> set:
        """Handle parameters whose buffer may print inline as ``A: T.Buffer(...)``."""
        data_count: dict[int, int] = {}
        for buf in f.buffer_map.values():
            data_count[id(buf.data)] = data_count.get(id(buf.data), 0) + 1
        return {p for p, buf in f.buffer_map.items()
                if data_count[id(buf.data)] == 1 and self.simple_buffer(buf, self.d.name != "classic")}
