"""The Relax VM on the CPU: ``tvms.compile`` / ``tvms.relax.build`` and ``VirtualMachine``.

>>> ex = tvms.compile(mod, target="llvm")          # zero pipeline if needed, then one kernel build
>>> vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
>>> out = vm["main"](x, w)                         # tvms Tensors or numpy arrays in, Tensors out

An ``Executable`` holds a ``VMProgram`` (``ir/vm_program.py``: registers, calls of kernels,
packed functions and builtins, ``If``/``Goto``/``Ret``), compiled from the lowered Relax
functions by ``lowering/relax/vm_codegen.py``, and the ``Module`` of compiled kernels. The VM
interprets that program and nothing else: each function's instructions become closures
(``vm_builtins.py``) the first time a VM runs it, and a call runs them over a list of registers
and a heap of symbolic sizes. Outputs the compiler planned so come from the VM's buffer pool
(``vm_memory.py``). Packed functions (``R.call_dps_packed``, ``R.call_packed``) receive numpy
arrays, as under the reference executor; they support DLPack (``torch.from_dlpack(x)``).

``compile`` caches its result by content (``compile_key``), and the kernels' object code is
also cached on disk (``lowering/codegen/object_cache.py``). A VirtualMachine, like TVM's, is for
one thread at a time; an Executable may be shared by many VMs.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from tvms.ir import relax as rx
from tvms.ir.deep import deep_recursion
from tvms.ir.errors import TVMSError
from tvms.ir.expr import Op
from tvms.ir.function import PrimFunc
from tvms.ir.node import FrozenDict
from tvms.ir.module import IRModule
from tvms.ir.visitor import walk
from tvms.ir.vm_program import Call, Goto, If, Ret, VMFunction, VMProgram

from .device import cpu
from .module import Module, TimingResult, _data_address, _on_cpu, build
from .numpy_ops import Shape
from .target import resolve_target
from .tensor import ALIGNMENT, Tensor, tensor
from .vm_builtins import step_of
from .vm_memory import BufferPool

# operator-name prefixes the VM runs itself (allocation, not computation): not "Relax operators"
_RUNTIME_OPS = ("relax.builtin.", "relax.vm.", "relax.memory.", "builtin.", "vm.")
# operators that call functions rather than compute
_CALLING_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_packed")


class Executable:
    """A compiled module: the VM program of its Relax functions (``program``) and one ``Module``
    holding every PrimFunc compiled (``kernels()``)."""

    def __init__(self, program: VMProgram, kernels: Module) -> None:
        if not isinstance(program, VMProgram):
            raise TVMSError(f"Executable takes a VMProgram, not {type(program).__name__}")
        called = {inst.func for f in program.functions for inst in f.code
                  if isinstance(inst, Call) and inst.kind == "kernel"}
        missing = sorted(called - set(kernels.functions))
        if missing:
            raise TVMSError(f"the kernels module lacks the PrimFuncs {', '.join(missing)}")
        self.program = program
        self._kernels = kernels

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.program.functions if not f.closure]

    def as_text(self) -> str:
        """The VM program, one instruction per line (as TVM's ``Executable.as_text``)."""
        return self.program.as_text()

    def kernels(self) -> Module:
        return self._kernels

    def export_library(self, path: str) -> None:
        """Write the kernels and the serialized VM program as one shared library
        (``runtime/export.py``); ``tvms.runtime.load_module(path)`` gives the Executable back."""
        from tvms.ir.vm_program import serialize

        from .export import export_library  # (it needs a C compiler: imported when used)

        export_library(self._kernels, path, serialize(self.program))

    def __repr__(self) -> str:
        return f"Executable({', '.join(self.function_names)}; kernels {', '.join(self._kernels.functions)})"


def has_relax_operators(mod: IRModule) -> bool:
    """Whether a Relax function of ``mod`` still calls a computing operator (``R.add``...)."""
    for key in mod:
        func = mod[key]
        if isinstance(func, rx.Function):
            for n in walk(func):
                if isinstance(n, rx.Call) and isinstance(n.op, Op) and n.op.name not in _CALLING_OPS \
                        and not n.op.name.startswith(_RUNTIME_OPS):
                    return True
    return False


@deep_recursion
def compile(mod: Any, target: Any = None, relax_pipeline: Any = "zero",
            default_schedule: bool = True) -> "Executable | Module":
    """Compile ``mod``: with Relax functions an ``Executable`` for ``VirtualMachine``; a module
    of PrimFuncs only (or a PrimFunc) gives ``tvms.build``'s ``Module``, as ``tvm.compile``.

    ``relax_pipeline`` (a name or a pass) runs when Relax operators remain, as TVM runs its
    build pipeline on a module that is not lowered yet; None skips it.

    ``default_schedule`` (CPU targets): every PrimFunc that is not scheduled yet (see
    ``tvms.dlight.is_scheduled``) gets the default schedule of its kind (``tvms.dlight.cpu``:
    matmul, GEMV, reduction, elementwise, fallback), and a named pipeline is preceded by
    FuseTransposeMatmul, so that a linear layer reads its weight as stored. False compiles the
    TensorIR as it is, as TVM does.

    The result is cached by content (``compile_key``): compiling a module whose text, target and
    options are unchanged returns the same Executable (or Module), which is safe to share: each
    VirtualMachine keeps its own buffers."""
    target = resolve_target(target)
    if isinstance(mod, rx.Function):
        mod = IRModule({"main": mod})
    key = compile_key(mod, target, relax_pipeline, default_schedule=bool(default_schedule))
    if key is not None:
        with _COMPILED_LOCK:
            hit = _COMPILED.get(key)
            if hit is not None:
                _COMPILED.move_to_end(key)
                return hit
    result = _compile_uncached(mod, target, relax_pipeline,
                               bool(default_schedule) and _schedules_by_default(target))
    if key is not None:
        with _COMPILED_LOCK:
            _COMPILED[key] = result
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    return result


# compile's results by content key, least recently used first (bounded: each holds native code)
_COMPILED: "OrderedDict[tuple, Any]" = OrderedDict()
_COMPILED_LOCK = threading.Lock()
_COMPILED_MAX = 64


def compile_key(mod: Any, target: Any, relax_pipeline: Any, **options: Any) -> tuple | None:
    """What a compile depends on: the sha256 of the module's text (constants included), the
    target, the pipeline's name, then each further option of ``compile`` as a (name, value) pair
    (values with a stable ``repr``). None when the result cannot be keyed (a pipeline given as a
    pass object, an input compile rejects)."""
    if relax_pipeline is not None and not isinstance(relax_pipeline, str):
        return None
    if not isinstance(mod, (PrimFunc, IRModule)):
        return None
    try:
        text = mod.script(show_meta=True) if isinstance(mod, IRModule) else "prim_func\n" + mod.script()
    except Exception:  # (a module the printer cannot print yet is compiled, just not cached)
        return None
    extra = tuple((name, repr(value)) for name, value in sorted(options.items()))
    return (hashlib.sha256(text.encode()).hexdigest(), str(target), relax_pipeline, *extra)


def _compile_uncached(mod: Any, target: Any, relax_pipeline: Any, schedule: bool) -> "Executable | Module":
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    if isinstance(mod, IRModule) and all(isinstance(mod[k], PrimFunc) for k in mod) and len(mod):
        return build(default_schedules(mod, target) if schedule else mod, target)
    if not isinstance(mod, IRModule):
        raise TVMSError(f"compile takes an IRModule, a Relax function or a PrimFunc, "
                        f"not {type(mod).__name__}")
    if relax_pipeline is not None and has_relax_operators(mod):
        if isinstance(relax_pipeline, str):
            from tvms.lowering.relax.pipeline import get_pipeline
            # TVM's "default" legalizes before the VM; here the zero pipeline also fuses
            relax_pipeline = get_pipeline("zero" if relax_pipeline == "default" else relax_pipeline)
            if schedule:
                from tvms.lowering.relax.fuse_transpose_matmul import FuseTransposeMatmul
                from tvms.lowering.transform import Sequential

                relax_pipeline = Sequential([FuseTransposeMatmul(), relax_pipeline])
        # TVM's build keeps every Relax function; the pipeline's dead-code elimination keeps the
        # public ones only, so a private one (IRModule.from_expr(func)) is public while it runs
        private = [k for k in mod if isinstance(mod[k], rx.Function) and "global_symbol" not in mod[k].attrs]
        mod = relax_pipeline(_with_global_symbols(mod, private, True))
        mod = _with_global_symbols(mod, [k for k in private if k in mod], False)
    if schedule:
        mod = default_schedules(mod, target)
    from tvms.lowering.relax.vm_codegen import compile_vm

    return Executable(compile_vm(mod), _build_kernels(mod, target))


def _schedules_by_default(target: Any) -> bool:
    """Whether ``compile`` gives unscheduled TensorIR a default schedule for this target (the
    CPU: the rules of ``tvms.dlight.cpu``)."""
    return str(target).split(" ", 1)[0] == "llvm"


def default_schedules(mod: IRModule, target: Any) -> IRModule:
    """``mod`` with each PrimFunc that is not scheduled yet given its default CPU schedule."""
    from tvms.lowering.dlight import ApplyDefaultSchedule
    from tvms.lowering.dlight.cpu import default_rules

    from .target import Target

    with target if isinstance(target, Target) else Target(str(target)):
        return ApplyDefaultSchedule(*default_rules())(mod)


def _build_kernels(mod: IRModule, target: Any) -> Module:
    """The one place the lowered module's PrimFuncs are taken and compiled for the VM."""
    prims = {k: mod[k] for k in mod if isinstance(mod[k], PrimFunc)}
    return build(IRModule(prims), target) if prims else Module({}, str(target))


def _with_global_symbols(mod: IRModule, names: list, add: bool) -> IRModule:
    """``mod`` with the functions ``names`` given (or rid of) their ``global_symbol``."""
    if not names:
        return mod
    out = mod.copy()
    for name in names:
        func = mod[name]
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
        if add:
            attrs["global_symbol"] = name
        out[mod.get_global_var(name)] = func.with_changes(attrs=FrozenDict(attrs))
    return out


class _Function:
    """One function of the program as a VM runs it: its instructions as closures, made at the
    first call. A straight-line function runs them in order; one with jumps follows the
    program counter (a step returns the next pc, or None for the next instruction)."""

    def __init__(self, vm: "VirtualMachine", f: VMFunction) -> None:
        self.name, self.num_params, self.num_regs, self.heap_size = f.name, len(f.params), f.num_regs, len(f.heap)
        code = f.code
        self.straight = all(isinstance(i, Call) for i in code[:-1]) and isinstance(code[-1], Ret)
        if self.straight:
            self.steps = [step_of(vm, i, f.heap) for i in code[:-1]]
            self.ret = code[-1].reg
        else:
            self.steps = [_control_step(i, pc) if not isinstance(i, Call) else step_of(vm, i, f.heap)
                          for pc, i in enumerate(code)]

    def __call__(self, args: list) -> Any:
        if len(args) != self.num_params:
            raise TVMSError(f"the function takes {self.num_params} arguments, got {len(args)}")
        regs = args + [None] * (self.num_regs - self.num_params)
        heap = [None] * self.heap_size
        steps = self.steps
        if self.straight:
            for step in steps:
                step(regs, heap)
            return regs[self.ret]
        pc = 0
        while True:
            nxt = steps[pc](regs, heap)
            if nxt is None:
                pc += 1
            elif nxt >= 0:
                pc = nxt
            else:
                return regs[-1 - nxt]


def _control_step(inst: Any, pc: int) -> Callable[[list, list], int | None]:
    """``If``, ``Goto`` and ``Ret`` as steps: the next pc, or ``-1 - reg`` to return ``reg``."""
    if isinstance(inst, Ret):
        done = -1 - inst.reg
        return lambda regs, heap: done
    if isinstance(inst, Goto):
        target = pc + inst.offset
        return lambda regs, heap: target
    if isinstance(inst, If):
        cond, target = inst.cond, pc + inst.false_offset
        return lambda regs, heap: None if bool(np.asarray(regs[cond])) else target
    raise TVMSError(f"not a VM instruction: {inst!r}")


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
        self.pool = BufferPool()
        self.unpooled = 0  # outputs allocated outside the pool (they outlive their function)
        # the constants as kernels take them (C-contiguous and writable), made once
        self.constants = [np.require(c, requirements=("C", "W")) for c in ex.program.constants]
        self._programs = {f.name: f for f in ex.program.functions}
        self._functions: dict[str, _Function] = {}

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

    def call(self, name: str, args: list) -> Any:
        """Run the program's function ``name`` on VM values (its instructions made at first use)."""
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = _Function(self, self._programs[name])
        return fn(args)

    @deep_recursion(too_deep="recursion too deep: a Relax function calls itself (directly or "
                             "through others) more deeply than the VM follows")
    def invoke(self, name: str, *args: Any) -> Any:
        f = self._programs[name]
        if len(args) != len(f.params):
            raise TVMSError(f"{name} takes {len(f.params)} arguments "
                            f"({', '.join(f.params)}), got {len(args)}")
        values = [_argument(a, k in f.shape_params, p, name) for k, (a, p) in enumerate(zip(args, f.params))]
        return _result(self.call(name, values))

    def memory_stats(self) -> dict:
        """``pooled``: distinct intermediate buffers the pool allocated; ``reused``: requests a
        released buffer served; ``unpooled``: outputs allocated for values that outlive a call."""
        return {"pooled": self.pool.fresh, "reused": self.pool.reused, "unpooled": self.unpooled}

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


def _argument(value: Any, is_shape: bool, name: str, fname: str) -> Any:
    """A call argument as the VM's value: tensors as C-contiguous, writable numpy arrays (as
    kernels take them: others are copied), shapes as Shape, tuples of values, numbers."""
    if type(value) is Tensor:
        return value.array
    if isinstance(value, Tensor):
        value = value.array
    if isinstance(value, np.ndarray):
        flags = value.flags
        if flags.c_contiguous and flags.writeable:
            return value
        return np.require(value, requirements=("C", "W"))  # (ascontiguousarray would make 0-d 1-d)
    if isinstance(value, (tuple, list)):
        if is_shape:
            return Shape(int(v) for v in value)
        return tuple(_argument(v, False, "a tuple field", fname) for v in value)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return value
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


def relax_build(mod: Any, target: Any = None, relax_pipeline: Any = "zero",
                default_schedule: bool = True) -> Executable:
    """``tvms.relax.build``: as ``compile``, for modules with Relax functions."""
    ex = compile(mod, target, relax_pipeline, default_schedule)
    if not isinstance(ex, Executable):
        raise TVMSError("relax.build: the module has no Relax function (use tvms.build for TensorIR)")
    return ex


__all__ = ["Executable", "VirtualMachine", "compile", "compile_key", "has_relax_operators", "relax_build"]
