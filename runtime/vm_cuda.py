"""Where a Relax VM on a CUDA device keeps its tensors: ``VirtualMachine(ex, tvms.cuda(0))``.

On the CPU the VM's registers hold numpy arrays. On a GPU they hold ``CudaTensor``s: arguments
are copied to the device (as TVM's VM converts its inputs to its device), outputs and
intermediates are allocated there (intermediates from a pool of device buffers by byte size,
as ``vm_memory.BufferPool`` does on the host), and the kernels are the CUDA module's functions.
Packed functions receive the device tensors themselves (they convert with DLPack or
``.numpy()``); a Relax operator left to its numpy reference runs on host copies.

All of it comes from one block pool (``cuda_pool.BlockPool``), as TVM's pooled allocator: the
pool's intermediates, a tensor that leaves the VM (an output, an argument's copy), which gives its
block back when it dies, and a storage of ``R.vm.alloc_storage``, given back when it and the
tensors placed in it die. With static shapes, a call after the first allocates nothing and frees
nothing (``cuMemFree`` waits for the whole device); the pool says which blocks serve which stream
and how many it keeps. A tensor lent to another library (DLPack, ``__cuda_array_interface__``),
an output or an intermediate a packed function hands on, which may read it on a stream of its
own, frees its block, unless the library said (DLPack's ``stream``) it reads it on the stream of
the block's work. The blocks are freed with the VM; a tensor that outlives it frees its own.
A block given back serves the VM's next work on its stream, which the stream orders after the
work queued on the tensor there; work on that tensor queued on another stream must be waited
for before the tensor is dropped: the pool cannot see it.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from . import cuda_driver
from .cuda_pool import Block, BlockPool
from .cuda_tensor import CudaTensor
from .device import Device
from .numpy_ops import Shape
from .tensor import Tensor
from .vm_memory import BufferPool


class VMDeviceMemory(BufferPool):
    """A VM's device memory on ``device``: fresh and pooled tensors (the host pool's logic over
    the blocks of a device pool), storages, conversions."""

    def __init__(self, device: Device) -> None:
        views: dict = {}  # (the host pool's cached views of a block hold it: dropped with it)
        self.blocks = BlockPool(device.device_id, forget=lambda block: views.pop(id(block), None))
        super().__init__(self.blocks.take, lambda raw, shape, dtype: CudaTensor(device, shape, dtype, ptr=raw.ptr,
                                                                                 owner=raw))
        self.views, self.free = views, self.blocks.idle  # (the host pool's released buffers: the idle blocks)
        self.device = device
        self._blocks = weakref.ref(self.blocks)  # (a tensor that outlives the VM frees its block)
        self.begin_call = self.blocks.begin_call  # (before each call of the VM)

    def keep(self, raw: Block) -> None:
        self.blocks.give_back(raw)

    def empty(self, shape: tuple, dtype: np.dtype) -> CudaTensor:
        """A tensor that may leave the VM, in a block it gives back to the VM when it dies."""
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
        raw = self._leased(nbytes)
        return CudaTensor(self.device, shape, dtype, ptr=raw.ptr, owner=_Lease(raw, self._blocks))

    def storage(self, nbytes: int) -> "_Lease":
        """``R.vm.alloc_storage``: zeroed device bytes (as the host VM's storage), zeroed on the
        stream whose work used them last."""
        raw = self._leased(nbytes)
        cuda_driver.fill_zero_async(raw.ptr, nbytes, raw.stream)
        return _Lease(raw, self._blocks)

    def _leased(self, nbytes: int) -> Block:
        """A block for tensors that may leave the VM: the host pool's cached views of it are
        dropped (they would hold it, lent or not, after it left the pool)."""
        raw = self.blocks.take(nbytes)
        self.views.pop(id(raw), None)
        return raw

    def view(self, storage: Any, offset: int, shape: tuple, dtype: np.dtype) -> CudaTensor:
        """``R.vm.alloc_tensor``: a tensor at ``offset`` bytes into a storage (which it holds)."""
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if not isinstance(storage, _Lease) or offset < 0 or offset + nbytes > storage.raw.nbytes:
            raise TVMSError(f"R.vm.alloc_tensor: a tensor of shape {shape} at offset {offset} does not fit "
                            f"its storage")
        return CudaTensor(self.device, shape, dtype, ptr=storage.raw.ptr + offset, owner=storage)

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
    """What keeps a VM's block for the tensors holding it (an output, or a storage and the
    tensors in it): when they die, the block goes back to the VM's pool, which drops it if it
    was lent (``Block.lend``); it is freed if the VM is gone (a cheap ``__del__`` rather than a
    weakref finalizer per call)."""

    __slots__ = ("raw", "memory")

    def __init__(self, raw: Block, memory: weakref.ref) -> None:
        self.raw, self.memory = raw, memory

    @property
    def stream(self) -> cuda_driver.Stream | None:
        """The stream of the block's work (lent or not)."""
        return self.raw.stream

    def lend(self, stream: Any = None) -> None:
        self.raw.lend(stream)

    def __del__(self) -> None:
        memory = self.memory()
        if memory is not None:
            memory.give_back(self.raw)


__all__ = ["VMDeviceMemory"]
