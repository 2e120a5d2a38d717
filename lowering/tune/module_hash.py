"""Structural hashes of the search's modules, kept per function object.

The search hashes each candidate's module several times (the modules seen in a generation, the
measured ones, the feature cache), and a candidate's functions are the very objects its
schedule made, so each function is hashed once. Two structurally equal modules hash alike (as
``structural_hash`` promises for each function), which is all a hash table of modules needs.
"""
from __future__ import annotations

from typing import Any

from ...ir.structural import structural_hash

MEMO_SIZE = 8192
_memo: dict[int, tuple[Any, int]] = {}  # id(function) -> (the function, kept alive; its hash)


def function_hash(func: Any) -> int:
    hit = _memo.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    value = structural_hash(func)
    if len(_memo) >= MEMO_SIZE:
        _memo.pop(next(iter(_memo)))  # (the oldest)
    _memo[id(func)] = (func, value)
    return value


def module_hash(mod: Any) -> int:
    """A hash of the module's functions by name (equal modules have equal functions)."""
    return hash(tuple(sorted((name, function_hash(mod[name])) for name in mod)))
