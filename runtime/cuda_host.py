"""The host side of a CUDA build: runs the host PrimFunc of a ``CudaArtifact``.

The cuda row lowers a function to a host function and its kernels, as TVM's ``SplitHostDevice``
prints them. The host function takes the buffers, binds their symbolic sizes, and launches each
kernel with ``T.call_ffi_kernel(name, *args, *extents, launch_params=[...])``: the extents are
expressions of the arguments, one per launch parameter (``blockIdx.x``, ``threadIdx.x``, ...,
``tirx.use_dyn_shared_memory`` for the bytes of dynamic shared memory). ``HostRunner`` compiles
that function once into closures, one per statement (lets, asserts, branches, loops, declared
buffers, host allocations), so that a call does the host's arithmetic and little else (the
kernels of a small model take microseconds: the host's Python is most of a call), and hands each
launch, its grid and block worked out, to a launcher: the CUDA driver one
(``cuda_module.DriverLauncher``) or the reference one, which runs the kernel's TIR with the
reference executor on host arrays, so this evaluator is tested without a GPU.

A launcher has ``buffer(arg, where) -> (pointer, shape, numpy dtype)`` (what the kernel gets
for a buffer argument, and its shape to check), ``allocate(dtype, count) -> pointer`` and
``launch(kernel, values, dims)`` (``dims`` a ``Launch``), and ``tensor_map()`` for a slot that
``runtime.cuTensorMapEncodeTiled`` encodes (``cuda_tensor_map``; the host makes one for each
``T.tvm_stack_alloca("tensormap", 1)`` and calls the encoder with ``T.call_packed``); where it has ``begin_call()`` and
``end_call()``, a call of a host function that allocates is made between them (the
workspaces are the call's until it ends).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvms.ir import expr as E
from tvms.ir import stmt as S
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.host_program import DYNAMIC_SHARED

from tvms.ir.registry import get_script_func

from .cuda_tensor_map import check_slot  # (and runtime.cuTensorMapEncodeTiled registered)
from .reference import _bind_dim, cast_value, compact_strides, compile_expr, numpy_dtype

_AXES = ("x", "y", "z")


@dataclass(frozen=True)
class Launch:
    """One kernel launch: grid and block dimensions (x, y, z) and dynamic shared memory bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


def launch_dims(launch_params: tuple, extents: list, kernel: str) -> Launch:
    """The grid, block and dynamic shared memory of a launch from its parameters' extents."""
    grid, block, shared = [1, 1, 1], [1, 1, 1], 0
    for tag, extent in zip(launch_params, extents):
        extent = int(extent)
        if tag == DYNAMIC_SHARED:
            shared = extent
            continue
        scope, _, axis = tag.partition(".")
        if scope not in ("blockIdx", "threadIdx") or axis not in _AXES:
            raise TVMSError(f"kernel {kernel}: unknown launch parameter {tag!r}")
        if extent < 1:
            raise TVMSError(f"kernel {kernel}: the launch extent of {tag} is {extent}; a launch needs "
                            f"at least one block and one thread (is a size 0?)")
        (grid if scope == "blockIdx" else block)[_AXES.index(axis)] = extent
    return Launch(tuple(grid), tuple(block), shared)


