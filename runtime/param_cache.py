"""Weights transformed once: the VM's cache of ``<func>_transform_params`` results.

``tvms.compile`` lifts what a function ``f`` with ``num_input`` computes from its weights alone
into ``f_transform_params``, next to ``f_lifted``, which takes the transformed weights
(``lowering/relax/lift_transform_params.py``), and records that for the Executable
(``lifted_params``: ``f`` -> (``f_lifted``, ``f_transform_params``, num_input, number of weights)).
``vm["f"](x, *weights)`` still takes the original arguments: the VM runs the transform on the
weights the first time, keeps its results for that parameter set, and calls ``f_lifted``, so
later calls run only what depends on the inputs. (``f`` itself is compiled too: a library of
an older tvms, which did not keep ``lifted_params``, runs it; ``export_library`` keeps them now,
with the native code of the call with cached weights.)

What "the same parameter set" means: the same objects, by identity (numpy arrays and tvms
Tensors; numbers and shapes by value). To make sure the same object still holds the same values,
the cache makes the arrays it keyed on read-only (with the arrays they are views of) for as long
as it holds them (the last parameter set of each function: ``CAPACITY``). So, while a set is
cached:

- ``tensor.copyfrom(new)`` on a cached weight (TVM's way to update weights) works: it ends the
  cache's hold on that array (writable again, then copied into), and the next call transforms
  the weights again;
- writing into a cached numpy weight in place (``w[...] = ...``, ``w += ...``) raises numpy's
  ``ValueError: assignment destination is read-only``: call ``vm.param_cache.clear()`` first
  (every array the cache froze becomes writable again), or set ``w.flags.writeable = True``,
  which ends that set's entry: the next call transforms again.

What the cache does not see (the weights transformed from the old values are then reused):
a weight made writable, written and made read-only again by hand between two calls; a view of
a weight made before the cache froze it (numpy lets it write: its own flag stays set), and any
memory written behind numpy's back (DLPack, ctypes, a foreign base buffer). Arguments the cache
cannot key (device tensors on a GPU VM) are not cached: the original function runs on them.

The quick check comes first: the weights of the function's last parameter set, by identity,
with none of the arrays its entry keys on writable, reuse that set. In the compiled VM it runs
in native code, in the same call as the kernels (``llvm_vm.lower_lifted_calls``: the VM hands
the last entry's ``native_parts`` to that code each time it changes, ``watch``); any other call
(another set, an array made writable again, an entry ``clear()`` forgot, a list among the
weights) goes through ``arguments`` here.
"""
from __future__ import annotations

import operator
import re
import weakref
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from .tensor import Tensor

# parameter sets kept per function: each keeps the caller's weights and their transformed
# copies alive (and read-only), so only the last one
CAPACITY = 1
_frozen_here: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()  # id -> array


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


def _holds_list(value: Any) -> bool:
    """Whether ``value`` is or holds a list (the same list object may hold other values later)."""
    return isinstance(value, list) or (isinstance(value, tuple) and any(map(_holds_list, value)))


def _with_bases(arrays: list) -> list:
    """``arrays`` and the numpy arrays they are views of (writing into a base changes a view)."""
    out: list = []
    for arr in arrays:
        while isinstance(arr, np.ndarray):
            out.append(arr)
            arr = arr.base
    return out


class _Entry:
    def __init__(self, key: tuple, weights: tuple, arrays: list, outputs: tuple) -> None:
        self.key, self.outputs = key, outputs
        # the weights as passed, for the quick check by identity (none when a list is among them)
        self.weights = None if _holds_list(weights) else weights
        self.arrays = _with_bases(arrays)
        self.frozen = [a for a in self.arrays if a.flags.writeable]  # those made read-only here
        for a in self.frozen:
            a.flags.writeable = False
            _frozen_here[id(a)] = a

    def native_parts(self) -> tuple:
        """What the native call of the lifted function checks and reads (``NativeFunction.reuse``):
        the weights as passed (``None``: no quick check), the transformed weights, the arrays
        that must stay read-only."""
        return self.weights, self.outputs, tuple(self.arrays)

    def valid(self) -> bool:
        """Nothing it keyed on was made writable again (so nothing was written in place)."""
        return not any(a.flags.writeable for a in self.arrays)

    def release(self, others: list) -> None:
        """Make writable again what this entry made read-only, unless another entry keys on it
        (then that one releases it in turn)."""
        mine = []
        for a in self.frozen:
            holder = next((e for e in others if any(b is a for b in e.arrays)), None)
            if holder is None:
                mine.append(a)
            else:
                holder.frozen.append(a)
        _make_writable(mine)


def _make_writable(arrays: list) -> None:
    """Make ``arrays`` writable, forgetting that a cache froze them (a view becomes writable only
    after its base: retried until nothing moves)."""
    while arrays:
        left = []
        for a in arrays:
            try:
                a.flags.writeable = True
                _frozen_here.pop(id(a), None)
            except ValueError:
                left.append(a)
        if len(left) == len(arrays):
            break
        arrays = left


