"""``AnnotateTIROpPattern``: each PrimFunc gets an ``"op_pattern"`` attribute, the fusion kind
that TVM's analysis reads off its TensorIR body.

Each block (the root block aside) is classified by how the indices of its one store relate to
the indices of its loads: the same indices are element-wise, a subsequence of them (skipping
unit dimensions) broadcast, any function of the store's variables injective. A block with
reduction iterators is a multiply-accumulate (``kOutEWiseFusable``, matmul and conv) or a plain
reduction (``kCommReduce``). The function's kind is the strongest over its blocks, as in TVM.
"""
from __future__ import annotations

from typing import Any

from ...ir.buffer import Buffer
from ...ir.expr import COMM_REDUCE, Add, BufferLoad, Cast, IntImm, Mul, Var
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.stmt import Block, BufferStore
from ...ir.visitor import Visitor, children
from ..pass_registry import register_pass
from ..transform import module_pass

# TVM's OpPatternKind values
ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE_KIND, OUT_EWISE_FUSABLE = 0, 1, 2, 3, 4
TUPLE, OPAQUE = 7, 8


def _same_indices(a: tuple, b: tuple) -> bool:
    # TVM compares index expressions by identity (same_as), not by value
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _is_elemwise(store: BufferStore, load: BufferLoad) -> bool:
    return _same_indices(store.indices, load.indices)


