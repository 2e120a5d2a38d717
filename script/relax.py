"""``from tvms.script import relax as R``: the names Relax written in Python refers to.

``R.function`` parses the decorated function (inside an ``@I.ir_module`` class, the class
decorator parses the whole class); every other ``R.<name>`` exists so that Python can evaluate
annotations such as ``x: R.Tensor((1, 784), "float32")`` before the decorator runs.
"""
from __future__ import annotations

from typing import Any, Callable

from .decorators import _Anything, _parse, _is_method

__all__ = ["function"]


def function(func: Callable | None = None, *, pure: bool = True, private: bool = False) -> Any:
    """``@R.function`` / ``@R.function(private=True)``: the decorated function as a Relax function."""
    def decorate(f: Callable) -> Any:
        return f if _is_method(f) else _parse(f)

    return decorate(func) if func is not None else decorate


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything(f"R.{name}")
