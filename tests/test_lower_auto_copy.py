"""LowerAutoCopy against Apache TVM 0.27 (fixtures/lower_auto_copy/generate_with_tvm.py): on the
inputs of TVM's nine tests (coalescing and vectorizing, inverse mapping, the local stage,
shared <-> wmma, wmma -> global with and without fusion, mma -> global, auto padding) and on the
mma.sync candidate at the stage TVM's cuda pipeline runs it, tvms's pass prints TVM's output byte
for byte. In the reference executor, 64 x 64 float32 copies through a 32 x 32 shared tile
(coalesced, inverse-mapped, through registers, split with a bound) and the cases the reviews found
compute what they computed before the pass; the copies the rules cannot take are refused with a
TVMSError naming the block."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.stmt import THREAD_BINDING, VECTORIZED, Block, For, IfThenElse
from tvms.ir.visitor import walk
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.transform import PassError
from tvms.lowering.tir.gpu import pipeline
from tvms.lowering.tir.gpu.lower_auto_copy import lower_auto_copy
from tvms.lowering.tune.postproc_verify_gpu_code import gpu_code_errors, shared_memory_bytes
from tvms.runtime.reference import run_prim_func

GOLDEN = pathlib.Path(__file__).parent / "fixtures" / "lower_auto_copy"
DIALECT = "tvm-0.27"
CASES = sorted(p.name[:-len("_before.tvms")] for p in GOLDEN.glob("*_before.tvms"))


def test_all_of_tvms_cases_are_kept() -> None:
    assert CASES == ["auto_padding", "coalesce_vectorize", "inverse", "local_stage", "mma", "mma_to_global",
                     "shared_to_wmma", "wmma_to_global", "wmma_to_global_fusion", "wmma_to_shared"]


@pytest.mark.parametrize("case", CASES)
def test_prints_what_tvm_prints(case: str) -> None:
    mod = tvms.script.from_source((GOLDEN / f"{case}_before.tvms").read_text())
    assert get_pass("LowerAutoCopy")(mod).script(dialect=DIALECT) == (GOLDEN / f"{case}_after.tvms").read_text()


def test_the_cuda_pipeline_runs_it_where_tvm_does() -> None:
    steps = pipeline.BEFORE_ENTRY
    at = steps.index
    assert at(pipeline.compact_buffer_allocation) + 1 == at(pipeline.lower_auto_copy)
    assert at(pipeline.lower_auto_copy) + 1 == at(pipeline.unify_thread_binding)
    assert "LowerAutoCopy" not in pipeline.SKIPPED


def copy(load: dict | None, store: dict | None, transposed: bool = False, threads: int = 2) -> tvms.PrimFunc:
    """A 64 x 64 copy of A into B through a 32 x 32 shared tile per thread block, the copies in and
    out annotated ``load`` / ``store`` (None: a plain copy); ``transposed``: the tile holds the
    transpose (written A_shared[j, i], read back so)."""
    tile = "A_shared[ax1, ax0]" if transposed else "A_shared[ax0, ax1]"
    return tvms.script.from_source(tile_copy(
        '(64, 64), "float32"', '(64, 64), "float32"', f"{tile} = A[bx * 32 + ax0, by * 32 + ax1]",
        f"B[bx * 32 + ax0, by * 32 + ax1] = {tile}", attrs=(load or {}, store or {}), threads=threads,
        store_loops="for ax1, ax0 in T.grid(32, 32)" if transposed else "for ax0, ax1 in T.grid(32, 32)"))


def tile_copy(a_type: str, b_type: str, load: str, store: str, shared: str = "(32, 32)",
              loops: str = "for ax0, ax1 in T.grid(32, 32)", attrs: tuple = ({}, {}), threads: int = 2,
              store_loops: str = "for ax0, ax1 in T.grid(32, 32)") -> str:
    """A copy of A into B through a shared tile ``A_shared`` per thread block (2 x 2 blocks of
    ``threads`` warps), the copies in and out the statements ``load`` / ``store`` under ``loops``
    and ``store_loops``, annotated ``attrs``."""
    return f"""
