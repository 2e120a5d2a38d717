"""Buffers: ``T.Buffer`` (a parameter's type, or an alias), ``T.alloc_buffer`` /
``T.sblock_alloc_buffer`` / ``T.alloc_shared`` / ``T.alloc_local``, ``T.decl_buffer`` (views
of a buffer, ``B.view(...)``, are in views.py), ``T.match_buffer`` (of a parameter or a region),
``T.allocate``; and buffer
regions. A buffer may define its offset and strides as new variables (``offset_factor=16``
without ``elem_offset``, quoted strides), which the body reads as ``A.elem_offset`` and
``A.strides[i]``. The classic dialect's ``T.alloc_buffer`` allocates in the enclosing block,
TVM 0.27's for the rest of the body (its block form is ``T.sblock_alloc_buffer``)."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, Callable

from ...ir import arith
from ...ir.buffer import DEFAULT_ALIGN, Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from ...ir.dtype import DataType, handle
from ...ir.expr import BufferLoad, FloorDiv, IntImm, PointerType, PrimExpr, Var
from ...ir.node import EMPTY
from ...ir.structural import structural_equal
from ...ir.tile_layout import ComposeLayout, TileLayout
from ...ir.stmt import Allocate, AllocBuffer, BufferStore, DeclBuffer, LetStmt, SeqStmt, Stmt, seq
from ...ir.visitor import walk
from .. import syntax as S
from ..dialect import CLASSIC
from .evaluator import _describe
from .layouts import allocated_addr_text, layout_text
from .attrs import norm_attrs
from .rules import EXPR_BUILTINS, PARSE, Header, TakesRest, call_args, parses, prints
from .text import display_add, is_filler, quote


class BufferParsing:
    """Reading buffer declarations (mixed into the TIRBuilder)."""

    def buffer_decl(self, name: str, args: list, kwargs: dict, syn: Any, scope_default: str = "global",
                    index_strides: bool = False) -> Buffer:
        """T.Buffer / T.alloc_buffer / T.match_buffer / T.decl_buffer arguments to a Buffer.
        ``index_strides``: a stride's new variable takes the first dimension's dtype (as
        T.match_buffer of a region makes it; the others make int32 ones)."""
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
        scope = self.scope_name(kwargs.pop("scope", scope_default), syn)
        strides = kwargs.pop("strides", None) or ()
        if not isinstance(strides, (tuple, list)):
            raise self.error(syn, f"a buffer's strides are a tuple, got {_describe(strides)}")
        var_dtype = dims[0].dtype if dims and index_strides else DataType("int32")
        strides = tuple(self.quoted_stride(s, var_dtype, syn) if isinstance(s, str) else self.int_expr(s, syn)
                        for s in strides)
        elem_offset = kwargs.pop("elem_offset", None)
        offset_factor = kwargs.pop("offset_factor", None) or 0
        if isinstance(offset_factor, IntImm):
            offset_factor = offset_factor.value
        if isinstance(offset_factor, bool) or not isinstance(offset_factor, int) or offset_factor < 0:
            raise self.error(syn, f"offset_factor is a non-negative integer, got {offset_factor!r}")
        if elem_offset is not None:
            elem_offset = self.int_expr(elem_offset, syn)
        elif offset_factor:
            # a factor and no offset: the offset is a new variable, which the body reads as
            # ``A.elem_offset``
            elem_offset = Var("elem_offset", dims[0].dtype if dims else DataType("int32"))
        align = kwargs.pop("align", -1)
        align = DEFAULT_ALIGN if align in (-1, None) else int(align)
        buffer_type = kwargs.pop("buffer_type", "default")
        if buffer_type == "auto":  # how buffer_type="auto_broadcast" is written
            buffer_type = "auto_broadcast"
        axis_separators = tuple(kwargs.pop("axis_separators", None) or ())
        layout_syn = dict(syn.kwargs).get("layout", syn) if isinstance(syn, S.Call) else syn
        layout, no_layout = self.tile_layout(kwargs.pop("layout", "default"), scope, layout_syn)
        allocated_addr = kwargs.pop("allocated_addr", None)
        allocated_addr = () if allocated_addr is None else tuple(
            self.int_expr(a, syn) for a in (allocated_addr if isinstance(allocated_addr, (tuple, list)) else [allocated_addr]))
        if kwargs:
            raise self.error(syn, f"unexpected buffer argument {next(iter(kwargs))!r}")
        if data is None:
            data = Var(name, handle, PointerType(dt, scope))
        elif scope != "global" and data.type_annotation is None:
            data = Var(data.name, handle, PointerType(dt, scope))
        return decl_buffer(dims, dt, name, data=data, strides=strides, elem_offset=elem_offset,
                           data_alignment=align, offset_factor=offset_factor,
                           buffer_type=buffer_type, axis_separators=axis_separators, no_layout=no_layout,
                           layout=layout, allocated_addr=allocated_addr, span=self.span(syn))

    def tile_layout(self, layout: Any, scope: str, syn: Any) -> tuple:
        """(tile layout, no layout) of a declaration's ``layout=``: a T.TileLayout or
        T.ComposeLayout, None (TVM 0.27's "no layout"), or "default" (TVM's default: none in a
        Trainium scope)."""
        if layout is None or (layout == "default" and scope in ("trn.sbuf", "trn.psum")):
            return None, True
        if isinstance(layout, str) and layout == "default":
            return None, False
        if not isinstance(layout, (TileLayout, ComposeLayout)):
            raise self.error(syn, f"a buffer's layout= is a T.TileLayout, a T.ComposeLayout or None, "
                                  f"got {_describe(layout)}")
        if self.func is not None and self.func.s_tir:
            raise self.error(syn, "a buffer of an s_tir PrimFunc takes no tile layout (TVM 0.27 drops it)")
        return layout, False

    def quoted_stride(self, text: str, dtype: DataType, syn: Any) -> PrimExpr:
        """A quoted stride: the name of a new variable the buffer defines (the body reads it as
        ``A.strides[i]``). In a signature that variable was made before the annotation was read
        (see ``predefine_quoted_sizes``), and a scalar parameter's name, or an expression, reads
        as a quoted dimension does."""
        in_signature = self.func is not None and self.func.signature_dtypes is not None
        if in_signature and not self.new_stride_name(text):
            return self.quoted_size(text, syn)
        if in_signature and self.func.stride_vars:
            return self.func.stride_vars.pop(0)
        if not text.isidentifier():
            raise self.error(syn, f"a quoted stride names a new variable, got {text!r}")
        return Var(text, dtype)

    def scope_name(self, scope: Any, syn: Any) -> str:
        if not isinstance(scope, str):
            raise self.error(syn, f"a storage scope is a string such as \"shared\", got {_describe(scope)}")
        return scope

    def data_parent(self, call: S.Call) -> Buffer | None:
        """The buffer ``B`` of a declaration's ``data=B.data`` (TVM prints that same buffer)."""
        return self.named_data(dict(call.kwargs).get("data", call.args[2] if len(call.args) > 2 else None))

    @parses("with", "decl_buffer", "alloc_buffer", "alloc_shared", "alloc_local", "allocate")
    def with_scoped_assign(self, syn: S.With, call: S.Call) -> Stmt:
        """``with T.decl_buffer(...) as B:`` and the other allocations: the with-form that the
        printer uses when the statement is not the last of its body."""
        if syn.target is None:
            raise self.error(call, "write 'with ... as name:'")
        func = self.ev(call.func)
        result = PARSE["assign"][func.path](self, syn.target, call, syn.body)
        return result.stmt if isinstance(result, TakesRest) else result