def bind_arguments(func: PrimFunc, args: tuple, launcher: Any, name: str) -> dict:
    """The environment of a call: each parameter's value (a buffer's data variable the
    launcher's pointer), symbolic sizes bound from the shapes and checked where stated twice."""
    params = func.params
    if len(args) != len(params):
        names = ", ".join(func.buffer_map[p].name if p in func.buffer_map else p.name for p in params)
        raise TVMSError(f"{name} takes {len(params)} arguments ({names}), got {len(args)}")
    env: dict = {}
    shapes = []
    for k, (param, arg) in enumerate(zip(params, args)):
        buf = func.buffer_map.get(param)
        if buf is None:
            env[param] = _scalar(param, arg, f"{name} argument {k} ({param.name})")
            continue
        where = f"{name} argument {k} ({buf.name})"
        pointer, shape, dtype = launcher.buffer(arg, where)
        if dtype != numpy_dtype(buf.dtype):
            raise TVMSError(f"{where}: expected dtype {buf.dtype}, got {dtype}")
        if len(shape) != len(buf.array_shape):
            raise TVMSError(f"{where}: expected {len(buf.array_shape)} dimensions, got shape {tuple(shape)}")
        env[param] = env[buf.data] = pointer
        shapes.append((where, buf, tuple(shape)))
        for declared, actual in zip(buf.shape, shape):  # (plain sizes first: checks may use any)
            if isinstance(declared, E.Var):
                env.setdefault(declared, actual)
    for where, buf, shape in shapes:
        for axis, (declared, actual) in enumerate(zip(buf.array_shape, shape)):
            _bind_dim(env, declared, actual, f"{where}: dimension {axis}")
        for declared, actual in zip(buf.strides, compact_strides(shape[:len(buf.shape)])):
            _bind_dim(env, declared, actual, f"{where}: strides")
        if isinstance(buf.elem_offset, E.Var):
            env.setdefault(buf.elem_offset, 0)
    return env


def _scalar(param: E.Var, value: Any, where: str) -> Any:
    value = getattr(value, "item", lambda: value)() if getattr(value, "ndim", None) == 0 else value
    if not isinstance(value, (int, float, bool)) and not hasattr(value, "dtype"):
        raise TVMSError(f"{where}: expected a {param.dtype} scalar, got {type(value).__name__}")
    if param.dtype.is_integer and isinstance(value, float):
        raise TVMSError(f"{where}: expected a {param.dtype} scalar, got a float")
    return cast_value(value, param.dtype)


