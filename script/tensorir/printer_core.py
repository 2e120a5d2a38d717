"""The printer core of TensorIR: output lines and comments, printable names of variables and
buffers, types, and the dispatch of statements and expressions by node class through
the one rule table (rules.py) to the construct modules' print rules."""
from __future__ import annotations

from typing import Any, Callable

from ...ir.buffer import Buffer
from ...ir.errors import Comments
from ...ir.expr import PointerType, PrimType, Var
from ...ir.node import Node, walk_fields
from ...ir.stmt import AttrStmt, Block, For, IfThenElse, SeqStmt, Stmt, While
from ..dialect import Dialect
from ...ir.operators import ATOM
from .attrs import AttrPrinting
from .blocks import BlockPrinting
from .buffers import BufferPrinting
from .exprs import ExprPrinting
from .functions import FunctionPrinting
from .loops import LoopPrinting
from .rules import PRINT_EXPR, PRINT_STMT, prints
from .scope_ids import ScopeIdPrinting
from .statements import StatementPrinting
from .tile_primitives import TilePrimitivePrinting
from .views import ViewPrinting
from .text import Namer, ParamUsed, comments_of, is_filler, is_nop, quote


class TIRPrinter(ExprPrinting, FunctionPrinting, StatementPrinting, LoopPrinting, BlockPrinting,
                 BufferPrinting, ViewPrinting, AttrPrinting, ScopeIdPrinting, TilePrimitivePrinting):
    """Prints one PrimFunc (or a fragment) in a dialect."""

    expr_printers = PRINT_EXPR  # by node class; a subclass may replace entries

    def __init__(self, dialect: Dialect, namer: Namer | None = None, typevars: dict | None = None):
        self.d = dialect
        self.namer = namer or Namer()
        self.lines: list[str] = []
        self.indent = 0
        self.pending: list[str] = []  # definitions of free variables met while printing a statement
        self.func_level = True
        self.buffer_defs: dict[int, list[Buffer]] = {}  # data var id -> buffers over that data
        self.buffer_fields: dict[int, tuple] = {}  # var id -> (buffer, ".elem_offset", var) it prints as
        self.typevars = typevars or {}  # hoisted names of module-level TypeVars (0.27)
        self.loop_doms: dict[int, tuple] = {}  # loop var id -> (min, extent), for T.axis.remap
        self.inlined: set = set()  # parameters printed as their buffers
        self.func_frame = -1  # the namer frame of the function being printed
        self.in_s_tir = False  # printing an s_tir PrimFunc (its buffers have no layout by default)
        self.scalar_params: set = set()  # ids of the PrimFunc's scalar parameters (TVM 0.27)
        self.signature_sizes: list = []  # per signature buffer, the sizes it defines (TVM 0.27)
        self.relaunched: set = set()  # ids of thread variables several launches share
        self.laid_out: set = set()  # ids of one-element buffers TVM 0.27 lays out: scalars
        self.root_comment_at: int | None = None  # the line of `# with T.block("root"):`
        self.absent_metadata = False  # printed metadata[...][i] for an entry the IR does not hold
        self.uses_tir = False  # printed a T.<name> (the header then imports tir as T)
        self.uses_ir_namespace = False  # printed I.Op(...) (a function alone then imports ir as I)
        self.awaiting: list[list] = []  # marks of commented nodes waiting for their first code line
        self.module_name: str | None = None  # the class of the module being printed (Module.f calls)
        # loops and blocks being printed, each with the definitions of free variables it takes
        # (those of the function go to ``pending``), and where each variable's uses all lie
        self.frames: list[tuple[int, list[str]]] = []
        self.use_frames: dict[int, tuple] | None = None
        self.func_body: Any = None  # what use_frames looks at: the function's body (or the fragment)

    # ---------------------------------------------------------------- output
    def emit(self, text: str) -> None:
        """Add a line of code (the first after a commented node's start is where its trailing
        comment goes)."""
        if self.awaiting:
            for mark in self.awaiting:
                mark.append(len(self.lines))
            self.awaiting.clear()
        self.lines.append("    " * self.indent + text)

    def emit_aside(self, text: str) -> None:
        """Add a line that is not code: a comment, a decorator or an import note."""
        self.lines.append("    " * self.indent + text)

    def tir(self, name: str) -> str:
        """``T.<name>``, noting that the text uses the ``T`` prefix (for the import header)."""
        self.uses_tir = True
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

    def comments_before(self, notes: Comments) -> list:
        """Print the comments above a node; returns its mark, which the node's first line of
        code (after its decorators) fills in as it is emitted."""
        for text in notes.before:
            self.emit_aside(text)
        mark: list = []
        self.awaiting.append(mark)
        return mark

    def comments_after(self, notes: Comments, mark: list, inside_at: int | None = None) -> None:
        """Add the trailing comment to the node's first line of code, the comments that open its
        body after that line (or after line ``inside_at``), and those below it."""
        if not mark:  # (the node printed no code)
            self.awaiting[:] = [m for m in self.awaiting if m is not mark]
        elif notes.after is not None or notes.inside:
            i = mark[0]
            line = self.lines[i]
            indent = line[:len(line) - len(line.lstrip())] + "    "
            if notes.after is not None:
                self.lines[i] += "  " + notes.after
            at = (i if inside_at is None else inside_at) + 1
            self.lines[at:at] = [indent + text for text in notes.inside]
        for text in notes.below:
            self.emit_aside(text)

    # ---------------------------------------------------------------- names
    def var(self, v: Var) -> str:
        name = self.namer.get(v)
        if name is not None:
            return name
        if id(v) in self.typevars:
            return self.typevars[id(v)]
        if v in self.inlined:
            raise ParamUsed(v)
        field = self.field_of(v)
        if field is not None:
            return field
        owner = self.data_owner(v)
        if owner is not None:
            return self.data_of(owner)
        # a free variable: define it before the statement that uses it, in the innermost loop or
        # block around all its uses (at the function level when none is), and keep its name taken
        # for the whole function
        name = self.namer.define(v, v.name, self.func_frame)
        self.definitions_of(v).append(f"{name} = {self.var_creation(v)}")
        return name

    def definitions_of(self, v: Var) -> list[str]:
        """Where a free variable's definition goes, as TVM's printer places it: the innermost
        loop or block being printed that holds every use of the variable, else the function."""
        if self.frames:
            if self.use_frames is None:
                self.use_frames = use_frames(self.func_body)
            around = self.use_frames.get(id(v), ())
            for key, _ in reversed(self.frames):
                if key in around:
                    # (a branch that is a loop keys two frames: TVM's printer takes the outer one)
                    return next(definitions for k, definitions in self.frames if k == key)
        return self.pending

    def framed(self, node: Any, print_body: Callable[[], None]) -> None:
        """Print a loop's or block's body as a frame that takes definitions of free variables."""
        definitions: list[str] = []
        self.frames.append((id(node), definitions))
        try:
            print_body()
        finally:
            self.frames.pop()

    def loop_name(self, v: Var) -> str:
        """The name of a loop variable the loop defines; one already named (a free variable the
        printer defined before the loop: a copy block's predicate naming its own loops) keeps
        its name, as in TVM's printer."""
        return self.namer.get(v) or self.namer.define(v, v.name)

    def var_creation(self, v: Var) -> str:
        ann = v.type_annotation
        if isinstance(ann, PointerType):
            return self.type_doc(ann)
        return self.tir(f"{v.dtype}()")

    def buffer(self, b: Buffer) -> str:
        name = self.namer.get(b)
        if name is not None:
            return name
        # a buffer used without a definition: declare it as a free variable is (definitions_of)
        name = self.namer.define(b, b.name, self.func_frame)
        definitions = self.definitions_of(b)
        definitions.append(f"{name} = {self.buffer_decl(b, 'Buffer', [], define_line=definitions.append)}")
        self.buffer_defs.setdefault(id(b.data), []).append(b)
        return name

    def define_buffer(self, b: Buffer) -> str:
        # (a buffer declared before its allocation, used first by a T.attr, keeps its name, as TVM's)
        name = self.namer.get(b) or self.namer.define(b, b.name)
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

    def type_doc(self, t: Any) -> str:
        if isinstance(t, PrimType):
            return self.tir(f"{t.dtype}")
        if isinstance(t, PointerType):
            if t.is_tensor_map:
                return self.tir("TensorMap()")
            if t.element.is_void:  # (an untyped pointer in another scope)
                return self.tir(f"handle(storage_scope={quote(t.storage_scope)})")
            return self.tir(f"handle({quote(str(t.element))}, {quote(t.storage_scope)})")
        raise TypeError(f"cannot print type {t!r}")

    def top_level(self, print_stmt: Callable[[], None]) -> None:
        """Print one function-level statement, preceded by the free variables it defines.

        Statements nest (a concise assert continues with the rest of the body), so each one
        moves up only the definitions that appeared while it was being printed.
        """
        pending = self.frames[-1][1] if self.frames else self.pending
        mark, start = len(self.lines), len(pending)
        print_stmt()
        if len(pending) > start:
            indent = "    " * self.indent
            self.lines[mark:mark] = [indent + p for p in pending[start:]]
            del pending[start:]

    # ---------------------------------------------------------------- statements
    def body(self, s: Stmt, top: bool = False, alone: bool = True) -> None:
        """Print a frame's body. ``alone``: nothing was printed in this frame before it.

        A scope statement prints without ``with`` (its body following at the same level) when it
        ends the frame; ``T.attr``/``T.launch_thread`` only when it is the frame's whole body.
        """
        stmts = s.seq if isinstance(s, SeqStmt) else (s,)
        if len(stmts) > 1:  # T.evaluate(0) is a no-op TVM leaves out of sequences
            stmts = tuple(x for x in stmts if not is_nop(x)) or stmts[:1]
        for i, stmt in enumerate(stmts):
            last = i == len(stmts) - 1
            concise = last if not isinstance(stmt, AttrStmt) else (last and alone and len(stmts) == 1)
            if top:
                self.top_level(lambda stmt=stmt, concise=concise: self.stmt(stmt, concise, top))
            else:
                self.stmt(stmt, concise, top)

    def nested(self, s: Stmt, frame: Stmt | None = None) -> None:
        self.indent += 1
        self.namer.push()
        self.frame_body(s, frame)
        self.namer.pop()
        self.indent -= 1

    def frame_body(self, s: Stmt, frame: Stmt | None, top: bool = False, alone: bool = True) -> None:
        """Print a body; under ``frame``, a statement that opens a frame in TVM's printer, as that
        frame: the free variables used only inside it are defined in it."""
        if frame is None:
            self.body(s, top, alone)
        else:
            self.framed(frame, lambda: self.body(s, True, alone))

    def stmt(self, s: Stmt, concise: bool, top: bool = False) -> None:
        method = PRINT_STMT.get(type(s))
        if method is None:
            raise TypeError(f"cannot print statement {type(s).__name__}")
        notes = s.span.comments if s.span is not None else None
        if notes is None:
            method(self, s, concise, top)
        else:
            head = self.comments_before(notes)
            method(self, s, concise, top)
            self.comments_after(notes, head)

    def continue_body(self, body: Stmt, top: bool, alone: bool = False, flat: bool = False,
                      frame: Stmt | None = None) -> None:
        """The body of a concisely printed scope continues at the same indentation.

        ``flat``: the scope is a binding, assert or buffer allocation, statements of their own in
        TVM 0.27 (``Bind``, ``AssertStmt``, ``AllocBuffer``, ``DeclBuffer`` have no body): when
        nothing follows one (a no-op rest), nothing is printed after it. ``frame``: as in
        ``frame_body``."""
        if flat and self.d.flat_statements and is_filler(body) and not (body.span and body.span.comments):
            return
        self.frame_body(body, frame, top, alone)

    @prints(SeqStmt)
    def st_seq(self, s: SeqStmt, concise: bool, top: bool) -> None:
        self.body(s, top)

    def scope(self, concise: bool, top: bool, lhs: str | None, rhs: str, body: Stmt,
              define: Callable[[], str] | None = None, alone_body: bool = False,
              flat: bool = False, frame: Stmt | None = None) -> None:
        """A statement with a body: ``lhs = rhs`` then the body at this level when it is the last
        statement here, else ``with rhs as lhs:`` and the body nested (``frame``: as in
        ``frame_body``)."""
        if concise:
            name = define() if define else None
            self.emit(f"{name or lhs} = {rhs}" if (name or lhs) else rhs)
            self.continue_body(body, top, alone=alone_body, flat=flat, frame=frame)
        else:
            self.namer.push()
            name = define() if define else lhs
            self.emit(f"with {rhs} as {name}:" if name else f"with {rhs}:")
            self.indent += 1
            self.frame_body(body, frame)
            self.indent -= 1
            self.namer.pop()


