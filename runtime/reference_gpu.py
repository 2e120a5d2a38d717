"""GPU semantics for the reference executor: grids of blocks and threads, shared memory per
block, barriers, warp shuffles in lock-step and cross-thread allreduce.

The code generator (``reference_kernel.py``) compiles the body of a kernel (the statements under
its outermost thread binding, ``T.launch_thread`` or ``T.thread_binding`` loop) into a Python
function of one thread: ``kernel(ix, me, block)``, where ``ix`` holds the thread's index on
every axis of the launch (blockIdx.*, threadIdx.*), ``me`` its number in the block (threadIdx.x
fastest; lane ``me % warp_size`` of warp ``me // warp_size``) and ``block`` the ``Block`` it runs
in (its shared memory). Where threads meet, that function ``yield``s a request to the block's
scheduler, ``(kind, site, *payload)``:

* ``BARRIER``: ``T.tvm_storage_sync("shared")``, or the barrier TVM's ThreadSync will place in
  scheduled TensorIR; every thread of the block must reach the same one (``T.cuda.syncthreads_and``
  / ``_or``: with the thread's vote, and the barrier answers with the block's);
* ``WARP_SYNC``: ``T.tvm_storage_sync("warp")``, for the lanes of a warp that reach it together
  (TVM's CUDA code generator emits nothing for it: the lanes of a warp run in lock-step, and
  LowerThreadAllreduce puts it in code only some lanes run);
* ``SHUFFLE`` / ``SHUFFLE_UP`` / ``SHUFFLE_DOWN`` / ``SHUFFLE_XOR`` / ``ACTIVEMASK``: the warp
  intrinsics (TVM's ``T.tvm_warp_*`` and CUDA's ``T.cuda.__shfl*_sync`` / ``__activemask`` that
  LowerIntrin makes of them), answered once every lane the mask names has reached the same one
  (lock-step); a lane outside its own mask is an error, and a lane reading one outside the mask
  or not there reads an undefined value (NaN; its own value for a type without one);
* ``ALLREDUCE``: ``T.tvm_thread_allreduce``, a block-wide collective that reduces over the
  threads of each reduction group and answers every thread with its group's value;
* ``WMMA``: a tensor-core call, run once when every running lane of the warp has reached it
  (``reference_wmma``);
* ``PTX``: ``mma.sync`` or ``ldmatrix`` (``T.ptx_legacy.*``), run once when every lane of the
  warp has reached it, each lane with its own fragment registers and addresses (``reference_ptx``);
* ``WARP_VOTE``: CUDA's warp votes and reductions (``T.cuda.ballot_sync``, ``any_sync``,
  ``reduce_add_sync_u32``, ``reduce_min_sync_u32``, ``warp_reduce``) and the PTX dialect's
  (``T.ptx.shfl_sync``, ``vote_sync``, ...: a function of the lanes' values, reference_ptx_dialect),
  answered as the shuffles;
* ``MBARRIER``: ``T.cuda.mbarrier_wait``, with a function that tells whether the phase it waits
  for has completed (reference_tma): answered as soon as it has, whatever the other threads do.

A kernel without any such point is a plain function, run thread after thread (the fast path).
Otherwise ``run_block`` runs the threads of a block round-robin: each runs until it waits, and
the waits are answered when they can be; a wait that can never be answered (a barrier some
threads never reach, a shuffle whose lanes went elsewhere) is a TVMSError.

Shared (and warp) memory is a ``Shared`` array that remembers, per element, which thread last
wrote and read it since the last barrier: a thread reading an element another thread wrote, or
writing a different value over one another thread wrote or read, since the last barrier is a
data race and a TVMSError naming the buffer and the statement, unless an mbarrier ordered the two
(as the PTX memory model orders them: an arrive releases what its thread did before it, a wait
that sees the phase complete acquires what the arrivals that completed it released). For that,
each access also records its thread's count of arrivals then (``Block.release``/``acquire``).
Shared memory starts undefined (NaN for floats), as a lane that reads a shuffle from a lane that
is not there gets NaN: a use shows.
"""
from __future__ import annotations

import inspect
import itertools
import re
from typing import Any, Callable

import numpy as np

from tvms.ir.errors import TVMSError

from . import reference_ptx, reference_wmma

