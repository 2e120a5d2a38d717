"""TensorIR statements: stores, loops, blocks, scopes and control flow."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .buffer import Buffer, BufferRegion
from .dtype import DataType
from .errors import TVMSError
from .expr import IterVar, PrimExpr, Var, is_const_int
from .node import EMPTY, FrozenDict, Node, aside, binds


@dataclass(frozen=True, slots=True, eq=False)
class Stmt(Node):
    """A TensorIR statement."""


@dataclass(frozen=True, slots=True, eq=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple


@dataclass(frozen=True, slots=True, eq=False)
class Evaluate(Stmt):
    """An expression evaluated for its effect, ``T.evaluate(...)``."""

    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False)
class SeqStmt(Stmt):
    seq: tuple


# For kinds, as TVM names them.
SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING = (
    "serial", "parallel", "vectorized", "unroll", "thread_binding")


@dataclass(frozen=True, slots=True, eq=False)
class For(Stmt):
    """``for (loop_var = min; loop_var < min + extent; loop_var += step)``; ``step`` None is 1.

    Lowering starts with CanonicalizeLoop, which rewrites a loop with a step into one with none,
    so the passes after it meet only steps of 1."""

    loop_var: Var = binds()
    min: PrimExpr = field()
    extent: PrimExpr = field()
    kind: str = field()
    body: Stmt = field()
    thread_binding: IterVar | None = None
    annotations: FrozenDict = EMPTY
    step: PrimExpr | None = None

    @property
    def has_trivial_step(self) -> bool:
        return self.step is None or is_const_int(self.step, 1)


@dataclass(frozen=True, slots=True, eq=False)
class While(Stmt):
    condition: PrimExpr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False)
class LetStmt(Stmt):
    """Bind ``var`` to ``value`` in ``body``: ``x: T.int32 = value`` (classic),
    ``x: T.let[T.int32] = value`` (TVM 0.27, where ``x: T.int32 = value`` is a mutable scalar:
    an ``AllocBuffer`` of a scalar buffer, see ``Buffer.scalar``).
    """

    var: Var = binds()
    value: PrimExpr = field()
    body: Stmt = field()


@dataclass(frozen=True, slots=True, eq=False)
class AttrStmt(Stmt):
    """Attach ``key = value`` about ``node`` to ``body``; ``thread_extent`` launches threads."""

    node: Any = binds()  # an IterVar for thread_extent (defining its var), else any value
    attr_key: str = field()
    value: Any = field()
    body: Stmt = field()


@dataclass(frozen=True, slots=True, eq=False)
class AssertStmt(Stmt):
    """``assert condition, message``; ``body`` runs after the check."""

    condition: PrimExpr
    message: tuple  # the message parts (strings)
    body: Stmt
    error_kind: str = "RuntimeError"


@dataclass(frozen=True, slots=True, eq=False)
class Allocate(Stmt):
    """``ptr = T.allocate([extents], "dtype", "scope")``: raw storage pointed at by buffer_var."""

    buffer_var: Var = binds()
    dtype: DataType = field()
    extents: tuple = field()
    condition: PrimExpr = field()
    body: Stmt = field()
    annotations: FrozenDict = EMPTY


@dataclass(frozen=True, slots=True, eq=False)
class DeclBuffer(Stmt):
    """Declare ``buffer`` (over existing data) for ``body``: ``B = T.decl_buffer(..., data=p)``.
    ``data_of``: the buffer whose data the source named (``data=A.data``, ``A.view(...)``)."""

    buffer: Buffer = binds()
    body: Stmt = field()
    data_of: Buffer | None = aside(default=None)


@dataclass(frozen=True, slots=True, eq=False)
class AllocBuffer(Stmt):
    """Allocate storage for ``buffer`` and declare it for ``body``: ``T.alloc_shared((32,))``."""

    buffer: Buffer = binds()
    body: Stmt = field()
    annotations: FrozenDict = EMPTY


@dataclass(frozen=True, slots=True, eq=False)
class Block(Stmt):
    """A block: the unit of scheduling, with iterators, declared accesses and an optional init."""

    iter_vars: tuple = binds()
    alloc_buffers: tuple = binds(default=())
    match_buffers: tuple = ()
    reads: tuple = ()
    writes: tuple = ()
    name_hint: str = ""
    init: Stmt | None = None
    body: Stmt = field(default=None)  # type: ignore[assignment]
    annotations: FrozenDict = EMPTY


@dataclass(frozen=True, slots=True, eq=False)
class BlockRealize(Stmt):
    """Run ``block`` with its iterators bound to ``iter_values`` where ``predicate`` holds."""

    iter_values: tuple
    predicate: PrimExpr
    block: Block


# TVM 0.27's scope ids (its tirx kernels), by script name: (the enclosing scope, the scope counted)
SCOPE_ID_KINDS: dict[str, tuple[str, str]] = {
    "cluster_id": ("kernel", "cluster"), "cta_id": ("kernel", "cta"), "cta_id_in_cluster": ("cluster", "cta"),
    "warpgroup_id": ("cta", "warpgroup"), "warp_id": ("cta", "warp"), "warp_id_in_wg": ("warpgroup", "warp"),
    "lane_id": ("warp", "thread"), "thread_id": ("cta", "thread"), "thread_id_in_wg": ("warpgroup", "thread"),
    "cta_id_in_pair": ("cluster", "cta_pair"),
}


@dataclass(frozen=True, slots=True, eq=False)
class ScopeIdDef(Stmt):
    """``bx, by = T.cta_id([2, 3])``: which block, warp or thread of its scope (``kind``, a key of
    SCOPE_ID_KINDS) runs, one variable a dimension over ``extents`` (None: ``T.cta_id()``, the
    other ids decide it), for ``body``; printed flat. ``preferred``: a cluster's preferred shape.
    LowerTIRx (``ir/scope_ids.py``) makes a device region's ids its thread launches."""

    ids: tuple = binds()
    kind: str = field()
    extents: tuple | None = field()
    body: Stmt = field()
    preferred: tuple | None = None


def seq(stmts: list | tuple) -> Stmt:
    """One statement for a list of them: the statement itself when there is just one."""
    flat: list = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


def async_queue(s: AttrStmt, where: str) -> None:
    """CUDA has one queue of cp.async groups: an ``async_commit_queue_scope`` or
    ``async_wait_queue_scope`` of another index (InjectSoftwarePipeline's for a second async stage)
    is refused, as TVM 0.27's CUDA code generator refuses it."""
    if not is_const_int(s.value, 0):
        raise TVMSError(f"{where}: the {s.attr_key} of queue {s.value}: for CUDA, the index of an async "
                        f"queue must be 0 (one asynchronous stage per pipeline)")


def async_wait(s: AttrStmt, where: str, cuda: bool = True) -> tuple[Any, Stmt]:
    """The number of groups an ``async_wait_queue_scope`` leaves in flight (its inner
    ``async_wait_inflight_count``'s value) and the statement under both; ``cuda``: its queue is 0."""
    inner = s.body
    if not (isinstance(inner, AttrStmt) and inner.attr_key == "async_wait_inflight_count"):
        raise TVMSError(f"{where}: an async_wait_queue_scope holds an async_wait_inflight_count attribute, "
                        f"not a {type(inner).__name__}")
    if cuda:
        async_queue(s, where)
    return inner.value, inner.body


__all__ = [name for name in dir() if not name.startswith("_")] + ["BufferRegion"]
