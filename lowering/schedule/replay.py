"""Replaying a printed trace: the text of ``str(sch.trace)``, interpreted statement by statement.

A trace file is read, never run: ``ast.parse`` (which executes nothing) gives its tree and tvms
walks it, accepting only the forms TVM prints, in either dialect: ``b0 = sch.get_block(...)``,
``l1, l2 = sch.get_loops(...)``, ``l1, = ...``, bare ``sch.<primitive>(...)`` calls, literals
(numbers, strings, booleans, None, lists, tuples), keyword arguments, index-map lambdas of
arithmetic on their parameters, ``pass``, comments, and TVM 0.27's
``def apply_trace(sch: s_tir.Schedule) -> None:`` around them. Only the primitives of the trace's
instruction table can be called and the only names are the trace's own variables; anything else
is a ScriptError at its line and column.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import operator
from typing import Any, Callable

from ...ir.dtype import DataType
from ...ir.errors import ScriptError, Source, Span, TVMSError
from ...ir.expr import const
from .errors import ScheduleError
from .trace import KINDS

_METHODS = {kind.method for kind in KINDS.values()} | {"get_block"}
_MAX_DEPTH = 64  # nesting of one expression; TVM's traces nest three deep at most
_INDEX_CONSTANT_LIMIT = 1 << 31  # index-map variables are int32
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_OPERATOR_NAMES = {ast.Pow: "**", ast.Div: "/", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
                   ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_LITERALS = (int, float, str, bool, type(None))
_FORMS = "a trace holds sch.<primitive>(...) calls, assignments of their results, and pass"


class PrimitiveFailed(ScheduleError, ScriptError):
    """A primitive called by a trace failed: the ScheduleError, located at the call in the trace."""


def _describe(node: ast.AST) -> str:
    """How an error names a form the trace language does not have."""
    names = {ast.Import: "an import", ast.ImportFrom: "an import", ast.For: "a loop", ast.While: "a loop",
             ast.If: "an if statement", ast.With: "a with statement", ast.ClassDef: "a class",
             ast.AugAssign: "an augmented assignment", ast.AnnAssign: "an annotated assignment",
             ast.Delete: "a del statement", ast.Global: "a global statement", ast.Try: "a try statement",
             ast.Subscript: "indexing", ast.Attribute: "an attribute", ast.Starred: "a starred expression",
             ast.Dict: "a dict", ast.Set: "a set", ast.BinOp: "arithmetic", ast.Compare: "a comparison",
             ast.JoinedStr: "an f-string", ast.Lambda: "a lambda"}
    return names.get(type(node), f"this form ({type(node).__name__})")


class _Reader:
    """Positions in one trace text: spans of ast nodes and positioned errors."""

    def __init__(self, source: Source):
        self.source = source

    def column(self, line: int, byte_offset: int) -> int:
        """The 1-based character column of a 0-based UTF-8 byte offset (ast counts bytes)."""
        text = self.source.line_text(line)
        return len(text.encode()[:byte_offset].decode("utf-8", "ignore")) + 1

    def span(self, node: ast.AST) -> Span:
        line, end_line = node.lineno, node.end_lineno or node.lineno
        col = self.column(line, node.col_offset)
        end_col = self.column(end_line, node.end_col_offset) if node.end_col_offset is not None else col + 1
        return Span(self.source, line, col, end_line, end_col)

    def error(self, node: ast.AST, message: str, note: str | None = None) -> ScriptError:
        return ScriptError(message, self.span(node), note)

    def text(self, node: ast.AST, limit: int = 40) -> str:
        segment = ast.get_source_segment(self.source.text, node) or type(node).__name__
        return segment if len(segment) <= limit else segment[:limit] + "..."


def _parse(text: str, name: str, mode: str) -> tuple[_Reader, ast.AST]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # the lines as ast counts them
    reader = _Reader(Source(text, name))
    if "\0" in text:  # ast.parse refuses it without a position
        at = text.index("\0")
        line = text.count("\n", 0, at) + 1
        col = at - (text.rfind("\n", 0, at) + 1) + 1
        raise ScriptError("a trace cannot contain NUL bytes", Span(reader.source, line, col, line, col + 1))
    try:
        return reader, ast.parse(text, name, mode=mode)
    except SyntaxError as e:
        line = e.lineno or 1
        col = max(1, e.offset or 1)
        end = e.end_offset if e.end_lineno == line and e.end_offset and e.end_offset > col else col + 1
        raise ScriptError(f"the trace is not valid Python: {e.msg}",
                          Span(reader.source, line, col, line, end)) from None
    except (RecursionError, MemoryError):
        raise ScriptError(f"the trace is nested too deeply to read (expressions nest at most {_MAX_DEPTH} deep)",
                          Span(reader.source, 1, 1, 1, 2)) from None


def _typed_constant(node: ast.AST) -> Any:
    """``T.float32(0.5)`` or ``T.int8(-1)`` as a constant of that dtype; None for another form."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1
            and not node.keywords and isinstance(node.func.value, ast.Name) and node.func.value.id == "T"):
        return None
    arg, sign = node.args[0], 1
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        arg, sign = arg.operand, -1
    if not (isinstance(arg, ast.Constant) and type(arg.value) in (int, float)):
        return None
    try:
        dtype = DataType(node.func.attr)
    except (TVMSError, ValueError):
        return None
    if not (dtype.is_float or dtype.is_integer) or dtype.lanes != 1:
        return None
    return const(sign * arg.value, dtype)


