"""``PlaneCopy``: the default CPU schedule of a function that only moves whole runs of its input,
such as ShuffleNet's channel shuffle (reshape to ``(G, C / G)``, transpose, reshape back: after
FuseOps one block copying planes from one order of the channels to another), maybe computing
an elementwise function of them on the way (the crop of a conv's padded groups, fused with its
batch norm and relu: ``relax/pad_conv_groups.py``; other operands read along the same runs or
one value a run).

Its read indices come out of legalization as chains of ``//`` and ``%`` that the iterators'
ranges simplify (``x[0, c % 4 * 68 + c // 4, y, x]``: the identity ``transform_block_layout``
simplifies them, a step of the schedule's trace, so that a tuning's baseline replays it); once
simplified, the trailing indices the read shares with the write (here ``y, x``: a whole plane)
are one contiguous run on both sides.
Each parallel task copies one run, fused, in vectors of the largest divisor of the run up to the
target's lanes (the injective rule's vectors along rows of 14 had 2 lanes: 11 against 5 us per
shuffle of 272 channels of 14x14, single-threaded).

``ChannelBlocks``: the copies ``R.layout_transform`` makes between NCHW and channel-blocked NCHW{b}c
(``x[n, c, h, w]`` to ``y[n, c // b, h, w, c % b]`` and back): a transposition of each row's
b x W tile, contiguous along W on the NCHW side and along the lanes on the other. Each parallel
task is a row (n, block, h); it moves tiles of b x (the widest power of two up to a vector that
divides W): a tile is read into a local buffer in vectors along its contiguous side, unrolled,
and written in vectors along the other, unrolled, which LLVM does with shuffles in registers
(the injective rule's scalar copy, lanes innermost, measured interleaved on one thread, AVX-512:
64 channels of 56x56, 0.031 against 0.057 ms back to NCHW, 0.046 against 0.129 ms to blocks;
128 of 28x28, 0.011 against 0.028 and 0.025 against 0.065; 64 of 32x32, 0.021 against 0.160 and
0.024 against 0.042). A row no such tile of 4 or more divides (13, 7) is left to the injective
rule: tiles of 13 or 7 columns came out as long shuffle sequences no faster than its copy
(512 channels of 13x13, 0.025 ms either way).
"""
from __future__ import annotations

from math import prod
from typing import Any

from ...ir.expr import Add, BufferLoad, FloorDiv, FloorMod, Mul, Var
from ...ir.function import PrimFunc
from ...ir.stmt import BufferStore
from ...ir.structural import structural_equal
from ...ir.visitor import collect
from ..schedule import Schedule
from ..schedule.layout import IndexMap
from .analysis import CPURule, const_int, flat_schedule, vector_lanes
from .cpu_tactics import parallelize_outer, vector_factor


def divisor_width(extent: int, lanes: int) -> int:
    """The widest vector, of at most ``lanes``, that divides ``extent``: any divisor, not only a
    power of two (a row of 14 in one vector, which LLVM widens to 16 lanes, 2 masked)."""
    return max(d for d in range(1, lanes + 1) if extent % d == 0)


def single_copy(func: Any, any_value: bool = False) -> tuple[Schedule, Any] | None:
    """``(schedule, block)`` when ``func`` is one block that copies an element of its input to
    each element of its output (one loop per iterator, constant extents; ``any_value``: or
    stores any injective value of its inputs); None otherwise."""
    found = flat_schedule(func) if isinstance(func, PrimFunc) else None
    if found is None or len(found[1]) != 1:
        return None
    sch, (info,) = found
    store = info.block.body
    if (not info.is_injective() or not info.trivial or not isinstance(store, BufferStore)
            or not (any_value or isinstance(store.value, BufferLoad))
            or any(it.const_extent is None for it in info.iters)):
        return None
    return sch, info


class PlaneCopy(CPURule):
    """A single copying block whose trailing indices run whole (see the module docstring)."""

    name = "PlaneCopy"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = single_copy(func, any_value=True)
        if found is None or len(found[1].iters) < 2:
            return None
        sch, info = found
        if not _same(info.block.body.indices, [it.var for it in info.iters]):
            return None
        # the identity layout: the block's indices simplified by its iterators' ranges, as a step
        # of the trace (a tuning's baseline replays it)
        identity = [Var(f"i{k}", it.var.dtype) for k, it in enumerate(info.iters)]
        sch.transform_block_layout(info.rv, IndexMap(identity, identity))
        block = sch.get(info.rv)
        store, iters = block.body, [iv.var for iv in block.iter_vars]
        extents = [const_int(iv.dom.extent) for iv in block.iter_vars]
        loads = {}  # buffer -> its one load (read at two places, a run would not be one)
        for load in collect(store.value, BufferLoad):
            if loads.setdefault(load.buffer, load) is not load and not structural_equal(loads[load.buffer], load):
                return None
        run = _common_run(list(loads.values()), iters, extents)
        lanes = vector_lanes(target, store.buffer.dtype)
        size = prod(extents[len(extents) - run:])
        if run == 0 or size < lanes:
            return None
        if not isinstance(store.value, BufferLoad) and all(_same(load.indices, iters) or _broadcast(load, iters, run)
                                                            for load in loads.values()):
            return None  # (computes in place, moving nothing: the elementwise rule's)
        copy_runs(sch, sch.get_loops(info.rv), run, lanes)
        return sch


