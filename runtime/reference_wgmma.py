"""Hopper's warpgroup matrix multiply (``wgmma``) and its shared-memory matrix descriptors for the
reference executor, as the PTX ISA defines them ("Asynchronous Warpgroup Level Matrix Multiply":
the descriptor, the canonical layouts, the accumulator fragments).

* ``T.cuda.wgmma.encode_matrix_descriptor(desc, addr, ldo, sdo, swizzle)`` writes the 64-bit
  descriptor: ``addr``'s shared address / 16 in bits 0-13, ``ldo`` (the leading byte offset / 16)
  in 16-29, ``sdo`` (the stride byte offset / 16) in 32-45, and the layout type of swizzle 0-3
  (none, 32, 64, 128 bytes) in 62-63 (none 0, 128B 1, 64B 2, 32B 3), as the CUDA helper does.
* ``wgmma.mma_async.sync.aligned.m64nNk16`` with both operands in shared memory (``_ss``), float16
  or bfloat16 inputs, float32 or float16 accumulators, K-major operands (``imm-trans`` 0): each
  thread of the warpgroup (its number ``t`` = thread % 128) updates its own accumulators: with
  warp ``w = t / 32`` and lane ``l``, its register ``i`` (``j = i / 4``, ``e = i % 4``) is D[16 w +
  l / 4 + 8 (e / 2)][8 j + 2 (l % 4) + e % 2] (float16 accumulators: element ``i`` so, two of
  them a 32-bit register, the even one in its low half), and D = A B^T (+ D where ``scale-d`` is true),
  ``imm-scale-a``/``-b`` of -1 negating A or B. A is 64 x 16, B is N x 16, both read through their
  descriptors: row ``r``, element ``k`` of a K-major operand is at the logical byte ``start + (r /
  8) SBO + (r % 8) S + 2 k`` for a swizzle of S bytes (32, 64, 128; its 16-byte chunks then XORed
  with the row within the 8-row atom: address bits 4.. with bits 7..), and at ``start + (r / 8)
  SBO + (2 k / 16) LBO + 16 (r % 8) + 2 k % 16`` without one (8 x 16-byte core matrices). The
  products are summed in float64 and rounded once to the accumulator's type (the hardware's order
  and rounding of the sum are its own).
* ``wgmma.fence``, ``commit_group`` and ``wait_group`` order nothing here: ``mma_async`` computes
  when it is issued (a legal schedule of the asynchronous operation), so shared memory changed
  between the issue and the wait is not caught.

Refused by name: A from registers (``_rs``), transposed operands, the tf32, fp8, integer and
single-bit forms.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError

from . import ptx_memory
from .ptx_values import as_int, float_dtype, width
from .reference_gpu import describe

# the descriptor's layout type of TVM's encoder's swizzle argument (0: none, 1: 32B, 2: 64B, 3: 128B)
_LAYOUT_TYPE = {0: 0, 1: 3, 2: 2, 3: 1}
# the swizzle's width in bytes of a descriptor's layout type
_SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}
# the entries the executor runs: (input type, accumulator type)
MMA = {"wgmma_f16_ss": ("f16", "f32"), "wgmma_f16_f16acc_ss": ("f16", "f16"), "wgmma_bf16_ss": ("bf16", "f32")}
ORDERING = ("wgmma_fence", "wgmma_commit_group", "wgmma_wait_group")
WARPGROUP = 128


def encode_descriptor(block: Any, desc: tuple, addr: tuple, ldo: int, sdo: int, swizzle: int) -> None:
    """``T.cuda.wgmma.encode_matrix_descriptor``: the descriptor of ``addr`` into ``*desc``."""
    start = ptx_memory.shared_address(block, addr) >> 4
    value = (start & 0x3FFF) | (int(ldo) & 0x3FFF) << 16 | (int(sdo) & 0x3FFF) << 32 \
        | _LAYOUT_TYPE.get(int(swizzle), 0) << 62
    memory, index = desc
    data = getattr(memory, "data", memory)
    data[index] = value


def _operand(block: Any, me: int, stmt: Any, desc: int, rows: int, dtype: np.dtype, what: str) -> np.ndarray:
    """The rows x 16 K-major operand a descriptor names, from the block's shared memory: read (as
    the warpgroup's read, race- and in-flight-checked) by the first of its threads to ask between
    two barriers; the others of the warpgroup get the same values."""
    cache = block.memory.setdefault("wgmma.operands", {})
    key = (block.clock, int(desc), rows, dtype, me // WARPGROUP)
    if key not in cache:
        if cache and next(iter(cache))[0] != block.clock:  # (a barrier since: what was read is stale)
            cache.clear()
        cache[key] = _read_operand(block, me, stmt, int(desc), rows, dtype, what)
    return cache[key]


def _read_operand(block: Any, me: int, stmt: Any, desc: int, rows: int, dtype: np.dtype, what: str) -> np.ndarray:
    start, lbo, sbo = (desc & 0x3FFF) << 4, (desc >> 16 & 0x3FFF) << 4, (desc >> 32 & 0x3FFF) << 4
    swizzle = _SWIZZLE_BYTES[desc >> 62 & 3]
    r = np.arange(rows)[:, None]
    k = np.arange(16)[None, :]
    if swizzle:
        address = ptx_memory.swizzled(start + r // 8 * sbo + r % 8 * swizzle + 2 * k, swizzle)
    else:
        address = start + r // 8 * sbo + 2 * k // 16 * lbo + 16 * (r % 8) + 2 * k % 16
    where = f"(by {block.who(me)} at {describe(stmt)})"
    try:
        found = ptx_memory.integer_address(block, int(address.min()), "shared")
    except TVMSError as e:
        raise TVMSError(f"{what}: its descriptor's start: {e} {where}") from None
    memory = found.memory
    offsets = address - (int(address.min()) - found.byte)  # (bytes into the memory)
    if offsets.max() + 2 > memory.data.nbytes:
        raise TVMSError(f"{what}: its descriptor reaches byte {int(offsets.max())} of {memory.name!r}, "
                        f"which has {memory.data.nbytes} {where}")
    values = memory.view(dtype).load((offsets // 2).reshape(-1), me, stmt)
    return np.asarray(values, dtype=np.float64).reshape(rows, 16)


def mma_async(ctx: tuple, entry: str, m: dict, thread: int, *reads: Any) -> tuple:
    """The thread's accumulators (register bits) after one ``wgmma.mma_async`` of its warpgroup:
    ``reads`` are the accumulators' bits, the descriptors, scale-d, then the immediates."""
    block, me, stmt = ctx
    what = ".".join(["wgmma", *(t for t in m.values() if t)])
    count = len(reads) - 7
    old, (a_desc, b_desc, scale_d, scale_a, scale_b, trans_a, trans_b) = reads[:count], reads[count:]
    scale_a, scale_b = as_int(scale_a, "s32"), as_int(scale_b, "s32")
    check_warpgroups(len(block.threads), what)
    if trans_a or trans_b:
        raise TVMSError(f"the reference executor does not run {what} with a transposed operand (imm-trans 1)")
    n = int(m["shape"][m["shape"].index("n") + 1:m["shape"].index("k")])
    inputs, accumulator = MMA[entry]
    dtype = float_dtype(inputs)
    a = _operand(block, me, stmt, a_desc, 64, dtype, what) * int(scale_a)
    b = _operand(block, me, stmt, b_desc, n, dtype, what) * int(scale_b)
    t = thread % WARPGROUP
    warp, lane = t // 32, t % 32
    packed = accumulator == "f16"  # (two float16 accumulators a 32-bit register, the first in its low half)
    i = np.arange(len(old) * (2 if packed else 1))
    rows = 16 * warp + lane // 4 + 8 * (i % 4 // 2)
    cols = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    totals = np.einsum("ik,ik->i", a[rows], b[cols])
    bits, dtype = f"uint{width(accumulator)}", float_dtype(accumulator)
    registers = np.array(old, np.uint64).astype(np.uint32 if packed else bits)
    if scale_d:
        totals += registers.view(dtype)
    with np.errstate(over="ignore"):  # (rounded once to the accumulator's type; beyond its range: inf)
        results = np.ascontiguousarray(totals.astype(dtype))
    return tuple(int(x) for x in results.view(np.uint32 if packed else bits))


def check_warpgroups(threads: int, what: str) -> None:
    if threads % WARPGROUP:
        raise TVMSError(f"{what}: a block of {threads} threads is not made of warpgroups of {WARPGROUP}")
