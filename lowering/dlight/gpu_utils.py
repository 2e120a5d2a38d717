"""What the DLight GPU rules share: the GPU rule base, the limits a target implies (threads per
block, warp size, shared memory), and the normal form TVM's GPU rules start from.

A target's limits are its attributes when given (``cuda -max_num_threads=512``), else what
TVM 0.27's target kind defaults to (cuda: 1024 threads, warps of 32, 48 KiB of shared memory).
``normalize_prim_func`` is TVM's ``NormalizePrimFunc``: every leaf block loses its unit
iterators (``transform_block_layout``) and is described with its loops and whether it is a
reduction block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.expr import COMM_REDUCE, DATA_PAR, IntImm, Var, const
from ...ir.stmt import Block
from ...ir.target import Target
from ...ir.visitor import collect
from ..schedule import BlockRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from ..schedule.tree import find_block
from .analysis import IterInfo
from .base import ScheduleRule

GPU_KINDS = ("cuda", "rocm", "metal", "vulkan", "opencl", "webgpu")
# TVM's target kind defaults (src/target/target_kind.cc)
_MAX_THREADS = {"cuda": 1024, "rocm": 256, "metal": 256, "vulkan": 256, "opencl": 256, "webgpu": 256}
_WARP_SIZE = {"cuda": 32, "rocm": 64, "metal": 32}
_MAX_SHARED_MEMORY = {"cuda": 49152, "rocm": 65536, "metal": 32768, "opencl": 16384, "vulkan": 16384}


def target_kind(target: Any) -> str:
    return target.kind if isinstance(target, Target) else str(target).split(" ", 1)[0]


def _attr(target: Any, name: str) -> Any:
    return target.attrs.get(name) if isinstance(target, Target) else None


class GPURule(ScheduleRule):
    """A rule for GPU targets: ApplyDefaultSchedule skips it for the others."""

    def is_target_available(self, target: Any) -> bool:
        return target_kind(target) in GPU_KINDS


def max_num_threads(target: Any) -> int:
    """Threads one block may have (the target's ``max_num_threads``)."""
    return int(_attr(target, "max_num_threads") or _MAX_THREADS.get(target_kind(target), 256))


def max_threads_per_block(target: Any) -> int:
    """``max_threads_per_block`` when given, else ``max_num_threads``."""
    return int(_attr(target, "max_threads_per_block") or max_num_threads(target))


def thread_warp_size(target: Any) -> int:
    return int(_attr(target, "thread_warp_size") or _WARP_SIZE.get(target_kind(target), 1))


def max_shared_memory_per_block(target: Any) -> int:
    return int(_attr(target, "max_shared_memory_per_block") or _MAX_SHARED_MEMORY.get(target_kind(target), 16384))


def sm_version(target: Any) -> int:
    """The compute capability of ``-arch=sm_XY`` as XY, -1 without one."""
    digits = str(_attr(target, "arch") or "").replace("sm_", "")
    return int(digits) if digits.isdigit() else -1


def get_extent(sch: Schedule, loop: Any) -> Any:
    """A loop's extent: an int when constant, else the expression."""
    extent = sch.get(loop).extent
    return extent.value if isinstance(extent, IntImm) else extent


def dtype_bytes(dtype: Any) -> int:
    return max(1, dtype.bits * dtype.lanes // 8)


@dataclass
class GPUBlock:
    """A leaf block after normalization: its handle, iterators (one loop each) and whether it
    is a reduction block."""

    name: str
    rv: BlockRV
    iters: list[IterInfo]
    reduction: bool

    @property
    def kinds(self) -> str:
        return "".join(it.kind for it in self.iters)

    def is_injective(self) -> bool:
        return all(it.kind == "S" for it in self.iters)

    def is_reduction(self) -> bool:
        return self.reduction


def _kind(iter_type: int) -> str:
    return {DATA_PAR: "S", COMM_REDUCE: "R"}.get(iter_type, "O")


def _leaf_blocks(sch: Schedule, rv: BlockRV) -> list[BlockRV]:
    children = sch.get_child_blocks(rv)
    if not children:
        return [rv]
    return [leaf for child in children for leaf in _leaf_blocks(sch, child)]


def is_reduction_block(block: Block) -> bool:
    """TVM's ``IsReductionBlock`` on a block's own terms: an init, spatial and reduction
    iterators only, and the written indices use no reduction iterator."""
    if block.init is None or any(_kind(iv.iter_type) == "O" for iv in block.iter_vars):
        return False
    reduce = {id(iv.var) for iv in block.iter_vars if iv.iter_type == COMM_REDUCE}
    return not any(id(v) in reduce for w in block.writes for r in w.region for v in collect(r.min, Var))


def normalize_prim_func(sch: Schedule) -> list[GPUBlock] | None:
    """The leaf blocks, each bound one loop per iterator (else None), with their unit iterators
    folded away."""
    root = sch.get_block("root")
    leaves = [rv for rv in _leaf_blocks(sch, root) if rv is not root] or []
    for rv in leaves:
        loops = sch.get_loops(rv)
        values = find_block(sch.mod["main"], sch.get(rv).name_hint)[0].iter_values
        if not loops:
            continue
        if len(loops) != len(values):
            return None
        for loop, value in zip(loops, values):
            node = sch.get(loop)
            if value is not node.loop_var or not (isinstance(node.min, IntImm) and node.min.value == 0):
                return None
    result = []
    for rv in leaves:
        block = sch.get(rv)
        inputs = [Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars]
        kept = [(v, iv) for v, iv in zip(inputs, block.iter_vars)
                if not (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1)]
        outputs: list = [v for v, _ in kept]
        spatial = any(iv.iter_type == DATA_PAR for _, iv in kept)
        if not outputs or not spatial:
            outputs.insert(0, const(0, "int64"))
        try:
            sch.transform_block_layout(rv, IndexMap(inputs, outputs))
        except ScheduleError:
            pass  # (left as it is, as TVM does)
        block = sch.get(rv)
        iters = [IterInfo(_kind(iv.iter_type), iv.var, iv.dom.extent, loop)
                 for loop, iv in zip(sch.get_loops(rv), block.iter_vars)]
        result.append(GPUBlock(block.name_hint, rv, iters, is_reduction_block(block)))
    return result


def try_inline(sch: Schedule, blocks: list[GPUBlock]) -> list[GPUBlock]:
    """Inline as many of ``blocks`` as will go (into consumers first, else into producers);
    the blocks left."""
    blocks = list(blocks)
    while True:
        inlined = _inline_first(sch, blocks, sch.compute_inline)
        if inlined is None:
            inlined = _inline_first(sch, blocks, sch.reverse_compute_inline)
        if inlined is None:
            return blocks
        blocks.pop(inlined)


def _inline_first(sch: Schedule, blocks: list[GPUBlock], inline: Any) -> int | None:
    for i, info in enumerate(blocks):
        try:
            inline(info.rv)
        except ScheduleError:
            continue
        return i
    return None


def try_inline_contiguous_spatial(sch: Schedule, blocks: list[GPUBlock] | None) -> list[GPUBlock] | None:
    """Inline each run of consecutive spatial blocks where it goes; the blocks left, in order."""
    if blocks is None:
        return None
    result: list[GPUBlock] = []
    run: list[GPUBlock] = []
    for info in blocks:
        if info.is_injective():
            run.append(info)
            continue
        result.extend(try_inline(sch, run))
        result.append(info)
        run = []
    result.extend(try_inline(sch, run))
    return result


__all__ = ["GPUBlock", "GPURule", "GPU_KINDS", "dtype_bytes", "get_extent", "is_reduction_block",
           "max_num_threads", "max_shared_memory_per_block", "max_threads_per_block", "normalize_prim_func",
           "sm_version", "target_kind", "thread_warp_size", "try_inline", "try_inline_contiguous_spatial"]
