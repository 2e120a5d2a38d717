"""Grouped convolutions whose groups have an awkward number of output channels (ShuffleNet's 34
and 68): each group's channels are padded with zero filters up to a whole number of vectors
before the Conv2D rule's channel-vector plan runs, and the padding is cropped off afterwards.

The plan vectorizes along a group's output channels and a vector never straddles two groups, so
34 channels a group left it vectors of 2 lanes (of 16 on AVX-512: 23 GFLOPS for ShuffleNet's
136-channel 1x1 layer, where groups of 32 ran at 67). Padded to 48 (three full vectors), 34 of
every 48 lanes compute; on AMD Zen 4, whose 512-bit FMAs are two 256-bit halves, to 40 (five
vectors of 8: ``fma_lanes``). A group of whole vectors whose count tiles badly along a row (17
vectors of 8 along rows of 7) gets one vector more. The function is rewritten, ``F = G * Fg``
channels to ``G * Fp``::

    W_pad[f', c, ry, rx] = W[f' // Fp * Fg + min(f' % Fp, Fg - 1), c, ry, rx] if f' % Fp < Fg else 0
    Y_pad[n, f', y, x] += D[n, f' // Fp * C' + c, ...] * W_pad[f', c, ry, rx]
    Y[n, g * Fg + f, y, x] = Y_pad[n, g * Fp + f, y, x]        (f < Fg; then the epilogue; no n for a batch of one)

``W_pad`` reads only the weight: the Conv2D rule inlines it into its weight packing, which
stays a ``layout_rewrite_preproc`` block (run once per weight). The crop is a pass of its own
(``schedule_crop``: computing it in the conv's task, from the accumulators, would need the
schedule to map a tile of padded channels back to a group's, which ``reverse_compute_at`` does not).
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import substitute
from ...ir.arith import Analyzer
from ...ir.buffer import Buffer, BufferRegion, decl_buffer
from ...ir.errors import TVMSError
from ...ir.expr import (DATA_PAR, LT, Add, BufferLoad, Call, FloorDiv, FloorMod, IterVar, Min, Mul, PrimExpr, Range,
                        Var, const)
from ...ir.function import PrimFunc
from ...ir.op import get_op
from ...ir.stmt import Block, BlockRealize, BufferStore, For, seq
from ...ir.visitor import Mutator
from ..schedule.loop_transform import nest
from ..schedule.tree import find_block, replace_stmts
from .analysis import BlockInfo, const_int, vector_lanes
from .cpu_shuffle import copy_runs


CROP = "_crop"  # (the name of the crop block: its output's and this)

# CPUs whose 512-bit FMAs run as two 256-bit halves (AMD Zen 4): per cycle, vectors of 256 bits
# do as many lanes' FMAs as vectors of 512
_HALF_RATE_512 = ("znver4",)


def fma_lanes(target: Any, dtype: Any) -> int:
    """The lanes of ``dtype`` of the narrowest vector whose FMAs reach the target's full rate:
    ``vector_lanes``, but 256 bits' worth on a CPU of ``_HALF_RATE_512``, where padding a group to
    whole 256-bit vectors wastes fewer lanes (68 channels to 72, not 80: 85 against 92 us for
    ShuffleNet's 272-channel 1x1 layer; 34 to 40, not 48: 102 against 120 us)."""
    from ..codegen.llvm_target import parse_llvm_target

    lanes = vector_lanes(target, dtype)
    try:
        cpu = parse_llvm_target(str(target)).cpu
    except TVMSError:
        return lanes
    bits = int(dtype) if isinstance(dtype, int) else int(getattr(dtype, "bits", 32))
    return min(lanes, 256 // bits) if cpu in _HALF_RATE_512 else lanes


def padded_group(group_channels: int, lanes: int, vec: int) -> int | None:
    """The channels to pad a group of ``group_channels`` to (a multiple of ``lanes``) when that
    makes at least 1.5 times the use of the vector lanes that vectors of ``vec`` lanes make
    (68 channels in vectors of 4, padded to 72 in vectors of 8: 85 against 146 us); None when it
    does not."""
    padded = -(-group_channels // lanes) * lanes
    if group_channels < 2 or 2 * group_channels * lanes < 3 * vec * padded:
        return None
    return padded


def pad_groups(func: PrimFunc, conv: BlockInfo, data: BufferLoad, weight: BufferLoad, groups: int,
               padded: int) -> PrimFunc:
    """``func`` with the conv's output channels padded per group (see the module docstring)."""
    realize, path = find_block(func, conv.block.name_hint)
    block = realize.block
    out = conv.write().buffer
    f_iter = block.iter_vars[1]
    f_loop = realize.iter_values[1]
    dtype = f_iter.var.dtype
    group_out = const_int(f_iter.dom.extent) // groups
    total = const(groups * padded, dtype)
    y_pad = decl_buffer((out.shape[0], total, *out.shape[2:]), out.dtype, f"{out.name}_pad")
    w = weight.buffer
    w_pad = decl_buffer((total, *w.shape[1:]), w.dtype, f"{w.name}_pad")
    fg, fp = const(group_out, dtype), const(padded, dtype)

    # the conv over the padded channels: its data channel is that of the group f' // Fp
    group_start = {f_iter.var: Mul(FloorDiv(f_iter.var, fp), fg)}
    analyzer = Analyzer()
    root = func.body.block
    children = list(root.body.seq)
    at = next(i for i, child in enumerate(children) if child is realize or any(child is p for p in path))
    conv_nest = _PaddedConv(f_loop, f_iter.var, total, data.buffer, group_start, analyzer,
                            {out: y_pad, w: w_pad}).visit(children[at])

    def block_nest(name: str, shape: tuple, target: Buffer, value_of) -> For:
        loop_vars = [Var(f"i{d}", s.dtype) for d, s in enumerate(shape)]
        iters = tuple(IterVar(Range(const(0, s.dtype), s), Var(f"v{d}", s.dtype), DATA_PAR)
                      for d, s in enumerate(shape))
        point = tuple(iv.var for iv in iters)
        value, source, at = value_of(point)
        new = Block(iters, reads=(_point_region(source.buffer, source.indices),), writes=(_point_region(target, at),),
                    name_hint=name, body=BufferStore(target, value, at))
        return nest(loop_vars, list(shape), BlockRealize(tuple(loop_vars), const(True), new))

    def fill(point):  # zero filters past a group's channels (the index clamped to stay inside W)
        f = point[0]
        rest = FloorMod(f, fp)
        load = BufferLoad(w, (Add(Mul(FloorDiv(f, fp), fg), Min(rest, const(group_out - 1, dtype))), *point[1:]))
        return Call(w.dtype, get_op("tir.if_then_else"), (LT(rest, fg), load, const(0, w.dtype))), load, point

    batch_of_one = const_int(out.shape[0]) == 1  # (then no n iterator: a unit one would not stay plain)

    def crop(point):  # over (n, group, channel of the group, y, x)
        n, g, f, *pixel = (const(0, dtype), *point) if batch_of_one else point
        load = BufferLoad(y_pad, (n, Add(Mul(g, fp), f), *pixel))
        return load, load, (n, Add(Mul(g, fg), f), *pixel)

    crop_shape = (() if batch_of_one else (out.shape[0],)) + (const(groups, dtype), fg, *out.shape[2:])
    children[at:at + 1] = [block_nest(w_pad.name, tuple(w_pad.shape), w_pad, fill), conv_nest,
                           block_nest(out.name + CROP, crop_shape, out, crop)]
    new_root = root.with_changes(body=seq(children), alloc_buffers=root.alloc_buffers + (w_pad, y_pad))
    return replace_stmts(func, {id(root): new_root})


def schedule_crop(sch: Any, info: BlockInfo, target: Any) -> None:
    """The crop (the epilogue inlined into it), over (n,) group, channel, y, x: a parallel task
    per channel, its plane (contiguous in both buffers) in vectors of the largest divisor of the
    plane up to the lanes (14 pixels of a 14x14 plane; the plain schedule's vectors along a row of
    14 had 2 lanes: 2.5x the crop's time)."""
    copy_runs(sch, sch.get_loops(info.rv), 2, vector_lanes(target, info.write().buffer.dtype))


def _point_region(buffer: Buffer, indices: tuple) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, const(1, i.dtype)) for i in indices))


