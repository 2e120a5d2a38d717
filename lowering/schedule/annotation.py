"""Annotations on loops and blocks: ``T.serial(..., annotations={...})`` and ``T.block_attr``."""
from __future__ import annotations

from typing import Any

from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import BlockRealize, For
from .errors import ScheduleError
from .tree import replace_stmts


def _target(node: Any) -> Any:
    return node.block if isinstance(node, BlockRealize) else node


def _what(node: Any) -> str:
    return f"loop '{node.loop_var.name}'" if isinstance(node, For) else f"block '{_target(node).name_hint}'"


def annotate(func: PrimFunc, node: Any, key: str, value: Any) -> PrimFunc:
    if not isinstance(key, str):
        raise ScheduleError(f"annotate: the key for {_what(node)} must be a string, got {key!r}")
    if not isinstance(value, (int, float, str, list, tuple)):
        raise ScheduleError(f"annotate: cannot annotate {_what(node)} with a {type(value).__name__}")
    target = _target(node)
    annotations = dict(target.annotations)
    annotations[key] = tuple(value) if isinstance(value, list) else value  # as the parser stores lists
    return replace_stmts(func, {id(target): target.with_changes(annotations=FrozenDict(annotations))})


def unannotate(func: PrimFunc, node: Any, key: str) -> PrimFunc:
    target = _target(node)
    if key not in target.annotations:
        raise ScheduleError(f"unannotate: {_what(node)} has no annotation {key!r}")
    annotations = {k: v for k, v in target.annotations.items() if k != key}
    return replace_stmts(func, {id(target): target.with_changes(annotations=FrozenDict(annotations))})
