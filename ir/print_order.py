"""The order in which Apache TVM prints the functions of a module.

TVM's module is unordered; its printer sorts the functions: PrimFuncs, then extern functions, then
Relax functions, each group by name, and the function named ``main`` last whatever its kind. tvms
keeps insertion order and uses this order where it prints as TVM 0.27 does."""
from __future__ import annotations

from typing import Any

from .function import PrimFunc
from .relax import ExternFunc


def _kind_rank(func: Any) -> int:
    if isinstance(func, PrimFunc):
        return 1
    if isinstance(func, ExternFunc):
        return 2
    return 3  # a Relax function


def tvm_function_order(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``(global var or name, function)`` pairs sorted as TVM's printer sorts a module."""
    def key(item: tuple[Any, Any]) -> tuple[int, str]:
        name = item[0] if isinstance(item[0], str) else item[0].name_hint
        return (1000 if name == "main" else _kind_rank(item[1]), name)
    return sorted(items, key=key)