class ChannelBlocks(CPURule):
    """A copy between NCHW and channel-blocked NCHW{b}c (see the module docstring)."""

    name = "ChannelBlocks"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        found = single_copy(func)
        blocking = None if found is None else _channel_blocking(found[1])
        if blocking is None:
            return None
        sch, info = found
        lanes, to_blocks = blocking
        extents = [it.const_extent for it in info.iters]
        width = vector_factor(extents[-1 if to_blocks else -2], vector_lanes(target, info.write().buffer.dtype))
        if width < 4 or to_blocks and extents[-3] % lanes:  # (no tile of whole vectors: see the docstring)
            return None
        loops = list(info.loops)
        if to_blocks:  # (n, c, h, w) -> (n, c // b, h, w, c % b)
            *rows, c, h, w = loops
            blocks, lane = sch.split(c, [None, lanes])
            sch.reorder(blocks, h, w, lane)
            rows += [blocks, h]
        else:  # (n, cb, h, w, lane) -> (n, cb * b + lane, h, w)
            *rows, h, w, lane = loops
            rows.append(h)
        tile, column = sch.split(w, [None, width])
        sch.reorder(tile, *((column, lane) if to_blocks else (lane, column)))
        # the tile read in the order it is stored in (contiguous vectors), then written in the
        # other order, its lanes gathered from registers: LLVM makes shuffles of them
        staged = sch.cache_read(info.rv, 0, "local")
        sch.compute_at(staged, tile)
        for block in (staged, info.rv):
            *_, outer, inner = sch.get_loops(block)
            sch.unroll(outer)
            sch.vectorize(inner)
        parallelize_outer(sch, sch.fuse(*rows), prod(extents))
        return sch


def _channel_blocking(info: Any) -> tuple[int, bool] | None:
    """``(b, True)`` when the block copies ``x[n.., c, h, w]`` to ``y[n.., c // b, h, w, c % b]``,
    ``(b, False)`` when it copies ``x[n.., cb, h, w, lane]`` to ``y[n.., cb * b + lane, h, w]``
    (read at its iterators); None otherwise."""
    store = info.block.body
    iters = [it.var for it in info.iters]
    if len(iters) < 4 or not _same(store.value.indices, iters):
        return None
    out = store.indices
    if len(out) == len(iters) + 1:  # to blocks
        c, h, w = iters[-3:]
        div, mod = out[-4], out[-1]
        if (isinstance(div, FloorDiv) and isinstance(mod, FloorMod) and div.a is c and mod.a is c
                and const_int(div.b) == const_int(mod.b) and _same(out[:-4] + out[-3:-1], iters[:-3] + [h, w])):
            return const_int(mod.b), True
    if len(out) == len(iters) - 1:  # from blocks
        blocks, h, w, lane = iters[-4:]
        merged = out[-3]
        if (isinstance(merged, Add) and isinstance(merged.a, Mul) and merged.a.a is blocks and merged.b is lane
                and const_int(merged.a.b) == info.iters[-1].const_extent
                and _same(out[:-3] + out[-2:], iters[:-4] + [h, w])):
            return const_int(merged.a.b), False
    return None


def _common_run(loads: list, iters: list, extents: list) -> int:
    """How many trailing ``iters`` (of ``extents``) each of ``loads`` reads either at the place
    written (a contiguous run on both sides) or not at all (``_broadcast``: a batch norm's
    per-channel scale), at least one load at the place written."""
    run = 0
    while run < len(iters) - 1:
        tail = iters[len(iters) - run - 1:]
        along = [len(load.indices) >= len(tail) and
                 all(load.indices[-1 - j] is tail[-1 - j] and const_int(load.buffer.shape[-1 - j]) == extents[-1 - j]
                     for j in range(len(tail))) for load in loads]
        if not any(along) or not all(a or _broadcast(load, iters, len(tail)) for a, load in zip(along, loads)):
            break
        run += 1
    return run


def _broadcast(load: BufferLoad, iters: list, run: int) -> bool:
    """Whether ``load`` reads one value along the last ``run`` of ``iters``."""
    tail = {id(v) for v in iters[len(iters) - run:]}
    return not any(id(v) in tail for v in collect(load.indices, Var))


def _same(indices: Any, variables: list) -> bool:
    """Whether ``indices`` are the very ``variables``, in order."""
    return [id(i) for i in indices] == [id(v) for v in variables]


def copy_runs(sch: Schedule, loops: list, run: int, lanes: int) -> None:
    """The last ``run`` of ``loops`` (a contiguous run on both sides) fused, in vectors of the
    widest divisor of its length up to ``lanes``; the others fused into the parallel tasks."""
    outer, inner = loops[:len(loops) - run], loops[len(loops) - run:]
    plane = sch.fuse(*inner) if run > 1 else inner[0]
    width = divisor_width(const_int(sch.get(plane).extent), lanes)
    if width > 1:
        sch.vectorize(sch.split(plane, [None, width])[1])
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])


__all__ = ["ChannelBlocks", "PlaneCopy", "copy_runs", "divisor_width"]
