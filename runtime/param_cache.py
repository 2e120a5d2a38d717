"""Weights transformed once: the VM's cache of ``<func>_transform_params`` results.

``tvms.compile`` lifts what a function with ``num_input`` computes from its weights alone into
``<func>_transform_params`` (``lowering/relax/lift_transform_params.py``) and records, for the
Executable, how the function was split (``lifted_params``: name -> (transform, num_input,
number of weights)). ``vm["main"](x, *weights)`` still takes the original arguments: the VM runs
the transform on the weights the first time and keeps its results for that parameter set, so
later calls run only what depends on the inputs.

What "the same parameter set" means: the same objects, by identity (numpy arrays and tvms
Tensors; numbers and shapes by value). To make sure the same object still holds the same values,
the cache makes the arrays it keyed on read-only (with the arrays they are views of) for as long
as it holds them: writing into a weight in place then raises numpy's "assignment destination is
read-only" instead of silently reusing weights transformed from the old values. Making an array
writable again (``arr.flags.writeable = True``) ends its entry: the next call transforms again.
``vm.param_cache.clear()`` (and an entry leaving the cache: it holds the last ``CAPACITY`` sets)
makes the arrays writable again. Memory written behind numpy's back (through DLPack, ctypes or a
foreign base buffer) is not seen. Arguments the cache cannot key (device tensors) are
transformed at every call.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from .tensor import Tensor

CAPACITY = 4  # parameter sets kept per function (each holds its transformed weights)


class _Uncachable(Exception):
    """An argument whose identity cannot stand for its value (a device tensor)."""


def _frozen(value: Any, arrays: list) -> Any:
    """The key part of one weight: the object itself for an array (collected in ``arrays``, to
    be made read-only), the value for a number or a shape, the parts of a tuple."""
    if isinstance(value, Tensor):
        arrays.append(value.array)
        return ("tensor", value)
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return ("array", value)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return ("number", type(value), value)
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(_frozen(v, arrays) for v in value))
    raise _Uncachable


def _same(a: Any, b: Any) -> bool:
    if a[0] in ("tensor", "array"):
        return a[0] == b[0] and a[1] is b[1]
    if a[0] == "tuple":
        return b[0] == "tuple" and len(a[1]) == len(b[1]) and all(map(_same, a[1], b[1]))
    return a == b


def _with_bases(arrays: list) -> list:
    """``arrays`` and the numpy arrays they are views of (writing into a base changes a view)."""
    out: list = []
    for arr in arrays:
        while isinstance(arr, np.ndarray):
            out.append(arr)
            arr = arr.base
    return out


class _Entry:
    def __init__(self, key: tuple, arrays: list, outputs: tuple) -> None:
        self.key, self.outputs = key, outputs
        self.arrays = _with_bases(arrays)
        self.frozen = [a for a in self.arrays if a.flags.writeable]  # those made read-only here
        for a in self.frozen:
            a.flags.writeable = False

    def valid(self) -> bool:
        """Nothing it keyed on was made writable again (so nothing was written in place)."""
        return not any(a.flags.writeable for a in self.arrays)

    def release(self, others: list) -> None:
        held = {id(a) for e in others for a in e.frozen}
        for a in self.frozen:
            if id(a) not in held and not a.flags.writeable:
                try:
                    a.flags.writeable = True
                except ValueError:  # (a view of a base made read-only since)
                    pass


class ParamCache:
    """The transformed weights of one VM's lifted functions, by parameter set."""

    def __init__(self, vm: Any, lifted: dict) -> None:
        self.vm = vm
        self.lifted = dict(lifted)  # function name -> (transform name, num_input, number of weights)
        self.entries: dict[str, list[_Entry]] = {}
        self.transforms = 0  # how many times a transform ran (for tests and curious users)

    def arguments(self, name: str, args: tuple) -> tuple:
        """The arguments of the compiled function ``name`` for the call ``name(*args)``: the
        inputs, then the transformed weights (from the cache, or transformed now)."""
        spec = self.lifted.get(name)
        if spec is None:
            return args
        transform, num_input, num_weights = spec
        if len(args) != num_input + num_weights:
            raise TVMSError(f"{name} takes {num_input + num_weights} arguments ({num_input} inputs, "
                            f"then {num_weights} weights), got {len(args)}")
        inputs, weights = args[:num_input], args[num_input:]
        arrays: list = []
        try:
            key = tuple(_frozen(w, arrays) for w in weights)
        except _Uncachable:
            return (*inputs, *self._transform(transform, weights))
        entries = self.entries.setdefault(name, [])
        for i, entry in enumerate(entries):
            if len(entry.key) == len(key) and all(map(_same, entry.key, key)):
                if entry.valid():
                    if i:
                        entries.insert(0, entries.pop(i))
                    return (*inputs, *entry.outputs)
                entries.pop(i).release(self._all())
                break
        entry = _Entry(key, arrays, self._transform(transform, weights))
        entries.insert(0, entry)
        while len(entries) > CAPACITY:
            entries.pop().release(self._all())
        return (*inputs, *entry.outputs)

    def _transform(self, transform: str, weights: tuple) -> tuple:
        self.transforms += 1
        return tuple(self.vm.invoke(transform, tuple(weights)))

    def _all(self) -> list:
        return [e for entries in self.entries.values() for e in entries]

    def clear(self) -> None:
        """Forget every parameter set; the arrays made read-only become writable again."""
        entries, self.entries = self._all(), {}
        for e in entries:
            e.release([])


__all__ = ["CAPACITY", "ParamCache"]