def _is_int(e: Any, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def _is_broadcast(store: BufferStore, load: BufferLoad) -> bool:
    """Every load index appears among the store indices, in order (unit dims skipped)."""
    j = 0
    for dim, index in zip(load.buffer.shape, load.indices):
        if _is_int(dim, 1) and _is_int(index, 0):
            continue
        while j < len(store.indices) and store.indices[j] is not index:
            j += 1
        if j == len(store.indices):
            return False
    return True


def _store_vars(store: BufferStore) -> set | None:
    """The ids of the store's index variables, or None when an index is not a plain variable."""
    if not all(isinstance(i, Var) for i in store.indices):
        return None
    return {id(i) for i in store.indices}


def _index_vars(index: Any) -> list:
    """The variables an index expression reads: its own, and for a nested load the buffer's
    data pointer and the load's indices (not the buffer's shape), as TVM's UsesVar sees them."""
    found, stack = [], [index]
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            found.append(e)
        elif isinstance(e, BufferLoad):
            found.append(e.buffer.data)
            stack.extend(e.indices)
        else:
            stack.extend(c for c in children(e))
    return found


def _is_injective(store: BufferStore, load: BufferLoad) -> bool:
    allowed = _store_vars(store)
    if allowed is None:
        return False
    return all(id(v) in allowed for i in load.indices for v in _index_vars(i))


def _allows_reuse(store: BufferStore, load: BufferLoad) -> bool:
    """Some store variable is missing from the load's indices (the load is reused across it)."""
    remaining = _store_vars(store)
    if remaining is None:
        return False
    for index in load.indices:
        for v in _index_vars(index):
            remaining.discard(id(v))
    return bool(remaining)


def _strip_casts(e: Any) -> Any:
    while isinstance(e, Cast):
        e = e.value
    return e


def _is_fma(body: Any) -> bool:
    """``C[i, j] = C[i, j] + A[i, k] * B[k, j]`` (casts allowed around each part)."""
    if not isinstance(body, BufferStore):
        return False
    add = _strip_casts(body.value)
    if not isinstance(add, Add):
        return False
    mul = _strip_casts(add.b)
    if not isinstance(mul, Mul):
        return False
    acc = _strip_casts(add.a)
    if not isinstance(acc, BufferLoad) or acc.buffer is not body.buffer \
            or not _same_indices(body.indices, acc.indices):
        return False
    lhs, rhs = _strip_casts(mul.a), _strip_casts(mul.b)
    if not isinstance(lhs, BufferLoad) or not isinstance(rhs, BufferLoad):
        return False
    return _allows_reuse(body, lhs) and _allows_reuse(body, rhs)


def _is_pure_reduce(reduce_vars: list, indices: tuple) -> bool:
    """Each index that uses a reduction variable is exactly that variable."""
    ids = {id(v) for v in reduce_vars}
    for index in indices:
        used = [v for v in _index_vars(index) if id(v) in ids]
        if used and used[0] is not index:
            return False
    return True


class _PatternAnalyzer(Visitor):
    def __init__(self, func: PrimFunc):
        self.param_buffers = {id(b) for b in func.buffer_map.values()}
        self.kind = ELEMWISE
        self.store: BufferStore | None = None
        self.loads: list = []

    def visit_BufferStore(self, op: BufferStore) -> None:
        # one store per block (TE's shape); a second store elsewhere makes the block opaque
        if self.store is not None and not _same_indices(op.indices, self.store.indices):
            self.kind = OPAQUE
            return
        self.store = op
        self.generic_visit(op)

    def visit_BufferLoad(self, op: BufferLoad) -> None:
        self.loads.append(op)
        self.generic_visit(op)

    def visit_Block(self, op: Block) -> None:
        if op.name_hint == "root":
            self.visit(op.body)
            return
        self.loads, self.store = [], None
        self.visit(op.body)
        if self.store is None:
            self.kind = OPAQUE
            return
        store = self.store
        pattern, has_elemwise = ELEMWISE, False
        for load in self.loads:
            if _is_elemwise(store, load):
                has_elemwise = True
            elif _is_broadcast(store, load):
                pattern = max(pattern, BROADCAST)
            elif _is_injective(store, load):
                pattern = max(pattern, INJECTIVE)
            else:
                pattern = OPAQUE
                break
        if pattern == BROADCAST and has_elemwise:  # C[i, j] = A[i, j] + B[j]
            pattern = ELEMWISE
        if pattern != OPAQUE:
            if self._writes_param(op) and self.kind == COMM_REDUCE_KIND:
                self.kind = OUT_EWISE_FUSABLE  # a reduction followed by its output (softmax)
            else:
                self.kind = max(self.kind, pattern)
            return
        reduce_vars = [iv.var for iv in op.iter_vars if iv.iter_type == COMM_REDUCE]
        if not reduce_vars:
            self.kind = OPAQUE
            return
        pure = all(_is_pure_reduce(reduce_vars, ld.indices) for ld in self.loads)
        if _is_fma(op.body) or not pure:
            self.kind = max(self.kind, OUT_EWISE_FUSABLE)  # matmul, conv, pooling
            return
        self.kind = max(self.kind, COMM_REDUCE_KIND)

    def _writes_param(self, block: Block) -> bool:
        return any(id(w.buffer) in self.param_buffers for w in block.writes
                   if isinstance(w.buffer, Buffer))


def analyze_op_pattern(func: PrimFunc) -> int:
    """The op pattern kind of a PrimFunc (0 element-wise ... 8 opaque), as TVM computes it."""
    analyzer = _PatternAnalyzer(func)
    analyzer.visit(func.body)
    return analyzer.kind


def annotate_op_pattern(func: PrimFunc) -> PrimFunc:
    if func.attrs.get("op_pattern"):  # a nonzero annotation is kept; zero is recomputed
        return func
    return func.with_attr("op_pattern", analyze_op_pattern(func))


@module_pass(opt_level=0, name="AnnotateTIROpPattern")
class AnnotateTIROpPattern:
    """Every PrimFunc gets ``"op_pattern"``, the kind FuseOps groups operators by."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        for gv, f in mod.functions_items():
            if isinstance(f, PrimFunc):
                mod[gv] = annotate_op_pattern(f)
        return mod


register_pass(factory=AnnotateTIROpPattern)

__all__ = ["AnnotateTIROpPattern", "analyze_op_pattern", "annotate_op_pattern", "BROADCAST",
           "COMM_REDUCE_KIND", "ELEMWISE", "INJECTIVE", "OPAQUE", "OUT_EWISE_FUSABLE", "TUPLE"]