class HostRunner:
    """One host function compiled once into closures of ``(env, launcher)`` (its statements,
    launches and argument checks), then run at each call: ``runner(launcher, *args)``.
    ``kernels`` maps a kernel's name to its ``CudaKernel`` (``launch_params`` and the ``func``
    whose parameters the call fills). What the host function cannot do (a device statement,
    an unknown kernel) is an error when the call reaches it, as when it was interpreted."""

    def __init__(self, host: PrimFunc, kernels: dict, name: str) -> None:
        self.host, self.kernels, self.name = host, kernels, name
        self.allocates = False  # (whether it allocates a workspace: a call then begins and ends)
        self.bind = _Binder(host, name)
        self.body = self.stmt(host.body)

    def __call__(self, launcher: Any, *args: Any) -> None:
        self.body(self.bind(args, launcher), launcher)

    def stmt(self, s: Any) -> Any:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            return _failing(f"{self.name}: the CUDA host function has a {type(s).__name__} statement, "
                            f"which runs on the device only (it belongs in a kernel)")
        return method(s)

    def value(self, e: Any) -> Any:
        fn, name = compile_expr(e), self.name

        def value(env: dict) -> Any:
            try:
                return fn(env)
            except KeyError as err:
                raise TVMSError(f"{name}: the host function reads {getattr(err.args[0], 'name', err)} "
                                f"before it is bound") from None
        return value

    def s_SeqStmt(self, s: S.SeqStmt) -> Any:
        items = [self.stmt(item) for item in s.seq]

        def seq(env: dict, launcher: Any) -> None:
            for item in items:
                item(env, launcher)
        return seq

    def s_LetStmt(self, s: S.LetStmt) -> Any:
        if is_tensor_map_slot(s.value):
            count = s.value.args[1]
            check_slot("tensormap", count.value if isinstance(count, E.IntImm) else count)
            return self._tensor_map(s.var, self.stmt(s.body))
        var, value, body = s.var, self.value(s.value), self.stmt(s.body)

        def let(env: dict, launcher: Any) -> None:
            env[var] = value(env)
            body(env, launcher)
        return let

    def s_AssertStmt(self, s: S.AssertStmt) -> Any:
        condition, message = self.value(s.condition), f"{self.name}: {''.join(str(m) for m in s.message)}"
        body = self.stmt(s.body) if s.body is not None else _nothing

        def check(env: dict, launcher: Any) -> None:
            if not condition(env):
                raise TVMSError(message)
            body(env, launcher)
        return check

    def s_IfThenElse(self, s: S.IfThenElse) -> Any:
        condition = self.value(s.condition)
        then = self.stmt(s.then_case)
        otherwise = self.stmt(s.else_case) if s.else_case is not None else _nothing

        def branch(env: dict, launcher: Any) -> None:
            (then if condition(env) else otherwise)(env, launcher)
        return branch

    def s_For(self, s: S.For) -> Any:
        var, start, extent, body = s.loop_var, self.value(s.min), self.value(s.extent), self.stmt(s.body)
        step = (lambda env: 1) if s.step is None else self.value(s.step)

        def loop(env: dict, launcher: Any) -> None:
            first = start(env)
            for i in range(first, first + extent(env), step(env)):
                env[var] = i
                body(env, launcher)
        return loop

    def _tensor_map(self, var: E.Var, body: Any) -> Any:
        name = self.name

        def slot(env: dict, launcher: Any) -> None:
            make = getattr(launcher, "tensor_map", None)
            if make is None:
                raise TVMSError(f"{name}: the host function makes a CUDA tensor map, which "
                                f"{type(launcher).__name__} cannot")
            env[var] = make()
            body(env, launcher)
        return slot

    def s_DeclBuffer(self, s: S.DeclBuffer) -> Any:
        return self.stmt(s.body)  # (its data is a variable already bound: a parameter's, or a let's)

    def s_AttrStmt(self, s: S.AttrStmt) -> Any:
        return self.stmt(s.body)

    def s_Allocate(self, s: S.Allocate) -> Any:
        return self._allocation(s.buffer_var, s.dtype, s.extents, s.body)

    def s_AllocBuffer(self, s: S.AllocBuffer) -> Any:
        return self._allocation(s.buffer.data, s.buffer.dtype, s.buffer.shape, s.body)

    def _allocation(self, var: E.Var, dtype: Any, extents: Any, body: Any) -> Any:
        self.allocates = True
        extents, body = [self.value(e) for e in extents], self.stmt(body)

        def allocate(env: dict, launcher: Any) -> None:
            count = 1
            for extent in extents:
                count *= extent(env)
            env[var] = launcher.allocate(dtype, count)
            body(env, launcher)
        return allocate

    def s_Evaluate(self, s: S.Evaluate) -> Any:
        call = s.value
        op = getattr(getattr(call, "op", None), "name", "")
        if op == "tir.tvm_call_packed":
            return self.call_packed(call)
        if op != "tir.call_ffi_kernel":
            if isinstance(call, (E.IntImm, E.FloatImm)):
                return _nothing  # (T.evaluate(0): nothing to do)
            return _failing(f"{self.name}: the CUDA host function calls {getattr(call, 'op', call)}; "
                            f"it only launches kernels (T.call_ffi_kernel) and calls global functions "
                            f"(T.call_packed)")
        return self.launch(call)

    def call_packed(self, call: E.Call) -> Any:
        """``T.call_packed(name, args...)``: the global function ``name`` (``runtime.cuTensorMapEncodeTiled``
        encodes a tensor map before the launch that reads it) called with the arguments' values."""
        if not isinstance(call.args[0], E.StringImm):
            return _failing(f"{self.name}: T.call_packed needs the global function's name as a string")
        name = call.args[0].value
        function = get_script_func(name, allow_missing=True)
        if function is None:
            return _failing(f"{self.name}: the host function calls the global function {name!r}, "
                            f"which is not registered")
        values = [self.value(a) for a in call.args[1:]]

        def packed(env: dict, launcher: Any) -> None:
            function(*[value(env) for value in values])
        return packed

    def launch(self, call: E.Call) -> Any:
        name = str(call.args[0].value)
        kernel = self.kernels.get(name)
        if kernel is None:
            return _failing(f"{self.name}: the host function launches {name!r}, which is not among "
                            f"the kernels ({', '.join(self.kernels)})")
        launch_params = tuple(call.attrs.get("launch_params", kernel.launch_params))
        count = len(kernel.func.params)
        rest = call.args[1:]
        if len(rest) != count + len(launch_params):
            return _failing(f"{self.name}: the launch of {name} passes {len(rest)} values; the kernel "
                            f"takes {count} arguments and {len(launch_params)} launch extents")
        values = [self.value(a) for a in rest[:count]]
        extents = [self.value(a) for a in rest[count:]]
        known: dict = {}  # extents -> their Launch (the same at every call of a static shape)

        def launch(env: dict, launcher: Any) -> None:
            at = tuple([extent(env) for extent in extents])
            dims = known.get(at)
            if dims is None:
                if len(known) > 64:  # (a dynamic shape: keep the memo small)
                    known.clear()
                dims = known[at] = launch_dims(launch_params, at, name)
            launcher.launch(kernel, [value(env) for value in values], dims)
        return launch


