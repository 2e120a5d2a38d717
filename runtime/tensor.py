"""Runtime tensors: ``tvms.nd.array``, ``tvms.nd.empty``, ``tvms.runtime.tensor`` and DLPack.

A ``Tensor`` holds its data in ``.array``: a C-contiguous numpy array whose data starts on a
64-byte boundary (TVM's allocation alignment), so compiled kernels may read it with aligned vector
loads. ``tensor``/``empty``/``from_dlpack`` on a CUDA device give a ``CudaTensor``
(``cuda_tensor.py``), or say why the device cannot be used.

A tensor of dtype ``string`` (ONNX's string tensors) holds a numpy object array of ``str``: no
kernel reads it (the string operators are run-time functions, ``runtime/string_ops.py``), so it
has no alignment to keep; ``tvms.nd.array`` takes str, bytes (UTF-8) or object arrays of them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tvms.ir.dtype import ML_DTYPES, DataType, ml_dtype
from tvms.ir.errors import TVMSError

from .device import CPU, CUDA, Device, cpu, missing_reason

ALIGNMENT = 64  # bytes; TVM allocates tensors on this boundary and checks it on from_dlpack

# the element types a tensor holds: the TVM scalar types numpy has, and those of ml_dtypes
# (bfloat16, float8_e4m3fn, ..., int4: one element a byte, as ml_dtypes and TVM hold them)
TENSOR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")
STRING = "string"
_UNSUPPORTED = f"tvms tensors hold {', '.join(TENSOR_DTYPES)}, {', '.join(ML_DTYPES)} and {STRING}"


class Tensor:
    """An n-dimensional array on a device, as TVM's runtime tensor (``tvm.nd.NDArray``)."""

    __slots__ = ("array", "device")

    def __init__(self, array: np.ndarray, device: Device | None = None):
        # the invariant compiled kernels rely on; tvms.nd.array / empty allocate such memory
        if not isinstance(array, np.ndarray):
            raise TVMSError(f"a Tensor wraps a numpy array, not {type(array).__name__}; "
                            f"use tvms.nd.array to convert")
        if not array.flags.c_contiguous:
            raise TVMSError("a Tensor's data must be C-contiguous; tvms.nd.array makes a contiguous copy")
        if numpy_dtype_of(array.dtype) == object:
            _check_strings(array)
        elif array.size and array.ctypes.data % ALIGNMENT:  # (an empty array has no data to align)
            raise TVMSError(f"a Tensor's data must start on a {ALIGNMENT}-byte boundary; "
                            f"tvms.nd.array copies into aligned memory")
        if not array.flags.writeable:
            raise TVMSError("a Tensor's data must be writable; tvms.nd.array makes a writable copy")
        self.array = array
        self.device = _cpu_device(device, "Tensor")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    @property
    def dtype(self) -> str:
        return tvm_dtype(self.array.dtype)

    @property
    def ndim(self) -> int:
        return self.array.ndim

    def numpy(self) -> np.ndarray:
        """A numpy copy of the data (later writes to the tensor do not show in it)."""
        return self.array.copy()

    def copyfrom(self, source: Tensor | np.ndarray | Sequence) -> Tensor:
        """Overwrite the data with ``source``'s (same shape; a numpy source may need a cast of the
        same kind, e.g. float64 to float32, a tensor source must have the same dtype)."""
        if isinstance(source, Tensor):
            if source.dtype != self.dtype:
                raise TVMSError(f"copyfrom: the source tensor has dtype {source.dtype}, "
                                f"this tensor {self.dtype}")
            data = source.array
        else:
            data = string_array(source) if self.array.dtype == object else _as_numpy(source)
            if not np.can_cast(data.dtype, self.array.dtype, casting="same_kind"):
                raise TVMSError(f"copyfrom: cannot copy {data.dtype} data into a {self.dtype} tensor "
                                f"without changing its kind; cast it first")
        if tuple(data.shape) != self.shape:
            raise TVMSError(f"copyfrom: the source has shape {tuple(data.shape)}, "
                            f"this tensor {self.shape}")
        if not self.array.flags.writeable:  # (a weight the parameter cache holds: let it go)
            from .param_cache import thaw

            thaw(self.array)
        np.copyto(self.array, data, casting="same_kind")
        return self

    def copyto(self, target: Tensor | Device) -> Tensor:
        """Copy into ``target`` (a tensor: checked like ``copyfrom``; a device: a new tensor there)."""
        if isinstance(target, Device):
            return tensor(self.array, target)
        if isinstance(target, Tensor) or hasattr(target, "copyfrom"):  # (a CudaTensor too)
            return target.copyfrom(self)
        raise TVMSError(f"copyto: expected a Tensor or a Device, not {type(target).__name__}")

    # --- DLPack: other libraries (numpy, torch) read the same memory without a copy
    def __dlpack__(self, **kwargs: Any) -> Any:
        if self.array.dtype == object:
            raise TVMSError("a string tensor has no DLPack form (DLPack holds numbers); use .numpy()")
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device.device_type, self.device.device_id)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self.array.dtype:
            return self.array.astype(dtype)
        return self.array.copy() if copy else self.array

    def __repr__(self) -> str:
        return f"<tvms.runtime.Tensor shape={self.shape}, {self.device}>\n{self.array!r}"

    def __str__(self) -> str:
        return str(self.array)


