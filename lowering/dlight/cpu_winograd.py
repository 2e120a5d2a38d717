"""The default CPU schedules of the Winograd convolution's kernels (``relax/winograd.py``), found by
their blocks' ``schedule_rule`` annotation; tuning's ApplyCustomRule runs the same schedules
(``s_tir.meta_schedule.cpu.winograd_*``).

- ``winograd_data``: rows of tiles of each channel block in parallel; per tile, its alpha^2
  transformed values, each a vector of the block's channels (the padding is ``R.nn.pad``'s
  kernel, before it).
- ``winograd_gemm``: ``Conv2DBlocked``'s register tile on a 1x1 convolution: per tile position
  ``t`` and chunk of output blocks (in parallel), MR tiles by NV vectors of output channels
  accumulate in registers over all input channels (their MR broadcasts and NV weight vectors
  per step), then go to memory whole.
- ``winograd_output``: rows of tiles of each output block in parallel; per tile, its m x m
  outputs, vectors of channels; the epilogue (bias,
  relu, a residual add) as one block computed per tile as the tile is made (in L1). Where the last
  tiles overhang the output, its loops there are of variable extent, which tuning's
  DisallowDynamicLoop refuses: tuning's rule computes the epilogue as a loop nest of its own after
  all the tiles (SqueezeNet's 16 -> 64 at 55 x 55: 0.042 against 0.027 ms per tile).
- ``winograd_weight`` (weights only, when they are parameters): tile positions and output
  blocks in parallel.
"""
from __future__ import annotations

from math import isqrt
from typing import Any

from ...ir.errors import TVMSError
from ...ir.expr import Var
from ...ir.function import PrimFunc
from ...ir.registry import register_func
from ...ir.target import Target
from ..relax.winograd import DATA_RULE, GEMM_RULE, OUTPUT_RULE, SCHEDULE_RULE, WEIGHT_RULE
from ..schedule import Schedule
from ..schedule.errors import ScheduleError
from ..schedule.layout import IndexMap
from .analysis import CPURule, const_int, describe_block, root_blocks, vector_lanes
from .cpu_conv_blocked import blocked_tiles, copy_out_in_vectors, unroll_register_tile
from .cpu_tactics import schedule_spatial_block, vector_factor


class Winograd(CPURule):
    """The kernels of a Winograd convolution (see the module docstring)."""

    name = "Winograd"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc):
            return None
        sch = Schedule(func)
        for rv in root_blocks(sch):
            schedule = SCHEDULES.get(sch.get(rv).annotations.get(SCHEDULE_RULE))
            if schedule is not None:
                try:
                    schedule(sch, rv, target)
                except ScheduleError:
                    return None
                return sch
        return None


def schedule_data(sch: Schedule, block: Any, target: Any) -> None:
    c, n, ty, tx, lane = sch.get_loops(block)
    sch.parallel(sch.fuse(c, n, ty))
    _vectorize(sch, lane, target)


def schedule_gemm(sch: Schedule, block: Any, target: Any) -> None:
    t, ko, p, ki, c = sch.get_loops(block)
    out = sch.get(block).writes[0].buffer
    blocks, tiles, lanes = (const_int(out.shape[i]) for i in (1, 2, 3))
    options = blocked_tiles(blocks * lanes, tiles, lanes, target, out.dtype)
    if not options:
        raise ScheduleError("winograd_gemm: no register tile fits")
    mr, nv, vec = options[0]
    ko_0, ko_1 = sch.split(ko, [None, nv * vec // lanes])
    ki_0, ki_v = sch.split(ki, [None, vec])
    p_0, p_1 = sch.split(p, [None, mr])
    c_0, c_1 = sch.split(c, [None, lanes])
    sch.reorder(t, ko_0, p_0, c_0, c_1, p_1, ko_1, ki_0, ki_v)
    sch.parallel(sch.fuse(t, ko_0))
    acc = sch.cache_write(block, 0, "local")
    v = [Var(f"v{d}", out.shape[0].dtype) for d in range(4)]
    sch.transform_layout(block, ("write", 0), IndexMap(v, [v[0], v[2], v[1], v[3]]))  # ([p, ko, ki])
    sch.reverse_compute_at(acc, p_0, preserve_unit_loops=True)
    unroll_register_tile(sch, block, sch.decompose_reduction(block, c_0))
    a_ko, a_p, a_ki = sch.get_loops(acc)[-3:]
    copy_out_in_vectors(sch, [a_ko, a_p], a_ki, vec)


def _tile_size(sch: Schedule, block: Any) -> int:
    """m of the output kernel's F(m x m, 3 x 3): its GEMM input holds (m + 2)^2 tile positions."""
    gemm = next(r.buffer for r in sch.get(block).reads if len(r.buffer.shape) == 4)
    return isqrt(const_int(gemm.shape[0])) - 2


def schedule_output(sch: Schedule, block: Any, target: Any, static_loops: bool = False) -> None:
    epilogue, tail = [], block
    while consumers := sch.get_consumers(tail):
        tail = consumers[0]
        epilogue.append(tail)
    for later in epilogue[1:]:  # (one block: the whole epilogue)
        sch.reverse_compute_inline(later)
    n, ko, ty, tx, lane = sch.get_loops(block)
    sch.parallel(sch.fuse(n, ko, ty))
    _vectorize(sch, lane, target)
    out = sch.get(block).writes[0].buffer
    whole_tiles = all(const_int(out.shape[i]) % _tile_size(sch, block) == 0 for i in (2, 3))
    if epilogue and not whole_tiles and static_loops:
        schedule_spatial_block(sch, describe_block(sch, epilogue[0]), target)
    elif epilogue:  # (per tile, as its outputs are made: the tile's outputs stay in L1)
        sch.reverse_compute_at(epilogue[0], tx, preserve_unit_loops=True)
        a, b, e_lane = sch.get_loops(epilogue[0])[-3:]
        for loop in (a, b):  # (a ragged last tile's loops stay loops: T.unroll needs a constant extent)
            if const_int(sch.get(loop).extent) is not None:
                sch.unroll(loop)
        _vectorize(sch, e_lane, target)


def schedule_weight(sch: Schedule, block: Any, target: Any) -> None:
    t, ko = sch.get_loops(block)[:2]
    sch.parallel(sch.fuse(t, ko))


def _vectorize(sch: Schedule, loop: Any, target: Any) -> None:
    """Vectorize a loop over a channel block in vectors of the target's width."""
    lanes = vector_factor(const_int(sch.get(loop).extent), vector_lanes(target, 32))
    if lanes > 1:
        sch.vectorize(sch.split(loop, [None, lanes])[1])


SCHEDULES = {DATA_RULE: schedule_data, GEMM_RULE: schedule_gemm, OUTPUT_RULE: schedule_output,
             WEIGHT_RULE: schedule_weight}


def _custom_rule(schedule: Any, **options: Any) -> Any:
    """The tuning rule of a schedule: ApplyCustomRule's ``f(sch, block) -> [sch]``."""
    def rule(sch: Schedule, block: Any) -> list:
        target = Target.current(allow_none=True)
        if target is None:
            raise TVMSError("the Winograd schedule rules need a current target")
        schedule(sch, block, target, **options)
        return [sch]
    return rule


for _name, _schedule in SCHEDULES.items():
    _options = {"static_loops": True} if _schedule is schedule_output else {}
    register_func(f"s_tir.meta_schedule.cpu.{_name}", _custom_rule(_schedule, **_options), override=True,
                  internal=True)

__all__ = ["Winograd", "schedule_data", "schedule_gemm", "schedule_output", "schedule_weight"]
