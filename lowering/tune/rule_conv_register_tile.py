"""ConvRegisterTile: the default CPU conv schedule's neighbours in a tuning space.

MultiLevelTiling tiles a convolution as any reduction, reading the weight in its own layout:
along a tile of output channels the weight is strided by a whole filter, so its candidates
measured 3x to 10x behind ``tvms.dlight``'s Conv2D, which packs the weight once per model
(``meta_schedule.layout_rewrite_preproc``, the work that TVM's RewriteLayout does) and keeps an
MR pixels x NV vectors tile of accumulators in registers. That rule picks one register tile by a
cost estimate; this one branches the space into one schedule per register tile that fits the
registers (its plan, its weight packing and its epilogue as the rule writes them, only the tile
differs), so the measurements choose. The blocks of a branch are marked ``schedule_rule="None"``
so the rules after this one leave them as they are. Such a conv is not left to the rules after
this one as well: their sketches measured 3x to 50x behind the default schedule on every conv
tried, so a trial spent on one is lost; each trial goes to a register tile instead (a branch
has no sampled decision: the replay measures each once, then the task ends). A conv on
channel-blocked data (``Conv2DBlocked``'s, NCHW16c) is branched the same way over its tiles of
whole blocks. A function that is not a conv as Conv2D or Conv2DBlocked takes it is left to the
other rules.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad
from ...ir.stmt import BufferStore
from ..dlight.analysis import const_int, describe_block, describe_blocks, vector_lanes
from ..dlight.cpu_conv import match_conv2d, register_tiles, schedule_channel_vectors, vector_registers
from ..dlight.cpu_conv_blocked import blocked_tiles, match_blocked_conv2d, schedule_blocked
from ..dlight.cpu_tactics import schedule_spatial_block
from ..schedule import ScheduleError
from .rule_analysis import site
from .rule_apply_custom import leave_to_no_other_rule
from .schedule_rule import ScheduleRule


class ConvRegisterTile(ScheduleRule):
    """At a conv block (the input's padding before it, an elementwise epilogue after it): one
    branch per register tile (``register_tiles``); the block as it was when none fits."""

    def __init__(self) -> None:
        self.target: Any = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.target = context.target

    def apply(self, sch: Any, block: Any) -> list:
        plan = self._conv(sch, block)
        if plan is None:
            return [sch]
        conv, extents, groups, blocked = plan
        if blocked:
            tiles = blocked_tiles(extents[1] * extents[4], extents[3], extents[4], self.target,
                                  conv.write().buffer.dtype)
        else:
            lanes = vector_lanes(self.target, conv.write().buffer.dtype)
            tiles = register_tiles(extents[1] // groups, extents[3], lanes, vector_registers(self.target))
        branches = []
        for tile in tiles:
            branch = sch.copy()
            try:
                self._schedule(branch, tile, blocked)
            except ScheduleError:
                continue
            branches.append(branch)
        return branches or [sch]

    @staticmethod
    def _conv(sch: Any, block: Any) -> tuple | None:
        """(the conv's BlockInfo, its loop extents, its groups, whether its data is channel-blocked)
        when ``block`` is the conv of a function Conv2D's channel-vector plan or Conv2DBlocked's
        plan takes, else None."""
        infos = describe_blocks(sch)
        if site(sch, block)[1].block.name_hint not in {i.block.name_hint for i in infos}:
            return None
        info = describe_block(sch, block)
        operands = match_blocked_conv2d(info) if info.is_reduction() else None
        blocked = operands is not None
        operands = operands or (match_conv2d(info) if info.is_reduction() else None)
        if operands is None or sum(i.is_reduction() for i in infos) != 1:
            return None
        data = operands[0]
        at = next(k for k, i in enumerate(infos) if i.is_reduction())
        if any(p.write().buffer is not data.buffer or not p.is_injective() for p in infos[:at]) \
                or any(not e.is_injective() or not e.trivial for e in infos[at + 1:]):
            return None
        extents = [const_int(it.extent) for it in info.iters]
        if None in extents:
            return None
        if blocked:
            return info, extents, 1, True
        channels = const_int(data.buffer.shape[1])
        if not channels or channels % extents[4] or extents[1] % (channels // extents[4]):
            return None
        return info, extents, channels // extents[4], False

    def _schedule(self, sch: Any, tile: tuple, blocked: bool) -> None:
        infos = describe_blocks(sch)
        at = next(k for k, i in enumerate(infos) if i.is_reduction())
        conv = infos[at]
        if blocked:
            schedule_blocked(sch, conv, match_blocked_conv2d(conv)[0], infos[at + 1:], self.target, tile)
        else:
            schedule_channel_vectors(sch, conv, match_conv2d(conv)[1], infos[at + 1:], self.target, *tile)
        for pad in infos[:at]:  # (as Conv2D: a padding that pads nothing is a copy, inlined)
            if isinstance(pad.block.body, BufferStore) and isinstance(pad.block.body.value, BufferLoad):
                sch.compute_inline(pad.rv)
            else:
                schedule_spatial_block(sch, describe_block(sch, pad.rv), self.target)
        leave_to_no_other_rule(sch)
