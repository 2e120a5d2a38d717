"""LowerAsyncDMA: the copies of an async commit group become DMA builtins, as TVM 0.27's
``s_tir.transform.LowerAsyncDMA`` writes them (run by the pipeline under ``tirx.use_async_copy``,
after StorageRewrite).

Inside ``T.attr(0, "async_commit_queue_scope", q)``, a loop nest that copies a contiguous run of
one flat buffer into a contiguous run of another, element for element in the same order (TVM's
IdentifyMemCpy), becomes ``T.dma_copy(q, T.address_of(dst[dst_min]), T.address_of(src[src_min]),
bytes, 0)``; any other loop stays and is searched for such nests inside. A wait scope of a queue
that has had a copy, ``async_wait_queue_scope`` q around ``async_wait_inflight_count`` n, becomes
``T.dma_wait(q, n)`` before its body. A commit scope counted with more than one copy is put
between ``T.dma_start_group(q)`` and ``T.dma_end_group(q)``; as in TVM, each attribute's body is
visited twice (once before its key is looked at), so a copy under ``async_scope`` counts twice
and a single copy there is grouped too.

The last argument of ``dma_copy`` is TVM's ``tirx.experimental_dma_bypass_cache``, which TVM
0.27 reads but does not register: a PassContext setting it is refused there, and this pass
refuses it too. No code generator of TVM (nor of tvms) takes these builtins for cuda; the
reference executor runs them outside GPU kernels (runtime/reference_dma.py).
"""
from __future__ import annotations

from ....ir.arith.analyzer import Analyzer
from ....ir.buffer import element_bytes
from ....ir.dtype import int32
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, Call, IntImm, Mul, Var, const
from ....ir.analysis import substitute
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.stmt import AttrStmt, BufferStore, Evaluate, For, Stmt, seq
from ....ir.visitor import Mutator, walk
from ...transform import PassContext
from ..tir_pass import define_tir_pass

BYPASS_CACHE = "tirx.experimental_dma_bypass_cache"


def _builtin(name: str, *args) -> Evaluate:
    return Evaluate(Call(int32, get_op(f"tir.{name}"), tuple(const(a, "int32") if isinstance(a, int) else a
                                                            for a in args)))


def _digits(analyzer: Analyzer, index, nest: dict):
    """``index`` as (pieces over the nest's loops sorted by scale, the rest), or None where a
    term mixes the nest's loops with anything else (not an affine copy). A piece is (scale, loop,
    lower, upper): the digits ``loop // lower % upper``; upper None for a loop of symbolic extent,
    taken whole."""
    total = analyzer.canonical(index)
    pieces, rest = [], []
    for t in total.terms:
        used = {id(v) for v in walk(t.index) if isinstance(v, Var)} & set(nest)
        if not used:
            rest.append(t)
            continue
        if not isinstance(t.index, Var) or t.scale <= 0:
            return None
        extent = nest[id(t.index)]
        if not isinstance(extent, int):
            if t.lower != 1 or t.upper is not None:
                return None
            pieces.append((t.scale, id(t.index), 1, None))
            continue
        upper = t.upper if t.upper is not None else extent // t.lower
        if extent % (t.lower * upper):
            return None  # (a digit that does not take all its values equally often)
        pieces.append((t.scale, id(t.index), t.lower, upper))
    return sorted(pieces, key=lambda p: p[:3]), rest


def _elements(pieces: list, nest: dict):
    """How many elements the pieces reach when they are one contiguous run covering every
    iteration of the nest once (an int, or an expression for a symbolic extent), else None."""
    reach, symbolic = 1, None
    for scale, loop, _, upper in pieces:
        if scale != reach or symbolic is not None:
            return None  # (a gap or an overlap, or digits above a symbolic extent)
        if upper is None:
            symbolic = nest[loop]
        else:
            reach *= upper
    sizes = [e for e in nest.values() if isinstance(e, int)]
    whole = 1
    for e in sizes:
        whole *= e
    if reach != whole or (symbolic is None) != (len(sizes) == len(nest)):
        return None
    if symbolic is None:
        return reach
    return symbolic if reach == 1 else Mul(symbolic, const(reach, symbolic.dtype))