@T.prim_func(s_tir=True)
def main(A: T.Buffer({a_type}), B: T.Buffer({b_type})):
    with T.sblock("root"):
        T.sblock_attr({{"warp_execution": True}})
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for by in T.thread_binding(2, thread="blockIdx.y"):
                for ty in T.thread_binding({threads}, thread="threadIdx.y"):
                    with T.sblock():
                        A_shared = T.sblock_alloc_buffer({shared}, scope="shared.dyn")
                        with T.sblock("A_shared"):
                            T.sblock_attr({attrs[0]!r})
                            {loops}:
                                {load}
                        with T.sblock("B"):
                            T.sblock_attr({attrs[1]!r})
                            {store_loops}:
                                {store}
"""


def copied(func: tvms.PrimFunc) -> np.ndarray:
    a = np.arange(64 * 64, dtype="float32").reshape(64, 64)
    b = np.zeros_like(a)
    run_prim_func(func, a, b)
    return b


VECTOR = {"auto_copy": True, "vector_bytes": 16}


@pytest.mark.parametrize("load, store, transposed, threads", [
    (VECTOR, None, False, 2),  # coalesced, 4 lanes
    (None, VECTOR, True, 2),  # inverse mapping, then coalesced
    ({**VECTOR, "local_stage": True}, None, False, 2),  # through registers
    ({"auto_copy": True}, {"auto_copy": True}, True, 3),  # a split that overshoots (3 x 32 threads)
])
def test_copies_compute_what_they_did(load, store, transposed, threads) -> None:
    """TVM's coalescing, inverse and local-stage cases at 64 x 64 (and a thread count that does
    not divide the tile, so the split is bounded): the lowered copies are thread-bound and
    vectorized, the transposed tile is padded (strides), and B is A before and after."""
    func = copy(load, store, transposed, threads)
    lowered = lower_auto_copy(func)
    loops = [n for n in walk(lowered.body) if isinstance(n, For)]
    assert any(loop.kind == THREAD_BINDING and loop.thread_binding.thread_tag == "threadIdx.x" for loop in loops)
    lanes = 4 if "vector_bytes" in (load or store) else 1
    assert any(loop.kind == VECTORIZED and loop.extent.value == lanes for loop in loops)
    assert any(isinstance(n, IfThenElse) for n in walk(lowered.body)) == (threads == 3)
    (shared,) = [b for n in walk(lowered.body) if isinstance(n, Block) for b in n.alloc_buffers
                 if b.name == "A_shared"]
    assert (shared.strides[0].value > 32) == transposed  # (a row padded against bank conflicts)
    expected = np.arange(64 * 64, dtype="float32").reshape(64, 64)
    np.testing.assert_array_equal(copied(func), expected)
    np.testing.assert_array_equal(copied(lowered), expected)


def test_verify_gpu_code_counts_the_padding() -> None:
    """VerifyGPUCode counts a shared tile LowerAutoCopy pads at its padded size, as TVM's check
    counts the lowered allocation: the transposed 32 x 32 tile in rows of 33 (4224 bytes), the
    plain one in rows of 32."""
    for transposed, counted in (False, 32 * 32 * 4), (True, 32 * 33 * 4):
        func = copy(None, {"auto_copy": True}, transposed)
        (shared,) = [b for n in walk(lower_auto_copy(func).body) if isinstance(n, Block) for b in n.alloc_buffers
                     if b.name == "A_shared"]
        assert shared.strides[0].value * 32 * 4 == shared_memory_bytes(func) == counted


def test_refusals() -> None:
    """A copy the rules cannot take is refused with the block's name, never lowered wrongly: a
    write to global whose indices are no permutation of the loops (TVM inverts any bijective
    affine map, tvms only permutations), a copy that is not a loop nest around one store."""
    text = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((4096,), "float32")):
    with T.sblock("root"):
        for ty in T.thread_binding(2, thread="threadIdx.y"):
            with T.sblock():
                A_shared = T.sblock_alloc_buffer((64, 64), scope="shared")
                with T.sblock("fill"):
                    for ax0, ax1 in T.grid(64, 64):
                        A_shared[ax0, ax1] = A[ax0, ax1]
                with T.sblock("flat"):
                    T.sblock_attr({"auto_copy": True})
                    for ax0, ax1 in T.grid(64, 64):
                        B[ax0 * 64 + ax1] = A_shared[ax0, ax1]
"""
    with pytest.raises(TVMSError, match="'flat' writes indices that are not a permutation"):
        lower_auto_copy(tvms.script.from_source(text))
    # (VerifyGPUCode refuses such a candidate, as TVM's check refuses one its passes fail on)
    (error,) = gpu_code_errors(tvms.script.from_source(text), 1024, 49152)
    assert error.startswith("LowerAutoCopy, or a pass before it, cannot lower it: LowerAutoCopy (inverse mapping): "
                            "block 'flat' writes indices that are not a permutation")
    transposing = copy(None, {"auto_copy": True}, transposed=True).script().replace("for ax1, ax0 in", "for ax0, ax1 in")
    with pytest.raises(TVMSError, match="'B' must read its source at its loops' variables, in their order"):
        lower_auto_copy(tvms.script.from_source(transposing))
    two = text.replace("B[ax0 * 64 + ax1] = A_shared[ax0, ax1]",
                       "B[ax0 * 64 + ax1] = A_shared[ax0, ax1]\n                    B[0] = A_shared[0, 0]")
    with pytest.raises(TVMSError, match="'flat' must be a nest of 1 loops or more around one store"):
        lower_auto_copy(tvms.script.from_source(two))


