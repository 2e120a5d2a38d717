"""IR -> TVMScript text for TensorIR: expressions with Python precedence, statements with TVM's
sugar (``T.grid``, ``T.axis.remap``, the implicit root block, concise scoping)."""
from __future__ import annotations

import keyword
import math
import re
from typing import Any, Callable

from ..ir import arith, op as op_registry
from ..ir.buffer import DEFAULT_ALIGN, Buffer, BufferRegion
from ..ir.dtype import DataType
from ..ir.errors import Comments
from ..ir.expr import (COMM_REDUCE, DATA_PAR, OPAQUE, ORDERED, Add, And, Broadcast, BufferLoad,
                       Call, Cast, CommReducer, Div, EQ, FloatImm, FloorDiv, FloorMod, GE, GT,
                       IntImm, IterVar, LE, LT, Let, Max, Min, Mod, Mul, NE, Not, Or,
                       PointerType, PrimExpr, PrimType, Ramp, Select, StringImm, Sub, TupleType,
                       Var)
from ..ir.function import PrimFunc
from ..ir.module import GlobalVar, MetadataRef, Target
from ..ir.node import Node
from ..ir.stmt import (SERIAL, THREAD_BINDING, Allocate, AllocBuffer, AssertStmt, AttrStmt, Block,
                       BlockRealize, BufferStore, DeclBuffer, Evaluate, For, IfThenElse, LetStmt,
                       SeqStmt, Stmt, While)
from ..ir.visitor import collect, walk
from .dialect import Dialect, dialect_attr_key

# Precedence of printed expressions, as Python's grammar orders them (higher binds tighter).
ATOM, POW, UNARY, MUL, ADD, CMP, NOT, AND, OR, LAMBDA = 100, 16, 15, 14, 13, 8, 7, 6, 5, 3

_BINARY: dict[type, tuple[str, int]] = {
    Add: ("+", ADD), Sub: ("-", ADD), Mul: ("*", MUL), FloorDiv: ("//", MUL), FloorMod: ("%", MUL),
    EQ: ("==", CMP), NE: ("!=", CMP), LT: ("<", CMP), LE: ("<=", CMP), GT: (">", CMP),
    GE: (">=", CMP), And: ("and", AND), Or: ("or", OR),
}
_SUGAR_NAMES = {Add: "Add", Sub: "Sub", Mul: "Mul", FloorDiv: "FloorDiv", FloorMod: "FloorMod",
                EQ: "EQ", NE: "NE", LT: "LT", LE: "LE", GT: "GT", GE: "GE", And: "And", Or: "Or"}
_AXIS_NAMES = {DATA_PAR: "spatial", COMM_REDUCE: "reduce", ORDERED: "scan", OPAQUE: "opaque"}
_INVALID = re.compile(r"\W")


def _would_fold(e: Any) -> bool:
    """Whether building ``e``'s operation from its operands would fold it (two numbers, ``x + 0``)."""
    return _is_number(e.a) and _is_number(e.b) or arith.fold_identity(type(e), e.a, e.b) is not None


def quote(s: str) -> str:
    """A Python string literal in double quotes, as TVM prints strings."""
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{out}"'


