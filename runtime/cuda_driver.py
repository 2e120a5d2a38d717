"""The CUDA driver API through cuda-python (``cuda.bindings.driver``): initialization, primary
contexts, device attributes, device memory, streams, events, modules and launches.

Everything here goes through ``call``, which turns a driver error into a ``TVMSError`` naming
the call and the driver's error name. What is missing is said plainly, in the order it is
found: cuda-python itself, the NVIDIA driver library (``libcuda.so``), a device, the device
index. ``cuda_available()`` answers without raising (``tvms.cuda(0).exist``).

The driver module is imported on first use: ``import tvms`` never loads it.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from typing import Any

from tvms.ir.errors import TVMSError
from tvms.ir.registry import register_func


@functools.cache
def _driver_module() -> Any:
    """cuda-python's driver API module: ``cuda.bindings.driver`` (12.6+) or ``cuda.cuda``."""
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda as driver
        return driver
    except ImportError:
        return None


@functools.cache
def _initialized() -> tuple[Any, int, str]:
    """(driver module or None, device count, why there is none): ``cuInit`` once per process."""
    driver = _driver_module()
    if driver is None:
        return None, 0, "cuda-python is not installed (pip install cuda-python), so tvms cannot reach a CUDA GPU"
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # cuda-python loads libcuda.so here: no NVIDIA driver installed
        return None, 0, f"the NVIDIA driver library (libcuda.so) cannot be loaded: {exc}"
    if int(err) != 0:
        return None, 0, f"the CUDA driver does not start: cuInit gives {_error_name(driver, err)}"
    err, count = driver.cuDeviceGetCount()
    if int(err) != 0 or int(count) == 0:
        return None, 0, "the CUDA driver reports no GPU"
    return driver, int(count), ""


def _error_name(driver: Any, err: Any) -> str:
    try:
        status, name = driver.cuGetErrorName(err)
        if int(status) == 0:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # (the name is for the message only)
        pass
    return f"CUresult {int(err)}"


def cuda_device_count() -> int:
    """How many CUDA GPUs the driver reports (0 without cuda-python, a driver or a GPU)."""
    return _initialized()[1]


def missing_reason(index: int = 0) -> str:
    """Why ``cuda(index)`` cannot be used (for error messages); "" when it can."""
    _, count, reason = _initialized()
    if reason:
        return reason
    if index >= count:
        return f"device index {index} is out of range: the CUDA driver reports {count} GPU{'s' * (count != 1)}"
    return ""


def driver() -> Any:
    """The initialized driver module; a TVMSError naming what is missing when there is none."""
    module, _, reason = _initialized()
    if module is None:
        raise TVMSError(f"CUDA is not available: {reason}")
    return module


_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT


def call(name: str, *args: Any) -> Any:
    """``driver.<name>(*args)``, its error checked: the result (one value, a tuple, or None)."""
    d = driver()
    err, rest = _split(getattr(d, name)(*args))
    context = getattr(_THREAD, "context", None)
    if int(err) == _INVALID_CONTEXT and context is not None:
        # another library popped the context tvms had made current on this thread (use_device
        # sets it once): current again, the call is made once more
        _split(d.cuCtxSetCurrent(context))
        err, rest = _split(getattr(d, name)(*args))
    if int(err) != 0:
        raise TVMSError(f"CUDA driver call {name} failed: {_error_name(d, err)}")
    return rest[0] if len(rest) == 1 else (rest or None)


def _split(result: Any) -> tuple:
    return (result[0], result[1:]) if isinstance(result, tuple) else (result, ())


# --------------------------------------------------------------------------- devices, contexts


def check_index(index: int) -> None:
    reason = missing_reason(index)
    if reason:
        raise TVMSError(f"cannot use cuda:{index}: {reason}")


@functools.cache
def primary_context(index: int) -> Any:
    """The device's primary context (retained once per process, as the CUDA runtime does)."""
    check_index(index)
    return call("cuDevicePrimaryCtxRetain", call("cuDeviceGet", index))


_THREAD = threading.local()  # .context: the context this thread made current last


def use_device(index: int) -> None:
    """Make ``cuda(index)``'s primary context current on this thread (before any other call).

    With one GPU, once per thread: its primary context is the one every user of the CUDA
    runtime (cupy, torch) makes current too, so it stays current, and a call of tvms need not
    pay a driver call to say so again. With several, the runtime's users switch between their
    primary contexts, so it is set before each call. (Code that makes a context of its own
    current, as PyCUDA's ``make_context``, must not share a thread with tvms's calls.)"""
    context = primary_context(index)
    if getattr(_THREAD, "context", None) is context and cuda_device_count() == 1:
        return
    call("cuCtxSetCurrent", context)
    _THREAD.context = context