# TVM before 0.20 called the class NDArray (seed code annotates with ``tvm.nd.NDArray``)
NDArray = Tensor


def tvm_dtype(dtype: np.dtype) -> str:
    """The TVM name of a numpy dtype ("float32", "int64", "bool", ...)."""
    if dtype == object:
        return STRING
    name = "bool" if dtype.kind == "b" else dtype.name
    if name in ML_DTYPES and dtype == ml_dtype(name):  # (kind "V", or "f" for some)
        return name
    if name not in TENSOR_DTYPES or dtype.byteorder == ">":
        raise TVMSError(f"tensors cannot hold numpy {dtype} data: {_UNSUPPORTED}")
    return name


def numpy_dtype_of(dtype: str | np.dtype | type) -> np.dtype:
    """The numpy dtype of a tensor dtype given as a TVM name or anything numpy understands."""
    if isinstance(dtype, str):
        try:
            name = DataType(dtype).name
        except TVMSError:
            raise TVMSError(f"unknown data type {dtype!r}") from None
        if name in ML_DTYPES:
            return ml_dtype(name)
        if name == STRING:
            return np.dtype(object)
        if name not in TENSOR_DTYPES:
            raise TVMSError(f"tensors of dtype {dtype!r} are not supported: {_UNSUPPORTED}")
        return np.dtype(name)
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TVMSError(f"unknown data type {dtype!r}") from None
    tvm_dtype(result)  # refuses the kinds a tensor cannot hold
    return result


def _check_strings(array: np.ndarray) -> None:
    """Refuse an object array holding anything but str (a string tensor's elements)."""
    for item in array.flat:
        if type(item) is not str:
            raise TVMSError(f"a string tensor holds str elements, not {type(item).__name__}")


def string_array(data: Any) -> np.ndarray:
    """``data`` (str, bytes, or arrays and nested lists of them) as a numpy object array of
    str: bytes are read as UTF-8, as ONNX stores its strings."""
    source = _as_numpy(data)
    if source.dtype.kind not in "USO":
        raise TVMSError(f"a string tensor is made of str or bytes, not numpy {source.dtype} data")
    result = np.empty(source.shape, object)
    try:
        result.flat[:] = [item.decode() if isinstance(item, bytes) else str(item) if isinstance(item, str) else item
                          for item in source.flat]  # (numpy's str_ and bytes_ become str)
    except UnicodeDecodeError:
        raise TVMSError("a string tensor's bytes must be UTF-8 text") from None
    _check_strings(result)
    return result


def _checked_device(device: Device | None, what: str) -> Device:
    """The device to allocate on: the CPU by default, else ``device`` checked to exist."""
    if device is None:
        return cpu(0)
    if not isinstance(device, Device):
        raise TVMSError(f"{what}: device must be a tvms Device (tvms.cpu(), tvms.cuda()), "
                        f"not {type(device).__name__}")
    if device.device_type != CPU and not device.exist:
        raise TVMSError(f"{what}: cannot place a tensor on {device}: {missing_reason(device)}")
    return device


