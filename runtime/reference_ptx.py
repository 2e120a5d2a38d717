"""Tensor cores through PTX (``mma.sync``, ``ldmatrix``) for the reference executor: the calls of
TVM's PTX tensor intrinsics as the CUDA code generator renders them (lowering/codegen/cuda_ptx.py).

A pointer argument is ``(memory, offset)``: a data Var (offset 0), ``T.address_of(buf[i])`` or
``T.tvm_access_ptr``, the offset in elements of the memory's type. A lane's fragment registers are
the bytes at its own pointer, read and written as the lane's accesses (race-checked where they are
shared or warp memory).

* ``T.ptx_legacy.ldmatrix(trans, num, ".b16", local, local_off, smem, smem_off)`` is a warp
  collective: lanes 8j..8j+7 give the addresses of the 8 rows of matrix j (``num`` = 1, 2 or 4
  matrices of 8 x 8 16-bit elements, each row 16 contiguous, 16-byte aligned bytes); each lane
  gets in its register j elements (lane / 4, 2 (lane % 4) + h), h = 0, 1, of matrix j, or of its
  transpose with ``.trans``. 8-bit elements are moved as pairs (what the int8 fragments need); a
  transposed load of 8-bit elements, which ldmatrix cannot do, is the code generator's gather loop,
  each thread's own (``gather_int8_trans``);
* ``T.ptx_legacy.mma(shape, "row", "col", a, b, c, A, a_off, B, b_off, C, c_off, saturate)`` is a
  warp collective computing D = A B + C into C, for m16n8k16 and m16n8k8 with float16 A and B and
  float16 or float32 C, and m16n8k32 with int8/uint8 A and B and int32 C. With g = lane / 4, t = lane % 4 and
  p the elements of a 32-bit register (2 or 4): A's element e of a lane (register r = e / p, j =
  e % p) is A[g + 8 (r % 2)][p t + j + (k / 2)(r / 2)]; B's is B[p t + j + (k / 2) r][g]; C's
  element i is C[g + 8 (i / 2)][2 t + i % 2]. The products are summed in float64 (int64) and
  rounded once to C's type (PTX leaves the order of the sum open); integers wrap, or clamp with
  ``satfinite``;
* ``T.cuda.mma_fill_legacy(size, local, off)``: a thread's ``size`` accumulators from ``off`` are 0;
* ``T.cuda.mma_store_legacy(16, 16, dst, local, off, stride)``: the thread's 8 accumulators of a
  16 x 16 tile (two m16n8 tiles, 4 each, in C's layout above, lane = threadIdx.x as the generated
  code has it) to ``dst`` with rows ``stride`` apart.

The layouts are the PTX ISA manual's (NVIDIA, "PTX ISA" 8.x: sections "Matrix Fragments for
mma.m16n8k16 with floating point type", "Matrix Fragments for mma.m16n8k8", "Matrix Fragments for
mma.m16n8k32" and "Warp-level matrix load instruction: ldmatrix"; m16n8k8's float16 fragments are
m16n8k16's with half the registers: A's r < 2, B's r = 0), not taken from TVM's code generator;
tests/test_cuda_ptx_mma.py checks them against numpy through TVM's own ldmatrix/mma kernels (its
m16n8k8 test kernel among them), and tests/test_mma_layout_passes.py through the lowered mma.sync
tuning candidate.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

WARP_LANES = 32
# shape -> (m, n, k, the A/B element types it takes, the C types)
_HALF = ({"fp16": np.float16, "float16": np.float16},
         {"fp16": np.float16, "float16": np.float16, "fp32": np.float32, "float32": np.float32})
_SHAPES = {"m16n8k16": (16, 8, 16, *_HALF), "m16n8k8": (16, 8, 8, *_HALF),
           "m16n8k32": (16, 8, 32, {"int8": np.int8, "uint8": np.uint8, "s8": np.int8, "u8": np.uint8},
                        {"int32": np.int32, "s32": np.int32})}


def _array(memory: Any) -> np.ndarray:
    """The elements behind ``memory``: a ``reference_gpu.Shared`` (race-checked) or an array."""
    return memory.data if hasattr(memory, "load") else memory


def _read(memory: Any, indices: np.ndarray, me: int, stmt: Any) -> np.ndarray:
    data = _array(memory)
    if indices.min() < 0 or indices.max() >= data.size:
        raise TVMSError(f"a PTX intrinsic reads element {int(indices.max())} of a memory of {data.size} elements")
    return np.ascontiguousarray(memory.load(indices, me, stmt) if data is not memory else data[indices], data.dtype)


def _write(memory: Any, indices: np.ndarray, values: np.ndarray, me: int, stmt: Any) -> None:
    data = _array(memory)
    if indices.min() < 0 or indices.max() >= data.size:
        raise TVMSError(f"a PTX intrinsic writes element {int(indices.max())} of a memory of {data.size} elements")
    if data is memory:
        data[indices] = values
    else:
        memory.store(indices, values, me, stmt)


def _bytes(memory: Any, offset: int, nbytes: int, me: int, stmt: Any) -> np.ndarray:
    """The ``nbytes`` bytes from element ``offset`` of ``memory``."""
    itemsize = _array(memory).dtype.itemsize
    if nbytes % itemsize:
        raise TVMSError(f"a PTX fragment of {nbytes} bytes is not a whole number of {_array(memory).dtype} elements")
    return _read(memory, np.arange(offset, offset + nbytes // itemsize), me, stmt).view(np.uint8)


def _put(memory: Any, offset: int, raw: np.ndarray, me: int, stmt: Any) -> None:
    """Write the bytes ``raw`` from element ``offset`` of ``memory``."""
    values = np.ascontiguousarray(raw).view(_array(memory).dtype)
    _write(memory, np.arange(offset, offset + values.size), values, me, stmt)


def _rows_cols(lane: np.ndarray, count: int, per_register: int, half_k: int, kind: str) -> tuple:
    """(rows, cols) of the fragment elements of ``lane`` (PTX's layouts: module docstring)."""
    g, t = lane // 4, lane % 4
    e = np.arange(count)
    r, j = e // per_register, e % per_register
    if kind == "A":
        return g + 8 * (r % 2), per_register * t + j + half_k * (r // 2)
    if kind == "B":
        return per_register * t + j + half_k * r, np.full(count, g)
    return g + 8 * (e // 2), 2 * t + e % 2


def _check_static(op: str, first: tuple, others: list, site: Any) -> None:
    if any(len(o) != len(first) or o[:6] != first[:6] or o[12:] != first[12:] for o in others):
        raise TVMSError(f"the lanes of a warp call {op} with different shapes or types at {site}: it is one "
                        f"instruction for the whole warp")


def mma(threads: list, args: list, site: Any) -> None:
    """``mma.sync`` by the 32 lanes ``threads`` (in lane order), each with its own ``args``."""
    shape, a_layout, b_layout, a_type, b_type, c_type = args[0][:6]
    _check_static("mma.sync", args[0], args[1:], site)
    if shape not in _SHAPES:
        raise TVMSError(f"the reference executor runs mma.sync {', '.join(_SHAPES)} only, not {shape!r} ({site})")
    m, n, k, inputs, accumulators = _SHAPES[shape]
    if (a_layout, b_layout) != ("row", "col"):
        raise TVMSError(f"mma.sync.{shape} takes a row-major A and a column-major B, not {a_layout}/{b_layout}")
    if a_type not in inputs or b_type not in inputs or c_type not in accumulators:
        raise TVMSError(f"mma.sync.{shape} in the reference executor takes A and B of {sorted(set(inputs))} and C of "
                        f"{sorted(set(accumulators))}, not {a_type}, {b_type}, {c_type}")
    at, bt, ct = np.dtype(inputs[a_type]), np.dtype(inputs[b_type]), np.dtype(accumulators[c_type])
    saturate = bool(args[0][12])
    half_k = k // 2
    wide = np.float64 if ct.kind == "f" else np.int64
    a, b, c = np.zeros((m, k), wide), np.zeros((k, n), wide), np.zeros((m, n), wide)
    counts = (m * k // WARP_LANES, k * n // WARP_LANES, m * n // WARP_LANES)
    stmt = site.stmt
    for lane, (me, lane_args) in enumerate(zip(threads, args)):
        (A, a_base), a_off, (B, b_base), b_off, (C, c_base), c_off = lane_args[6:12]
        for matrix, dtype, count, mem, off, kind in ((a, at, counts[0], A, a_base + a_off, "A"),
                                                     (b, bt, counts[1], B, b_base + b_off, "B"),
                                                     (c, ct, counts[2], C, c_base + c_off, "C")):
            values = _bytes(mem, off, count * dtype.itemsize, me, stmt).view(dtype)
            matrix[_rows_cols(lane, count, 4 // dtype.itemsize, half_k, kind)] = values
    d = a @ b + c  # (the products exact; float64's sum, rounded once to C's type below)
    if ct.kind == "i":
        info = np.iinfo(ct)
        d = np.clip(d, info.min, info.max) if saturate else (d - info.min) % (1 << 32) + info.min
    elif saturate:
        d = np.clip(d, np.finfo(ct).min, np.finfo(ct).max)
    d = d.astype(ct)
    for lane, (me, lane_args) in enumerate(zip(threads, args)):
        (C, c_base), c_off = lane_args[10:12]
        _put(C, c_base + c_off, np.ascontiguousarray(d[_rows_cols(lane, counts[2], 1, 0, "C")]).view(np.uint8), me, stmt)


def ldmatrix(threads: list, args: list, site: Any) -> None:
    """``ldmatrix`` by the 32 lanes ``threads`` (in lane order), each with its own ``args``."""
    trans, num, kind = args[0][:3]
    if any(tuple(a[:3]) != (trans, num, kind) for a in args[1:]):
        raise TVMSError(f"the lanes of a warp call ldmatrix with different shapes at {site}: it is one "
                        f"instruction for the whole warp")
    if num not in (1, 2, 4) or kind != ".b16":
        raise TVMSError(f"ldmatrix loads 1, 2 or 4 .b16 matrices, not {num} {kind} ({site})")
    stmt = site.stmt
    matrices = np.zeros((num, 8, 8), np.uint16)
    for lane in range(8 * num):  # (the lanes whose addresses the instruction reads)
        memory, offset = args[lane][5]
        offset += args[lane][6]
        itemsize = _array(memory).dtype.itemsize
        if offset * itemsize % 16:
            raise TVMSError(f"ldmatrix at {site}: lane {lane} gives a row {offset * itemsize} bytes into its shared "
                            f"memory, which is not 16-byte aligned")
        matrices[lane // 8, lane % 8] = _bytes(memory, offset, 16, threads[lane], stmt).view(np.uint16)
    if trans:
        matrices = matrices.transpose(0, 2, 1)
    for lane, me in enumerate(threads):
        registers = matrices[:, lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2]  # (num, 2)
        (local, local_base), local_off = args[lane][3:5]
        _put(local, local_base + local_off, np.ascontiguousarray(registers).view(np.uint8).ravel(), me, stmt)


COLLECTIVES = {"ldmatrix": ldmatrix, "mma": mma}


def collective(block: Any, warp: int, lanes: dict, running: set, waits: list, site: Any) -> list:
    """Run the ``mma.sync`` or ``ldmatrix`` the lanes of warp ``warp`` wait at (``lanes``: lane ->
    thread) once every running lane is there; the threads released."""
    if any(lane not in lanes for lane in running):
        return []
    op = waits[next(iter(lanes.values()))][2]
    if len(lanes) != WARP_LANES:
        raise TVMSError(f"{op} at {site} is executed by {len(lanes)} lanes of a warp (the others have finished, or "
                        f"the block's threads do not fill the warp): its .sync.aligned form needs all {WARP_LANES}")
    threads = [lanes[lane] for lane in range(WARP_LANES)]
    COLLECTIVES[op](threads, [waits[t][3] for t in threads], site)
    return threads


def fill(size: int, local: tuple, offset: int, me: int, stmt: Any) -> None:
    """``mma_fill_legacy``: the thread's ``size`` accumulators from ``offset`` are zero."""
    memory, base = local
    _put(memory, base + offset, np.zeros(size, _array(memory).dtype).view(np.uint8), me, stmt)


def store(m: int, n: int, dst: tuple, local: tuple, offset: int, stride: int, lane: int, me: int, stmt: Any) -> None:
    """``mma_store_legacy(16, 16, ...)``: the thread's 8 accumulators of a 16 x 16 tile to ``dst``."""
    if (m, n) != (16, 16):
        raise TVMSError(f"mma_store_legacy stores 16 x 16 tiles only, not {m} x {n}")
    memory, base = local
    values = _read(memory, np.arange(base + offset, base + offset + 8), me, stmt)
    e = np.arange(8)  # (elements 4..7: the second m16n8 tile, 8 columns on; each in C's layout)
    rows, cols = lane // 4 + 8 * (e % 4 // 2), 2 * (lane % 4) + e % 2 + 8 * (e // 4)
    target, start = dst
    _write(target, start + rows * stride + cols, values, me, stmt)


def gather_int8_trans(local: tuple, local_off: int, smem: tuple, stride: int, lane: int, me: int, stmt: Any) -> None:
    """The code generator's stand-in for a transposed ldmatrix.x4 of 8-bit elements: the thread's 16
    elements of an m16n8k32 B fragment pair (two n8 tiles, 8 each) from a k x n tile in shared
    memory whose rows are ``stride`` elements apart."""
    e = np.arange(16)
    rows = 4 * (lane % 4) + e % 4 + 16 * (e % 8 // 4)  # (B's layout: p = 4, k / 2 = 16)
    cols = lane // 4 + 8 * (e // 8)
    memory, base = smem
    values = _read(memory, base + rows * stride + cols, me, stmt)
    _put(local[0], local[1] + local_off, values.view(np.uint8), me, stmt)

