"""DLPack capsules for memory numpy does not hold: device tensors shared with cupy or torch.

A CPU ``Tensor`` lends its numpy array's capsule. Device memory has no such array, so this file
makes and reads the capsule itself (``dlpack.h``: a ``DLManagedTensor`` in a PyCapsule named
``"dltensor"``; the consumer renames it ``"used_dltensor"`` and calls its deleter when done).
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_NAME, _USED = b"dltensor", b"used_dltensor"
_KINDS = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# (the destructor sees a capsule being freed: it must not be touched as a Python object)
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# what an exported capsule keeps alive (the struct, its shape, the tensor), by struct address,
# until the consumer (or the capsule's destructor, if nobody consumed it) calls the deleter
_LENT: dict[int, tuple] = {}


@_DELETER
def _release(managed: Any) -> None:
    _LENT.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    if _is_valid_raw(capsule, _NAME):  # (never consumed: the deleter is ours to call)
        _LENT.pop(_pointer_raw(capsule, _NAME), None)


def to_capsule(ptr: int, shape: tuple, dtype: np.dtype, device: tuple[int, int], owner: Any) -> Any:
    """A ``"dltensor"`` capsule lending ``ptr`` (compact, row-major) while ``owner`` lives."""
    managed = _Managed()
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data, t.device = ptr, _Device(*device)
    t.ndim, t.dtype = len(shape), _DataType(_KINDS[dtype.kind], dtype.itemsize * 8, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    managed.deleter = _release
    address = ctypes.addressof(managed)
    _LENT[address] = (managed, dims, owner)
    return _api.PyCapsule_New(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class _Borrowed:
    """The producer's memory while a tensor reads it: calls the producer's deleter when it dies."""

    def __init__(self, address: int) -> None:
        self.address = address

    def __del__(self) -> None:
        managed = _Managed.from_address(self.address)
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))


def read_capsule(obj: Any, stream: Any = None) -> tuple[int, tuple, np.dtype, Any]:
    """Take ``obj``'s DLPack capsule: (data address, shape, dtype, an owner that releases the
    producer's memory when it dies). The data must be compact and row-major, as TVM asks."""
    from .tensor import numpy_dtype_of

    capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    address = _api.PyCapsule_GetPointer(capsule, _NAME)
    t = _Managed.from_address(address).dl_tensor
    shape = tuple(t.shape[k] for k in range(t.ndim))
    kind = {code: k for k, code in _KINDS.items()}.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        raise TVMSError(f"from_dlpack: DLPack type code {t.dtype.code} x{t.dtype.lanes} is not a tensor dtype")
    dtype = numpy_dtype_of(np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{t.dtype.bits // 8}"))
    if t.strides:
        step = 1
        for k in reversed(range(t.ndim)):
            if shape[k] > 1 and t.strides[k] != step:
                raise TVMSError("from_dlpack: the data is not compact and row-major; pass a contiguous copy")
            step *= shape[k]
    _api.PyCapsule_SetName(capsule, _USED)  # (ours now: the capsule's destructor leaves it)
    return (t.data or 0) + t.byte_offset, shape, dtype, _Borrowed(address)


def cuda_from_dlpack(obj: Any, device: Any) -> Any:
    """A ``CudaTensor`` sharing ``obj``'s device memory."""
    from . import cuda_driver
    from .cuda_tensor import CudaTensor
    from .tensor import ALIGNMENT
    from .device import missing_reason

    if not device.exist:
        raise TVMSError(f"from_dlpack: the data is on {device}: {missing_reason(device)}")
    # (the stream tvms's work on the data is queued on: the current one)
    stream = cuda_driver.current_stream(device.device_id).number
    ptr, shape, dtype, owner = read_capsule(obj, stream=stream)
    if ptr % ALIGNMENT:  # (a view at an offset: vector loads of it would fault on the device)
        raise TVMSError(f"from_dlpack: the device data must start on a {ALIGNMENT}-byte boundary; "
                        f"pass a contiguous copy (e.g. x.clone())")
    return CudaTensor(device, shape, dtype, ptr=ptr, owner=owner)


__all__ = ["cuda_from_dlpack", "read_capsule", "to_capsule"]
