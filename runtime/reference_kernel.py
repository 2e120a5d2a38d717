"""Compiling GPU kernels for the reference executor: the code generator's part of the GPU
semantics that ``reference_gpu`` runs.

``KernelCodegen`` goes before the serial code generator (``reference._Codegen``) in its class.
At the outermost thread binding of a launch (``T.launch_thread``, ``attr thread_extent`` or a
``T.thread_binding`` loop) it compiles the whole launch into a nested Python function of one
thread, ``def _kernelN(_ix, _me, _blk)``, and a call of ``reference_gpu.launch``; inside, every
thread binding only reads the thread's index from ``_ix``. In that function:

* ``shared`` allocations come from the block (``_blk.shared``), ``warp`` ones from the warp;
  ``local`` ones are the thread's own, and so are non-global buffers allocated outside the launch
  (scheduled TensorIR allocates them at the root block; lowering moves them in);
* ``T.tvm_storage_sync`` (and ``T.cuda.cta_sync`` / ``warp_sync``), the warp shuffles and
  ``T.tvm_warp_activemask`` (TVM's, and CUDA's ``__shfl*_sync`` / ``__activemask`` after LowerIntrin),
  ``T.tvm_thread_allreduce`` and the warp-wide PTX instructions (``T.ptx_legacy.mma`` and
  ``ldmatrix``) become ``yield``s of requests to the block's scheduler; the PTX intrinsics each
  thread runs alone (``T.cuda.mma_fill_legacy``, ``mma_store_legacy``, a transposed 8-bit
  ldmatrix's gather) are calls of ``reference_ptx``, with ``threadIdx.x`` as their lane, as the
  CUDA code generator writes them;
* code that TVM's ThreadSync has not synchronised yet (scheduled TensorIR, a launch by
  ``T.thread_binding`` loops, and lowered code without any ``T.tvm_storage_sync``) gets the
  barriers ThreadSync would place: between two statements of a sequence where shared memory
  written before is accessed after (or read before and written after), and at the end of each
  iteration of a loop whose body reads and writes the same shared buffer, wherever every thread
  runs the statement (control flow that does not depend on the thread index). Lowered code with
  barriers has them all written out: none is added, and a missing one is a data race;
* a virtual thread (``vthread``) is a loop in each thread, as InjectVirtualThread makes it;
* a reduction block (one with an init) whose reduction iterators are bound to threads (the
  cross-thread reduction that TVM's LowerCrossThreadReduction turns into an allreduce) updates
  its output one thread after the other, in thread order, without race checks: that is the
  reduction's value.
"""
from __future__ import annotations

from typing import Any

from tvms.ir import expr as E
from tvms.ir import ptx
from tvms.ir import stmt as S
from tvms.ir.buffer import pointer_data
from tvms.ir.cuda_args import power_of_two, reduction
from tvms.ir.dtype import DataType
from tvms.ir.errors import TVMSError
from tvms.ir.op import get_op
from tvms.ir.structural import structural_equal
from tvms.ir.visitor import walk

from . import reference_async, reference_ptx, reference_tma
from . import reference_gpu as gpu
from . import reference_wmma
from .reference_positions import vector_positions
from .tir_values import cast_value, numpy_dtype

# TVM's warp shuffles (mask, value, lane or delta, width, warp size) and CUDA's, as LowerIntrin
# writes them for a cuda target (the same without the warp size)
_SHUFFLES = {"tir.tvm_warp_shuffle": gpu.SHUFFLE, "tir.tvm_warp_shuffle_up": gpu.SHUFFLE_UP,
             "tir.tvm_warp_shuffle_down": gpu.SHUFFLE_DOWN,
             "tir.cuda.__shfl_sync": gpu.SHUFFLE, "tir.cuda.__shfl_up_sync": gpu.SHUFFLE_UP,
             "tir.cuda.__shfl_down_sync": gpu.SHUFFLE_DOWN, "tir.cuda.__shfl_xor_sync": gpu.SHUFFLE_XOR}
