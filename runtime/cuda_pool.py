"""Device memory kept for reuse: blocks of one GPU by byte size, as TVM's pooled allocator and
workspace pool keep them, so that a call after the first allocates nothing and frees nothing
(``cuMemFree`` waits for the whole device).

A block handed back serves only later work of the stream its work was queued on, which the
stream orders after it. The pool keeps the idle blocks of one stream, the device's current one
when a call begins: when it changes (``dev.set_raw_stream``), the idle blocks are dropped, and
so are blocks of the old stream handed back later (dropped: freed once nothing holds them; the
free waits for their work). What is kept is bounded: a call that had to allocate (new sizes: a
symbolic shape) first drops the blocks idle through the last ``KEEP_CALLS`` calls.

The Relax VM on a GPU keeps its intermediates, its outputs and its storages in one
(``vm_cuda.py``), by exact size; a CUDA module keeps the workspaces its host functions allocate
in one per device (``cuda_module.DriverLauncher``), where a request takes the smallest idle
block that fits, as TVM's workspace pool does: the calls of a VM, running kernels with
workspaces of many sizes one after the other, then reuse the largest blocks whatever the number
of sizes, and allocate nothing once they have run. Threads may share a pool: a block is one
call's from ``take`` to ``give_back``, only idle blocks are shared, and a lock keeps a stream
change from slipping between a request's check of its stream and its taking a block.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Callable

from . import cuda_driver


class Block(cuda_driver.DeviceMemory):
    """A pooled block: the stream its work is queued on, whether it was lent to a library that
    may read it on another stream, the call since which it is idle."""

    __slots__ = ("stream", "lent", "idle_since")

    def lend(self, stream: Any = None) -> None:
        """A tensor in the block goes to a library that reads it on ``stream`` (DLPack's
        numbering; None: maybe a stream of its own): unless that is the stream of the block's
        work, which orders the library's reads before later work, the block is no longer
        handed out again, and is freed once dropped (cuMemFree waits for that stream). Lent
        once, it stays lent; its ``stream`` stays that of its work, which readers wait for."""
        if not cuda_driver.names_stream(stream, self.stream):
            self.lent = True


class BlockPool:
    """Blocks of ``cuda(index)`` by byte size for work on the current stream. ``forget(block)``
    is told of each idle block the pool drops (what its owner keeps of the block, it drops too).
    ``fitting``: a request may take a larger block (the smallest idle one that fits)."""

    KEEP_CALLS = 4  # (after a call that allocated, the blocks idle through this many calls stay)

    def __init__(self, index: int, forget: Callable[[Block], Any] | None = None, fitting: bool = False) -> None:
        self.index, self.forget, self.fitting = index, forget, fitting
        # (reentrant: a block's owner collected while the lock is held hands the block back)
        self._lock = threading.RLock()
        self.idle: dict[int, list[Block]] = defaultdict(list)  # byte size -> idle blocks of ``stream``
        self.stream = cuda_driver.current_stream(index)
        self.calls = 0
        self.allocated = False  # (a block was allocated since the last call began)
        self.fresh = 0  # blocks allocated
        self.reused = 0  # requests an idle block served

    def begin_call(self) -> cuda_driver.Stream:
        """Before a call: the idle blocks of another stream, or (after a call that allocated)
        those idle through the last ``KEEP_CALLS`` calls, are dropped. The call's stream."""
        with self._lock:
            self.calls += 1
            stream = cuda_driver.current_stream(self.index)
            if stream is not self.stream:
                self.stream = stream
                self._drop_idle(self.calls)
            elif self.allocated:
                self._drop_idle(self.calls - self.KEEP_CALLS)
            self.allocated = False
            return stream

    def take(self, nbytes: int, stream: cuda_driver.Stream | None = None) -> Block:
        """A block of ``nbytes`` (or more, when fitting) for work on ``stream`` (the pool's by
        default): an idle one of that stream, else a new one."""
        with self._lock:
            stream = stream or self.stream
            if stream is self.stream:
                blocks = self.idle.get(nbytes)
                if not blocks and self.fitting:
                    blocks = self.idle.get(self._fit(nbytes))
                if blocks:
                    self.reused += 1
                    return blocks.pop()
            self.allocated = True
            self.fresh += 1
        block = Block(self.index, nbytes)
        block.stream, block.lent = stream, False
        return block

    def _fit(self, nbytes: int) -> int:
        """The smallest size of an idle block holding ``nbytes`` (``nbytes`` when none does)."""
        return min((size for size, blocks in self.idle.items() if size >= nbytes and blocks), default=nbytes)

    def give_back(self, block: Block) -> None:
        """``block``'s work is queued: kept for later work of its stream, else (another stream,
        or lent) dropped."""
        with self._lock:
            if block.stream is self.stream and not block.lent:
                block.idle_since = self.calls
                self.idle[block.nbytes].append(block)
                return
        if self.forget is not None:
            self.forget(block)

    def _drop_idle(self, before: int) -> None:
        """Drop the blocks idle since a call before ``before``."""
        for nbytes, blocks in list(self.idle.items()):
            kept = []
            for block in blocks:
                if block.idle_since >= before:
                    kept.append(block)
                elif self.forget is not None:
                    self.forget(block)
            blocks[:] = kept
            if not blocks:
                del self.idle[nbytes]


__all__ = ["Block", "BlockPool"]
