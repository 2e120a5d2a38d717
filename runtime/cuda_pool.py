"""Device memory kept for reuse: blocks of one GPU by exact byte size, as TVM's pooled allocator
keeps them, so that a call after the first allocates nothing and frees nothing (``cuMemFree``
waits for the whole device).

A block handed back serves only later work of the stream its work was queued on, which the
stream orders after it. The pool keeps the idle blocks of one stream, the device's current one
when a call begins: when it changes (``dev.set_raw_stream``), the idle blocks are dropped, and
so are blocks of the old stream handed back later (dropped: freed once nothing holds them; the
free waits for their work). What is kept is bounded: a call that had to allocate (new sizes: a
symbolic shape) first drops the blocks idle through the last ``KEEP_CALLS`` calls, but for a
pool keeping sizes (``keep_sizes``) those of the last ``keep_sizes`` sizes given back.

The Relax VM on a GPU keeps its intermediates, its outputs and its storages in one
(``vm_cuda.py``): a call of the VM asks for all its sizes, so its blocks are a few calls'
worth. A CUDA module keeps the workspaces its host functions allocate in one per device
(``cuda_module.DriverLauncher``), which also keeps sizes: the calls of a VM run kernels with
workspaces of several sizes one after the other, each its own call of the pool, and reuse them
all, allocating nothing once they have run, up to ``keep_sizes`` sizes (a cycle through more
allocates, and frees, a block at every call). Sizes are exact: a small request never takes a
large block that a later request of the same call would then allocate again (two large blocks
kept for one).

Threads may share a pool: a block is one call's from ``take`` to ``give_back``, only idle blocks
are shared, and a lock keeps a stream change from slipping between a request's check of its
stream and its taking a block. Only requests through ``take`` hold it: the VM's ``BufferPool``
pops idle blocks from ``idle`` itself, which is safe because the VM's pool changes its stream
(dropping its idle blocks) only in ``begin_call``, on the thread calling the VM, and other
threads only append to ``idle`` (``give_back``).
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
    ``keep_sizes``: the blocks of that many sizes given back last outlive ``KEEP_CALLS`` (those
    given back with the last of their size)."""

    KEEP_CALLS = 4  # (after a call that allocated, the blocks idle through this many calls stay)

    def __init__(self, index: int, forget: Callable[[Block], Any] | None = None, keep_sizes: int = 0) -> None:
        self.index, self.forget, self.keep_sizes = index, forget, keep_sizes
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
        those idle through the last ``KEEP_CALLS`` calls and not of the last ``keep_sizes``
        sizes, are dropped. The call's stream."""
        with self._lock:
            self.calls += 1
            stream = cuda_driver.current_stream(self.index)
            if stream is not self.stream:
                self.stream = stream
                self._drop_idle(self.calls, sizes=0)
            elif self.allocated:
                self._drop_idle(self.calls - self.KEEP_CALLS, self.keep_sizes)
            self.allocated = False
            return stream

    def take(self, nbytes: int, stream: cuda_driver.Stream | None = None) -> Block:
        """A block of ``nbytes`` for work on ``stream`` (the pool's by default): an idle one of
        that stream, else a new one."""
        with self._lock:
            stream = stream or self.stream
            if stream is self.stream:
                blocks = self.idle.get(nbytes)
                if blocks:
                    self.reused += 1
                    return blocks.pop()
            self.allocated = True
            self.fresh += 1
        block = Block(self.index, nbytes)
        block.stream, block.lent = stream, False
        return block

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

    def _drop_idle(self, before: int, sizes: int) -> None:
        """Drop the blocks idle since a call before ``before``, but for those of the ``sizes``
        sizes given back last that were given back with the last of their size (not the
        blocks of that size the calls since then did without)."""
        last = {nbytes: max(block.idle_since for block in blocks) for nbytes, blocks in self.idle.items() if blocks}
        recent = {nbytes: last[nbytes] for nbytes in sorted(last, key=last.get, reverse=True)[:sizes]}
        for nbytes, blocks in list(self.idle.items()):
            kept = []
            for block in blocks:
                if block.idle_since >= before or block.idle_since == recent.get(nbytes):
                    kept.append(block)
                elif self.forget is not None:
                    self.forget(block)
            blocks[:] = kept
            if not blocks:
                del self.idle[nbytes]


__all__ = ["Block", "BlockPool"]