(BARRIER, WARP_SYNC, SHUFFLE, SHUFFLE_UP, SHUFFLE_DOWN, ACTIVEMASK, ALLREDUCE, WMMA, PTX, WARP_VOTE, MBARRIER,
 SHUFFLE_XOR) = range(12)
_WARP_KINDS = (WARP_SYNC, SHUFFLE, SHUFFLE_UP, SHUFFLE_DOWN, SHUFFLE_XOR, ACTIVEMASK, WMMA, PTX, WARP_VOTE)
_SHUFFLE_NAMES = {SHUFFLE: "shuffle", SHUFFLE_UP: "shuffle up", SHUFFLE_DOWN: "shuffle down", SHUFFLE_XOR: "xor shuffle"}

_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
CLOCK_STEP = 1 << 24  # more than the threads of any block


def is_block_tag(tag: str) -> bool:
    return tag.startswith("blockIdx.")


def is_virtual_tag(tag: str) -> bool:
    return tag.startswith(("vthread", "cthread"))


def check_tag(tag: str) -> None:
    if not (tag in _THREAD_TAGS or is_virtual_tag(tag) or is_block_tag(tag) and tag[-1] in "xyz"):
        raise TVMSError(f"the reference executor does not know the thread axis {tag!r}")


def describe(stmt: Any) -> str:
    """A statement for messages: the first line of its TVMScript in backquotes (without the
    declarations of the buffers and variables it uses, which the printer puts first) and, when
    it was parsed, where it is (``source:line:col``)."""
    lines = [ln for ln in stmt.script().splitlines() if ln and not _DECLARATION.match(ln)]
    text = lines[0].strip() if lines else type(stmt).__name__
    text = f"`{text if len(text) <= 120 else text[:117] + '...'}`"
    span = getattr(stmt, "span", None)
    return f"{text} ({span.source.name}:{span.line}:{span.col})" if span is not None else text


_DECLARATION = re.compile(r"\w+ = T\.\w+\(")


class Site:
    """A point of a kernel where threads wait for each other."""

    __slots__ = ("kind", "stmt", "note", "extra")

    def __init__(self, kind: int, stmt: Any, note: str = "", extra: Any = None) -> None:
        self.kind, self.stmt, self.note, self.extra = kind, stmt, note, extra

    def __str__(self) -> str:
        return self.note + describe(self.stmt)


class Kernel:
    """What the code generator knows of one launch: the tag of each binding (in the order of
    the extents ``launch`` gets), the wait sites, the warp size, the function's name."""

    def __init__(self, name: str, warp_size: int, bindings: list[str]) -> None:
        self.name = name
        self.warp_size = warp_size
        self.bindings = bindings
        self.tags = sorted(set(bindings))  # the launch's axes, in the order of a thread's ``ix``
        self.sites: list[Site] = []

    def site(self, kind: int, stmt: Any, note: str = "", extra: Any = None) -> int:
        self.sites.append(Site(kind, stmt, note, extra))
        return len(self.sites) - 1


def bulk_reads_key(root: Any) -> tuple:
    """The key of ``Block.in_flight`` under which the bytes of the shared allocation ``root`` that
    bulk copies to global memory are still reading are counted."""
    return ("bulk reads", root)