class IndexMapLambda:
    """An index map written in a trace, ``lambda i, j: (j, i)``: calling it evaluates the lambda's
    arithmetic (``+ - * // %``, unary minus, integer constants) on its arguments, by walking the
    checked tree; it has the lambda's signature, so ``IndexMap.from_func`` reads its parameters."""

    def __init__(self, node: ast.Lambda, reader: _Reader):
        args = node.args
        extra = args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults
        if extra:
            raise reader.error(node, "an index map takes plain parameters: lambda i, j: (...)")
        self.params = [a.arg for a in args.args]
        self.results = node.body.elts if isinstance(node.body, (ast.Tuple, ast.List)) else [node.body]
        self.single = not isinstance(node.body, (ast.Tuple, ast.List))
        self.text = reader.text(node, limit=200)
        self.source = reader.text(node, limit=len(reader.source.text))  # whole, for a trace's JSON form
        for result in self.results:  # (a result may be a pair: annotate_buffer_access's (begin, end))
            for part in result.elts if isinstance(result, ast.Tuple) and len(result.elts) == 2 else [result]:
                self._check(part, reader, 0)
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in self.params])

    def _check(self, node: ast.AST, reader: _Reader, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise reader.error(node, f"the index map nests too deeply (limit {_MAX_DEPTH})")
        if isinstance(node, ast.Name):
            if node.id not in self.params:
                raise reader.error(node, f"an index map can use only its parameters ({', '.join(self.params)}), "
                                         f"not {node.id!r}")
        elif isinstance(node, ast.Constant):
            if type(node.value) is not int or abs(node.value) >= _INDEX_CONSTANT_LIMIT:
                raise reader.error(node, f"an index map's constants are int32 integers, not {reader.text(node)}")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left, reader, depth + 1)
            self._check(node.right, reader, depth + 1)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and isinstance(node.right, ast.Constant) \
                    and node.right.value == 0:
                raise reader.error(node.right, "the index map divides by zero")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            self._check(node.operand, reader, depth + 1)
        elif _typed_constant(node) is not None:
            pass  # a pad value's constant, T.float32(0.5)
        elif isinstance(node, ast.BinOp):
            symbol = _OPERATOR_NAMES.get(type(node.op), type(node.op).__name__)
            raise reader.error(node, f"an index map's operators are + - * // %, not {symbol}")
        else:
            raise reader.error(node, f"an index map is arithmetic (+ - * // %) on its parameters; "
                                     f"{_describe(node)} is not")

    def _value(self, node: ast.AST, env: dict) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self._value(e, env) for e in node.elts)
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._value(node.left, env), self._value(node.right, env))
        if isinstance(node, ast.Call):
            return _typed_constant(node)
        return -self._value(node.operand, env)  # the only unary form _check lets through

    def __call__(self, *args: Any) -> Any:
        if len(args) != len(self.params):
            raise ScheduleError(f"the index map {self.text} takes {len(self.params)} indices, got {len(args)}")
        env = dict(zip(self.params, args))
        values = tuple(self._value(r, env) for r in self.results)
        return values[0] if self.single else values

    def __repr__(self) -> str:
        return self.text


