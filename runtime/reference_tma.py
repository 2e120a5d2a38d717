"""The Tensor Memory Accelerator (TMA) and its mbarriers in the reference executor, as the PTX ISA
defines them ("Tensor copy", "mbarrier"): what a Hopper kernel of TVM 0.27's PTX dialect does with
the tensor maps its host encodes (``cuda_tensor_map``: a ``ReferenceTensorMap``, the encoding and
the host array it views).

* ``mbarrier.init`` gives the barrier at a shared address its expected arrival count (phase 0);
  ``mbarrier.arrive`` (``.expect_tx``: first adding to the transaction count) arrives (its
  ``state`` form returns the token of the phase it arrived in: that phase's parity);
  ``mbarrier.arrive_drop`` (its ``expect_tx`` and ``state`` forms too) arrives and takes its count
  off the expected arrivals of every later phase; ``mbarrier.expect_tx`` adds to the transaction
  count; a copy completing its bytes takes them off (``complete_tx``). The phase completes when
  every arrival is in and the count is back to zero: the copies it waited for land in shared
  memory then, the phase flips, and the arrivals start over. ``T.cuda.mbarrier_wait(bar, parity)``
  blocks the thread until the phase of that parity has completed (the scheduler's ``MBARRIER``
  wait, reference_gpu); so does ``mbarrier.try_wait`` on a state token or a parity (``WAITS``),
  then answering that it has (the hardware may also answer "not yet" when its time limit passes: a
  caller loops on it). An arrive releases and a completed wait acquires, as PTX's memory model
  says: what the threads whose arrivals completed a phase did before arriving happens before what
  a thread does after its wait for that phase (the race checker's order, reference_gpu).
* ``cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes`` (and
  ``shared::cta``) reads the box at the coordinates (innermost first) from the map's array when
  issued: the box is clipped at the tensor's edges and the elements outside are zero, or NaN where
  the map's out-of-bounds fill says so; in shared memory it is laid out innermost dimension fastest
  and, under a swizzle of 32, 64 or 128 bytes, each 16-byte chunk of a logical shared address
  moved as the hardware moves it (``ptx_memory.swizzled``, which the wgmma operands read through
  too). Its bytes are in flight (an access is an error) until the mbarrier's phase completes.
* ``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`` reads the box from shared memory
  (unswizzling it) when issued and writes the elements inside the tensor into the map's array at
  the ``cp.async.bulk.wait_group`` that completes its group (``commit_group`` closes the open one;
  a thread that ends with copies not waited for is an error). Until then the hardware may still be
  reading the box: a write to its shared bytes is an error.
* ``cp.async.bulk.prefetch.tensor`` only checks its map; ``fence.mbarrier_init`` orders nothing.
* A function run whole (``run_prim_func`` of a PrimFunc with its host part, before SplitHostDevice)
  makes its map slots (``T.tvm_stack_alloca("tensormap", 1)``) and calls the encoder
  (``T.call_packed``) itself (``HOST_INTRINSICS``).

Refused clearly: multicast (the executor runs one block, no cluster), gather4/scatter4 and
im2col, element strides other than 1, interleaved maps, the 128-byte swizzles with atoms, packed
4-bit and 6-bit types, the float32 types the hardware rounds or flushes as it copies (TFLOAT32,
forced by the encoder's last argument, and the FTZ ones), and a map whose box is copied to a shared
address not aligned as the swizzle needs. A map reads its array's bytes as elements of its own
dtype (a float16 map over a float32 buffer is a byte reinterpretation, as on the GPU).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError
from tvms.ir.registry import get_script_func

from . import reference_async
from .cuda_tensor_map import (FLOATING, INTERLEAVE_NONE, OOB_FILL_NAN, PACKED, SWIZZLE_BYTES, TFLOAT32,
                              TFLOAT32_FTZ, FLOAT32_FTZ, ReferenceTensorMap, TiledEncoding, check_slot)
from .ptx_memory import Address, shared_window_address, swizzled
from .reference_gpu import Shared, bulk_reads_key, describe
from .tir_values import numpy_dtype

ALIGN = 128  # (PTX: a bulk tensor copy's shared address is 128-byte aligned)


# ---------------------------------------------------------------- mbarriers
@dataclass
class MBarrier:
    """The state of one mbarrier object in shared memory."""

    expected: int  # arrivals per phase
    pending: int  # arrivals still missing in the current phase
    tx: int = 0  # the transaction count (bytes expected but not yet completed; negative when ahead)
    phase: int = 0  # the current phase's parity
    landing: list = field(default_factory=list)  # (root, physical bytes, raw bytes) of the copies it waits for
    # what the current phase's arrivals released (Block.release), and by parity what those of the
    # last phase completed with it released: a wait that sees that phase complete acquires it
    released: dict = field(default_factory=dict)
    completed: dict = field(default_factory=dict)

    def arrive(self, block: Any, me: int, count: int, tx: int = 0, drop: bool = False) -> int:
        """Thread ``me``'s arrival (``count`` of them, with ``tx`` bytes expected first); ``drop``:
        mbarrier.arrive_drop, which also takes ``count`` off the expected arrivals of every later
        phase. The parity of the phase it arrived in."""
        phase = self.phase
        for thread, upto in block.release(me).items():
            self.released[thread] = max(upto, self.released.get(thread, 0))
        if drop and count > self.expected:
            raise TVMSError(f"mbarrier.arrive_drop of {count} arrivals on an mbarrier that expects "
                            f"{self.expected} per phase")
        self.step(arrivals=count, tx=tx)
        if drop:
            self.expected -= count
            if self.phase != phase:  # (the arrival completed the phase: the next one expects fewer too)
                self.pending -= count
        return phase

    def step(self, arrivals: int = 0, tx: int = 0) -> None:
        self.tx += tx
        self.pending -= arrivals
        if self.pending < 0:
            raise TVMSError(f"more arrivals on an mbarrier than its expected count ({self.expected}) in one phase")
        if self.pending == 0 and self.tx == 0:  # (the phase completes: what it waited for is there)
            for root, where, raw in self.landing:
                _land(root, where, raw)
            self.landing.clear()
            self.completed[self.phase], self.released = self.released, {}
            self.phase ^= 1
            self.pending = self.expected


def _barrier_key(address: Address, what: str) -> tuple:
    if not isinstance(address.memory, Shared):
        raise TVMSError(f"{what}: an mbarrier lives in shared memory, not in a global array")
    if address.byte % 8:
        raise TVMSError(f"{what}: an mbarrier's address must be 8-byte aligned (byte {address.byte} of "
                        f"{address.memory.name!r})")
    return ("mbarrier", id(address.memory.root), address.byte)


def barrier_at(block: Any, address: Address, what: str) -> MBarrier:
    found = block.memory.get(_barrier_key(address, what))
    if found is None:
        raise TVMSError(f"{what}: the mbarrier at byte {address.byte} of {address.memory.name!r} was never "
                        f"initialised (mbarrier.init)")
    return found


def init(ctx: tuple, m: dict, address: Address, count: int, *_: Any) -> tuple:
    block = ctx[0]
    count = int(count)
    if not 1 <= count < 1 << 20:
        raise TVMSError(f"mbarrier.init with an expected count of {count} (PTX: 1 to 2^20 - 1)")
    block.memory[_barrier_key(address, "mbarrier.init")] = MBarrier(count, count)
    block.mbarriers = True
    return ()


def _arrive(ctx: tuple, address: Address, what: str, count: Any = None, tx: int = 0, drop: bool = False) -> int:
    """The arrival of the thread of ``ctx`` (block, thread, statement) on the mbarrier at ``address``;
    the parity of the phase it arrived in."""
    block, me = ctx[0], ctx[1]
    return barrier_at(block, address, what).arrive(block, me, 1 if count is None else int(count), int(tx), drop)


def arrive(ctx: tuple, m: dict, address: Address, count: Any = None, *_: Any) -> tuple:
    _arrive(ctx, address, "mbarrier.arrive", count)
    return ()


def arrive_expect_tx(ctx: tuple, m: dict, address: Address, tx: int, *_: Any) -> tuple:
    _arrive(ctx, address, "mbarrier.arrive.expect_tx", tx=tx)
    return ()


def arrive_state(ctx: tuple, m: dict, address: Address, count: Any = None, *_: Any) -> tuple:
    """``mbarrier.arrive{.sem.scope}.shared.b64 state, [addr]{, count}``: the arrival, and its
    state token, the parity of the phase it arrived in (a wait on the token waits for that
    phase, as ``mbarrier.try_wait ... waitComplete, [addr], state`` does on the hardware)."""
    return (np.uint64(_arrive(ctx, address, "mbarrier.arrive", count)),)


def arrive_expect_tx_state(ctx: tuple, m: dict, address: Address, tx: int, *_: Any) -> tuple:
    return (np.uint64(_arrive(ctx, address, "mbarrier.arrive.expect_tx", tx=tx)),)


def arrive_drop(ctx: tuple, m: dict, address: Address, count: Any = None, *_: Any) -> tuple:
    """``mbarrier.arrive_drop``: an arrival that also leaves the barrier (every later phase
    expects ``count`` fewer arrivals), as a thread that stops taking part does."""
    _arrive(ctx, address, "mbarrier.arrive_drop", count, drop=True)
    return ()


def arrive_drop_expect_tx(ctx: tuple, m: dict, address: Address, tx: int, *_: Any) -> tuple:
    _arrive(ctx, address, "mbarrier.arrive_drop.expect_tx", tx=tx, drop=True)
    return ()


def arrive_drop_state(ctx: tuple, m: dict, address: Address, count: Any = None, *_: Any) -> tuple:
    return (np.uint64(_arrive(ctx, address, "mbarrier.arrive_drop", count, drop=True)),)


def arrive_drop_expect_tx_state(ctx: tuple, m: dict, address: Address, tx: int, *_: Any) -> tuple:
    return (np.uint64(_arrive(ctx, address, "mbarrier.arrive_drop.expect_tx", tx=tx, drop=True)),)


def expect_tx(ctx: tuple, m: dict, address: Address, tx: int, *_: Any) -> tuple:
    barrier_at(ctx[0], address, "mbarrier.expect_tx").step(tx=int(tx))
    return ()


def waiter(block: Any, address: Any, parity: int, me: int) -> Any:
    """``T.cuda.mbarrier_wait(bar, parity)``'s question to the scheduler for thread ``me``: whether
    the phase of ``parity`` of the barrier at ``address`` has completed (as try_wait.parity
    answers); when it has, the thread acquires what that phase's arrivals released."""
    if not isinstance(address, Address):  # (a shared-window number: the raw uint32 form)
        address = address.found(block)
    barrier = barrier_at(block, address, "T.cuda.mbarrier_wait")
    parity = int(parity) & 1

    def completed() -> bool:
        if barrier.phase == parity:
            return False
        block.acquire(me, barrier.completed.get(parity, {}))
        return True
    return completed


