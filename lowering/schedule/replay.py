"""Replaying a printed trace: the Python text of ``str(sch.trace)`` run against a Schedule.

Both dialects are accepted (bare ``sch.get_block(...)`` lines, or TVM 0.27's
``def apply_trace(sch: s_tir.Schedule) -> None:``). The text is checked first to hold nothing
but calls of schedule methods on constants and earlier results, so replaying a trace file
cannot run other code.
"""
from __future__ import annotations

import ast
from typing import Any

from ...ir.errors import TVMSError
from .trace import KINDS

_METHODS = {kind.method for kind in KINDS.values()} | {"get_block"}
_ARITHMETIC = (ast.Lambda, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)  # index maps
_ALLOWED = (ast.Module, ast.Assign, ast.Expr, ast.Call, ast.Attribute, ast.Name, ast.Tuple, ast.List,
            ast.Constant, ast.keyword, ast.Load, ast.Store, ast.UnaryOp, ast.USub, ast.Pass,
            ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Starred) + _ARITHMETIC


class _Namespace:
    """Stands for ``s_tir`` / ``tir`` in the annotation ``sch: s_tir.Schedule``."""

    def __init__(self, schedule_class: type):
        self.Schedule = schedule_class


def _check(tree: ast.Module, name: str) -> None:
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', 1)}"
        if not isinstance(node, _ALLOWED):
            raise TVMSError(f"{where}: a trace may only call schedule methods; "
                            f"found {type(node).__name__}")
        if isinstance(node, ast.FunctionDef) and node.name != "apply_trace":
            raise TVMSError(f"{where}: a trace may only define apply_trace, not {node.name!r}")
        if isinstance(node, ast.Call):
            func = node.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "sch" and func.attr in _METHODS):
                raise TVMSError(f"{where}: {ast.unparse(func)}(...) is not a schedule method "
                                f"a trace can call")


def apply_trace_text(text: str, sch: Any, name: str = "<trace>") -> None:
    """Run the printed trace ``text`` on the schedule ``sch``."""
    try:
        tree = ast.parse(text, name)
    except SyntaxError as e:
        raise TVMSError(f"{name}:{e.lineno}: the trace is not valid Python: {e.msg}") from None
    _check(tree, name)
    namespace: dict = {"__builtins__": {}, "sch": sch, "s_tir": _Namespace(type(sch)),
                       "tir": _Namespace(type(sch))}
    exec(compile(tree, name, "exec"), namespace)  # checked above: only schedule calls
    if "apply_trace" in namespace:
        namespace["apply_trace"](sch)


def evaluate_lambda(text: str) -> Any:
    """The function an index map's text ``lambda i, j: (j, i)`` stands for (arithmetic only)."""
    try:
        tree = ast.parse(text, "<index map>", mode="eval")
    except SyntaxError as e:
        raise TVMSError(f"not an index map: {text!r} ({e.msg})") from None
    if not isinstance(tree.body, ast.Lambda) or not all(
            isinstance(n, _ARITHMETIC + (ast.Expression, ast.Name, ast.Tuple, ast.List, ast.Constant, ast.Load,
                                         ast.arguments, ast.arg, ast.UnaryOp, ast.USub)) for n in ast.walk(tree)):
        raise TVMSError(f"not an index map: {text!r}")
    return eval(compile(tree, "<index map>", "eval"), {"__builtins__": {}})  # checked: arithmetic only
