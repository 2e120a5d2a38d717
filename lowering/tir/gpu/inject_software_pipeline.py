"""InjectSoftwarePipeline: a loop annotated ``software_pipeline_stage`` / ``software_pipeline_order``
becomes a prologue, a steady-state body and an epilogue, as TVM 0.27's pass does.

Each statement of the loop's body (a block made of it where it is not one; a nested block whose
body is a sequence, such as an inner loop already pipelined, gives each of its statements) has a
stage ``s`` and an order. In the rewritten loop the statements run in their order, a statement of
stage ``s`` on the iteration ``i - s``, so the loads of a later iteration overlap the compute of an
earlier one. The prologue runs the first ``max_stage`` iterations of the early stages, the
epilogue the last of the late ones (both unrolled); every statement is guarded by
``T.where(min <= i - s < min + extent)`` where that is not known to hold. A buffer allocated in
the loop that a stage defines and a later stage uses gets ``use - def + 1`` versions (a new first
dimension indexed ``(i - min) % versions``; for two stages only when a reader comes before the
writer in the new order, or when the block that writes it asks ``double_buffer_scope``), and the
WMMA calls and ``T.tvm_access_ptr`` that name it point at that version.

As in TVM, the statements' order must keep each buffer's writer before its reader in one stage
and never after it in stages. The statements of a stage listed in ``software_pipeline_async_stages``
run in ``T.attr(0, "async_scope", 1)``; consecutive ones form a commit group
(``async_commit_queue_scope``), and the first reader of their results waits
(``async_wait_queue_scope`` / ``async_wait_inflight_count``) until no more groups are in flight
than the stages between them allow (CUDA's ``cp.async.commit_group`` / ``wait_group``).
"""
from __future__ import annotations

from ....ir.analysis import infer_block_regions, substitute
from ....ir.arith import CANONICAL, Analyzer, canonical_ge_zero
from ....ir.arith.operators import binary
from ....ir.buffer import Buffer, BufferRegion
from ....ir.errors import TVMSError
from ....ir.expr import (EQ, LE, LT, Add, And, BufferLoad, Call, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Range, Sub,
                         const)
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.stmt import (UNROLLED, AttrStmt, Block, BlockRealize, BufferStore, Evaluate, For, SeqStmt, Stmt,
                         seq)
from ....ir.visitor import Mutator
from ..fresh_bindings import fresh_bindings
from ..tir_pass import define_tir_pass
from .infer_fragment import fragments

STAGE, ORDER, ASYNC = "software_pipeline_stage", "software_pipeline_order", "software_pipeline_async_stages"
_FRAGMENT_SIZE = {"wmma.matrix_a": lambda m, n, k: m * k, "wmma.matrix_b": lambda m, n, k: n * k,
                  "wmma.accumulator": lambda m, n, k: m * n}


