"""Unique names for the variables and functions a builder or a pass makes."""
from __future__ import annotations


class NameSupply:
    """Unique names, as TVM's NameSupply: ``lv``, ``lv1``, ``lv2``; ``fc1.weight`` -> ``fc1_weight``."""

    def __init__(self) -> None:
        self._count: dict[str, int] = {}

    def fresh(self, name: str) -> str:
        name = name.replace(".", "_")
        if name not in self._count:
            self._count[name] = 0
            return name
        candidate = name
        while candidate in self._count:
            self._count[name] += 1
            candidate = f"{name}{self._count[name]}"
        self._count[candidate] = 0
        return candidate


__all__ = ["NameSupply"]
