"""The base of every IR node, and the immutable mapping nodes use for attributes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import Span


class FrozenDict(dict):
    """A dict that refuses mutation: attributes and annotations of immutable nodes."""

    __slots__ = ()

    def _immutable(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("IR attribute maps are immutable; build a new one")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable  # type: ignore
    __ior__ = _immutable  # type: ignore

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


EMPTY = FrozenDict()


def frozen(mapping: Any = None) -> FrozenDict:
    if mapping is None or (not mapping and not isinstance(mapping, FrozenDict)):
        return EMPTY
    return mapping if isinstance(mapping, FrozenDict) else FrozenDict(mapping)


def binds(**kwargs: Any) -> Any:
    """A field whose variables (or buffers) are defined, not used, at this node."""
    return field(metadata={"binds": True}, **kwargs)


def derived(**kwargs: Any) -> Any:
    """A field computed from the others; ignored by structural equality and the mutator."""
    return field(init=False, repr=False, metadata={"derived": True}, **kwargs)


def aside(**kwargs: Any) -> Any:
    """A note on how the source wrote a node, for the printer alone: the walkers (visitors,
    mutators, structural equality) do not see it, and a pass may leave it stale."""
    return field(metadata={"aside": True}, **kwargs)


def hint(**kwargs: Any) -> Any:
    """A field that guides printing only; ignored by structural equality."""
    return field(metadata={"structural": False}, **kwargs)


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """An immutable IR node. Equality is identity; see ``tvms.ir.structural_equal``."""

    span: Span | None = field(default=None, kw_only=True, repr=False, metadata={"structural": False})

    # Per-class cache of (name, binds, structural) for the generic walkers.
    _walk_fields: ClassVar[dict[type, tuple[tuple[str, bool, bool], ...]]] = {}

    def script(self, **kwargs: Any) -> str:
        """TVMScript text of this node (``dialect="classic"`` or ``"tvm-0.27"``)."""
        return printer()(self, **kwargs)

    def show(self, style: str | None = None, black_format: bool | None = None, **kwargs: Any) -> None:
        """Print ``script(**kwargs)`` (TVM's ``style`` and ``black_format`` are accepted; tvms
        prints plain text, already in its final layout)."""
        print(self.script(**kwargs))

    def with_changes(self, **changes: Any) -> "Node":
        return dataclasses.replace(self, **changes)


# The printer lives one layer up (tvms.script) and registers itself here when imported,
# so that ``node.script()`` works without the IR layer importing the script layer.
_printer: Any = None


def register_printer(printer: Any) -> None:
    global _printer
    _printer = printer


def printer() -> Any:
    """The registered printer (the layers are loaded first when none is: see ``load_layers``)."""
    if _printer is None:
        from .registry import load_layers

        load_layers(lambda: _printer is not None)
        if _printer is None:
            raise RuntimeError("no printer registered: import tvms.script first")
    return _printer


def walk_fields(cls: type) -> tuple[tuple[str, bool, bool], ...]:
    """(name, binds, structural) of every child-bearing field of a node class, in order."""
    hit = Node._walk_fields.get(cls)
    if hit is None:
        hit = tuple(
            (f.name, bool(f.metadata.get("binds")), f.metadata.get("structural", True))
            for f in dataclasses.fields(cls)
            if f.name != "span" and not f.metadata.get("derived") and not f.metadata.get("aside")
        )
        Node._walk_fields[cls] = hit
    return hit
