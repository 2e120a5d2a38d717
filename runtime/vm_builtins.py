"""The VM's instructions as Python closures, made once per function when a VM first runs it.

``step_of(vm, call)`` turns one ``Call`` of a ``VMProgram`` (``ir/vm_program.py``) into a
function ``step(regs, heap)`` that reads its arguments from the registers, the constant pool,
immediates and size expressions over the heap, and writes its result into its register. What
can be worked out before a call is (constant sizes and shapes, the kernel to call, the numpy
dtype of an allocation), so a step is a few list reads and one call.

The builtins are those ``lowering/relax/vm_codegen.py`` emits: argument and struct info checks
that bind symbolic sizes into the heap (``check_tensor_info``, ``match_shape``, ...),
allocation from the VM's pool or fresh (``alloc_tensor``, ``release``), tuples, shapes and
scalars, closures, packed functions and the numpy references of Relax operators left in the
module (``relax_op``).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tvms.ir.dtype import DataType
from tvms.ir.errors import TVMSError
from tvms.ir.registry import get_script_func
from tvms.ir.vm_program import Call, Const, Imm, Reg, Size, size_text

from .cuda_tensor import CudaTensor
from .numpy_ops import NUMPY_OPS, Shape, check_fits
from .tensor import Tensor
from .tir_values import cast_value, numpy_dtype
from .vm_memory import aligned_bytes, aligned_empty

if TYPE_CHECKING:
    from .vm import VirtualMachine

Step = Callable[[list, list], None]


class VMClosure:
    """A function value: a function of the program and the values it captured (its first arguments)."""

    __slots__ = ("func", "captured")

    def __init__(self, func: str, captured: tuple) -> None:
        self.func, self.captured = func, captured

    def __repr__(self) -> str:
        return f"VMClosure({self.func})"


# ---------------------------------------------------------------- reading arguments
class _Reader:
    """How a step reads its arguments: ``constant`` (a value known now) or ``get(regs, heap)``."""

    def __init__(self, vm: "VirtualMachine", arg: Any, heap_names: tuple) -> None:
        self.is_constant, self.value, self.get = False, None, None
        self.register = arg.index if isinstance(arg, Reg) else None
        if isinstance(arg, Reg):
            k = arg.index
            self.get = lambda regs, heap: regs[k]
        elif isinstance(arg, (Const, Imm)):
            self.is_constant = True
            self.value = vm.constants[arg.index] if isinstance(arg, Const) else arg.value
        elif isinstance(arg, Size):
            fn = size_function(arg.expr, heap_names)
            if callable(fn):
                fn = guarded_size(fn, arg.expr, heap_names)
                self.get = lambda regs, heap: fn(heap)
            else:
                self.is_constant, self.value = True, fn
        else:
            raise TVMSError(f"not a VM argument: {arg!r}")
        if self.is_constant:
            value = self.value
            self.get = lambda regs, heap: value


def values_of(vm: "VirtualMachine", args: tuple, heap_names: tuple) -> Callable[[list, list], list]:
    """A function of (regs, heap) giving the values of ``args`` as a list."""
    readers = [_Reader(vm, a, heap_names) for a in args]
    if all(r.register is not None for r in readers):
        index = tuple(r.register for r in readers)
        return lambda regs, heap: [regs[k] for k in index]
    getters = [r.get for r in readers]
    return lambda regs, heap: [g(regs, heap) for g in getters]


def size_function(e: Any, names: tuple) -> Any:
    """A size expression as a function of the heap, or its value when it reads no slot."""
    if not isinstance(e, tuple):
        return e
    op = e[0]
    if op == "slot":
        k, name = e[1], names[e[1]]

        def load(heap: list) -> Any:
            v = heap[k]
            if v is None:
                raise TVMSError(f"the symbolic size {name!r} is not bound")
            return v
        return load
    if op == "cast":
        dtype = DataType(e[1])
        inner = size_function(e[2], names)
        if not callable(inner):
            return cast_value(inner, dtype)
        return lambda heap: cast_value(inner(heap), dtype)
    if op == "select":
        return _lazy_select(*(size_function(x, names) for x in e[1:]))
    parts = [size_function(x, names) for x in e[1:]]
    fn = _SIZE_FUNCTIONS[op]
    if not any(callable(p) for p in parts):
        try:
            return fn(*parts)
        except ZeroDivisionError:  # (an error only if a run computes it: a select may not)
            return lambda heap: fn(*parts)
    getters = [p if callable(p) else (lambda heap, v=p: v) for p in parts]
    if len(getters) == 2:
        a, b = getters
        return lambda heap: fn(a(heap), b(heap))
    return lambda heap: fn(*[g(heap) for g in getters])


def guarded_size(fn: Callable, expr: Any, names: tuple) -> Callable:
    """``fn`` (a size's function of the heap) with a division by zero said as a TVMSError naming the size."""
    def size(heap: list) -> Any:
        try:
            return fn(heap)
        except ZeroDivisionError:
            bound = ", ".join(f"{names[k]} = {heap[k]}" for k in _slots_of(expr))
            raise TVMSError(f"the size {size_text(expr, names)} divides by zero"
                            + (f" ({bound})" if bound else "")) from None
    return size


def _lazy_select(cond: Any, true_value: Any, false_value: Any) -> Any:
    """The chosen branch only (the other may divide by the zero its condition guards against)."""
    if not callable(cond):
        return true_value if cond else false_value
    on_true = true_value if callable(true_value) else (lambda heap: true_value)
    on_false = false_value if callable(false_value) else (lambda heap: false_value)
    return lambda heap: on_true(heap) if cond(heap) else on_false(heap)


def _slots_of(e: Any) -> list:
    if not isinstance(e, tuple):
        return []
    if e[0] == "slot":
        return [e[1]]
    return list(dict.fromkeys(k for x in e[1:] for k in _slots_of(x)))


def _trunc_div(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return -q if (a < 0) != (b < 0) else q
    return a / b


def _trunc_mod(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a - _trunc_div(a, b) * b
    if b == 0:  # (math.fmod says ValueError)
        raise ZeroDivisionError("float modulo")
    return math.fmod(a, b)


def _floor_div(a: Any, b: Any) -> Any:
    return a // b if isinstance(a, int) and isinstance(b, int) else math.floor(a / b)


def _floor_mod(a: Any, b: Any) -> Any:
    return a % b if isinstance(a, int) and isinstance(b, int) else a - math.floor(a / b) * b


_SIZE_FUNCTIONS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": _trunc_div, "mod": _trunc_mod, "floordiv": _floor_div, "floormod": _floor_mod,
    "min": min, "max": max, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "and": lambda a, b: bool(a and b), "or": lambda a, b: bool(a or b),
    "not": lambda a: not a,
}


# ---------------------------------------------------------------- calls
def step_of(vm: "VirtualMachine", call: Call, heap_names: tuple) -> Step:
    """The closure that runs ``call``."""
    if call.kind == "builtin":
        make = _BUILTINS.get(call.func)
        if make is None:
            raise TVMSError(f"the VM has no builtin {call.func!r}")
        return make(vm, call, heap_names)
    values, dst = values_of(vm, call.args, heap_names), call.dst
    if call.kind == "kernel":
        kernel = vm.executable.kernels().get_function(call.func)
        result = () if dst is not None else None  # (a direct kernel call's value is the empty tuple)
        if not call.checked:
            run = kernel.run
        else:
            # a numpy operator's result may be a strided view or a 0-d scalar, a constant read-only
            def run(args: list) -> None:
                kernel(*[np.require(a, requirements=("C", "W")) if isinstance(a, (np.ndarray, np.generic))
                         else a for a in args])
        if dst is None:
            return lambda regs, heap: run(values(regs, heap))

        def kernel_step(regs: list, heap: list) -> None:
            run(values(regs, heap))
            regs[dst] = result
        return kernel_step
    if call.kind == "function":
        name = call.func

        def function_step(regs: list, heap: list) -> None:
            out = vm.call(name, values(regs, heap))
            if dst is not None:
                regs[dst] = out
        return function_step
    name = call.func  # packed: looked up at each call (a later registration overrides)
    memory = vm.device_memory  # (on a GPU a host result goes to the device, where kernels read)
    own = vm.executable.external.get(name)  # (an offloaded function of this module: its own)

    def packed_step(regs: list, heap: list) -> None:
        fn = own or get_script_func(name)
        with np.errstate(all="ignore"):
            out = fn(*values(regs, heap))
        if dst is not None:
            regs[dst] = _host_value(out) if memory is None else memory.to_device(out)
    return packed_step


def _host_value(value: Any) -> Any:
    """A packed function's result as the VM holds it: a ``runtime.Tensor`` as its array (tuples
    field by field), which the VM's checks and kernels take."""
    if isinstance(value, Tensor):
        return value.array
    if isinstance(value, tuple):
        return tuple(_host_value(v) for v in value)
    return value


def _immediates(call: Call, count: int, start: int = 0) -> list:
    """The ``count`` arguments of a builtin from ``start`` on, which the compiler makes immediates."""
    args = call.args[start:start + count]
    if len(args) < count or not all(isinstance(a, Imm) for a in args):
        raise TVMSError(f"a malformed VM program: {call.func} takes {count} immediate arguments "
                        f"after {start} others")
    return [a.value for a in args]


def _writing(dst: int | None, compute: Callable[[list, list], Any]) -> Step:
    if dst is None:
        return compute

    def step(regs: list, heap: list) -> None:
        regs[dst] = compute(regs, heap)
    return step


def _check_tensor_info(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    ndim, dtype, what = _immediates(call, 3, start=1)
    expected = numpy_dtype(dtype) if dtype is not None else None
    tensors = np.ndarray if vm.device_memory is None else (np.ndarray, CudaTensor)

    def check(regs: list, heap: list) -> None:
        v = get(regs, heap)
        if not isinstance(v, tensors):
            raise TVMSError(f"{what}: expected a tensor, got {type(v).__name__}")
        if expected is not None and v.dtype != expected:
            raise TVMSError(f"{what}: expected dtype {dtype}, got {v.dtype}")
        if ndim >= 0 and v.ndim != ndim:
            raise TVMSError(f"{what}: expected {ndim} dimensions, got shape {v.shape}")
    return check


def _dims_of(kind: str) -> Callable[[Any], Any]:
    if kind == "tensor":
        return lambda v: getattr(v, "shape", None)
    if kind == "shape":
        return lambda v: v if isinstance(v, tuple) else None
    return lambda v: (v,)


def _match_shape(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    kind, what, labels, binds = _immediates(call, 4, start=1)
    dims_of = _dims_of(kind)
    declared = [guarded_size(d, s.expr, names) if callable(d) else d
                for s in call.args[5:] for d in [size_function(s.expr, names)]]
    n = len(declared)
    constant = tuple((i, d) for i, d in enumerate(declared) if not callable(d))
    computed = tuple((i, d) for i, d in enumerate(declared) if callable(d))

    def match(regs: list, heap: list) -> None:
        actual = dims_of(get(regs, heap))
        if len(actual) != n:
            raise TVMSError(f"{what}: expected {n} dimensions, got {tuple(actual)}")
        for axis, slot in binds:  # (sizes are bound where they first occur, then compared)
            if heap[slot] is None:
                heap[slot] = int(actual[axis])
        for i, d in constant:
            if actual[i] != d:
                raise TVMSError(f"{what}: dimension {i} should be {labels[i]}{d}, got {actual[i]}")
        for i, d in computed:
            expected = d(heap)
            if expected != actual[i]:
                raise TVMSError(f"{what}: dimension {i} should be {labels[i]}{expected}, got {actual[i]}")
    return match


def _bind_sizes(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    kind, n, binds = _immediates(call, 3, start=1)
    dims_of = _dims_of(kind)

    def bind(regs: list, heap: list) -> None:
        actual = dims_of(get(regs, heap))
        if isinstance(actual, tuple) and len(actual) == n:
            for axis, slot in binds:
                if heap[slot] is None:
                    heap[slot] = int(actual[axis])
    return bind


def _check_shape_info(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    (what,) = _immediates(call, 1, start=1)

    def check(regs: list, heap: list) -> None:
        v = get(regs, heap)
        if not isinstance(v, tuple):
            raise TVMSError(f"{what}: expected a shape, got {type(v).__name__}")
    return check


def _check_tuple_info(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    n, what = _immediates(call, 2, start=1)

    def check(regs: list, heap: list) -> None:
        v = get(regs, heap)
        if not isinstance(v, tuple) or len(v) != n:
            raise TVMSError(f"{what}: expected a tuple of {n}")
    return check


def _check_result_shape(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    what, checks = _immediates(call, 2, start=1)
    sizes = values_of(vm, call.args[3:], names)

    def check(regs: list, heap: list) -> None:
        value, dims, at = get(regs, heap), sizes(regs, heap), 0
        for path, n in checks:
            expected, at = tuple(dims[at:at + n]), at + n
            v = value
            for k in path:
                if not isinstance(v, tuple):
                    break
                v = v[k]
            else:
                if expected != np.shape(v):
                    raise TVMSError(f"{what}: the arguments give the result shape {np.shape(v)}, "
                                    f"where its struct info says {expected}")
    return check


def _alloc_tensor(vm, call, names) -> Step:
    dtype_name, pooled = _immediates(call, 2)
    dtype = numpy_dtype(dtype_name)
    dims = values_of(vm, call.args[2:], names)
    dst = call.dst

    def shape_of(regs: list, heap: list) -> tuple:
        s = tuple([int(d) for d in dims(regs, heap)])
        if s and min(s) < 0:
            raise TVMSError(f"an output of shape {s}: the arguments make a size negative")
        return check_fits(s, dtype)
    if all(not isinstance(a, Size) or not callable(size_function(a.expr, names)) for a in call.args[2:]):
        try:
            shape = shape_of([], [])
            shape_of = lambda regs, heap: shape  # noqa: E731  (known now)
        except TVMSError:
            pass  # (the error comes when the allocation runs)
    if vm.device_memory is not None:  # (on a GPU: device tensors, pooled or not)
        allocate = vm.device_memory.take if pooled else vm.device_memory.empty

        def alloc_on_device(regs: list, heap: list) -> None:
            regs[dst] = allocate(shape_of(regs, heap), dtype)
        return alloc_on_device
    if pooled:
        take = vm.pool.take

        def alloc_pooled(regs: list, heap: list) -> None:
            regs[dst] = take(shape_of(regs, heap), dtype)
        return alloc_pooled

    def alloc(regs: list, heap: list) -> None:
        vm.unpooled += 1
        regs[dst] = aligned_empty(shape_of(regs, heap), dtype)  # (aligned: it may become a result)
    return alloc


def _alloc_storage(vm, call, names) -> Step:
    (dtype,) = _immediates(call, 1)
    itemsize = numpy_dtype(dtype).itemsize
    dims = values_of(vm, call.args[1:], names)

    def alloc(regs: list, heap: list) -> np.ndarray:
        nbytes = itemsize
        for d in dims(regs, heap):
            nbytes *= int(d)
        if vm.device_memory is not None:
            return vm.device_memory.storage(nbytes)
        storage = aligned_bytes(nbytes)
        storage[:] = 0  # (as the reference's storage: zeros)
        return storage
    return _writing(call.dst, alloc)


def _alloc_tensor_in_storage(vm, call, names) -> Step:
    (dtype,) = _immediates(call, 1)
    dtype = numpy_dtype(dtype)
    storage, offset = _Reader(vm, call.args[1], names).get, _Reader(vm, call.args[2], names).get
    dims = values_of(vm, call.args[3:], names)

    def alloc(regs: list, heap: list) -> np.ndarray:
        shape, start = tuple(int(d) for d in dims(regs, heap)), int(offset(regs, heap))
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        raw = storage(regs, heap)
        if vm.device_memory is not None:
            return vm.device_memory.view(raw, start, shape, dtype)
        if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or start < 0 or start + nbytes > raw.size:
            raise TVMSError(f"R.vm.alloc_tensor: a tensor of shape {shape} at offset {start} does not fit "
                            f"its storage")
        return raw[start:start + nbytes].view(dtype).reshape(shape)
    return _writing(call.dst, alloc)


def _kill_object(vm, call, names) -> Step:
    return _writing(call.dst, lambda regs, heap: ())  # (the register keeps it until the call ends)


def _release(vm, call, names) -> Step:
    get, release = _Reader(vm, call.args[0], names).get, (vm.device_memory or vm.pool).release
    return lambda regs, heap: release(get(regs, heap))


def _copy(vm, call, names) -> Step:
    return _writing(call.dst, _Reader(vm, call.args[0], names).get)


def _make_tuple(vm, call, names) -> Step:
    values = values_of(vm, call.args, names)
    return _writing(call.dst, lambda regs, heap: tuple(values(regs, heap)))


def _tuple_get(vm, call, names) -> Step:
    get = _Reader(vm, call.args[0], names).get
    (index,) = _immediates(call, 1, start=1)
    return _writing(call.dst, lambda regs, heap: get(regs, heap)[index])


def _make_shape(vm, call, names) -> Step:
    values = values_of(vm, call.args, names)
    if all(isinstance(a, Size) and not callable(size_function(a.expr, names)) for a in call.args):
        shape = Shape(int(v) for v in values([], []))
        return _writing(call.dst, lambda regs, heap: shape)
    return _writing(call.dst, lambda regs, heap: Shape([int(v) for v in values(regs, heap)]))


def _prim_value(vm, call, names) -> Step:
    (dtype,) = _immediates(call, 1)
    dtype = DataType(dtype)
    get = _Reader(vm, call.args[1], names).get
    return _writing(call.dst, lambda regs, heap: cast_value(get(regs, heap), dtype))


def _get_packed(vm, call, names) -> Step:
    (name,) = _immediates(call, 1)
    own = vm.executable.external.get(name)  # (an offloaded function of this module: its own)
    return _writing(call.dst, lambda regs, heap: own or get_script_func(name))


def _make_closure(vm, call, names) -> Step:
    (func,) = _immediates(call, 1)
    captured = values_of(vm, call.args[1:], names)
    return _writing(call.dst, lambda regs, heap: VMClosure(func, tuple(captured(regs, heap))))


def _invoke_closure(vm, call, names) -> Step:
    values = values_of(vm, call.args, names)

    def invoke(regs: list, heap: list) -> Any:
        callee, *args = values(regs, heap)
        if isinstance(callee, VMClosure):
            return vm.call(callee.func, [*callee.captured, *args])
        if callable(callee):
            with np.errstate(all="ignore"):
                return callee(*args)
        raise TVMSError(f"cannot call a value of type {type(callee).__name__}")
    return _writing(call.dst, invoke)


def _relax_op(vm, call, names) -> Step:
    name, attrs = _immediates(call, 2)
    values = values_of(vm, call.args[2:], names)
    ref = NUMPY_OPS.get(name)
    memory = vm.device_memory  # (on a GPU the numpy reference runs on host copies)

    def run(regs: list, heap: list) -> Any:
        if ref is None:
            raise TVMSError(f"the Relax operator {name!r} has no numpy reference")
        args = tuple(values(regs, heap))
        if memory is not None:
            args = memory.to_host(args)
        try:
            with np.errstate(all="ignore"):  # (inf and nan as Relax computes them)
                result = ref(args, attrs)
        except IndexError as err:  # (R.take of an index out of range)
            raise TVMSError(f"{name}: out-of-bounds access: {err}") from None
        return result if memory is None else memory.to_device(result)
    return _writing(call.dst, run)


_BUILTINS = {
    "vm.builtin.check_tensor_info": _check_tensor_info, "vm.builtin.match_shape": _match_shape,
    "vm.builtin.bind_sizes": _bind_sizes, "vm.builtin.check_shape_info": _check_shape_info,
    "vm.builtin.check_tuple_info": _check_tuple_info, "vm.builtin.check_result_shape": _check_result_shape,
    "vm.builtin.alloc_tensor": _alloc_tensor, "vm.builtin.release": _release, "vm.builtin.copy": _copy,
    "vm.builtin.alloc_storage": _alloc_storage, "vm.builtin.alloc_tensor_in_storage": _alloc_tensor_in_storage,
    "vm.builtin.kill_object": _kill_object,
    "vm.builtin.make_tuple": _make_tuple, "vm.builtin.tuple_get": _tuple_get,
    "vm.builtin.make_shape": _make_shape, "vm.builtin.prim_value": _prim_value,
    "vm.builtin.get_packed": _get_packed, "vm.builtin.make_closure": _make_closure,
    "vm.builtin.invoke_closure": _invoke_closure, "vm.builtin.relax_op": _relax_op,
}

__all__ = ["VMClosure", "step_of"]
