"""Structural equality and hashing of IR, modulo a consistent renaming of bound variables.

Variables and buffers are matched where they are *bound* (loop variables, block iterators,
parameters, allocations, ...); a later use must refer to the matched partner. Free variables
must be the very same object unless ``map_free_vars`` is set. A buffer met before any binding
(the classic dialect's ``B = T.Buffer(..., data=A.data)`` aliases) is compared by its
declaration. Names, spans and printing hints are ignored.
"""
from __future__ import annotations

import math
from typing import Any

from .buffer import Buffer
from .deep import deep_recursion
from .errors import TVMSError
from .expr import Var
from .relax import Function, Var as RelaxVar, VarBinding
from .module import IRModule
from .node import FrozenDict, Node, walk_fields


class _Mismatch(Exception):
    def __init__(self, path: "_Path", lhs: Any, rhs: Any):
        self.path, self.lhs, self.rhs = _render(path), lhs, rhs
        super().__init__(self.path)


# A path into the IR as a chain (parent, step), rendered only when a mismatch is reported:
# building each step's full string would cost the depth at every step (cubic on deep IR).
_Path = Any  # a str, or a (parent, step) pair whose parent is a _Path


def _render(path: _Path) -> str:
    steps = []
    while isinstance(path, tuple):
        path, step = path
        steps.append(step)
    return path + "".join(reversed(steps))


class _Equal:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lmap: dict[int, Any] = {}
        self.rmap: dict[int, Any] = {}
        self.keep: list = []  # keeps mapped objects alive so that their ids stay unique

    def fail(self, path: _Path, a: Any, b: Any) -> None:
        raise _Mismatch(path, a, b)

    def bind(self, a: Any, b: Any, path: _Path) -> None:
        ia, ib = id(a), id(b)
        if ia in self.lmap or ib in self.rmap:
            if self.lmap.get(ia) is not b:
                self.fail(path, a, b)
            return
        self.lmap[ia] = b
        self.rmap[ib] = a
        self.keep.append((a, b))

    def value(self, a: Any, b: Any, path: _Path, binding: bool = False) -> None:
        if isinstance(a, Node):
            if not isinstance(b, Node) or type(a) is not type(b):
                self.fail(path, a, b)
            if isinstance(a, (Var, Buffer, RelaxVar)):
                self.ref(a, b, path, binding)
            else:
                self.node(a, b, path, binding)
        elif isinstance(a, (tuple, list)):
            if not isinstance(b, (tuple, list)) or len(a) != len(b):
                self.fail(path, a, b)
            for i, (x, y) in enumerate(zip(a, b)):
                self.value(x, y, (path, f"[{i}]"), binding)
        elif isinstance(a, dict):
            if not isinstance(b, dict) or len(a) != len(b):
                self.fail(path, a, b)
            if all(isinstance(k, str) for k in a):
                if set(a) != set(b):
                    self.fail(path, a, b)
                for k in a:
                    self.value(a[k], b[k], (path, f"[{k!r}]"), binding)
            else:  # keyed by nodes (a buffer map): compare in order
                for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items())):
                    self.value(ka, kb, (path, f".key[{i}]"), binding)
                    self.value(va, vb, (path, f".value[{i}]"), binding)
        elif isinstance(a, float) and isinstance(b, float):
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                self.fail(path, a, b)
        elif type(a) is not type(b) or a != b:
            if not (a is None and b is None):
                self.fail(path, a, b)

    def node(self, a: Node, b: Node, path: _Path, binding: bool) -> None:
        fields = walk_fields(type(a))
        if isinstance(a, VarBinding) and isinstance(a.value, Function):
            fields = fields[::-1]  # (a local function may call itself: its variable is bound first)
        for name, binds, structural in fields:
            if structural:
                self.value(getattr(a, name), getattr(b, name), (path, "." + name), binding or binds)

    def ref(self, a: Any, b: Any, path: _Path, binding: bool) -> None:
        """A variable or buffer: matched at its binding site, looked up at its uses."""
        mapped = self.lmap.get(id(a))
        if mapped is not None:
            if mapped is not b:
                self.fail(path, a, b)
            return
        if id(b) in self.rmap:
            self.fail(path, a, b)
        if binding or self.map_free_vars or isinstance(a, Buffer):
            # A buffer's definition carries its shape, so it is compared in full on first sight;
            # variables inside a bound buffer's shape are bound by it (``n`` in ``(n, 128)``).
            self.node(a, b, path, binding or isinstance(a, Buffer))
            self.bind(a, b, path)
        elif a is not b:
            self.fail(path, a, b)


def _module_functions(mod: IRModule) -> dict:
    return {name: mod[name] for name in mod}


@deep_recursion
def first_mismatch(lhs: Any, rhs: Any, map_free_vars: bool = False) -> tuple[str, Any, Any] | None:
    """None when equal, else (path, lhs part, rhs part) of the first difference."""
    eq = _Equal(map_free_vars)
    try:
        if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
            if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)):
                eq.fail("", lhs, rhs)
            eq.value(dict(lhs.attrs), dict(rhs.attrs), "attrs")
            eq.value(dict(lhs.global_infos), dict(rhs.global_infos), "global_infos")
            lf, rf = _module_functions(lhs), _module_functions(rhs)
            # a module maps names to functions, as TVM's does: the order they print in is no
            # structure (the 0.27 dialect prints TVM's order, the classic one insertion order)
            if sorted(lf) != sorted(rf):
                eq.fail("functions", list(lf), list(rf))
            for name in lf:
                # each function binds its own variables (a builder may reuse one parameter Var
                # in several functions; the classic text defines `n = T.int64()` in each)
                _Equal(map_free_vars).value(lf[name], rf[name], ("", f"[{name!r}]"))
        else:
            eq.value(lhs, rhs, "")
    except _Mismatch as m:
        return m.path, m.lhs, m.rhs
    return None


@deep_recursion
def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """True when ``lhs`` and ``rhs`` are the same IR up to renaming of bound variables."""
    return first_mismatch(lhs, rhs, map_free_vars) is None


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    found = first_mismatch(lhs, rhs, map_free_vars)
    if found is not None:
        path, a, b = found
        raise TVMSError(f"structural mismatch at {path or '<root>'}:\n  lhs: {a!r}\n  rhs: {b!r}")


@deep_recursion
def structural_hash(value: Any) -> int:
    """A hash consistent with ``structural_equal(..., map_free_vars=True)``: variables hash by
    the order in which they are first met, not by name or identity."""
    numbering: dict[int, int] = {}
    keep: list = []

    def h(v: Any) -> Any:
        if isinstance(v, Node):
            if isinstance(v, (Var, Buffer, RelaxVar)):
                n = numbering.get(id(v))
                if n is not None:
                    return ("ref", n)
                numbering[id(v)] = len(numbering)
                keep.append(v)
            return (type(v).__name__,) + tuple(
                h(getattr(v, name)) for name, _, structural in walk_fields(type(v)) if structural)
        if isinstance(v, (tuple, list)):
            return tuple(h(x) for x in v)
        if isinstance(v, dict):
            return tuple((h(k), h(x)) for k, x in v.items())
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, IRModule):
            # each function numbers its own variables, as structural_equal compares them
            return (h(dict(v.attrs)),) + tuple(sorted((name, structural_hash(v[name])) for name in v))
        return v

    return hash(h(value))


__all__ = ["structural_equal", "assert_structural_equal", "structural_hash", "first_mismatch", "FrozenDict"]
