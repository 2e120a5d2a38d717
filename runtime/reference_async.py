"""Asynchronous copies (CUDA's ``cp.async``) for the reference executor, as the kernel code
generator (``reference_kernel``) compiles them:

* ``T.s_tir.cp_async_raw(dtype, dst, dst_offset, src, src_offset, bytes[, predicate])`` reads
  ``bytes`` from global memory when the thread issues it (nothing writes global memory a kernel
  copies from while the copy is in flight) and puts the write into shared memory in the thread's
  open group; where the predicate is false it stores zeros at once (the CUDA code's ``@!p
  st.shared``, a synchronous store of the thread's);
* the end of ``T.attr(0, "async_commit_queue_scope", 0)`` closes the open group
  (``cp.async.commit_group``); a queue of another index holds no cp.async copy (CUDA has one);
* ``T.attr(0, "async_wait_queue_scope", 0)`` with ``async_wait_inflight_count`` n writes the
  thread's committed groups but the n newest (``cp.async.wait_group n``): only then is the copy
  in shared memory, as the thread's own store there (race-checked as one); any thread's access
  to the destination while the copy is in flight is an error (its value is undefined then);
* both addresses are aligned to the copy size (PTX's rule for address operands; the source's only
  where the copy reads it);
* a thread that ends with copies it never waited for, or never committed, is an error.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from .reference_gpu import describe


def complete_oldest(groups: list, committed: int, in_flight: int) -> list:
    """Take the oldest of the ``committed`` groups at the front of ``groups`` (oldest first) but
    the ``in_flight`` newest out of ``groups``; their copies, in issue order (what a wait lands,
    cp.async's here and the DMA builtins' in reference_dma)."""
    done = max(0, committed - in_flight)
    copies = [copy for group in groups[:done] for copy in group]
    del groups[:done]
    return copies


def _queue(block: Any, me: int) -> list:
    """The thread's groups of pending writes, oldest first; the last one is still open."""
    return block.memory.setdefault(("cp.async", me), [[]])


def cp_async(block: Any, me: int, dst: Any, dst_offset: int, src: np.ndarray, src_offset: int, nbytes: int,
             predicate: bool, stmt: Any) -> None:
    """Issue one copy (``dst``: shared memory as elements of the call's type, offsets in elements)."""
    count = nbytes // dst.itemsize
    start = src_offset * src.itemsize
    if predicate and not 0 <= start <= src.nbytes - nbytes:  # (a copy predicated off reads nothing)
        raise TVMSError(f"cp.async of {nbytes} bytes from element {src_offset} is out of the bounds of its "
                        f"source ({src.size} elements)")
    if not 0 <= dst_offset <= dst.size - count:
        raise TVMSError(f"cp.async into {dst.name!r} at element {dst_offset} ({count} elements) is out of "
                        f"its bounds ({dst.size})")
    if dst_offset * dst.itemsize % nbytes or predicate and start % nbytes:  # (PTX: aligned to the access size)
        raise TVMSError(f"cp.async of {nbytes} bytes from byte {start} of its source into byte "
                        f"{dst_offset * dst.itemsize} of {dst.name!r}: PTX needs both addresses aligned to "
                        f"the copy size")
    if not predicate:  # (the CUDA code stores its zeros at once, synchronously: ``@!p st.shared``)
        return dst.store(np.arange(dst_offset, dst_offset + count), np.zeros(count, dst.data.dtype), me, stmt)
    values = np.frombuffer(np.ravel(src).view(np.uint8)[start:start + nbytes].tobytes(), dst.data.dtype)
    flight = block.in_flight.setdefault(dst.root, np.zeros(dst.root.data.nbytes, np.int32))
    flight[dst_offset * dst.itemsize:dst_offset * dst.itemsize + nbytes] += 1
    _queue(block, me)[-1].append((dst, dst_offset, values, stmt))


def commit_group(block: Any, me: int, queue_index: int) -> None:
    """Close the open group. Only queue 0 holds cp.async copies (CUDA has one queue; another
    index, InjectSoftwarePipeline's for a second asynchronous stage, marks plain copies)."""
    queue = _queue(block, me)
    if queue_index == 0:
        return queue.append([])
    if queue[-1]:
        raise TVMSError(f"cp.async copies committed to the async queue {queue_index}: CUDA has one queue, "
                        f"index 0 (one asynchronous stage of cp.async per pipeline)")


def wait_group(block: Any, me: int, in_flight: int, queue_index: int = 0) -> None:
    """Complete the thread's committed groups but the ``in_flight`` newest (of queue 0: no
    cp.async copy is in another)."""
    if queue_index != 0:
        return
    queue = _queue(block, me)
    for dst, offset, values, stmt in complete_oldest(queue, len(queue) - 1, in_flight):  # (the last is open)
        flight = block.in_flight[dst.root]
        flight[offset * dst.itemsize:(offset + len(values)) * dst.itemsize] -= 1
        if not flight.any():
            del block.in_flight[dst.root]
        dst.store(np.arange(offset, offset + len(values)), values, me, stmt)


def finish(block: Any, me: int) -> None:
    """At the end of a thread: every copy it issued has been waited for."""
    queue = block.memory.get(("cp.async", me), [[]])
    pending = sum(len(group) for group in queue)
    if pending:
        _, _, _, stmt = next(copy for group in queue for copy in group)
        raise TVMSError(f"{block.who(me)} ends with {pending} cp.async copies it never waited for "
                        f"(cp.async.wait_group), the first issued at {describe(stmt)}"
                        + ("" if len(queue) > 1 else ", nor committed (cp.async.commit_group)"))
