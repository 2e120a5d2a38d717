"""``from tvms.script import ir as I``: ``I.ir_module`` parses the decorated class."""
from __future__ import annotations

from typing import Any

from .decorators import ir_module


def module_attrs(attrs: dict) -> Any:
    """Inside an ``@I.ir_module`` class body; read by the parser, a no-op when Python runs it."""
    return None


__all__ = ["ir_module", "module_attrs"]
