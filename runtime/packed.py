"""Functions registered from user code (``tvms.register_func``) as TVM's packed functions.

TVM hands a packed function its tensor arguments as runtime tensors (``tvm.nd.NDArray``: ``shape``,
``dtype``, ``numpy()``, ``copyfrom``, DLPack), not as numpy arrays. The VM and the reference
executor hold tensors as numpy arrays, so a user's function is registered behind an adapter that
shows each array as a ``Tensor`` sharing its memory (writes to a destination-passing output land in
the caller's buffer) and takes a returned ``Tensor`` back as its array. Functions tvms registers
for itself (kernel loaders, codegen backends) use ``tvms.ir.registry`` directly and see arrays.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tvms.ir import registry

from .device import cpu
from .tensor import Tensor, tensor

_CPU = cpu(0)


class PackedFunc:
    """A user's function as the runtime calls it; calling it from Python works the same way."""

    __slots__ = ("func", "__name__")

    def __init__(self, func: Callable):
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, *args: Any) -> Any:
        return _as_array(self.func(*(_as_tensor(a) for a in args)))

    def __repr__(self) -> str:
        return f"<PackedFunc {self.__name__}>"


def _as_tensor(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.flags.c_contiguous and value.flags.writeable:
            # shared, not copied: a destination-passing output is written through it. (The
            # alignment Tensor's constructor asks for serves compiled kernels; this view is only
            # handed to the user's function.)
            view = Tensor.__new__(Tensor)
            view.array, view.device = value, _CPU
            return view
        return tensor(value)  # a read-only or strided input: a copy is all the function needs
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_as_tensor(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _as_array(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.array
    if type(value) is tuple:
        return tuple(_as_array(v) for v in value)
    return value


def register_func(name: str | Callable, f: Callable | None = None, override: bool = False) -> Callable:
    """Register ``f`` as the global function ``name`` (TVM's ``tvm.register_func``); without
    ``f``, a decorator. The function receives tensors as ``tvms.nd.NDArray``; the decorator gives
    back the function itself. (The registry checks the name and that ``f`` is callable.)"""
    if callable(name) and f is None:  # bare ``@register_func``
        return register_func(name.__name__, name, override)

    def register(fn: Callable) -> Callable:
        adapted = PackedFunc(fn) if callable(fn) and not isinstance(fn, PackedFunc) else fn
        registry.register_func(name, adapted, override)
        return fn

    return register(f) if f is not None else register


__all__ = ["PackedFunc", "register_func"]