def _alloc_buffer_in_block(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    buf = b.buffer_decl(name, args, kwargs, call)
    if b.blocks:
        b.blocks[-1].alloc_buffers.append(buf)
    elif b.func is not None:
        b.func.root_allocs.append(buf)
    b.define(name, buf)
    return Header()


def _alloc_buffer(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    # The classic dialect's T.alloc_buffer allocates in the enclosing block; TVM 0.27's is a
    # statement that allocates for the rest of the body (its block form is sblock_alloc_buffer).
    if b.dialect.block_alloc == "alloc_buffer":
        return _alloc_buffer_in_block(b, target, call, rest)
    return _alloc_stmt("global")(b, target, call, rest)


def _alloc_stmt(scope: str) -> Callable:
    def build(b: Any, target: Any, call: S.Call, rest: list) -> Any:
        name = b.target_name(target)
        args, kwargs = call_args(b, call)
        annotations = norm_attrs(kwargs.pop("annotations", None) or {}, b.dialect)
        buf = b.buffer_decl(name, args, kwargs, call, scope_default=scope)
        prior = next((names[name] for names in reversed(b.scopes) if name in names), None)
        if isinstance(prior, Buffer) and id(prior) in b.free_buffers and _same_memory(prior, buf):
            # (TVM 0.27 prints a buffer used before its allocation, by T.attr, as T.Buffer first;
            # it is allocated once: a second allocation of that name is another buffer)
            buf = prior
            b.free_buffers.discard(id(prior))
        if b.dialect is not CLASSIC and b.func is not None and not b.func.s_tir and laid_out_scalar(buf):
            buf = replace(buf, scalar=True)
        return TakesRest(AllocBuffer(buf, b.rest_body(rest, {name: buf}), annotations or EMPTY,
                                      span=b.assigned_span(call, target)))
    return build


def _same_memory(a: Buffer, b: Buffer) -> bool:
    return (a.dtype == b.dtype and a.scope == b.scope and len(a.shape) == len(b.shape) and not a.strides
            and not b.strides and all(structural_equal(x, y) for x, y in zip(a.shape, b.shape)))


def _offset_of(b: Buffer) -> tuple:
    return () if b.elem_offset is None else (b.elem_offset,)


def laid_out_scalar(buf: Buffer) -> bool:
    """Whether an allocation of a PrimFunc without blocks is a mutable scalar in TVM 0.27, which
    lays such allocations out: one local element. (TVM writes a global or shared one as a scalar
    too, and reads that back as a local one: tvms keeps those buffers, so that they read back.)"""
    return buf.one_element and buf.scope == "local"


def _decl_buffer(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    data = kwargs.get("data", args[2] if len(args) > 2 else None)
    if data is None and kwargs.get("scope") == "tmem":
        # tensor memory is not allocated by a declaration: TVM 0.27 declares a buffer there at
        # the address given, and the declaration stays one
        if kwargs.get("allocated_addr") is None:
            raise b.error(call, 'a T.decl_buffer in scope "tmem" needs its allocated_addr=')
        if isinstance(kwargs["allocated_addr"], (tuple, list)):
            raise b.error(call, "a T.decl_buffer's allocated_addr= is one address")
    elif data is None:
        return _alloc_stmt("global")(b, target, call, rest)
    if isinstance(data, PrimExpr) and not isinstance(data, Var) and data.dtype == handle:
        # ``data=T.tvm_stack_alloca(...)``: the buffer's data pointer is bound to that value
        # (a let of the pointer around the declaration; printed back in one line)
        var = Var(name, handle, PointerType(b.dtype_of(args[1] if len(args) > 1 else kwargs.get("dtype", "float32"), call),
                                            kwargs.get("scope", "global")))
        buf = b.buffer_decl(name, args[:2], {**kwargs, "data": var}, call)
        decl = DeclBuffer(buf, b.rest_body(rest, {name: buf}), span=b.assigned_span(call, target))
        return TakesRest(LetStmt(var, data, decl, span=b.assigned_span(call, target)))
    buf = b.buffer_decl(name, args, kwargs, call)
    return TakesRest(DeclBuffer(buf, b.rest_body(rest, {name: buf}), b.data_parent(call),
                                span=b.assigned_span(call, target)))


def _decl_scalar(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    """``s = T.decl_scalar(T.int32, data=A.data, elem_offset=3, scope="global")``: a mutable
    scalar over existing memory (``byte_offset=`` counts bytes instead of elements)."""
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    names = ("dtype", "data", "scope", "elem_offset", "byte_offset")
    given = {**dict(zip(names, args)), **kwargs}
    if "dtype" not in given or "data" not in given:
        raise b.error(call, "T.decl_scalar takes a dtype, data= and scope=")
    dtype = b.dtype_of(given["dtype"], call)
    offset = given.get("elem_offset")
    if given.get("byte_offset") is not None:
        offset = arith.binary(FloorDiv, arith.to_expr(given["byte_offset"]), dtype.bits * dtype.lanes // 8)
    decl = {"data": given["data"], "scope": given.get("scope", "global")}
    if offset is not None:
        decl["elem_offset"] = offset
    buf = replace(b.buffer_decl(name, [(1,), str(dtype)], decl, call), scalar=True)
    return TakesRest(DeclBuffer(buf, b.rest_body(rest, {name: buf}), span=b.assigned_span(call, target)))


def _buffer_alias(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    buf = b.buffer_decl(name, args, kwargs, call)
    b.free_buffers.add(id(buf))
    b.define(name, buf)
    return Header()


def _match_buffer(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    if not args:
        raise b.error(call, "T.match_buffer takes a parameter (or region) and a shape")
    source, args = args[0], args[1:]
    if b.blocks:
        region = b.to_region(source, call)
        buf = b.buffer_decl(name, args, kwargs, call, index_strides=True)
        b.blocks[-1].match_buffers.append(MatchBufferRegion(buf, region, span=b.span(call)))
    else:
        frame = b.func
        if frame is None or not isinstance(source, Var) or source not in frame.params:
            raise b.error(call, f"T.match_buffer outside a block matches a handle parameter of the "
                          f"function, not {_describe(source)}")
        if source in frame.buffer_map:
            raise b.error(call, f"parameter {source.name!r} is already bound to a buffer")
        # (int32 stride variables, as the T.Buffer annotation that prints this buffer makes)
        buf = b.buffer_decl(name, args, kwargs, call)
        frame.buffer_map[source] = buf
    b.define(name, buf)
    return Header()


def _allocate(b: Any, target: Any, call: S.Call, rest: list) -> Any:
    name = b.target_name(target)
    args, kwargs = call_args(b, call)
    extents = args[0] if args else kwargs.get("extents")
    dtype = b.dtype_of(args[1] if len(args) > 1 else kwargs.get("dtype", "float32"), call)
    scope = args[2] if len(args) > 2 else kwargs.get("scope", "global")
    cond = args[3] if len(args) > 3 else kwargs.get("condition", True)
    annotations = norm_attrs(kwargs.get("annotations") or {}, b.dialect)
    var = Var(name, handle, PointerType(dtype, scope))
    return TakesRest(Allocate(var, dtype, tuple(b.int_expr(e, call) for e in extents),
                               arith.to_expr(cond), b.rest_body(rest, {name: var}),
                               annotations or EMPTY, span=b.assigned_span(call, target)))


for _name, _rule in {"alloc_buffer": _alloc_buffer, "sblock_alloc_buffer": _alloc_buffer_in_block,
                     "alloc_shared": _alloc_stmt("shared"), "alloc_local": _alloc_stmt("local"),
                     "decl_buffer": _decl_buffer, "Buffer": _buffer_alias, "decl_scalar": _decl_scalar,
                     "match_buffer": _match_buffer, "allocate": _allocate}.items():
    parses("assign", _name)(_rule)


def _buffer_type(ev: Any, args: list, kwargs: dict, syn: Any) -> Buffer:
    """A buffer as a parameter's type, ``A: T.Buffer((128,), "float32")`` (TensorIR only: the
    Relax builder reads TensorIR expressions, not buffer declarations)."""
    if not isinstance(ev, BufferParsing):
        raise ev.error(syn, "T.Buffer(...) declares a TensorIR buffer; a Relax function takes "
                            "tensors, such as R.Tensor((4,), \"float32\")")
    return ev.buffer_decl("buffer", args, kwargs, syn)


EXPR_BUILTINS["Buffer"] = _buffer_type


class BufferPrinting:
    """Printing buffer declarations (mixed into the TIRPrinter)."""

    def buffer_decl(self, b: Buffer, method: str, args: list[str], dtype_always: bool = False,
                    signature: set | None = None, data: str | None = None,
                    define_line: Callable[[str], None] | None = None) -> str:
        """``signature``: the parameters defined so far, when ``b`` is a parameter's buffer;
        ``data``: the text of the data pointer's value, when the declaration binds it;
        ``define_line``: where a line declaring new variables of the buffer goes (before the
        declaration, by default).

        As TVM prints a buffer: a new variable that is a stride or the offset, and that the
        buffer's fields use once, is the buffer's own (``A.strides[0]``, ``A.elem_offset``
        elsewhere): the stride prints quoted, the offset not at all (with its offset_factor).
        Other new variables of the fields are declared on a line before it (an offset among
        them still prints: TVM then leaves it out, which reads back as another variable)."""
        uses = Counter(id(v) for e in (*b.shape, *b.strides, *_offset_of(b)) for v in walk(e) if isinstance(v, Var))

        def owned(e: Any) -> bool:
            return isinstance(e, Var) and uses[id(e)] == 1 and not self.is_defined(e, signature)

        fresh: list = []  # new variables declared before the buffer (outside a signature)
        if signature is None:
            for e in (*b.shape, *[e for e in (*b.strides, *_offset_of(b)) if not owned(e)]):
                if isinstance(e, Var) and not self.is_defined(e, None) and all(v is not e for v in fresh):
                    fresh.append(e)
            if fresh:
                names = [self.namer.define(v, v.name) for v in fresh]
                (define_line or self.emit)(f"{', '.join(names)} = {', '.join(self.var_creation(v) for v in fresh)}")
        dims = [self.expr(s) if signature is None else self.signature_dim(s, signature) for s in b.shape]
        shape = "(" + ", ".join(dims) + ("," if len(b.shape) == 1 else "") + ")"
        args = args + [shape]
        if dtype_always or b.dtype.name != "float32":
            args.append(quote(str(b.dtype)))
        if data is not None:
            args.append(f"data={data}")
        elif self.namer.get(b.data) is not None or self.data_owner(b.data, exclude=b) is not None:
            args.append(f"data={self.var(b.data)}")
        if b.strides:
            strides = []
            for i, e in enumerate(b.strides):
                if owned(e):
                    self.own_field(e, b, f".strides[{i}]", signature)
                    strides.append(quote(e.name))
                else:
                    strides.append(self.expr(e) if signature is None else self.signature_stride(e, signature))
            args.append("strides=(" + ", ".join(strides) + ("," if len(b.strides) == 1 else "") + ")")
        own_offset = owned(b.elem_offset)
        if own_offset:
            self.own_field(b.elem_offset, b, ".elem_offset", signature)
        elif b.elem_offset is not None:
            args.append(f"elem_offset={self.expr(b.elem_offset)}")
        if b.scope != "global" and method not in ("alloc_shared", "alloc_local"):
            args.append(f"scope={quote(b.scope)}")
        if b.data_alignment != DEFAULT_ALIGN:
            args.append(f"align={b.data_alignment}")
        if b.offset_factor != 1 or (isinstance(b.elem_offset, Var) and (own_offset or b.elem_offset in fresh)):
            args.append(f"offset_factor={b.offset_factor}")
        if b.no_layout and not self.in_s_tir and self.d is not CLASSIC:
            args.append("layout=None")
        if b.layout is not None:
            args.append("layout=" + layout_text(self, b.layout))
        if b.allocated_addr:
            args.append("allocated_addr=" + allocated_addr_text(self, b.allocated_addr))
        if b.buffer_type != "default":
            args.append('buffer_type="auto"')
        if b.axis_separators:
            args.append("axis_separators=[" + ", ".join(str(a) for a in b.axis_separators) + "]")
        return f"T.{method}({', '.join(args)})"

    def is_defined(self, v: Var, signature: set | None) -> bool:
        """Whether ``v`` has a printable definition here (in a signature: one made so far)."""
        if signature is not None and id(v) in self.scalar_params:
            return id(v) in signature
        return (self.namer.get(v) is not None or id(v) in self.typevars or self.field_of(v) is not None
                or (signature is not None and id(v) in signature))

    def own_field(self, v: Var, b: Buffer, suffix: str, signature: set | None) -> None:
        self.buffer_fields[id(v)] = (b, suffix, v)
        if signature is not None:
            signature.add(id(v))

    def field_of(self, v: Var) -> str | None:
        """``A.elem_offset`` / ``A.strides[i]`` for a variable a buffer in scope owns."""
        owner = self.buffer_fields.get(id(v))
        if owner is None or owner[2] is not v:
            return None
        name = self.namer.get(owner[0])
        return None if name is None else name + owner[1]

    def signature_dim(self, dim: PrimExpr, defined: set) -> str:
        """A dimension of a buffer in a TVM 0.27 signature. It is quoted when it reads a scalar
        parameter or a size not defined yet (the quote defines it, as TVM's parser reads it) or
        when it is an expression over a module TypeVar."""
        if isinstance(dim, IntImm):
            return self.expr(dim)
        found = [v for v in walk(dim) if isinstance(v, Var)]
        early = [v for v in found if id(v) in self.scalar_params and id(v) not in defined]
        for v in early:
            if self.namer.get(v) is None:
                self.namer.define(v, v.name)
            defined.add(id(v))
        # a size no parameter or TypeVar names: the quote defines it, and TVM declares it again
        # at the top of the body (``n, m = T.int32(), T.int32()``, one line per buffer; a size
        # met in a dimension that is an expression, ``"x * 8"``, on a line of its own before)
        fresh = [v for v in dict.fromkeys(found) if id(v) not in self.scalar_params
                 and id(v) not in self.typevars and self.namer.get(v) is None]
        for v in fresh:
            self.signature_sizes[-1].append((self.namer.define(v, v.name, self.func_frame), v, dim is v))
        text = self.expr(dim)
        if early or fresh or (not isinstance(dim, Var) and any(id(v) in self.typevars for v in found)):
            return quote(text)
        return text

    def signature_stride(self, stride: PrimExpr, defined: set) -> str:
        """A stride of a buffer in a TVM 0.27 signature: a variable met first there is quoted
        (which defines it, as for a dimension)."""
        if isinstance(stride, Var) and id(stride) not in defined and id(stride) not in self.typevars \
                and self.namer.get(stride) is None:
            defined.add(id(stride))
            return quote(self.namer.define(stride, stride.name))
        return self.signature_dim(stride, defined)

    def region(self, r: BufferRegion) -> str:
        parts = []
        for rng in r.region:
            if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self.expr(display_add(rng.min, rng.extent))}")
        name = self.buffer(r.buffer)
        if self.d.name != "classic" and (r.buffer.is_scalar or id(r.buffer) in self.laid_out):
            name += ".source"  # (a mutable scalar's name alone is its value)
        return f"{name}[{', '.join(parts) if parts else '()'}]"

    def simple_buffer(self, b: Buffer, with_layout: bool = False) -> bool:
        """``with_layout``: strides, offset, alignment and scope may be given (TVM 0.27's
        signature annotations write them); an offset hoisted to a module TypeVar prints inline
        anyway."""
        if (b.scope != "global" and not with_layout) or b.axis_separators or b.buffer_type != "default":
            return False
        own_offset = b.elem_offset is not None and id(b.elem_offset) not in self.typevars
        if not with_layout and (b.strides or own_offset or b.offset_factor != 1 or b.data_alignment != DEFAULT_ALIGN):
            return False
        # sizes (and an offset) the signature can name: module TypeVars and scalar parameters;
        # in TVM 0.27's signature also any other size, quoted where it first appears, and an
        # offset variable of the buffer's own (written as its offset_factor)
        offset = _offset_of(b)
        if isinstance(b.elem_offset, Var) and not any(n is b.elem_offset for e in (*b.shape, *b.strides)
                                                       for n in walk(e)):
            offset = ()
        for s, quotable in [(s, with_layout) for s in b.shape] + [(s, False) for s in offset]:
            for n in walk(s):
                if (isinstance(n, Var) and id(n) not in self.typevars and id(n) not in self.scalar_params
                        and not (quotable and n.dtype.is_integer)):
                    return False
        return True

    @prints(DeclBuffer)
    def st_decl_buffer(self, s: DeclBuffer, concise: bool, top: bool) -> None:
        b = s.buffer
        rhs = self.view_or_decl(b, s.data_of)
        self.scope(concise, top, None, rhs, s.body, lambda: self.define_buffer(b), flat=True)

    @prints(AllocBuffer)
    def st_alloc_buffer(self, s: AllocBuffer, concise: bool, top: bool) -> None:
        b = s.buffer
        if (concise and not s.annotations and len(b.shape) == 1  # (a 0-d buffer is no scalar)
                and self.prints_as_scalar(b, (IntImm(b.shape[0].dtype, 0),))):
            self.scalar_decl(s, top)
            return
        if self.d.name == "classic":
            method = "decl_buffer"
        else:
            method = {"shared": "alloc_shared", "local": "alloc_local"}.get(b.scope, "alloc_buffer")
        rhs = self.buffer_decl(b, method, [])
        if s.annotations:
            rhs = rhs[:-1] + f", annotations={self.attr_dict(s.annotations)})"
        self.scope(concise, top, None, rhs, s.body, lambda: self.define_buffer(b), flat=True)

    def scalar_decl(self, s: AllocBuffer, top: bool) -> None:
        """``x: T.int32``, with its first store as the value (``x: T.int32 = 0``) when that
        store does not read ``x``: how TVM 0.27 prints a mutable scalar (not where the store is a
        statement of its own with comments, which one line could not keep)."""
        b, body = s.buffer, s.body
        first = body.seq[0] if isinstance(body, SeqStmt) else body
        name = self.define_buffer(b)
        decl = f"{name}: {self.tir(str(b.dtype))}"
        if (isinstance(first, BufferStore) and first.buffer is b
                and (first.span == s.span or not (first.span is not None and first.span.comments))
                and self.prints_as_scalar(b, first.indices)
                and not any(isinstance(n, BufferLoad) and n.buffer is b for n in walk(first.value))):
            self.emit(f"{decl} = {self.expr(first.value)}")
            body = seq(body.seq[1:]) if isinstance(body, SeqStmt) else None
        else:
            self.emit(decl)
        if body is not None and not is_filler(body):
            self.continue_body(body, top)

    @prints(Allocate)
    def st_allocate(self, s: Allocate, concise: bool, top: bool) -> None:
        scope = s.buffer_var.type_annotation.storage_scope if isinstance(s.buffer_var.type_annotation, PointerType) else "global"
        args = [f"[{', '.join(self.expr(e) for e in s.extents)}]", quote(str(s.dtype)), quote(scope)]
        if not (isinstance(s.condition, IntImm) and s.condition.value == 1):
            args.append(self.expr(s.condition))
        if s.annotations:
            args.append(f"annotations={self.attr_dict(s.annotations)}")
        rhs = f"T.allocate({', '.join(args)})"
        self.scope(concise, top, None, rhs, s.body, lambda: self.namer.define(s.buffer_var, s.buffer_var.name))
