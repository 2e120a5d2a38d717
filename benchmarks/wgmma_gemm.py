"""A Hopper (sm_90a) float16 matmul written in TVMScript with TVM 0.27's PTX dialect: ``wgmma``.

    .venv/bin/python benchmarks/wgmma_gemm.py [M N K] [--overlap]    # prints the kernel's TVMScript

``C = A @ B.T`` (A: M x K, B: N x K, both K-contiguous; C: M x N float16, accumulated in float32),
each block a 128 x 256 tile of C computed by two warpgroups (256 threads), each warpgroup 64 rows
with ``wgmma.mma_async.m64n256k16`` reading both operands from shared memory through matrix
descriptors (``T.cuda.wgmma.encode_matrix_descriptor``). Tiles of 64 along K are copied from global
memory with ``cp.async`` into STAGES shared-memory buffers, in the 128-byte-swizzled K-major layout
wgmma reads (a row of 64 halves is 128 bytes; its 16-byte chunk j of row r sits at chunk j ^ (r % 8);
each tile starts on a 1024-byte boundary); ``fence.proxy.async`` makes the copies visible to wgmma.

This is what the tiles and DLight's plans (WMMA) cannot reach on Hopper: ``benchmarks/gpu.py``
times it beside cuBLAS. It is a benchmark's kernel, not yet a schedule tvms chooses.
"""
from __future__ import annotations

import sys

BM, BN, BK = 128, 256, 64  # the block's tile; each of its two warpgroups computes 64 x BN
STAGES = 4
THREADS = 256
ROW_BYTES = BK * 2  # (a tile's row: 128 bytes, the swizzle's width)
ATOM_BYTES = 8 * ROW_BYTES  # (the swizzle repeats every 8 rows: 1024 bytes, wgmma's stride offset)