class _Interpreter:
    """Runs the statements of a trace on a schedule, one primitive call at a time."""

    def __init__(self, sch: Any, reader: _Reader):
        self.sch, self.reader = sch, reader

    def run(self, module: ast.Module) -> None:
        functions = [s for s in module.body if isinstance(s, ast.FunctionDef)]
        if len(functions) > 1:
            raise self.reader.error(functions[1], "a trace defines apply_trace once")
        receiver = self.signature(functions[0]) if functions else None  # checked before anything runs
        env: dict = {}
        self.block([s for s in module.body if not isinstance(s, ast.FunctionDef)], env, "sch", in_function=False)
        if receiver is not None:  # as Python would: defined, then called after the other statements
            self.block(functions[0].body, dict(env), receiver, in_function=True)

    def signature(self, node: ast.FunctionDef) -> str:
        """The name the schedule has inside ``def apply_trace(sch: s_tir.Schedule) -> None:``."""
        err = self.reader.error
        if node.name != "apply_trace":
            raise err(node, f"a trace may define only apply_trace, not {node.name!r}")
        if node.decorator_list:
            raise err(node.decorator_list[0], "apply_trace takes no decorator")
        args = node.args
        if len(args.args) != 1 or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise err(node, "apply_trace takes one parameter, the schedule: def apply_trace(sch)")
        annotation = args.args[0].annotation
        if annotation is not None and not (
                isinstance(annotation, ast.Name) and annotation.id == "Schedule"
                or isinstance(annotation, ast.Attribute) and annotation.attr == "Schedule"
                and isinstance(annotation.value, ast.Name)):
            raise err(annotation, "the schedule parameter is annotated s_tir.Schedule, if at all")
        if node.returns is not None and not (isinstance(node.returns, ast.Constant) and node.returns.value is None):
            raise err(node.returns, "apply_trace returns None")
        return args.args[0].arg

    def block(self, statements: list, env: dict, receiver: str, in_function: bool) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Return):
                if not in_function:
                    raise self.reader.error(stmt, "return outside apply_trace")
                if stmt.value is not None and not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None):
                    raise self.reader.error(stmt.value, "apply_trace returns nothing")
                return
            self.statement(stmt, env, receiver)

    def statement(self, stmt: ast.stmt, env: dict, receiver: str) -> None:
        err = self.reader.error
        if isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Call):
                raise err(stmt, f"a statement of a trace is a schedule call, not {_describe(stmt.value)}",
                          note=_FORMS)
            self.call(stmt.value, env, receiver, 0)
            return
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                raise err(stmt.targets[1], "a trace assigns to one name or one tuple of names")
            names = self.targets(stmt.targets[0], receiver)
            self.assign(stmt.targets[0], names, self.expr(stmt.value, env, receiver, 0), stmt.value, env)
            return
        if isinstance(stmt, ast.FunctionDef):
            raise err(stmt, "apply_trace is defined at the top of a trace, not inside it")
        raise err(stmt, f"{_describe(stmt)} is not part of the trace language", note=_FORMS)

    def targets(self, target: ast.expr, receiver: str) -> list[str]:
        """The names an assignment binds: ``b0`` or ``l1, l2`` (checked before the call runs)."""
        names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for name in names:
            if not isinstance(name, ast.Name):
                raise self.reader.error(name, f"a trace assigns to names, not to {_describe(name)}")
            if name.id == receiver:
                raise self.reader.error(name, f"a trace cannot assign to the schedule {receiver!r}")
        return [n.id for n in names]

    def assign(self, target: ast.expr, names: list[str], value: Any, value_node: ast.expr, env: dict) -> None:
        err = self.reader.error
        if not isinstance(target, (ast.Tuple, ast.List)):
            env[names[0]] = value
            return
        if not isinstance(value, (list, tuple)):
            raise err(target, f"{self.reader.text(value_node)} gives one value; the trace unpacks {len(names)}")
        if len(value) != len(names):
            raise err(target, f"{self.reader.text(value_node)} gives {len(value)} value(s); the trace unpacks "
                              f"{len(names)}")
        env.update(zip(names, value))

    def expr(self, node: ast.expr, env: dict, receiver: str, depth: int) -> Any:
        err = self.reader.error
        if depth > _MAX_DEPTH:
            raise err(node, f"nesting too deep (limit {_MAX_DEPTH})")
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, _LITERALS):
                raise err(node, f"a trace's literals are numbers, strings, booleans and None, not "
                                f"{self.reader.text(node)}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id == receiver:
                raise err(node, f"the schedule {receiver!r} can only be called: {receiver}.<primitive>(...)")
            if node.id not in env:
                close = difflib.get_close_matches(node.id, list(env), n=3)
                raise err(node, f"unknown variable {node.id!r}",
                          note=f"did you mean {' or '.join(map(repr, close))}?" if close else
                          "a variable is defined by assigning a schedule call's result to it")
            return env[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            values = [self.expr(e, env, receiver, depth + 1) for e in node.elts]
            return values if isinstance(node, ast.List) else tuple(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.expr(node.operand, env, receiver, depth + 1)
            if type(value) not in (int, float):
                raise err(node, "unary minus applies to a number")
            return -value
        if isinstance(node, ast.Call):
            return self.call(node, env, receiver, depth)
        if isinstance(node, ast.Lambda):
            return IndexMapLambda(node, self.reader)
        raise err(node, f"{_describe(node)} is not part of the trace language", note=_FORMS)

    def call(self, node: ast.Call, env: dict, receiver: str, depth: int) -> Any:
        err = self.reader.error
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == receiver):
            raise err(func, f"{self.reader.text(func)}(...) is not a schedule method a trace can call",
                      note=f"a trace calls {receiver}.<primitive>(...)")
        if func.attr not in _METHODS:
            close = difflib.get_close_matches(func.attr, sorted(_METHODS), n=3)
            raise err(func, f"{receiver}.{func.attr} is not a schedule primitive a trace can call",
                      note=f"did you mean {' or '.join(close)}?" if close else None)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise err(a, "a trace passes arguments one by one, not as *list")
            args.append(self.expr(a, env, receiver, depth + 1))
        kwargs = {}
        method = getattr(self.sch, func.attr)
        signature = inspect.signature(method)
        params = signature.parameters
        for kw in node.keywords:
            if kw.arg is None:
                raise err(kw, "a trace passes keyword arguments one by one, not as **dict")
            if kw.arg not in params or params[kw.arg].kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                   inspect.Parameter.KEYWORD_ONLY):
                known = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
                raise err(kw, f"{receiver}.{func.attr} has no parameter {kw.arg!r}",
                          note=f"its parameters: {', '.join(known)}")
            kwargs[kw.arg] = self.expr(kw.value, env, receiver, depth + 1)
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:
            raise err(node, f"{receiver}.{func.attr}(...): {e}") from None
        return self.invoke(method, args, kwargs, node, f"{receiver}.{func.attr}")

    def invoke(self, method: Callable, args: list, kwargs: dict, node: ast.Call, what: str) -> Any:
        try:
            return method(*args, **kwargs)
        except PrimitiveFailed:
            raise
        except ScheduleError as e:
            raise PrimitiveFailed(str(e), self.reader.span(node)) from None
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError, OverflowError) as e:
            # a value of the wrong kind that the primitive did not check, e.g. factors=["a"]
            raise self.reader.error(node, f"{what}(...) cannot take these arguments "
                                          f"({type(e).__name__}: {e})") from None


def apply_trace_text(text: str, sch: Any, name: str = "<trace>") -> None:
    """Replay the printed trace ``text`` on the schedule ``sch``, interpreting it (never executing it).

    A malformed trace raises ScriptError; a primitive that fails raises ``PrimitiveFailed``, which
    is both the primitive's ScheduleError and a ScriptError located at its call."""
    reader, tree = _parse(text, name, "exec")
    _Interpreter(sch, reader).run(tree)


def evaluate_lambda(text: str) -> IndexMapLambda:
    """The index map that the text ``lambda i, j: (j, i)`` stands for (arithmetic only)."""
    reader, tree = _parse(text, "<index map>", "eval")
    if not isinstance(tree.body, ast.Lambda):
        raise reader.error(tree.body, f"an index map is a lambda, not {reader.text(tree.body)}")
    return IndexMapLambda(tree.body, reader)