# TVM's device attribute names -> the driver's CUdevice_attribute member
_ATTRIBUTES = {
    "max_threads_per_block": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "warp_size": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "max_shared_memory_per_block": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK",
    "multi_processor_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "max_clock_rate": "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
    "l2_cache_size_bytes": "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE",
    "max_registers_per_block": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK",
    "max_shared_memory_per_block_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
}
ATTRIBUTE_NAMES = (*_ATTRIBUTES, "compute_version", "device_name", "total_global_memory")


def attribute(index: int, name: str) -> Any:
    """A device attribute by TVM's name (``max_threads_per_block``, ``compute_version`` "8.0", ...)."""
    check_index(index)
    device = call("cuDeviceGet", index)
    if name == "compute_version":
        major = attribute(index, "_major")
        return f"{major}.{attribute(index, '_minor')}"
    if name == "device_name":
        raw = call("cuDeviceGetName", 256, device)
        return bytes(raw).split(b"\0", 1)[0].decode()
    if name == "total_global_memory":
        return int(call("cuDeviceTotalMem", device))
    member = {"_major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
              "_minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"}.get(name) or _ATTRIBUTES.get(name)
    if member is None:
        raise TVMSError(f"unknown CUDA device attribute {name!r}; tvms knows {', '.join(ATTRIBUTE_NAMES)}")
    return int(call("cuDeviceGetAttribute", getattr(driver().CUdevice_attribute, member), device))


def detected_arch() -> str | None:
    """What ``Target("cuda")`` takes for its ``-arch`` as TVM: GPU 0's (``sm_90a`` from 9.0 on,
    the architecture-specific features TVM uses there), None without a GPU."""
    if cuda_device_count() == 0:
        return None
    version = int(attribute(0, "compute_version").replace(".", ""))
    return f"sm_{version}{'a' if version >= 90 else ''}"


register_func("runtime.cuda_driver.detected_arch", detected_arch, internal=True)


def synchronize(index: int) -> None:
    use_device(index)
    call("cuCtxSynchronize")


# --------------------------------------------------------------------------- memory


class DeviceMemory:
    """``nbytes`` of device memory on ``cuda(index)`` at ``ptr``, freed when the object dies."""

    __slots__ = ("index", "ptr", "nbytes", "__weakref__")

    def __init__(self, index: int, nbytes: int) -> None:
        use_device(index)
        self.index, self.nbytes = index, nbytes
        # (cuMemAlloc refuses 0 bytes; an empty tensor gets one byte so that its pointer is real)
        self.ptr = int(call("cuMemAlloc", max(nbytes, 1)))
        weakref.finalize(self, _free, index, self.ptr)


def _free(index: int, ptr: int) -> None:
    try:
        use_device(index)
        call("cuMemFree", ptr)
    except Exception:  # (at interpreter exit the driver may be gone: the process frees it all)
        pass


def copy_to_device(ptr: int, host_address: int, nbytes: int, index: int) -> None:
    if nbytes:
        use_device(index)
        call("cuMemcpyHtoD", ptr, host_address, nbytes)


def copy_to_host(host_address: int, ptr: int, nbytes: int, index: int) -> None:
    if nbytes:
        use_device(index)
        call("cuMemcpyDtoH", host_address, ptr, nbytes)


def fill_zero_async(ptr: int, nbytes: int, stream: "Stream") -> None:
    """Zero ``nbytes`` at ``ptr`` in the order of ``stream``'s work."""
    if nbytes:
        use_device(stream.index)
        call("cuMemsetD8Async", ptr, 0, nbytes, stream.handle)


def copy_on_device(dst: int, src: int, nbytes: int, index: int) -> None:
    if nbytes:
        use_device(index)
        call("cuMemcpyDtoD", dst, src, nbytes)


# --------------------------------------------------------------------------- streams, events


class Stream:
    """A CUDA stream of ``cuda(index)``; ``Stream(index, default=True)`` is the legacy default
    stream (handle 0), which synchronizes with every other stream."""

    def __init__(self, index: int, default: bool = False) -> None:
        use_device(index)
        self.index = index
        self.handle = 0 if default else call("cuStreamCreate", 0)
        if not default:
            weakref.finalize(self, _destroy, "cuStreamDestroy", index, self.handle)

    def synchronize(self) -> None:
        use_device(self.index)
        call("cuStreamSynchronize", self.handle)

    @property
    def number(self) -> int:
        """The stream as DLPack and the CUDA array interface number it (1: the legacy default)."""
        return int(self.handle) or 1


_CURRENT_STREAMS: dict[int, Stream] = {}


def current_stream(index: int) -> Stream:
    """The stream kernels are launched on for ``cuda(index)``: the one ``set_current_stream``
    chose, else the legacy default stream."""
    stream = _CURRENT_STREAMS.get(index)
    if stream is None:
        stream = _CURRENT_STREAMS[index] = Stream(index, default=True)
    return stream


