"""LiftThreadBinding and UnifyThreadBinding: one launch per thread index per kernel.

LiftThreadBinding (before CompactBufferAllocation): in each kernel (an outermost thread-bound
loop and what it holds), the loops bound to one thread tag become one loop, named after the tag
(``blockIdx_x``), placed at the innermost loop that holds all of them; a tag's loops merge their
annotations. UnifyThreadBinding (after it): all the launches of a kernel move to its root, in the
order first met, each tag one variable (``threadIdx_x``); a launch with annotations leaves a loop
of extent 1 carrying them.
"""
from __future__ import annotations

from ....ir.errors import TVMSError
from ....ir.expr import Cast, IntImm, IterVar, Var, const
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.stmt import SERIAL, THREAD_BINDING, AttrStmt, For, Stmt
from ....ir.structural import structural_equal
from ....ir.visitor import Mutator, children, walk
from ..tir_pass import define_tir_pass


def _binding(var: Var, tag: str) -> IterVar:
    return IterVar(None, Var(tag, var.dtype), "ThreadIndex", tag)


def _tag_order(tag: str) -> int:
    return -len(tag)  # (TVM sorts the tags by length, longest first: the last one is outermost)


class _LoopLCA:
    """For each thread tag in a kernel: the loops bound to it, the innermost loop holding all
    of them, and their merged annotations."""

    def __init__(self, root: For) -> None:
        self.paths: dict = {}
        self.first: dict = {}
        self.annotations: dict = {}
        self._walk(root, [])

    def _walk(self, stmt: Stmt, stack: list) -> None:
        for node in _children_stmts(stmt):
            if isinstance(node, For):
                stack.append(node)
                self._walk(node.body, stack)
                if node.kind == THREAD_BINDING:
                    self._record(node, stack)
                stack.pop()
            else:
                self._walk(node, stack)

    def _record(self, loop: For, stack: list) -> None:
        tag = loop.thread_binding.thread_tag
        self.annotations.setdefault(tag, {}).update(loop.annotations)
        if tag not in self.paths:
            self.paths[tag] = list(stack)
            self.first[tag] = loop
            return
        path = self.paths[tag]
        n = 0
        while n < len(path) and n < len(stack) and path[n] is stack[n]:
            n += 1
        del path[n:]


def _children_stmts(stmt: Stmt) -> list:
    """``stmt`` itself when it is a loop, else the statements right below it (through blocks,
    sequences and other statements) down to the next loops."""
    if isinstance(stmt, For):
        return [stmt]
    found = []
    for node in _direct(stmt):
        found.extend(_children_stmts(node))
    return found


def _direct(stmt: Stmt) -> list:
    return [c for c in children(stmt) if isinstance(c, Stmt)]


class _Lifter(Mutator):
    def __init__(self) -> None:
        self.at: dict = {}  # id(loop) -> [(tag, new var, dom, annotations)]
        self.subst: dict = {}

    def visit_For(self, loop: For) -> Stmt:
        root = loop.kind == THREAD_BINDING and not self.at
        if root:
            lca = _LoopLCA(loop)
            for tag in sorted(lca.paths, key=_tag_order):
                first = lca.first[tag]
                var = Var(tag, first.loop_var.dtype)
                self.at.setdefault(id(lca.paths[tag][-1]), []).append(
                    (tag, var, (first.min, first.extent), FrozenDict(lca.annotations[tag])))
            for node in walk(loop):
                if isinstance(node, For) and node.kind == THREAD_BINDING:
                    new = next(v for tags in self.at.values() for t, v, _, _ in tags
                               if t == node.thread_binding.thread_tag)
                    self.subst[node.loop_var] = new
        body = self.visit(loop.body)
        for tag, var, (lo, extent), annots in self.at.get(id(loop), []):
            body = For(var, lo, extent, THREAD_BINDING, body, _binding(var, tag), annots)
        if root:
            self.at, self.subst = {}, {}
        if loop.kind == THREAD_BINDING:
            return body
        return loop.with_changes(body=body)

    def visit_Var(self, var: Var) -> Var:
        return self.subst.get(var, var)


def lift_thread_binding(func: PrimFunc) -> PrimFunc:
    """``func`` with each kernel's loops of one thread tag made one loop at their common parent."""
    return func.with_changes(body=_Lifter().visit(func.body))


class _Unifier(Mutator):
    def __init__(self) -> None:
        self.depth = 0
        self.iters: dict = {}  # tag -> (var, dom)
        self.launches: list = []
        self.subst: dict = {}

    def visit_Var(self, var: Var):
        return self.subst.get(var, var)

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key not in ("thread_extent", "virtual_thread"):
            return self.generic_visit(attr)
        extent = attr.value
        return self._unify(attr, attr.node.var, attr.node.thread_tag, (const(0, extent.dtype), extent), attr.body)

    def visit_For(self, loop: For) -> Stmt:
        if loop.kind != THREAD_BINDING:
            return self.generic_visit(loop)
        stmt = self._unify(loop, loop.loop_var, loop.thread_binding.thread_tag, (loop.min, loop.extent), loop.body)
        if not loop.annotations:
            return stmt
        if isinstance(stmt, For):
            return stmt.with_changes(annotations=loop.annotations)
        dtype = loop.loop_var.dtype
        return For(Var("var", dtype), IntImm(dtype, 0), IntImm(dtype, 1), SERIAL, stmt,
                   annotations=loop.annotations)

    def _unify(self, node: Stmt, old: Var, tag: str, dom: tuple, body: Stmt) -> Stmt:
        launch = self.depth == 0
        outer_depth = self.depth
        if tag.startswith("blockIdx.") or launch:
            if launch:
                self.iters, self.launches = {}, []
            self.depth += 1
        if tag in self.iters:
            var, known = self.iters[tag]
            if not structural_equal(known[1], dom[1]):
                raise TVMSError(f"UnifyThreadBinding: all loops bound to {tag} must have the same extent, "
                                f"not {known[1]} and {dom[1]}")
        else:
            var = Var(tag, dom[1].dtype)
            self.iters[tag] = (var, dom)
            self.launches.append(tag)
        self.subst[old] = var if var.dtype == old.dtype else Cast(old.dtype, var)
        body = self.visit(body)
        self.depth = outer_depth
        if not launch:
            return body
        for tag in reversed(self.launches):
            var, (lo, extent) = self.iters[tag]
            body = For(var, lo, extent, THREAD_BINDING, body, _binding(var, tag))
        return body


def unify_thread_binding(func: PrimFunc) -> PrimFunc:
    """``func`` with each kernel's thread launches at its root, one per thread tag."""
    return func.with_changes(body=_Unifier().visit(func.body))


LiftThreadBinding = define_tir_pass("LiftThreadBinding", lift_thread_binding)
UnifyThreadBinding = define_tir_pass("UnifyThreadBinding", unify_thread_binding)

__all__ = ["LiftThreadBinding", "UnifyThreadBinding", "lift_thread_binding", "unify_thread_binding"]
