"""What ``with`` makes current (a target, a PassContext, a tuning database), per thread.

TVM keeps these thread-local: a context one thread enters is not another's, so a build in a second
thread runs under its own settings. Here the entered objects live in a context variable, which a
new thread starts empty and which ``contextvars.copy_context()`` carries where tvms moves work to a
thread of its own (``ir/deep.py``).
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any


class ContextStack:
    """The objects entered with ``with``, innermost last, in this thread."""

    def __init__(self, name: str) -> None:
        self._entered: ContextVar[tuple] = ContextVar(name, default=())

    def push(self, obj: Any) -> None:
        self._entered.set(self._entered.get() + (obj,))

    def pop(self, obj: Any) -> None:
        """Leave ``obj`` (with-statements nest: it is the innermost, else nothing changes)."""
        entered = self._entered.get()
        if entered and entered[-1] is obj:
            self._entered.set(entered[:-1])

    def current(self) -> Any:
        """The innermost object entered, or None."""
        entered = self._entered.get()
        return entered[-1] if entered else None


__all__ = ["ContextStack"]