def _value(e) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _and(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a && b`` folded as TVM's operator folds a constant side."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, IntImm):
            return y if x.value else x
    return And(a, b)


def _is_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


def make_block(body: Stmt, allocs: tuple = ()) -> Block:
    """TVM's MakeSBlock: the block of a realize without predicate, else an opaque block around
    ``body`` with the regions it accesses."""
    if isinstance(body, BlockRealize) and _is_true(body.predicate):
        return body.block
    block = Block(iter_vars=(), alloc_buffers=allocs, body=body)
    reads, writes = infer_block_regions(block)
    return block.with_changes(reads=reads, writes=writes)


class _Bounds:
    """What the pass proves about the emitted loops' variables: each one's range ``[start, end)``."""

    def __init__(self) -> None:
        self.ranges: dict = {}

    def extremes(self, e: PrimExpr) -> tuple:
        """``e`` (affine in the bound variables) at its least and its greatest."""
        low = high = e
        for var, (start, end) in self.ranges.items():
            last = binary(Sub, end, const(1, end.dtype))
            step = Analyzer().canonical(Sub(substitute(e, {var: Add(var, const(1, var.dtype))}), e))
            if step.terms:
                return None, None
            up = step.base >= 0
            low = substitute(low, {var: start if up else last})
            high = substitute(high, {var: last if up else start})
        return low, high

    def decide(self, cond: PrimExpr) -> bool | None:
        """True or False where the comparison ``cond`` holds or fails over the whole ranges."""
        if isinstance(cond, IntImm):
            return bool(cond.value)
        if not isinstance(cond, (LT, LE)):
            return None
        margin = Sub(cond.b, cond.a) if isinstance(cond, LE) else Sub(Sub(cond.b, cond.a), const(1, cond.a.dtype))
        low, high = self.extremes(margin)
        if low is None:
            return None
        analyzer = Analyzer()
        low, high = analyzer.canonical(low), analyzer.canonical(high)
        if not low.terms and low.base >= 0:
            return True
        if not high.terms and high.base < 0:
            return False
        return None

    def lower(self, low: PrimExpr, value: PrimExpr) -> PrimExpr:
        """``low <= value`` simplified (TVM's ``Simplify``): a constant where decided; ``i == c``
        where ``c`` is the last value of ``i``; else with the constant moved to the left (``1 <= k``)."""
        verdict = self.decide(LE(low, value))
        if verdict is not None:
            return const(verdict, "bool")
        cond = canonical_ge_zero(Sub(value, low))
        span = self.ranges.get(cond.b)
        if span is not None and _value(span[1]) is not None and _value(cond.a) == span[1].value - 1:
            return EQ(cond.b, cond.a)
        return cond

    def decide_all(self, cond: PrimExpr) -> bool:
        """Whether ``cond`` (comparisons joined by ``and``) holds over the whole ranges."""
        if isinstance(cond, And):
            return self.decide_all(cond.a) and self.decide_all(cond.b)
        return self.decide(cond) is True

    def never(self, cond: PrimExpr) -> bool:
        if isinstance(cond, And):
            return self.never(cond.a) or self.never(cond.b)
        return self.decide(cond) is False


class _VersionedAccesses(Mutator):
    """A statement's accesses to the multi-versioned buffers pointed at the version of the
    pipelined loop's iteration (TVM's PipelineBodyRewriter)."""

    def __init__(self, remap: dict, loop: For, all_versions: bool, shapes: dict) -> None:
        self.remap = remap
        self.by_data = {old.data: (old, new) for old, new in remap.items()}
        self.loop = loop
        self.all_versions = all_versions
        self.shapes = shapes  # fragment data -> (m, n, k)

    def version(self, new: Buffer, offset_min: bool = True) -> PrimExpr:
        index = binary(Sub, self.loop.loop_var, self.loop.min) if offset_min else self.loop.loop_var
        return binary(FloorMod, index, const(new.shape[0].value, index.dtype))

    def region(self, region: BufferRegion) -> BufferRegion:
        new = self.remap.get(region.buffer)
        if new is None:
            return region
        if self.all_versions:
            version = Range(const(0, new.shape[0].dtype), new.shape[0])
        else:
            index = self.version(new)
            version = Range(index, const(1, index.dtype))
        return BufferRegion(new, (version, *region.region))

    def visit_Block(self, block: Block) -> Stmt:
        block = self.generic_visit(block)
        return block.with_changes(reads=tuple(self.region(r) for r in block.reads),
                                  writes=tuple(self.region(r) for r in block.writes))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        new = self.remap.get(store.buffer)
        return store if new is None else store.with_changes(buffer=new, indices=(self.version(new), *store.indices))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        new = self.remap.get(load.buffer)
        return load if new is None else load.with_changes(buffer=new, indices=(self.version(new), *load.indices))

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        name = getattr(call.op, "name", "")
        args = list(call.args)
        if name in ("tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync"):
            self.fragment(args, 0, 4)
        elif name == "tir.tvm_mma_sync":
            for i in range(4):
                self.fragment(args, 2 * i, 2 * i + 1)
        elif name == "tir.tvm_access_ptr":
            self.pointer(args, 1)
        elif name == "tir.ptx_legacy.mma":  # (A, B and C: a data pointer, then its offset)
            for data in (6, 8, 10):
                self.pointer(args, data)
        elif name == "tir.ptx_legacy.ldmatrix":
            self.pointer(args, 3)
        else:
            return call
        return call.with_changes(args=tuple(args))

    def fragment(self, args: list, data: int, index: int) -> None:
        found = self.by_data.get(args[data])
        if found is None:
            return
        old, new = found
        scope = old.scope
        if args[data] not in self.shapes or scope not in _FRAGMENT_SIZE:
            raise TVMSError(f"InjectSoftwarePipeline: no fragment shape known for {old.name!r}")
        size = _FRAGMENT_SIZE[scope](*self.shapes[args[data]])
        fragments_per_version = binary(FloorDiv, _elements(old), const(size, old.shape[0].dtype))
        args[data] = new.data
        args[index] = binary(Add, args[index], binary(Mul, self.version(new), fragments_per_version))

    def pointer(self, args: list, data: int) -> None:
        found = self.by_data.get(args[data])
        if found is None:
            return
        old, new = found
        offset = new.strides[0] if new.strides else _elements(old)
        if old.scope in ("m16n8k8.matrixA", "m16n8k8.matrixB"):
            # (a thread holds a 32nd of these fragments: TransformMmaBufferLayout's registers)
            if not (isinstance(offset, IntImm) and offset.value % 32 == 0):
                raise TVMSError(f"InjectSoftwarePipeline: a version of {old.name!r} has {offset} elements, "
                                f"not a multiple of the warp's 32 threads")
            offset = const(offset.value // 32, offset.dtype)
        args[data] = new.data
        args[data + 1] = binary(Add, args[data + 1], binary(Mul, self.version(new, offset_min=False), offset))


def _elements(buffer: Buffer) -> PrimExpr:
    """The element count of one version of ``buffer``."""
    count = const(1, buffer.shape[0].dtype)
    for extent in buffer.shape:
        count = binary(Mul, count, extent)
    return count


def _may_conflict(a: BufferRegion, b: BufferRegion) -> bool:
    """Whether two regions of one buffer can overlap (they do unless one dimension is disjoint)."""
    analyzer = Analyzer()
    for x, y in zip(a.region, b.region):
        for first, second in ((x, y), (y, x)):
            gap = analyzer.canonical(Sub(Add(first.min, first.extent), second.min))
            if not gap.terms and gap.base <= 0:
                return False
    return True


class _Pipeline:
    """One annotated loop rewritten (TVM's PipelineRewriter), synchronous stages only."""

    def __init__(self, loop: For, blocks: list, stages: list, orders: list, allocs: list, double: set,
                 shapes: dict, annotations: dict, async_stages: set) -> None:
        self.loop = loop
        self.blocks = blocks
        self.stage = dict(zip(map(id, blocks), stages))
        self.ordered = [b for _, b in sorted(zip(orders, blocks), key=lambda p: p[0])]
        self.allocs = allocs
        self.double = double
        self.shapes = shapes
        self.annotations = annotations
        self.max_stage = max(stages)
        self.bounds = _Bounds()
        self.async_stages = async_stages
        self.produced: dict = {}  # async stage -> _Produced
        self.group_of: dict = {}  # buffer written asynchronously -> its commit group

    def versions(self, buffer: Buffer) -> int:
        """How many copies of ``buffer`` the pipeline keeps (TVM's ComputeBufferVersions)."""
        writers = [(b, r) for b in self.blocks for r in b.writes if r.buffer is buffer]
        readers = [(b, r) for b in self.blocks for r in b.reads if r.buffer is buffer]
        if not writers:
            return 1  # (defined outside the pipeline: left as it is)
        define = min(self.stage[id(b)] for b, _ in writers)
        use = max((self.stage[id(b)] for b, _ in readers), default=-1)
        count = use - define + 1
        if count == 2:
            order = {id(b): k for k, b in enumerate(self.ordered)}
            needed = any(order[id(w)] < order[id(r)] and self.stage[id(w)] < self.stage[id(r)] and _may_conflict(wr, rr)
                         for w, wr in writers for r, rr in readers)
            count = 2 if needed else 1
        return 2 if count == 1 and buffer in self.double else count

    def rewrite(self) -> Stmt:
        remap = {}
        for buffer in self.allocs:
            count = self.versions(buffer)
            if count > 1:
                strides = buffer.strides
                if strides:
                    strides = (binary(Mul, strides[0], buffer.shape[0]), *strides)
                remap[buffer] = buffer.with_changes(data=buffer.data.with_changes(), strides=strides,
                                                    shape=(const(count, "int32"), *buffer.shape))
        for old, new in remap.items():  # (an outer pipeline may version a fragment again, where TVM fails)
            if old.data in self.shapes:
                self.shapes[new.data] = self.shapes[old.data]
        self.remap = remap
        loop = self.loop
        start, extent = loop.min, loop.extent
        stop = binary(Add, start, extent)
        prologue = self.emit(start, binary(Add, start, const(self.max_stage, start.dtype)), True)
        body = self.emit(binary(Add, start, const(self.max_stage, start.dtype)), stop, False)
        epilogue_start, lower_bound = stop, None
        if self.max_stage > 1 and self.bounds.decide(LE(const(self.max_stage, start.dtype), extent)) is not True:
            if _value(stop) is not None and _value(start) is not None:
                epilogue_start = const(max(stop.value, start.value + self.max_stage))
            else:  # (a dynamic extent: the epilogue's statements get a lower bound)
                lower_bound = binary(Add, start, const(self.max_stage, start.dtype))
        epilogue = self.emit(epilogue_start, binary(Add, stop, const(self.max_stage, start.dtype)), True, lower_bound)
        allocs = tuple(remap.get(b, b) for b in self.allocs)
        return BlockRealize((), const(True), make_block(SeqStmt((prologue, body, epilogue)), allocs))

    def emit(self, start: PrimExpr, end: PrimExpr, unroll: bool, lower_bound: PrimExpr | None = None) -> Stmt:
        """The statements of the iterations ``[start, end)`` (TVM's EmitImpl)."""
        loop = self.loop
        extent = binary(Sub, end, start)
        nop = BlockRealize((), const(True), Block(iter_vars=(), body=Evaluate(const(0))))
        bounds = self.bounds
        if bounds.decide(LE(extent, const(0, extent.dtype))) is True:
            return nop
        unit = bounds.decide(LE(extent, const(1, extent.dtype))) is True
        normalized = _Bounds()  # (the loop as emitted: from the pipelined loop's start)
        if unit:
            var = start
        else:
            var = loop.loop_var.with_changes()
            bounds.ranges[var] = (start, end)
            normalized.ranges[var] = (loop.min, binary(Add, loop.min, extent))
        delta = binary(Sub, start, loop.min)
        emitted = []
        local: dict = {}  # async stage -> its _Local state in this part
        for block in self.ordered:
            stage = self.stage[id(block)]
            skewed = binary(Sub, var, const(stage, var.dtype))
            inbound = _and(bounds.lower(loop.min, skewed), binary(LT, skewed, binary(Add, loop.min, loop.extent)))
            if lower_bound is not None:
                inbound = _and(inbound, binary(LE, lower_bound, var))
            if bounds.never(inbound):
                continue
            new = _VersionedAccesses(self.remap, loop, self.max_stage != 1, self.shapes).visit(block)
            index = skewed if unit else binary(Add, skewed, delta)
            if not unit:
                inbound = substitute(inbound, {var: binary(Add, var, delta)})
            new = fresh_bindings(substitute(new, {loop.loop_var: index}))
            is_async = stage in self.async_stages
            if is_async:
                new = self.produce(local.setdefault(stage, _Local()), stage, new, index, inbound, len(emitted), normalized)
            emitted.append(_Emitted(stage, inbound, new, index, is_async))
            for region in new.reads:  # (a read of an async stage's result: its later writes commit apart)
                for producer, state in self.produced.items():
                    if producer <= stage and region.buffer in state.buffers:
                        local.setdefault(producer, _Local()).consumed = True
        self.place_waits(emitted, local, normalized)
        statements = self.commit(emitted, local, normalized)
        if not statements:
            return nop
        body = statements[0] if len(statements) == 1 else SeqStmt(tuple(statements))
        if not unit:
            body = For(var, loop.min, extent, UNROLLED if unroll else loop.kind, body, annotations=self.annotations)
        for stage, state in local.items():  # (how far each async stage's commits are known to count)
            known = state.predicate is not None and normalized.decide_all(state.predicate)
            head = self.produced[stage].head
            self.produced[stage].head = binary(Add, head, extent) if known and head is not None else None
        return BlockRealize((), const(True), make_block(body))

    # ------------------------------------------------------------ asynchronous stages
    def produce(self, state: "_Local", stage: int, block: Block, index: PrimExpr, inbound: PrimExpr, position: int,
                normalized: _Bounds) -> Block:
        """Record an async stage's statement in its commit group; its body in ``async_scope``."""
        if not state.groups or state.consumed:  # (after a consumer, later writes are a group of their own)
            state.groups.append([position])
        else:
            state.groups[-1].append(position)
        produced = self.produced.setdefault(stage, _Produced())
        for region in block.writes:
            produced.buffers.add(region.buffer)
            self.group_of[region.buffer] = len(state.groups) - 1
        state.head = index
        if state.predicate is None or normalized.decide_all(state.predicate):
            state.predicate = inbound
        else:
            state.predicate = _and(state.predicate, inbound)
        return block.with_changes(body=AttrStmt(0, "async_scope", const(1), block.body))

    def place_waits(self, emitted: list, local: dict, normalized: _Bounds) -> None:
        """Where each consumer of an async stage waits, and how many commit groups may still be in
        flight there (TVM's PopulateWaitCounts)."""
        for position, item in enumerate(emitted):
            if item.is_async:
                local[item.stage].seen.update(r.buffer for r in item.block.writes)
            producers = {p for region in item.block.reads for p, state in self.produced.items()
                         if p <= item.stage and region.buffer in state.buffers}
            if not producers:
                continue
            if len(producers) > 1:
                raise TVMSError("InjectSoftwarePipeline: a dependency on multiple async stages is not supported")
            (producer,) = producers
            state = local.setdefault(producer, _Local())
            if not state.groups:  # (the epilogue: no producer here, the count so far)
                heads = [self.produced[producer].head]
            else:
                heads, pending = [], set(range(len(state.groups)))
                for region in item.block.reads:
                    group = self.group_of.get(region.buffer) if region.buffer in self.produced[producer].buffers else None
                    if group in pending:
                        # (a buffer not yet written in this iteration was last written by the previous one)
                        heads.append(state.head if region.buffer in state.seen else binary(Sub, state.head, const(1, state.head.dtype)))
                        pending.discard(group)
            count = self.in_flight(heads, item.index, normalized)
            if state.wait is None:
                state.wait = (position, count)
            elif self.bounds.decide(LT(count, state.wait[1])) is True:
                state.wait = (state.wait[0], count)

    @staticmethod
    def in_flight(heads: list, consumer: PrimExpr, normalized: _Bounds) -> PrimExpr:
        total = const(0, consumer.dtype)
        for head in heads:
            if head is None or normalized.decide(LE(const(0, head.dtype), head)) is not True:
                return const(0, consumer.dtype)  # (not known: wait for all)
            total = binary(Add, total, Analyzer(CANONICAL).simplify(Sub(head, consumer)))
        return total

    def commit(self, emitted: list, local: dict, normalized: _Bounds) -> list:
        """The statements: each consumer's wait around its body, consecutive statements of one
        async stage in one ``async_commit_queue_scope`` (TVM's CompletePipelineLoopStatements)."""
        stage_of = [None] * len(emitted)
        for stage, state in local.items():
            for group in state.groups:
                for k in range(len(group)):
                    stage_of[group[0] + k] = stage
            if state.wait is not None:
                position, count = state.wait
                if state.predicate is not None and not normalized.decide_all(state.predicate):
                    count = Call(count.dtype, get_op("tir.if_then_else"), (state.predicate, count, const(0, count.dtype)))
                block = emitted[position].block
                emitted[position].block = block.with_changes(body=AttrStmt(
                    0, "async_wait_queue_scope", const(stage), AttrStmt(0, "async_wait_inflight_count", count, block.body)))
        statements, k = [], 0
        while k < len(emitted):
            if stage_of[k] is None:
                statements.append(BlockRealize((), emitted[k].predicate, emitted[k].block))
                k += 1
                continue
            stage, predicate, bodies = stage_of[k], emitted[k].predicate, []
            while k < len(emitted) and stage_of[k] == stage:
                bodies.append(emitted[k].block.body)
                k += 1
            body = AttrStmt(0, "async_commit_queue_scope", const(stage), seq(bodies))
            statements.append(BlockRealize((), predicate, make_block(body)))
        return statements


class _Produced:
    """An async stage across the prologue, body and epilogue: the buffers it writes, and the
    index of its latest commit group counted from the first (None once it cannot be counted)."""

    def __init__(self) -> None:
        self.buffers: set = set()
        self.head: PrimExpr | None = const(-1)


class _Local:
    """An async stage within one of the prologue, body and epilogue."""

    def __init__(self) -> None:
        self.wait: tuple | None = None  # (the statement that waits, the groups left in flight)
        self.seen: set = set()  # the buffers written so far in the iteration
        self.head: PrimExpr | None = None  # the iteration its latest write belongs to
        self.predicate: PrimExpr | None = None
        self.groups: list = []  # the statements of each commit group
        self.consumed = False


class _Emitted:
    def __init__(self, stage: int, predicate: PrimExpr, block: Block, index: PrimExpr, is_async: bool) -> None:
        self.stage, self.predicate, self.block, self.index, self.is_async = stage, predicate, block, index, is_async


def _annotation(loop: For, key: str) -> list:
    return [int(getattr(v, "value", v)) for v in loop.annotations[key]]


class _Injector(Mutator):
    def __init__(self, func: PrimFunc) -> None:
        self.name = str(func.attrs.get("global_symbol", "main"))
        self.shapes = {data: shape for data, (shape, _) in fragments(func.body).items()}
        self.double: set = set()

    def visit_Block(self, block: Block) -> Stmt:
        index = block.annotations.get("double_buffer_scope")
        if index is not None:
            index = int(getattr(index, "value", index))
            if not 0 <= index < len(block.writes):
                raise TVMSError(f"InjectSoftwarePipeline: double_buffer_scope {index} is not a write of block "
                                f"{block.name_hint!r} ({len(block.writes)} writes)")
            self.double.add(block.writes[index].buffer)
        return self.generic_visit(block)

    def visit_For(self, loop: For) -> Stmt:
        original = loop
        loop = self.generic_visit(loop)
        has_stage, has_order = STAGE in loop.annotations, ORDER in loop.annotations
        if not (has_stage or has_order):
            return loop
        if not has_order:
            raise TVMSError("InjectSoftwarePipeline: the order of the software pipeline is not defined "
                            f"(loop {original.loop_var.name!r} has {STAGE} but no {ORDER})")
        if not has_stage:
            raise TVMSError("InjectSoftwarePipeline: the stage of the software pipeline is not defined "
                            f"(loop {original.loop_var.name!r} has {ORDER} but no {STAGE})")
        body, allocs = loop.body, []
        if isinstance(body, BlockRealize):
            allocs = list(body.block.alloc_buffers)
            body = body.block.body
        if not isinstance(body, SeqStmt):
            raise TVMSError(f"InjectSoftwarePipeline: the body of the software pipeline (loop "
                            f"{original.loop_var.name!r}) should be a sequence of statements, got {type(body).__name__}")
        blocks = []
        for child in body.seq:
            if isinstance(child, BlockRealize) and _is_true(child.predicate) and isinstance(child.block.body, SeqStmt):
                allocs += child.block.alloc_buffers  # (a nested sequence, e.g. an inner pipeline: its statements)
                blocks += [make_block(s) for s in child.block.body.seq]
            else:
                blocks.append(make_block(child))
        stages, orders = _annotation(loop, STAGE), _annotation(loop, ORDER)
        if len(stages) != len(blocks) or len(orders) != len(blocks):
            raise TVMSError(f"InjectSoftwarePipeline: PrimFunc {self.name} has {len(blocks)} statements in the body of "
                            f"loop {original.loop_var.name!r}, but its pipeline annotation is {STAGE}={stages}, "
                            f"{ORDER}={orders}")
        _validate(blocks, stages, orders)
        kept = {k: v for k, v in loop.annotations.items() if k not in (STAGE, ORDER, ASYNC)}
        async_stages = set(_annotation(loop, ASYNC)) if ASYNC in loop.annotations else set()
        return _Pipeline(loop, blocks, stages, orders, allocs, self.double, self.shapes, kept, async_stages).rewrite()


def _validate(blocks: list, stages: list, orders: list) -> None:
    """TVM's ValidatePipelineBody: distinct orders, and no dependence that the new order or
    stages would run backwards."""
    if len(set(orders)) != len(orders):
        raise TVMSError("InjectSoftwarePipeline: two statements in the software pipeline cannot have the same order")
    if sorted(orders) != list(range(len(orders))):
        raise TVMSError(f"InjectSoftwarePipeline: the orders {orders} are not a permutation of 0..{len(orders) - 1}")
    writers: dict = {}
    for k, block in enumerate(blocks):
        for region in block.reads:
            for w in writers.get(region.buffer.data, ()):
                if stages[w] > stages[k]:
                    raise TVMSError(f"InjectSoftwarePipeline: statement {k} in stage {stages[k]} cannot depend on "
                                    f"statement {w} in a later stage {stages[w]}")
                if stages[w] == stages[k] and orders[w] >= orders[k]:
                    raise TVMSError("InjectSoftwarePipeline: two statements with buffer access dependency in the same "
                                    "stage of the software pipeline cannot be reordered")
        for region in block.writes:
            writers.setdefault(region.buffer.data, []).append(k)


def inject_software_pipeline(func: PrimFunc) -> PrimFunc:
    """``func`` with its loops annotated for software pipelining rewritten (see the module)."""
    body = _Injector(func).visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


InjectSoftwarePipeline = define_tir_pass("InjectSoftwarePipeline", inject_software_pipeline)

__all__ = ["InjectSoftwarePipeline", "inject_software_pipeline"]
