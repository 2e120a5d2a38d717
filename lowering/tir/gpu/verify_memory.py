"""VerifyMemory: a function for a GPU target reads and writes its buffer arguments only inside a
kernel (under a thread launch). Those buffers live in device memory, which the host function
cannot touch: a loop left unbound to GPU threads would run on the host and read or write through a
device pointer. TVM refuses such a function at this point of its pipeline ("Memory verification
failed ... Did you forget to bind?"); so does tvms, naming the buffer and where it is accessed.
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
_HOST_KINDS = ("llvm", "c")


def verify_memory(func: PrimFunc) -> PrimFunc:
    """``func`` unchanged, or a ScriptError at its first host access of a buffer argument; a
    function for the CPU (or for no target) is not checked."""
    target = func.attrs.get("target")
    if getattr(target, "kind", "llvm") in _HOST_KINDS:
        return func
    arguments = {buf.data for buf in func.buffer_map.values()}
    arguments |= {p for p in func.params if p.dtype.is_handle}
    _HostAccesses(arguments).run(func.body)
    return func


class _HostAccesses(Visitor):
    """Walks the host part of a body (stopping at each kernel's launch) for loads and stores
    of the arguments' data, also through a variable let-bound to it."""

    def __init__(self, arguments: set) -> None:
        self.arguments = arguments
        self.where = None  # (the span of the innermost statement read from a script)

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
                              f"outside any kernel: bind the loops around the access to GPU threads (TVM's "
                              f"VerifyMemory: \"Did you forget to bind?\")", self.where)


def VerifyMemory():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.VerifyMemory()``."""
    return checked_prim_func_pass(lambda func, mod, ctx: verify_memory(func), "VerifyMemory")


register_pass("VerifyMemory", VerifyMemory)

__all__ = ["VerifyMemory", "verify_memory"]
