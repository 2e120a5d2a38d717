"""VerifyGPUCode: reject a candidate whose kernels a GPU cannot launch (TVM's postprocessor of
the same name, with its limits: the target's ``max_threads_per_block`` and
``max_shared_memory_per_block``, 16 bytes to a vector access, and the thread-count range that
MultiLevelTiling marks on a block).

TVM lowers the candidate through its GPU pipeline and counts on the lowered kernels. This check
reads the scheduled TensorIR itself (or an already lowered function: ``T.launch_thread`` and
``T.alloc_buffer`` count as well), and finds what that lowering would find:

* a kernel is the nest under an outermost thread-bound loop; its threads per block are the
  product of its ``threadIdx.x/y/z`` extents, and two loops bound to one thread axis in a kernel
  must agree on the extent (UnifyThreadBinding refuses them otherwise);
* a ``shared`` buffer a block allocates is placed where PlanAndUpdateBufferAllocationLocation
  puts it (the lowest loop or block around all its accesses) and compacted as
  CompactBufferAllocation compacts it: the loops inside that place and the kernel's
  ``threadIdx``/``vthread`` loops range over their extents, the others stay fixed, and a block's
  predicate ``e < c`` bounds the indices divided from ``e``; a tensorized block (one with
  ``match_buffer`` regions, a WMMA fragment load say) accesses its regions' corners; rows are
  padded as storage_align asks (but in buffers LowerAutoCopy writes: it pads them itself);
* a software pipeline (a loop marked ``software_pipeline_stage``) keeps as many versions of
  such a buffer as InjectSoftwarePipeline would (a copy staged through registers by
  ManifestSharedMemoryLocalStage counting as the two statements it becomes);
* a vectorized loop makes each access it indexes (and each cast of such a value) a vector of
  its extent's lanes; an access whose flattened index steps by more than 1 along those lanes
  (a gather, say a transposed copy) has a vector index too (a ramp of int32 lanes, or of int64
  lanes where the index ranges beyond int32 over its loops: TVM's NarrowDataType narrows the
  others), held to the same limit.

* where blocks are annotated ``auto_copy`` (the tensor-core rules' ``read_at``/``write_at``
  copies), TVM's list runs LowerAutoCopy, which adds shared memory: the stage through which a
  tensor-core accumulator is written out (a new buffer of the copy block), and the padding of
  shared rows against bank conflicts (wider strides). For those, this check runs tvms's
  pipeline up to LowerAutoCopy (the passes before it, the Simplify TVM's check runs right
  before it, and it; a candidate it cannot lower is refused, as TVM's check refuses one its
  passes fail on) and counts each copy block's stages in its kernel, and a padded buffer at its
  padded size (times its versions). A stage of no constant size is refused: TVM's check counts
  such an allocation as 0 bytes (``ConstantAllocationSize``) and lets the candidate through to
  fail later; here, as for any shared buffer, a size that is not a constant gives no safe
  verdict. That costs: about 60 ms on the mma.sync candidate of the tests, against 1 ms for the
  rest of the check, so the postprocessor runs it only for a candidate the rest lets through
  (it only adds).

On the candidates of the tests (GMM, convolutions, softmax, norms, pipelines, the mma.sync
candidate's 123904 bytes: three versions of its operand tiles and the 1024-byte write-out stage)
the shared memory counted is TVM's to the byte; on DLight's float16 plans it is what tvms's
lowering places in dynamic shared memory, buffer by buffer. Not counted is what lowering could still take
away or fail at: StorageRewrite sharing one allocation between buffers whose lifetimes do not
overlap (the count is then an upper bound), index bounds TVM's integer sets prove tighter than
interval arithmetic, and the failures of the passes after LowerAutoCopy (a candidate TVM's
pipeline cannot lower). The whole lowering is not run per candidate because the search
post-processes thousands of them; the replay's precheck does not run LowerAutoCopy either (what
it adds only adds: without it the count is a lower bound).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

from ...ir.arith.analyzer import Analyzer
from ...ir.analysis import substitute
from ...ir.buffer import Buffer
from ...ir.errors import TVMSError
from ...ir.expr import LT, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, PrimExpr, Sub, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import VECTORIZED, AllocBuffer, AttrStmt, Block, BlockRealize, BufferStore, For, SeqStmt, Stmt
from ...ir.visitor import Mutator, children, walk
from ..schedule.loop_transform import conjuncts
from ..tir.compact_buffer_allocation import aligned_strides, storage_aligns
from ..tir.gpu.lower_auto_copy import lower_auto_copy
from ..tir.gpu.pipeline import BEFORE_ENTRY
from ..tir.stmt_simplify import stmt_simplify
from .postproc import Postproc
from .rule_analysis import const_int
from .rule_auto_bind import target_limit

MAX_VECTOR_BYTES = 16
THREAD_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_HIGH = "meta_schedule.thread_extent_high_inclusive"
PIPELINE_STAGE = "software_pipeline_stage"
WARP_EXECUTION = "warp_execution"
AUTO_COPY = "auto_copy"
LOCAL_STAGE = "tirx.manifest_shared_memory_local_stage"
# (the build's passes up to LowerAutoCopy, with the Simplify that TVM's check runs right before it)
UP_TO_AUTO_COPY = (*BEFORE_ENTRY[:BEFORE_ENTRY.index(lower_auto_copy)], stmt_simplify, lower_auto_copy)
_THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass
class _Kernel:
    threads: dict = field(default_factory=dict)  # threadIdx tag -> extent
    shared_bytes: int = 0


@dataclass
class _Loop:
    """An enclosing loop (or thread launch) as the analyses need it."""

    node: Any
    var: Var
    start: int
    extent: int | None
    tag: str
    vectorized: bool


@dataclass
class _Access:
    kernel: _Kernel | None
    scopes: tuple  # the enclosing loops and blocks, outermost first
    loops: tuple  # the enclosing _Loops, outermost first
    indices: tuple  # in terms of the loop variables
    writes: bool
    limits: tuple  # (e, c): the enclosing blocks' predicates e < c


def _bytes(dtype: Any) -> int:
    return (dtype.bits * dtype.lanes + 7) // 8


def _fits_int32(index: PrimExpr, loops: tuple) -> bool:
    """Whether TVM's lowering narrows ``index`` to int32 before its check reads it
    (NarrowDataType(32): where its range over the loops around it fits)."""
    analyzer = Analyzer()
    for loop in loops:
        if loop.extent:  # (a loop of symbolic extent leaves its variable, and so the bound, unknown)
            analyzer.bind(loop.var, loop.start, loop.extent)
    bound = analyzer.bound(index)
    return bound is not None and -2 ** 31 <= bound[0] and bound[1] < 2 ** 31


def _vars(expr: Any) -> set:
    return {id(n) for n in walk(expr) if isinstance(n, Var)}


@dataclass
class _AutoCopied:
    """What LowerAutoCopy adds to a function's shared memory: the stages each copy block (by
    name) allocates, with their bytes (None: not a constant), the padded bytes of each shared
    buffer (by name) it pads."""

    stages: dict = field(default_factory=dict)
    padded: dict = field(default_factory=dict)


def _auto_copied(func: PrimFunc) -> _AutoCopied | str:
    """LowerAutoCopy's additions to ``func`` (which has an ``auto_copy`` block), or why tvms's
    pipeline cannot lower ``func`` up to it."""
    added = _AutoCopied()
    lowered = func
    try:
        for step in UP_TO_AUTO_COPY:
            lowered = step(lowered)
    except TVMSError as err:
        return f"LowerAutoCopy, or a pass before it, cannot lower it: {err}"
    for node in walk(lowered.body):
        if not isinstance(node, Block):
            continue
        for buffer in node.alloc_buffers:
            if not buffer.scope.startswith("shared"):
                continue
            size = _allocated_size(buffer)
            if node.annotations.get(AUTO_COPY):  # (a stage of the copy)
                added.stages.setdefault(node.name_hint, []).append((buffer, size))
            elif buffer.strides and size is not None and size > (_size(buffer) or size):
                added.padded[buffer.name] = size
    return added


class _Verifier:
    def __init__(self, max_threads: int, max_shared: int, warp_size: int,
                 auto_copied: _AutoCopied | None = None) -> None:
        self.max_threads, self.max_shared, self.warp_size = max_threads, max_shared, warp_size
        self.auto_copied = auto_copied or _AutoCopied()
        self.saw_auto_copy = False  # (whether a block is marked auto_copy: LowerAutoCopy would add to it)
        self.errors: list[str] = []
        self.kernels: list[_Kernel] = []
        self.allocated: list[Buffer] = []  # shared buffers blocks allocate, placed after the walk
        self.accesses: dict[Buffer, list[_Access]] = {}
        self.limits: dict[int, list] = {}  # id(block) -> its predicate's parts e < c
        self.aligns: dict = {}  # buffer -> {dimension: (factor, offset)}: storage_align's padded rows

    # ------------------------------------------------------------ the walk
    def visit(self, stmt: Any, kernel: _Kernel | None, scopes: tuple, loops: tuple, binding: dict,
              threads: dict) -> None:
        if isinstance(stmt, For):
            tag = stmt.thread_binding.thread_tag if stmt.thread_binding is not None else ""
            self._enter_loop(stmt, stmt.loop_var, stmt.min, stmt.extent, tag, stmt.kind == VECTORIZED, stmt.body,
                             kernel, scopes, loops, binding, threads)
            return
        if isinstance(stmt, AttrStmt) and stmt.attr_key in ("thread_extent", "virtual_thread"):
            self._enter_loop(stmt, stmt.node.var, IntImm(stmt.value.dtype, 0), stmt.value, stmt.node.thread_tag,
                             False, stmt.body, kernel, scopes, loops, binding, threads)
            return
        if isinstance(stmt, BlockRealize):
            inner = dict(binding)
            for iv, value in zip(stmt.block.iter_vars, stmt.iter_values):
                inner[iv.var] = substitute(value, binding)
            self.limits[id(stmt.block)] = [(substitute(part.a, binding), part.b.value)
                                           for part in conjuncts(stmt.predicate)
                                           if isinstance(part, LT) and isinstance(part.b, IntImm)]
            self._enter_block(stmt.block, kernel, scopes, loops, inner, threads)
            return
        if isinstance(stmt, Block):  # (the root block of a function)
            self._enter_block(stmt, kernel, scopes, loops, binding, threads)
            return
        if isinstance(stmt, AllocBuffer) and stmt.buffer.scope.startswith("shared") and kernel is not None:
            self._add_shared(kernel, stmt.buffer, _size(stmt.buffer))  # (already lowered: its size is its shape)
        if isinstance(stmt, BufferStore):
            self._access(stmt.buffer, stmt.indices, stmt.value.dtype, kernel, scopes, loops, binding, True)
        for child in children(stmt):
            if isinstance(child, Stmt):
                self.visit(child, kernel, scopes, loops, binding, threads)
            elif isinstance(child, PrimExpr):
                self._expr(child, kernel, scopes, loops, binding)

    def _enter_loop(self, node: Any, var: Var, lo: PrimExpr, extent: PrimExpr, tag: str, vectorized: bool,
                    body: Stmt, kernel: _Kernel | None, scopes: tuple, loops: tuple, binding: dict,
                    threads: dict) -> None:
        const = extent.value if isinstance(extent, IntImm) else None
        if tag and const is None:
            self.errors.append(f"the extent of {tag} is not a constant")
            return
        starts_kernel = bool(tag) and kernel is None
        if starts_kernel:
            kernel = _Kernel()
            self.kernels.append(kernel)
        if tag in _THREAD_AXES:
            seen = kernel.threads.setdefault(tag, const)
            if seen != const:
                self.errors.append(f"two loops bound to {tag} in one kernel have extents {seen} and {const}")
            threads = {**threads, tag: const}
        loop = _Loop(node, var, lo.value if isinstance(lo, IntImm) else 0, const, tag, vectorized)
        self.visit(body, kernel, scopes + (node,), loops + (loop,), binding, threads)
        if starts_kernel:
            self._check_kernel(kernel)

    def _enter_block(self, block: Block, kernel: _Kernel | None, scopes: tuple, loops: tuple, binding: dict,
                     threads: dict) -> None:
        self.allocated += [b for b in block.alloc_buffers if b.scope.startswith("shared")]
        self.saw_auto_copy |= bool(block.annotations.get(AUTO_COPY))
        if block.annotations.get(AUTO_COPY) and kernel is not None:
            for stage, size in self.auto_copied.stages.get(block.name_hint, ()):
                self._add_shared(kernel, stage, size)
        if WARP_EXECUTION in block.annotations:
            threads = {**threads, "threadIdx.x": self.warp_size}
        if THREAD_LOW in block.annotations and THREAD_HIGH in block.annotations:
            low, high = int(block.annotations[THREAD_LOW]), int(block.annotations[THREAD_HIGH])
            count = prod(threads.values())
            if not low <= count <= high:
                self.errors.append(f"block {block.name_hint!r} runs on {count} threads, outside [{low}, {high}]")
        scopes = scopes + (block,)
        if block.match_buffers:  # (a tensorized block reads and writes through its regions: their corners)
            written = {id(region.buffer) for region in block.writes}
            for match in block.match_buffers:
                source = match.source
                if source.buffer.scope.startswith("shared"):
                    for corner in (tuple(r.min for r in source.region),
                                   tuple(r.min + r.extent - 1 for r in source.region)):
                        self._record(source.buffer, corner, kernel, scopes, loops, binding,
                                     id(source.buffer) in written)
        for part in (block.init, block.body):
            if part is not None:
                self.visit(part, kernel, scopes, loops, binding, threads)

    def _expr(self, expr: PrimExpr, kernel: _Kernel | None, scopes: tuple, loops: tuple, binding: dict) -> None:
        for node in walk(expr):
            if isinstance(node, BufferLoad):
                self._access(node.buffer, node.indices, node.dtype, kernel, scopes, loops, binding, False)
            elif isinstance(node, Cast):
                self._vector_bytes(node.dtype, [substitute(node.value, binding)], loops, "cast")

    def _access(self, buffer: Buffer, indices: tuple, dtype: Any, kernel: _Kernel | None, scopes: tuple,
                loops: tuple, binding: dict, writes: bool) -> None:
        indices = self._record(buffer, indices, kernel, scopes, loops, binding, writes)
        self._vector_bytes(dtype, indices, loops, f"access to {buffer.name}")
        self._strided_index(buffer, indices, loops)

    def _record(self, buffer: Buffer, indices: tuple, kernel: _Kernel | None, scopes: tuple, loops: tuple,
                binding: dict, writes: bool) -> tuple:
        """Note an access of ``buffer`` for the compaction; its indices over the loop variables."""
        indices = tuple(substitute(i, binding) for i in indices)
        limits = tuple(limit for s in scopes if isinstance(s, Block) for limit in self.limits.get(id(s), ()))
        self.accesses.setdefault(buffer, []).append(_Access(kernel, scopes, loops, indices, writes, limits))
        return indices

    def _strided_index(self, buffer: Buffer, indices: tuple, loops: tuple) -> None:
        """A vector access whose flattened index steps by a constant other than 1 along its
        vectorized loop is a gather: its index is a vector too (a ramp), held to the same 16
        bytes. (An index that does not step by a constant, ``v // 2``, is no ramp once vectorized:
        TVM's check, of ramps only, lets it pass, and so does this one.)"""
        vectorized = [loop for loop in loops if loop.vectorized and loop.extent and
                      any(id(loop.var) in _vars(i) for i in indices)]
        shape = [const_int(d) for d in buffer.shape]
        if len(vectorized) != 1 or None in shape or vectorized[0].extent < 2:
            return
        (loop,) = vectorized
        strides = [const_int(st) for st in buffer.strides] if buffer.strides else \
            [prod(shape[d + 1:]) for d in range(len(shape))]
        if None in strides:
            return
        flat: Any = IntImm(indices[0].dtype, 0) if indices else None
        for index, stride in zip(indices, strides):
            flat = flat + index * IntImm(index.dtype, stride)
        # (the step from one lane to the next, the other loops at their first iteration; one that
        # is not a constant is no ramp)
        at = {around.var: IntImm(around.var.dtype, around.start) for around in loops if around is not loop}
        first = substitute(flat, at)
        analyzer = Analyzer()
        analyzer.bind(loop.var, loop.start, loop.extent - 1)  # (a lane with a next one)
        step = analyzer.simplify(substitute(first, {loop.var: loop.var + IntImm(loop.var.dtype, 1)}) - first)
        if not isinstance(step, IntImm):
            return
        step = step.value
        index_bytes = 4 if _fits_int32(flat, loops) else _bytes(flat.dtype)
        if step not in (0, 1) and loop.extent * index_bytes > MAX_VECTOR_BYTES:
            self.errors.append(f"a gather from {buffer.name} of {loop.extent} lanes {step} apart has an index "
                               f"vector of more than {MAX_VECTOR_BYTES} bytes")

    def _vector_bytes(self, dtype: Any, exprs: list, loops: tuple, what: str) -> None:
        used = set().union(*(_vars(e) for e in exprs)) if exprs else set()
        lanes = prod(loop.extent for loop in loops if loop.vectorized and loop.extent and id(loop.var) in used)
        if lanes * _bytes(dtype) > MAX_VECTOR_BYTES:
            self.errors.append(f"a vector {what} of {lanes * dtype.lanes} x {dtype} is more than "
                               f"{MAX_VECTOR_BYTES} bytes")

    # ------------------------------------------------------------ the counts
    def place_shared_buffers(self) -> None:
        """Add each block-allocated shared buffer, compacted, to the kernel that uses it."""
        for buffer in self.allocated:
            accesses = self.accesses.get(buffer, [])
            kernels = {id(a.kernel) for a in accesses}
            if not accesses or len(kernels) != 1 or accesses[0].kernel is None:
                continue  # (used by no kernel, or by several: allocated outside them)
            placed = _common_prefix([a.scopes for a in accesses])
            size = self.auto_copied.padded.get(buffer.name) \
                or _compacted_size(buffer, accesses, placed, self.aligns.get(buffer, {}))
            self._add_shared(accesses[0].kernel, buffer, None if size is None else size * _versions(accesses, placed))

    def _add_shared(self, kernel: "_Kernel", buffer: Buffer, size: int | None) -> None:
        if size is None:  # (a symbolic extent the accesses do not bound: no verdict is safe)
            self.errors.append(f"shared buffer {buffer.name} has a size that is not a constant")
        else:
            kernel.shared_bytes += size

    def _check_kernel(self, kernel: _Kernel) -> None:
        count = prod(kernel.threads.values())
        if count > self.max_threads:
            self.errors.append(f"{count} threads per block, more than the target's {self.max_threads}")

    def check_memory(self) -> None:
        for kernel in self.kernels:
            if kernel.shared_bytes > self.max_shared:
                self.errors.append(f"{kernel.shared_bytes} bytes of shared memory per block, more than "
                                   f"the target's {self.max_shared}")


def _size(buffer: Buffer) -> int | None:
    if not all(isinstance(d, IntImm) for d in buffer.shape):
        return None
    return prod(d.value for d in buffer.shape) * _bytes(buffer.dtype)


def _allocated_size(buffer: Buffer) -> int | None:
    """The bytes a buffer of constant shape and strides (a padded row's) takes."""
    shape = [const_int(d) for d in buffer.shape]
    strides = [const_int(d) for d in buffer.strides] if buffer.strides else None
    if None in shape or (strides is not None and None in strides):
        return None
    if strides is None or not shape:
        return _size(buffer)
    return max(d * s for d, s in zip(shape, strides)) * _bytes(buffer.dtype)


def _common_prefix(paths: list) -> int:
    """How many leading scopes all ``paths`` share."""
    n = min(len(p) for p in paths)
    return next((i for i in range(n) if any(p[i] is not paths[0][i] for p in paths)), n)


def _versions(accesses: list, placed: int) -> int:
    """How many copies of a buffer a software pipeline keeps (InjectSoftwarePipeline): in a loop
    marked ``software_pipeline_stage`` around all the accesses, a buffer its stage-s statements
    write and its stage-t statements read lives in t - s + 1 versions."""
    loop = accesses[0].scopes[placed - 1] if placed else None
    stages = loop.annotations.get(PIPELINE_STAGE) if isinstance(loop, For) else None
    spans = _stage_spans(loop.body, stages) if stages is not None else None
    if spans is None:
        return 1
    children = [c.block if isinstance(c, BlockRealize) else c for c in loop.body.seq]
    written, read = [], []
    for access in accesses:
        child = access.scopes[placed] if len(access.scopes) > placed else None
        index = next((i for i, c in enumerate(children) if c is child), None)
        if index is not None:
            (written if access.writes else read).extend(spans[index])
    return max(1, max(read) - min(written) + 1) if written and read else 1


def _stage_spans(body: Stmt, stages: Any) -> list | None:
    """Per statement of a pipelined loop's body, the stages of the statements it becomes: its
    own, or, where the list is longer than the body, for a nested pipelined loop three, its
    prologue's, body's and epilogue's (InjectSoftwarePipeline lowers the inner pipeline first: the
    mma.sync rule's stage list counts them so), and for a copy staged through registers two.
    None where the list does not fit the body."""
    if not isinstance(body, SeqStmt):
        return None
    widths = [1] * len(body.seq)
    if len(widths) != len(stages):
        widths = [3 if isinstance(s, For) and PIPELINE_STAGE in s.annotations else 2 if _manifests_local_stage(s) else 1
                  for s in body.seq]
        if sum(widths) != len(stages):
            return None
    spans, at = [], 0
    for width in widths:
        spans.append([int(stage) for stage in stages[at:at + width]])
        at += width
    return spans


def _manifests_local_stage(stmt: Stmt) -> bool:
    """Whether ``stmt`` holds a copy that ManifestSharedMemoryLocalStage splits in two (global to
    registers, registers to shared memory): two statements of the pipeline."""
    return any(isinstance(n, Block) and n.annotations.get(LOCAL_STAGE) for n in walk(stmt))


class _Limited(Mutator):
    """An index with each dividend a block predicate bounds (``e // 8`` under ``T.where(e <
    1024)``) replaced by a variable over the values the predicate lets through: the last,
    partial round of a cooperative fetch touches no more than the buffer's part."""

    def __init__(self, limits: tuple, analyzer: Analyzer) -> None:
        self.limits, self.analyzer = limits, analyzer

    def _limited(self, e: PrimExpr) -> PrimExpr:
        for lhs, end in self.limits:
            bound = self.analyzer.bound(lhs)
            if bound is not None and bound[1] >= end and is_const_int(self.analyzer.simplify(Sub(e, lhs)), 0):
                var = Var("limited", e.dtype)
                self.analyzer.bind(var, bound[0], end - bound[0])
                return var
        return e

    def visit_FloorDiv(self, e: FloorDiv) -> PrimExpr:
        return FloorDiv(self._limited(self.visit(e.a)), e.b)

    def visit_FloorMod(self, e: FloorMod) -> PrimExpr:
        return FloorMod(self._limited(self.visit(e.a)), e.b)


def _compacted_size(buffer: Buffer, accesses: list, placed: int, aligns: dict) -> int | None:
    """The bytes of ``buffer`` allocated inside the first ``placed`` scopes of its accesses: each
    dimension the hull of the indices, with the loops inside that place and the thread loops a
    shared buffer spans (threadIdx, vthread) over their ranges and the other loops fixed, its
    rows padded as storage_align asks (``aligns``: dimension -> (factor, offset)); None for a
    symbolic dimension the indices do not bound."""
    lows = [None] * len(buffer.shape)
    highs = [None] * len(buffer.shape)
    for access in accesses:
        inside = {id(s) for s in access.scopes[placed:]}
        analyzer = Analyzer()
        for loop in access.loops:
            spans = id(loop.node) in inside and not loop.tag.startswith("blockIdx") \
                or loop.tag.startswith(("threadIdx", "vthread"))
            if not spans:
                analyzer.bind(loop.var, loop.start, 1)
            elif loop.extent is not None:  # (a loop of unknown extent leaves its indices unknown)
                analyzer.bind(loop.var, loop.start, loop.extent)
        for d, index in enumerate(access.indices):
            bound = analyzer.bound(_Limited(access.limits, analyzer).visit(index) if access.limits else index)
            if bound is None:
                lows[d], highs[d] = 0, None  # unknown: the whole dimension
                continue
            if lows[d] is None or highs[d] is not None:
                lows[d] = bound[0] if lows[d] is None else min(lows[d], bound[0])
                highs[d] = bound[1] if highs[d] is None else max(highs[d], bound[1])
    shape = []
    for d, dim in enumerate(buffer.shape):
        full = dim.value if isinstance(dim, IntImm) else None
        hull = None if highs[d] is None else highs[d] - lows[d] + 1
        if full is None and hull is None:
            return None
        shape.append(hull if full is None else full if hull is None else min(full, hull))
    strides = [const_int(st) for st in aligned_strides(tuple(const(n, "int64") for n in shape), aligns)]
    return (max(n * st for n, st in zip(shape, strides)) if strides else prod(shape)) * _bytes(buffer.dtype)


def _verified(func: PrimFunc, max_threads_per_block: int, max_shared_memory_per_block: int,
              thread_warp_size: int, refused_first: bool = True) -> _Verifier:
    """The verifier's walk of ``func``, with what LowerAutoCopy adds where a block is marked
    ``auto_copy``. LowerAutoCopy only adds, so a function refused without it is refused with it:
    with ``refused_first``, the pipeline up to it (~60 ms) runs only for the others."""
    limits = (max_threads_per_block, max_shared_memory_per_block, thread_warp_size)
    verifier = _walked(func, _Verifier(*limits))
    if verifier.errors and refused_first or not verifier.saw_auto_copy:
        return verifier
    added = _auto_copied(func)
    if isinstance(added, str):
        verifier.errors.append(added)
        return verifier
    return _walked(func, _Verifier(*limits, added))


def _padded_rows(func: PrimFunc) -> dict:
    """storage_align's padded rows (buffer -> {dimension: (factor, offset)}), but for buffers an
    ``auto_copy`` block writes: LowerAutoCopy replaces that block, its annotation with it, and
    pads as it decides (``_AutoCopied.padded``)."""
    auto_copied = {id(region.buffer) for block in walk(func.body)
                   if isinstance(block, Block) and block.annotations.get(AUTO_COPY) for region in block.writes}
    return {buffer: aligns for buffer, aligns in storage_aligns(func).items() if id(buffer) not in auto_copied}


def _walked(func: PrimFunc, verifier: _Verifier) -> _Verifier:
    verifier.aligns = _padded_rows(func)
    verifier.visit(func.body, None, (), (), {}, {})
    verifier.place_shared_buffers()
    verifier.check_memory()
    return verifier


def gpu_code_errors(func: PrimFunc, max_threads_per_block: int, max_shared_memory_per_block: int,
                    thread_warp_size: int = 32) -> list[str]:
    """What keeps ``func``'s kernels from launching within the limits (empty: nothing)."""
    return _verified(func, max_threads_per_block, max_shared_memory_per_block, thread_warp_size).errors


def shared_memory_bytes(func: PrimFunc) -> int:
    """The shared memory ``func``'s kernels allocate, all together, as this check counts it."""
    return sum(kernel.shared_bytes for kernel in _verified(func, 1, 1, 32, refused_first=False).kernels)


def replay_precheck(sch: Any, max_shared_memory_per_block: int | None = None, thread_warp_size: int = 32) -> Callable:
    """A ``decision_provider`` for ``Trace.apply_to_schedule`` on ``sch`` that refuses a candidate
    VerifyGPUCode would reject as soon as the replay shows it, not after the rest of the replay
    and the other postprocessors (with the cache reads, most of a candidate's cost):

    * when the trace marks a block's thread range (MultiLevelTiling's
      ``meta_schedule.thread_extent_*_inclusive``, right after it binds the block's loops) and the
      threads bound around the block are already outside it (a ``warp_execution`` block counted
      with a warp's lanes on threadIdx.x, as the postprocessor counts it);
    * right after a ``shared`` cache is placed (``ComputeAt``), when a kernel's shared memory,
      counted as VerifyGPUCode counts it, is already over ``max_shared_memory_per_block``.

    Nothing later in the trace or the postprocessors changes those loops, and what comes after
    a placement only adds to a kernel's shared memory (the other caches, a pipeline's versions)."""
    placed = [False]  # (whether the instruction just replayed placed a shared cache)

    def provider(inst: Any, inputs: list, attrs: list, decision: Any) -> Any:
        if placed[0]:
            _refuse_shared_overflow(sch, max_shared_memory_per_block)
        placed[0] = max_shared_memory_per_block is not None and inst.kind == "ComputeAt" and \
            any(region.buffer.scope.startswith("shared") for region in sch.get(inputs[0]).writes)
        if inst.kind == "Annotate" and attrs and attrs[0] == THREAD_HIGH:
            block = sch.get(inputs[0])
            low = block.annotations.get(THREAD_LOW)
            loops = [sch.get(loop) for loop in sch.get_loops(inputs[0])]
            extents = {loop.thread_binding.thread_tag: const_int(loop.extent) for loop in loops
                       if loop.thread_binding is not None and loop.thread_binding.thread_tag in _THREAD_AXES}
            if WARP_EXECUTION in block.annotations:  # (a tensor-core block binds only its warps)
                extents["threadIdx.x"] = thread_warp_size
            if low is not None and None not in extents.values():
                threads = prod(extents.values())
                if not int(low) <= threads <= int(inputs[1]):
                    raise TVMSError(f"block '{block.name_hint}' runs on {threads} threads, outside "
                                    f"[{int(low)}, {int(inputs[1])}] (refused before the rest of the replay)")
        return decision

    return provider


def _refuse_shared_overflow(sch: Any, max_shared: int) -> None:
    for name in sch.mod:
        func = sch.mod[name]
        if isinstance(func, PrimFunc):
            verifier = _walked(func, _Verifier(1 << 31, max_shared, 32))
            used = max((k.shared_bytes for k in verifier.kernels), default=0)
            if used > max_shared:
                raise TVMSError(f"{used} bytes of shared memory per block, more than the target's {max_shared} "
                                f"(refused before the rest of the replay)")


class VerifyGPUCode(Postproc):
    def __init__(self) -> None:
        self.limits: dict[str, int] = {}

    def _initialize_with_tune_context(self, context: Any) -> None:
        for name in ("max_shared_memory_per_block", "max_threads_per_block", "thread_warp_size"):
            self.limits[name] = target_limit(context, name, "VerifyGPUCode")

    def precheck(self, sch: Any) -> Callable:
        """``replay_precheck`` of ``sch`` with this target's shared-memory limit (the thread
        ranges only, before a tuning context gives one)."""
        return replay_precheck(sch, self.limits.get("max_shared_memory_per_block"),
                               self.limits.get("thread_warp_size", 32))

    def apply(self, sch: Any) -> bool:
        if not self.limits:
            raise TVMSError("VerifyGPUCode is used before it is given a tuning context (a target)")
        mod, limits = sch.mod, (self.limits["max_threads_per_block"], self.limits["max_shared_memory_per_block"],
                                self.limits["thread_warp_size"])
        return not any(gpu_code_errors(mod[name], *limits) for name in mod if isinstance(mod[name], PrimFunc))


def postprocs_precheck(postprocs: list, sch: Any) -> Callable | None:
    """The ``decision_provider`` for replaying a trace onto ``sch``: the ``precheck`` of the
    VerifyGPUCode among ``postprocs`` (None without one: nothing to check early)."""
    verify = next((p for p in postprocs if isinstance(p, VerifyGPUCode)), None)
    return None if verify is None else verify.precheck(sch)
