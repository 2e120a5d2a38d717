"""A CUDA GPU without one, for the tests and benchmarks of the driver path: ``FakeDriver`` is
cuda-python's driver module as a machine with some GPUs (or none) shows it; ``EmulatedDriver``
is one GPU whose memory is host memory and whose launches run on the reference executor (the
tensor maps it encodes too: a kernel gets the map's encoding and the memory it views);
``Counting(driver)`` counts the calls made to a driver by name.
``install(driver)`` makes ``cuda_driver`` use it (the tests do the same through monkeypatch);
``fixture_artifact(name)`` is a SplitHostDevice module of ``fixtures/cuda_runtime`` as the cuda
code generator would hand it over."""
from __future__ import annotations

import bisect
import collections
import ctypes
import functools
import types
from pathlib import Path

import numpy as np

from tvms.ir import stmt as S
from tvms.ir.expr import is_tensor_map
from tvms.ir.visitor import collect
from tvms.lowering.codegen.cuda_artifact import CudaArtifact, CudaKernel
from tvms.runtime import cuda_driver
from tvms.runtime.cuda_module import TensorMapParameter
from tvms.runtime.cuda_tensor_map import ReferenceTensorMap, TiledEncoding
from tvms.runtime.reference import numpy_dtype, run_prim_func
from tvms.script import from_source

FIXTURES = Path(__file__).parent / "fixtures" / "cuda_runtime"


def _size_types() -> tuple:
    """cuda-python's cuuint64_t and cuuint32_t (stand-ins where it is not installed)."""
    try:
        from cuda.bindings import driver
        return driver.cuuint64_t, driver.cuuint32_t
    except ImportError:
        class cuuint64_t(int):
            pass

        class cuuint32_t(int):
            pass
        return cuuint64_t, cuuint32_t


_SIZE_TYPES = _size_types()


class FakeDriver:
    """cuda-python's driver module as a machine with ``count`` GPUs (or a failing cuInit) shows it."""

    def __init__(self, count: int, init_error: int = 0) -> None:
        self.count, self.init_error = count, init_error

    def cuInit(self, flags):
        return (self.init_error,)

    def cuDeviceGetCount(self):
        return (0, self.count)

    def cuGetErrorName(self, err):
        return (0, {700: b"CUDA_ERROR_ILLEGAL_ADDRESS"}.get(int(err), b"CUDA_ERROR_NO_DEVICE"))


class _Names:
    """The driver's enums by name (``CUdevice_attribute.CU_DEVICE_ATTRIBUTE_WARP_SIZE``)."""

    def __getattr__(self, name):
        return name


