"""Tensor cores (CUDA's WMMA API) for the reference executor.

A buffer of scope ``wmma.matrix_a``, ``wmma.matrix_b`` or ``wmma.accumulator`` is a warp's: the
32 lanes of a warp hold it together, each warp its own. It is an array of tiles: a matrix_a tile
is m x k, a matrix_b tile k x n, an accumulator tile m x n, and the calls name a tile by its
number (the index TVM's intrinsics compute from a view's ``elem_offset``; the tile must lie in
the allocation). How a tile's elements spread over the lanes is the hardware's secret, so a tile
is only ever touched by the calls, which all 32 lanes of the warp make together with the same
arguments (a collective, like a warp shuffle: the kernel ``yield``s it, and ``collective`` runs
it once the whole warp is there). The memory a call reads or writes is the warp's access, which
races with any thread's (its own lanes' too) unless a barrier is between:

* ``T.tvm_fill_fragment(F, m, n, k, tile, value)``: every element of the tile is ``value``;
* ``T.tvm_load_matrix_sync(F, m, n, k, tile, ptr, ldm, layout)``: the tile from memory at
  ``ptr`` (``T.tvm_access_ptr``), rows ``ldm`` elements apart (``row_major``) or columns
  (``col_major``); ``ptr`` 32-byte aligned and ``ldm`` a multiple of 16 bytes, as CUDA requires,
  where the memory is laid out as on the device (not a block's ``alloc_buffer`` in scheduled
  TensorIR: lowering still shrinks it to the region used and pads its rows, storage_align);
* ``T.tvm_store_matrix_sync(F, m, n, k, tile, ptr, ldm, layout)``: the tile to memory;
* ``T.tvm_mma_sync(D, d, A, a, B, b, C, c)``: tile ``d`` of D is ``A[a] @ B[b] + C[c]``, the
  products of the operands' exact values summed in float32 (int64 for integers) and rounded to
  D's type once; a float16 D rounds to float16 after each step of k instead, as the hardware's
  float16 accumulation does at best.

A tile read before a fill or a load is an error, and so are an element-wise access to a
fragment and lanes of one warp calling with different arguments.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

WARP_LANES = 32  # (CUDA's warp: every lane takes part in a WMMA call)
SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
CALLS = ("tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync", "tir.tvm_mma_sync")


class Fragment:
    """One warp's tiles of a fragment buffer."""

    __slots__ = ("name", "scope", "dtype", "size", "tiles")

    def __init__(self, name: str, scope: str, dtype: np.dtype, size: int) -> None:
        self.name, self.scope, self.dtype, self.size = name, scope, dtype, size  # (size: in elements)
        self.tiles: dict[int, np.ndarray] = {}

    def shape(self, m: int, n: int, k: int) -> tuple[int, int]:
        return {"wmma.matrix_a": (m, k), "wmma.matrix_b": (k, n), "wmma.accumulator": (m, n)}[self.scope]

    def tile(self, index: int) -> np.ndarray:
        tile = self.tiles.get(index)
        if tile is None:
            raise TVMSError(f"tile {index} of the {self.scope} fragment {self.name!r} is read before it is "
                            f"filled or loaded")
        return tile

    def put(self, index: int, tile: np.ndarray) -> None:
        """Tile ``index`` is ``tile`` (within the allocation, else a TVMSError)."""
        count = self.size // tile.size
        if not 0 <= index < count:
            raise TVMSError(f"tile {index} of the {self.scope} fragment {self.name!r} is out of bounds: its "
                            f"{self.size} elements hold {count} tiles of {tile.shape[0]} x {tile.shape[1]}")
        self.tiles[index] = tile


def fragment(block: Any, key: int, name: str, scope: str, dtype: np.dtype, size: int, me: int) -> Fragment:
    """The fragment of allocation site ``key`` (``size`` elements) that thread ``me``'s warp
    holds in ``block``."""
    warp = block.warps[me][0]
    mem = block.memory.get((key, warp))
    if mem is None:
        mem = block.memory[key, warp] = Fragment(name, scope, dtype, int(size))
    return mem


