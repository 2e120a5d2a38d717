"""SplitHostDevice: each launch of GPU threads becomes a kernel function, called from the host.

An outermost ``T.launch_thread`` in a function whose target has a host is cut out into a new
PrimFunc ``<symbol>_kernel`` (``_kernel_1``, ... for the next ones). The kernel takes the data
pointers of the buffers it uses (``A_ptr: T.handle("float32", "global")``, the buffer declared
again inside with ``T.decl_buffer``) and the scalars it uses, pointers first then by name; it
gets the target without its host, ``calling_conv`` 2 (a device kernel) and the thread tags it
launches as ``tirx.kernel_launch_params``. The host keeps ``T.call_ffi_kernel(name, args...,
extents..., launch_params=[...])`` with the launch extents in the host's terms (the values of
the kernel's ``let``s substituted). A kernel with a ``shared.dyn`` allocation (one at most:
MergeSharedMemoryAllocations makes one of several) launches with ``tirx.use_dyn_shared_memory``
last, its extent the allocation's size in bytes (an int64). The launch bounds a kernel writes in its
body (``tirx.max_registers`` and the like) become the kernel's attributes (``kernel_launch_bounds.py``).
"""
from __future__ import annotations

from ....ir.buffer import Buffer, constant_size, element_bytes
from ....ir.dtype import int32, int64
from ....ir.errors import TVMSError
from ....ir.expr import Call, Cast, IntImm, PointerType, PrimExpr, StringImm, Var
from ....ir.analysis import substitute
from ....ir.function import PrimFunc
from ....ir.host_program import DYNAMIC_SHARED
from ....ir.module import GlobalVar, IRModule, Target
from ....ir.node import FrozenDict
from ....ir.op import get_op
from ....ir.stmt import AllocBuffer, AttrStmt, DeclBuffer, Evaluate, LetStmt, Stmt
from ....ir.visitor import Mutator, walk
from ..tir_pass import checked_module_pass
from ...pass_registry import register_pass
from .free_vars import undefined
from .kernel_launch_bounds import take_launch_bounds

DEVICE_CALLING_CONV = 2


def without_host(target: Target) -> Target:
    return Target(FrozenDict({k: v for k, v in target.config.items() if k != "host"}))


def launch_extents(kernel_body: Stmt) -> tuple[list, list]:
    """The thread tags a kernel launches, each first launch's, and their extents with the
    kernel's ``let`` values substituted (so that the host can compute them)."""
    lets: dict = {}
    tags: list = []
    extents: list = []
    for node in walk(kernel_body):
        if isinstance(node, LetStmt):
            lets[node.var] = substitute(node.value, lets)
        elif (isinstance(node, AttrStmt) and node.attr_key == "thread_extent"
              and node.node.thread_tag not in tags):
            tags.append(node.node.thread_tag)
            extents.append(substitute(node.value, lets))
    return tags, extents


def dynamic_shared_bytes(kernel_body: Stmt, name: str) -> PrimExpr | None:
    """The bytes of the kernel's ``shared.dyn`` allocation (``kernel_body``'s ``let`` values
    substituted), None without one."""
    lets: dict = {}
    found = []
    for node in walk(kernel_body):
        if isinstance(node, LetStmt):
            lets[node.var] = substitute(node.value, lets)
        elif isinstance(node, AllocBuffer) and node.buffer.scope == "shared.dyn":
            found.append(node.buffer)
    if len(found) > 1:
        raise TVMSError(f"SplitHostDevice: kernel {name} has {len(found)} dynamic shared memory allocations "
                        f"({', '.join(b.name for b in found)}); a kernel has one (MergeSharedMemoryAllocations "
                        f"merges them)")
    if not found:
        return None
    buf = found[0]
    itemsize = element_bytes(buf.dtype)
    if constant_size(buf) is not None:
        return IntImm(int64, constant_size(buf) * itemsize)
    count = buf.shape[0]
    for x in buf.shape[1:]:
        count = count * x
    return Cast(int64, substitute(count, lets)) * IntImm(int64, itemsize)


class _KernelRenamer(Mutator):
    """The kernel's own buffers and scalar parameters in place of the host's (each buffer
    rebuilt once, so that every access still names one object)."""

    def __init__(self, buffers: dict, scalars: dict) -> None:
        self.buffers = buffers
        self.scalars = scalars

    def visit_Var(self, var: Var) -> Var:
        return self.scalars.get(var, var)  # (and a buffer's data used as a pointer: the kernel's parameter)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        if buffer not in self.buffers:
            self.buffers[buffer] = self.generic_visit(buffer)
        return self.buffers[buffer]

    def visit_Call(self, call: Call) -> Call:
        new = self.generic_visit(call)
        if not call.data_of:
            return new
        # (an argument written as a buffer's data is the kernel's buffer's, as TVM prints it)
        return new.with_changes(data_of=tuple(self.buffers.get(b, b) if b is not None else None for b in call.data_of))


