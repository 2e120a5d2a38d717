"""The Relax variables an expression binds, uses without binding, or mentions (TVM's
``relax.analysis.bound_vars`` / ``free_vars`` / ``all_vars`` / ``all_global_vars``), each in order of
first appearance."""
from __future__ import annotations

from typing import Any

from . import relax as rx
from .module import GlobalVar
from .visitor import collect


def _unique(items: list) -> list:
    seen: set[int] = set()
    return [x for x in items if not (id(x) in seen or seen.add(id(x)))]


def bound_vars(expr: Any) -> list:
    """Variables ``expr`` binds: function parameters and binding targets."""
    found = []
    for node in collect(expr, (rx.Function, rx.VarBinding, rx.MatchCast)):
        found.extend(node.params if isinstance(node, rx.Function) else (node.var,))
    return _unique(found)


def all_vars(expr: Any) -> list:
    """Every Relax variable ``expr`` binds or uses."""
    return _unique(collect(expr, rx.Var))


def free_vars(expr: Any) -> list:
    """Variables ``expr`` uses without binding them."""
    bound = {id(v) for v in bound_vars(expr)}
    return [v for v in all_vars(expr) if id(v) not in bound]


def all_global_vars(expr: Any) -> list:
    """The global functions ``expr`` refers to."""
    return _unique(collect(expr, GlobalVar))


__all__ = ["all_global_vars", "all_vars", "bound_vars", "free_vars"]