_ACTIVEMASKS = ("tir.tvm_warp_activemask", "tir.cuda.__activemask")
_SHARED = ("shared", "shared.dyn")
# T.cuda.*'s warp votes: the vote (reference_gpu._vote's tag; T.cuda.warp_reduce's are warp_sum, ...)
_VOTES = {"tir.cuda.ballot_sync": "ballot", "tir.cuda.any_sync": "any",
          "tir.cuda.reduce_add_sync_u32": "add_u32", "tir.cuda.reduce_min_sync_u32": "min_u32"}


def _scope(data: E.Var) -> str:
    ann = getattr(data, "type_annotation", None)
    return getattr(ann, "storage_scope", "global") or "global"


def _shared_accesses(stmt: Any) -> tuple[set, set]:
    """(read, written): the data Vars of the shared and warp buffers ``stmt`` accesses (through
    a ``T.tvm_access_ptr`` too, by its read/write mask, a match_buffer's as its source's)."""
    read, written, alias = set(), set(), {}
    for n in walk(stmt):
        if isinstance(n, S.Block):
            alias.update((m.buffer.data, m.source.buffer.data) for m in n.match_buffers)
        elif isinstance(n, (E.BufferLoad, S.BufferStore)):
            (written if isinstance(n, S.BufferStore) else read).add(n.buffer.data)
        elif isinstance(n, E.Call) and getattr(n.op, "name", None) == "tir.tvm_access_ptr":
            mask = int(getattr(n.args[4], "value", 3))
            for chosen, bit in ((read, 1), (written, 2)):
                if mask & bit:
                    chosen.add(pointer_data(n.args[1]))
    read, written = ({alias.get(v, v) for v in vars_} for vars_ in (read, written))
    return ({v for v in read if _scope(v) in (*_SHARED, "warp")},
            {v for v in written if _scope(v) in (*_SHARED, "warp")})


def _has_sync(stmt: Any) -> bool:
    """Whether ``stmt`` has a ``T.tvm_storage_sync`` (then ThreadSync has placed its barriers). A
    ``T.cuda.cta_sync`` (or ``syncthreads_and`` / ``_or``) says nothing of it: TVM's ThreadSync
    does not see them and still adds its own."""
    return any(isinstance(n, E.Call) and getattr(n.op, "name", None) == "tir.tvm_storage_sync" for n in walk(stmt))


def _sync_stmt() -> S.Evaluate:
    return S.Evaluate(E.Call(DataType("int32"), get_op("tir.tvm_storage_sync"), (E.StringImm("shared"),)))


class _KernelScope:
    """What the code generator tracks while it compiles one launch."""

    def __init__(self, kernel: gpu.Kernel, implicit: bool) -> None:
        self.kernel = kernel
        self.implicit = implicit  # scheduled TensorIR: add the barriers ThreadSync would
        self.tags: dict = {}  # thread Var -> its tag
        self.variant: set = set()  # Vars whose value may differ between the threads of a block
        self.diverging = 0  # how many enclosing statements depend on the thread index
        self.tracked: set = set()  # data Vars bound to gpu.Shared
        self.atomic = False  # inside a cross-thread reduction block
        self.barriers: dict = {}  # id of an added barrier -> the statement it comes before
        self.current: Any = None  # the statement being compiled (for messages)
        self.stmt_ref = "None"  # its name in the generated code's namespace

    def varies(self, *exprs: Any) -> bool:
        return any(isinstance(n, E.BufferLoad) or n in self.variant for e in exprs for n in walk(e))

    @property
    def uniform(self) -> bool:
        """Whether every thread of the block runs the statement being compiled."""
        return self.implicit and not self.diverging