def is_tensor_map_slot(value: Any) -> bool:
    """Whether ``value`` is ``T.tvm_stack_alloca("tensormap", 1)``: a slot for one CUDA tensor map."""
    return (isinstance(value, E.Call) and getattr(value.op, "name", "") == "tir.tvm_stack_alloca"
            and isinstance(value.args[0], E.StringImm) and value.args[0].value == "tensormap")


def _nothing(env: dict, launcher: Any) -> None:
    pass


def _failing(message: str) -> Any:
    def fail(env: dict, launcher: Any) -> None:
        raise TVMSError(message)
    return fail


class _Binder:
    """``bind_arguments`` of one function, fast where a buffer's shape is all constants: the
    names, dtypes and shapes are worked out once, and a call whose buffers match them binds
    the pointers only; any other call goes the general way, which binds symbolic sizes and
    says what differs."""

    def __init__(self, func: PrimFunc, name: str) -> None:
        self.func, self.name = func, name
        self.params = []  # (param, its buffer or None, where, numpy dtype, constant shape or None)
        for k, param in enumerate(func.params):
            buf = func.buffer_map.get(param)
            if buf is None:
                self.params.append((param, None, f"{name} argument {k} ({param.name})", None, None))
                continue
            self.params.append((param, buf, f"{name} argument {k} ({buf.name})", numpy_dtype(buf.dtype),
                                _constant_shape(buf)))
        self.fast = all(p[1] is None or p[4] is not None for p in self.params)

    def __call__(self, args: tuple, launcher: Any) -> dict:
        if not self.fast or len(args) != len(self.params):
            return bind_arguments(self.func, args, launcher, self.name)
        env: dict = {}
        for (param, buf, where, dtype, shape), arg in zip(self.params, args):
            if buf is None:
                env[param] = _scalar(param, arg, where)
                continue
            pointer, actual_shape, actual_dtype = launcher.buffer(arg, where)
            if actual_dtype != dtype or tuple(actual_shape) != shape:
                return bind_arguments(self.func, args, launcher, self.name)
            env[param] = env[buf.data] = pointer
        return env


def _constant_shape(buf: Any) -> tuple | None:
    """The shape of ``buf`` when it binds nothing (constant sizes, compact or no strides, no
    offset variable): what a matching argument must have; None otherwise."""
    if not all(isinstance(d, E.IntImm) for d in buf.shape) or isinstance(buf.elem_offset, E.Var):
        return None
    shape = tuple(int(d.value) for d in buf.shape)
    if buf.strides and not (all(isinstance(d, E.IntImm) for d in buf.strides)
                            and tuple(int(d.value) for d in buf.strides) == compact_strides(shape)):
        return None
    return shape


__all__ = ["DYNAMIC_SHARED", "HostRunner", "Launch", "bind_arguments", "launch_dims"]
