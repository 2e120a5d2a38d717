"""Annotations on loops and blocks: ``T.serial(..., annotations={...})`` and ``T.block_attr``."""
from __future__ import annotations

import inspect
from typing import Any

from ...ir.arith import Analyzer
from ...ir.buffer import BufferRegion
from ...ir.expr import Add, PrimExpr, Range, Sub, const
from ...ir.function import PrimFunc
from ...ir.node import FrozenDict
from ...ir.stmt import Block, BlockRealize, For
from .errors import ScheduleError
from .layout import RangesMap, index_expr
from .tree import replace_stmts


def _target(node: Any) -> Any:
    return node.block if isinstance(node, BlockRealize) else node


def _what(node: Any) -> str:
    return f"loop '{node.loop_var.name}'" if isinstance(node, For) else f"block '{_target(node).name_hint}'"


def annotate(func: PrimFunc, node: Any, key: str, value: Any) -> PrimFunc:
    if not isinstance(key, str):
        raise ScheduleError(f"annotate: the key for {_what(node)} must be a string, got {key!r}")
    if not isinstance(value, (int, float, str, list, tuple, PrimExpr)):  # (T.bool(True): an IntImm)
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


def explicit_ranges(block: Block, gen_new_ranges: Any) -> RangesMap:
    """The (begin, end) pairs ``gen_new_ranges`` gives for the block's iterators (a point ``e``
    is ``(e, e + 1)``), as a map from the iterators (TVM's annotate_buffer_access)."""
    iters = [iv.var for iv in block.iter_vars]
    if isinstance(gen_new_ranges, RangesMap):
        return gen_new_ranges
    if not callable(gen_new_ranges):
        raise ScheduleError(f"annotate_buffer_access: gen_new_ranges must be a function of the iterators, got "
                            f"{gen_new_ranges!r}")
    if len(inspect.signature(gen_new_ranges).parameters) != len(iters):
        raise ScheduleError(f"annotate_buffer_access: gen_new_ranges takes the {len(iters)} iterators of block "
                            f"'{block.name_hint}'")
    spec = gen_new_ranges(*iters)
    if not isinstance(spec, (list, tuple)) or len(spec) != len(iters):
        raise ScheduleError(f"annotate_buffer_access: gen_new_ranges must give one range per iterator of block "
                            f"'{block.name_hint}' ({len(iters)}), got {spec!r}")
    ends: list = []
    for rng in spec:
        if isinstance(rng, (list, tuple)):
            if len(rng) != 2:
                raise ScheduleError(f"annotate_buffer_access: a range is a pair (begin, end), got {rng!r}")
            ends.extend(index_expr(e, "annotate_buffer_access") for e in rng)
        elif isinstance(rng, (PrimExpr, int)):
            point = index_expr(rng, "annotate_buffer_access")
            ends.extend([point, Add(point, const(1, point.dtype))])
        else:
            raise ScheduleError(f"annotate_buffer_access: expected an expression or a pair, got {rng!r}")
    return RangesMap(iters, ends)


def annotate_buffer_access(func: PrimFunc, block: Block, index: int, buf_type: str, ranges: RangesMap) -> PrimFunc:
    regions = block.reads if buf_type == "read" else block.writes
    if not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(f"annotate_buffer_access: buffer_index {index!r} is out of range: block "
                            f"'{block.name_hint}' has {len(regions)} {buf_type} region(s)")
    ends = ranges.apply(tuple(iv.var for iv in block.iter_vars))
    buffer = regions[index].buffer
    if len(ends) != 2 * len(buffer.shape):  # (TVM asks for one range per iterator, and per dimension)
        raise ScheduleError(f"annotate_buffer_access: buffer '{buffer.name}' has {len(buffer.shape)} "
                            f"dimension(s), the ranges give {len(ends) // 2}")
    analyzer = Analyzer()
    region = BufferRegion(buffer, tuple(
        Range(ends[k], analyzer.simplify(Sub(ends[k + 1], ends[k]))) for k in range(0, len(ends), 2)))
    new_regions = tuple(region if k == index else r for k, r in enumerate(regions))
    key = f"explicit_{buf_type}_region"
    known = tuple(block.annotations.get(key, ()))
    annotations = dict(block.annotations)
    annotations[key] = known if index in known else known + (index,)
    new_block = block.with_changes(**{"reads" if buf_type == "read" else "writes": new_regions},
                                   annotations=FrozenDict(annotations))
    return replace_stmts(func, {id(block): new_block})