def set_current_stream(index: int, stream: Stream | None) -> None:
    """Launch on ``stream`` from now on (None: the default stream again)."""
    if stream is not None and stream.index != index:
        raise TVMSError(f"a stream of cuda:{stream.index} cannot run the work of cuda:{index}")
    _CURRENT_STREAMS[index] = stream or Stream(index, default=True)


def names_stream(number: Any, stream: Stream | None) -> bool:
    """Whether ``number``, a stream as a DLPack consumer names it (1: the legacy default stream;
    2: the per-thread default stream; another positive number: a stream's handle; None, 0 or
    -1: no stream), is ``stream`` (None: a stream not known, which no number names)."""
    return stream is not None and isinstance(number, int) and number != 2 and number == stream.number


def _destroy(name: str, index: int, handle: Any) -> None:
    try:
        use_device(index)
        call(name, handle)
    except Exception:  # (as _free)
        pass


def time_on_stream(stream: Stream, run: Any, number: int) -> float:
    """Seconds per call of ``run()`` (which queues work on ``stream``), ``number`` calls between
    two CUDA events: the device's own clock, not the host's."""
    use_device(stream.index)
    start, end = call("cuEventCreate", 0), call("cuEventCreate", 0)
    try:
        call("cuEventRecord", start, stream.handle)
        for _ in range(number):
            run()
        call("cuEventRecord", end, stream.handle)
        call("cuEventSynchronize", end)
        return float(call("cuEventElapsedTime", start, end)) / 1e3 / number
    finally:
        call("cuEventDestroy", start)
        call("cuEventDestroy", end)


# --------------------------------------------------------------------------- modules, launches


DEFAULT_DYNAMIC_SHARED = 48 * 1024  # bytes a kernel may launch with before it asks for more


class LoadedModule:
    """A cubin or PTX image loaded on ``cuda(index)``: its kernels by name (``function``)."""

    def __init__(self, index: int, image: bytes) -> None:
        use_device(index)
        self.index = index
        # (PTX is read as a C string: it must end with a NUL; a cubin is an ELF file, as is)
        if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
            image += b"\0"
        self.handle = call("cuModuleLoadData", image)
        self._functions: dict[str, Any] = {}
        self._asked: dict[str, int] = {}  # kernel -> the dynamic shared memory bytes it may use
        weakref.finalize(self, _destroy, "cuModuleUnload", index, self.handle)

    def function(self, name: str, dynamic_shared_bytes: int = 0) -> Any:
        """The kernel ``name``, allowed ``dynamic_shared_bytes`` of dynamic shared memory: above
        48 KiB a kernel must ask for it (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``), up
        to the device's opt-in maximum."""
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = call("cuModuleGetFunction", self.handle, name.encode())
        if dynamic_shared_bytes > max(DEFAULT_DYNAMIC_SHARED, self._asked.get(name, 0)):
            limit = attribute(self.index, "max_shared_memory_per_block_optin")
            if dynamic_shared_bytes > limit:
                raise TVMSError(f"kernel {name} launches with {dynamic_shared_bytes} bytes of dynamic shared "
                                f"memory; a block of cuda({self.index}) has at most {limit}")
            attr = driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            call("cuFuncSetAttribute", fn, attr, dynamic_shared_bytes)
            self._asked[name] = dynamic_shared_bytes
        return fn


# the C type of a kernel parameter of each TIR dtype (pointers are handles)
_C_TYPES = {"handle": ctypes.c_void_p, "bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
            "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
            "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
            "float32": ctypes.c_float, "float64": ctypes.c_double}


def c_type(dtype: str) -> Any:
    found = _C_TYPES.get(dtype)
    if found is None:
        raise TVMSError(f"a CUDA kernel parameter of type {dtype} cannot be passed from Python; "
                        f"it takes {', '.join(_C_TYPES)}")
    return found


def launch(fn: Any, grid: tuple, block: tuple, shared_bytes: int, stream: Stream, args: Any) -> None:
    """``cuLaunchKernel``: ``args`` are (ctypes type, value) pairs in parameter order."""
    values = [ctype(value) for ctype, value in args]
    # kernelParams: an array of pointers, each to one argument's value (copied at launch)
    params = (ctypes.c_void_p * max(len(values), 1))(*map(ctypes.addressof, values))
    use_device(stream.index)
    call("cuLaunchKernel", fn, *grid, *block, shared_bytes, stream.handle, ctypes.addressof(params), 0)


__all__ = ["ATTRIBUTE_NAMES", "DeviceMemory", "LoadedModule", "Stream", "attribute",
           "c_type", "call", "check_index", "copy_on_device", "copy_to_device", "copy_to_host",
           "cuda_device_count", "current_stream", "detected_arch", "driver", "fill_zero_async", "launch",
           "missing_reason", "names_stream", "primary_context", "set_current_stream", "synchronize",
           "time_on_stream", "use_device"]
