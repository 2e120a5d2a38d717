"""LowerAutoCopy's intermediate stages (TVM 0.27's memhammer_intermediate_stage.cc).

``insert_cache_stage`` puts a buffer of another scope between the two ends of a copy, below a
loop of the copy (the compute location): a read stage (global into registers, then into shared
memory) or a write stage (a tensor-core accumulator into shared memory, then out to global). The
stage is shaped by the loops below the compute location and the thread loops around the copy
whose threads share the new scope (threadIdx.y for shared memory; not threadIdx.x for a write
stage, whose tile a warp writes). A read stage whose source indices are sums of
``floormod(floordiv(loop * scale, d), m)`` pieces is "rank promoted": one dimension per piece that
moves, so the stage holds no gaps. CreateLocalStage is the read stage into ``local`` memory of a
coalesced copy, below its thread loops (lifted above the others).
"""
from __future__ import annotations

from ....ir.analysis import substitute
from ....ir.arith.operators import binary
from ....ir.buffer import decl_buffer
from ....ir.errors import TVMSError
from ....ir.expr import Add, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, Var, const
from ....ir.stmt import SERIAL, THREAD_BINDING, BufferStore, For, IfThenElse, SeqStmt, Stmt
from ....ir.visitor import Mutator, children
from ...scopes import GLOBAL, SHARED, can_relax_under_thread
from .auto_copy_rule import ConstraintSet, OutputSet, accumulator_load, copies_between, from_zero, loop_nest, \
    with_suffix, wrap

ACCUMULATORS = ("wmma.accumulator", "m16n8k8.matrixC")


def lift_thread_binding_loops(stmt: Stmt) -> tuple[Stmt, For | None]:
    """The loop nest ``stmt`` with its thread-bound loops moved outside the others (in their
    order), and the innermost of them (None where there is none)."""
    loops, body = loop_nest(stmt)
    bound = [loop for loop in loops if loop.kind == THREAD_BINDING]
    body = wrap([loop for loop in loops if loop.kind != THREAD_BINDING], body)
    innermost = None
    for loop in reversed(bound):
        body = loop.with_changes(body=body)
        innermost = innermost or body
    return body, innermost