class _Splitter(Mutator):
    def __init__(self, func: PrimFunc, symbol: str, device_target: Target) -> None:
        self.func = func
        self.symbol = symbol
        self.device_target = device_target
        self.kernels: list = []
        self.taken: set = set()
        self.declared = {buffer.data: buffer for buffer in func.buffer_map.values()}  # data Var -> innermost

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key == "thread_extent":
            return self._split(attr)
        return self.generic_visit(attr)

    def visit_DeclBuffer(self, decl: DeclBuffer) -> Stmt:
        outer = self.declared.get(decl.buffer.data)
        self.declared[decl.buffer.data] = decl.buffer
        try:
            return self.generic_visit(decl)
        finally:
            if outer is None:
                del self.declared[decl.buffer.data]
            else:
                self.declared[decl.buffer.data] = outer

    def _kernel_name(self) -> str:
        name = f"{self.symbol}_kernel"
        suffix = 0
        while name in self.taken:
            suffix += 1
            name = f"{self.symbol}_kernel_{suffix}"
        self.taken.add(name)
        return name

    def _split(self, body: Stmt) -> Stmt:
        variables, buffers = undefined(body, self.declared)
        data_of = {buffer.data: buffer for buffer in buffers}
        params = sorted(variables, key=lambda v: (not v.dtype.is_handle, v.name))
        # the kernel's own scalar variables (functions share none) and buffers over its pointers
        scalars = {var: var.with_changes() for var in params if var not in data_of}
        pointers = {var: Var(f"{var.name}_ptr", var.dtype, var.type_annotation or PointerType(buffer.dtype, "global"))
                    for var, buffer in data_of.items() if var in variables}
        kernel_params = [pointers.get(var) or scalars[var] for var in params]
        renamed: dict = {}
        for buffer in buffers:
            if buffer.data not in pointers:
                raise TVMSError(f"SplitHostDevice: the kernel uses buffer {buffer.name!r}, whose data "
                                f"{buffer.data.name!r} it cannot take as a parameter")
            renamed[buffer] = buffer.with_changes(
                data=pointers[buffer.data], name=buffer.data.name,
                shape=tuple(substitute(x, scalars) for x in buffer.shape),
                strides=tuple(substitute(x, scalars) for x in buffer.strides),
                elem_offset=None if buffer.elem_offset is None else substitute(buffer.elem_offset, scalars))
        kernel_body = _KernelRenamer(dict(renamed), {**scalars, **pointers}).visit(body)
        for buffer in buffers:  # the first used ends innermost, as in TVM
            kernel_body = DeclBuffer(renamed[buffer], kernel_body)
        call_args = list(params)
        tags, extents = launch_extents(body)
        name = self._kernel_name()
        kernel_body, bounds = take_launch_bounds(kernel_body, name)
        shared_bytes = dynamic_shared_bytes(body, name)
        if shared_bytes is not None:
            tags, extents = [*tags, DYNAMIC_SHARED], [*extents, shared_bytes]
        attrs = {"calling_conv": DEVICE_CALLING_CONV, "target": self.device_target,
                 "tir.is_global_func": True, "tir.kernel_launch_params": tuple(tags),
                 "tir.noalias": True, "global_symbol": name, **bounds}
        kernel = PrimFunc(tuple(kernel_params), FrozenDict(), kernel_body, None, FrozenDict(attrs),
                          s_tir=self.func.s_tir)
        self.kernels.append((name, kernel))
        call = Call(int32, get_op("tir.call_ffi_kernel"),
                    (StringImm(name), *call_args, *extents),
                    FrozenDict({"launch_params": tuple(tags), "ret_ty": "int32"}))
        return Evaluate(call)


def split_host_device(mod: IRModule) -> IRModule:
    """``mod`` with every device region of its host-and-device functions cut out into a kernel."""
    result = mod.empty_copy()
    taken = set(mod)
    for gv, func in mod.functions_items():
        target = func.attrs.get("target") if isinstance(func, PrimFunc) else None
        if not isinstance(target, Target) or "host" not in target.config:
            result[gv] = func
            continue
        splitter = _Splitter(func, func.attrs.get("global_symbol", gv.name_hint), without_host(target))
        splitter.taken = taken
        body = splitter.visit(func.body)
        for name, kernel in splitter.kernels:
            result[GlobalVar(name)] = kernel
        result[gv] = func.with_changes(body=body) if splitter.kernels else func
    return result


def SplitHostDevice():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.SplitHostDevice()``."""
    return checked_module_pass(lambda mod, ctx: split_host_device(mod), "SplitHostDevice")


register_pass("SplitHostDevice", SplitHostDevice)

__all__ = ["DYNAMIC_SHARED", "SplitHostDevice", "dynamic_shared_bytes", "split_host_device", "launch_extents",
           "without_host"]