def use_frames(body: Any) -> dict[int, tuple]:
    """For each variable and buffer of ``body`` (by id), the frames of TVM's printer around every
    one of its uses, outermost first: ids of the ``For``, ``Block``, ``AttrStmt`` and ``While``
    nodes, and of an ``if``'s branches. As in TVM's printer, a block's frame is its ``Block``: a
    use in its realize's bindings or predicate is outside it."""
    paths: dict[int, tuple] = {}
    stack: list = [(body, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, (Var, Buffer)):
            old = paths.get(id(node))
            if old is None:
                paths[id(node)] = path
            elif old != path:
                common = 0
                while common < min(len(old), len(path)) and old[common] == path[common]:
                    common += 1
                paths[id(node)] = old[:common]
        if isinstance(node, Var):
            continue
        if isinstance(node, Node):
            if isinstance(node, (For, Block, AttrStmt, While)):
                path = path + (id(node),)
            branches = isinstance(node, IfThenElse)
            for name, _, _ in walk_fields(type(node)):
                value = getattr(node, name)
                if value is not None and not isinstance(value, (str, int, float)):
                    branch = branches and name != "condition"
                    stack.append((value, path + (id(value),) if branch else path))
        elif isinstance(node, (tuple, list)):
            stack.extend((item, path) for item in node)
        elif isinstance(node, dict):
            stack.extend((item, path) for pair in node.items() for item in pair)
    return paths