class _Piece:
    """TVM's IndexPatternFinder: the moving pieces of one index (a variable under multiplications,
    floordivs and floormods by constants) as (extent, index of the piece)."""

    def __init__(self, ranges: dict) -> None:
        self.ranges = ranges
        self.ops: list = []
        self.shape: list = []
        self.indices: list = []
        self.ok = True

    def visit(self, e) -> None:
        if not self.ok:
            return
        if isinstance(e, Var):
            if e in self.ranges:
                self._piece(e)
            return
        if isinstance(e, (Mul, FloorDiv, FloorMod)):
            if not isinstance(e.b, IntImm):
                self.ok = False
                return
            self.ops.append((type(e), e.b.value))
            self.visit(e.a)
            self.visit(e.b)
            self.ops.pop()
            return
        for child in e.indices if isinstance(e, BufferLoad) else children(e):
            self.visit(child)

    def _piece(self, var: Var) -> None:
        largest = extent = self.ranges[var]
        index = var
        for kind, c in reversed(self.ops):
            if kind is Mul:
                largest *= c
                index = binary(Mul, index, const(c, index.dtype))
            elif kind is FloorDiv:
                if largest % c and c % largest:
                    self.ok = False
                    return
                largest //= c
                if extent > largest:
                    extent = max(1, largest)
                if largest % extent:
                    self.ok = False
                    return
                index = binary(FloorDiv, index, const(c, index.dtype))
            else:
                step = largest // extent
                if step % c and c % step:
                    self.ok = False
                    return
                if step % c == 0:
                    extent, largest = 1, 0
                else:
                    extent = max(1, min(extent, c // step))
                    largest = extent * step
                index = binary(FloorMod, index, const(c, index.dtype))
        if extent > 1:
            self.shape.append(extent)
            self.indices.append(binary(FloorDiv, index, largest // extent))


def rank_promoted_shape(indices, ranges: dict) -> tuple[list, list] | None:
    """The stage's shape and indices after rank promotion of the source ``indices``, or None."""
    shape, promoted = [], []
    for expr in indices:
        finder = _Piece(ranges)
        finder.visit(expr)
        if not finder.ok:
            return None
        size, flat = const(1), const(0)
        for extent, index in zip(finder.shape, finder.indices):
            size = binary(Mul, size, extent)
            flat = binary(Add, binary(Mul, flat, extent), index)
        shape.append(size)
        promoted.append(flat)
    return shape, promoted


class _ReplaceLoads(Mutator):
    def __init__(self, buffer, load: BufferLoad) -> None:
        self.buffer, self.load = buffer, load

    def visit_BufferLoad(self, load: BufferLoad):
        return self.load if load.buffer is self.buffer else self.generic_visit(load)


def _extent(loop: For, block: str) -> int:
    """The extent of a loop the stage spans (its shape is theirs)."""
    if not isinstance(loop.extent, IntImm):
        raise TVMSError(f"LowerAutoCopy: block {block!r} would stage a copy over loop {loop.loop_var.name!r} of "
                        "symbolic extent")
    return loop.extent.value


def insert_cache_stage(stmt: Stmt, is_write: bool, scope: str, compute_at: For | None, outer_loops,
                       block: str) -> tuple[list, SeqStmt, object]:
    """A stage of ``scope`` in the copy ``stmt`` below ``compute_at`` (see the module): the loops
    down to ``compute_at``, the two statements (fill and use, in their order) that go inside
    them, and the stage's buffer."""
    loops, under, relaxed, ranges = [], [], [], {}
    relax = compute_at is None
    body = stmt
    while isinstance(body, For):
        if relax:
            ranges[body.loop_var] = _extent(body, block)
            under.append(body)
        else:
            loops.append(body)
        if body is compute_at:
            relax = True
        body = body.body
    predicate = None
    if isinstance(body, IfThenElse):  # (the bound coalescing put there)
        predicate, body = body.condition, body.then_case
    for loop in outer_loops:
        if loop.kind == THREAD_BINDING and can_relax_under_thread(scope, loop.thread_binding.thread_tag):
            if is_write and loop.thread_binding.thread_tag == "threadIdx.x":
                continue  # (a warp writes the accumulator's tile)
            ranges[loop.loop_var] = _extent(loop, block)
            relaxed.append(loop)
    from_zero(relaxed + under, block)  # (the stage's shape is their extents)
    if not isinstance(body, BufferStore):
        raise TVMSError(f"LowerAutoCopy: block {block!r} must copy by one store under its loops")
    target = None
    if is_write:
        target = accumulator_load(stmt, ACCUMULATORS, block)
    cache_indices, shape = [], None
    if not is_write and isinstance(body.value, BufferLoad):
        promoted = rank_promoted_shape(body.value.indices, ranges)
        if promoted is not None and promoted[0]:
            shape, cache_indices = promoted
    stage_loops = relaxed + under
    if shape is None:
        shape = [loop.extent for loop in stage_loops]
        cache_indices = [loop.loop_var for loop in stage_loops]
    renamed = {loop.loop_var: with_suffix(loop.loop_var, "_cache") for loop in stage_loops}
    source = target.buffer if is_write else body.buffer
    name = f"{source.name}_{scope}"
    # compact (TVM gives the stage the strides of the buffer the stage stands for: registers wasted,
    # and wrong where that buffer has another number of dimensions than the stage)
    stage_buffer = decl_buffer(tuple(const(s) if isinstance(s, int) else s for s in shape), source.dtype, name,
                               scope=scope)
    at_stage = BufferLoad(stage_buffer, tuple(cache_indices))
    if is_write:
        fill = substitute(_ReplaceLoads(target.buffer, at_stage).visit(body), renamed)
    else:
        fill = BufferStore(stage_buffer, substitute(body.value, renamed),
                           tuple(substitute(i, renamed) for i in cache_indices))
    if predicate is not None:
        fill = IfThenElse(substitute(predicate, renamed), fill)
    for loop in reversed(under):
        fill = loop.with_changes(loop_var=renamed[loop.loop_var], body=fill)
    for loop in reversed(relaxed):
        fill = For(renamed[loop.loop_var], loop.min, loop.extent, SERIAL, fill)
    if is_write:
        use: Stmt = BufferStore(stage_buffer, target, tuple(cache_indices))
    else:
        use = BufferStore(body.buffer, at_stage, body.indices)
    if predicate is not None:
        use = IfThenElse(predicate, use)
    use = wrap(under, use)
    return loops, SeqStmt((use, fill) if is_write else (fill, use)), stage_buffer


def create_local_stage(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not (copies_between(constraints, GLOBAL, SHARED) and constraints.local_stage):
        return stmt
    lifted, compute_at = lift_thread_binding_loops(stmt)
    loops, pair, buffer = insert_cache_stage(lifted, False, "local", compute_at, constraints.outer_loops,
                                             constraints.block)
    output.alloc_buffers.append(buffer)
    return wrap(loops, pair)


__all__ = ["create_local_stage", "insert_cache_stage", "lift_thread_binding_loops", "rank_promoted_shape"]
