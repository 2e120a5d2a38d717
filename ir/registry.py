"""The global packed-function registry: functions by name, as TVM's ``register_func`` /
``get_global_func``.

Relax reaches these by name (``R.call_packed("env.relu", ...)``, ``R.call_dps_packed``), codegen
backends register themselves as ``relax.ext.<backend>``, and RunCodegen registers the kernels it
builds. There is one registry for the whole process.
"""
from __future__ import annotations

import difflib
import threading
from typing import Callable

from tvms.ir.errors import TVMSError

_FUNCTIONS: dict[str, Callable] = {}
# tvms's own plumbing (loaders, codegen backends, kernel factories) is registered by name too, so that
# layers find each other; a script's text may not call these (``get_script_func``): they take Python
# objects or raw addresses and are not part of what a program may do.
_INTERNAL: set[str] = set()
# ``import tvms`` loads the IR layer only, and the layers above load their parts on first use, so
# what those parts register by name (global functions, the printer, passes) may not be there yet.
# Each such layer adds the function that imports them; a lookup that misses runs the pending ones.
_layer_loaders: list[Callable[[], None]] = []
_loading = threading.RLock()  # (a lookup in another thread waits for the layers being loaded)


def add_layer_loader(load: Callable[[], None]) -> None:
    """Called by a layer's package with a function that imports what it registers on demand."""
    _layer_loaders.append(load)


def load_layers(until: Callable[[], bool] = lambda: False) -> None:
    """Run the pending layer loaders (see ``add_layer_loader``) in the order they were added, as a
    lookup by name does before it reports a miss, until ``until()`` holds (the name is there) or
    none is left."""
    with _loading:
        while _layer_loaders and not until():  # (a loader may import a layer that adds its own)
            load = _layer_loaders.pop(0)  # (first: a lookup while it loads does not run it again)
            try:
                load()
            except BaseException:  # still pending: the next lookup raises its error again
                _layer_loaders.insert(0, load)
                raise


def register_func(name: str | Callable, f: Callable | None = None, override: bool = False, *,
                  internal: bool = False) -> Callable:
    """Register ``f`` as the global function ``name``; without ``f``, a decorator.

    >>> @register_func("env.add_one")
    ... def add_one(x, out): out[...] = x + 1

    ``@register_func`` on its own registers under the function's ``__name__``. A name already
    taken is refused unless ``override=True``. ``internal=True`` (tvms's own plumbing) keeps the
    function from scripts: ``get_script_func`` refuses it.
    """
    if callable(name) and f is None:  # bare ``@register_func``
        return register_func(name.__name__, name, override, internal=internal)
    if not isinstance(name, str) or not name:
        raise TVMSError(f"a global function is registered under a non-empty string, not {name!r}")

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TVMSError(f"register_func({name!r}): {type(fn).__name__} is not callable")
        if name in _FUNCTIONS and not override:
            raise TVMSError(f"the global function {name!r} is already registered "
                            f"(pass override=True to replace it)")
        _FUNCTIONS[name] = fn
        (_INTERNAL.add if internal else _INTERNAL.discard)(name)  # (a user's override is the user's)
        return fn

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name``; a missing one is an error, or None with
    ``allow_missing=True``."""
    fn = _FUNCTIONS.get(name)
    if fn is None:
        load_layers(lambda: name in _FUNCTIONS)
        fn = _FUNCTIONS.get(name)
    if fn is None and not allow_missing:
        close = difflib.get_close_matches(name, list(_FUNCTIONS), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else " (see register_func)"
        raise TVMSError(f"no global function named {name!r} is registered{hint}")
    return fn


def get_script_func(name: str, allow_missing: bool = False) -> Callable | None:
    """``get_global_func`` for a name a script's text gives (``R.call_packed``, ``T.call_packed``,
    ``R.ExternFunc``): tvms's internal functions are refused."""
    fn = get_global_func(name, allow_missing)
    if fn is not None and name in _INTERNAL:
        raise TVMSError(f"the global function {name!r} is internal to tvms (its build and runtime call "
                        f"it); a script cannot call it")
    return fn


def list_global_func_names() -> list[str]:
    load_layers()
    return sorted(_FUNCTIONS)


def remove_global_func(name: str) -> None:
    _INTERNAL.discard(name)
    if _FUNCTIONS.pop(name, None) is None:
        raise TVMSError(f"cannot remove {name!r}: no global function of that name is registered")


__all__ = ["add_layer_loader", "get_global_func", "get_script_func", "list_global_func_names", "load_layers",
           "register_func", "remove_global_func"]
