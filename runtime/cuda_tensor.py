"""Tensors in CUDA device memory: what ``tvms.nd.array(x, device=tvms.cuda(0))`` returns.

A ``CudaTensor`` answers as a CPU ``Tensor`` does (``shape``, ``dtype``, ``numpy()``,
``copyfrom``, ``copyto``, DLPack) but its data is device memory, reached through the driver
(``cuda_driver.py``) and freed when the tensor dies. It holds no numpy array: code that runs on
the CPU refuses it, naming its device, and ``numpy()`` copies it to the host.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from . import cuda_driver
from .device import CUDA, Device


class CudaTensor:
    """An n-dimensional array in the memory of a CUDA device (``device.device_type == 2``)."""

    __slots__ = ("device", "shape", "_dtype", "ptr", "_owner", "__weakref__")

    def __init__(self, device: Device, shape: tuple[int, ...], dtype: np.dtype,
                 ptr: int | None = None, owner: Any = None) -> None:
        """New device memory for ``shape`` x ``dtype``, or (``ptr``, ``owner``) memory that
        ``owner`` keeps alive (a DLPack producer's)."""
        self.device, self.shape, self._dtype = device, tuple(shape), dtype
        if ptr is None:
            owner = cuda_driver.DeviceMemory(device.device_id, self.nbytes)
            ptr = owner.ptr
        self.ptr, self._owner = ptr, owner

    @property
    def dtype(self) -> str:
        return _dtype_name(self._dtype)

    @property
    def numpy_dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self._dtype.itemsize

    def numpy(self) -> np.ndarray:
        """A host copy of the data."""
        out = np.empty(self.shape, self._dtype)
        cuda_driver.copy_to_host(out.ctypes.data, self.ptr, self.nbytes, self.device.device_id)
        return out

    def copyfrom(self, source: Any) -> "CudaTensor":
        """Overwrite the data with ``source``'s: a device tensor (same dtype and shape, copied on
        the device) or host data (a numpy array, a CPU tensor, a list), checked as on the CPU."""
        if isinstance(source, CudaTensor):
            if (source.dtype, source.shape) != (self.dtype, self.shape):
                raise TVMSError(f"copyfrom: the source is {source.dtype} {source.shape}, "
                                f"this tensor {self.dtype} {self.shape}")
            if source.device != self.device:  # (across devices: through the host)
                return self.copyfrom(source.numpy())
            cuda_driver.copy_on_device(self.ptr, source.ptr, self.nbytes, self.device.device_id)
            return self
        host = host_copy(source, self._dtype, self.shape)
        cuda_driver.copy_to_device(self.ptr, host.ctypes.data, self.nbytes, self.device.device_id)
        return self

    def copyto(self, target: Any) -> Any:
        """Copy into ``target`` (a tensor, or a device: a new tensor there)."""
        from .tensor import tensor

        if isinstance(target, Device):
            return tensor(self, target)
        if hasattr(target, "copyfrom"):
            return target.copyfrom(self)
        raise TVMSError(f"copyto: expected a Tensor or a Device, not {type(target).__name__}")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.numpy()  # (always a copy: the data is not in host memory)
        return host if dtype is None else host.astype(dtype)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """The capsule for a consumer that reads the data on ``stream``, in DLPack's numbering
        for CUDA: 1 the legacy default stream, 2 the per-thread one, a larger number a stream's
        handle. The device is synchronized first unless that stream is both the one the
        tensor's work was queued on, which orders the reads after it, and the current one, on
        which tvms queues its later work on the tensor (a module's kernels): a VM's tensor knows
        its stream (its block's), another tensor's is not known, so it is synchronized for any
        stream.

        -1 says, as the standard has it, that the consumer orders its reads itself: nothing is
        waited for. None, which the standard reads as the legacy default stream, is read more
        carefully, as a stream not known, and synchronized: torch and cupy always name their
        stream, so None comes from code calling ``__dlpack__()`` by hand, which may read on any
        stream; one wait is the price of not racing. (0, which the standard forbids, is
        synchronized as well.) A consumer on another stream than the tensor's makes its block
        one the VM no longer reuses (``_lend``).

        Work queued on a VM's tensor on another stream than the VM's, once that stream is no
        longer the current one, is not seen: the caller waits for it before lending the tensor
        (here or through ``__cuda_array_interface__``) and before dropping it (its block then
        goes back to the VM, whose pool cannot see that work)."""
        from .dlpack import to_capsule

        index = self.device.device_id
        work = getattr(self._owner, "stream", None)
        ordered = work is cuda_driver.current_stream(index) and cuda_driver.names_stream(stream, work)
        if stream != -1 and not ordered:
            cuda_driver.synchronize(index)
        self._lend(stream)
        return to_capsule(self.ptr, self.shape, self._dtype, (CUDA, index), self)

    @property
    def __cuda_array_interface__(self) -> dict:
        """Numba's CUDA array interface (v3), which cupy, torch and the cuBLAS runtime read:
        the memory, row-major, and the stream a reader waits for: that of a VM's work on the
        tensor (lent or not), else the device's current one."""
        work = getattr(self._owner, "stream", None) or cuda_driver.current_stream(self.device.device_id)
        self._lend()
        return {"shape": self.shape, "typestr": self._dtype.str, "data": (self.ptr, False), "strides": None,
                "version": 3, "stream": work.number}

    def _lend(self, stream: Any = None) -> None:
        """The memory goes to a library that reads it on ``stream`` (DLPack's numbering; None:
        a stream of its own): a VM's block is then not reused by the VM, unless that is the
        stream its work is on (``cuda_pool.Block.lend``)."""
        lend = getattr(self._owner, "lend", None)
        if lend is not None:
            lend(stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (CUDA, self.device.device_id)

    def __repr__(self) -> str:
        return f"<tvms.runtime.Tensor shape={self.shape}, {self.device}>\n{self.numpy()!r}"

    def __str__(self) -> str:
        return str(self.numpy())


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    """TVM's name of a numpy dtype (remembered: the VM checks a tensor's dtype at every call)."""
    from .tensor import tvm_dtype

    return tvm_dtype(dtype)


def host_copy(source: Any, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """``source`` as a C-contiguous host array of ``dtype`` and ``shape`` (a cast of the same
    kind allowed, as ``Tensor.copyfrom``)."""
    data = np.asarray(getattr(source, "array", source))
    if data.dtype != dtype and not np.can_cast(data.dtype, dtype, casting="same_kind"):
        raise TVMSError(f"copyfrom: cannot copy {data.dtype} data into a {dtype} tensor "
                        f"without changing its kind; cast it first")
    if tuple(data.shape) != tuple(shape):
        raise TVMSError(f"copyfrom: the source has shape {tuple(data.shape)}, this tensor {tuple(shape)}")
    return np.ascontiguousarray(data, dtype=dtype)


def cuda_tensor(data: np.ndarray, device: Device) -> CudaTensor:
    """A device tensor holding a copy of host ``data`` (a C-contiguous numpy array)."""
    result = CudaTensor(device, data.shape, data.dtype)
    cuda_driver.copy_to_device(result.ptr, data.ctypes.data, result.nbytes, device.device_id)
    return result


__all__ = ["CudaTensor", "cuda_tensor", "host_copy"]