class Block:
    """One GPU block: its shared memory and the clock its barriers advance."""

    def __init__(self, kernel: Kernel, extents: dict, coords: dict, threads: list[dict],
                 warps: list[tuple], grid: dict) -> None:
        self.kernel = kernel
        self.grid = grid  # the launch's global allocations, shared by its blocks
        self.extents = extents  # tag -> extent
        self.coords = coords  # blockIdx.* -> value
        self.threads = threads  # per thread: its threadIdx.* -> value
        self.warps = warps  # per thread: (warp, lane)
        self.clock = 0  # advanced by every barrier (in steps of CLOCK_STEP, above any thread number)
        self.memory: dict = {}
        # root Shared -> per byte, the cp.async copies writing it not yet waited for (and under
        # bulk_reads_key(root): the bulk copies to global still reading it)
        self.in_flight: dict = {}
        # mbarrier synchronisation: each thread's count of its arrivals (its accesses record it),
        # and per thread, for each thread it acquired from, the count below which that thread's
        # accesses happen before its own
        self.arrivals: dict = {}
        self.acquired: dict = {}
        self.mbarriers = False  # (whether one was initialised: readers are then tracked in full)

    def release(self, me: int) -> dict:
        """Thread ``me`` arrives on an mbarrier: what it publishes (its accesses until now, and
        those of the threads it acquired from) for the threads that wait for the phase."""
        count = self.arrivals.get(me, 0) + 1
        self.arrivals[me] = count
        return {**self.acquired.get(me, {}), me: count}

    def acquire(self, me: int, published: dict) -> None:
        """Thread ``me``'s wait saw a phase complete: what its arrivals published happens before it."""
        mine = self.acquired.setdefault(me, {})
        for thread, count in published.items():
            if thread != me and count > mine.get(thread, 0):
                mine[thread] = count

    def ordered(self, other: int, count: int, me: int) -> bool:
        """Whether an access of thread ``other`` made at its arrival count ``count`` happens before
        what thread ``me`` does now (through mbarriers)."""
        return count < self.acquired.get(me, {}).get(other, 0)

    def shared(self, key: int, name: str, size: int, dtype: np.dtype) -> "Shared":
        """The block's one ``shared`` allocation of a site (allocated by the first thread)."""
        mem = self.memory.get(key)
        if mem is None:
            mem = self.memory[key] = Shared(self, name, size, dtype)
        return mem

    def global_memory(self, key: int, size: int, dtype: np.dtype) -> np.ndarray:
        """A ``global`` allocation in a kernel: one for the whole launch (zero-filled)."""
        mem = self.grid.get(key)
        if mem is None:
            mem = self.grid[key] = np.zeros(size, dtype)
        return mem

    def warp_memory(self, key: int, name: str, size: int, dtype: np.dtype, me: int) -> "Shared":
        """``warp`` scope as TVM's LowerWarpMemory defines it: one allocation per row of threads
        along threadIdx.x (the threads that differ only in threadIdx.x), at most a warp wide."""
        width = self.extents.get("threadIdx.x", 1)
        if width > self.kernel.warp_size:
            raise TVMSError(f"warp memory {name!r} needs a threadIdx.x extent of at most the warp size "
                            f"({self.kernel.warp_size}), not {width}")
        row = tuple(v for t, v in self.threads[me].items() if t != "threadIdx.x")  # (y, z)
        return self.shared((key, row), name, size, dtype)

    def warp_identity(self, warp: int) -> int:
        """Who warp ``warp``'s collective accesses (a WMMA call's) are, next to its threads' numbers."""
        return len(self.threads) + warp

    def thread(self, me: int) -> str:
        """``thread (threadIdx.x=3, threadIdx.y=0)``, for messages."""
        if me >= len(self.threads):
            return f"warp {me - len(self.threads)} (a WMMA call)"
        return f"thread ({', '.join(f'{t}={v}' for t, v in self.threads[me].items()) or 'the only one'})"

    def who(self, me: int) -> str:
        """The thread and its block, for messages."""
        block = ", ".join(f"{t}={v}" for t, v in self.coords.items())
        return self.thread(me) + (f" of block ({block})" if block else "")