def _cpu_device(device: Device | None, what: str) -> Device:
    """``device`` checked to be the CPU (a ``Tensor`` holds host memory)."""
    if device is not None and getattr(device, "device_type", CPU) != CPU:
        raise TVMSError(f"{what}: a Tensor holds host memory, not {device} memory "
                        f"(tvms.nd.array(x, device=...) places data on a device)")
    return _checked_device(device, what)


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array whose data starts on an ``ALIGNMENT``-byte boundary."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _as_numpy(data: Any, dtype: np.dtype | None = None) -> np.ndarray:
    try:
        return np.asarray(data, dtype=dtype)
    except (ValueError, TypeError) as err:
        raise TVMSError(f"cannot make a tensor from {type(data).__name__}: {err}") from None


def _check_shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        raise TVMSError(f"a tensor shape is a tuple of integers, not {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise TVMSError(f"a tensor shape is a tuple of non-negative integers, not {shape!r}")
    return tuple(int(d) for d in dims)


def empty(shape: Any, dtype: str | np.dtype = "float32", device: Device | None = None) -> Tensor:
    """An uninitialized tensor (``tvm.nd.empty((128, 128), "float32")``)."""
    dev = _checked_device(device, "empty")
    if numpy_dtype_of(dtype) == object:
        return Tensor(np.full(_check_shape(shape), "", object), _cpu_device(device, "empty"))
    if dev.device_type == CUDA:
        from .cuda_tensor import CudaTensor

        return CudaTensor(dev, _check_shape(shape), numpy_dtype_of(dtype))
    return Tensor(_aligned_empty(_check_shape(shape), numpy_dtype_of(dtype)), dev)


def tensor(data: Any, device: Device | None = None, *, dtype: str | np.dtype | None = None) -> Tensor:
    """A tensor holding a copy of ``data`` (a numpy array, a nested list, a number or a Tensor)."""
    dev = _checked_device(device, "tensor")
    if isinstance(data, Tensor):
        data = data.array
    want = None if dtype is None else numpy_dtype_of(dtype)
    source = _as_numpy(data, None if want == object else want)
    if source.dtype.kind in "USO" or want == object:
        return Tensor(string_array(source), _cpu_device(device, "tensor"))
    native = source.dtype if source.dtype.isnative else source.dtype.newbyteorder("=")
    if dev.device_type == CUDA:
        from .cuda_tensor import cuda_tensor

        return cuda_tensor(np.ascontiguousarray(source, numpy_dtype_of(native)), dev)
    result = Tensor(_aligned_empty(source.shape, numpy_dtype_of(native)), dev)
    np.copyto(result.array, source)
    return result


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing ``obj``'s memory (anything with ``__dlpack__``: numpy, torch, a Tensor).
    As in TVM, the data must be C-contiguous and start on a 64-byte boundary."""
    if isinstance(obj, Tensor):
        return Tensor(obj.array, obj.device)
    if not hasattr(obj, "__dlpack__"):
        raise TVMSError(f"from_dlpack: {type(obj).__name__} does not support DLPack (no __dlpack__)")
    device_type, device_id = obj.__dlpack_device__()
    if device_type == CUDA:
        from .dlpack import cuda_from_dlpack

        return cuda_from_dlpack(obj, Device(CUDA, int(device_id)))
    if device_type != CPU:
        raise TVMSError(f"from_dlpack: the data is on DLPack device ({device_type}, {device_id}); "
                        f"tvms tensors live on the CPU or a CUDA GPU")
    try:
        array = np.from_dlpack(obj)
    except (BufferError, TypeError, RuntimeError) as err:
        raise TVMSError(f"from_dlpack: numpy cannot read this {type(obj).__name__}: {err}") from None
    return Tensor(array, cpu(device_id))  # (checks the layout, as TVM 0.27 does)


__all__ = ["ALIGNMENT", "NDArray", "STRING", "Tensor", "empty", "from_dlpack", "numpy_dtype_of",
           "string_array", "tensor", "tvm_dtype"]