def _copy_tile(lines: list, src: str, rows: int, tile_base: str, row0: str, depth: str) -> None:
    """cp.async of a rows x BK tile of ``src`` (from row ``row0``, column kt * BK) into shared memory
    at ``tile_base`` (in halves), swizzled; each thread copies rows * 8 / THREADS chunks of 16 bytes."""
    per_thread = rows * (BK // 8) // THREADS
    lines.append(f"{depth}for c in T.unroll({per_thread}):")
    inner = depth + "    "
    lines.append(f"{inner}chunk: T.int32 = c * {THREADS} + tx")
    lines.append(f"{inner}r: T.int32 = chunk // 8")
    lines.append(f"{inner}j: T.int32 = chunk % 8")
    dst = f"S[{tile_base} + r * {BK} + T.bitwise_xor(j, r % 8) * 8]"
    lines.append(f'{inner}T.ptx.cp(T.cuda.cvta_generic_to_shared(T.address_of({dst})), '
                 f'T.address_of({src}[{row0} + r, kt_load * {BK} + j * 8]), 16, "async", "cg", "shared", "global", '
                 f'"", "", "")')


def _descriptor(name: str, first: str) -> str:
    """The statement encoding ``name``: K-major, 128-byte swizzle (3), its 8-row atoms 1024 bytes
    apart (the stride offset, in 16-byte units; the leading one is unused: 1)."""
    return (f"T.cuda.wgmma.encode_matrix_descriptor(T.address_of({name}), T.address_of(S[{first}]), 1, "
            f"{ATOM_BYTES // 16}, 3)")


def kernel_text(m: int, n: int, k: int, overlap: bool = False) -> str:
    """The TVMScript of the kernel for C (m x n) = A (m x k) @ B (n x k).T; ``overlap``: a tile's
    wgmmas still run while the next copies are issued (wgmma.wait_group 1), else each tile's
    wgmmas are waited for before the copies."""
    if m % BM or n % BN or k % BK or k // BK < STAGES - 1:
        raise ValueError(f"the wgmma kernel takes m % {BM} == 0, n % {BN} == 0, k % {BK} == 0, "
                         f"k >= {(STAGES - 1) * BK}")
    a_halves, b_halves = BM * BK, BN * BK
    stage_halves = a_halves + b_halves
    pad = ATOM_BYTES // 2  # (room to align the first tile on 1024 bytes)
    accumulators = BN // 2
    acc = ", ".join(f"acc[{i}]" for i in range(accumulators))
    k_tiles = k // BK
    lines = [
        "# from tvm.script import tirx as T",
        "",
        "@T.prim_func",
        f'def wgmma_gemm(A: T.Buffer(({m}, {k}), "float16"), B: T.Buffer(({n}, {k}), "float16"), '
        f'C: T.Buffer(({m}, {n}), "float16")):',
        '    T.attr({"tirx.device_entry": T.bool(True)})',
        f"    bx, by = T.cta_id([{n // BN}, {m // BM}])",
        f"    tx = T.thread_id([{THREADS}])",
        f'    S = T.alloc_buffer(({STAGES * stage_halves + pad},), "float16", scope="shared.dyn")',
        f'    acc = T.alloc_local(({accumulators},))',
        "    desc_a: T.uint64 = T.uint64(0)",
        "    desc_b: T.uint64 = T.uint64(0)",
        # (the first tile's offset in halves that puts it on a 1024-byte boundary of the shared window)
        f"    base: T.int32 = T.Cast(\"int32\", ({ATOM_BYTES} - T.cuda.cvta_generic_to_shared(T.address_of(S[0])) "
        f"% T.uint32({ATOM_BYTES})) % T.uint32({ATOM_BYTES})) // 2",
        "    wg: T.int32 = tx // 128",
        "    lane: T.int32 = tx % 32",
        "    warp: T.int32 = tx % 128 // 32",
        f"    for i in T.unroll({accumulators}):",
        "        acc[i] = T.float32(0.0)",
    ]

    def load(depth: str) -> None:
        stage = "kt_load % " + str(STAGES)
        _copy_tile(lines, "A", BM, f"base + {stage} * {stage_halves}", f"by * {BM}", depth)
        _copy_tile(lines, "B", BN, f"base + {stage} * {stage_halves} + {a_halves}", f"bx * {BN}", depth)

    lines.append(f"    for kt_load in range({STAGES - 1}):")
    load("        ")
    lines.append('        T.ptx.cp("async", "commit_group", "")')
    lines += [
        f"    for kt in range({k_tiles}):",
        f'        T.ptx.cp({STAGES - 2}, "async", "wait_group", "")',  # (tile kt has landed, this thread's copies)
        '        T.ptx.fence("proxy", "async", "shared::cta", "")',  # (... visible to wgmma's reads)
        "        T.cuda.cta_sync()",  # (... everyone's)
    ]
    issue = [
        '        T.ptx.wgmma("fence", "sync", "aligned", "")',
        f"        for ks in T.unroll({BK // 16}):",
        f"            tile: T.int32 = base + kt % {STAGES} * {stage_halves}",
        "            " + _descriptor("desc_a", f"tile + wg * {64 * BK} + ks * 16"),
        "            " + _descriptor("desc_b", f"tile + {a_halves} + ks * 16"),
        f'            T.ptx.wgmma({acc}, desc_a, desc_b, T.uint32(1), 1, 1, 0, 0, "mma_async", "sync", "aligned", '
        f'"m64n{BN}k16", "f32", "f16", "f16", "p{accumulators + 2}")',
        '        T.ptx.wgmma("commit_group", "sync", "aligned", "")',
    ]
    if overlap:
        # (tile kt's wgmmas run while the copies of tile kt + STAGES - 1 are issued: into the stage of
        # tile kt - 1, once both warpgroups' wgmmas of it are done)
        lines += issue + ['        T.ptx.wgmma(1, "wait_group", "sync", "aligned", "")', "        T.cuda.cta_sync()"]
    lines += [f"        kt_load: T.int32 = kt + {STAGES - 1}", f"        if kt_load < {k_tiles}:"]
    load("            ")
    lines.append('        T.ptx.cp("async", "commit_group", "")')
    if not overlap:
        lines += issue + ['        T.ptx.wgmma(0, "wait_group", "sync", "aligned", "")']
    else:
        lines.append('    T.ptx.wgmma(0, "wait_group", "sync", "aligned", "")')
    lines += [
        # (the accumulators as wgmma leaves them: warp w of a warpgroup holds rows 16 w .. 16 w + 15; of
        # the 8 columns j, a lane holds rows lane / 4 and lane / 4 + 8, columns 2 (lane % 4) and the next)
        f"    for j in T.unroll({BN // 8}):",
        "        for h in T.unroll(2):",
        "            for e in T.unroll(2):",
        f"                C[by * {BM} + wg * 64 + warp * 16 + lane // 4 + h * 8, bx * {BN} + j * 8 + lane % 4 * 2 + e] = "
        "T.Cast(\"float16\", acc[j * 4 + h * 2 + e])",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:4]] if len(sys.argv) >= 4 else [4096, 4096, 4096]
    print(kernel_text(*sizes, overlap="--overlap" in sys.argv), end="")