class _Tracks:
    """Who last wrote and read each piece of a shared array since the last barrier, one entry per
    ``unit`` bytes: the smallest element of the views of the array that have accessed it (typed
    views of one allocation, as in merged shared memory, share it, so that they race with each
    other as one buffer; a uint8 allocation that float32 views access is tracked by 4 bytes)."""

    __slots__ = ("nbytes", "unit", "written", "read", "written_at", "read_at", "other_read", "earlier_readers")

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.unit = 0  # (none yet: set by the first access)
        self.written: list = []
        self.read: list = []
        # the writer's and the reader's arrival counts at the access (Block.ordered)
        self.written_at: list = []
        self.read_at: list = []
        # A write races with every reader since the barrier that nothing orders before it. Without
        # mbarriers that is any reader but the writer, so one other reader than the last is enough
        # (``other_read``, as ``read``; no thread has arrived then, so its count is 0). Once the
        # block has an mbarrier, every reader is kept: piece -> (clock, {thread: its latest
        # arrival count at a read}).
        self.other_read: list = []
        self.earlier_readers: dict = {}

    def replace_reader(self, piece: int, last: int, me: int, clock: int, mbarriers: bool) -> None:
        """Thread ``me`` is about to become the last reader of ``piece`` in place of ``last``
        (``clock + thread``, another thread since the barrier at ``clock``): keep ``last``, as the
        other reader (that one being another thread than ``me``), or with ``mbarriers`` among
        every earlier reader."""
        if mbarriers:
            self.keep_reader(piece, last, clock)
        elif self.other_read[piece] < clock or self.other_read[piece] == clock + me:
            self.other_read[piece] = last

    def keep_reader(self, piece: int, last: int, clock: int) -> None:
        """The block has mbarriers: ``last`` (``clock + thread``), the last reader of ``piece``
        until now, joins its earlier readers."""
        seen, readers = self.earlier_readers.get(piece, (clock, None))
        if readers is None or seen != clock:
            readers = {}
            self.earlier_readers[piece] = (clock, readers)
        at = self.read_at[piece]
        if at >= readers.get(last - clock, 0):
            readers[last - clock] = at

    def readers_since(self, piece: int, clock: int) -> list:
        """Every (thread, arrival count) that read ``piece`` since the barrier at ``clock``."""
        found = [(who - clock, at) for who, at in ((self.read[piece], self.read_at[piece]),
                                                   (self.other_read[piece], 0)) if who >= clock]
        seen, readers = self.earlier_readers.get(piece, (clock - 1, None))
        if seen == clock:
            found += readers.items()
        return found

    def fit(self, itemsize: int) -> None:
        """Track pieces of at most ``itemsize`` bytes (keeping what is known)."""
        if not self.unit:
            self.unit = itemsize
            count = self.nbytes // itemsize
            self.written, self.read, self.other_read = [-1] * count, [-1] * count, [-1] * count
            self.written_at, self.read_at = [0] * count, [0] * count
        elif itemsize < self.unit:
            parts = self.unit // itemsize
            self.written, self.read, self.other_read, self.written_at, self.read_at = (
                [v for v in values for _ in range(parts)]
                for values in (self.written, self.read, self.other_read, self.written_at, self.read_at))
            self.earlier_readers = {piece * parts + k: (seen, dict(readers))
                                    for piece, (seen, readers) in self.earlier_readers.items() for k in range(parts)}
            self.unit = itemsize