# ---------------------------------------------------------------- the box of a tensor map
def _encoding(tmap: Any, rank: int, what: str) -> TiledEncoding:
    if not isinstance(tmap, ReferenceTensorMap):
        raise TVMSError(f"{what}: its tensor map must be a kernel parameter the host encoded "
                        f"(T.address_of(A_map)), not {type(tmap).__name__}")
    enc = tmap.encoding
    if enc is None:
        raise TVMSError(f"{what}: its tensor map was never encoded (runtime.cuTensorMapEncodeTiled)")
    if enc.rank != rank:
        raise TVMSError(f"{what}: a {rank}-d copy of a tensor map of rank {enc.rank}")
    why = ("element strides other than 1" if any(s != 1 for s in enc.element_strides) else
           "an interleaved layout" if enc.interleave != INTERLEAVE_NONE else
           f"the swizzle {enc.swizzle} (a 128-byte swizzle with atoms)" if enc.swizzle not in SWIZZLE_BYTES else
           f"the packed type {enc.dtype} (CUtensorMapDataType {enc.data_type}: 4- or 6-bit values in 16-value "
           f"chunks)" if enc.data_type in PACKED else
           f"the data type {_ROUNDING[enc.data_type]} (the hardware rounds or flushes float32 values as it copies "
           f"them)" if enc.data_type in _ROUNDING else None)
    if why:
        raise TVMSError(f"{what}: the reference executor does not copy boxes of a tensor map with {why}")
    return enc


