"""The Relax VM on the CPU: runs the ``Executable`` that ``tvms.compile`` / ``tvms.relax.build``
(``lowering/build.py``) make.

>>> ex = tvms.compile(mod, target="llvm")          # zero pipeline if needed, then one kernel build
>>> vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
>>> out = vm["main"](x, w)                         # tvms Tensors or numpy arrays in, Tensors out

An ``Executable`` holds a ``VMProgram`` (``ir/vm_program.py``: registers, calls of kernels,
packed functions and builtins, ``If``/``Goto``/``Ret``), compiled from the lowered Relax
functions by ``lowering/relax/vm_codegen.py``, the ``Module`` of compiled kernels and, in the
compiled mode (``exec_mode="compiled"``, the default), native code for the functions the
native lowering takes (``lowering/codegen/llvm_vm.py``): ``vm["main"]`` is then one native call
(``vm_native.py``), and the interpreter serves the arguments that code declines. The interpreter
runs the program and nothing else: each function's instructions become closures
(``vm_builtins.py``) the first time a VM runs it, and a call runs them over a list of registers
and a heap of symbolic sizes. Outputs the compiler planned so come from the VM's buffer pool
(``vm_memory.py``). Packed functions (``R.call_dps_packed``, ``R.call_packed``) receive numpy
arrays, as under the reference executor; they support DLPack (``torch.from_dlpack(x)``).
An executable compiled for ``cuda`` runs on a GPU (``VirtualMachine(ex, tvms.cuda(0))``): its
registers hold device tensors (``vm_cuda.py``) and packed functions receive those.

A VirtualMachine, like TVM's, is for one thread at a time (only the first lookup of a function,
``vm["main"]``, may race: it makes one callable); an Executable may be shared by many VMs.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from tvms.ir.deep import deep_recursion
from tvms.ir.errors import TVMSError
from tvms.ir.registry import register_func
from tvms.ir.vm_program import (Call, Goto, If, NativeVMFunction, Reg, Ret, VMFunction, VMProgram, check_lifted,
                                check_native)

from .cuda_tensor import CudaTensor
from .device import CPU, CUDA, cpu, cuda, missing_reason
from .module import Module, TimingResult, _data_address, _on_cpu
from .numpy_ops import Shape
from .param_cache import ParamCache
from .tensor import ALIGNMENT, Tensor, string_array, tensor
from .vm_builtins import step_of, values_of
from .vm_memory import BufferPool
from .vm_native import NativeFunction, object_layout


class Executable:
    """A compiled module: the VM program of its Relax functions (``program``), one ``Module``
    holding every PrimFunc compiled (``kernels()``) and, per function, its native code
    (``native``: name -> ``NativeVMFunction``, or why the function is interpreted). The functions
    whose weights ``tvms.compile`` lifted: ``lifted_params`` (``f`` -> (``f_lifted``,
    ``f_transform_params``, num_input, number of weights); ``runtime/param_cache.py``) and
    ``lifted_native`` (``f`` -> the native code of its call with cached weights, or why none)."""

    def __init__(self, program: VMProgram, kernels: Module, native: dict | None = None,
                 lifted_params: dict | None = None, lifted_native: dict | None = None,
                 external: dict | None = None) -> None:
        if not isinstance(program, VMProgram):
            raise TVMSError(f"Executable takes a VMProgram, not {type(program).__name__}")
        called = {inst.func for f in program.functions for inst in f.code
                  if isinstance(inst, Call) and inst.kind == "kernel"}
        missing = sorted(called - set(kernels.functions))
        if missing:
            raise TVMSError(f"the kernels module lacks the PrimFuncs {', '.join(missing)}")
        self.program = program
        self._kernels = kernels
        self.native = dict(native) if native is not None else {}
        self.lifted_params = dict(lifted_params or {})
        self.lifted_native = dict(lifted_native or {})
        # the functions RunCodegen offloaded from this module, by symbol: its packed calls find them
        # here first (as TVM's VM looks in its own imported modules), not another module's of one name
        self.external = dict(external or {})
        for a in self.native.values():
            if isinstance(a, NativeVMFunction):
                check_native(a, program)
        check_lifted(self.lifted_params, self.lifted_native, self.native, program)

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.program.functions if not f.closure]

    def as_text(self) -> str:
        """The VM program, one instruction per line (as TVM's ``Executable.as_text``)."""
        return self.program.as_text()

    def kernels(self) -> Module:
        return self._kernels

    def stats(self) -> dict:
        """How the functions run: ``native`` (each one native call, TVM's compiled mode) and
        ``interpreted`` (name -> why: ``exec_mode="bytecode"`` or what the native lowering does
        not take), with each native function's static storage plan (``plans``); ``lifted``: per
        function whose weights were lifted, "native" when its call with cached weights is one
        native call, else why not."""
        native = {n: a for n, a in self.native.items() if isinstance(a, NativeVMFunction)}
        why = "no native code (an executable loaded from a library or made from its parts)"
        lifted = {n: self.lifted_native.get(n, why) for n in self.lifted_params}
        return {"native": sorted(native),
                "interpreted": {n: self.native.get(n, why) for n in self.function_names if n not in native},
                "plans": {n: a.describe_plan() for n, a in native.items()},
                "lifted": {n: "native" if isinstance(a, NativeVMFunction) else a for n, a in lifted.items()}}

    def export_library(self, path: str) -> None:
        """Write the kernels, the serialized VM program, the native code of the compiled
        functions and the lifted functions (with the native code of their calls with cached
        weights) as one shared library (``runtime/export.py``); ``tvms.runtime.load_module(path)``
        gives the Executable back. Functions RunCodegen offloaded to a Python backend (cpu_blas,
        cuBLAS) have no code to write: such an executable is refused, naming them."""
        from tvms.ir.vm_program import serialize

        if self.external:
            raise TVMSError(f"export_library: the functions {', '.join(sorted(self.external))} were offloaded "
                            f"(RunCodegen) to a backend that runs in this process; a library cannot hold them")

        from .export import export_library  # (it needs a C compiler: imported when used)

        native = [a for a in self.native.values() if hasattr(a, "shared_object")]
        calls = {n: a for n, a in self.lifted_native.items() if hasattr(a, "shared_object")}  # (not a reason why none)
        lifted = [(name, spec, calls.get(name)) for name, spec in self.lifted_params.items()]
        export_library(self._kernels, path, serialize(self.program), native, lifted)

    def __repr__(self) -> str:
        return f"Executable({', '.join(self.function_names)}; kernels {', '.join(self._kernels.functions)})"


register_func("runtime.vm.executable", Executable, internal=True)  # (the link step of tvms.compile)


_TAIL = -(1 << 62)  # (a step's answer: "a self tail call", the callee's arguments left in its dst register)


class _Function:
    """One function of the program as a VM runs it: its instructions as closures, made at the
    first call. A straight-line function runs them in order; one with jumps follows the
    program counter (a step returns the next pc, or None for the next instruction).

    A call of the function itself whose result only the instructions up to a ``Ret`` read
    (``_self_tail_call``: a loop written as recursion, as ONNX's Loop and Scan import) is a jump
    to the start with fresh registers: the caller's registers are dropped, and only where to go
    on (the pc, the heap and the result's register) is kept, so memory and depth stay bounded."""

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
            self.tails = {pc: code[pc].dst for pc in range(len(code)) if _self_tail_call(code, pc, f.name)}
            for pc, dst in self.tails.items():
                self.steps[pc] = _tail_step(vm, code[pc], f.heap)

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
        pending: list = []  # (pc, heap, result register) of the callers a self tail call left
        while True:
            nxt = steps[pc](regs, heap)
            if nxt is None:
                pc += 1
            elif nxt >= 0:
                pc = nxt
            elif nxt == _TAIL:
                pending.append((pc + 1, heap, self.tails[pc]))
                regs = regs[self.tails[pc]] + [None] * (self.num_regs - self.num_params)
                heap = [None] * self.heap_size
                pc = 0
            elif pending:  # (the caller goes on with the result, in registers of its own)
                value = regs[-1 - nxt]
                pc, heap, dst = pending.pop()
                regs = [None] * self.num_regs
                regs[dst] = value
            else:
                return regs[-1 - nxt]


def _self_tail_call(code: list, pc: int, name: str) -> bool:
    """Whether ``code[pc]`` calls the function ``name`` (itself) and the instructions that follow,
    up to a ``Ret`` (through ``Goto``s, no branch), read only its result and what they compute."""
    call = code[pc]
    if not (isinstance(call, Call) and call.kind == "function" and call.func == name and call.dst is not None):
        return False
    known, seen = {call.dst}, set()
    pc += 1
    while 0 <= pc < len(code) and pc not in seen:
        seen.add(pc)
        inst = code[pc]
        if isinstance(inst, Ret):
            return inst.reg in known
        if isinstance(inst, Goto):
            pc += inst.offset
            continue
        if not isinstance(inst, Call) or any(isinstance(a, Reg) and a.index not in known for a in inst.args):
            return False
        if inst.dst is not None:
            known.add(inst.dst)
        pc += 1
    return False


def _tail_step(vm: "VirtualMachine", call: Call, heap_names: tuple) -> Callable[[list, list], int]:
    """The step of a self tail call: the callee's arguments into the call's register, and ``_TAIL``."""
    values, dst = values_of(vm, call.args, heap_names), call.dst

    def tail(regs: list, heap: list) -> int:
        regs[dst] = values(regs, heap)
        return _TAIL
    return tail


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
        devices = device if isinstance(device, (list, tuple)) else [device]
        # None on the CPU; on a GPU (an executable compiled for cuda) where tensors live
        self.device_memory = None
        if getattr(ex.kernels(), "device_type", CPU) == CUDA:
            self.device_memory = _cuda_memory(devices)
        else:
            for dev in devices:
                if not _on_cpu(dev):
                    raise TVMSError(f"VirtualMachine: this executable runs on the CPU, not on {dev} "
                                    f"(compile it with target=\"cuda\" to run it there)")
        self.executable = ex
        self.device = device
        self.pool = BufferPool()
        self.unpooled = 0  # outputs allocated outside the pool (they outlive their function)
        # the constants as kernels take them (C-contiguous and writable), made once
        self.constants = [np.require(c, requirements=("C", "W")) for c in ex.program.constants]
        if self.device_memory is not None:
            self.constants = [self.device_memory.to_device(c) for c in self.constants]
        self._programs = {f.name: f for f in ex.program.functions}
        self._functions: dict[str, _Function] = {}
        self._callables: dict[str, Callable] = {}
        self._native: dict[str, NativeFunction] = {}
        # (made once: two threads' first lookups of a function get one callable, so the parameter
        # cache's watcher feeds the native code both run; reentrant: a lifted function's makes its lifted form's)
        self._making = threading.RLock()
        # functions whose weights tvms.compile lifted: transformed once per parameter set
        self.param_cache = ParamCache(self, ex.lifted_params)

    @property
    def module(self) -> "VirtualMachine":
        """TVM reaches ``time_evaluator`` through ``vm.module``; here the VM is its own module."""
        return self

    def __getitem__(self, name: str) -> Callable:
        return self.get_function(name)

    def get_function(self, name: str) -> Callable:
        """The function ``name`` as a callable: its native code when it has some (one call
        per inference; arguments it does not take go to the interpreter), else interpreted; a
        function whose weights tvms.compile lifted runs its lifted form (``param_cache``)."""
        fn = self._callables.get(name)
        if fn is None:
            if name not in self.executable.function_names:
                raise TVMSError(f"the executable has no Relax function {name!r}; it has "
                                f"{', '.join(self.executable.function_names) or 'none'}")
            with self._making:
                fn = self._callables.get(name)  # (another thread may have made it meanwhile)
                if fn is None:
                    fn = self._callables[name] = self._callable(name)
        return fn

    def _callable(self, name: str) -> Callable:
        if name in self.param_cache.lifted:  # (its weights transformed once, then its lifted form)
            arguments, function = self.param_cache.arguments, self.get_function

            def lifted(*args: Any) -> Any:
                runtime, values = arguments(name, args)  # (weights it cannot key: name itself)
                return function(runtime)(*values) if runtime != name else self._invoke(name, values)
            # natively, a call with the last parameter set's weights (the cache's path otherwise),
            # in the storage of the lifted form's native code (the two never run at once)
            runtime = self.param_cache.lifted[name][0]
            function(runtime)
            plain = self._native.get(runtime)
            native = self._native_function(name, self.executable.lifted_native.get(name), lifted,
                                           plain.storage if plain is not None else None)
            if native is None:
                return lifted
            self.param_cache.watch(name, lambda e: native.reuse(*e.native_parts()) if e else native.reuse(None))
            return native.call

        def call(*args: Any) -> Any:
            return self.invoke(name, *args)

        call.__name__ = name
        native = self._native_function(name, self.executable.native.get(name), call)
        return call if native is None else native.call

    def _native_function(self, name: str, artifact: Any, fallback: Callable, storage: Any = None) -> NativeFunction | None:
        layout = object_layout()
        if isinstance(artifact, NativeVMFunction) and self.device_memory is None and isinstance(layout, dict):
            native = self._native[name] = NativeFunction(artifact, layout, self.executable.kernels(), self.constants,
                                                         fallback, _result, _tensor_of_fit_array, storage)
            return native
        return None

    def call(self, name: str, args: list) -> Any:
        """Run the program's function ``name`` on VM values (its instructions made at first use)."""
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = _Function(self, self._programs[name])
        return fn(args)

    @deep_recursion(too_deep="recursion too deep: a Relax function calls itself (directly or "
                             "through others) more deeply than the VM follows")
    def invoke(self, name: str, *args: Any) -> Any:
        return self._invoke(*self.param_cache.arguments(name, args))

    def _invoke(self, name: str, args: tuple) -> Any:
        f = self._programs[name]
        if len(args) != len(f.params):
            raise TVMSError(f"{name} takes {len(f.params)} arguments "
                            f"({', '.join(f.params)}), got {len(args)}")
        on_gpu = self.device_memory is not None
        values = [_argument(a, k in f.shape_params, p, name, on_gpu) for k, (a, p) in enumerate(zip(args, f.params))]
        if on_gpu:
            self.device_memory.begin_call()
            values = [self.device_memory.to_device(v) for v in values]
        return _result(self.call(name, values))

    def memory_stats(self) -> dict:
        """``pooled``: distinct intermediate buffers the pool allocated; ``reused``: requests a
        released buffer served; ``unpooled``: outputs allocated for values that outlive a call."""
        pool = self.device_memory or self.pool
        return {"pooled": pool.fresh, "reused": pool.reused, "unpooled": self.unpooled}

    def native_stats(self) -> dict:
        """Per native function this VM has called: the storage it reserved (bytes) and the
        calls the interpreter served (arguments the native code does not take; for a function
        whose weights were lifted, the calls the parameter cache served: a new parameter set)."""
        return {name: {"reserved": n.artifact.storage_bytes, "fallbacks": n.fallbacks}
                for name, n in self._native.items()}

    def time_evaluator(self, name: str, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, **_ignored: Any) -> Callable[..., TimingResult]:
        """A function that runs ``name`` ``number`` times per repeat (after one warm-up call)
        and returns the seconds per call."""
        where = self.device_memory.device if self.device_memory is not None else None
        if not _on_cpu(dev) if where is None else dev is not None and dev != where:
            raise TVMSError(f"time_evaluator: this executable runs on {where or 'the CPU'}, not on {dev}")
        sync = where.sync if where is not None else (lambda: None)  # (a GPU's work is queued)
        if number < 1 or repeat < 1:
            raise TVMSError("time_evaluator: number and repeat must be at least 1")
        fn = self.get_function(name)

        def evaluate(*args: Any) -> TimingResult:
            fn(*args)
            results = []
            for _ in range(repeat):  # (``number`` calls queued, then one sync: a GPU's launches overlap)
                count, start = 0, time.perf_counter()
                while count == 0 or (time.perf_counter() - start) * 1e3 < min_repeat_ms:
                    for _ in range(number):
                        fn(*args)
                    count += number
                    sync()
                results.append((time.perf_counter() - start) / count)
            return TimingResult(tuple(results))

        return evaluate


def _cuda_memory(devices: list) -> Any:
    """The device memory of a VM running a cuda executable on ``devices`` (cuda(0) if none)."""
    from .vm_cuda import VMDeviceMemory

    dev = next((d for d in devices if d is not None), cuda(0))
    if getattr(dev, "device_type", None) != CUDA:
        raise TVMSError(f"VirtualMachine: this executable was compiled for cuda; it runs on a CUDA "
                        f"device (tvms.cuda(0)), not on {dev}")
    if not dev.exist:
        raise TVMSError(f"VirtualMachine: cannot run on {dev}: {missing_reason(dev)}")
    return VMDeviceMemory(dev)


def _argument(value: Any, is_shape: bool, name: str, fname: str, on_gpu: bool = False) -> Any:
    """A call argument as the VM's value: tensors as C-contiguous, writable numpy arrays (as
    kernels take them: others are copied), shapes as Shape, tuples of values, numbers; device
    tensors as they are for a VM on the GPU (``on_gpu``)."""
    if type(value) is Tensor:
        return value.array
    if isinstance(value, Tensor):
        value = value.array
    if isinstance(value, CudaTensor):
        if not on_gpu:
            raise TVMSError(f"{fname} argument {name!r}: the tensor is on {value.device}; this executable "
                            f"runs on the CPU (copy it with .numpy(), or compile for cuda)")
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "USO":  # (text, or objects that must be str: as tvms.nd.array takes them)
            return string_array(value)
        flags = value.flags
        if flags.c_contiguous and flags.writeable:
            return value
        return np.require(value, requirements=("C", "W"))  # (ascontiguousarray would make 0-d 1-d)
    if isinstance(value, (tuple, list)):
        if is_shape:
            return Shape(int(v) for v in value)
        return tuple(_argument(v, False, "a tuple field", fname, on_gpu) for v in value)
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


__all__ = ["Executable", "VirtualMachine"]
