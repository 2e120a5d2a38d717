"""The Relax VM on the CPU: runs the ``Executable`` that ``tvms.compile`` / ``tvms.relax.build``
(``lowering/build.py``) make.

>>> ex = tvms.compile(mod, target="llvm")          # zero pipeline if needed, then one kernel build
>>> vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
>>> out = vm["main"](x, w)                         # tvms Tensors or numpy arrays in, Tensors out

The VM runs the lowered Relax functions with the reference executor's semantics (it shares its
interpreter: struct info checks, symbolic sizes bound from the arguments, tuples, if/else,
match_cast, closures), but ``R.call_tir`` and direct PrimFunc calls run the LLVM-compiled kernels,
and the outputs of destination-passing calls and ``R.builtin.alloc_tensor`` come from a buffer
pool planned per ``SeqExpr`` (``vm_memory.py``). Each function is prepared once into a flat list
of steps (``vm_fast_path.py``): a call checks its arguments once and then runs kernels without
walking the IR; what the steps do not cover falls back to the interpreter. Packed functions
(``R.call_dps_packed``, ``R.call_packed``) receive numpy arrays, as under the reference
executor; they support DLPack (``torch.from_dlpack(x)``).

A VirtualMachine, like TVM's, is for one thread at a time; an Executable may be shared by many
VMs.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from tvms.ir import relax as rx
from tvms.ir.deep import deep_recursion
from tvms.ir.errors import TVMSError
from tvms.ir.expr import Op
from tvms.ir.function import PrimFunc
from tvms.ir.module import GlobalVar, IRModule
from tvms.ir.registry import register_func

from .device import cpu
from .module import Module, TimingResult, _data_address, _on_cpu
from .numpy_ops import Shape
from .reference_relax import _Interpreter, _is_shape_param
from .tensor import ALIGNMENT, Tensor, tensor
from .tir_values import numpy_dtype
from .vm_fast_path import FastFunction
from .vm_memory import ALLOC_TENSOR, BufferPool, SeqPlan, aligned_empty, plan_seq

class Executable:
    """A compiled module: the lowered Relax functions (``mod``, its PrimFuncs kept) and one
    ``Module`` holding every PrimFunc compiled (``kernels()``)."""

    def __init__(self, mod: IRModule, kernels: Module) -> None:
        missing = [k for k in mod if isinstance(mod[k], PrimFunc) and k not in kernels.functions]
        if missing:
            raise TVMSError(f"the kernels module lacks the PrimFuncs {', '.join(missing)}")
        self.mod = mod
        self._kernels = kernels

    @property
    def function_names(self) -> list[str]:
        return [k for k in self.mod if isinstance(self.mod[k], rx.Function)]

    def relax_text(self) -> str:
        """The lowered module as ``@I.ir_module`` text. The PrimFuncs are kept, so the text
        parses back on its own (their compiled code is in ``kernels()``)."""
        return self.mod.script()

    def kernels(self) -> Module:
        return self._kernels

    def export_library(self, path: str) -> None:
        """Write the kernels and the Relax text as one shared library (``runtime/export.py``);
        ``tvms.runtime.load_module(path)`` gives the Executable back."""
        from .export import export_library  # (it needs a C compiler: imported when used)

        export_library(self._kernels, path, self.relax_text())

    @classmethod
    def from_parts(cls, relax_text: str, kernels: Module) -> "Executable":
        """The executable that ``relax_text()`` and ``kernels()`` describe (for reloading)."""
        from tvms.script import from_source  # (the script layer is only needed here)

        mod = from_source(relax_text)
        if not isinstance(mod, IRModule):
            raise TVMSError("Executable.from_parts: the text is not an @I.ir_module")
        return cls(mod, kernels)

    def __repr__(self) -> str:
        return f"Executable({', '.join(self.function_names)}; kernels {', '.join(self._kernels.functions)})"


register_func("runtime.vm.executable", Executable)  # (the link step of tvms.compile)


class _VMInterpreter(_Interpreter):
    """The reference interpreter with compiled kernels and planned output buffers. A Relax
    function called without captured variables runs its prepared steps (``vm_fast_path.py``);
    what they leave to the interpreter comes back here."""

    def __init__(self, ex: Executable) -> None:
        super().__init__(ex.mod)
        self.kernels = ex.kernels()
        self.pool = BufferPool()
        self.plans: dict[int, SeqPlan] = {}
        self.pooled_calls: set = set()
        self.unpooled = 0  # outputs allocated outside the pool (they outlive their function)
        self.fast: dict[int, tuple] = {}  # id of a Relax function -> (it, its FastFunction)

    def plan(self, seq: rx.SeqExpr) -> SeqPlan:
        plan = self.plans.get(id(seq))
        if plan is None:
            plan = self.plans[id(seq)] = plan_seq(seq, self.is_prim_func)
            self.pooled_calls |= plan.pooled_calls
        return plan

    def is_prim_func(self, op: Any) -> bool:
        return isinstance(op, GlobalVar) and op.name_hint in self.mod and isinstance(self.mod[op], PrimFunc)

    def call_function(self, func: rx.Function, args: list, captured: dict | None = None) -> Any:
        if captured or not isinstance(func.body, rx.SeqExpr):
            return self.call_function_slow(func, args, captured)
        entry = self.fast.get(id(func))
        if entry is None or entry[0] is not func:
            entry = self.fast[id(func)] = (func, FastFunction(self, func))
        return entry[1](args)

    def call_function_slow(self, func: rx.Function, args: list, captured: dict | None = None) -> Any:
        """The interpreter's own walk of ``func`` (for calls the prepared steps do not take)."""
        with np.errstate(all="ignore"):  # (numpy operators: inf and nan as Relax computes them)
            return super().call_function(func, args, captured)

    def x_SeqExpr(self, e: rx.SeqExpr, env: dict) -> Any:
        plan = self.plan(e)
        for i, b in enumerate(plan.bindings):
            self.bind(b, env)
            for var in plan.release_after.get(i, ()):
                self.pool.release(env[var])
        return self.eval(e.body, env)

    def x_Call(self, e: rx.Call, env: dict) -> Any:
        if isinstance(e.op, Op) and e.op.name == ALLOC_TENSOR:  # pooled as planned, else aligned
            shape, dtype = self.eval(e.args[0], env), self.eval(e.args[1], env)
            return self.allocate(e, tuple(int(d) for d in shape), numpy_dtype(dtype))
        return super().x_Call(e, env)

    def allocate(self, e: rx.Call, shape: tuple, dtype: np.dtype) -> np.ndarray:
        if id(e) in self.pooled_calls:
            return self.pool.take(shape, dtype)
        self.unpooled += 1
        return aligned_empty(shape, dtype)  # (aligned: it may become a result Tensor)

    def run_prim(self, gv: Any, func: PrimFunc, args: list) -> None:
        name = gv.name_hint if isinstance(gv, GlobalVar) else str(gv)
        kernel = self.kernels.get_function(name)
        # constants may be read-only and numpy results 0-d scalars: kernels take writable arrays
        kernel(*(np.require(a, requirements=("C", "W")) if isinstance(a, (np.ndarray, np.generic))
                 else a for a in args))


