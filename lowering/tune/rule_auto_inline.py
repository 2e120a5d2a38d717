"""AutoInline and InlineConstantScalars: fold elementwise blocks into their neighbours."""
from __future__ import annotations

from typing import Any

from ...ir.errors import TVMSError
from ..schedule import inline
from .rule_analysis import has_if_then_else, has_op, is_root, is_spatial_prim_func, read_write_pattern, site
from .schedule_rule import ScheduleRule

INLINE_RULE = "meta_schedule.inline_rule"


def _can(step: Any, *args: Any) -> bool:
    try:
        step(*args)
    except TVMSError:
        return False
    return True


def _has_consumers(sch: Any, block: Any) -> bool:
    # asked of a copy: TVM's rule looks at the block without recording a GetConsumers step
    return bool(sch.copy().get_consumers(block))


def _has_one_producer(sch: Any, block: Any) -> bool:
    return len(sch.copy().get_producers(block)) == 1


class AutoInline(ScheduleRule):
    """``AutoInline(into_producer, into_consumer, inline_const_tensor, disallow_if_then_else,
    require_injective, require_ordered, disallow_op=None)`` as TVM's: inline a block into its
    consumers (compute_inline) or its only producer (reverse_compute_inline) when it is cheap to
    recompute: one write, no disallowed operator, no branch, and reads that map injectively and in
    order onto the write (checks skipped in a purely spatial function)."""

    def __init__(self, into_producer: bool, into_consumer: bool, inline_const_tensor: bool,
                 disallow_if_then_else: bool, require_injective: bool, require_ordered: bool,
                 disallow_op: "list[str] | None" = None) -> None:
        self.into_producer, self.into_consumer = into_producer, into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective, self.require_ordered = require_injective, require_ordered
        # TVM 0.27 spells the operators tirx.*; tvms's IR names them tir.*
        self.disallow_op = [name.replace("tirx.", "tir.", 1) for name in disallow_op or []]

    def apply(self, sch: Any, block: Any) -> list:
        kind = self._inline_kind(sch, block)
        if kind == "consumer":
            sch.compute_inline(block)
        elif kind == "producer":
            sch.reverse_compute_inline(block)
        return [sch]

    def _inline_kind(self, sch: Any, block_rv: Any) -> str | None:
        fname, realize, path = site(sch, block_rv)
        func, block = sch.mod[fname], realize.block
        if len(block.writes) != 1:
            return None
        can_inline = lambda: _can(inline.compute_inline, func, realize)  # noqa: E731
        if self.inline_const_tensor and not block.reads and _has_consumers(sch, block_rv) and can_inline():
            return "consumer"
        if not is_spatial_prim_func(func):
            if self.disallow_op and has_op(realize, self.disallow_op):
                return None
            if self.disallow_if_then_else and has_if_then_else(realize):
                return None
            for read in block.reads:
                pattern = read_write_pattern(read, block.writes[0])
                injective, ordered = pattern if pattern is not None else (False, False)
                if (self.require_injective and not injective) or (self.require_ordered and not ordered):
                    return None
        if block.annotations.get(INLINE_RULE) == "disable" or is_root(path):
            return None
        if self.into_consumer and _has_consumers(sch, block_rv) and can_inline():
            return "consumer"
        if (self.into_producer and _has_one_producer(sch, block_rv)
                and _can(inline.reverse_compute_inline, func, realize)):
            return "producer"
        return None


class InlineConstantScalars(ScheduleRule):
    """Inline a block that stores a constant into a 0-d buffer no one outside reads."""

    def apply(self, sch: Any, block: Any) -> list:
        fname, realize, path = site(sch, block)
        b = realize.block
        if not b.reads and len(b.writes) == 1 and not b.writes[0].buffer.shape and not is_root(path):
            scope = next(p for p in reversed(path) if hasattr(p, "alloc_buffers"))
            if any(buf is b.writes[0].buffer for buf in scope.alloc_buffers):
                sch.compute_inline(block)
        return [sch]
