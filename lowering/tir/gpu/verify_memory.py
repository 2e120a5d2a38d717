"""VerifyMemory: a function for a GPU target reads and writes its buffer arguments only inside a
kernel (under a thread launch). Those buffers live in device memory, which the host function
cannot touch: code left outside the kernels (a loop not bound to GPU threads, a store at the top
level) would run on the host and read or write through a device pointer, a crash on a GPU. tvms
refuses such a function, naming the buffer and where it is accessed. (TVM's pass of this name
means the same, but in TVM 0.27's pipelines it runs where it no longer matches the buffers: TVM
builds these functions, and they crash when run.)
"""
from __future__ import annotations

from ....ir import expr as E, stmt as S
from ....ir.deep import deep_recursion
from ....ir.errors import ScriptError
from ....ir.function import PrimFunc
from ....ir.visitor import Visitor
from ...pass_registry import register_pass
from ..tir_pass import checked_prim_func_pass

_KERNEL_SCOPES = ("thread_extent", "virtual_thread")
_DEVICE_KINDS = ("cuda", "rocm", "opencl", "vulkan", "metal")  # (the GPU kinds TVM checks; not webgpu)


def verify_memory(func: PrimFunc) -> PrimFunc:
    """``func`` unchanged, or a ScriptError at its first host access of a buffer argument; a
    function for the CPU (or for no target) is not checked."""
    target = func.attrs.get("target")
    if getattr(target, "kind", None) not in _DEVICE_KINDS:
        return func
    arguments = {buf.data for buf in func.buffer_map.values()}
    arguments |= {p for p in func.params if p.dtype.is_handle}
    _HostAccesses(arguments, func.span).run(func.body)
    return func


class _HostAccesses(Visitor):
    """Walks the host part of a body (stopping at each kernel's launch) for loads and stores
    of the arguments' data, also through a variable let-bound to it."""

    def __init__(self, arguments: set, span) -> None:
        self.arguments = arguments
        # (the span of the innermost statement read from a script that kept one, else the function's)
        self.where = span

    def visit(self, node):
        span = getattr(node, "span", None) if isinstance(node, S.Stmt) else None
        if span is None:
            return super().visit(node)
        outer, self.where = self.where, span
        try:
            return super().visit(node)
        finally:
            self.where = outer

    @deep_recursion
    def run(self, body: S.Stmt) -> None:
        self.visit(body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in _KERNEL_SCOPES:
            return  # (its body runs on the device)
        self.generic_visit(s)

    def visit_For(self, s: S.For) -> None:
        if s.thread_binding is not None:  # (a loop not yet lifted into a launch)
            return
        self.generic_visit(s)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        if isinstance(s.value, E.Var) and s.value in self.arguments:
            self.arguments.add(s.var)
        self.generic_visit(s)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        self.check(s.buffer, "writes")
        self.generic_visit(s)

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self.check(e.buffer, "reads")
        self.generic_visit(e)

    def check(self, buffer, verb: str) -> None:
        if buffer.data in self.arguments:
            raise ScriptError(f"the host function {verb} {buffer.name!r}, a buffer argument in device memory, "
                              f"outside any kernel: the access must run under a loop bound to GPU threads "
                              f"(T.thread_binding), as the host cannot touch device memory", self.where)


def VerifyMemory():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.VerifyMemory()``."""
    return checked_prim_func_pass(lambda func, mod, ctx: verify_memory(func), "VerifyMemory")


register_pass("VerifyMemory", VerifyMemory)

__all__ = ["VerifyMemory", "verify_memory"]