class _PaddedConv(Mutator):
    """The conv's loop nest over ``total`` output channels: its output and weight buffers
    swapped, its data channel index taken at the start of the padded channel's group."""

    def __init__(self, f_loop: Var, f_var: Var, total: PrimExpr, data: Buffer, group_start: dict, analyzer: Analyzer,
                 swaps: dict):
        self.f_loop, self.f_var, self.total, self.data = f_loop, f_var, total, data
        self.group_start, self.analyzer, self.swaps = group_start, analyzer, swaps

    def _data_index(self, e: PrimExpr) -> PrimExpr:
        return self.analyzer.simplify(substitute(e, self.group_start))

    def visit_For(self, loop: For) -> For:
        loop = self.generic_visit(loop)
        return loop.with_changes(extent=self.total) if loop.loop_var is self.f_loop else loop

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        iters = tuple(iv.with_changes(dom=Range(iv.dom.min, self.total)) if iv.var is self.f_var else iv
                      for iv in block.iter_vars)
        return block.with_changes(iter_vars=iters)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:
        if load.buffer is self.data:
            return BufferLoad(load.buffer, tuple(self._data_index(i) for i in load.indices))
        return self.generic_visit(load)

    def visit_BufferRegion(self, region: BufferRegion) -> BufferRegion:
        if region.buffer is self.data:
            return BufferRegion(region.buffer, tuple(Range(self._data_index(r.min), r.extent) for r in region.region))
        return self.generic_visit(region)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.swaps.get(buffer, buffer)

    def visit_Var(self, v: Var) -> Var:
        return v


__all__ = ["CROP", "fma_lanes", "pad_groups", "padded_group", "schedule_crop"]
