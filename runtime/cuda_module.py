"""Compiled CUDA modules: what ``tvms.build(func, target="cuda")`` returns, and calling it.

>>> lib = tvms.build(func, target="cuda")
>>> a = tvms.nd.array(x, device=tvms.cuda(0))       # arguments live on the device
>>> lib["main"](a, b, c)                             # queued on the device's stream
>>> tvms.cuda(0).sync()
>>> print(lib.imported_modules[0].get_source())     # the CUDA C, as TVM shows it

A function runs its artifact's host function (``cuda_host.py``), which launches the kernels
through a launcher: ``DriverLauncher`` loads the cubin/PTX with ``cuModuleLoadData`` and
launches with ``cuLaunchKernel`` on a stream; ``ReferenceLauncher`` runs each kernel's TIR with
the reference executor on host arrays (``lib.with_launcher(ReferenceLauncher())``), which is
how the host side and the argument passing are checked on a machine without a GPU.
"""
from __future__ import annotations

import ctypes
import threading
import time
from typing import Any, Callable

import numpy as np

from tvms.ir import expr as E
from tvms.ir import ptx
from tvms.ir import stmt as S
from tvms.ir.buffer import element_bytes
from tvms.ir.errors import TVMSError
from tvms.ir.registry import register_func
from tvms.ir.visitor import collect

from . import cuda_driver
from .cuda_host import HostRunner, Launch, bind_arguments
from .cuda_pool import BlockPool
from .cuda_tensor_map import NAME as ENCODE_TENSOR_MAP, DeviceTensorMap, ReferenceTensorMap
from .cuda_tensor import CudaTensor
from .device import CPU, CUDA, Device, missing_reason
from .module import Module, TimingResult
from .reference import compile_expr, run_prim_func
from .tir_values import numpy_dtype


class TensorMapParameter(ctypes.Structure):
    """A kernel's ``const __grid_constant__ CUtensorMap`` parameter: the 128 bytes, by value."""

    _fields_ = [("opaque", ctypes.c_uint64 * 16)]

    def __init__(self, words: tuple) -> None:
        super().__init__((ctypes.c_uint64 * 16)(*words))


def _by_value(tmap: DeviceTensorMap, kernel: str) -> tuple:
    """The 128 bytes of an encoded map, as a kernel takes them."""
    if tmap.words is None:
        raise TVMSError(f"kernel {kernel} is launched with a tensor map that was never encoded "
                        f"(runtime.cuTensorMapEncodeTiled before the launch)")
    return tmap.words