def format_float(value: float) -> str:
    """As TVM prints a float: whole numbers with one decimal, others with 17 significant digits
    (C's %.17g), and inf/nan as strings."""
    if math.isinf(value) or math.isnan(value):
        return quote("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    if value == math.floor(value):
        return "%.1f" % value
    return "%.17g" % value


# Names a printed variable may not take: the script's module aliases and Python's keywords.
RESERVED = frozenset(["T", "I", "R"] + keyword.kwlist + ["range", "metadata", "cls", "Module"])


def def_name(name: str) -> str:
    """A function's name as its ``def`` line can hold it: as TVM prints it, every character that
    cannot be in a Python identifier becomes ``_`` (and a leading digit or a keyword gets one). The
    parser takes the ``def`` name for the global symbol only when ``T.func_attr`` gives none; the
    printers print the real one there whenever the two differ, so the name parses back."""
    shown = _INVALID.sub("_", name) or "_"
    if shown[0].isdigit():
        shown = "_" + shown
    return shown + "_" if keyword.iskeyword(shown) else shown


class Namer:
    """Gives variables and buffers unique printable names; names are freed when scopes end."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {name: 1 for name in RESERVED}
        self.frames: list[list[tuple[int, str]]] = [[]]
        self.keep: list = []

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        for key, name in self.frames.pop():
            if self.names.get(key) == name:  # (an object defined again inside keeps the new name
                del self.names[key]           # until that frame ends)
            self.used[name] -= 1
            if not self.used[name]:
                del self.used[name]

    def define(self, obj: Any, hint: str, frame: int = -1) -> str:
        """A unique name for ``obj``, held until ``frame`` (default: the innermost) ends."""
        base = _INVALID.sub("_", hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.names[id(obj)] = name
        self.used[name] = self.used.get(name, 0) + 1
        self.frames[frame].append((id(obj), name))
        self.keep.append(obj)
        return name

    def get(self, obj: Any) -> str | None:
        return self.names.get(id(obj))


class TIRPrinter:
    """Prints one PrimFunc (or a fragment) in a dialect."""

    def __init__(self, dialect: Dialect, namer: Namer | None = None, typevars: dict | None = None):
        self.d = dialect
        self.namer = namer or Namer()
        self.lines: list[str] = []
        self.indent = 0
        self.pending: list[str] = []  # definitions of free variables met while printing a statement
        self.func_level = True
        self.buffer_defs: dict[int, list[Buffer]] = {}  # data var id -> buffers over that data
        self.typevars = typevars or {}  # hoisted names of module-level TypeVars (0.27)
        self.loop_doms: dict[int, tuple] = {}  # loop var id -> (min, extent), for T.axis.remap
        self.inlined: set = set()  # parameters printed as their buffers
        self.func_frame = -1  # the namer frame of the function being printed
        self.scalar_params: set = set()  # ids of the PrimFunc's scalar parameters (TVM 0.27)
        self.root_comment_at: int | None = None  # the line of `# with T.block("root"):`
        self.absent_metadata = False  # printed metadata[...][i] for an entry the IR does not hold

    # ---------------------------------------------------------------- output
    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def tir(self, name: str) -> str:
        return f"T.{name}"

    def commented(self, node: Any, print_node: Callable[[], None]) -> None:
        """Print a node with the comments its span carries (see tvms.script.printer)."""
        notes = comments_of(node)
        if notes is None:
            print_node()
        else:
            head = self.comments_before(notes)
            print_node()
            self.comments_after(notes, head)

    def comments_before(self, notes: Comments) -> int:
        """Print the comments above a node; returns where the node's lines start."""
        for text in notes.before:
            self.emit(text)
        return len(self.lines)

    def comments_after(self, notes: Comments, head: int, inside_at: int | None = None) -> None:
        """Add the trailing comment to the node's first line of code (after its decorators), the
        comments that open its body after that line (or after line ``inside_at``), and those
        below it."""
        if notes.after is not None or notes.inside:
            for i in range(head, len(self.lines)):
                code = self.lines[i].lstrip()
                if code and not code.startswith(("@", "#")):
                    indent = self.lines[i][:len(self.lines[i]) - len(code)] + "    "
                    if notes.after is not None:
                        self.lines[i] += "  " + notes.after
                    at = (i if inside_at is None else inside_at) + 1
                    self.lines[at:at] = [indent + text for text in notes.inside]
                    break
        for text in notes.below:
            self.emit(text)

    # ---------------------------------------------------------------- names
    def var(self, v: Var) -> str:
        name = self.namer.get(v)
        if name is not None:
            return name
        if id(v) in self.typevars:
            return self.typevars[id(v)]
        if v in self.inlined:
            raise _ParamUsed(v)
        owner = self.data_owner(v)
        if owner is not None:
            return f"{self.namer.get(owner)}.data"
        # a free variable: define it at the function level, before the statement that uses it,
        # and keep its name taken for the whole function
        name = self.namer.define(v, v.name, self.func_frame)
        self.pending.append(f"{name} = {self.var_creation(v)}")
        return name

    def var_creation(self, v: Var) -> str:
        ann = v.type_annotation
        if isinstance(ann, PointerType):
            return self.type_doc(ann)
        return f"T.{v.dtype}()"

    def buffer(self, b: Buffer) -> str:
        name = self.namer.get(b)
        if name is not None:
            return name
        # a buffer used without a definition: declare it where the function starts
        name = self.namer.define(b, b.name, self.func_frame)
        self.pending.append(f"{name} = {self.buffer_decl(b, 'Buffer', [])}")
        self.buffer_defs.setdefault(id(b.data), []).append(b)
        return name

    def define_buffer(self, b: Buffer) -> str:
        name = self.namer.define(b, b.name)
        self.buffer_defs.setdefault(id(b.data), []).append(b)
        return name

    def data_owner(self, data: Var, exclude: Buffer | None = None) -> Buffer | None:
        """The innermost buffer in scope whose data pointer is ``data`` (prints as ``B.data``)."""
        for b in reversed(self.buffer_defs.get(id(data), ())):
            if b is not exclude and self.namer.get(b) is not None:
                return b
        return None

    # ---------------------------------------------------------------- expressions
    def expr(self, e: Any) -> str:
        return self.ex(e)[0]

    def ex(self, e: Any) -> tuple[str, int]:
        """(text, precedence) of an expression."""
        table = self.expr_printers
        method = table.get(type(e))
        if method is None:
            for klass, m in table.items():
                if isinstance(e, klass):
                    method = m
                    break
            else:
                return self.value(e), ATOM
        return method(self, e)

    def child(self, e: Any, parent: int, on_equal: bool = False) -> str:
        text, prec = self.ex(e)
        if prec < parent or (on_equal and prec == parent):
            return f"({text})"
        return text

    def ex_int(self, e: IntImm) -> tuple[str, int]:
        if e.dtype.is_bool:
            return f"T.bool({bool(e.value)})", ATOM
        if e.dtype.name == "int32":
            return str(e.value), ATOM
        return f"T.{e.dtype}({e.value})", ATOM

    def ex_float(self, e: FloatImm) -> tuple[str, int]:
        return f"T.{e.dtype}({format_float(e.value)})", ATOM

    def ex_string(self, e: StringImm) -> tuple[str, int]:
        return quote(e.value), ATOM

    def ex_var(self, e: Var) -> tuple[str, int]:
        return self.var(e), ATOM

    @staticmethod
    def ex_function(name: str, node_name: str) -> Callable:
        """``T.min(a, b)``, or ``T.Min(a, b)`` when ``T.min`` would fold it when read back."""
        def build(p: "TIRPrinter", e: Any) -> tuple[str, int]:
            return f"T.{node_name if _would_fold(e) else name}({p.expr(e.a)}, {p.expr(e.b)})", ATOM
        return build

    def ex_binary(self, e: Any) -> tuple[str, int]:
        op, prec = _BINARY[type(e)]
        # (what the operator would fold when read back prints as the node it is)
        if _would_fold(e):
            return f"T.{_SUGAR_NAMES[type(e)]}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
        # the right operand is parenthesized on equal precedence (a - (b - c)); comparisons also
        # on the left, since Python would read a < b == c as a chain
        left = self.child(e.a, prec, on_equal=prec == CMP)
        right = self.child(e.b, prec, on_equal=True)
        return f"{left} {op} {right}", prec

    def ex_div(self, e: Div) -> tuple[str, int]:
        if e.a.dtype.is_float and not (_is_number(e.a) and _is_number(e.b)) \
                and arith.fold_identity(Div, e.a, e.b) is None:
            return f"{self.child(e.a, MUL)} / {self.child(e.b, MUL, True)}", MUL
        return f"T.Div({self.expr(e.a)}, {self.expr(e.b)})", ATOM

    def ex_call2(self, name: str) -> Callable:
        def build(e: Any) -> tuple[str, int]:
            return f"T.{name}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
        return build

    def ex_not(self, e: Not) -> tuple[str, int]:
        return f"not {self.child(e.a, NOT)}", NOT

    def ex_select(self, e: Select) -> tuple[str, int]:
        return f"T.Select({self.expr(e.condition)}, {self.expr(e.true_value)}, {self.expr(e.false_value)})", ATOM

    def ex_cast(self, e: Cast) -> tuple[str, int]:
        return f"T.Cast({quote(str(e.dtype))}, {self.expr(e.value)})", ATOM

    def ex_ramp(self, e: Ramp) -> tuple[str, int]:
        return f"T.Ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", ATOM

    def ex_broadcast(self, e: Broadcast) -> tuple[str, int]:
        return f"T.Broadcast({self.expr(e.value)}, {e.lanes})", ATOM

    def ex_let(self, e: Let) -> tuple[str, int]:
        # TVM writes the let variable's definition before the statement (v = T.int32())
        name = self.var(e.var)
        return f"T.Let({self.expr(e.body)}, where={{{name}: {self.expr(e.value)}}})", ATOM

    def ex_load(self, e: BufferLoad) -> tuple[str, int]:
        # (a vector load keeps T.Ramp, as TVM prints it; a store's ramp is a slice)
        return f"{self.buffer(e.buffer)}[{self.indices(e.indices, slices=False)}]", ATOM

    def indices(self, indices: tuple, slices: bool = True) -> str:
        parts = []
        for index in indices:
            if slices and isinstance(index, Ramp) and isinstance(index.stride, IntImm):
                stop = display_add(index.base, IntImm(index.base.dtype, index.lanes * index.stride.value))
                step = "" if index.stride.value == 1 else f":{self.expr(index.stride)}"
                parts.append(f"{self.expr(index.base)}:{self.expr(stop)}{step}")
            else:
                parts.append(self.expr(index))
        return ", ".join(parts) if parts else "()"  # a 0-d buffer: ``S[()]``

    def ex_call(self, e: Call) -> tuple[str, int]:
        if isinstance(e.op, GlobalVar):
            head = quote(e.op.name_hint)
            args = [self.expr(a) for a in e.args]
        else:
            info = op_registry.info_of(e.op)
            head = f"T.{info.script_name}"
            args = [self.expr(a) for a in e.args]
            if info.result == "dtype":
                args.insert(0, quote(str(e.dtype)))
        args += [f"{k}={self.value(v)}" for k, v in e.attrs.items()]
        return f"{head}({', '.join(args)})", ATOM

    def ex_reducer(self, e: CommReducer) -> tuple[str, int]:
        self.namer.push()
        params = [self.namer.define(v, v.name) for v in e.lhs + e.rhs]
        result = [self.expr(r) for r in e.result]
        self.namer.pop()
        body = result[0] if len(result) == 1 else "(" + ", ".join(result) + ")"
        identity = ", ".join(self.expr(i) for i in e.identity_element)
        return f"T.comm_reducer(lambda {', '.join(params)}: {body}, [{identity}])", ATOM

    def ex_iter_var(self, e: IterVar) -> tuple[str, int]:
        return self.var(e.var), ATOM

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
            return f"T.target({self.attr_dict(v.config, sort=False)})"
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

    def type_doc(self, t: Any) -> str:
        if isinstance(t, PrimType):
            return f"T.{t.dtype}"
        if isinstance(t, PointerType):
            return f"T.handle({quote(str(t.element))}, {quote(t.storage_scope)})"
        raise TypeError(f"cannot print type {t!r}")

    # ---------------------------------------------------------------- buffers
    def buffer_decl(self, b: Buffer, method: str, args: list[str], dtype_always: bool = False,
                    signature: set | None = None) -> str:
        """``signature``: the parameters defined so far, when ``b`` is a parameter's buffer."""
        dims = [self.expr(s) if signature is None else self.signature_dim(s, signature) for s in b.shape]
        shape = "(" + ", ".join(dims) + ("," if len(b.shape) == 1 else "") + ")"
        args = args + [shape]
        if dtype_always or b.dtype.name != "float32":
            args.append(quote(str(b.dtype)))
        if self.namer.get(b.data) is not None or self.data_owner(b.data, exclude=b) is not None:
            args.append(f"data={self.var(b.data)}")
        if b.strides:
            args.append("strides=(" + ", ".join(self.expr(s) for s in b.strides) + ("," if len(b.strides) == 1 else "") + ")")
        if b.elem_offset is not None:
            args.append(f"elem_offset={self.expr(b.elem_offset)}")
        if b.scope != "global" and method not in ("alloc_shared", "alloc_local"):
            args.append(f"scope={quote(b.scope)}")
        if b.data_alignment != DEFAULT_ALIGN:
            args.append(f"align={b.data_alignment}")
        if b.offset_factor:
            args.append(f"offset_factor={b.offset_factor}")
        if b.buffer_type != "default":
            args.append('buffer_type="auto"')
        if b.axis_separators:
            args.append("axis_separators=[" + ", ".join(str(a) for a in b.axis_separators) + "]")
        return f"T.{method}({', '.join(args)})"

    def signature_dim(self, dim: PrimExpr, defined: set) -> str:
        """A dimension of a buffer in a TVM 0.27 signature. It is quoted when it reads a scalar
        parameter not defined yet (the quote defines it, as TVM's parser reads it) or when it is
        an expression over a size that only the buffers bind."""
        if isinstance(dim, IntImm):
            return self.expr(dim)
        found = [v for v in walk(dim) if isinstance(v, Var)]
        early = [v for v in found if id(v) in self.scalar_params and id(v) not in defined]
        for v in early:
            if self.namer.get(v) is None:
                self.namer.define(v, v.name)
            defined.add(id(v))
        text = self.expr(dim)
        if early or (not isinstance(dim, Var) and any(id(v) not in self.scalar_params for v in found)):
            return quote(text)
        return text

    def region(self, r: BufferRegion) -> str:
        parts = []
        for rng in r.region:
            if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self.expr(display_add(rng.min, rng.extent))}")
        return f"{self.buffer(r.buffer)}[{', '.join(parts) if parts else '()'}]"

    # ---------------------------------------------------------------- functions
    def prim_func(self, f: PrimFunc, name: str, decorate_s_tir: bool) -> list[str]:
        # A handle parameter prints inline as ``A: T.Buffer(...)`` unless the body uses the
        # handle itself; finding that out costs a walk of the whole body, so print optimistically
        # and start again without that parameter inlined when the body turns out to use it.
        if self.d.typevar_header is not None:  # TVM 0.27: a scalar parameter may size a signature buffer
            self.scalar_params = {id(p) for p in f.params if p not in f.buffer_map}
        inlined = self.inlinable_params(f)
        mark, indent = len(self.lines), self.indent
        released = self.release_shadowed_names(f)
        try:
            while True:
                self.inlined = inlined
                try:
                    self.root_comment_at = None
                    notes = comments_of(f)
                    head = self.comments_before(notes) if notes is not None else 0
                    self.prim_func_once(f, name, decorate_s_tir, inlined)
                    if notes is not None:  # (its own comments go after the generated root line)
                        self.comments_after(notes, head, self.root_comment_at)
                    return self.lines
                except _ParamUsed as used:
                    while len(self.namer.frames) > 1:
                        self.namer.pop()
                    del self.lines[mark:]
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
        namer.push()
        self.func_frame = len(namer.frames) - 1
        dec_args = []
        if f.is_private:
            dec_args.append("private=True")
        if decorate_s_tir and f.s_tir:
            dec_args.append("s_tir=True")
        self.emit("@T.prim_func" + (f"({', '.join(dec_args)})" if dec_args else ""))
        params = []
        defined: set = set()
        for p in f.params:
            if p in inlined:
                buf = f.buffer_map[p]
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
        attrs = {k: v for k, v in f.attrs.items() if not (k == "global_symbol" and v == name)}
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
            self.emit(f'# with T.{self.d.block}("root"):')
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
                if data_count[id(buf.data)] == 1 and self.simple_buffer(buf)}

    def simple_buffer(self, b: Buffer) -> bool:
        if b.strides or b.elem_offset is not None or b.scope != "global" or b.axis_separators:
            return False
        if b.data_alignment != DEFAULT_ALIGN or b.offset_factor or b.buffer_type != "default":
            return False
        for s in b.shape:
            for n in walk(s):
                if isinstance(n, Var) and id(n) not in self.typevars and id(n) not in self.scalar_params:
                    return False
        return True

    def top_level(self, print_stmt: Callable[[], None]) -> None:
        """Print one function-level statement, preceded by the free variables it defines.

        Statements nest (a concise assert continues with the rest of the body), so each one
        moves up only the definitions that appeared while it was being printed.
        """
        mark, start = len(self.lines), len(self.pending)
        print_stmt()
        if len(self.pending) > start:
            indent = "    " * self.indent
            self.lines[mark:mark] = [indent + p for p in self.pending[start:]]
            del self.pending[start:]

    # ---------------------------------------------------------------- statements
    def body(self, s: Stmt, top: bool = False, alone: bool = True) -> None:
        """Print a frame's body. ``alone``: nothing was printed in this frame before it.

        A scope statement prints without ``with`` (its body following at the same level) when it
        ends the frame; ``T.attr``/``T.launch_thread`` only when it is the frame's whole body.
        """
        stmts = s.seq if isinstance(s, SeqStmt) else (s,)
        if len(stmts) > 1:  # T.evaluate(0) is a no-op TVM leaves out of sequences
            stmts = tuple(x for x in stmts if not _is_nop(x)) or stmts[:1]
        for i, stmt in enumerate(stmts):
            last = i == len(stmts) - 1
            concise = last if not isinstance(stmt, AttrStmt) else (last and alone and len(stmts) == 1)
            if top:
                self.top_level(lambda stmt=stmt, concise=concise: self.stmt(stmt, concise, top))
            else:
                self.stmt(stmt, concise, top)

    def nested(self, s: Stmt) -> None:
        self.indent += 1
        self.namer.push()
        self.body(s)
        self.namer.pop()
        self.indent -= 1

    def stmt(self, s: Stmt, concise: bool, top: bool = False) -> None:
        method = _STMT_PRINTERS.get(type(s))
        if method is None:
            raise TypeError(f"cannot print statement {type(s).__name__}")
        notes = s.span.comments if s.span is not None else None
        if notes is None:
            method(self, s, concise, top)
        else:
            head = self.comments_before(notes)
            method(self, s, concise, top)
            self.comments_after(notes, head)

    def continue_body(self, body: Stmt, top: bool, alone: bool = False) -> None:
        """The body of a concisely printed scope continues at the same indentation."""
        self.body(body, top, alone)

    def st_store(self, s: BufferStore, concise: bool, top: bool) -> None:
        self.emit(f"{self.buffer(s.buffer)}[{self.indices(s.indices)}] = {self.expr(s.value)}")

    def st_evaluate(self, s: Evaluate, concise: bool, top: bool) -> None:
        if isinstance(s.value, Call):
            self.emit(self.expr(s.value))
        else:
            self.emit(f"T.evaluate({self.expr(s.value)})")

    def st_seq(self, s: SeqStmt, concise: bool, top: bool) -> None:
        self.body(s, top)

    def st_if(self, s: IfThenElse, concise: bool, top: bool) -> None:
        self.emit(f"if {self.expr(s.condition)}:")
        self.nested(s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.nested(s.else_case)

    def st_while(self, s: While, concise: bool, top: bool) -> None:
        self.emit(f"while {self.expr(s.condition)}:")
        self.nested(s.body)

    def scope(self, concise: bool, top: bool, lhs: str | None, rhs: str, body: Stmt,
              define: Callable[[], str] | None = None, alone_body: bool = False) -> None:
        """A statement with a body: ``lhs = rhs`` then the body at this level when it is the last
        statement here, else ``with rhs as lhs:`` and the body nested."""
        if concise:
            name = define() if define else None
            self.emit(f"{name or lhs} = {rhs}" if (name or lhs) else rhs)
            self.continue_body(body, top, alone=alone_body)
        else:
            self.namer.push()
            name = define() if define else lhs
            self.emit(f"with {rhs} as {name}:" if name else f"with {rhs}:")
            self.indent += 1
            self.body(body)
            self.indent -= 1
            self.namer.pop()

    def st_let(self, s: LetStmt, concise: bool, top: bool) -> None:
        value = self.expr(s.value)
        if concise:
            name = self.namer.define(s.var, s.var.name)
            if self.d.name == "classic" or s.scalar_decl:
                self.emit(f"{name}: T.{s.var.dtype} = {value}")
            else:
                self.emit(f"{name}: T.let[T.{s.var.dtype}] = {value}")
            self.continue_body(s.body, top)
        else:
            self.scope(False, top, None, f"T.LetStmt({value})", s.body,
                       lambda: self.namer.define(s.var, s.var.name))

    def st_attr(self, s: AttrStmt, concise: bool, top: bool) -> None:
        node = s.node
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(node, IterVar) \
                and self.namer.get(node.var) is None:
            rhs = f"T.launch_thread({quote(node.thread_tag)}, {self.expr(s.value)})"
            self.scope(concise, top, None, rhs, s.body, lambda: self.namer.define(node.var, node.var.name),
                       alone_body=True)
            return
        rhs = f"T.attr({self.value(node)}, {quote(s.attr_key)}, {self.value(s.value)})"
        if concise:
            self.emit(rhs)
            self.continue_body(s.body, top, alone=True)
        else:
            self.emit(f"with {rhs}:")
            self.nested(s.body)

    def st_assert(self, s: AssertStmt, concise: bool, top: bool) -> None:
        if s.error_kind == "RuntimeError" and len(s.message) == 1 and self.d.name == "classic":
            msg = quote(s.message[0])
        else:
            msg = f"({quote(s.error_kind)}, [{', '.join(quote(m) for m in s.message)}])"
        if concise:
            self.emit(f"assert {self.expr(s.condition)}, {msg}")
            self.continue_body(s.body, top)
        else:
            self.emit(f"with T.Assert({self.expr(s.condition)}, {msg}):")
            self.nested(s.body)

    def st_decl_buffer(self, s: DeclBuffer, concise: bool, top: bool) -> None:
        b = s.buffer
        rhs = self.view_or_decl(b)
        self.scope(concise, top, None, rhs, s.body, lambda: self.define_buffer(b))

    def view_or_decl(self, b: Buffer) -> str:
        owner = self.data_owner(b.data, exclude=b)
        if (self.d.name != "classic" and owner is not None and owner.dtype == b.dtype
                and self.simple_buffer(b) and owner.shape != b.shape
                and [self.expr(x) for x in owner.shape] != [self.expr(x) for x in b.shape]):
            return f"{self.namer.get(owner)}.view({', '.join(self.expr(x) for x in b.shape)})"
        return self.buffer_decl(b, "decl_buffer", [])

    def st_alloc_buffer(self, s: AllocBuffer, concise: bool, top: bool) -> None:
        b = s.buffer
        if self.d.name == "classic":
            method = "decl_buffer"
        else:
            method = {"shared": "alloc_shared", "local": "alloc_local"}.get(b.scope, "alloc_buffer")
        rhs = self.buffer_decl(b, method, [])
        if s.annotations:
            rhs = rhs[:-1] + f", annotations={self.attr_dict(s.annotations)})"
        self.scope(concise, top, None, rhs, s.body, lambda: self.define_buffer(b))

    def st_allocate(self, s: Allocate, concise: bool, top: bool) -> None:
        scope = s.buffer_var.type_annotation.storage_scope if isinstance(s.buffer_var.type_annotation, PointerType) else "global"
        args = [f"[{', '.join(self.expr(e) for e in s.extents)}]", quote(str(s.dtype)), quote(scope)]
        if not (isinstance(s.condition, IntImm) and s.condition.value == 1):
            args.append(self.expr(s.condition))
        if s.annotations:
            args.append(f"annotations={self.attr_dict(s.annotations)}")
        rhs = f"T.allocate({', '.join(args)})"
        self.scope(concise, top, None, rhs, s.body, lambda: self.namer.define(s.buffer_var, s.buffer_var.name))

    def st_for(self, s: For, concise: bool, top: bool) -> None:
        grid: list[For] = []
        grid_vars: set[int] = set()
        loop: Any = s
        while isinstance(loop, For):
            if (loop.kind != SERIAL or not _is_zero(loop.min) or loop.annotations
                    or any(isinstance(n, Var) and id(n) in grid_vars for n in walk(loop.extent))):
                break
            grid.append(loop)
            grid_vars.add(id(loop.loop_var))
            loop = loop.body
        self.namer.push()
        if len(grid) > 1:
            extents = ", ".join(self.expr(g.extent) for g in grid)
            names = ", ".join(self.namer.define(g.loop_var, g.loop_var.name) for g in grid)
            for g in grid:
                self.loop_doms[id(g.loop_var)] = (g.min, g.extent)
            self.emit(f"for {names} in T.grid({extents}):")
            body = grid[-1].body
            inner = _merged_comments(grid)
        else:
            args = []
            if _is_zero(s.min):
                args.append(self.expr(s.extent))
            else:
                args += [self.expr(s.min), self.expr(display_add(s.min, s.extent))]
            if s.kind == SERIAL:
                head = "range" if not s.annotations else "T.serial"
            else:
                head = f"T.{s.kind}"
            if s.kind == THREAD_BINDING and s.thread_binding is not None:
                args.append(f"thread={quote(s.thread_binding.thread_tag)}")
            if s.annotations:
                args.append(f"annotations={self.attr_dict(s.annotations)}")
            name = self.namer.define(s.loop_var, s.loop_var.name)
            self.loop_doms[id(s.loop_var)] = (s.min, s.extent)
            self.emit(f"for {name} in {head}({', '.join(args)}):")
            body = s.body
            inner = None
        self.indent += 1
        if inner is None:
            self.body(body)
        else:  # the comments of loops merged into T.grid open and close its body
            head = self.comments_before(inner)
            self.body(body)
            self.comments_after(inner, head)
        self.indent -= 1
        self.namer.pop()

    def st_block_realize(self, s: BlockRealize, concise: bool, top: bool) -> None:
        self.block(s.block, s)

    def st_block(self, s: Block, concise: bool, top: bool) -> None:
        self.block(s, None)

    def block(self, b: Block, realize: BlockRealize | None) -> None:
        extra = "" if realize is not None else ", no_realize=True"
        self.emit(f"with T.{self.d.block}({quote(b.name_hint)}{extra}):")
        self.indent += 1
        self.namer.push()
        remap: list[int] = []

        def flush() -> None:
            if len(remap) == 1:
                single(remap[0])
            elif remap:
                kinds = "".join("S" if b.iter_vars[i].iter_type == DATA_PAR else "R" for i in remap)
                values = ", ".join(self.expr(realize.iter_values[i]) for i in remap)
                names = ", ".join(self.namer.define(b.iter_vars[i].var, b.iter_vars[i].var.name) for i in remap)
                self.emit(f"{names} = T.axis.remap({quote(kinds)}, [{values}])")
            remap.clear()

        def single(i: int) -> None:
            iv = b.iter_vars[i]
            dom = iv.dom
            if _is_zero(dom.min):
                dom_text = self.expr(dom.extent)
            else:
                dom_text = f"({self.expr(dom.min)}, {self.expr(display_add(dom.min, dom.extent))})"
            args = [dom_text]
            if realize is not None:
                args.append(self.expr(realize.iter_values[i]))
            kind = _AXIS_NAMES[iv.iter_type]
            self.emit(f"{self.namer.define(iv.var, iv.var.name)} = T.axis.{kind}({', '.join(args)})")

        for i, iv in enumerate(b.iter_vars):
            if realize is not None and self.remappable(iv, realize.iter_values[i]):
                remap.append(i)
            else:
                flush()
                single(i)
        flush()
        if realize is not None and not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
            self.emit(f"T.where({self.expr(realize.predicate)})")
        self.emit(f"T.reads({', '.join(self.region(r) for r in b.reads)})")
        self.emit(f"T.writes({', '.join(self.region(r) for r in b.writes)})")
        if b.annotations:
            self.emit(f"T.{self.d.block_attr}({self.attr_dict(b.annotations)})")
        for buf in b.alloc_buffers:
            self.emit(f"{self.define_buffer(buf)} = {self.buffer_decl(buf, self.d.block_alloc, [])}")
        for m in b.match_buffers:
            self.emit(f"{self.define_buffer(m.buffer)} = "
                      f"{self.buffer_decl(m.buffer, 'match_buffer', [self.region(m.source)])}")
        if b.init is not None:
            self.emit("with T.init():")
            self.nested(b.init)
        self.body(b.body)
        self.namer.pop()
        self.indent -= 1

    def remappable(self, iv: IterVar, value: PrimExpr) -> bool:
        if iv.iter_type not in (DATA_PAR, COMM_REDUCE) or not isinstance(value, Var):
            return False
        dom = self.loop_doms.get(id(value))
        if dom is None or self.namer.get(value) is None:
            return False
        from ..ir.structural import structural_equal

        return structural_equal(dom[0], iv.dom.min) and structural_equal(dom[1], iv.dom.extent)


class _ParamUsed(Exception):
    """The body uses a handle parameter that was printed inline as its buffer."""

    def __init__(self, param: Var):
        super().__init__(param.name)
        self.param = param


def comments_of(node: Any) -> Comments | None:
    span = getattr(node, "span", None)
    return span.comments if span is not None else None


def _merged_comments(grid: list) -> Comments | None:
    """The comments of the inner loops of a T.grid (the outer one prints its own), as lines at
    the start of its body and below it; the loops of one T.grid statement share the outer's."""
    outer, merged = comments_of(grid[0]), None
    for loop in grid[1:]:
        notes = comments_of(loop)
        if notes is None or notes is outer:
            continue
        part = Comments(before=notes.before + ((notes.after,) if notes.after else ()), below=notes.below)
        merged = part if merged is None else merged + part
    return merged


def implicit_root(body: Stmt) -> Block | None:
    """The root block TVM elides when printing (shown as ``# with T.block("root"):``)."""
    if not (isinstance(body, BlockRealize) and not body.iter_values
            and isinstance(body.predicate, IntImm) and body.predicate.value == 1):
        return None
    root = body.block
    if root.annotations or root.match_buffers or root.reads or root.writes or root.init is not None:
        return None
    inner = root.body
    if root.alloc_buffers or (isinstance(inner, BlockRealize) and inner.block.iter_vars) or (
            not isinstance(inner, BlockRealize) and any(isinstance(n, BlockRealize) for n in walk(inner))):
        return root
    return None


def display_add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a + b`` folded as TVM's printer folds it: constants add up and zeros vanish."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.dtype, a.value + b.value)
    if _is_zero(b):
        return a
    if _is_zero(a):
        return b
    return Add(a, b)


def _is_nop(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm) and s.value.value == 0


def _is_zero(e: Any) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _is_number(e: Any) -> bool:
    return isinstance(e, (IntImm, FloatImm))


_EXPR_PRINTERS: dict[type, Callable] = {
    IntImm: TIRPrinter.ex_int, FloatImm: TIRPrinter.ex_float, StringImm: TIRPrinter.ex_string,
    Not: TIRPrinter.ex_not, Select: TIRPrinter.ex_select, Cast: TIRPrinter.ex_cast,
    Ramp: TIRPrinter.ex_ramp, Broadcast: TIRPrinter.ex_broadcast, Let: TIRPrinter.ex_let,
    BufferLoad: TIRPrinter.ex_load, Call: TIRPrinter.ex_call, CommReducer: TIRPrinter.ex_reducer,
    Div: TIRPrinter.ex_div, IterVar: TIRPrinter.ex_iter_var,
    Min: TIRPrinter.ex_function("min", "Min"), Max: TIRPrinter.ex_function("max", "Max"),
    Mod: TIRPrinter.ex_function("truncmod", "Mod"),
    Var: TIRPrinter.ex_var,
}
_EXPR_PRINTERS.update({cls: TIRPrinter.ex_binary for cls in _BINARY})
TIRPrinter.expr_printers = _EXPR_PRINTERS  # by node class; a subclass may replace entries

_STMT_PRINTERS: dict[type, Callable] = {
    BufferStore: TIRPrinter.st_store, Evaluate: TIRPrinter.st_evaluate, SeqStmt: TIRPrinter.st_seq,
    IfThenElse: TIRPrinter.st_if, While: TIRPrinter.st_while, LetStmt: TIRPrinter.st_let,
    AttrStmt: TIRPrinter.st_attr, AssertStmt: TIRPrinter.st_assert, DeclBuffer: TIRPrinter.st_decl_buffer,
    AllocBuffer: TIRPrinter.st_alloc_buffer, Allocate: TIRPrinter.st_allocate, For: TIRPrinter.st_for,
    BlockRealize: TIRPrinter.st_block_realize, Block: TIRPrinter.st_block,
}