class Shared:
    """A shared-memory array with, per element, the last writer and reader since the last
    barrier, each as ``block.clock + thread`` (older clocks are smaller), to find data races.
    ``view(dtype)`` is the same memory as elements of another type, tracked with it."""

    __slots__ = ("data", "block", "name", "size", "tracks", "itemsize", "views", "root")

    def __init__(self, block: Block, name: str, size: int, dtype: np.dtype, root: "Shared | None" = None) -> None:
        if root is None:  # shared memory starts undefined: NaN where it can (so that a use shows)
            data = np.full(size, np.nan, dtype) if dtype.kind in "fc" else np.zeros(size, dtype)
        else:
            data = root.data.view(dtype)
        self.data = data
        self.block = block
        self.name = name
        self.size = len(data)
        self.itemsize = data.dtype.itemsize
        self.root = root or self
        self.tracks = root.tracks if root is not None else _Tracks(data.nbytes)
        self.views: dict = {}

    def view(self, dtype: np.dtype) -> "Shared":
        """The memory as elements of another type (one view per type, which its accesses share)."""
        root = self.root
        if dtype == root.data.dtype:
            return root
        mem = root.views.get(dtype)
        if mem is None:
            mem = root.views[dtype] = Shared(self.block, self.name, 0, dtype, root)
        return mem

    def load(self, i: Any, me: int, stmt: Any) -> Any:
        block = self.block
        if block.in_flight:
            self._landed(i, me, stmt, "reads")
        tracks, clock, count = self.tracks, block.clock, block.arrivals.get(me, 0)
        if type(i) is int and 0 <= i < self.size and self.itemsize == tracks.unit:  # (the common case)
            w = tracks.written[i]
            if w >= clock and w != clock + me and not block.ordered(w - clock, tracks.written_at[i], me):
                raise self._race(stmt, me, w - clock, i, "reads")
            last = tracks.read[i]
            if last >= clock and last != clock + me:  # (another reader since the barrier)
                tracks.replace_reader(i, last, me, clock, block.mbarriers)
            tracks.read[i], tracks.read_at[i] = clock + me, count
            return self.data[i]
        for j in (i,) if type(i) is int and 0 <= i < self.size else self._indices(i):
            for p in self._pieces(j):
                w = tracks.written[p]
                if w >= clock and w != clock + me and not block.ordered(w - clock, tracks.written_at[p], me):
                    raise self._race(stmt, me, w - clock, j, "reads")
                last = tracks.read[p]
                if last >= clock and last != clock + me:
                    tracks.replace_reader(p, last, me, clock, block.mbarriers)
                tracks.read[p], tracks.read_at[p] = clock + me, count
        return self.data[i]

    def store(self, i: Any, value: Any, me: int, stmt: Any) -> None:
        if self.block.in_flight:
            self._landed(i, me, stmt, "writes")
        if type(i) is int and 0 <= i < self.size:  # (the common case, kept short)
            before = self.data[i]
            self.data[i] = value
            changed = _changed(before, self.data[i])
            if changed or self.itemsize != self.tracks.unit:
                self._wrote(i, changed, me, stmt)
            else:
                self.tracks.written[i], self.tracks.written_at[i] = self.block.clock + me, self.block.arrivals.get(me, 0)
            return
        indices = self._indices(i)
        before = self.data[indices]
        self.data[i] = value
        for j, old, new in zip(indices, before, self.data[indices]):
            self._wrote(j, _changed(old, new), me, stmt)

    def _landed(self, i: Any, me: int, stmt: Any, what: str) -> None:
        """An access to bytes a cp.async copy is still writing (reference_async), or a write to bytes
        a bulk copy to global memory is still reading (reference_tma), is an error."""
        pending = self.block.in_flight.get(self.root)
        reading = self.block.in_flight.get(bulk_reads_key(self.root)) if what == "writes" else None
        if pending is None and reading is None:
            return
        for j in (i,) if type(i) is int else self._indices(i):
            span = slice(j * self.itemsize, (j + 1) * self.itemsize)
            if pending is not None and pending[span].any():
                raise TVMSError(f"{self.block.who(me)} {what} element {j} of the shared buffer {self.name!r} at "
                                f"{describe(stmt)} while a cp.async copy into it is in flight (no "
                                f"cp.async.wait_group has completed it, nor, for a bulk tensor copy, its "
                                f"mbarrier's phase)")
            if reading is not None and reading[span].any():
                raise TVMSError(f"{self.block.who(me)} writes element {j} of the shared buffer {self.name!r} at "
                                f"{describe(stmt)} while a bulk copy to global memory (cp.async.bulk.tensor, shared "
                                f"to global) is reading it (no cp.async.bulk.wait_group has completed its group)")

    def _pieces(self, i: int) -> range:
        """The tracked pieces of element ``i``."""
        self.tracks.fit(self.itemsize)
        k = self.itemsize // self.tracks.unit
        return range(i * k, i * k + k)

    def _wrote(self, i: int, changed: bool, me: int, stmt: Any) -> None:
        """Thread ``me`` wrote element ``i``: a new value there is a race if another thread wrote
        or read any of its pieces since the last barrier."""
        block = self.block
        tracks, clock = self.tracks, block.clock
        for p in self._pieces(i):
            if changed:
                who = tracks.written[p]
                if who >= clock and who != clock + me and not block.ordered(who - clock, tracks.written_at[p], me):
                    raise self._race(stmt, me, who - clock, i, "writes")
                for reader, at in tracks.readers_since(p, clock):
                    if reader != me and not block.ordered(reader, at, me):
                        raise self._race(stmt, me, reader, i, "overwrites")
            tracks.written[p], tracks.written_at[p] = clock + me, block.arrivals.get(me, 0)

    def _indices(self, i: Any) -> list:
        indices = [int(j) for j in np.reshape(i, -1)]
        for j in indices:
            if not 0 <= j < self.size:
                raise TVMSError(f"out-of-bounds access: element {j} of buffer {self.name!r}")
        return indices

    def _race(self, stmt: Any, me: int, other: int, i: int, what: str) -> TVMSError:
        blk = self.block
        did = "wrote" if what == "reads" else "accessed"
        element = f"element {i}"
        if self.root.views:  # (typed views share the bytes: say which)
            element += f" ({self.data.dtype}, bytes {i * self.itemsize} to {(i + 1) * self.itemsize - 1})"
        return TVMSError(
            f"data race on the shared buffer {self.name!r} in {blk.kernel.name!r} at {describe(stmt)}: "
            f"{blk.who(me)} {what} {element}, which {blk.thread(other)} {did} "
            f"since the last barrier, and no mbarrier orders the two (a phase it arrived on that this thread "
            f"then waited for; a missing T.tvm_storage_sync?)")


