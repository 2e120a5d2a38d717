"""Buffers of vectors (``T.Buffer((4,), "float32x2")``): element i is L lanes, and the array that
holds such a buffer has its lanes as one more, last dimension of L, as TVM's .numpy() shows it.
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


def test_a_vector_index_into_a_buffer_of_vectors_reads_each_elements_lanes() -> None:
    """``A[i:i + 2]`` of a float32x2 buffer is four lanes: elements i and i + 1, two lanes each
    (it had been a raw numpy broadcast error)."""
    two = from_source(VECTORS.replace("        C[i * 2:i * 2 + 2] = A[i]\n", "        C[i * 2:i * 2 + 4] = A[i:i + 2]\n")
                      .replace("range(4)", "range(2)").replace("A[3 - i]", "A[1 - i]"))
    args = arrays()
    run_prim_func(two, *args)
    np.testing.assert_array_equal(args[2], [0, 1, 2, 3, 4, 5, 0, 0])


def test_a_negative_lane_of_a_vector_access_is_out_of_bounds() -> None:
    """(numpy wraps a negative position around: C[-1] had read the last element silently)"""
    shifted = from_source(VECTORS.replace("        C[i * 2:i * 2 + 2] = A[i]\n",
                                          "        C[i * 2 - 1:i * 2 + 1] = A[i]\n"))
    with pytest.raises(TVMSError, match="out-of-bounds access: element -1 of buffer 'C'"):
        run_prim_func(shifted, *arrays())
    gathered = from_source(VECTORS.replace("        C[i * 2:i * 2 + 2] = A[i]\n",
                                           "        C[i * 2:i * 2 + 2] = C[T.Ramp(1 - i * 2, -1, 2)]\n"))
    with pytest.raises(TVMSError, match="out-of-bounds access: element -1 of buffer 'C'"):
        run_prim_func(gathered, *arrays())


SHARED = """
@T.prim_func
def main(A: T.Buffer((64,), "float32x2"), B: T.Buffer((64,), "float32x2")):
    for i in T.thread_binding(64, thread="threadIdx.x"):
        S = T.decl_buffer((64,), "float32x2", scope="shared")
        S[i] = A[i]
        T.tvm_storage_sync("shared")
        B[i] = S[63 - i]
"""


def test_shared_memory_of_vectors_holds_each_elements_lanes() -> None:
    """(a shared float32x2 buffer had been a raw numpy error in the GPU executor)"""
    a, b = np.arange(128, dtype="float32").reshape(64, 2), np.zeros((64, 2), "float32")
    run_prim_func(from_source(SHARED), a, b)
    np.testing.assert_array_equal(b, a[::-1])
    with pytest.raises(TVMSError, match="out-of-bounds access: element 64 of buffer 'S'"):
        run_prim_func(from_source(SHARED.replace("S[63 - i]", "S[64 - i]")), a, b)


STRIDED = """
@T.prim_func
def main(a: T.handle, b: T.handle):
    s = T.int32()
    t = T.int32()
    A = T.match_buffer(a, (3, 4), "float32x2", strides=(s, t))
    B = T.match_buffer(b, (3, 4), "float32x2")
    for i, j in T.grid(3, 4):
        B[i, j] = A[i, j] + T.Broadcast(T.float32(100.0), 2)
"""


def test_symbolic_strides_count_vectors_not_lanes() -> None:
    """(the llvm module had bound a stride lanes times too large: it read past the array)"""
    pytest.importorskip("llvmlite")
    import tvms

    func = from_source(STRIDED)
    a = np.arange(24, dtype="float32").reshape(3, 4, 2)
    expected, got = np.zeros((3, 4, 2), "float32"), np.zeros((3, 4, 2), "float32")
    run_prim_func(func, a, expected)
    tvms.build(func, "llvm")["main"](a, got)
    np.testing.assert_array_equal(expected, a + 100)
    np.testing.assert_array_equal(got, a + 100)


def test_a_gather_with_a_negative_lane_is_out_of_bounds() -> None:
    """(only a ramp's ends are its extremes: a gather's middle lane had wrapped around)"""
    gather = from_source("""
@T.prim_func
def main(C: T.Buffer((4,), "float32"), I: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
    B[0:4] = C[I[0:4]]
""")
    c, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    with pytest.raises(TVMSError, match="out-of-bounds access: element -1 of buffer 'C'"):
        run_prim_func(gather, c, np.array([0, -1, 2, 0], "int32"), b)
    run_prim_func(gather, c, np.array([3, 1, 2, 0], "int32"), b)
    np.testing.assert_array_equal(b, [3, 1, 2, 0])


def test_reinterpret_between_a_vector_and_a_scalar_of_its_bits() -> None:
    """int8x4 <-> int32 (the llvm target had made invalid IR of it)"""
    pytest.importorskip("llvmlite")
    import tvms

    func = from_source("""
@T.prim_func
def main(A: T.Buffer((4,), "int8x4"), B: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int8x4")):
    for i in range(4):
        B[i] = T.reinterpret("int32", A[i])
        C[i] = T.reinterpret("int8x4", B[i] + 1)
""")
    a = np.arange(16, dtype="int8").reshape(4, 4)
    for run in (lambda *args: run_prim_func(func, *args), tvms.build(func, "llvm")["main"]):
        b, c = np.zeros(4, "int32"), np.zeros((4, 4), "int8")
        run(a, b, c)
        np.testing.assert_array_equal(b, a.view("int32").reshape(-1))
        np.testing.assert_array_equal(c, (b + 1).view("int8").reshape(4, 4))


@pytest.mark.parametrize("store, message", [
    ("A[0] = T.float32(0.0)", "cannot store a float32 value into buffer 'A' of float32x2"),
    ("C[0] = A[0]", "cannot store a float32x2 value into buffer 'C' of float32"),
    ("C[0:4] = T.float32(0.0)", "cannot store a float32 value into 4 lanes of buffer 'C' of float32"),
    ("C[0:4] = A[0]", "cannot store a float32x2 value into 4 lanes of buffer 'C' of float32"),
])
def test_a_store_of_other_lanes_is_refused_where_it_stands(store: str, message: str) -> None:
    """As TVM 0.27 refuses it ("Incompatible types in BufferStore"): no broadcast, no narrowing."""
    from tvms import ScriptError

    with pytest.raises(ScriptError, match=message) as err:
        from_source(VECTORS.replace("    for j in range(2):", f"    {store}\n    for j in range(2):"))
    assert (err.value.span.line, err.value.span.col) == (9, 5 + store.index("= ") + 2)


def test_the_llvm_target_refuses_a_vector_index_into_a_buffer_of_vectors() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    ramp = from_source(VECTORS.replace("        C[i * 2:i * 2 + 2] = A[i]\n",
                                       "        C[i * 2:i * 2 + 4] = A[i:i + 2]\n"))
    with pytest.raises(TVMSError, match="does not compile a vector access of 'A', a buffer of float32x2 vectors"):
        tvms.build(ramp, "llvm")
    kernel = KERNEL.replace("        C[i * 2:i * 2 + 2] = A[i]\n", "        C[i * 2:i * 2 + 4] = A[i:i + 2]\n")
    with pytest.raises(TVMSError, match="the cuda target does not compile a vector access of 'A'"):
        tvms.build(from_source(kernel), "cuda")  # (it had written CUDA that NVRTC refused)


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
    shared = tvms.build(from_source(SHARED), "cuda").imported_modules[0].get_source()
    assert "__shared__ alignas(64) float2 S_ptr[64];" in shared
    assert_compiles(shared)
