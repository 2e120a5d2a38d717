"""The host side of a CUDA build: runs the host PrimFunc of a ``CudaArtifact``.

The cuda row lowers a function to a host function and its kernels, as TVM's ``SplitHostDevice``
prints them. The host function takes the buffers, binds their symbolic sizes, and launches each
kernel with ``T.call_ffi_kernel(name, *args, *extents, launch_params=[...])``: the extents are
expressions of the arguments, one per launch parameter (``blockIdx.x``, ``threadIdx.x``, ...,
``tirx.use_dyn_shared_memory`` for the bytes of dynamic shared memory). ``run_host`` evaluates
that function statement by statement (lets, asserts, branches, loops, declared buffers, host
allocations) and hands each launch, its grid and block worked out, to a launcher: the CUDA
driver one (``cuda_module.DriverLauncher``) or the reference one, which runs the kernel's TIR
with the reference executor on host arrays, so this evaluator is tested without a GPU.

A launcher has ``buffer(arg, where) -> (pointer, shape, numpy dtype)`` (what the kernel gets
for a buffer argument, and its shape to check), ``allocate(dtype, count) -> pointer`` and
``launch(kernel, values, dims)`` (``dims`` a ``Launch``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvms.ir import expr as E
from tvms.ir import stmt as S
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.host_program import DYNAMIC_SHARED

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
        if len(shape) != len(buf.shape):
            raise TVMSError(f"{where}: expected {len(buf.shape)} dimensions, got shape {tuple(shape)}")
        env[param] = env[buf.data] = pointer
        shapes.append((where, buf, tuple(shape)))
        for declared, actual in zip(buf.shape, shape):  # (plain sizes first: checks may use any)
            if isinstance(declared, E.Var):
                env.setdefault(declared, actual)
    for where, buf, shape in shapes:
        for axis, (declared, actual) in enumerate(zip(buf.shape, shape)):
            _bind_dim(env, declared, actual, f"{where}: dimension {axis}")
        for declared, actual in zip(buf.strides, compact_strides(shape)):
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
    """Runs one host function with a launcher; ``kernels`` maps a kernel's name to its
    ``CudaKernel`` (``launch_params`` and the ``func`` whose parameters the call fills)."""

    def __init__(self, host: PrimFunc, kernels: dict, launcher: Any, name: str) -> None:
        self.host, self.kernels, self.launcher, self.name = host, kernels, launcher, name

    def __call__(self, *args: Any) -> None:
        env = bind_arguments(self.host, args, self.launcher, self.name)
        self.stmt(self.host.body, env)

    def stmt(self, s: Any, env: dict) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise TVMSError(f"{self.name}: the CUDA host function has a {type(s).__name__} statement, "
                            f"which runs on the device only (it belongs in a kernel)")
        method(s, env)

    def value(self, e: Any, env: dict) -> Any:
        try:
            return compile_expr(e)(env)
        except KeyError as err:
            raise TVMSError(f"{self.name}: the host function reads {getattr(err.args[0], 'name', err)} "
                            f"before it is bound") from None

    def s_SeqStmt(self, s: S.SeqStmt, env: dict) -> None:
        for item in s.seq:
            self.stmt(item, env)

    def s_LetStmt(self, s: S.LetStmt, env: dict) -> None:
        env[s.var] = self.value(s.value, env)
        self.stmt(s.body, env)

    def s_AssertStmt(self, s: S.AssertStmt, env: dict) -> None:
        if not self.value(s.condition, env):
            raise TVMSError(f"{self.name}: {''.join(str(m) for m in s.message)}")
        if s.body is not None:
            self.stmt(s.body, env)

    def s_IfThenElse(self, s: S.IfThenElse, env: dict) -> None:
        branch = s.then_case if self.value(s.condition, env) else s.else_case
        if branch is not None:
            self.stmt(branch, env)

    def s_For(self, s: S.For, env: dict) -> None:
        start = self.value(s.min, env)
        step = 1 if s.step is None else self.value(s.step, env)
        for i in range(start, start + self.value(s.extent, env), step):
            env[s.loop_var] = i
            self.stmt(s.body, env)

    def s_DeclBuffer(self, s: S.DeclBuffer, env: dict) -> None:
        self.stmt(s.body, env)  # (its data is a variable already bound: a parameter's, or a let's)

    def s_AttrStmt(self, s: S.AttrStmt, env: dict) -> None:
        self.stmt(s.body, env)

    def s_Allocate(self, s: S.Allocate, env: dict) -> None:
        count = 1
        for extent in s.extents:
            count *= self.value(extent, env)
        env[s.buffer_var] = self.launcher.allocate(s.dtype, count)
        self.stmt(s.body, env)

    def s_AllocBuffer(self, s: S.AllocBuffer, env: dict) -> None:
        count = 1
        for extent in s.buffer.shape:
            count *= self.value(extent, env)
        env[s.buffer.data] = self.launcher.allocate(s.buffer.dtype, count)
        self.stmt(s.body, env)

    def s_Evaluate(self, s: S.Evaluate, env: dict) -> None:
        call = s.value
        if not (isinstance(call, E.Call) and getattr(call.op, "name", "") == "tir.call_ffi_kernel"):
            if isinstance(call, (E.IntImm, E.FloatImm)):
                return  # (T.evaluate(0): nothing to do)
            raise TVMSError(f"{self.name}: the CUDA host function calls {getattr(call, 'op', call)}; "
                            f"it only launches kernels (T.call_ffi_kernel)")
        self.launch(call, env)

    def launch(self, call: E.Call, env: dict) -> None:
        name = str(call.args[0].value)
        kernel = self.kernels.get(name)
        if kernel is None:
            raise TVMSError(f"{self.name}: the host function launches {name!r}, which is not among "
                            f"the kernels ({', '.join(self.kernels)})")
        launch_params = tuple(call.attrs.get("launch_params", kernel.launch_params))
        count = len(kernel.func.params)
        rest = call.args[1:]
        if len(rest) != count + len(launch_params):
            raise TVMSError(f"{self.name}: the launch of {name} passes {len(rest)} values; the kernel "
                            f"takes {count} arguments and {len(launch_params)} launch extents")
        values = [self.value(a, env) for a in rest[:count]]
        dims = launch_dims(launch_params, [self.value(a, env) for a in rest[count:]], name)
        self.launcher.launch(kernel, values, dims)


__all__ = ["DYNAMIC_SHARED", "HostRunner", "Launch", "bind_arguments", "launch_dims"]