def thaw(array: np.ndarray) -> None:
    """Make ``array`` writable where a parameter cache made it (and the arrays it views) read-only
    (``Tensor.copyfrom`` of a cached weight): the cache's entries keying on it end, so the next
    call transforms again. An array read-only for another reason stays so."""
    _make_writable([a for a in _with_bases([array]) if _frozen_here.get(id(a)) is a])


class ParamCache:
    """The transformed weights of one VM's lifted functions, by parameter set."""

    def __init__(self, vm: Any, lifted: dict) -> None:
        self.vm = vm
        self.lifted = dict(lifted)  # name -> (lifted name, transform name, num_input, number of weights)
        self.entries: dict[str, list[_Entry]] = {}
        self.last: dict[str, _Entry] = {}  # the entry each function used last (the quick check)
        self.transforms = 0  # how many times a transform ran (for tests and curious users)
        self.watchers: dict = {}  # name -> called with the function's new last entry (or None)

    def watch(self, name: str, watcher: Any) -> None:
        """Call ``watcher`` with ``name``'s last entry (``None`` for none) now and whenever it changes."""
        self.watchers[name] = watcher
        watcher(self.last.get(name))

    def _set_last(self, name: str, entry: _Entry) -> None:
        self.last[name] = entry
        if name in self.watchers:
            self.watchers[name](entry)

    def arguments(self, name: str, args: tuple) -> tuple:
        """``(function, arguments)`` to run for the call ``name(*args)``: for a lifted function,
        its ``_lifted`` form on the inputs and the transformed weights (from the cache, or
        transformed now); else (or weights it cannot key) ``name`` and ``args`` as they are."""
        spec = self.lifted.get(name)
        if spec is None:
            return name, args
        runtime, _, num_input, _ = spec
        last = self.last.get(name)
        if last is not None and last.weights is not None:  # (the same weight objects as the last
            weights = args[num_input:]                      # call, still read-only: a hit)
            if len(weights) == len(last.weights) and all(map(operator.is_, weights, last.weights)):
                for a in last.arrays:
                    if a.flags.writeable:
                        break
                else:
                    return runtime, args[:num_input] + last.outputs
        values = self._arguments(name, spec, args)
        return (name, args) if values is None else (runtime, values)

    def _arguments(self, name: str, spec: tuple, args: tuple) -> tuple | None:
        runtime, transform, num_input, _ = spec
        params = self._params(name)
        if len(args) != len(params):
            raise TVMSError(f"{name} takes {len(params)} arguments ({', '.join(params)}), got {len(args)}")
        inputs, weights = args[:num_input], args[num_input:]
        arrays: list = []
        try:
            key = tuple(_frozen(w, arrays) for w in weights)
        except _Uncachable:
            return None
        entries = self.entries.setdefault(name, [])
        for i, entry in enumerate(entries):
            if len(entry.key) == len(key) and all(map(_same, entry.key, key)):
                if entry.valid():
                    if i:
                        entries.insert(0, entries.pop(i))
                    self._set_last(name, entry)
                    return (*inputs, *entry.outputs)
                entries.pop(i).release(self._all())
                break
        outputs = self._transform(transform, weights, params[num_input:])
        takes = len(self._params(runtime)) - num_input  # (its lifted form's weights: checked once they are known)
        if len(outputs) != takes:
            raise TVMSError(f"{transform} returned {len(outputs)} transformed weights; {runtime} takes {takes} "
                            f"after its {num_input} inputs")
        entry = _Entry(key, weights, arrays, outputs)
        entries.insert(0, entry)
        self._set_last(name, entry)
        while len(entries) > CAPACITY:
            entries.pop().release(self._all())
        return (*inputs, *entry.outputs)

    def _params(self, name: str) -> tuple:
        """The parameter names of the original function ``name`` (compiled beside its lifted form)."""
        return next(f.params for f in self.vm.executable.program.functions if f.name == name)

    def _transform(self, transform: str, weights: tuple, names: tuple) -> tuple:
        self.transforms += 1
        try:
            outputs = self.vm.invoke(transform, tuple(weights))
        except TVMSError as err:  # (a bad weight, named as the caller knows it, not as a tuple field)
            message = re.sub(r"'model_params'\[(\d+)\]", lambda m: repr(names[int(m.group(1))]), str(err))
            raise TVMSError(message) from None
        if not isinstance(outputs, tuple):
            raise TVMSError(f"{transform} returned {type(outputs).__name__}, not a tuple of transformed weights")
        return outputs

    def _all(self) -> list:
        return [e for entries in self.entries.values() for e in entries]

    def clear(self) -> None:
        """Forget every parameter set; the arrays made read-only become writable again."""
        entries, self.entries, self.last = self._all(), {}, {}
        for watcher in self.watchers.values():
            watcher(None)
        for e in entries:
            e.release([])


__all__ = ["CAPACITY", "ParamCache", "thaw"]