class VirtualMachine:
    """Runs the Relax functions of an ``Executable``: ``vm["main"](*args)``.

    One VM keeps one buffer pool, so intermediate buffers are reused within a call and across
    calls; ``memory_stats()`` says how many were allocated."""

    def __init__(self, ex: Executable, device: Any = None, memory_cfg: Any = None) -> None:
        if not isinstance(ex, Executable):
            raise TVMSError(f"VirtualMachine takes an Executable (from tvms.compile), "
                            f"not {type(ex).__name__}")
        for dev in device if isinstance(device, (list, tuple)) else [device]:
            if not _on_cpu(dev):
                raise TVMSError(f"VirtualMachine: this executable runs on the CPU, not on {dev}")
        self.executable = ex
        self.device = device
        self._interp = _VMInterpreter(ex)

    @property
    def module(self) -> "VirtualMachine":
        """TVM reaches ``time_evaluator`` through ``vm.module``; here the VM is its own module."""
        return self

    def __getitem__(self, name: str) -> Callable:
        return self.get_function(name)

    def get_function(self, name: str) -> Callable:
        if name not in self.executable.function_names:
            raise TVMSError(f"the executable has no Relax function {name!r}; it has "
                            f"{', '.join(self.executable.function_names) or 'none'}")

        def call(*args: Any) -> Any:
            return self.invoke(name, *args)

        call.__name__ = name
        return call

    @deep_recursion(too_deep="recursion too deep: a Relax function calls itself (directly or "
                             "through others) more deeply than the VM follows")
    def invoke(self, name: str, *args: Any) -> Any:
        func = self.executable.mod[name]
        if len(args) != len(func.params):
            raise TVMSError(f"{name} takes {len(func.params)} arguments "
                            f"({', '.join(p.name for p in func.params)}), got {len(args)}")
        values = [a.array if type(a) is Tensor else _argument(a, p, name) for a, p in zip(args, func.params)]
        return _result(self._interp.call_function(func, values))

    def memory_stats(self) -> dict:
        """``pooled``: distinct intermediate buffers the pool allocated; ``reused``: requests a
        released buffer served; ``unpooled``: outputs allocated for values that outlive a call."""
        pool = self._interp.pool
        return {"pooled": pool.fresh, "reused": pool.reused, "unpooled": self._interp.unpooled}

    def time_evaluator(self, name: str, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, **_ignored: Any) -> Callable[..., TimingResult]:
        """A function that runs ``name`` ``number`` times per repeat (after one warm-up call)
        and returns the seconds per call."""
        if not _on_cpu(dev):
            raise TVMSError(f"time_evaluator: this executable runs on the CPU, not on {dev}")
        if number < 1 or repeat < 1:
            raise TVMSError("time_evaluator: number and repeat must be at least 1")
        fn = self.get_function(name)

        def evaluate(*args: Any) -> TimingResult:
            fn(*args)
            results = []
            for _ in range(repeat):
                count, start = 0, time.perf_counter()
                while count < number or (time.perf_counter() - start) * 1e3 < min_repeat_ms:
                    fn(*args)
                    count += 1
                results.append((time.perf_counter() - start) / count)
            return TimingResult(tuple(results))

        return evaluate


