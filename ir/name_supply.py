"""Unique names for the variables and functions a builder or a pass makes."""
from __future__ import annotations


class NameSupply:
    """Unique names, as TVM's NameSupply: ``lv``, ``lv1``, ``lv2``; ``fc1.weight`` -> ``fc1_weight``.
    ``separator`` goes between a name and its number (TVM's source code generators use ``_``:
    ``x``, ``x_1``)."""

    def __init__(self, separator: str = "") -> None:
        self._count: dict[str, int] = {}
        self._separator = separator

    def fresh(self, name: str) -> str:
        name = name.replace(".", "_")
        if name not in self._count:
            self._count[name] = 0
            return name
        candidate = name
        while candidate in self._count:
            self._count[name] += 1
            candidate = f"{name}{self._separator}{self._count[name]}"
        self._count[candidate] = 0
        return candidate

    def reserve(self, name: str) -> None:
        """Keep ``name`` from being handed out (its first ``fresh`` gets a number)."""
        self._count.setdefault(name, 0)

    def __contains__(self, name: str) -> bool:
        return name in self._count


__all__ = ["NameSupply"]