class ReferenceLauncher:
    """Runs kernels with the reference executor on host arrays (numpy arrays or CPU tensors),
    after checking that the host's grid and block are the extents the kernel launches."""

    device_type = CPU  # (a module launching through it runs on the host, a VM on tvms.cpu())

    def buffer(self, arg: Any, where: str) -> tuple:
        arr = arg if isinstance(arg, np.ndarray) else getattr(arg, "array", None)
        if not isinstance(arr, np.ndarray):
            raise TVMSError(f"{where}: the reference launcher runs on host arrays, "
                            f"not {type(arg).__name__}")
        if not arr.flags.c_contiguous:
            raise TVMSError(f"{where}: the array must be C-contiguous (use np.ascontiguousarray)")
        return arr.reshape(-1), arr.shape, arr.dtype

    def allocate(self, dtype: Any, count: int) -> np.ndarray:
        return np.zeros(count, numpy_dtype(dtype))

    def tensor_map(self) -> ReferenceTensorMap:
        return ReferenceTensorMap()

    def launch(self, kernel: Any, values: list, dims: Launch) -> None:
        if getattr(kernel, "binary_only", False):
            raise TVMSError(f"kernel {kernel.name} was loaded from a library, which keeps its binary, "
                            f"not its TIR: the reference launcher cannot run it")
        env = dict(zip(kernel.func.params, values))
        for attr in collect(kernel.func.body, S.AttrStmt):
            if attr.attr_key != "thread_extent":
                continue
            scope, _, axis = attr.node.thread_tag.partition(".")
            if scope not in ("blockIdx", "threadIdx") or axis not in ("x", "y", "z"):
                continue
            expected = (dims.grid if scope == "blockIdx" else dims.block)["xyz".index(axis)]
            try:
                extent = compile_expr(attr.value)(env)
            except KeyError:  # (an extent of a variable the kernel binds: checked by running it)
                continue
            if extent != expected:
                raise TVMSError(f"kernel {kernel.name}: the host launches {attr.node.thread_tag} with "
                                f"extent {expected}, the kernel runs {extent}")
        shared = 0  # (the executor sizes shared.dyn from the TIR: check that a device would get as much)
        for alloc in collect(kernel.func.body, S.AllocBuffer):
            buf = alloc.buffer
            if buf.scope == "shared.dyn":
                count = int(np.prod([compile_expr(x)(env) for x in buf.shape]))
                shared += count * element_bytes(buf.dtype)
        if dims.shared_bytes < shared:
            raise TVMSError(f"kernel {kernel.name}: the host launches it with {dims.shared_bytes} bytes of "
                            f"dynamic shared memory, the kernel allocates {shared}")
        run_prim_func(kernel.func, *values)

    def synchronize(self) -> None:
        pass

    def seconds_per_call(self, run: Callable[[], None], number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            run()
        return (time.perf_counter() - start) / number


class _Calls(threading.local):
    """What the call running on a thread holds: its stream, the workspace blocks its host
    function took."""

    def __init__(self) -> None:
        self.stream: cuda_driver.Stream | None = None
        self.workspace: list = []


class DriverLauncher:
    """Launches kernels on ``cuda(index)`` with the driver API, on the device's current stream
    when a call begins (``dev.set_raw_stream``; by default the legacy default stream, which
    orders them after the copies tensors make). The workspaces host functions allocate come
    from the module's pool of blocks on the device and go back to it when the call has queued
    its kernels: a later call on the same stream reuses them, its kernels queued after those."""

    WORKSPACE_SIZES = 16  # (calls cycling through this many workspace sizes, a VM's kernels, reuse them all)

    def __init__(self, images: dict, index: int) -> None:
        cuda_driver.check_index(index)
        self.images, self.index = images, index  # id of a kernel -> the artifact holding its binary
        self._loaded: dict[int, cuda_driver.LoadedModule] = {}
        self._kernels: dict[int, tuple] = {}  # id of a kernel -> its loaded module, its parameters' C types
        self.workspaces = BlockPool(index, keep_sizes=self.WORKSPACE_SIZES)
        self._calls = _Calls()  # (threads share a launcher: each call's stream and workspace are its thread's)

    @property
    def stream(self) -> cuda_driver.Stream:
        """The stream of the call running on this thread (between calls, the current one)."""
        return self._calls.stream or cuda_driver.current_stream(self.index)

    def begin_call(self) -> None:
        self._calls.stream = self.workspaces.begin_call()

    def buffer(self, arg: Any, where: str) -> tuple:
        if not isinstance(arg, CudaTensor):
            place = getattr(arg, "device", "cpu")
            raise TVMSError(f"{where}: the data is on {place}; a CUDA function takes tensors on the "
                            f"GPU (tvms.nd.array(x, device=tvms.cuda({self.index})))")
        if arg.device.device_id != self.index:
            raise TVMSError(f"{where}: the tensor is on {arg.device}; the call runs on cuda:{self.index}")
        return arg.ptr, arg.shape, arg.numpy_dtype

    def tensor_map(self) -> DeviceTensorMap:
        return DeviceTensorMap()

    def allocate(self, dtype: Any, count: int) -> int:
        calls = self._calls
        block = self.workspaces.take(count * numpy_dtype(dtype).itemsize, calls.stream)
        calls.workspace.append(block)  # (the call's until its kernels are queued)
        return block.ptr

    def launch(self, kernel: Any, values: list, dims: Launch) -> None:
        found = self._kernels.get(id(kernel))
        if found is None:
            artifact = self.images[id(kernel)]
            module = self._loaded.get(id(artifact))
            if module is None:
                module = self._loaded[id(artifact)] = self._load(artifact)
            types = [TensorMapParameter if E.is_tensor_map(p) else cuda_driver.c_type(str(p.dtype))
                     for p in kernel.func.params]
            found = self._kernels[id(kernel)] = (module, types)
        module, types = found
        fn = module.function(kernel.name, dims.shared_bytes)
        values = [_by_value(v, kernel.name) if isinstance(v, DeviceTensorMap) else v for v in values]
        cuda_driver.launch(fn, dims.grid, dims.block, dims.shared_bytes, self.stream, zip(types, values))

    def _load(self, artifact: Any) -> cuda_driver.LoadedModule:
        """The artifact's cubin, or where the GPU is of another architecture its PTX, which the
        driver compiles for it; else an error naming both architectures."""
        try:
            return cuda_driver.LoadedModule(self.index, artifact.binary)
        except TVMSError as err:
            if "CUDA_ERROR_NO_BINARY_FOR_GPU" not in str(err):
                raise
        ptx, why = getattr(artifact, "ptx", b""), ""
        if ptx:
            try:
                return cuda_driver.LoadedModule(self.index, ptx)
            except TVMSError as err:  # (a GPU older than the PTX's target, a driver older than NVRTC)
                why = f" (nor its PTX: {err})"
        version = cuda_driver.attribute(self.index, "compute_version")
        raise TVMSError(f"the module was built for {artifact.arch}, which cuda:{self.index} (compute {version}) "
                        f"cannot run{why}: build it for this GPU (target \"cuda\" without -arch takes the GPU's own)")

    def end_call(self) -> None:
        calls = self._calls
        for block in calls.workspace:  # (for later work of the stream its kernels are queued on)
            self.workspaces.give_back(block)
        calls.workspace.clear()
        calls.stream = None

    def synchronize(self) -> None:
        self.stream.synchronize()

    def seconds_per_call(self, run: Callable[[], None], number: int) -> float:
        return cuda_driver.time_on_stream(self.stream, run, number)


class CudaFunction:
    """One compiled PrimFunc for CUDA, callable with its arguments in parameter order."""

    def __init__(self, name: str, artifact: Any, launchers: "Launchers") -> None:
        self.name, self.artifact, self.launchers = name, artifact, launchers
        self._kernels = {k.name: k for k in artifact.kernels}
        self.func = artifact.host  # (its parameters are the function's)
        outputs = getattr(artifact, "outputs", None)  # (a loaded library keeps them)
        self.outputs = written_arguments(artifact.host, self._kernels) if outputs is None else outputs
        self._runner: HostRunner | None = None  # (the host function compiled, at the first call)

    def check(self, args: tuple) -> None:
        """``args`` (host arrays) checked against the parameters as a call checks them."""
        bind_arguments(self.func, args, ReferenceLauncher(), self.name)

    def run(self, values: list) -> None:
        """The call as the VM makes it (``Function.run``'s face): the checks are the host's."""
        self(*values)

    def __call__(self, *args: Any) -> None:
        launcher = self.launchers.launcher_for(args)
        runner = self._runner
        if runner is None:
            runner = self._runner = HostRunner(self.artifact.host, self._kernels, self.name)
        if not runner.allocates:
            runner(launcher, *args)
            return
        getattr(launcher, "begin_call", _nothing)()
        try:
            runner(launcher, *args)
        finally:
            getattr(launcher, "end_call", _nothing)()

    def time_evaluator(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                       f_preproc: Callable | None = None) -> Callable[..., TimingResult]:
        """Seconds per call, timed on the device (CUDA events) after one warm-up call."""
        if number < 1 or repeat < 1:
            raise TVMSError("time_evaluator: number and repeat must be at least 1")

        def evaluate(*args: Any) -> TimingResult:
            launcher = self.launchers.launcher_for(args)
            self(*args)  # (warm-up: loads the module, checks the arguments)
            results, count = [], number
            for _ in range(repeat):
                if f_preproc:
                    f_preproc(*args)
                while True:
                    seconds = launcher.seconds_per_call(lambda: self(*args), count)
                    if seconds * count * 1e3 >= min_repeat_ms or count >= 1 << 30:
                        break
                    count *= 2
                results.append(seconds)
            return TimingResult(tuple(results))

        return evaluate


def _nothing() -> None:
    pass


def written_arguments(host: Any, kernels: dict) -> tuple:
    """Indices of the host's buffer parameters that a kernel it launches stores into (or copies
    into with a TMA store, through a tensor map the host encoded for that buffer)."""
    data = {buf.data: k for k, p in enumerate(host.params) if (buf := host.buffer_map.get(p)) is not None}
    written = set()
    maps = {call.args[1]: data[call.args[4]] for call in collect(host.body, E.Call)  # (map -> its buffer)
            if getattr(call.op, "name", "") == "tir.tvm_call_packed" and isinstance(call.args[0], E.StringImm)
            and call.args[0].value == ENCODE_TENSOR_MAP and len(call.args) > 4 and call.args[4] in data}
    for call in collect(host.body, E.Call):
        if getattr(call.op, "name", "") != "tir.call_ffi_kernel":
            continue
        kernel = kernels.get(str(call.args[0].value))
        if kernel is None:
            continue
        stored = {s.buffer.data for s in collect(kernel.func.body, S.BufferStore)} | stored_tensor_maps(kernel.func)
        for param, arg in zip(kernel.func.params, call.args[1:]):
            if param in stored and arg in data:
                written.add(data[arg])
            elif param in stored and arg in maps:
                written.add(maps[arg])
    return tuple(sorted(written))


def stored_tensor_maps(func: Any) -> set:
    """The tensor-map parameters of ``func`` that a TMA copy to global memory goes through."""
    found = set()
    for call in collect(func.body, E.Call):
        entry = ptx.ENTRIES.get(getattr(call.op, "name", None))
        if entry is not None and entry.name.startswith(_TMA_STORES):
            found |= {v for v in collect(call, E.Var) if E.is_tensor_map(v)}
    return found


_TMA_STORES = ("cp_async_bulk_tensor_s2g", "cp_reduce_async_bulk_tensor")


class SourceModule:
    """``lib.imported_modules[0]``: the device code (``get_source()``: the CUDA C; ``"ptx"``: the
    binary when it is PTX)."""

    def __init__(self, artifacts: dict) -> None:
        self.artifacts = artifacts
        self.type_key = "cuda"

    def get_source(self, fmt: str = "cu") -> str:
        if fmt in ("", "cu", "cuda"):
            return "\n".join(dict.fromkeys(a.source for a in self.artifacts.values()))
        if fmt == "ptx":
            ptx = [a.binary.decode() for a in self.artifacts.values() if a.binary_format == "ptx"]
            if len(ptx) != len(self.artifacts):
                raise TVMSError("get_source('ptx'): the module holds cubins; build with PTX to see it")
            return "\n".join(ptx)
        raise TVMSError(f"get_source: unknown format {fmt!r}; a CUDA module shows 'cu' or 'ptx'")


class Launchers:
    """What the functions of a module launch through: ``launcher``, else (None) the driver's
    launcher of the device of the tensors passed (cuda(0) when none says), made at its first
    call and holding the module's workspaces on that device. The functions hold this, not the
    module: a dropped module (and its functions) frees its workspaces at once, not when the
    cyclic garbage collector runs."""

    def __init__(self, images: dict, launcher: Any = None) -> None:
        self.images, self.launcher = images, launcher  # id of a kernel -> the artifact holding its binary
        self._drivers: dict[int, DriverLauncher] = {}

    def launcher_for(self, args: tuple) -> Any:
        if self.launcher is not None:
            return self.launcher
        index = next((a.device.device_id for a in args if isinstance(a, CudaTensor)), 0)
        driver = self._drivers.get(index)
        if driver is None:
            dev = Device(CUDA, index)
            if not dev.exist:
                raise TVMSError(f"cannot run a CUDA function on {dev}: {missing_reason(dev)}")
            driver = self._drivers[index] = DriverLauncher(self.images, index)
        return driver


class CudaModule(Module):
    """The compiled functions of a module for CUDA, by name; ``launcher`` None launches on the
    device of the tensors passed (cuda(0) when none says), with the driver."""

    def __init__(self, artifacts: dict, target: str, launcher: Any = None) -> None:
        self.artifacts = artifacts
        self.launchers = Launchers({id(k): a for a in artifacts.values() for k in a.kernels}, launcher)
        super().__init__({k: CudaFunction(k, a, self.launchers) for k, a in artifacts.items()}, target)
        self.launcher = launcher
        self.imported_modules = [SourceModule(artifacts)]

    @property
    def device_type(self) -> int:
        """Where the functions run: the GPU, or the host with the reference launcher."""
        return CUDA if self.launcher is None else self.launcher.device_type

    def with_launcher(self, launcher: Any) -> "CudaModule":
        """The same functions launching through ``launcher`` (``ReferenceLauncher()``)."""
        return CudaModule(self.artifacts, self.target, launcher)

    def launcher_for(self, args: tuple) -> Any:
        return self.launchers.launcher_for(args)

    def time_evaluator(self, name: str, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, f_preproc: Callable | None = None, **_ignored: Any) -> Any:
        if dev is not None and getattr(dev, "device_type", None) == CPU and self.launcher is None:
            raise TVMSError(f"time_evaluator: this module runs on a CUDA GPU, not on {dev}")
        return self.get_function(name).time_evaluator(number, repeat, min_repeat_ms, f_preproc)

    def get_source(self, fmt: str = "cu") -> str:
        return self.imported_modules[0].get_source(fmt)

    def export_library(self, path: str) -> None:
        """Write the module to ``path`` (its host functions as data, its binary embedded);
        ``tvms.runtime.load_module(path)`` loads it again."""
        from .export import export_library

        export_library(self, path)


def load_cuda(artifacts: dict, target: str) -> CudaModule:
    """The CudaModule of the cuda code generator's ``artifacts`` (by function name): the link
    step of ``tvms.build``, which reaches it by name (``runtime.module.load_cuda``). Nothing
    touches the GPU until a function is called."""
    return CudaModule(artifacts, target)


register_func("runtime.module.load_cuda", load_cuda, internal=True)

__all__ = ["CudaFunction", "CudaModule", "DriverLauncher", "Launchers", "ReferenceLauncher", "SourceModule",
           "load_cuda"]