class KernelCodegen:
    """The GPU part of the reference code generator (module docstring); a mixin that calls the
    serial code generator's methods for the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel: _KernelScope | None = None  # the launch being compiled
        self.warp_size = 32
        self.outer_allocs: dict = {}  # data Var -> (scope, dtype, size source): non-global, outside kernels
        self.reducers: list = []  # the enclosing reduce_scope attributes' CommReducers
        # data Vars of blocks' alloc_buffers (and views of them): scheduled TensorIR, whose layout
        # lowering still decides (CompactBufferAllocation, storage_align), so WMMA pointers into
        # them are not held to the device's alignment
        self.unplaced: set = set()
        self.virtual_threads: dict = {}  # tag -> (the loop variable, extent) of the enclosing virtual thread

    def function(self, func: Any) -> Any:
        warp = getattr(func.attrs.get("target"), "config", {}).get("thread_warp_size")
        if warp is not None:
            self.warp_size = int(getattr(warp, "value", warp))
        return super().function(func)

    # ---- launching
    def thread_axis(self, s: Any, tag: str, var: E.Var, lo: Any, extent: Any, body: Any) -> None:
        gpu.check_tag(tag)
        if self.kernel is None:
            self.launch(s, implicit=isinstance(s, S.For) or not _has_sync(s))
            return
        if gpu.is_virtual_tag(tag):  # InjectVirtualThread's meaning: a loop in each thread
            return self.virtual_thread(tag, var, lo, extent, body)
        k = self.kernel
        k.tags[var] = tag
        if not gpu.is_block_tag(tag):
            k.variant.add(var)
        start = self.src(lo)
        index = f"_ix[{k.kernel.tags.index(tag)}]"
        self.emit(f"{self.local(var)} = {index}" + ("" if start == "0" else f" + ({start})"))
        self.stmt(body)

    def virtual_thread(self, tag: str, var: E.Var, lo: Any, extent: Any, body: Any) -> None:
        """A loop over the virtual threads of ``tag``; inside one of the same tag, the same virtual
        thread (TVM's UnifyThreadBinding gives both loops one variable, so the CUDA code runs the
        pairs where they agree, not every pair)."""
        outer = self.virtual_threads.get(tag)
        if outer is not None:
            outer_var, outer_lo, outer_extent = outer
            if not (structural_equal(lo, outer_lo) and structural_equal(extent, outer_extent)):
                raise TVMSError(f"all loops bound to {tag!r} must have the same range (got "
                                f"[{outer_lo.script()}, +{outer_extent.script()}) for {outer_var.name!r} and "
                                f"[{lo.script()}, +{extent.script()}) for {var.name!r} inside it)")
            self.emit(f"{self.local(var)} = {self.local(outer_var)}")  # (one variable: the same start)
            return self.stmt(body)
        self.virtual_threads[tag] = (var, lo, extent)
        try:
            return self.s_For(S.For(var, lo, extent, "serial", body))
        finally:
            del self.virtual_threads[tag]

    def launch(self, s: Any, implicit: bool) -> None:
        axes = [(n.thread_binding.thread_tag, n.extent) for n in walk(s)
                if isinstance(n, S.For) and n.kind == "thread_binding" and n.thread_binding is not None]
        axes += [(n.node.thread_tag, n.value) for n in walk(s) if isinstance(n, S.AttrStmt)
                 and n.attr_key in ("thread_extent", "virtual_thread") and isinstance(n.node, E.IterVar)]
        axes = [(tag, extent) for tag, extent in axes if not gpu.is_virtual_tag(tag)]
        kernel = gpu.Kernel(self.func_name, self.warp_size, [tag for tag, _ in axes])
        extents = [self.src(e) for _, e in axes]
        fn = self.fresh("kernel")
        self.emit(f"def {fn}(_ix, _me, _blk):")
        self.depth += 1
        outer_loops, self.loops = self.loops, 0  # (a break here would leave the thread)
        self.kernel = _KernelScope(kernel, implicit)
        outer_bufs = dict(self.bufs)  # (buffers bound inside are the kernel's locals)
        try:
            used = {n.buffer.data for n in walk(s) if isinstance(n, (E.BufferLoad, S.BufferStore))}
            used |= {m.source.buffer.data for n in walk(s) if isinstance(n, S.Block) for m in n.match_buffers}
            for data, (scope, dtype, size) in self.outer_allocs.items():
                if data in used:  # this thread's (or block's) copy of it
                    self.alloc_scoped(data, scope, dtype, size)
            before = len(self.lines)
            self.stmt(s)
            if len(self.lines) == before:
                self.emit("pass")
            if any(_is_cp_async(n) for n in walk(s)):
                self.emit(self._call(reference_async.finish, "_blk", "_me"))
            if any(_is_bulk_store(n) for n in walk(s)):
                self.emit(self._call(reference_tma.finish, "_blk", "_me"))
        finally:
            self.kernel, self.bufs = None, outer_bufs
            self.loops = outer_loops
            self.depth -= 1
        extents_src = "(" + "".join(x + ", " for x in extents) + ")"
        self.emit(self._call(gpu.launch, self.name(kernel, "_k"), extents_src, fn))

    # ---- memory
    def alloc(self, data: E.Var, dtype: DataType, extents: tuple) -> None:
        scope = _scope(data)
        if self.kernel is None and scope == "global":
            return super().alloc(data, dtype, extents)
        self.data_dtypes[data] = numpy_dtype(dtype)
        size = self.alloc_size(dtype, extents)
        if self.kernel is None:  # (each launch that uses it gets its own: alloc_scoped)
            self.outer_allocs[data] = (scope, dtype, size)
        self.alloc_scoped(data, scope, dtype, size)

    def alloc_scoped(self, data: E.Var, scope: str, dtype: DataType, size: str) -> None:
        """Allocate ``data``: in a kernel, shared memory from the block (per warp row for
        ``warp``), global memory once per launch, anything else the thread's own."""
        np_dtype = self.name(numpy_dtype(dtype))
        key = self.name(self.fresh("a"), "_s")  # (the allocation site: one array per block or launch)
        if self.kernel is not None and scope in reference_wmma.SCOPES:  # (the warp's, as a whole)
            self.emit(f"{self.local(data)} = " + self._call(reference_wmma.fragment, "_blk", key, self.name(data.name, "_s"),
                                                            self.name(scope, "_s"), np_dtype, size, "_me"))
        elif self.kernel is None or scope not in (*_SHARED, "warp", "global"):
            self.emit(f"{self.local(data)} = np.zeros({size}, dtype={np_dtype})")
        elif scope == "global":
            self.emit(f"{self.local(data)} = _blk.global_memory({key}, {size}, {np_dtype})")
        else:
            args = f"{key}, {self.name(data.name, '_s')}, {size}, {np_dtype}"
            self.emit(f"{self.local(data)} = " + (f"_blk.warp_memory({args}, _me)" if scope == "warp"
                                                  else f"_blk.shared({args})"))
            self.kernel.tracked.add(data)

    def match_buffer(self, m: Any) -> None:
        """A match_buffer of shared memory is shared memory (race-checked: the same Shared)."""
        super().match_buffer(m)
        if self.kernel is not None and m.source.buffer.data in self.kernel.tracked:
            self.kernel.tracked.add(m.buffer.data)

    def tracked(self, buffer: Any) -> bool:
        """Whether ``buffer`` is shared memory of the kernel being compiled (race-checked)."""
        return self.kernel is not None and buffer.data in self.kernel.tracked

    def array(self, buffer: Any, flat: str) -> str:
        # (shared memory accessed without the race checks, in a cross-thread reduction)
        return flat + ".data" if self.tracked(buffer) else flat

    def load(self, e: E.BufferLoad) -> str:
        _element_wise(e.buffer)
        if not self.tracked(e.buffer) or self.kernel.atomic:
            return super().load(e)
        flat, index = self.flat_index(e.buffer, e.indices)
        return f"{flat}.load({self.positions(e.buffer, flat, index)}, _me, {self.kernel.stmt_ref})"

    def store(self, s: S.BufferStore, value: str) -> str:
        _element_wise(s.buffer)
        if not self.tracked(s.buffer) or self.kernel.atomic:
            return super().store(s, value)
        flat, index = self.flat_index(s.buffer, s.indices)
        return f"{flat}.store({self.positions(s.buffer, flat, index)}, {value}, _me, {self.kernel.stmt_ref})"

    def positions(self, buffer: Any, flat: str, index: str) -> str:
        """A shared array's positions of ``buffer[index]``: the index, or for a buffer of vectors
        (``float32x2``) its element's lanes."""
        if buffer.dtype.lanes == 1:
            return index
        return f"{self.name(vector_positions, '_f')}({index}, {buffer.dtype.lanes}, {flat}.size, {self.name(buffer.name, '_s')})"

    # ---- statements
    def stmt(self, s: Any) -> None:
        k = self.kernel
        if k is None or isinstance(s, S.SeqStmt):  # (messages name the innermost statement)
            return super().stmt(s)
        outer = k.current, k.stmt_ref
        k.current, k.stmt_ref = s, self.name(s, "_st")
        try:
            super().stmt(s)
        finally:
            k.current, k.stmt_ref = outer

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        k = self.kernel
        if k is None or not k.uniform:
            return super().s_SeqStmt(s)
        read, written = set(), set()  # shared memory accessed since the last barrier
        for child in s.seq:
            r, w = _shared_accesses(child)
            if written & (r | w) or read & w:
                sync = _sync_stmt()
                k.barriers[id(sync)] = child
                self.stmt(sync)
                read, written = set(), set()
            self.stmt(child)
            read |= r
            written |= w

    def s_For(self, s: S.For) -> None:
        if s.kind == "thread_binding" and s.thread_binding is not None:
            return self.thread_axis(s, s.thread_binding.thread_tag, s.loop_var, s.min, s.extent, s.body)
        k = self.kernel
        if k is None:
            return super().s_For(s)
        varies = k.varies(s.min, s.extent, s.step) if s.step is not None else k.varies(s.min, s.extent)
        if varies:
            k.variant.add(s.loop_var)
        elif k.uniform:
            r, w = _shared_accesses(s.body)
            if r & w:  # the next iteration overwrites what this one read: ThreadSync's barrier
                sync = _sync_stmt()
                k.barriers[id(sync)] = s
                s = s.with_changes(body=S.SeqStmt((s.body, sync)))
        self.diverge(varies, super().s_For, s)

    def diverge(self, varies: bool, compile_: Any, s: Any) -> None:
        """``compile_(s)``, knowing whether the threads of a block may take different paths in it."""
        k = self.kernel
        k.diverging += varies
        try:
            compile_(s)
        finally:
            k.diverging -= varies

    def s_While(self, s: S.While) -> None:
        if self.kernel is None:
            return super().s_While(s)
        self.diverge(True, super().s_While, s)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        if self.kernel is None:
            return super().s_IfThenElse(s)
        self.diverge(self.kernel.varies(s.condition), super().s_IfThenElse, s)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        if self.kernel is not None and self.kernel.varies(s.value):
            self.kernel.variant.add(s.var)
        super().s_LetStmt(s)

    def s_BlockRealize(self, s: S.BlockRealize) -> None:
        self.unplaced.update(b.data for b in s.block.alloc_buffers)
        self.unplaced.update(m.buffer.data for m in s.block.match_buffers if m.source.buffer.data in self.unplaced)
        k = self.kernel
        if k is None:
            return super().s_BlockRealize(s)
        cross_thread = False  # (LowerCrossThreadReduction's test: a reduction block, with an init)
        for iv, value in zip(s.block.iter_vars, s.iter_values):
            if k.varies(value):
                k.variant.add(iv.var)
                cross_thread |= iv.iter_type == E.COMM_REDUCE and s.block.init is not None
        if cross_thread:
            for n in walk(s.block):
                if isinstance(n, S.BufferStore) and _scope(n.buffer.data) not in ("global", *_SHARED):
                    raise TVMSError(
                        f"the reference executor cannot run the cross-thread reduction of block "
                        f"{s.block.name_hint!r} into the {_scope(n.buffer.data)} buffer {n.buffer.name!r} "
                        f"(each thread holds its own): lower it with LowerCrossThreadReduction first")
        outer, k.atomic = k.atomic, k.atomic or cross_thread
        try:
            self.diverge(k.varies(s.predicate), super().s_BlockRealize, s)
        finally:
            k.atomic = outer

    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            return self.thread_axis(s, s.node.thread_tag, s.node.var, E.IntImm(DataType("int32"), 0),
                                    s.value, s.body)
        if self.kernel is not None and s.attr_key == "async_commit_queue_scope":  # (cp.async groups)
            self.stmt(s.body)
            return self.emit(self._call(reference_async.commit_group, "_blk", "_me", self.src(s.value)))
        if self.kernel is not None and s.attr_key == "async_wait_queue_scope":
            count, body = S.async_wait(s, "the reference executor", cuda=False)
            self.emit(self._call(reference_async.wait_group, "_blk", "_me", self.src(count), self.src(s.value)))
            return self.stmt(body)
        if s.attr_key == "reduce_scope" and isinstance(s.node, E.CommReducer):
            self.reducers.append(s.node)
            try:
                return self.stmt(s.body)
            finally:
                self.reducers.pop()
        return super().s_AttrStmt(s)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        v = s.value
        if isinstance(v, E.Call) and getattr(v.op, "name", None) == "tir.tvm_thread_allreduce":
            return self.allreduce(s, v)
        super().s_Evaluate(s)

    # ---- where threads meet
    def wait(self, kind: int, stmt: Any, payload: tuple = (), note: str = "", extra: Any = None) -> str:
        """The source of a ``yield`` of a request to the block's scheduler (an expression)."""
        k = self.kernel
        site = k.kernel.site(kind, stmt, note, extra)
        return f"(yield ({kind}, {site}{''.join(', ' + p for p in payload)}))"

    def e_Call(self, e: E.Call) -> str:
        name = getattr(e.op, "name", None)
        k = self.kernel
        if name == "tir.tvm_storage_sync" and k is not None:
            scope = e.args[0].value if e.args and isinstance(e.args[0], E.StringImm) else ""
            stmt = k.current
            if scope in _SHARED:
                before = k.barriers.get(id(stmt))
                if before is not None:  # one the executor added: name the statement it precedes
                    return self.wait(gpu.BARRIER, before, note="the barrier TVM's ThreadSync places before ")
                return self.wait(gpu.BARRIER, stmt)
            if scope == "warp":
                return self.wait(gpu.WARP_SYNC, stmt)
            raise TVMSError(f"the reference executor runs one GPU block at a time and cannot "
                            f"synchronise {scope!r} memory across blocks")
        if name in ("tir.cuda.cta_sync", "tir.cuda.warp_sync") and k is not None:  # (__syncthreads, __syncwarp)
            return self.wait(gpu.BARRIER if name == "tir.cuda.cta_sync" else gpu.WARP_SYNC, k.current)
        if name in ("tir.cuda.syncthreads_and", "tir.cuda.syncthreads_or") and k is not None:
            return self.wait(gpu.BARRIER, k.current, (repr("and" if name.endswith("and") else "or"), self.src(e.args[0])))
        if name == "tir.cuda.thread_rank" and k is not None:  # (the thread's number in its block)
            return "np.int32(_me)"
        if name == "tir.cuda.grid_sync" and k is not None:
            raise TVMSError("the reference executor runs one GPU block at a time and cannot wait for the "
                            "grid (T.cuda.grid_sync)")
        if name in ("tir.cuda.atomic_add", "tir.cuda.atomic_cas"):
            if not is_pointer(e.args[0]):
                raise TVMSError(f"the reference executor follows a pointer of T.{name[4:]} only as a buffer's data, "
                                f"T.address_of(...) or T.tvm_access_ptr(...), not {e.args[0].script()}")
            op = repr(name[len("tir.cuda.atomic_"):])
            return self._call(gpu.atomic, self._ptx_pointer(e.args[0]), op, *(self.src(a) for a in e.args[1:]))
        if name in _VOTES or name == "tir.cuda.warp_reduce":
            if k is None:
                raise TVMSError(f"T.{name[4:]} outside a GPU kernel (no thread launch encloses it)")
            if name == "tir.cuda.warp_reduce":  # (value, "sum"/"max"/"min", width): all 32 lanes take part
                op, width = reduction(e), power_of_two(e, 2, "width", 2, 32)  # (as the CUDA code generator)
                payload = (repr(f"warp_{op}"), "0xFFFFFFFF", self.src(e.args[0]), str(width))
            else:  # (mask, value)
                payload = (repr(_VOTES[name]), self.src(e.args[0]), self.src(e.args[1]), "32")
            return self.wait(gpu.WARP_VOTE, k.current, payload)
        if name in reference_wmma.CALLS:
            if k is None:
                raise TVMSError(f"{name[4:]} outside a GPU kernel (no thread launch encloses it)")
            args = [self._access_ptr(a) if _is_access_ptr(a) else repr(a.value) if isinstance(a, E.StringImm)
                    else self.src(a) for a in e.args]
            return self.wait(gpu.WMMA, k.current, (repr(name[len("tir.tvm_"):]), f"({', '.join(args)},)"))
        if name in _PTX_CALLS:
            if k is None:
                raise TVMSError(f"{name[4:]} outside a GPU kernel (no thread launch encloses it)")
            return self.ptx_call(name, e)
        if name == "tir.s_tir.cp_async_raw":
            if k is None:
                raise TVMSError("cp_async_raw outside a GPU kernel (no thread launch encloses it)")
            dst, dst_offset, src, src_offset, nbytes = e.args[:5]
            predicate = self.src(e.args[5]) if len(e.args) == 6 else "True"
            return self._call(reference_async.cp_async, "_blk", "_me", self._pointer(dst, e.dtype), self.src(dst_offset),
                              self.local(pointer_data(src)), self.src(src_offset), self.src(nbytes), predicate,
                              k.stmt_ref)
        if name in _SHUFFLES or name in _ACTIVEMASKS:
            if k is None:
                raise TVMSError(f"{name[4:]} outside a GPU kernel (no thread launch encloses it)")
            stmt = k.current
            if name in _ACTIVEMASKS:
                return self.wait(gpu.ACTIVEMASK, stmt)
            mask, value, arg, width = (self.src(a) for a in e.args[:4])
            return self.wait(_SHUFFLES[name], stmt, (mask, value, arg, width))
        return super().e_Call(e)

    def ptx_call(self, name: str, e: E.Call) -> str:
        """A PTX tensor-core intrinsic (``reference_ptx``), its pointers as (memory, offset)."""
        k = self.kernel
        args = [self._ptx_pointer(a) if is_pointer(a) else repr(a.value) if isinstance(a, E.StringImm)
                else self.src(a) for a in e.args]
        lane = f"_ix[{k.kernel.tags.index('threadIdx.x')}]" if "threadIdx.x" in k.kernel.tags else "0"
        if name == "tir.mma_fill_legacy":
            return self._call(reference_ptx.fill, *args, "_me", k.stmt_ref)
        if name == "tir.mma_store_legacy":
            return self._call(reference_ptx.store, *args, lane, "_me", k.stmt_ref)
        op = name[len("tir.ptx_legacy."):]
        if op == "ldmatrix" and e.args[0].value and self._element_bytes(e.args[3]) == 1:
            # (ldmatrix cannot transpose 8-bit elements: the code generator gathers them, each thread alone)
            return self._call(reference_ptx.gather_int8_trans, *args[3:], lane, "_me", k.stmt_ref)
        return self.wait(gpu.PTX, k.current, (repr(op), f"({', '.join(args)},)"))

    def _element_bytes(self, data: Any) -> int:
        """The size of an element of the memory the data Var ``data`` points at."""
        known = self.data_dtypes.get(data)
        if known is not None:
            return known.itemsize
        element = getattr(getattr(data, "type_annotation", None), "element", None)
        return element.bits // 8 if element is not None else 0

    def _ptx_pointer(self, e: Any) -> str:
        """A data Var, ``T.address_of(buf[i])`` or ``T.tvm_access_ptr`` as the source of (memory,
        offset in its elements)."""
        if isinstance(e, E.Var):
            return f"({self.local(e)}, 0)"
        if _is_access_ptr(e):
            return f"({self._pointer(e.args[1], e.args[0].dtype)}, {self.src(e.args[2])})"
        load = e.args[0]
        if not isinstance(load, E.BufferLoad):
            raise TVMSError(f"the reference executor takes T.address_of of a buffer element, not of {load.script()}")
        flat, index = self.flat_index(load.buffer, load.indices)
        return f"({flat}, {index})"

    def _pointer(self, arg: Any, dtype: DataType) -> str:
        """The memory a pointer argument names, seen as elements of ``dtype`` (a view of merged
        shared memory where its type differs)."""
        data = pointer_data(arg)
        memory, mine = self.local(data), numpy_dtype(dtype)
        if self.data_dtypes.get(data, mine) != mine:
            memory = f"{memory}.view({self.name(mine)})"
        return memory

    def _access_ptr(self, e: E.Call) -> str:
        """``T.tvm_access_ptr(type, data, offset, extent, mask)`` as (memory, offset, placed), the
        memory seen as elements of ``type`` (the offset counts them)."""
        data = pointer_data(e.args[1])
        return f"({self._pointer(data, e.args[0].dtype)}, {self.src(e.args[2])}, {data not in self.unplaced})"

    def allreduce(self, s: S.Evaluate, call: E.Call) -> None:
        """``T.tvm_thread_allreduce(size, values..., cond, results..., threads...)`` in the
        enclosing ``reduce_scope``: every thread gets its group's reduction in its results."""
        k = self.kernel
        if k is None:
            raise TVMSError("T.tvm_thread_allreduce outside a GPU kernel (no thread launch encloses it)")
        if not self.reducers:
            raise TVMSError("T.tvm_thread_allreduce outside a reduce_scope attribute (it names the reducer)")
        reducer = self.reducers[-1]
        size = int(call.args[0].value)
        values, cond = call.args[1:1 + size], call.args[1 + size]
        results, threads = call.args[2 + size:2 + 2 * size], call.args[2 + 2 * size:]
        if len(results) != size or not all(isinstance(r, E.BufferLoad) for r in results):
            raise TVMSError("T.tvm_thread_allreduce: expected a buffer element for each result")
        unknown = [t for t in threads if t not in k.tags]
        if unknown:
            raise TVMSError(f"T.tvm_thread_allreduce reduces over {unknown[0]!r}, which is not a thread index")
        extra = (_combiner(reducer), tuple(_constant(x) for x in reducer.identity_element),
                 {k.tags[t] for t in threads})
        answers = [E.Var(f"allreduce_{i}", r.dtype) for i, r in enumerate(results)]
        request = self.wait(gpu.ALLREDUCE, s, (f"({''.join(self.src(v) + ', ' for v in values)})",
                                               self.src(cond)), extra=extra)
        self.emit(f"{''.join(self.local(v) + ', ' for v in answers)}= {request}")
        for answer, r in zip(answers, results):  # (each thread's own result buffer)
            self.s_BufferStore(S.BufferStore(r.buffer, answer, r.indices))