class EmulatedDriver(FakeDriver):
    """A GPU of compute capability 8.0 whose memory is host memory and whose launches run the
    kernel's TIR with the reference executor: what tvms asks of the driver (allocations, copies,
    cuLaunchKernel's grid, block and packed parameters) is checked without one."""

    CUdevice_attribute = CUfunction_attribute = _Names()
    ATTRIBUTES = {"CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024, "CU_DEVICE_ATTRIBUTE_WARP_SIZE": 32,
                  "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": 49152,
                  "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 166912,
                  "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 108,
                  "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 8,
                  "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0}

    def __init__(self, kernels: dict, run_kernels: bool = True) -> None:
        super().__init__(1)
        self.run_kernels = run_kernels
        self.kernels, self.memory, self.images = kernels, {}, []
        # freed blocks stay allocated on the host, so that no later block takes their address
        # and a second free of one is told from a free of a live block
        self.freed: dict = {}
        self.double_frees: list = []
        self.contexts: dict = {}
        self.bases: list = []  # (the allocations' addresses, sorted: where a pointer points)
        self._dtypes: dict = {}
        self.launches, self.streams, self.arguments = [], [], []
        self.function_attributes = []  # (kernel, attribute, value) as set
        self.tensor_maps: list = []  # (encoding, address) of each map encoded
        ok = (0,)
        for name in ("cuCtxSetCurrent", "cuCtxSynchronize", "cuStreamSynchronize", "cuModuleUnload",
                     "cuEventRecord", "cuEventSynchronize", "cuEventDestroy"):
            setattr(self, name, lambda *args: ok)

    def cuDeviceGet(self, index):
        return (0, index)

    def cuDevicePrimaryCtxRetain(self, device):
        return (0, self.contexts.setdefault(device, ("context", device)))  # (one per device)

    def cuDeviceGetAttribute(self, attribute, device):
        return (0, self.ATTRIBUTES[attribute])

    def cuMemAlloc(self, nbytes):
        block = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(block)] = block
        bisect.insort(self.bases, ctypes.addressof(block))
        return (0, ctypes.addressof(block))

    def cuMemFree(self, ptr):
        if ptr not in self.memory:  # (recorded: cuda_driver's finalizer would swallow the error)
            if ptr in self.freed:
                self.double_frees.append(ptr)
            return (1,)  # CUDA_ERROR_INVALID_VALUE
        self.freed[ptr] = self.memory.pop(ptr)
        self.bases.remove(ptr)
        return (0,)

    def cuMemcpyHtoD(self, dst, src, nbytes):
        ctypes.memmove(dst, src, nbytes)
        return (0,)

    def cuMemsetD8Async(self, ptr, value, nbytes, stream):
        ctypes.memset(ptr, value, nbytes)
        return (0,)

    cuMemcpyDtoH = cuMemcpyDtoD = cuMemcpyHtoD

    def cuModuleLoadData(self, image):
        self.images.append(image)
        return (0, image)

    def cuModuleGetFunction(self, module, name):
        return (0, name.decode())

    def cuFuncSetAttribute(self, fn, attribute, value):
        self.function_attributes.append((fn, attribute, value))
        return (0,)

    def cuStreamCreate(self, flags):
        return (0, "stream")

    def cuStreamDestroy(self, stream):
        return (0,)

    def cuEventCreate(self, flags):
        return (0, "event")

    def cuEventElapsedTime(self, start, end):
        return (0, 4.0)  # milliseconds

    # (cuTensorMapEncodeTiled's enums are taken as their values, its sizes only as cuda-python's
    # cuuint64_t / cuuint32_t objects, as the real binding takes them; a map's first word names its encoding)
    CUtensorMapDataType = CUtensorMapInterleave = CUtensorMapSwizzle = staticmethod(int)
    CUtensorMapL2promotion = CUtensorMapFloatOOBfill = staticmethod(int)
    cuuint64_t, cuuint32_t = _SIZE_TYPES
    _MAP_DTYPES = {0: "uint8", 1: "uint16", 2: "uint32", 3: "int32", 4: "uint64", 5: "int64", 6: "float16",
                   7: "float32", 8: "float64", 9: "bfloat16"}

    def cuTensorMapEncodeTiled(self, data_type, rank, address, dims, strides, box, element_strides,
                               interleave, swizzle, l2_promotion, oob_fill):
        sizes64, sizes32 = _SIZE_TYPES
        for sizes, kind in ((dims, sizes64), (strides, sizes64), (box, sizes32), (element_strides, sizes32)):
            for size in sizes:
                if not isinstance(size, kind):
                    raise TypeError(f"Cannot convert {type(size).__name__} to {kind.__module__}.{kind.__name__}")
        dims, strides, box, element_strides = ([int(v) for v in sizes] for sizes in (dims, strides, box,
                                                                                     element_strides))
        encoding = TiledEncoding(self._MAP_DTYPES[data_type], data_type, tuple(dims), tuple(strides), tuple(box),
                                 tuple(element_strides), interleave, swizzle, l2_promotion, oob_fill)
        if rank != len(dims) or len(strides) != rank - 1:
            return (1,)  # CUDA_ERROR_INVALID_VALUE
        self.tensor_maps.append((encoding, address))
        return (0, types.SimpleNamespace(opaque=[len(self.tensor_maps)] + [0] * 15))

    def _tensor_map(self, slot: int) -> ReferenceTensorMap:
        """The map a kernel gets by value (TensorMapParameter) as the executor reads it: its encoding
        and the device memory from its address on."""
        words = TensorMapParameter.from_address(slot).opaque
        encoding, address = self.tensor_maps[words[0] - 1]
        base = self.bases[bisect.bisect_right(self.bases, address) - 1]
        tmap = ReferenceTensorMap()
        tmap.encode(encoding, np.frombuffer(self.memory[base], encoding.dtype, offset=address - base))
        return tmap

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        kernel = self.kernels[fn]
        slots = (ctypes.c_void_p * len(kernel.func.params)).from_address(params)
        values = []
        for param, dtype, slot in zip(kernel.func.params, self._pointees(fn), slots):
            if is_tensor_map(param):
                values.append(self._tensor_map(slot))
                continue
            value = cuda_driver.c_type(str(param.dtype)).from_address(slot).value
            if dtype is not None:  # (a pointer into an allocation: the memory from there, as an array)
                base = self.bases[bisect.bisect_right(self.bases, value) - 1]
                block = self.memory[base]
                if not 0 <= value - base < len(block):  # (memory freed or never allocated: the GPU faults)
                    return (700,)  # CUDA_ERROR_ILLEGAL_ADDRESS
                value = np.frombuffer(block, dtype, offset=value - base)
            values.append(value)
        self.launches.append((fn, (gx, gy, gz), (bx, by, bz), shared))
        self.streams.append(stream)
        self.arguments.append(values)
        if self.run_kernels:
            run_prim_func(kernel.func, *values)
        return (0,)

    def _pointees(self, fn) -> list:
        """The numpy dtype each pointer parameter of kernel ``fn`` points to (None for a scalar),
        read from its declared buffers once."""
        found = self._dtypes.get(fn)
        if found is None:
            func, declared = self.kernels[fn].func, {}
            for decl in collect(func.body, S.DeclBuffer):
                declared.setdefault(decl.buffer.data, decl.buffer.dtype)
            found = self._dtypes[fn] = [numpy_dtype(declared[p]) if p.dtype.is_handle and not is_tensor_map(p)
                                        else None for p in func.params]
        return found


class Counting:
    """The driver seen through a counter of the calls made to it, by name."""

    def __init__(self, driver: EmulatedDriver) -> None:
        self.driver, self.counts = driver, collections.Counter()

    def __getattr__(self, name: str):
        found = getattr(self.driver, name)
        if not name.startswith("cu") or not callable(found):
            return found

        def counted(*args):
            self.counts[name] += 1
            return found(*args)
        return counted


def install(driver) -> None:
    """Use ``driver`` as cuda-python's driver module for the rest of the process (initialized
    once, as the real one is)."""
    cuda_driver._driver_module = lambda: driver
    for name in ("_initialized", "primary_context"):
        fn = getattr(cuda_driver, name)
        setattr(cuda_driver, name, functools.cache(getattr(fn, "__wrapped__", fn)))


def fixture_artifact(name: str, source: str = "// CUDA C", binary: bytes = b"") -> CudaArtifact:
    """The artifact of the SplitHostDevice module ``fixtures/cuda_runtime/<name>`` (its host
    function ``main``, its kernels the functions of calling convention 2)."""
    mod = from_source((FIXTURES / name).read_text())
    kernels = tuple(CudaKernel(k, mod[k], tuple(mod[k].attrs["tir.kernel_launch_params"]))
                    for k in mod if mod[k].attrs.get("calling_conv") == 2)
    return CudaArtifact("main", mod["main"], kernels, source, "sm_80", binary, "cubin")
