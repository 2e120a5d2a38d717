"""Compiled modules: ``tvms.build(mod_or_func, target="llvm")`` and calling the result.

>>> lib = tvms.build(matmul, target="llvm")
>>> lib["main"](a, b, c)          # numpy arrays (or tensors holding one in ``.array``), in place
>>> lib.time_evaluator("main", number=10)(a, b, c).mean

Each call checks the arguments (count, dtype, shape, contiguity) and raises a TVMSError instead
of letting native code touch the wrong memory. The native function is called through ctypes,
which releases the GIL for the duration of the call.
"""
from __future__ import annotations

import ctypes
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvms.ir import expr as E
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.module import IRModule
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
    """One compiled PrimFunc, callable with its arguments in parameter order."""

    def __init__(self, name: str, compiled: Any) -> None:  # a codegen CompiledFunction
        self.name = name
        self.compiled = compiled
        self._entry = _ENTRY_TYPE(compiled.address)
        func = compiled.func
        self._params = [(p, func.buffer_map.get(p)) for p in func.params]
        self._dtypes = [None if b is None else numpy_dtype(b.dtype) for _, b in self._params]

    def __call__(self, *args: Any) -> None:
        slots = self.pack(args)
        if self.compiled.num_threads_address:
            ctypes.c_int32.from_address(self.compiled.num_threads_address).value = self.compiled.target.threads
        self._entry(ctypes.addressof(slots))

    def pack(self, args: tuple) -> ctypes.Array:
        """Check ``args`` against the parameters and fill the slot array the entry reads."""
        if len(args) != len(self._params):
            names = ", ".join(p.name if b is None else b.name for p, b in self._params)
            raise TVMSError(f"{self.name} takes {len(self._params)} arguments ({names}), got {len(args)}")
        env: dict = {}
        checks = []
        for k, ((param, buf), arg, dtype) in enumerate(zip(self._params, args, self._dtypes)):
            if buf is None:
                env[param] = self._scalar(param, arg, k)
                continue
            arr = _as_array(arg)
            where = f"{self.name} argument {k} ({buf.name})"
            if not _on_cpu(getattr(arg, "device", None)):
                raise TVMSError(f"{where}: the tensor is on {arg.device}; this module runs on the CPU")
            if not isinstance(arr, np.ndarray):
                raise TVMSError(f"{where}: expected an array, got {type(arg).__name__}")
            if arr.dtype != dtype:
                raise TVMSError(f"{where}: expected dtype {buf.dtype}, got {arr.dtype}")
            if arr.ndim != len(buf.shape):
                raise TVMSError(f"{where}: expected {len(buf.shape)} dimensions, got shape {arr.shape}")
            if not arr.flags.c_contiguous:
                raise TVMSError(f"{where}: the array must be C-contiguous (use np.ascontiguousarray)")
            if not arr.flags.writeable:
                raise TVMSError(f"{where}: the array is read-only")
            env[buf.data] = arr.ctypes.data
            for axis, (declared, actual) in enumerate(zip(buf.shape, arr.shape)):
                if isinstance(declared, E.Var) and declared not in env:
                    env[declared] = actual
                else:
                    checks.append((declared, actual, f"{where}: dimension {axis}"))
            if buf.strides:
                strides = np.cumprod((1,) + arr.shape[:0:-1])[::-1] if arr.ndim else ()
                for declared, actual in zip(buf.strides, strides):
                    if isinstance(declared, E.Var) and declared not in env:
                        env[declared] = int(actual)
            if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in env:
                env[buf.elem_offset] = 0
        for declared, actual, where in checks:
            expected = declared.value if isinstance(declared, E.IntImm) else compile_expr(declared)(env)
            if expected != actual:
                raise TVMSError(f"{where}: expected extent {expected}, got {actual}")
        slots = (ctypes.c_uint64 * max(1, len(self.compiled.slots)))()
        for k, var in enumerate(self.compiled.slots):
            slots[k] = _slot_bits(env[var], var)
        return slots

    def _scalar(self, param: E.Var, value: Any, k: int) -> Any:
        value = _as_array(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        ok = isinstance(value, (int, float, bool, np.number, np.bool_))
        if not ok or (param.dtype.is_integer and isinstance(value, (float, np.floating))):
            raise TVMSError(f"{self.name} argument {k} ({param.name}): expected a {param.dtype} "
                            f"scalar, got {type(value).__name__}")
        return value

    def time_evaluator(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0) -> "Evaluator":
        return Evaluator(self, number, repeat, min_repeat_ms)


def _on_cpu(device: Any) -> bool:
    """Whether ``device`` (a tvms device, a numpy array's ``"cpu"``, or None) is the host CPU."""
    if device is None or device == "cpu":
        return True
    return getattr(device, "device_type", None) == 1  # DLPack's kDLCPU


def _slot_bits(value: Any, var: E.Var) -> int:
    """A value as the 64 bits of its slot (floats as doubles, integers two's complement)."""
    if var.dtype.is_float:
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(value) & 0xFFFFFFFFFFFFFFFF


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
    warm-up call; the arguments are checked and packed once, outside the timed loop."""

    def __init__(self, function: Function, number: int, repeat: int, min_repeat_ms: float) -> None:
        if number < 1 or repeat < 1:
            raise TVMSError("time_evaluator: number and repeat must be at least 1")
        self.function, self.number, self.repeat, self.min_repeat_ms = function, number, repeat, min_repeat_ms

    def __call__(self, *args: Any) -> TimingResult:
        fn = self.function
        slots = fn.pack(args)
        fn(*args)  # warm up (and set the thread count)
        entry, address = fn._entry, ctypes.addressof(slots)
        results = []
        number = self.number
        for _ in range(self.repeat):
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
                       min_repeat_ms: float = 0, **_ignored: Any) -> Evaluator:
        if not _on_cpu(dev):
            raise TVMSError(f"time_evaluator: this module runs on the CPU, not on {dev}")
        return self.get_function(name).time_evaluator(number, repeat, min_repeat_ms)

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


def build(mod_or_func: Any, target: Any = None, name: str = "main") -> Module:
    """Compile the PrimFuncs of an IRModule (or one PrimFunc, named ``name``) for the CPU."""
    if isinstance(mod_or_func, PrimFunc):
        funcs = {name: mod_or_func}
    elif isinstance(mod_or_func, IRModule):
        funcs = {key: f for key, f in ((k, mod_or_func[k]) for k in mod_or_func) if isinstance(f, PrimFunc)}
        others = [k for k in mod_or_func if k not in funcs]
        if others:
            raise TVMSError(f"build compiles TensorIR functions; {', '.join(others)} are not "
                            f"(compile a module with Relax functions with tvms.compile)")
        if not funcs:
            raise TVMSError("build: the module has no functions")
    else:
        raise TVMSError(f"build takes an IRModule or a PrimFunc, got {type(mod_or_func).__name__}")
    from tvms.lowering.codegen.compile import compile_prim_func  # llvmlite only when building

    from .target import resolve_target  # (None: the target of `with Target(...)`, else llvm)

    text = str(resolve_target(target))
    compiled = {key: Function(key, compile_prim_func(f, text, _symbol(key))) for key, f in funcs.items()}
    return Module(compiled, text)


def _symbol(name: str) -> str:
    """An LLVM symbol for a function name (it is the name, prefixed to avoid C library names)."""
    return "tvms_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)