def _changed(old: Any, new: Any) -> bool:
    return old != new and not (old != old and new != new)  # (NaN over NaN: no change)


# ---------------------------------------------------------------- launching
def launch(kernel: Kernel, extents: tuple, body: Callable) -> None:
    """Run ``body`` (one thread of ``kernel``) on every thread of every block of the grid."""
    ext: dict[str, int] = {}
    for tag, n in zip(kernel.bindings, extents):
        n = int(n)
        if ext.setdefault(tag, n) != n:
            raise TVMSError(f"{kernel.name!r}: all loops bound to {tag!r} must have the same extent "
                            f"(got {ext[tag]} and {n})")
    tags = kernel.tags
    block_tags = [t for t in tags if is_block_tag(t)]
    tx, ty, tz = (ext.get(t, 1) for t in _THREAD_TAGS)
    threads, warps = [], []
    for lin in range(tx * ty * tz):
        coords = zip(_THREAD_TAGS, (lin % tx, lin // tx % ty, lin // (tx * ty)))
        threads.append({tag: value for tag, value in coords if tag in ext})
        warps.append((lin // kernel.warp_size, lin % kernel.warp_size))
    lockstep = inspect.isgeneratorfunction(body)
    grid: dict = {}
    for bco in itertools.product(*(range(ext[t]) for t in reversed(block_tags))):
        coords = dict(zip(reversed(block_tags), bco))
        block = Block(kernel, ext, coords, threads, warps, grid)
        ixs = [tuple(coords[t] if t in coords else th[t] for t in tags) for th in threads]
        if lockstep:
            run_block(block, [body(ix, me, block) for me, ix in enumerate(ixs)])
        else:
            for me, ix in enumerate(ixs):
                body(ix, me, block)


def run_block(block: Block, gens: list) -> None:
    """Run the threads of one block round-robin, answering their waits (module docstring)."""
    n = len(gens)
    waits: list = [None] * n  # the request each thread waits at; None when it has finished
    replies: list = [None] * n
    ready = list(range(n))
    while True:
        for t in ready:
            try:
                waits[t] = gens[t].send(replies[t])
            except StopIteration:
                waits[t] = None
        ready = _answer_warps(block, waits, replies) or _answer_mbarriers(block, waits, replies)
        if not ready:
            if all(w is None for w in waits):
                return
            ready = _answer_block(block, waits, replies)


def _answer_mbarriers(block: Block, waits: list, replies: list) -> list:
    """Release the threads whose mbarrier phase has completed; an error when no thread can move
    and some wait for a phase that can no longer complete."""
    released = [t for t, w in enumerate(waits) if w is not None and w[0] == MBARRIER and w[2]()]
    for t in released:
        replies[t] = None
    stuck = [t for t, w in enumerate(waits) if w is not None and w[0] == MBARRIER]
    if not released and stuck and all(w is None or w[0] == MBARRIER for w in waits):
        raise TVMSError(f"{block.who(stuck[0])} waits at {block.kernel.sites[waits[stuck[0]][1]]} for an mbarrier "
                        f"phase that never completes (its arrivals or transaction bytes are missing), and so "
                        f"do {len(stuck) - 1} other threads; no thread runs that could complete it")
    return released


def _answer_warps(block: Block, waits: list, replies: list) -> list:
    """Answer the warp-level waits that every lane they need has reached; the threads released."""
    groups: dict = {}
    running: dict = {}  # warp -> the lanes still running
    for t, w in enumerate(waits):
        if w is not None:
            warp, lane = block.warps[t]
            running.setdefault(warp, set()).add(lane)
            if w[0] in _WARP_KINDS:
                groups.setdefault((warp, w[1]), []).append(t)
    released: list = []
    for (warp, _), members in groups.items():
        kind = waits[members[0]][0]
        lanes = {block.warps[t][1]: t for t in members}
        if kind == ACTIVEMASK:  # the lanes that are here together
            mask = sum(1 << lane for lane in lanes)
            for t in members:
                replies[t] = mask
            released += members
        elif kind == WMMA:  # (reference_wmma: a tensor-core call, one for the whole warp)
            released += reference_wmma.collective(block, warp, lanes, running[warp], waits,
                                                  block.kernel.sites[waits[members[0]][1]])
        elif kind == PTX:
            released += reference_ptx.collective(block, warp, lanes, running[warp], waits,
                                                 block.kernel.sites[waits[members[0]][1]])
        elif kind == WARP_SYNC:  # the lanes that are here together (the others branched away)
            block.clock += CLOCK_STEP
            for t in members:
                replies[t] = None
            released += members
        elif kind == WARP_VOTE:
            released += _vote(lanes, running[warp], waits, replies, block.kernel.sites[waits[members[0]][1]])
        else:
            released += _shuffle(kind, lanes, running[warp], waits, replies, block.kernel.sites[waits[members[0]][1]])
    return sorted(released)


_BUTTERFLY = {"warp_sum": lambda a, b: a + b, "warp_max": max, "warp_min": min}


def atomic(pointer: tuple, op: str, *values: Any) -> Any:
    """``T.cuda.atomic_add(ptr, v)`` / ``atomic_cas(ptr, compare, v)`` on (memory, element): the
    old value. Threads run one at a time between their waits, so the update is whole; in shared
    memory it is no data race (nor a write the race checks remember)."""
    memory, index = pointer
    data = getattr(memory, "data", memory)
    old = data[index]
    if op == "add":
        data[index] = old + values[0]
    elif old == values[0]:
        data[index] = values[1]
    return old


def _vote(lanes: dict, running: set, waits: list, replies: list, site: Site) -> list:
    """Answer the lanes of one warp at one vote, ``(op, mask, value, width)``, once the mask's
    running lanes are all there: a ballot of the lanes (of the mask) whose value is not zero
    (``ballot``), whether any is (``any``), the sum or minimum of their unsigned values
    (``add_u32``, ``min_u32``), or (``warp_sum``/``warp_max``/``warp_min``) the butterfly of XOR
    shuffles over ``width`` lanes that T.cuda.warp_reduce is, in its order."""
    done = []
    for lane, t in lanes.items():
        _, _, op, mask, value, width = waits[t]
        mask, width = int(mask), int(width)
        if any(mask >> other & 1 and other not in lanes for other in running):
            continue
        voters = {other: waits[u][4] for other, u in lanes.items() if mask >> other & 1}
        if not voters:  # (CUDA's votes need the calling lane in the mask: an empty one is undefined)
            raise TVMSError(f"lane {lane} votes at {site} with the mask {mask:#x}, which names no lane that "
                            f"votes there")
        if callable(op):  # (a PTX instruction's: reference_ptx_dialect.WARP)
            replies[t] = op(lane, voters)
        elif op == "ballot":
            replies[t] = np.uint32(sum(1 << other for other, v in voters.items() if v))
        elif op == "any":
            replies[t] = np.int32(any(voters.values()))
        elif op == "add_u32":
            replies[t] = np.uint32(sum(int(v) for v in voters.values()) & 0xFFFFFFFF)
        elif op == "min_u32":
            replies[t] = np.uint32(min(int(v) for v in voters.values()))
        else:
            base = lane - lane % width
            values = {i: voters.get(base + i, value * np.nan if isinstance(value, (np.floating, float)) else value)
                      for i in range(width)}
            step = width >> 1
            while step:
                values = {i: _BUTTERFLY[op](values[i], values[i ^ step]) for i in values}
                step >>= 1
            replies[t] = values[lane - base]
        done.append(t)
    return done


def shuffle_source(kind: int, lane: int, arg: int, width: int) -> int:
    """The lane whose value lane ``lane`` reads at a shuffle of ``width``-lane segments (CUDA's
    ``__shfl*_sync``): its own where the source falls past its segment's end (or, shuffling up,
    before its start); a xor shuffle may read from an earlier segment."""
    base = lane - lane % width
    if kind == SHUFFLE:
        return base + arg % width
    if kind == SHUFFLE_UP:
        return lane - arg if lane % width >= arg else lane
    if kind == SHUFFLE_DOWN:
        return lane + arg if lane % width + arg < width else lane
    return lane ^ arg if (lane ^ arg) < base + width else lane


_SHUFFLE_WIDTHS = (1, 2, 4, 8, 16, 32)


def _has_nan(value: Any) -> bool:
    """Whether ``value``'s type can say "undefined" with a NaN (numpy's floats, and ml_dtypes's
    bfloat16 and narrow floats, whose numpy kind is not "f"; float4/float6 have no NaN)."""
    dtype = np.asarray(value).dtype
    if dtype.kind != "f" and not dtype.name.startswith(("bfloat", "float")):
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.isnan(np.asarray(np.nan).astype(dtype).astype(np.float32)))


def _shuffle(kind: int, lanes: dict, running: set, waits: list, replies: list, site: Site) -> list:
    """Answer the lanes of one warp at one shuffle (``lanes``: lane -> thread) whose mask's
    running lanes are all there; the threads answered. CUDA leaves undefined a shuffle whose
    mask leaves out the calling lane (refused), and the value read from a lane that is not in
    the mask or not there (exited, or elsewhere): TVM's own reductions over fewer lanes than the
    warp read such lanes and drop what they read, so it is not refused; a float reads NaN, so
    that a use shows, and a value of another type, which has no such mark, its own value."""
    done = []
    for lane, t in lanes.items():
        _, _, mask, value, arg, width = waits[t]
        mask, arg, width = int(mask), int(arg) & 0xFFFFFFFF, int(width)  # (CUDA's lane and delta: unsigned)
        if any(mask >> other & 1 and other not in lanes for other in running):
            continue
        what = f"lane {lane} at the warp {_SHUFFLE_NAMES[kind]} {site} (mask {mask:#x})"
        if not mask >> lane & 1:
            raise TVMSError(f"{what}: its mask leaves it out, which CUDA leaves undefined")
        if width not in _SHUFFLE_WIDTHS:
            raise TVMSError(f"{what}: a width of {width} lanes; CUDA's is a power of two from 1 to 32")
        src = shuffle_source(kind, lane, arg, width)
        if mask >> src & 1 and src in lanes:
            replies[t] = waits[lanes[src]][3]
        elif _has_nan(value):
            replies[t] = np.asarray(np.nan).astype(np.asarray(value).dtype)[()]
        else:  # (no undefined integer: its own value, as a sub-warp argmax of TVM's reads and drops)
            replies[t] = value
        done.append(t)
    return done


def _answer_block(block: Block, waits: list, replies: list) -> list:
    """Every thread waits: they must all wait at the same barrier or allreduce."""
    kernel = block.kernel
    here = [t for t, w in enumerate(waits) if w is not None]
    sites = {waits[t][1] for t in here}
    finished = [t for t, w in enumerate(waits) if w is None]
    first = here[0]
    site = kernel.sites[waits[first][1]]
    if len(sites) > 1 or any(waits[t][0] in _WARP_KINDS for t in here):
        where = "; ".join(f"{sum(waits[t][1] == s for t in here)} at {kernel.sites[s]}" for s in sorted(sites))
        raise TVMSError(f"threads of {kernel.name!r} wait for each other at different points and "
                        f"never meet ({where}): a barrier or warp shuffle in divergent code")
    if finished:
        raise TVMSError(f"divergent barrier in {kernel.name!r}: {block.who(first)} waits at {site}, "
                        f"which {len(finished)} threads of its block (e.g. "
                        f"{block.thread(finished[0])}) never reach")
    if site.kind == ALLREDUCE:
        _allreduce(block, site, here, waits, replies)
    elif len(waits[first]) > 2:  # (syncthreads_and / _or, bar.red.popc: a barrier that answers with a vote)
        votes = [bool(waits[t][3]) for t in here]
        how = waits[first][2]
        answer = np.int64(all(votes) if how == "and" else any(votes) if how == "or" else sum(votes))
        for t in here:
            replies[t] = answer
    else:
        for t in here:
            replies[t] = None
    block.clock += CLOCK_STEP
    return here


def _allreduce(block: Block, site: Site, threads: list, waits: list, replies: list) -> None:
    combine, identity, reduce_tags = site.extra
    groups: dict = {}
    for t in threads:
        key = tuple(v for tag, v in block.threads[t].items() if tag not in reduce_tags)
        groups.setdefault(key, []).append(t)
    for members in groups.values():
        acc = identity
        for t in members:
            _, _, values, cond = waits[t]
            if cond:
                acc = combine(acc, values)
        for t in members:
            replies[t] = acc