def lowered_computes(text: str, a: np.ndarray, expected: np.ndarray) -> None:
    """The function ``text`` (of A and B) gives B = ``expected`` before and after the pass."""
    func = tvms.script.from_source(text)
    for f in (func, lower_auto_copy(func)):
        b = np.zeros_like(expected)
        run_prim_func(f, a, b)
        np.testing.assert_array_equal(b, expected)


A64 = np.arange(64 * 64, dtype="float32").reshape(64, 64)
AUTO = {"auto_copy": True}


def test_inverse_mapping_walks_the_written_dimensions() -> None:
    """A write to global with a size-1 dimension first: each new loop walks the extent of the
    dimension it writes (not the region's i-th: 1 x 32 of the 32 x 32 tile)."""
    text = tile_copy('(64, 64), "float32"', '(1, 64, 64), "float32"',
                     "A_shared[ax0, ax1] = A[bx * 32 + ax0, by * 32 + ax1]",
                     "B[0, bx * 32 + ax0, by * 32 + ax1] = A_shared[ax0, ax1]", attrs=({}, AUTO))
    lowered_computes(text, A64, A64[None])


def test_the_local_stage_is_compact() -> None:
    """The register stage of a copy from a 3-D global buffer into a strided shared tile has no
    strides of its own (TVM's takes the shared tile's: two strides for a 1 x 8 x 4 stage)."""
    text = tile_copy('(1, 64, 64), "float32"', '(64, 64), "float32"',
                     "A_shared[ax0, ax1] = A[0, bx * 32 + ax0, by * 32 + ax1]",
                     "B[bx * 32 + ax0, by * 32 + ax1] = A_shared[ax0, ax1]", shared="(32, 32), strides=(40, 1)",
                     attrs=({**VECTOR, "local_stage": True}, {}))
    (stage,) = [b for n in walk(lower_auto_copy(tvms.script.from_source(text)).body) if isinstance(n, Block)
                for b in n.alloc_buffers if b.scope == "local"]
    assert stage.strides == ()
    lowered_computes(text, A64[None], A64)


@pytest.mark.parametrize("case", ["mma_to_global", "wmma_to_global", "wmma_to_shared"])
def test_accumulator_read_at_two_indices_is_refused(case: str) -> None:
    """An accumulator read at two indices (``C[i, j] + C[j, i]``) cannot move tile by tile: it is
    refused (TVM reads it as ``2 * C[i, j]``)."""
    text = (GOLDEN / f"{case}_before.tvms").read_text()
    changed = re.sub(r"= (C_accum\[ax0, ax1\])", r"= \1 + C_accum[ax1, ax0]", text)
    assert changed != text
    with pytest.raises(PassError, match="block 'C_\\w+' must read one .* buffer, at one index"):
        get_pass("LowerAutoCopy")(tvms.script.from_source(changed))


