"""``RMSNorm``: the legalized RMS norm (a copy or cast in, squares, their sum, ``rsqrt``, the
scaled product, a cast out), as TVM's ``dl.gpu.RMSNorm`` schedules it: one thread block per row,
512 threads (CUDA) each reading 8 contiguous elements at a time into registers, the sum reduced
across threads and the scale kept in shared memory.

Like TVM's rule it applies whatever the target (it is not a GPU-only rule there either).
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad, Call, Cast
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BufferStore
from ..schedule import Schedule
from .base import ScheduleRule
from .gpu_base import target_kind


def _is_cast_or_load(block: Block) -> bool:
    """``B[i...] = A[i...]`` or a cast of it, at the very same indices."""
    if len(block.reads) != 1 or len(block.writes) != 1 or not isinstance(block.body, BufferStore):
        return False
    store = block.body
    load = store.value.value if isinstance(store.value, Cast) else store.value
    return (isinstance(load, BufferLoad) and len(load.indices) == len(store.indices)
            and all(a is b for a, b in zip(load.indices, store.indices)))


def _is_rsqrt(block: Block) -> bool:
    return (len(block.reads) == 1 and len(block.writes) == 1 and isinstance(block.body, BufferStore)
            and isinstance(block.body.value, Call) and getattr(block.body.value.op, "name", "") == "tir.rsqrt")


class RMSNorm(ScheduleRule):
    name = "RMSNorm"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        num_tx = {"cuda": 512, "opencl": 256}.get(target_kind(target), 64)
        sch = Schedule(func)
        root = sch.get_block("root")
        blocks = sch.get_child_blocks(root)
        if not any(_is_rsqrt(sch.get(b)) for b in blocks):
            return None
        sch.cache_read(blocks[0], read_buffer_index=0, storage_scope="local")
        sch.cache_write(blocks[-1], write_buffer_index=0, storage_scope="local")
        for block in blocks:
            if _is_cast_or_load(sch.get(block)):
                sch.compute_inline(block)
        blocks = sch.get_child_blocks(root)
        if len(blocks) != 6:
            return None
        read, sqr, redsum, rsqrt, norm, write = blocks
        if not _is_rsqrt(sch.get(rsqrt)):
            return None
        for block in blocks:
            sch.fuse(*sch.get_loops(block)[:-1])
        block_loop, loop = sch.get_loops(read)
        thread_loop, _, _ = sch.split(loop, factors=[num_tx, None, 8], preserve_unit_iters=True)
        sch.bind(block_loop, "blockIdx.x")
        sch.bind(thread_loop, "threadIdx.x")
        sch.vectorize(sch.get_loops(read)[-1])
        sch.reverse_compute_at(sqr, thread_loop)
        sch.reverse_compute_at(redsum, thread_loop)
        sch.reverse_compute_at(rsqrt, block_loop, index=-1)
        sch.reverse_compute_at(norm, block_loop, index=-1)
        block_loop, loop = sch.get_loops(norm)
        thread_loop, _, _ = sch.split(loop, factors=[num_tx, None, 8], preserve_unit_iters=True)
        sch.bind(thread_loop, "threadIdx.x")
        sch.reverse_compute_at(write, thread_loop, index=-1)
        sch.vectorize(sch.get_loops(write)[-1])
        sch.set_scope(sqr, 0, "local")
        sch.set_scope(redsum, 0, "local")
        sch.set_scope(rsqrt, 0, "shared")
        sch.set_scope(norm, 0, "local")
        return sch


__all__ = ["RMSNorm"]
