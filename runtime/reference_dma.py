"""TVM's DMA builtins, what LowerAsyncDMA writes, for the reference executor, with the meaning
TVM's builtin.h gives them (its Hexagon runtime implements them; no GPU code generator does):

* ``T.dma_copy(queue, dst, src, bytes, bypass_cache)`` reads ``bytes`` from ``src`` when it is
  issued and puts the write into ``dst`` in the queue's open group, or, with none open, in a
  group of its own;
* ``T.dma_start_group(queue)`` opens a group, ``T.dma_end_group(queue)`` closes it (a group
  opened twice, or closed when none is open, is an error);
* ``T.dma_wait(queue, n)`` completes the queue's groups but the ``n`` newest: only then are their
  copies in ``dst`` (waiting while a group is open is an error);
* a run that ends with copies never waited for, or with a group open, is an error (as a GPU
  thread's cp.async copies are, reference_async).

So a copy lands at the wait of its group, as cp.async's does (reference_async); a read of the
destination before that wait sees what was there before. The pointers are ``T.address_of(buf[i])``
(memory, element offset). Inside a GPU kernel the builtins are refused, as TVM's CUDA code
generator refuses them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError
from tvms.ir.expr import BufferLoad, Call

from .reference_async import complete_oldest

BUILTINS = ("tir.dma_copy", "tir.dma_wait", "tir.dma_start_group", "tir.dma_end_group")
_STATE = "dma queues"  # (the key of the run's queues in the executor's environment)


class _Queue:
    def __init__(self) -> None:
        self.groups: list = []  # committed groups, oldest first: lists of (memory, byte offset, bytes)
        self.open: list | None = None


def _queue(env: dict, queue: int) -> _Queue:
    return env.setdefault(_STATE, {}).setdefault(queue, _Queue())


def _bytes(memory: np.ndarray, offset: int, nbytes: int, what: str) -> np.ndarray:
    start = offset * memory.itemsize
    if not 0 <= start <= memory.nbytes - nbytes:
        raise TVMSError(f"dma_copy of {nbytes} bytes at element {offset} of its {what} is out of its bounds "
                        f"({memory.size} elements of {memory.dtype})")
    return np.ravel(memory).view(np.uint8)[start:start + nbytes]


def copy(env: dict, queue: int, dst: np.ndarray, dst_offset: int, src: np.ndarray, src_offset: int,
         nbytes: int) -> int:
    _bytes(dst, dst_offset, nbytes, "destination")  # (checked when issued)
    pending = (dst, dst_offset, _bytes(src, src_offset, nbytes, "source").copy())
    q = _queue(env, queue)
    if q.open is not None:
        q.open.append(pending)
    else:
        q.groups.append([pending])
    return 0


def start_group(env: dict, queue: int) -> int:
    q = _queue(env, queue)
    if q.open is not None:
        raise TVMSError(f"dma_start_group({queue}) while a group of queue {queue} is open")
    q.open = []
    return 0


def end_group(env: dict, queue: int) -> int:
    q = _queue(env, queue)
    if q.open is None:
        raise TVMSError(f"dma_end_group({queue}) with no group of queue {queue} open")
    q.groups.append(q.open)
    q.open = None
    return 0


def wait(env: dict, queue: int, in_flight: int) -> int:
    q = _queue(env, queue)
    if q.open is not None:
        raise TVMSError(f"dma_wait({queue}, {in_flight}) while a group of queue {queue} is open")
    for memory, offset, data in complete_oldest(q.groups, len(q.groups), in_flight):
        _bytes(memory, offset, len(data), "destination")[:] = data
    return 0


def finish(env: dict) -> None:
    """At the end of a run: every copy issued has been waited for, and no group is left open."""
    for queue, q in sorted(env.get(_STATE, {}).items()):
        pending = sum(len(group) for group in q.groups) + len(q.open or ())
        if pending or q.open is not None:
            raise TVMSError(f"the function ends with {pending} dma_copy copies of queue {queue} it never waited "
                            f"for (dma_wait)" + (", a group still open (dma_end_group)" if q.open is not None else ""))


def compile_call(codegen: Any, e: Any) -> str:
    """The executor's source of a DMA builtin call ``e`` (``codegen``: the serial code generator)."""
    name = e.op.name
    if getattr(codegen, "kernel", None) is not None:
        raise TVMSError(f"T.{name[4:]} inside a GPU kernel: DMA builtins are Hexagon's, and no CUDA code "
                        f"runs them (TVM's CUDA code generator refuses them too)")
    if name != "tir.dma_copy":
        fn = {"tir.dma_wait": wait, "tir.dma_start_group": start_group, "tir.dma_end_group": end_group}[name]
        return codegen._call(fn, "env", *(codegen.src(a) for a in e.args))
    queue, dst, src, nbytes = e.args[:4]
    pointers = []
    for pointer in (dst, src):
        if not (isinstance(pointer, Call) and getattr(pointer.op, "name", None) == "tir.address_of"
                and isinstance(pointer.args[0], BufferLoad)):
            raise TVMSError(f"dma_copy takes T.address_of(buffer[index]) pointers, not {pointer!r}")
        pointers.extend(codegen.flat_index(pointer.args[0].buffer, pointer.args[0].indices))
    return codegen._call(copy, "env", codegen.src(queue), *pointers, codegen.src(nbytes))


__all__ = ["BUILTINS", "compile_call", "finish"]
