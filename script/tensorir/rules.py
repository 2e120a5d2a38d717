"""The one table through which TensorIR is read and printed.

Each construct module (loops, blocks, buffers, threads, attrs, statements, functions, exprs)
registers its parse rules and its print rules here, side by side in its own file; the parser
core and the printer core only look rules up:

- ``PARSE[form][name]``: how ``T.<name>`` is read in each syntactic form: ``"call"`` (an
  expression statement ``T.where(...)``), ``"assign"`` (``x = T.axis.spatial(...)``),
  ``"with"`` (``with T.block(...):``), ``"for"`` (``for i in T.serial(...)``);
- ``EXPR_BUILTINS[name]``: ``T.<name>(...)`` inside an expression (``T.Cast``, ``T.max``, ...);
- ``SUBSCRIPT_BUILTINS[name]``: ``T.<name>[...]`` inside an expression (``T.S[8:1]``);
- ``OPERATOR_HOOKS``: how a binary operator reads operands that are not expressions (a layout's
  ``4 @ Axis.laneid``): each returns NotImplemented for operands it does not know;
- ``GLOBAL_NAMES[name]``: names a script uses without defining them (``Axis``, imported by the
  header), each a ``Namespace`` whose attributes are read by its ``attribute``;
- ``PRINT_STMT[node class]`` and ``PRINT_EXPR[node class]``: how a node prints.
"""
from __future__ import annotations

from typing import Any, Callable

FORMS = ("call", "assign", "with", "for")
PARSE: dict[str, dict[str, Callable]] = {form: {} for form in FORMS}
EXPR_BUILTINS: dict[str, Callable] = {}
SUBSCRIPT_BUILTINS: dict[str, Callable] = {}
OPERATOR_HOOKS: list[Callable] = []
GLOBAL_NAMES: dict[str, "Namespace"] = {}
PRINT_STMT: dict[type, Callable] = {}
PRINT_EXPR: dict[type, Callable] = {}

# ``T.<name>`` that resolve (for messages and suggestions) though no rule above reads them
# alone: the decorator, ``T.axis`` before its kind, ``T.let[...]``, ``T.comm_reducer`` and
# ``T.index_map`` (read by the evaluator itself), ``T.Then`` / ``T.Else`` (read by ``with T.If(...)``).
_OTHER_NAMES = frozenset("prim_func axis let comm_reducer index_map bool Then Else".split())


class ScriptFunction:
    """A value the script calls that is no ``T.<name>`` (``I.Op("tirx.tile.add")``)."""

    def call(self, ev: Any, args: list, kwargs: dict, syn: Any) -> Any:
        raise NotImplementedError


class Namespace:
    """A name such as ``Axis``: ``attribute(ev, name, syn)`` reads ``Axis.<name>``."""

    def attribute(self, ev: Any, name: str, syn: Any) -> Any:
        raise NotImplementedError


def parses(form: str, *names: str) -> Callable:
    """Register the decorated function as the ``form`` rule of ``T.<name>`` for each name."""
    def register(rule: Callable) -> Callable:
        for name in names:
            PARSE[form][name] = rule
        return rule
    return register


def prints(*classes: type, table: dict = PRINT_STMT) -> Callable:
    """Register the decorated function as the print rule of the node classes."""
    def register(rule: Callable) -> Callable:
        for cls in classes:
            table[cls] = rule
        return rule
    return register


def prints_expr(*classes: type) -> Callable:
    return prints(*classes, table=PRINT_EXPR)


_statement_names: frozenset | None = None


def statement_builtin_names() -> frozenset:
    """The ``T.<name>`` that are statements or scopes (the parse rules' names)."""
    global _statement_names
    if _statement_names is None:
        _statement_names = frozenset().union(*PARSE.values()) | _OTHER_NAMES
    return _statement_names


# ---------------------------------------------------------------- what a statement rule returns
class TakesRest:
    """A statement that took the rest of the body as its own."""

    __slots__ = ("stmt",)

    def __init__(self, stmt):
        self.stmt = stmt


class Header:
    """A statement that changed the enclosing block or function instead of making a statement."""

    __slots__ = ()


class Declaration(Header):
    """A variable's declaration (``n = T.int32()``), which the printer writes where the variable is
    first needed: its comments go with the statement that follows."""

    __slots__ = ()


def call_args(b, call) -> tuple[list, dict]:
    """The evaluated positional and keyword arguments of a call's syntax."""
    return [b.ev(a) for a in call.args], {k: b.ev(v) for k, v in call.kwargs}