def _is_cp_async(e: Any) -> bool:
    """A cp.async copy: TVM's builtin, or an instruction of the PTX dialect."""
    return isinstance(e, E.Call) and getattr(e.op, "name", None) in _CP_ASYNC


def _is_bulk_store(e: Any) -> bool:
    entry = ptx.ENTRIES.get(getattr(e.op, "name", None)) if isinstance(e, E.Call) else None
    return entry is not None and entry.name in reference_tma.BULK_STORES


_CP_ASYNC = ("tir.s_tir.cp_async_raw", *(f"tirx.ptx.cp_async_{kind}" for kind in ("ca", "cg", "ca_src_size", "cg_src_size")))


_PTX_CALLS = ("tir.ptx_legacy.mma", "tir.ptx_legacy.ldmatrix", "tir.mma_fill_legacy", "tir.mma_store_legacy")


def is_pointer(e: Any) -> bool:
    """A PTX call's pointer argument: a data Var, ``T.address_of(buf[i])`` or ``T.tvm_access_ptr``."""
    return (isinstance(e, E.Var) and e.dtype.is_handle or _is_access_ptr(e)
            or isinstance(e, E.Call) and getattr(e.op, "name", None) == "tir.address_of")


def _is_access_ptr(e: Any) -> bool:
    return isinstance(e, E.Call) and getattr(e.op, "name", None) == "tir.tvm_access_ptr"


def _element_wise(buffer: Any) -> None:
    if _scope(buffer.data) in reference_wmma.SCOPES:
        raise TVMSError(f"the {_scope(buffer.data)} fragment {buffer.name!r} is accessed element by element: "
                        f"only the WMMA calls (T.tvm_load_matrix_sync, ...) touch a fragment")


def _constant(e: Any) -> Any:
    from .reference import compile_expr
    return cast_value(compile_expr(e)({}), e.dtype)


def _combiner(reducer: E.CommReducer) -> Any:
    """``(acc, values) -> acc`` of a comm_reducer: ``lambda x, y: x + y`` over tuples."""
    from .reference import compile_expr
    parts = [(compile_expr(r), r.dtype) for r in reducer.result]

    def combine(acc: tuple, values: tuple) -> tuple:
        env = dict(zip(reducer.lhs, acc))
        env.update(zip(reducer.rhs, values))
        return tuple(cast_value(fn(env), dtype) for fn, dtype in parts)
    return combine