def identify_memcpy(loop: For, analyzer: Analyzer):
    """(dst buffer, dst_min, src buffer, src_min, elements) when the loop nest ``loop`` copies
    a contiguous run of a flat buffer to a contiguous run of another in the same order, else None
    (TVM's IdentifyMemCpy, on the flat buffers LowerAsyncDMA takes)."""
    nest: dict = {}
    zeros: dict = {}
    stmt: Stmt = loop
    while isinstance(stmt, For):
        if not (isinstance(stmt.min, IntImm) and stmt.min.value == 0):
            return None
        nest[id(stmt.loop_var)] = stmt.extent.value if isinstance(stmt.extent, IntImm) else stmt.extent
        zeros[stmt.loop_var] = const(0, stmt.loop_var.dtype)
        stmt = stmt.body
    if not (isinstance(stmt, BufferStore) and isinstance(stmt.value, BufferLoad)):
        return None
    store, load = stmt, stmt.value
    if len(store.indices) != 1 or len(load.indices) != 1 or len(store.buffer.shape) != 1 \
            or len(load.buffer.shape) != 1 or store.indices[0].dtype.lanes != 1 or load.indices[0].dtype.lanes != 1:
        return None
    sides = [_digits(analyzer, store.indices[0], nest), _digits(analyzer, load.indices[0], nest)]
    if None in sides or sides[0][0] != sides[1][0]:
        # (not affine, or the two sides walk the loops differently: a transpose, or a source
        # that repeats, ``A[i % 4]`` copied to ``B[i]``)
        return None
    count = _elements(sides[0][0], nest)
    if count is None:
        return None
    dst_min = analyzer.simplify(substitute(store.indices[0], zeros))
    src_min = analyzer.simplify(substitute(load.indices[0], zeros))
    return store.buffer, dst_min, load.buffer, src_min, count


def _times(count, factor: int):
    return count * factor if isinstance(count, int) else Mul(count, const(factor, count.dtype))


class _Lowerer(Mutator):
    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self.queue: int | None = None  # the commit scope being visited
        self.copies = 0  # the copies counted in it
        self.queues_copied: set = set()

    def visit_For(self, loop: For) -> Stmt:
        if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
            self.analyzer.bind(loop.loop_var, loop.min.value, loop.extent.value)
        found = identify_memcpy(loop, self.analyzer) if self.queue is not None else None
        if found is None:
            return self.generic_visit(loop)
        dst, dst_min, src, src_min, count = found
        self.queues_copied.add(self.queue)
        self.copies += 1
        return _builtin("dma_copy", self.queue, Call(dst.data.dtype, get_op("tir.address_of"), (BufferLoad(dst, (dst_min,)),)),
                        Call(src.data.dtype, get_op("tir.address_of"), (BufferLoad(src, (src_min,)),)),
                        _times(count, element_bytes(src.dtype)), 0)  # (0: no bypass_cache, see above)

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key == "thread_extent" and isinstance(attr.value, IntImm):
            self.analyzer.bind(attr.node.var, 0, attr.value.value)
        # TVM visits the body once before looking at the key; only inside a commit scope does
        # that change anything (its copies count twice), so elsewhere it is left out
        previsit = self.generic_visit(attr) if self.queue is not None else None
        if attr.attr_key == "async_wait_queue_scope":
            queue = _queue(attr)
            inner = attr.body
            if queue not in self.queues_copied or not (isinstance(inner, AttrStmt)
                                                       and inner.attr_key == "async_wait_inflight_count"):
                return previsit if previsit is not None else self.generic_visit(attr)
            return seq([_builtin("dma_wait", queue, inner.value), self.visit(inner.body)])
        if attr.attr_key == "async_commit_queue_scope":
            self.queue = _queue(attr)
            result = self.generic_visit(attr)
            if self.copies > 1:
                result = seq([_builtin("dma_start_group", self.queue), result, _builtin("dma_end_group", self.queue)])
            self.queue, self.copies = None, 0
            return result
        return self.generic_visit(attr)


def _queue(attr: AttrStmt) -> int:
    if not isinstance(attr.value, IntImm):
        raise TVMSError(f"LowerAsyncDMA: the queue of {attr.attr_key!r} must be an integer constant, "
                        f"not {attr.value!r}")
    return attr.value.value


def lower_async_dma(func: PrimFunc) -> PrimFunc:
    """``func`` with the contiguous copies of its async commit groups as DMA builtins."""
    if BYPASS_CACHE in PassContext.current().config:
        raise TVMSError(f"Invalid config option {BYPASS_CACHE!r}: TVM 0.27's LowerAsyncDMA reads it, but "
                        f"TVM does not register it, so no PassContext can set it")
    body = _Lowerer().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


LowerAsyncDMA = define_tir_pass("LowerAsyncDMA", lower_async_dma)

__all__ = ["LowerAsyncDMA", "identify_memcpy", "lower_async_dma"]