_ROUNDING = {TFLOAT32: "TFLOAT32", TFLOAT32_FTZ: "TFLOAT32_FTZ", FLOAT32_FTZ: "FLOAT32_FTZ"}


def _elements(tmap: ReferenceTensorMap, what: str) -> np.ndarray:
    """The map's array as elements of the map's dtype: a map reads the global bytes as its own type,
    whatever the buffer's (a float16 map over a float32 buffer sees two halves in each)."""
    array, dtype = tmap.array, numpy_dtype(tmap.encoding.dtype)
    if array.dtype == dtype:
        return array
    if array.ndim != 1 or not array.flags.c_contiguous or array.nbytes % dtype.itemsize:
        raise TVMSError(f"{what}: a {tmap.encoding.dtype} tensor map over a {array.dtype} array of {array.nbytes} "
                        f"bytes that are not whole {tmap.encoding.dtype} elements in a row")
    return array.view(dtype)


def _box(enc: TiledEncoding, array: np.ndarray, coords: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The box's elements' offsets in ``array`` and whether each is inside the tensor, outermost
    dimension first (the shared layout's order)."""
    axes = [c + np.arange(b) for c, b in zip(coords, enc.box)]  # (innermost first)
    grids = np.meshgrid(*reversed(axes), indexing="ij")[::-1]  # (each dimension's index, innermost first)
    byte_strides = (enc.element_bytes, *enc.strides)
    offset = np.zeros(grids[0].shape, np.int64)
    inside = np.ones(grids[0].shape, bool)
    for index, extent, stride in zip(grids, enc.dims, byte_strides):
        inside &= (index >= 0) & (index < extent)
        offset += index * stride
    offset //= enc.element_bytes
    reach = int(offset[inside].max()) if inside.any() else -1
    if reach >= array.size:
        raise TVMSError(f"the tensor map's dims and strides reach element {reach} of an array of {array.size}")
    return offset, inside


def _placement(block: Any, at: Address, nbytes: int, swizzle: int, what: str) -> np.ndarray:
    """The physical bytes of the box's logical bytes 0..nbytes at ``at`` in shared memory."""
    if not isinstance(at.memory, Shared):
        raise TVMSError(f"{what}: its shared-memory operand is not in shared memory")
    window = shared_window_address(block, at)
    if window % ALIGN:
        raise TVMSError(f"{what}: its shared address must be {ALIGN}-byte aligned (byte {at.byte} of "
                        f"{at.memory.name!r})")
    width = SWIZZLE_BYTES[swizzle]
    if width and window % (8 * width):
        raise TVMSError(f"{what}: a {width}-byte swizzle repeats every {8 * width} bytes, and its shared address "
                        f"is not aligned to it (byte {at.byte} of {at.memory.name!r})")
    logical = window + np.arange(nbytes, dtype=np.int64)
    physical = (swizzled(logical, width) if width else logical) - (window - at.byte)
    if physical.max() >= at.memory.root.data.nbytes:
        raise TVMSError(f"{what}: the box of {nbytes} bytes does not fit in {at.memory.name!r} from byte {at.byte}")
    return physical


def _land(root: Shared, where: np.ndarray, raw: np.ndarray) -> None:
    """Bytes an asynchronous copy wrote, there for every thread that waited for them."""
    root.data.view(np.uint8)[where] = raw
    flight = root.block.in_flight.get(root)
    if flight is not None:
        flight[where] -= 1
        if not flight.any():
            del root.block.in_flight[root]
    tracks = root.tracks
    if tracks.unit:  # (written by no thread since the last barrier)
        for piece in np.unique(where // tracks.unit):
            tracks.written[int(piece)] = -1


def _coords(m: dict, rest: tuple, what: str) -> tuple[int, tuple, tuple]:
    if m.get("load_mode", "tile") not in ("", "tile"):
        raise TVMSError(f"{what}: the reference executor copies tiles, not {m['load_mode']}")
    rank = int(m["dim"][0])
    coords = tuple(int(np.int32(np.uint32(int(c) & 0xFFFFFFFF))) for c in rest[:rank])  # (signed 32-bit)
    return rank, coords, rest[rank:]


def tensor_load(ctx: tuple, m: dict, dst: Address, tmap: Any, *rest: Any) -> tuple:
    """cp.async.bulk.tensor global -> shared (module docstring)."""
    block, me, stmt = ctx
    what = "cp.async.bulk.tensor (global to shared)"
    if m.get("multicast"):
        raise TVMSError(f"{what} with {m['multicast']}: the reference executor runs one block, not a cluster")
    rank, coords, rest = _coords(m, rest, what)
    enc = _encoding(tmap, rank, what)
    array = _elements(tmap, what)
    offset, inside = _box(enc, array, coords)
    fill = np.nan if enc.oob_fill == OOB_FILL_NAN and enc.data_type in FLOATING else 0
    values = np.full(offset.shape, fill, array.dtype)
    values[inside] = array[offset[inside]]
    raw = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
    where = _placement(block, dst, raw.size, enc.swizzle, what)
    barrier = barrier_at(block, rest[0], what)
    root = dst.memory.root
    flight = block.in_flight.setdefault(root, np.zeros(root.data.nbytes, np.int32))
    flight[where] += 1
    barrier.landing.append((root, where, raw.copy()))
    barrier.step(tx=-raw.size)  # (complete_tx: the copy's bytes)
    return ()


def _queue(block: Any, me: int) -> list:
    """The thread's bulk groups of pending global writes, oldest first; the last one is open."""
    return block.memory.setdefault(("cp.async.bulk", me), [[]])


def tensor_store(ctx: tuple, m: dict, tmap: Any, *rest: Any) -> tuple:
    """cp.async.bulk.tensor shared -> global, in the thread's open bulk group."""
    block, me, stmt = ctx
    what = "cp.async.bulk.tensor (shared to global)"
    rank, coords, rest = _coords(m, rest, what)
    enc = _encoding(tmap, rank, what)
    array = _elements(tmap, what)
    offset, inside = _box(enc, array, coords)
    src = rest[0]
    nbytes = offset.size * enc.element_bytes
    where = _placement(block, src, nbytes, enc.swizzle, what)
    root = src.memory.root
    raw = root.view(np.dtype(np.uint8)).load(where, me, stmt)  # (race- and in-flight-checked, as the thread's read)
    values = np.asarray(raw, np.uint8).view(array.dtype).reshape(offset.shape)
    reading = block.in_flight.setdefault(bulk_reads_key(root), np.zeros(root.data.nbytes, np.int32))
    reading[where] += 1  # (until its group's wait: a write there before it is an error)
    _queue(block, me)[-1].append((array, offset[inside], values[inside], stmt, root, where))
    return ()


def prefetch(ctx: tuple, m: dict, tmap: Any, *rest: Any) -> tuple:
    what = "cp.async.bulk.prefetch.tensor"
    rank, coords, _ = _coords(m, rest, what)
    _encoding(tmap, rank, what)  # (a prefetch changes nothing a kernel sees)
    _elements(tmap, what)
    return ()


def commit_group(ctx: tuple, m: dict, *_: Any) -> tuple:
    _queue(ctx[0], ctx[1]).append([])
    return ()


def wait_group(ctx: tuple, m: dict, in_flight: int, *_: Any) -> tuple:
    """Complete the thread's committed bulk groups but the ``in_flight`` newest: their global writes."""
    block, me, _ = ctx
    queue = _queue(block, me)
    for array, offsets, values, _stmt, root, where in reference_async.complete_oldest(queue, len(queue) - 1,
                                                                                      int(in_flight)):
        array[offsets] = values
        key = bulk_reads_key(root)
        reading = block.in_flight[key]
        reading[where] -= 1
        if not reading.any():
            del block.in_flight[key]
    return ()


def finish(block: Any, me: int) -> None:
    """At the end of a thread: every bulk copy it issued was committed and waited for."""
    queue = block.memory.get(("cp.async.bulk", me), [[]])
    pending = [copy for group in queue for copy in group]
    if pending:
        raise TVMSError(f"{block.who(me)} ends with {len(pending)} cp.async.bulk copies to global memory it never "
                        f"waited for (cp.async.bulk.wait_group), the first issued at {describe(pending[0][3])}"
                        + ("" if len(queue) > 1 else ", nor committed (cp.async.bulk.commit_group)"))


# ---------------------------------------------------------------- the host's part
def stack_alloca(dtype: Any, kind: str, count: int) -> ReferenceTensorMap:
    """``T.tvm_stack_alloca("tensormap", 1)`` in a function the executor runs whole (its host part
    and its kernels): a slot the host's ``T.call_packed("runtime.cuTensorMapEncodeTiled", ...)`` encodes."""
    check_slot(kind, int(count))
    return ReferenceTensorMap()


def call_packed(dtype: Any, name: str, *args: Any) -> Any:
    """``T.call_packed(name, args...)``: the registered global function, on the arguments' values
    (a buffer's data is its flat array)."""
    return get_script_func(name)(*args)


HOST_INTRINSICS = {"tir.tvm_stack_alloca": stack_alloca, "tir.tvm_call_packed": call_packed}

# the entries the executor runs, as ptx_memory.MEMORY's: (block, thread, statement), modifiers, operands
ASYNC = {
    "mbarrier_init": init, "mbarrier_arrive": arrive, "mbarrier_arrive_nocount": arrive,  # (no count: one)
    "mbarrier_arrive_expect_tx": arrive_expect_tx,
    "mbarrier_arrive_state": arrive_state, "mbarrier_arrive_count_state": arrive_state,
    "mbarrier_arrive_expect_tx_state": arrive_expect_tx_state,
    "mbarrier_arrive_drop": arrive_drop, "mbarrier_arrive_drop_nocount": arrive_drop,
    "mbarrier_arrive_drop_expect_tx": arrive_drop_expect_tx,
    "mbarrier_arrive_drop_state": arrive_drop_state, "mbarrier_arrive_drop_count_state": arrive_drop_state,
    "mbarrier_arrive_drop_expect_tx_state": arrive_drop_expect_tx_state,
    "mbarrier_expect_tx": expect_tx,
    "cp_async_bulk_tensor_g2s_cluster": tensor_load, "cp_async_bulk_tensor_g2s_cta": tensor_load,
    "cp_async_bulk_tensor_g2s_cluster_multicast16": tensor_load,
    "cp_async_bulk_tensor_g2s_cluster_multicast32": tensor_load,
    "cp_async_bulk_tensor_s2g": tensor_store, "cp_async_bulk_tensor_prefetch": prefetch,
    "cp_async_bulk_commit_group": commit_group, "cp_async_bulk_wait_group": wait_group,
    "fence_mbarrier_init": lambda ctx, m, *_: (),
}
BULK_STORES = ("cp_async_bulk_tensor_s2g",)
# mbarrier.try_wait on a state token or a parity ([addr], state or parity{, suspend time hint}):
# the thread waits until the phase has completed (reference_ptx_dialect makes it a wait)
WAITS = ("mbarrier_try_wait", "mbarrier_try_wait_hint", "mbarrier_try_wait_parity",
         "mbarrier_try_wait_parity_no_hint")
