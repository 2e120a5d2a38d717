"""Finding blocks and loops in a PrimFunc's statement tree, and replacing statements in it.

The IR is immutable, so a schedule refers to a block by its name and to a loop by its loop
variable; these helpers find the current node and its ancestors for either.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ...ir.expr import PrimExpr, Var
from ...ir.function import PrimFunc
from ...ir.node import Node
from ...ir.stmt import (AllocBuffer, Allocate, AssertStmt, Block, BlockRealize, BufferStore, DeclBuffer, Evaluate, For,
                        IfThenElse, LetStmt, SeqStmt, Stmt, While, seq)
from ...ir.visitor import Mutator, children
from .errors import ScheduleError


# The fields that hold statements, of the statement classes whose other fields hold none (an
# AttrStmt's value may be any node): walks and rewrites of the statement tree read only these.
_STMT_FIELDS: dict[type, tuple[str, ...]] = {
    For: ("body",), While: ("body",), IfThenElse: ("then_case", "else_case"), LetStmt: ("body",),
    AssertStmt: ("body",), Allocate: ("body",), DeclBuffer: ("body",), AllocBuffer: ("body",),
    SeqStmt: ("seq",), BlockRealize: ("block",), Block: ("init", "body"), BufferStore: (), Evaluate: (),
}


def stmt_children(s: Stmt) -> list[Stmt]:
    """The statements directly inside ``s`` (a block's init holds no blocks or loops of interest)."""
    cls = type(s)
    if cls is Block:
        return [s.body]
    if cls is SeqStmt:
        return list(s.seq)
    fields = _STMT_FIELDS.get(cls)
    if fields is None:
        return [c for c in children(s) if isinstance(c, Stmt)]
    return [c for c in (getattr(s, name) for name in fields) if c is not None]


def walk_with_path(s: Stmt, path: tuple = ()) -> Iterator[tuple[Stmt, tuple]]:
    """Every statement under ``s`` (pre-order) with its ancestors, outermost first."""
    stack = [(s, path)]
    while stack:
        node, p = stack.pop()
        yield node, p
        inner = p + (node,)
        stack.extend((c, inner) for c in reversed(stmt_children(node)))


def find(func: PrimFunc, match: Callable[[Stmt], bool]) -> tuple[Stmt, tuple] | None:
    for node, path in walk_with_path(func.body):
        if match(node):
            return node, path
    return None


def find_block(func: PrimFunc, name: "str | tuple") -> tuple[BlockRealize, tuple] | None:
    """The block named ``name``; ``(name, k)``: the k-th block of that name in program order (a
    primitive such as cache_inplace gives two blocks one name, as TVM does)."""
    name, k = name if isinstance(name, tuple) else (name, 0)
    for n, path in walk_with_path(func.body):  # (stops at the k-th: every handle lookup comes here)
        if isinstance(n, BlockRealize) and n.block.name_hint == name:
            if not k:
                return n, path
            k -= 1
    return None


def find_realize(func: PrimFunc, realize: BlockRealize) -> tuple[BlockRealize, tuple]:
    """That very realize of ``func`` with its path (where block names repeat)."""
    return next((r, p) for r, p in walk_with_path(func.body) if r is realize)


def find_loop(func: PrimFunc, loop_var: Var) -> tuple[For, tuple] | None:
    return find(func, lambda n: isinstance(n, For) and n.loop_var is loop_var)


def enclosing_loops(path: tuple) -> list[For]:
    """The loops between a statement and its nearest enclosing block, outermost first."""
    loops: list[For] = []
    for node in path:
        if isinstance(node, (Block, BlockRealize)):
            loops = []
        elif isinstance(node, For):
            loops.append(node)
    return loops


def parent_block(path: tuple) -> Block | None:
    for node in reversed(path):
        if isinstance(node, Block):
            return node
    return None


def child_blocks(s: Stmt) -> list[BlockRealize]:
    """The blocks under ``s`` that no other block under ``s`` encloses, in program order."""
    found: list[BlockRealize] = []
    stack = list(reversed(stmt_children(s.block if isinstance(s, BlockRealize) else s)))
    while stack:
        node = stack.pop()
        if isinstance(node, BlockRealize):
            found.append(node)
        else:
            stack.extend(reversed(stmt_children(node)))
    return found


def all_realizes(s: Stmt) -> list[BlockRealize]:
    """Every block realize under ``s`` in pre-order, those in a block's init included: what
    ``collect(s, BlockRealize)`` finds, walking statements only (a schedule asks it of whole
    functions, whose expressions hold no blocks)."""
    found: list[BlockRealize] = []
    stack: list = [s]
    while stack:
        node = stack.pop()
        if type(node) is BlockRealize:
            found.append(node)
        inner = [c for c in (node.init, node.body) if c is not None] if type(node) is Block else stmt_children(node)
        stack.extend(reversed(inner))
    return found


def blocks_under(s: Stmt) -> list[BlockRealize]:
    """Every block realize under ``s`` (``s`` included), in program order."""
    return [n for n, _ in walk_with_path(s) if isinstance(n, BlockRealize)]


class _Replacer(Mutator):
    """Rebuilds statements, swapping the nodes named in ``table`` (by identity)."""

    def __init__(self, table: dict[int, Any]):
        self.table = table

    def visit(self, node: Node) -> Any:
        new = self.table.get(id(node))
        if new is not None:
            return new
        if isinstance(node, PrimExpr) or not isinstance(node, Stmt):
            return node
        fields = _STMT_FIELDS.get(type(node))
        if fields is None:
            result = self.generic_visit(node)
        else:  # (only the fields that hold statements)
            changes = {name: new for name in fields if (new := self._mutate(old := getattr(node, name))) is not old}
            result = node.with_changes(**changes) if changes else node
        if isinstance(result, SeqStmt) and result is not node:
            result = seq(result.seq)  # a replacement that is itself a sequence is spliced in
        return result


def replace_in(stmt: Stmt, table: dict[int, Any]) -> Stmt:
    """``stmt`` with each statement whose id is a key of ``table`` replaced by its value."""
    return _Replacer(table).visit(stmt)


def replace_stmts(func: PrimFunc, table: dict[int, Stmt]) -> PrimFunc:
    """``func`` with each statement whose id is a key of ``table`` replaced by its value."""
    body = replace_in(func.body, table)
    return func if body is func.body else func.with_changes(body=body)  # type: ignore[return-value]


def remove_block(func: PrimFunc, name: "str | BlockRealize", primitive: str) -> PrimFunc:
    """``func`` without block ``name`` (or that very realize, where names repeat) and the loops
    that hold only it."""
    if isinstance(name, BlockRealize):
        realize, path = find_realize(func, name)
        name = realize.block.name_hint
    else:
        realize, path = find_block(func, name)
    node: Stmt = realize
    parents = list(path)
    while parents and isinstance(parents[-1], For) and parents[-1].body is node:
        node = parents.pop()
    parent = parents[-1] if parents else None
    if not isinstance(parent, SeqStmt):
        raise ScheduleError(f"{primitive}: block '{name}' is the only statement of its scope; "
                            f"removing it would leave the scope empty")
    return replace_stmts(func, {id(parent): seq([s for s in parent.seq if s is not node])})
