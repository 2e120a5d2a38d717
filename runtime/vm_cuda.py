"""Where a Relax VM on a CUDA device keeps its tensors: ``VirtualMachine(ex, tvms.cuda(0))``.

On the CPU the VM's registers hold numpy arrays. On a GPU they hold ``CudaTensor``s: arguments
are copied to the device (as TVM's VM converts its inputs to its device), outputs and
intermediates are allocated there (intermediates from a pool of device buffers by byte size,
as ``vm_memory.BufferPool`` does on the host), and the kernels are the CUDA module's functions.
Packed functions receive the device tensors themselves (they convert with DLPack or
``.numpy()``); a Relax operator left to its numpy reference runs on host copies.

A tensor that leaves the VM (an output, an argument's copy) takes a block the VM keeps, and
gives it back to the VM when it dies, as TVM's pooled allocator does: with static shapes, a call
after the first allocates nothing and frees nothing (``cuMemFree`` waits for the whole device;
``R.vm.alloc_storage`` still allocates at each call). What is kept is bounded: a call that had to
allocate (new sizes: a symbolic shape) first frees the blocks left idle through the last
``KEEP_CALLS`` calls. A block serves only later work of the stream its work was queued on, which
the stream orders after it: when the VM's stream changes (``dev.set_raw_stream``), the idle
blocks, and those of the old stream that come back later, are freed instead (work queued on a
tensor on another stream must be waited for before the tensor is dropped). A tensor lent to
another library (DLPack, ``__cuda_array_interface__``), which may read it on a stream of its own,
frees its block. The blocks are freed with the VM; a tensor that outlives it frees its own.
"""
from __future__ import annotations

import weakref
from collections import defaultdict
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from . import cuda_driver
from .cuda_tensor import CudaTensor
from .device import Device
from .numpy_ops import Shape
from .tensor import Tensor
from .vm_memory import BufferPool


class _Block(cuda_driver.DeviceMemory):
    """A block of a VM: the stream its work is queued on, and the call since which it is idle."""

    __slots__ = ("stream", "idle_since")


class VMDeviceMemory(BufferPool):
    """A VM's device memory on ``device``: fresh and pooled tensors (the host pool's logic over
    device buffers), storages, conversions."""

    KEEP_CALLS = 4  # (shapes cycling through this many sizes still reuse their blocks)

    def __init__(self, device: Device) -> None:
        super().__init__(self._block, lambda raw, shape, dtype: CudaTensor(device, shape, dtype, ptr=raw.ptr,
                                                                            owner=raw))
        self.device = device
        self.returned: dict[int, list] = defaultdict(list)  # byte size -> blocks tensors that died gave back
        self.stream = cuda_driver.current_stream(device.device_id)
        self.calls = 0
        self.allocated = False  # (a block was allocated since the last call began)
        self._itself = weakref.ref(self)  # (a tensor that outlives the VM frees its block)

    def _block(self, nbytes: int) -> _Block:
        block = _Block(self.device.device_id, nbytes)
        block.stream, block.idle_since = self.stream, self.calls
        self.allocated = True
        return block

    def begin_call(self) -> None:
        """Before a call: the idle blocks of another stream, or (after a call that allocated)
        those idle through the last ``KEEP_CALLS`` calls, are freed."""
        self.calls += 1
        stream = cuda_driver.current_stream(self.device.device_id)
        if stream is not self.stream:
            self.stream = stream
            self._free_idle(self.calls)
        elif self.allocated:
            self._free_idle(self.calls - self.KEEP_CALLS)
        self.allocated = False

    def _free_idle(self, before: int) -> None:
        """Drop (so free) the blocks idle since a call before ``before``."""
        for store in (self.free, self.returned):
            for nbytes, blocks in list(store.items()):
                for block in blocks:
                    if block.idle_since < before:
                        self.views.pop(id(block), None)  # (the pool's cached views of it hold it)
                blocks[:] = [b for b in blocks if b.idle_since >= before]
                if not blocks:
                    del store[nbytes]

    def keep(self, raw: _Block) -> None:
        raw.idle_since = self.calls
        self.free[raw.nbytes].append(raw)

    def give_back(self, raw: _Block) -> None:
        """A block whose tensor died: kept for later work on its stream, else freed."""
        if raw.stream is self.stream:
            raw.idle_since = self.calls
            self.returned[raw.nbytes].append(raw)

    def empty(self, shape: tuple, dtype: np.dtype) -> CudaTensor:
        """A tensor that may leave the VM, in a block it gives back to the VM when it dies."""
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
        free = self.returned.get(nbytes)
        raw = free.pop() if free else self._block(nbytes)
        return CudaTensor(self.device, shape, dtype, ptr=raw.ptr, owner=_Lease(raw, self._itself))

    def storage(self, nbytes: int) -> cuda_driver.DeviceMemory:
        """``R.vm.alloc_storage``: zeroed device bytes (as the host VM's storage)."""
        memory = cuda_driver.DeviceMemory(self.device.device_id, nbytes)
        cuda_driver.fill_zero(memory.ptr, nbytes, self.device.device_id)
        return memory

    def view(self, storage: Any, offset: int, shape: tuple, dtype: np.dtype) -> CudaTensor:
        """``R.vm.alloc_tensor``: a tensor at ``offset`` bytes into a storage."""
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if not isinstance(storage, cuda_driver.DeviceMemory) or offset < 0 or offset + nbytes > storage.nbytes:
            raise TVMSError(f"R.vm.alloc_tensor: a tensor of shape {shape} at offset {offset} does not fit "
                            f"its storage")
        return CudaTensor(self.device, shape, dtype, ptr=storage.ptr + offset, owner=storage)

    def to_device(self, value: Any) -> Any:
        """A VM value with its host arrays copied to the device (tuples field by field)."""
        if isinstance(value, Tensor):
            value = value.array
        if isinstance(value, (np.ndarray, np.generic)):  # (a numpy operator may give a 0-d scalar)
            host = np.ascontiguousarray(value)
            result = self.empty(host.shape, host.dtype)
            cuda_driver.copy_to_device(result.ptr, host.ctypes.data, host.nbytes, self.device.device_id)
            return result
        if isinstance(value, CudaTensor):
            if value.device != self.device:
                raise TVMSError(f"a tensor on {value.device} given to a VM on {self.device}; "
                                f"copy it with .copyto({self.device!r})")
            return value
        if isinstance(value, tuple) and not isinstance(value, Shape):
            return tuple(self.to_device(v) for v in value)
        return value

    def to_host(self, value: Any) -> Any:
        if isinstance(value, CudaTensor):
            return value.numpy()
        if isinstance(value, tuple) and not isinstance(value, Shape):
            return tuple(self.to_host(v) for v in value)
        return value


class _Lease:
    """What keeps a VM's block for the tensor holding it: when the tensor dies, the block goes
    back to the VM, or is freed if the VM is gone or the tensor was lent (a cheap ``__del__``
    rather than a weakref finalizer per call)."""

    __slots__ = ("raw", "memory")

    def __init__(self, raw: _Block, memory: weakref.ref) -> None:
        self.raw, self.memory = raw, memory

    def lend(self) -> None:
        """The tensor is read by another library, maybe on a stream of its own: its block is
        freed when the tensor dies (cuMemFree waits for that stream), not reused."""
        self.memory = _no_memory

    def __del__(self) -> None:
        memory = self.memory()
        if memory is not None:
            memory.give_back(self.raw)


def _no_memory() -> None:
    return None


__all__ = ["VMDeviceMemory"]
