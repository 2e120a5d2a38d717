"""``from tvms.script import tir as T``: the names TensorIR written in Python refers to.

``T.prim_func`` parses the decorated function; every other ``T.<name>`` exists so that Python
can evaluate annotations such as ``A: T.Buffer((128,), "float32")`` before the decorator runs.
"""
from __future__ import annotations

from typing import Any

from .decorators import _Anything, prim_func

__all__ = ["prim_func"]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything(f"T.{name}")
