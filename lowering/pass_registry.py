"""Passes by name, so that the command line (``tvms opt -p A,B``) can name them.

The registry maps a name to a factory: a callable taking no arguments that returns a ``Pass``
(a class made by ``@module_pass`` is one). ``register_pass`` adds one; ``load_passes`` imports a
user's Python file and finds the passes defined at its top level.

Decorating a pass does not register it: a registry filled as a side effect of importing would
keep every test's throwaway pass. Registration is explicit (``register_pass``) or by loading.
"""
from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable

from ..ir.errors import TVMSError
from ..ir.registry import load_layers
from .transform import Pass

_REGISTRY: dict[str, Callable[[], Pass]] = {}
_SOURCES: dict[str, Any] = {}  # name -> what was registered (registering it again is harmless)


def register_pass(name: str | None = None, factory: Any = None, override: bool = False) -> Any:
    """Register a pass factory under ``name`` (default: the pass's own name).

    ``register_pass("MyPass", factory)`` registers directly; ``@register_pass()`` or
    ``@register_pass("Name")`` decorates a pass class, a pass factory or a pass object and returns
    it unchanged. Registering a taken name raises unless ``override``."""

    def add(target: Any) -> Any:
        pass_name = name or pass_name_of(target)
        if not pass_name:
            raise TVMSError(f"register_pass: give a name for {target!r}")
        if pass_name in _REGISTRY and not override and _SOURCES.get(pass_name) is not target:
            raise TVMSError(f"a pass named {pass_name!r} is already registered")
        _REGISTRY[pass_name] = _as_factory(target)
        _SOURCES[pass_name] = target
        return target

    return add(factory) if factory is not None else add


def unregister_pass(name: str) -> None:
    _REGISTRY.pop(name, None)
    _SOURCES.pop(name, None)


def get_pass(name: str) -> Pass:
    """A new pass object for the registered ``name``; an unknown name raises a ``TVMSError``
    that lists the closest names."""
    factory = _REGISTRY.get(name)
    if factory is None:  # (the built-in passes register as their layer loads)
        load_layers(lambda: name in _REGISTRY)
        factory = _REGISTRY.get(name)
    if factory is None:
        raise TVMSError(unknown_pass_message(name, list(_REGISTRY)))
    made = factory()
    if not isinstance(made, Pass):
        raise TVMSError(f"the factory registered as {name!r} returned {type(made).__name__}, "
                        f"not a pass")
    return made


def list_passes() -> list[str]:
    """The registered pass names, sorted."""
    load_layers()
    return sorted(_REGISTRY)


def unknown_pass_message(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    lowered = [k for k in known if k.lower() == name.lower() and k not in close]
    close = lowered + close
    msg = f"unknown pass {name!r}"
    if close:
        msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
    if known:
        msg += f" (known passes: {', '.join(sorted(known))})"
    else:
        msg += " (no passes are registered; load some with --load FILE.py)"
    return msg


def pass_name_of(target: Any) -> str | None:
    """The name a pass, a pass class or a decorated class carries, else None."""
    if isinstance(target, Pass):
        return target.info.name
    info = getattr(target, "pass_info", None)
    return getattr(info, "name", None)


def _as_factory(target: Any) -> Callable[[], Pass]:
    if isinstance(target, Pass):
        return lambda: target
    if callable(target):
        return target
    raise TVMSError(f"register_pass: {target!r} is neither a pass nor a pass factory")


def passes_in_module(module: Any) -> dict[str, Callable[[], Pass]]:
    """Passes defined at the top level of a Python module: pass objects and classes made by
    ``@module_pass`` / ``@function_pass`` that can be built without arguments."""
    found: dict[str, Callable[[], Pass]] = {}
    for attr, value in vars(module).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, Pass):
            found[value.info.name] = _as_factory(value)
        elif inspect.isclass(value) and issubclass(value, Pass) and hasattr(value, "pass_info") \
                and getattr(value, "__module__", None) == module.__name__:
            found[value.pass_info.name] = value
    return found


def load_passes(path: str) -> list[str]:
    """Import the Python file ``path`` and register the passes defined at its top level (and any
    it registers itself with ``register_pass``); returns the names it added, in order.
    Errors while importing raise ``TVMSError`` with the file name."""
    if not os.path.isfile(path):
        raise TVMSError(f"cannot load passes from {path}: no such file")
    mod_name = "tvms_user_passes_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise TVMSError(f"cannot load passes from {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    before = set(_REGISTRY)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001  (a user's file: report, do not crash)
        sys.modules.pop(mod_name, None)
        raise TVMSError(f"cannot load passes from {path}: {type(err).__name__}: {err}") from err
    found = passes_in_module(module)
    for pass_name, factory in found.items():
        _REGISTRY[pass_name] = factory  # a loaded file may replace a pass of the same name
        _SOURCES[pass_name] = factory
    return list(dict.fromkeys([n for n in _REGISTRY if n not in before] + list(found)))


__all__ = ["get_pass", "list_passes", "load_passes", "passes_in_module", "register_pass",
           "unknown_pass_message", "unregister_pass"]
