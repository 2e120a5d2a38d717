"""Compiled modules: what ``tvms.build(mod_or_func, target="llvm")`` returns, and calling it.

>>> lib = tvms.build(matmul, target="llvm")
>>> lib["main"](a, b, c)          # numpy arrays (or tensors holding one in ``.array``), in place
>>> lib.time_evaluator("main", number=10)(a, b, c).mean

Each call checks the arguments (count, dtype, shape, contiguity, and that a buffer the function
writes shares no memory with another argument) and raises a TVMSError instead of letting native
code touch the wrong memory. The native function is called through ctypes, which releases the
GIL for the duration of the call.
"""
from __future__ import annotations

import ctypes
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tvms.ir import expr as E
from tvms.ir.analysis import written_params
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.registry import register_func
from .llvm_jit import load_kernel
from .reference import compile_expr
from .tir_values import numpy_dtype

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _as_array(value: Any) -> Any:
    """The numpy array behind an argument: the array itself, or a tensor's ``.array``."""
    if isinstance(value, np.ndarray):
        return value
    inner = getattr(value, "array", None)
    return inner if isinstance(inner, np.ndarray) else value


class Function:
    """One compiled PrimFunc, callable with its arguments in parameter order.

    What a call checks is worked out once per parameter here (``_BufferCheck``), and where each
    slot's value comes from (``_slot_filler``), so a call is a few attribute reads per argument.
    ``run`` skips the checks for callers that have proven the arguments fit (the VM)."""

    def __init__(self, name: str, compiled: Any) -> None:  # a JitKernel, or a LoadedFunction of a library
        self.name = name
        self.compiled = compiled
        self._entry = _ENTRY_TYPE(compiled.address)
        func = compiled.func
        self._params = [(p, func.buffer_map.get(p)) for p in func.params]
        self._checks = [None if b is None else _BufferCheck(f"{name} argument {k} ({b.name})", b)
                        for k, (_, b) in enumerate(self._params)]
        self._slots = _slot_filler(name, compiled.slots, self._params)
        # the buffers the kernel writes, each with the other buffers it must not overlap: the
        # kernel is compiled ``noalias``, so a call where they share memory computes anything
        # (a loaded library lists them; its signature has no body)
        written = getattr(compiled, "outputs", None)
        written = written_params(func) if written is None else written
        buffers = [k for k, (_, b) in enumerate(self._params) if b is not None]
        self._disjoint = [(k, [j for j in buffers if j != k]) for k in written if len(buffers) > 1]
        address = compiled.num_threads_address
        threads = ctypes.c_int32.from_address(address) if address else None
        # run(values): the call with ``values`` already known to fit the parameters (C-contiguous
        # arrays of the declared dtypes and shapes, Python numbers for scalars): no checks at all
        self.run = _runner(self._slots, self._entry, threads, compiled.target)

    def __call__(self, *args: Any) -> None:
        self.run(self.checked(args))

    def checked(self, args: tuple) -> list:
        """``args`` checked against the parameters (count, device, dtype, shape, contiguity),
        as the values ``run`` takes: numpy arrays for buffers, Python numbers for scalars."""
        if len(args) != len(self._params):
            names = ", ".join(p.name if b is None else b.name for p, b in self._params)
            raise TVMSError(f"{self.name} takes {len(self._params)} arguments ({names}), got {len(args)}")
        sizes: dict = {}
        deferred: list = []
        values = []
        for k, (check, arg) in enumerate(zip(self._checks, args)):
            if check is None:
                param = self._params[k][0]
                value = self._scalar(param, arg, k)
                bound = sizes.setdefault(param, value)
                if bound != value:  # (a size an earlier buffer's shape stated: the kernel reads one)
                    raise TVMSError(f"{self.name} argument {k} ({param.name}): {value} is not the extent "
                                    f"{bound} the arrays before it give")
                values.append(value)
            else:
                values.append(check(arg, sizes, deferred))
        for declared, actual, where in deferred:  # (sizes stated by expressions: all bound now)
            expected = compile_expr(declared)(sizes)
            if expected != actual:
                raise TVMSError(f"{where}: expected extent {expected}, got {actual}")
        for k, others in self._disjoint:
            owner = _owner(values[k])
            for j in others:
                if (owner is None or owner is _owner(values[j])) \
                        and np.may_share_memory(values[k], values[j]):  # (exact: both are contiguous)
                    raise TVMSError(f"{self.name} argument {k} ({self._params[k][1].name}) shares memory "
                                    f"with argument {j} ({self._params[j][1].name}); the function "
                                    f"writes it and assumes its buffers do not overlap (pass a copy)")
        return values

    def pack(self, args: tuple) -> ctypes.Array:
        """Check ``args`` against the parameters and fill the slot array the entry reads."""
        return self._slots(self.checked(args))


    def _scalar(self, param: E.Var, value: Any, k: int) -> Any:
        value = _as_array(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        ok = isinstance(value, (int, float, bool, np.number, np.bool_))
        if not ok or (param.dtype.is_integer and isinstance(value, (float, np.floating))):
            raise TVMSError(f"{self.name} argument {k} ({param.name}): expected a {param.dtype} "
                            f"scalar, got {type(value).__name__}")
        return value

    def time_evaluator(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                       f_preproc: Callable | None = None) -> "Evaluator":
        return Evaluator(self, number, repeat, min_repeat_ms, f_preproc)


def _owner(arr: np.ndarray) -> np.ndarray | None:
    """The array that owns ``arr``'s memory (itself, or the array it is a view of), or None when
    another object does (bytes, a mapped file). Arrays with different owners never overlap."""
    base = arr.base
    if base is None:
        return arr
    while isinstance(base, np.ndarray):
        if base.base is None:
            return base
        base = base.base
    return None


def _on_cpu(device: Any) -> bool:
    """Whether ``device`` (a tvms device, a numpy array's ``"cpu"``, or None) is the host CPU."""
    if device is None or device == "cpu":
        return True
    return getattr(device, "device_type", None) == 1  # DLPack's kDLCPU


class _BufferCheck:
    """The checks of one buffer parameter, worked out once: its dtype, rank, and per axis a
    constant extent, a symbolic size (bound by its first use, compared after), or an expression
    (compared once every size is bound)."""

    def __init__(self, where: str, buf: Any) -> None:
        self.where, self.buf = where, buf
        self.dtype = numpy_dtype(buf.dtype)
        self.ndim = len(buf.array_shape)
        self.axes = tuple((axis, d.value if isinstance(d, E.IntImm) else d) for axis, d in enumerate(buf.array_shape))
        # sizes only strides and offsets state (an expression of a later extent may use them)
        self.stride_vars = tuple((axis, d) for axis, d in enumerate(buf.strides) if isinstance(d, E.Var))
        self.offset_var = buf.elem_offset if isinstance(buf.elem_offset, E.Var) else None

    def __call__(self, arg: Any, sizes: dict, deferred: list) -> np.ndarray:
        where = self.where
        if type(arg) is np.ndarray:
            arr = arg
        else:
            arr = _as_array(arg)
            if not _on_cpu(getattr(arg, "device", None)):
                raise TVMSError(f"{where}: the tensor is on {arg.device}; this module runs on the CPU")
            if not isinstance(arr, np.ndarray):
                raise TVMSError(f"{where}: expected an array, got {type(arg).__name__}")
        if arr.dtype != self.dtype:
            raise TVMSError(f"{where}: expected dtype {self.buf.dtype}, got {arr.dtype}")
        shape = arr.shape
        if len(shape) != self.ndim:
            raise TVMSError(f"{where}: expected {self.ndim} dimensions, got shape {shape}")
        flags = arr.flags
        if not flags.c_contiguous:
            raise TVMSError(f"{where}: the array must be C-contiguous (use np.ascontiguousarray)")
        if not flags.writeable:
            raise TVMSError(f"{where}: the array is read-only")
        for axis, declared in self.axes:
            actual = shape[axis]
            if type(declared) is int:
                expected = declared
            elif isinstance(declared, E.Var):
                expected = sizes.setdefault(declared, actual)
            else:
                deferred.append((declared, actual, f"{where}: dimension {axis}"))
                continue
            if expected != actual:
                raise TVMSError(f"{where}: dimension {axis}: expected extent {expected}, got {actual}")
        for axis, var in self.stride_vars:  # (in elements: a vector's lanes are one element)
            sizes.setdefault(var, _contiguous_stride(arr, axis, len(self.buf.shape)))
        if self.offset_var is not None:
            sizes.setdefault(self.offset_var, 0)
        return arr


_byte_at = ctypes.c_byte.from_buffer


def _data_address(arr: np.ndarray) -> int:
    """Where ``arr``'s data starts: through the buffer protocol, much cheaper than
    ``arr.ctypes.data``, which serves read-only and empty arrays (the protocol refuses them)."""
    try:
        return ctypes.addressof(_byte_at(arr))
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


def _runner(fill: Callable, entry: Callable, threads: Any, target: Any) -> Callable[[list], None]:
    """The unchecked call: fill the slots, set the thread count if the kernel has parallel
    loops (TVM_NUM_THREADS may change between calls), enter the native code."""
    addressof = ctypes.addressof
    # (the slot array is held in a local: only its address goes to the entry, and a temporary
    # would be freed before the native code reads it)
    if threads is None:
        def run(values: list) -> None:
            slots = fill(values)
            entry(addressof(slots))
    else:
        def run(values: list) -> None:
            slots = fill(values)
            threads.value = target.threads
            entry(addressof(slots))
    return run


def _slot_filler(name: str, slots: tuple, params: list) -> Callable[[list], ctypes.Array]:
    """A function of the checked values that makes the slot array: one Python expression per
    slot (compiled once, so a call evaluates them in a single frame)."""
    sources = [_slot_source(var, params) for var in slots]
    missing = [var.name for var, source in zip(slots, sources) if source is None]
    if missing:
        def unbound(values: list) -> ctypes.Array:
            raise TVMSError(f"{name}: the kernel reads {', '.join(missing)}, which no parameter defines")
        return unbound
    namespace = {"Slots": ctypes.c_uint64 * max(1, len(slots)), "address": _data_address,
                 "float_bits": _float_bits, "stride": _contiguous_stride, "M": _MASK64}
    return eval(f"lambda values: Slots({', '.join(sources)})", namespace)  # (sources: ours only)


def _slot_source(var: E.Var, params: list) -> str | None:
    """How one slot's 64 bits come from the checked values, as an expression of ``values``: a
    buffer's data address, a parameter's scalar, or a size read off the first buffer that states
    it (its extent, its contiguous stride, or 0 for an offset); None if nothing states it."""
    for k, (param, buf) in enumerate(params):
        if buf is None and param is var:
            return f"float_bits(values[{k}])" if var.dtype.is_float else f"int(values[{k}]) & M"
        if buf is not None and buf.data is var:
            return f"address(values[{k}])"
    for k, (_, buf) in enumerate(params):
        if buf is None:
            continue
        for axis, d in enumerate(buf.shape):
            if d is var:
                return f"values[{k}].shape[{axis}] & M"
        for axis, d in enumerate(buf.strides):
            if d is var:
                return f"stride(values[{k}], {axis}, {len(buf.shape)})"
        if buf.elem_offset is var:
            return "0"
    return None


def _contiguous_stride(arr: np.ndarray, axis: int, rank: int) -> int:
    """The stride of ``axis`` of a C-contiguous array holding a buffer of ``rank`` dimensions, in
    the buffer's elements (an array of vectors has one more, last dimension: its lanes)."""
    return int(np.prod(arr.shape[axis + 1:rank], dtype=np.int64)) & _MASK64


_MASK64 = 0xFFFFFFFFFFFFFFFF


def _float_bits(value: Any) -> int:
    """A number as the 64 bits of a double (how a float scalar travels in its slot)."""
    return struct.unpack("<Q", struct.pack("<d", float(value)))[0]


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call: one entry per repeat, each the mean of ``number`` calls."""

    results: tuple

    @property
    def mean(self) -> float:
        return float(np.mean(self.results))

    @property
    def median(self) -> float:
        return float(np.median(self.results))

    @property
    def min(self) -> float:
        return float(np.min(self.results))

    @property
    def max(self) -> float:
        return float(np.max(self.results))

    @property
    def std(self) -> float:
        return float(np.std(self.results))

    def __str__(self) -> str:
        ms = [r * 1e3 for r in self.results]
        return (f"Execution time summary:\n mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)\n"
                f" {np.mean(ms):9.4f}   {np.median(ms):9.4f}   {np.max(ms):9.4f}   {np.min(ms):9.4f}   "
                f"{np.std(ms):9.4f}")


class Evaluator:
    """``lib.time_evaluator(name, ...)``: runs the function ``number`` times per repeat after one
    warm-up call; the arguments are checked and packed once, outside the timed loop.
    ``f_preproc(*args)``, when given, runs before each repeat, untimed (TVM's: a cache flush)."""

    def __init__(self, function: Function, number: int, repeat: int, min_repeat_ms: float,
                 f_preproc: Callable | None = None) -> None:
        if number < 1 or repeat < 1:
            raise TVMSError("time_evaluator: number and repeat must be at least 1")
        self.function, self.number, self.repeat, self.min_repeat_ms = function, number, repeat, min_repeat_ms
        self.f_preproc = f_preproc

    def __call__(self, *args: Any) -> TimingResult:
        fn = self.function
        slots = fn.pack(args)
        fn(*args)  # warm up (and set the thread count)
        entry, address = fn._entry, ctypes.addressof(slots)
        results = []
        number = self.number
        for _ in range(self.repeat):
            if self.f_preproc:
                self.f_preproc(*args)
            while True:
                start = time.perf_counter()
                for _ in range(number):
                    entry(address)
                elapsed = time.perf_counter() - start
                if elapsed * 1e3 >= self.min_repeat_ms or number >= 1 << 30:
                    break
                number *= 2
            results.append(elapsed / number)
        return TimingResult(tuple(results))


class Module:
    """The compiled functions of a module, by name."""

    device_type = 1  # where the functions run (DLPack's kDLCPU; a CUDA module's is kDLCUDA)

    def __init__(self, functions: dict, target: str) -> None:
        self.functions = functions
        self.target = target

    def __getitem__(self, name: str) -> Function:
        return self.get_function(name)

    def get_function(self, name: str) -> Function:
        fn = self.functions.get(name)
        if fn is None:
            raise TVMSError(f"the module has no function {name!r}; it has {', '.join(self.functions)}")
        return fn

    @property
    def entry_name(self) -> str:
        if "main" in self.functions or len(self.functions) != 1:
            return "main"
        return next(iter(self.functions))

    def __call__(self, *args: Any) -> None:
        self.get_function(self.entry_name)(*args)

    def time_evaluator(self, name: str, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, f_preproc: Callable | None = None, **_ignored: Any) -> Evaluator:
        if not _on_cpu(dev):
            raise TVMSError(f"time_evaluator: this module runs on the CPU, not on {dev}")
        return self.get_function(name).time_evaluator(number, repeat, min_repeat_ms, f_preproc)

    def get_source(self, fmt: str = "ll") -> str:
        """The LLVM IR (``"ll"``, as generated; ``"opt"``, optimized) or assembly (``"asm"``)."""
        parts = []
        for fn in self.functions.values():
            c = fn.compiled
            parts.append({"ll": c.llvm_ir, "opt": c.optimized_ir}.get(fmt) or c.assembly())
        return "\n".join(parts)

    def export_library(self, path: str) -> None:
        """Write the compiled code to ``path`` as a self-contained shared library (atomically);
        ``tvms.runtime.load_module(path)`` loads it again."""
        from .export import export_library

        export_library(self, path)

    def __repr__(self) -> str:
        return f"Module({', '.join(self.functions)}, target={self.target!r})"


def load_kernels(artifacts: dict, target: str) -> Module:
    """The Module calling the code generator's ``artifacts`` (by function name): the link step
    of ``tvms.build``, which reaches it by name (``runtime.module.load_llvm``)."""
    return Module({key: Function(key, load_kernel(artifact)) for key, artifact in artifacts.items()}, target)


register_func("runtime.module.load_llvm", load_kernels, internal=True)
