"""The Relax VM's buffer pool: aligned buffers by byte size, reused within a call and across calls.

Which allocations come from the pool, and where each goes back, is decided at compile time
(``lowering/relax/vm_memory_plan.py``); the program says it with ``vm.builtin.alloc_tensor``
(``pooled``) and ``vm.builtin.release``. ``BufferPool`` hands out buffers by exact byte size: a
released buffer serves the next request of the same size, in this call or in later calls of
the same VM.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

import numpy as np

from .module import _data_address
from .tensor import ALIGNMENT


def aligned_bytes(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialized bytes starting on an ``ALIGNMENT``-byte boundary (as Tensors
    need; ``tensor._aligned_empty`` does the same through the slower ``.ctypes.data``)."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -_data_address(raw) % ALIGNMENT
    return raw[start:start + nbytes]


def aligned_empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    return aligned_bytes(nbytes).view(dtype).reshape(shape)


class BufferPool:
    """Aligned byte buffers by size; ``take`` prefers a released one, ``release`` returns it.
    The typed view of a buffer is kept for the next request of the same shape and dtype (a
    pooled value never leaves the VM, so handing out the same view object again is safe).
    ``allocate(nbytes)`` and ``view(raw, shape, dtype)`` make the buffers and their views (host
    memory and numpy views by default; the GPU VM's device memory and CudaTensors)."""

    def __init__(self, allocate: Callable[[int], Any] = aligned_bytes,
                 view: Callable[[Any, tuple, np.dtype], Any] | None = None) -> None:
        self.allocate = allocate
        self.make_view = view or (lambda raw, shape, dtype: raw.view(dtype).reshape(shape))
        self.free: dict[int, list] = defaultdict(list)
        self.lent: dict[int, Any] = {}  # id of the view handed out -> its byte buffer
        self.views: dict[int, dict] = {}  # id of a byte buffer -> {(shape, dtype): view}
        self.fresh = 0  # buffers the pool had to allocate
        self.reused = 0  # requests a released buffer served

    def take(self, shape: tuple, dtype: np.dtype) -> Any:
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
        free = self.free[nbytes]
        if free:
            raw = free.pop()
            self.reused += 1
        else:
            raw = self.allocate(nbytes)
            self.fresh += 1
        views = self.views.get(id(raw))
        if views is None:  # (a buffer with cached views is held by them: its id stays its own)
            views = self.views[id(raw)] = {}
        view = views.get((shape, dtype))
        if view is None:
            view = views[(shape, dtype)] = self.make_view(raw, shape, dtype)
        self.lent[id(view)] = raw
        return view

    def release(self, view: Any) -> None:
        raw = self.lent.pop(id(view), None)
        if raw is not None:
            self.keep(raw)

    def keep(self, raw: Any) -> None:
        """A released buffer, for the next request of its size."""
        self.free[raw.nbytes].append(raw)


__all__ = ["BufferPool", "aligned_bytes", "aligned_empty"]