@pytest.mark.parametrize("case, grid, match", [
    ("shared_to_wmma", "T.grid(128, 24)", "'A_wmma' copies loops whose extents are not multiples of the 16x16 tile"),
    ("wmma_to_shared", "T.grid(128, 24)", "'C_shared' copies loops whose extents are not multiples of the 16x16"),
    ("wmma_to_global", "T.grid(128, 24)", "'C_global' copies loops whose extents are not multiples of the 16x16"),
    ("mma_to_global", "T.grid(128, 12)", "'C_global' copies loops whose extents are not multiples of the 8x8 tile"),
])
def test_tensor_core_copies_that_cannot_be_tiled_are_refused(case: str, grid: str, match: str) -> None:
    """A copy whose tile loops are no multiples of the fragment is refused (TVM leaves the nest
    as it is and matches its whole region to one fragment)."""
    text = (GOLDEN / f"{case}_before.tvms").read_text()
    assert "T.grid(128, 128)" in text
    with pytest.raises(PassError, match=match):
        get_pass("LowerAutoCopy")(tvms.script.from_source(text.replace("T.grid(128, 128)", grid)))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_wmma_loads_of_another_type_than_float16_are_refused(dtype: str) -> None:
    """``load_matrix_sync`` is given float16 fragments: a float32 or int8 tile is refused."""
    text = (GOLDEN / "shared_to_wmma_before.tvms").read_text()
    with pytest.raises(PassError, match=f"'A_wmma' copies {dtype} to {dtype}; the fragment holds one of float16"):
        get_pass("LowerAutoCopy")(tvms.script.from_source(text.replace('"float16"', f'"{dtype}"')))


@pytest.mark.parametrize("load", [AUTO, {**AUTO, "local_stage": True}])
def test_a_copy_loop_not_starting_at_zero_is_refused(load: dict) -> None:
    """A copy over rows 2..33 is refused (TVM re-makes the loop from its extent: rows 0..31)."""
    text = tile_copy('(64, 64), "float32"', '(64, 64), "float32"',
                     "for ax1 in range(32): A_shared[ax0 - 2, ax1] = A[bx * 32 + ax0, by * 32 + ax1]",
                     "B[bx * 32 + ax0, by * 32 + ax1] = A_shared[ax0, ax1]", loops="for ax0 in range(2, 34)",
                     attrs=(load, {}))
    with pytest.raises(TVMSError, match="'A_shared' copies under loop 'ax0', which does not start at 0"):
        lower_auto_copy(tvms.script.from_source(text))


def test_a_shared_buffer_of_symbolic_shape_is_not_padded() -> None:
    """A shared buffer with a dimension of symbolic extent keeps its rows (padding needs their
    lengths) and the copy into it still computes what it did."""
    text = """
@T.prim_func(s_tir=True)
def main(a: T.handle, B: T.Buffer((4, 64), "float32")):
    n = T.int32()
    A = T.match_buffer(a, (2, n, 64), "float32")
    with T.sblock("root"):
        T.sblock_attr({"warp_execution": True})
        for ty in T.thread_binding(2, thread="threadIdx.y"):
            with T.sblock():
                A_shared = T.sblock_alloc_buffer((2, n, 64), scope="shared")
                with T.sblock("A_shared"):
                    T.sblock_attr({"auto_copy": True})
                    for ax0, ax1, ax2 in T.grid(2, 4, 64):
                        A_shared[ax0, ax1, ax2] = A[ax0, ax1, ax2]
                with T.sblock("B"):
                    for ax0, ax1 in T.grid(4, 64):
                        B[ax0, ax1] = A_shared[1, ax0, ax1]
"""
    (shared,) = [b for n in walk(lower_auto_copy(tvms.script.from_source(text)).body) if isinstance(n, Block)
                 for b in n.alloc_buffers if b.name == "A_shared"]
    assert shared.strides == ()
    a = np.arange(2 * 4 * 64, dtype="float32").reshape(2, 4, 64)
    lowered_computes(text, a, a[1].copy())
