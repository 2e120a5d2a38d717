"""One generic visitor and one generic mutator, both derived from the node classes' fields.

Subclasses override ``visit_<ClassName>`` (``visit_For``, ``visit_BufferStore``) and call
``generic_visit`` to continue into the children.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from .node import FrozenDict, Node, walk_fields


def _children(value: Any) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _children(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _children(k)
            yield from _children(v)


def children(node: Node) -> Iterator[Node]:
    for name, _, _ in walk_fields(type(node)):
        yield from _children(getattr(node, name))


def walk(node: Node) -> Iterator[Node]:
    """Every node reachable from ``node``, in pre-order (shared nodes once per occurrence)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def collect(node: Node, kind: type | tuple) -> list:
    """Every node of the given class(es) reachable from ``node``, in pre-order (as ``walk``,
    but iterative and without generators: analyses call it on whole functions)."""
    found = []
    stack: list = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        if isinstance(n, Node):
            if isinstance(n, kind):
                found.append(n)
            fields = walk_fields(type(n))
            for i in range(len(fields) - 1, -1, -1):  # reversed, so the first field is next
                value = getattr(n, fields[i][0])
                if value is not None and not isinstance(value, (str, int, float)):
                    push(value)
        elif isinstance(n, (tuple, list)):
            stack.extend(reversed(n))
        elif isinstance(n, dict):
            for k, v in reversed(list(n.items())):
                push(v)
                push(k)
    return found


class Visitor:
    """Walks IR; ``visit`` dispatches to ``visit_<ClassName>`` (or a base class's), else
    ``generic_visit``. The walk recurses as deep as the IR nests: passes, printing and
    compiling give it room (``tvms.ir.deep``); a walk started directly on deep IR does that
    with ``run_deep(visitor.visit, node)``."""

    _dispatch: dict[type, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}  # per visitor class: node class -> method

    def visit(self, node: Node) -> Any:
        table = type(self)._dispatch
        method = table.get(type(node))
        if method is None:
            method = table[type(node)] = self._find(type(node))
        return method(self, node)

    def _find(self, node_class: type) -> Any:
        for klass in node_class.__mro__:
            method = getattr(type(self), f"visit_{klass.__name__}", None)
            if method is not None:
                return method
        return type(self).generic_visit

    def generic_visit(self, node: Node) -> Any:
        for child in children(node):
            self.visit(child)


class Mutator(Visitor):
    """Rebuilds IR bottom-up; returns the very same object when nothing below it changed."""

    def generic_visit(self, node: Node) -> Node:
        changes = {}
        for name, _, _ in walk_fields(type(node)):
            old = getattr(node, name)
            if isinstance(old, Node):
                new = self.visit(old)
            elif isinstance(old, (tuple, dict)):
                new = self._mutate(old)
            else:  # (a string, number or None: nothing to rebuild)
                continue
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        return dataclasses.replace(node, **changes)  # type: ignore[type-var]

    def _mutate(self, value: Any) -> Any:
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            new = [self._mutate(v) for v in value]
            for a, b in zip(new, value):
                if a is not b:
                    return tuple(new)
            return value
        if isinstance(value, dict):
            items = [(self._mutate(k), self._mutate(v)) for k, v in value.items()]
            if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
                return value
            return FrozenDict(items)
        return value
