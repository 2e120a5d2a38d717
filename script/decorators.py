"""TVMScript inside Python: ``@T.prim_func`` and ``@I.ir_module`` read the decorated source and
parse it with the same grammar as ``.tvms`` files, so both forms give the same IR."""
from __future__ import annotations

import inspect
import linecache
import textwrap
from typing import Any, Callable

from ..ir.errors import ScriptError, Source
from .module_parser import parse_module


def _source_of(obj: Any) -> Source:
    try:
        lines, first = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or "<unknown>"
    except (OSError, TypeError) as e:
        raise ScriptError(f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} to parse it "
                          f"as TVMScript ({e}); define it in a file, or use tvms.script.from_source") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(raw) - len(raw.lstrip()) - (len(text) - len(text.lstrip()))
    return Source(text, filename, line_offset=first - 1, col_offset=max(indent, 0))


def _parse(obj: Any) -> Any:
    source = _source_of(obj)
    return parse_module(source.text, source.name, source=source)


def prim_func(func: Callable | None = None, *, private: bool = False, s_tir: bool | None = None,
              check_well_formed: bool = True) -> Any:
    """``@T.prim_func`` / ``@T.prim_func(private=True)``: the decorated function as a PrimFunc.

    Inside an ``@I.ir_module`` class the function is left alone: the class decorator parses the
    whole class at once.
    """
    def decorate(f: Callable) -> Any:
        return f if _is_method(f) else _parse(f)

    return decorate(func) if func is not None else decorate


def _is_method(f: Callable) -> bool:
    """A function defined in a class body: the class's ``@I.ir_module`` parses it."""
    parts = f.__qualname__.split(".")  # C.f, or g.<locals>.C.f; not g.<locals>.f
    return len(parts) > 1 and parts[-2] != "<locals>"


def ir_module(cls: type) -> Any:
    """``@I.ir_module``: the decorated class as an IRModule."""
    if not inspect.isclass(cls):
        raise ScriptError("@I.ir_module decorates a class")
    linecache.checkcache()
    return _parse(cls)


class _Anything:
    """What ``T.Buffer((128,), "float32")`` evaluates to when Python reads an annotation.

    Python evaluates parameter annotations when it defines the function, before the decorator
    parses the source; those values are never used, so they only need to exist.
    """

    def __init__(self, name: str = "T"):
        self._name = name

    def __getattr__(self, name: str) -> "_Anything":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        return self

    def __getitem__(self, item: Any) -> "_Anything":
        return self

    def __repr__(self) -> str:
        return f"<TVMScript {self._name}>"