def _elements(offset: int, shape: tuple[int, int], ldm: int, layout: str) -> np.ndarray:
    """The flat indices of a tile's elements in memory, in the tile's row-major order."""
    rows, cols = np.arange(shape[0])[:, None], np.arange(shape[1])[None, :]
    if layout == "row_major":
        return offset + rows * ldm + cols
    if layout == "col_major":
        return offset + cols * ldm + rows
    raise TVMSError(f"a WMMA tile is row_major or col_major, not {layout!r}")


def _read(memory: Any, indices: np.ndarray, me: int, stmt: Any) -> np.ndarray:
    if hasattr(memory, "load"):  # (shared memory: race-checked)
        return np.reshape(memory.load(indices, me, stmt), indices.shape)
    return memory[indices]


def _write(memory: Any, indices: np.ndarray, values: np.ndarray, me: int, stmt: Any) -> None:
    if hasattr(memory, "store"):
        memory.store(indices, values.astype(memory.data.dtype), me, stmt)
    else:
        memory[indices] = values


def run(op: str, args: tuple, me: int, stmt: Any) -> None:
    """One WMMA call (``op`` without its ``tir.tvm_`` prefix) on the warp's fragments; ``me``,
    the thread its shared-memory accesses are checked as."""
    if op == "mma_sync":
        d, di, a, ai, b, bi, c, ci = args
        if not all(isinstance(f, Fragment) for f in (d, a, b, c)):
            raise TVMSError("tvm_mma_sync takes fragments (wmma.* buffers)")
        wide = np.int64 if np.issubdtype(d.dtype, np.integer) else np.float32
        lhs, rhs, acc = a.tile(ai).astype(wide), b.tile(bi).astype(wide), c.tile(ci).astype(wide)
        if d.dtype == np.float16:  # (a float16 sum rounds at each step of k)
            for kk in range(lhs.shape[1]):
                acc = (acc + np.outer(lhs[:, kk], rhs[kk])).astype(np.float16).astype(wide)
        else:
            acc = lhs @ rhs + acc
        d.put(di, acc.astype(d.dtype))
        return
    frag, m, n, k, index = args[:5]
    if not isinstance(frag, Fragment):
        raise TVMSError(f"tvm_{op} takes a fragment (a wmma.* buffer) as its first argument")
    shape = frag.shape(m, n, k)
    if op == "fill_fragment":
        frag.put(index, np.full(shape, args[5], frag.dtype))
        return
    (memory, offset, placed), ldm, layout = args[5:8]  # (placed: laid out as on the device)
    itemsize = memory.itemsize  # (of the pointer's type: a Shared view's or an array's)
    if placed and (offset * itemsize % 32 or ldm * itemsize % 16):
        raise TVMSError(f"tvm_{op}: the tile's pointer is {offset * itemsize} bytes into its memory and its "
                        f"rows {ldm * itemsize} bytes apart: WMMA needs a 32-byte aligned pointer and a "
                        f"multiple of 16 bytes")
    indices = _elements(offset, shape, ldm, layout)
    if op == "load_matrix_sync":
        frag.put(index, np.asarray(_read(memory, indices, me, stmt), frag.dtype))
    else:
        _write(memory, indices, frag.tile(index), me, stmt)


def collective(block: Any, warp: int, lanes: dict, running: set, waits: list, site: Any) -> list:
    """Run the WMMA call the lanes of warp ``warp`` wait at (``lanes``: lane -> thread; ``site``,
    the call's ``reference_gpu.Site``) once every running lane is there; the threads released
    (none while some lane is still on its way). Its memory accesses are the warp's own
    (``block.warp_identity``)."""
    if any(lane not in lanes for lane in running):
        return []
    threads = [lanes[lane] for lane in sorted(lanes)]
    first = waits[threads[0]][2:]
    if len(lanes) != WARP_LANES:
        raise TVMSError(f"tvm_{first[0]} at {site} is called by {len(lanes)} lanes of a warp (the others have "
                        f"finished, or the block's threads do not fill the warp): a WMMA call needs all "
                        f"{WARP_LANES}")
    for t in threads[1:]:
        if not _same(waits[t][2:], first):
            raise TVMSError(f"the lanes of a warp call tvm_{first[0]} with different arguments at {site}: "
                            f"a WMMA call is one for the whole warp")
    run(first[0], first[1], block.warp_identity(warp), site.stmt)
    return threads


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (Fragment, np.ndarray)) or hasattr(a, "load"):
        return a is b
    return a == b