def _argument(value: Any, param: rx.Var | None, fname: str) -> Any:
    """A call argument as the interpreter's value: tensors as numpy arrays, shapes as Shape."""
    if isinstance(value, Tensor):
        return value.array
    if isinstance(value, np.ndarray):
        return np.require(value, requirements="C")  # (ascontiguousarray would make 0-d 1-d)
    if isinstance(value, (tuple, list)):
        if param is not None and _is_shape_param(param):
            return Shape(int(v) for v in value)
        return tuple(_argument(v, None, fname) for v in value)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return value
    name = param.name if param is not None else "a tuple field"
    raise TVMSError(f"{fname} argument {name!r}: expected a tensor, a numpy array, a tuple or a "
                    f"number, got {type(value).__name__}")


def _result(value: Any) -> Any:
    """Interpreter values as the VM returns them: arrays as Tensors (sharing memory when the
    array is fit to be one), tuples of results, shapes and numbers as they are."""
    if isinstance(value, Shape):
        return value
    if isinstance(value, tuple):
        return tuple(_result(v) for v in value)
    if type(value) is np.ndarray:
        flags = value.flags
        if flags.c_contiguous and flags.writeable and (not value.size or _data_address(value) % ALIGNMENT == 0):
            return _tensor_of_fit_array(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return tensor(np.asarray(value))
    return value


_CPU = cpu(0)


def _tensor_of_fit_array(arr: np.ndarray) -> Tensor:
    """A Tensor sharing ``arr``, which ``_result`` has just found to meet the Tensor
    invariants (C-contiguous, writable, aligned): the constructor's checks are not run again."""
    result = Tensor.__new__(Tensor)
    result.array, result.device = arr, _CPU
    return result


__all__ = ["Executable", "VirtualMachine"]
