"""The Python functions ``R.call_py_func("name", ...)`` calls (TVM's ``vm.builtin.register_py_func``).

A module's text only names the function; the function itself must be registered by the user's
own Python code (``tvms.relax.register_py_func("name", f)``), so running a module never executes
anything its text holds. The function receives the arguments as numpy arrays (and numbers,
tuples) and returns an array, or a tuple of them for several results.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tvms.ir import registry
from tvms.ir.errors import TVMSError

from .tensor import Tensor

_PY_FUNCS: dict[str, Callable] = {}


def register_py_func(name: str, func: Callable) -> None:
    """Make ``func`` the Python function ``R.call_py_func(name, ...)`` calls (a later registration
    of the name replaces it, as in TVM)."""
    if not isinstance(name, str) or not name:
        raise TVMSError(f"a Python function is registered under a non-empty string, not {name!r}")
    if not callable(func):
        raise TVMSError(f"register_py_func({name!r}): {type(func).__name__} is not callable")
    _PY_FUNCS[name] = func


def get_py_func(name: str) -> Callable:
    func = _PY_FUNCS.get(name)
    if func is None:
        raise TVMSError(f"R.call_py_func: no Python function named {name!r} is registered (register "
                        f"it from Python with tvms.relax.register_py_func({name!r}, f))")
    return func


def call_py_func(name: str, args: tuple) -> Any:
    """The registered function ``name`` on ``args``; a returned Tensor becomes its array."""
    out = get_py_func(name)(*args)
    return tuple(_array(o) for o in out) if isinstance(out, (tuple, list)) else _array(out)


def _array(value: Any) -> Any:
    return value.array if isinstance(value, Tensor) else np.asarray(value)


registry.register_func("vm.builtin.register_py_func", register_py_func, internal=True)
registry.register_func("vm.builtin.call_py_func", call_py_func)
