"""Buffers of vectors (``T.Buffer((4,), "float32x2")``): element i is L lanes, and the array that
holds such a buffer has its lanes as one more, last dimension of L, as TVM's NDArray shows it.
The reference executor, the llvm target and ``tvms run`` agree on that, and refuse the arrays
that lack it (the llvm target had read and written scalars; the executor had cut accesses past
the end short silently)."""
from __future__ import annotations

import numpy as np
import pytest

from tvms import TVMSError
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

VECTORS = """
@T.prim_func
def main(A: T.Buffer((4,), "float32x2"), B: T.Buffer((4,), "float32x2"), C: T.Buffer((8,), "float32"), D: T.Buffer((2,), "int8x4")):
    acc = T.decl_buffer((1,), "float32x2", scope="local")
    for i in range(4):
        acc[0] = A[i] * T.Broadcast(T.float32(2.0), 2)
        B[i] = acc[0] + A[3 - i]
        C[i * 2:i * 2 + 2] = A[i]
    for j in range(2):
        D[j] = T.Cast("int8x4", T.Ramp(j * 4, 1, 4)) * T.Broadcast(T.int8(3), 4)
"""


def arrays() -> list:
    return [np.arange(8, dtype="float32").reshape(4, 2), np.zeros((4, 2), "float32"),
            np.zeros(8, "float32"), np.zeros((2, 4), "int8")]


def expected() -> list:
    a = np.arange(8, dtype="float32").reshape(4, 2)
    return [2 * a + a[::-1], a.reshape(-1), (np.arange(8).reshape(2, 4) * 3).astype("int8")]


def assert_expected(args: list) -> None:
    for got, want in zip(args[1:], expected()):
        np.testing.assert_array_equal(got, want)


def test_the_reference_executor_reads_lanes_as_the_last_dimension() -> None:
    args = arrays()
    run_prim_func(from_source(VECTORS), *args)
    assert_expected(args)


def test_the_llvm_target_loads_and_stores_whole_vectors() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    args = arrays()
    tvms.build(from_source(VECTORS), "llvm")["main"](*args)
    assert_expected(args)


def test_an_array_without_the_lanes_dimension_is_refused() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    func = from_source(VECTORS)
    built = tvms.build(func, "llvm")["main"]
    flat = arrays()
    flat[0] = flat[0].reshape(-1)
    with pytest.raises(TVMSError, match=r"buffer 'A': expected 2 dimensions, got shape \(8,\)"):
        run_prim_func(func, *flat)
    with pytest.raises(TVMSError, match=r"argument 0 \(A\): expected 2 dimensions, got shape \(8,\)"):
        built(*flat)
    three = arrays()
    three[0] = np.zeros((4, 3), "float32")
    with pytest.raises(TVMSError, match="buffer 'A' dimension 1: expected 2, got 3"):
        run_prim_func(func, *three)
    with pytest.raises(TVMSError, match="argument 0 \\(A\\): dimension 1: expected extent 2, got 3"):
        built(*three)


def test_an_element_past_the_end_is_an_out_of_bounds_access() -> None:
    past = from_source(VECTORS.replace("A[3 - i]", "A[4 - i]"))
    with pytest.raises(TVMSError, match="out-of-bounds access: element 4 of buffer 'A'"):
        run_prim_func(past, *arrays())


def test_the_llvm_target_refuses_a_vector_index_into_a_buffer_of_vectors() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    ramp = from_source(VECTORS.replace("        C[i * 2:i * 2 + 2] = A[i]\n",
                                       "        C[i * 2:i * 2 + 4] = A[i:i + 2]\n"))
    with pytest.raises(TVMSError, match="does not compile a vector access of 'A', a buffer of float32x2 vectors"):
        tvms.build(ramp, "llvm")


def test_tvms_run_makes_and_prints_arrays_with_the_lanes(tmp_path, capsys) -> None:
    pytest.importorskip("llvmlite")
    from tvms.cli import main

    path = tmp_path / "vectors.tvms"
    path.write_text("# from tvm.script import tir as T\n" + VECTORS)
    np.save(tmp_path / "a.npy", arrays()[0])
    assert main(["run", str(path), "--input", f"A={tmp_path / 'a.npy'}"]) == 0
    out = capsys.readouterr().out
    assert "B: shape (4, 2) float32\n" in out and "D: shape (2, 4) int8\n" in out
    assert "[[ 6.,  9.],\n   [ 8., 11.],\n" in out
    np.save(tmp_path / "flat.npy", arrays()[0].reshape(-1))
    assert main(["run", str(path), "--input", f"A={tmp_path / 'flat.npy'}"]) == 2
    assert "input A is 1-d (shape (8,)); A is declared (4, 2) float32" in capsys.readouterr().err


KERNEL = """
@T.prim_func
def main(A: T.Buffer((4,), "float32x2"), B: T.Buffer((4,), "float32x2"), C: T.Buffer((8,), "float32"), D: T.Buffer((2,), "int8x4")):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        acc = T.decl_buffer((1,), "float32x2", scope="local")
        acc[0] = A[i] * T.Broadcast(T.float32(2.0), 2)
        B[i] = acc[0] + A[3 - i]
        C[i * 2:i * 2 + 2] = A[i]
        if i < 2:
            D[i] = T.Cast("int8x4", T.Ramp(i * 4, 1, 4)) * T.Broadcast(T.int8(3), 4)
"""


def test_a_cuda_kernel_takes_vector_pointers_and_compiles() -> None:
    import tvms
    from cuda_support import assert_compiles

    func = from_source(KERNEL)
    args = arrays()
    run_prim_func(func, *args)
    assert_expected(args)
    source = tvms.build(func, "cuda").imported_modules[0].get_source()
    assert ("(float2* __restrict__ A_ptr, float2* __restrict__ B_ptr, float* __restrict__ C_ptr, "
            "int* __restrict__ D_ptr)") in source  # (TVM spells int8x4 int)
    assert_compiles(source)
