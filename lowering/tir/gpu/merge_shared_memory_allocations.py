"""MergeSharedMemoryAllocations: each kernel's shared memory as one allocation, as TVM 0.27 makes it.

A CUDA kernel has one array of dynamic shared memory (``extern __shared__``, sized at launch), so
the ``shared.dyn`` allocations of a kernel (the body of its outermost ``thread_extent``) become
one ``uint8`` buffer, ``buf_dyn_shmem``, that the original buffers view at byte offsets: each is
declared again over it (``T.decl_buffer(..., data=buf_dyn_shmem.data)``, or
``buf_dyn_shmem.view(dtype)`` when it spans the whole buffer) and its accesses (and
``tvm_access_ptr``/``cp_async`` offsets) are shifted by its offset in elements. Buffers that are
never live at the same time share bytes: a liveness analysis over the kernel's statements in
order (a loop, branch or launch counting as one step at its end) finds where each buffer is first
and last touched, and TVM's memory plan reuses a freed entry of size within 16x, or joins smaller
freed ones (each at its own offset: see ``_Plan``). Offsets are aligned to the buffers'
``data_alignment`` (64 bytes), the entries placed in order of size (arrays of 32 bits or less,
which TVM leaves without an offset, after them).
Static ``shared`` allocations are merged the same way (into ``buf_shmem``) only under the
PassContext config ``tirx.merge_static_smem``. A kernel with one such allocation is left as it is.
tvms plans constant sizes only; a symbolic size is refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ....ir.buffer import Buffer, constant_size, decl_buffer, element_bytes, pointer_data
from ....ir.dtype import DataType
from ....ir.errors import TVMSError
from ....ir.expr import Add, Broadcast, BufferLoad, Call, IntImm, PrimExpr, Var
from ....ir.function import PrimFunc
from ....ir.node import FrozenDict
from ....ir.stmt import AllocBuffer, AttrStmt, BufferStore, DeclBuffer, Stmt
from ....ir.visitor import Mutator, Visitor, collect
from ...transform import PassContext
from ..tir_pass import define_tir_pass
from .storage_rewrite import VOLATILE

MATCH_RANGE = 16  # a freed entry is reused for a buffer at most this many times smaller
SCOPED_ATTRS = ("extern_scope", "virtual_thread")  # attributes that are a step of their own


def _allocations(stmt: Stmt, scope: str) -> dict:
    """data Var -> Buffer of the ``scope`` allocations (AllocBuffer statements) in ``stmt``."""
    return {a.buffer.data: a.buffer for a in collect(stmt, AllocBuffer) if a.buffer.scope == scope}


def _is_op(e: Call, name: str) -> bool:
    return getattr(e.op, "name", None) == name


class _Steps(Visitor):
    """The kernel's statements as a linear sequence of steps, each ``[key, pair, touched]``: a
    store or evaluation is one step (``pair`` 0); a loop, branch, assertion, while or launch is a
    begin step and an end step (``pair`` the distance to the other), the end one holding what
    its body touched. An access is recorded at the level its buffer was allocated at."""

    def __init__(self, allocs: dict) -> None:
        self.allocs = allocs
        self.level: dict = {}  # data Var -> depth of the open steps where it was allocated
        self.open: list = []  # the touched lists of the open steps
        self.steps: list = []
        self.in_launch = False

    def touch(self, data: Var) -> None:
        level = self.level.get(data)
        if level is not None and level < len(self.open):
            self.open[level].append(data)

    def leaf(self, s: Stmt) -> None:
        self.open.append([])
        if isinstance(s, BufferStore):  # (the value first, then the store itself)
            for e in (s.value, *s.indices):
                self.visit(e)
            self.touch(s.buffer.data)
        else:
            self.generic_visit(s)
        touched = self.open.pop()
        if touched:
            self.steps.append([id(s), 0, touched])

    def nested(self, s: Stmt) -> None:
        self.open.append([])
        begin = len(self.steps)
        self.steps.append([id(s), 0, []])
        self.generic_visit(s)
        end = len(self.steps)
        self.steps.append([id(s), begin - end, self.open.pop()])
        self.steps[begin][1] = end - begin

    visit_BufferStore = visit_Evaluate = leaf
    visit_For = visit_IfThenElse = visit_While = visit_AssertStmt = nested

    def visit_AllocBuffer(self, s: AllocBuffer) -> None:
        if s.buffer.data in self.allocs:
            self.level[s.buffer.data] = len(self.open)
        self.visit(s.body)

    def visit_DeclBuffer(self, s: DeclBuffer) -> None:
        self.visit(s.body)  # (a view of an allocation shares its data Var: its accesses are the allocation's)

    def visit_Buffer(self, b: Buffer) -> None:  # (a buffer as a value: its handle, as a Var's use)
        self.touch(b.data)

    def visit_AttrStmt(self, s: AttrStmt) -> None:
        if s.attr_key == "thread_extent" and not self.in_launch:
            self.in_launch = True
            self.nested(s)
            self.in_launch = False
        elif s.attr_key in SCOPED_ATTRS:
            self.nested(s)
        else:  # (the attribute's node is no use: T.attr(fragment, "fragment_shape", ...))
            self.visit(s.value)
            self.visit(s.body)

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        for index in e.indices:
            self.visit(index)
        self.touch(e.buffer.data)

    def visit_Call(self, e: Call) -> None:
        if _is_op(e, "tir.address_of") and isinstance(e.args[0], BufferLoad):
            for index in e.args[0].indices:  # (taking an address is no access)
                self.visit(index)
        else:
            self.generic_visit(e)

    def visit_Var(self, v: Var) -> None:  # (a direct use of the data pointer counts as a read)
        self.touch(v)


@dataclass(eq=False)
class _Entry:
    """A piece of the merged memory: its size in bits; the buffers of TVM's plan in ``layers``
    (each layer's buffers one after the other, the layers over the same bytes), which give each
    buffer its layer's alignment; and where the bytes go: the freed entries it joined (``parts``,
    one after the other) and its own buffers (``own``, each over the whole entry)."""

    nbits: int
    layers: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    own: list = field(default_factory=list)


class _Plan:
    """TVM's memory plan of one kernel: the entries and, per data Var, its byte offset.

    Where TVM joins freed entries for a larger buffer, it zips their layers into one list per
    layer and places each list's buffers one after the other, so a buffer of one entry's second
    layer can land on the bytes of another entry's first-layer buffer while both are live (TVM
    0.27 does so: tests/test_merge_shared_memory.py, test_joined_entries_keep_their_bytes). tvms
    places each joined entry at its own offset instead, which is TVM's layout wherever the joined
    entries have one layer each; every plan is checked: buffers live together share no byte."""

    def __init__(self, allocs: dict, steps: list) -> None:
        self.allocs = allocs
        self.free: list = []  # the freed entries of a constant size, by size (stable)
        self.small: list = []  # entries of 32 bits or less, never freed (TVM has no offset for them)
        self.entry_of: dict = {}
        self.live: dict = {}  # data Var -> [when it was placed, when it was freed], in events
        self.events = 0
        gen, kill = self._liveness(steps)
        for key, pair, _ in steps:
            leaf_gen = gen.get(key, []) if pair == 0 else []
            if pair <= 0:
                for data in kill.get(key, []):
                    if data not in leaf_gen:
                        self._release(data)
            if pair >= 0:
                for data in gen.get(key, []):
                    self.live[data] = [self._event(), None]
                    self.entry_of[data] = self._find(data)
            if pair <= 0:
                for data in kill.get(key, []):
                    if data in leaf_gen:
                        self._release(data)
        self.offsets, self.size = self._offsets()
        self._check()

    @staticmethod
    def _liveness(steps: list) -> tuple[dict, dict]:
        """(gen, kill): per step key, the buffers first touched there and last touched there."""
        kill: dict = {}
        seen: set = set()
        for key, _, touched in reversed(steps):
            for data in touched:
                if data not in seen:
                    seen.add(data)
                    kill.setdefault(key, []).append(data)
        gen: dict = {}
        seen = set()
        for i, (_, pair, _) in enumerate(steps):
            if pair < 0:
                continue
            key, _, touched = steps[i + pair]
            for data in touched:
                if data not in seen:
                    seen.add(data)
                    gen.setdefault(key, []).append(data)
        return gen, kill

    def _nbits(self, data: Var) -> int:
        buf = self.allocs[data]
        count = constant_size(buf)
        if count is None:
            raise TVMSError(f"MergeSharedMemoryAllocations: buffer {buf.name!r} in scope {buf.scope!r} has "
                            f"the symbolic shape {buf.shape}; tvms merges constant sizes only")
        return count * buf.dtype.bits * buf.dtype.lanes

    def _event(self) -> int:
        self.events += 1
        return self.events

    def _find(self, data: Var) -> _Entry:
        nbits = self._nbits(data)
        if nbits <= 32:  # (small arrays are left to registers: never shared)
            self.small.append(_Entry(nbits, [[data]], own=[data]))
            return self.small[-1]
        for i, (size, entry) in enumerate(self.free):  # a freed entry as large, up to 16x larger
            if nbits <= size <= nbits * MATCH_RANGE:
                del self.free[i]
                entry.nbits = max(nbits, entry.nbits)
                entry.layers.append([data])
                entry.own.append(data)
                return entry
        smaller = [i for i, (size, _) in enumerate(self.free) if size < nbits]
        taken, layers, total = [], [], 0
        for i in reversed(smaller):  # else freed smaller ones, largest first, until they cover it
            taken.append(i)
            entry = self.free[i][1]
            total += entry.nbits
            layers += [[] for _ in range(len(entry.layers) - len(layers))]
            for layer, buffers in zip(layers, entry.layers):
                layer += buffers
            if total >= nbits:
                break
        if total:
            parts = [self.free[i][1] for i in taken]
            for i in sorted(taken, reverse=True):
                del self.free[i]
            return _Entry(max(nbits, total), layers + [[data]], parts, [data])
        return _Entry(nbits, [[data]], own=[data])

    def _release(self, data: Var) -> None:
        self.live[data][1] = self._event()
        entry = self.entry_of[data]
        if entry.nbits > 32:
            at = sum(1 for size, _ in self.free if size <= entry.nbits)
            self.free.insert(at, (entry.nbits, entry))

    def _offsets(self) -> tuple[dict, int]:
        entries = [entry for _, entry in self.free] + self.small
        align: list = []  # per layer of TVM's plan: the largest element among its buffers
        layer_of: dict = {}
        for e in entries:
            align += [0] * (len(e.layers) - len(align))
            for i, layer in enumerate(e.layers):
                for data in layer:
                    align[i] = max(align[i], element_bytes(self.allocs[data].dtype))
                    layer_of[data] = i
        offsets: dict = {}

        def place(e: _Entry, at: int) -> int:
            """Places ``e`` from byte ``at`` (its buffers aligned); returns where it ends."""
            end = at
            for part in e.parts:
                end = place(part, end)
            for data in e.own:
                buf = self.allocs[data]
                step = buf.data_alignment or max(align[layer_of[data]], element_bytes(buf.dtype))
                offsets[data] = at + -at % step
                end = max(end, offsets[data] + self._nbits(data) // 8)
            return end

        size = 0
        for e in entries:
            size = place(e, size)
        return offsets, size

    def _check(self) -> None:
        """Buffers live at the same time have bytes of their own (else a TVMSError: a bug of the plan)."""
        spans = [(data, *self.live[data], self.offsets[data], self.offsets[data] + self._nbits(data) // 8)
                 for data in self.offsets]
        for i, (a, a_from, a_to, a_lo, a_hi) in enumerate(spans):
            for b, b_from, b_to, b_lo, b_hi in spans[:i]:
                if a_from < b_to and b_from < a_to and a_lo < b_hi and b_lo < a_hi:
                    raise TVMSError(f"MergeSharedMemoryAllocations: buffers {self.allocs[a].name!r} (bytes "
                                    f"{a_lo}-{a_hi}) and {self.allocs[b].name!r} (bytes {b_lo}-{b_hi}) are live "
                                    f"at the same time and share bytes in the plan")


class _Merger(Mutator):
    """Merges the ``scope`` allocations of each kernel (see the module docstring)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.in_launch = False
        self.kernel: dict | None = None  # data Var -> byte offset, in the kernel being merged
        self.merged: Buffer | None = None
        self.volatile = False  # whether a merged allocation was volatile
        self.views: dict = {}  # original buffer -> its view of the merged buffer (first use first)
        self.allocs: dict = {}  # data Var -> the allocated buffer, in the kernel being merged

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        if s.attr_key != "thread_extent" or self.in_launch:
            return self.generic_visit(s)
        allocs = _allocations(s.body, self.scope)
        if len(allocs) <= 1:
            return self.generic_visit(s)
        steps = _Steps(allocs)
        steps.visit(s)
        plan = _Plan(allocs, steps.steps)
        name = "buf_dyn_shmem" if self.scope == "shared.dyn" else "buf_shmem"
        outer = self.in_launch, self.kernel, self.merged, self.views, self.allocs
        self.in_launch, self.kernel, self.views, self.allocs = True, plan.offsets, {}, allocs
        self.merged = decl_buffer((plan.size,), "uint8", name, scope=self.scope)
        self.volatile = False
        try:
            body = self.visit(s.body)
            for view in self.views.values():  # (the first used ends innermost, as in TVM)
                body = DeclBuffer(view, body, self.merged)
            annotations = FrozenDict({VOLATILE: True}) if self.volatile else FrozenDict()
            return s.with_changes(body=AllocBuffer(self.merged, body, annotations))
        finally:
            self.in_launch, self.kernel, self.merged, self.views, self.allocs = outer

    def merging(self, data: Var) -> bool:
        return self.kernel is not None and data in self.kernel

    def visit_AllocBuffer(self, s: AllocBuffer) -> Stmt:
        if self.kernel is not None and s.buffer.data in self.allocs:  # (one never used is dropped, as in TVM)
            self.volatile |= bool(s.annotations.get(VOLATILE, False))
            return self.visit(s.body)
        return self.generic_visit(s)

    def visit_DeclBuffer(self, s: DeclBuffer) -> Stmt:
        if self.merging(s.buffer.data):  # a view of a merged allocation: declared again at the top
            return self.visit(s.body)
        return self.generic_visit(s)

    def view(self, buffer: Buffer) -> Buffer:
        found = self.views.get(buffer)
        if found is None:
            if len(buffer.shape) != 1:
                raise TVMSError(f"MergeSharedMemoryAllocations: buffer {buffer.name!r} has shape {buffer.shape}; "
                                f"the pass runs on flat buffers (after FlattenBuffer)")
            found = self.views[buffer] = replace(buffer, data=self.merged.data)
        return found

    def shift(self, index: PrimExpr, data: Var, dtype: DataType, offset_first: bool = False) -> PrimExpr:
        """``index`` moved by the allocation's offset, in elements of ``dtype`` (``offset + index``
        where TVM writes it so: in the calls). As TVM's arithmetic: a scalar index plus 0 is the
        index; a vector one gets the offset broadcast, 0 included."""
        offset = self.kernel[data] // element_bytes(dtype)
        scalar = index.dtype.with_lanes(1)
        if index.dtype.lanes == 1:
            if not offset:
                return index
            shift = IntImm(scalar, offset)
        else:
            shift = Broadcast(IntImm(scalar, offset), index.dtype.lanes)
        return Add(shift, index) if offset_first else Add(index, shift)

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        new = self.generic_visit(e)
        if not self.merging(e.buffer.data):
            return new
        return BufferLoad(self.view(e.buffer), (self.shift(new.indices[0], e.buffer.data, e.buffer.dtype),))

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        new = self.generic_visit(s)
        if not self.merging(s.buffer.data):
            return new
        return new.with_changes(buffer=self.view(s.buffer),
                                indices=(self.shift(new.indices[0], s.buffer.data, s.buffer.dtype),))

    def visit_Call(self, e: Call) -> PrimExpr:
        # tvm_access_ptr(dtype, data, offset, extent, rw) and cp_async_raw(dtype, data, offset, ...):
        # the merged data, the offset moved (in elements of the call's dtype)
        at = 1 if _is_op(e, "tir.tvm_access_ptr") else 0 if _is_op(e, "tir.s_tir.cp_async_raw") else None
        data = None if at is None else pointer_data(e.args[at])
        if not (isinstance(data, Var) and self.merging(data)):
            return self.generic_visit(e)
        args = list(e.args)
        dtype = args[0].dtype if at == 1 else e.dtype  # (cp_async_raw's dtype is the call's)
        args[at + 1] = self.shift(self.visit(args[at + 1]), data, dtype, offset_first=True)
        view = self.view(self.allocs[data])  # (TVM declares the typed view there too, and names it)
        args[at] = view.data
        written = [*e.data_of, *[None] * (len(args) - len(e.data_of))]
        written[at] = view
        return e.with_changes(args=tuple(self.visit(a) if i not in (at, at + 1) else a for i, a in enumerate(args)),
                              data_of=tuple(written))


def merges_static() -> bool:
    """Whether the PassContext asks static ``shared`` memory merged too (``tirx.merge_static_smem``)."""
    return bool(PassContext.current().config.get("tirx.merge_static_smem", False))


def merge_shared_memory_allocations(func: PrimFunc, merge_static: bool | None = None) -> PrimFunc:
    """``func`` with each kernel's ``shared.dyn`` allocations merged, and its ``shared`` ones
    too where ``merge_static`` (by default the PassContext's ``tirx.merge_static_smem``)."""
    if merge_static is None:
        merge_static = merges_static()
    body = func.body
    for scope in ("shared.dyn", "shared") if merge_static else ("shared.dyn",):
        if len(_allocations(body, scope)) > 1:
            body = _Merger(scope).visit(body)
    return func if body is func.body else func.with_changes(body=body)


MergeSharedMemoryAllocations = define_tir_pass("MergeSharedMemoryAllocations", merge_shared_memory_allocations)

__all__ = ["MergeSharedMemoryAllocations", "merge_shared_memory_allocations"]
