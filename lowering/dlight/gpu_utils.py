"""What the DLight GPU rules share: the GPU rule base, the limits a target implies (threads per
block, warp size, shared memory), and inlining the blocks of the normal form (``gpu_base``).

A target's limits are its attributes when given (``cuda -max_num_threads=512``), else what
TVM 0.27's target kind defaults to (cuda: 1024 threads, warps of 32, 48 KiB of shared memory).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...ir.expr import IntImm
from ...ir.target import Target
from ..schedule import BlockRV, Schedule, ScheduleError
from .base import ScheduleRule

if TYPE_CHECKING:
    from .gpu_base import GPUBlockInfo

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
    """The compute capability of ``-arch=sm_XY`` as XY, -1 without one (``sm_90a`` too: TVM
    0.27's rules read none there, so they use no tensor cores, and tvms's rules do as TVM's)."""
    digits = str(_attr(target, "arch") or "").replace("sm_", "")
    return int(digits) if digits.isdigit() else -1


def get_extent(sch: Schedule, loop: Any) -> Any:
    """A loop's extent: an int when constant, else the expression."""
    extent = sch.get(loop).extent
    return extent.value if isinstance(extent, IntImm) else extent


def dtype_bytes(dtype: Any) -> int:
    return max(1, dtype.bits * dtype.lanes // 8)


def _leaf_blocks(sch: Schedule, rv: BlockRV) -> list[BlockRV]:
    children = sch.get_child_blocks(rv)
    if not children:
        return [rv]
    return [leaf for child in children for leaf in _leaf_blocks(sch, child)]


def try_inline(sch: Schedule, blocks: list[GPUBlockInfo]) -> list[GPUBlockInfo]:
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


def _inline_first(sch: Schedule, blocks: list[GPUBlockInfo], inline: Any) -> int | None:
    for i, info in enumerate(blocks):
        try:
            inline(info.rv)
        except ScheduleError:
            continue
        return i
    return None


def try_inline_contiguous_spatial(sch: Schedule, blocks: list[GPUBlockInfo] | None) -> list[GPUBlockInfo] | None:
    """Inline each run of consecutive spatial blocks where it goes; the blocks left, in order."""
    if blocks is None:
        return None
    result: list[GPUBlockInfo] = []
    run: list[GPUBlockInfo] = []
    for info in blocks:
        if info.is_injective():
            run.append(info)
            continue
        result.extend(try_inline(sch, run))
        result.append(info)
        run = []
    result.extend(try_inline(sch, run))
    return result


__all__ = ["GPURule", "GPU_KINDS", "dtype_bytes", "get_extent", "max_num_threads", "max_shared_memory_per_block",
           "max_threads_per_block", "sm_version", "target_kind", "thread_warp_size", "try_inline", "try_inline_contiguous_spatial"]
