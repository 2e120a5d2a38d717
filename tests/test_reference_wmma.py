"""Tensor cores in the reference executor (runtime/reference_wmma.py): DLight's WMMA schedule of a
float16 and an int8 matmul computes what numpy computes, the WMMA calls' semantics one by one, and the errors
(a tile read before it is written, a fragment accessed element by element); so does its cuda
lowering, with the barriers ThreadSync places. On a machine with a
CUDA GPU, the same schedule runs on the device (test_tensor_core_matmul_on_the_device)."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.module import IRModule
from tvms.ir.target import Target
from tvms.lowering.dlight.base import ApplyDefaultSchedule
from tvms.lowering.dlight.gpu_matmul import Matmul
from tvms.lowering.dlight.gpu_matmul_tensorcore import schedule_tensor_core
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.runtime import reference_wmma as wmma
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

# x (n x 128) @ w (128 x 128) of IN accumulated in OUT: one thread block of 16 warps
TEMPLATE = '''
# from tvm.script import tir as T

@T.prim_func
def main(var_x: T.handle, w: T.Buffer((T.int64(128), T.int64(128)), "IN"), var_y: T.handle):
    n = T.int64()
    x = T.match_buffer(var_x, (n, T.int64(128)), "IN")
    y = T.match_buffer(var_y, (n, T.int64(128)), "OUT")
    for i, j, k in T.grid(n, T.int64(128), T.int64(128)):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                y[vi, vj] = T.OUT(0)
            y[vi, vj] = y[vi, vj] + T.Cast("OUT", x[vi, vk]) * T.Cast("OUT", w[vk, vj])
'''
MATMUL = TEMPLATE.replace("IN", "float16").replace("OUT", "float32")


def tensorized(rows: int | None = None):
    """The WMMA schedule of MATMUL (of ``rows`` rows, else symbolic ones), staged in shared.dyn."""
    text = MATMUL if rows is None else MATMUL.replace("    n = T.int64()\n", "").replace("n,", f"T.int64({rows}),")
    sch = schedule_tensor_core(from_source(text), "float16")
    assert sch is not None
    return sch.mod["main"]


@pytest.mark.parametrize("dtypes", [("float16", "float32"), ("int8", "int32")])
def test_dlight_tensor_core_matmul_computes_as_numpy(dtypes):
    """What DLight gives on sm_80 (TVM's schedule, staged in shared.dyn), 40 rows padded to 128:
    float16 products summed in float32 as numpy in float64 within float32 rounding; int8 exactly."""
    in_dtype, out_dtype = dtypes
    with Target("cuda -arch=sm_80"):
        mod = ApplyDefaultSchedule(Matmul())(IRModule({"main": from_source(TEMPLATE.replace("IN", in_dtype).replace("OUT", out_dtype))}))
    assert "T.tvm_mma_sync" in mod["main"].script()
    rng = np.random.default_rng(0)
    if in_dtype == "int8":
        x, w = rng.integers(-128, 128, (40, 128)).astype(np.int8), rng.integers(-128, 128, (128, 128)).astype(np.int8)
    else:
        x, w = rng.standard_normal((40, 128)).astype(np.float16), rng.standard_normal((128, 128)).astype(np.float16)
    y = np.zeros((40, 128), out_dtype)
    run_prim_func(mod["main"], x, w, y)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_lowered_tensor_core_kernel_computes_as_numpy():
    """The cuda lowering of DLight's WMMA schedule (symbolic rows; its tiles in shared.dyn, merged
    into one uint8 allocation that the A and B tiles and then the accumulators' write-back view
    as float16 and float32) runs as the code generator gets it, on 40 rows (padded to 128). The
    executor adds no barrier to lowered code that has them, so a missing one is a race: ThreadSync
    places five (as in TVM 0.27's lowering of this schedule: the k loop software-pipelined, its A
    and B tiles double-buffered), the last but one before the write-back, whose bytes the A and B
    tiles used."""
    target = Target("cuda -arch=sm_80")
    with target:
        func = ApplyDefaultSchedule(Matmul())(IRModule({"main": from_source(MATMUL)}))["main"]
    mod = lower_for_cuda(func.with_attr("global_symbol", "main"), target)
    (kernel,) = [f for _, f in mod.functions_items() if f.attrs.get("calling_conv") == 2]
    text = kernel.script()
    assert text.count('T.tvm_storage_sync("shared.dyn")') == 5 and 'scope="shared.dyn"' in text
    barrier_after_mma = text.index('T.tvm_storage_sync("shared.dyn")\n', text.rindex("T.tvm_mma_sync"))
    assert barrier_after_mma < text.index("T.tvm_store_matrix_sync")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((40, 128)).astype(np.float16), rng.standard_normal((128, 128)).astype(np.float16)
    y = np.zeros((40, 128), np.float32)
    run_prim_func(mod, x, w, y)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_wmma_calls_on_views_of_merged_shared_memory():
    """The WMMA loads and store take ``T.tvm_access_ptr`` of the merged uint8 allocation typed by
    its annotation (float16 tiles at elements 0 and 256, the float32 result over the same bytes),
    as MergeSharedMemoryAllocations leaves DLight's tensor-core kernel: offsets count elements of
    that type; without the barrier after the copy, the load is a race, named by its statement."""
    text = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((512,), "float16"), C: T.Buffer((256,), "float32")):
    with T.launch_thread("threadIdx.x", 32) as threadIdx_x:
        buf = T.alloc_buffer((1024,), "uint8", scope="shared.dyn")
        A_s = T.decl_buffer((512,), "float16", data=buf.data, scope="shared.dyn")
        C_s = T.decl_buffer((256,), data=buf.data, scope="shared.dyn")
        a = T.alloc_buffer((256,), "float16", scope="wmma.matrix_a")
        b = T.alloc_buffer((256,), "float16", scope="wmma.matrix_b")
        c = T.alloc_buffer((256,), scope="wmma.accumulator")
        for i in range(16):
            A_s[i * 32 + threadIdx_x] = A[i * 32 + threadIdx_x]
        T.tvm_storage_sync("shared.dyn")
        T.tvm_load_matrix_sync(a.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), buf.data, 0, 256, 1), 16, "row_major")
        T.tvm_load_matrix_sync(b.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), buf.data, 256, 256, 1), 16, "row_major")
        T.tvm_fill_fragment(c.data, 16, 16, 16, 0, T.float32(0))
        T.tvm_mma_sync(c.data, 0, a.data, 0, b.data, 0, c.data, 0)
        T.tvm_storage_sync("shared.dyn")
        T.tvm_store_matrix_sync(c.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float32"), buf.data, 0, 256, 2), 16, "row_major")
        T.tvm_storage_sync("shared.dyn")
        for i in range(8):
            C[i * 32 + threadIdx_x] = C_s[i * 32 + threadIdx_x]
'''
    a = (np.arange(512) % 7 - 3).astype(np.float16)
    want = a[:256].reshape(16, 16).astype(np.float32) @ a[256:].reshape(16, 16).astype(np.float32)
    # (the pointer as buf.data, and as the bare buffer, which is how TVM 0.27 prints it)
    for form in (text, text.replace('"), buf.data, ', '"), buf, ')):
        c = np.zeros(256, np.float32)
        run_prim_func(from_source(form), a, c)
        np.testing.assert_array_equal(c.reshape(16, 16), want)
        racy = from_source(form.replace('        T.tvm_storage_sync("shared.dyn")\n', "", 1))
        with pytest.raises(TVMSError, match=r"data race on the shared buffer 'buf' in 'main' at "
                                            r"`T.tvm_load_matrix_sync\(a"):
            run_prim_func(racy, a, c)


def test_wmma_calls_one_by_one():
    """Each call on its own: tiles by number within the allocation, pointers 32-byte aligned
    and rows a multiple of 16 bytes apart (CUDA's requirements) where the memory is laid out as
    on the device, a float16 sum rounded at each step of k."""
    a = wmma.Fragment("a", "wmma.matrix_a", np.float16, 4 * 256)
    b = wmma.Fragment("b", "wmma.matrix_b", np.float16, 256)
    c = wmma.Fragment("c", "wmma.accumulator", np.float32, 3 * 256)
    memory = np.arange(2 * 16 * 24, dtype=np.float16) / 64
    wmma.run("load_matrix_sync", (a, 16, 16, 16, 3, (memory, 32, True), 24, "row_major"), 0, None)
    wmma.run("load_matrix_sync", (b, 16, 16, 16, 0, (memory, 16, True), 24, "col_major"), 0, None)
    wmma.run("fill_fragment", (c, 16, 16, 16, 1, 0.5), 0, None)
    wmma.run("mma_sync", (c, 2, a, 3, b, 0, c, 1), 0, None)
    rows = memory[32:32 + 16 * 24].reshape(16, 24)[:, :16]  # (a row-major 16 x 16 tile, rows 24 apart)
    cols = memory[16:16 + 16 * 24].reshape(16, 24)[:, :16].T  # (column-major: B[k, n] at n * 24 + k)
    out = np.zeros(8 + 16 * 40, np.float32)
    wmma.run("store_matrix_sync", (c, 16, 16, 16, 2, (out, 8, True), 40, "row_major"), 0, None)
    want = rows.astype(np.float32) @ cols.astype(np.float32) + 0.5
    np.testing.assert_array_equal(out[8:8 + 16 * 40].reshape(16, 40)[:, :16], want)
    with pytest.raises(TVMSError, match="tile 0 of the wmma.accumulator fragment 'c' is read before"):
        wmma.run("store_matrix_sync", (c, 16, 16, 16, 0, (out, 0, True), 16, "row_major"), 0, None)
    with pytest.raises(TVMSError, match=r"tile 3 of the wmma.accumulator fragment 'c' is out of bounds: its 768 "
                                        r"elements hold 3 tiles of 16 x 16"):
        wmma.run("fill_fragment", (c, 16, 16, 16, 3, 0.0), 0, None)
    with pytest.raises(TVMSError, match="tile 1 of the wmma.matrix_b fragment 'b' is out of bounds"):
        wmma.run("load_matrix_sync", (b, 16, 16, 16, 1, (memory, 0, True), 16, "col_major"), 0, None)
    with pytest.raises(TVMSError, match=r"tvm_load_matrix_sync: the tile's pointer is 16 bytes into its memory and "
                                        r"its rows 48 bytes apart: WMMA needs a 32-byte aligned pointer"):
        wmma.run("load_matrix_sync", (a, 16, 16, 16, 0, (memory, 8, True), 24, "row_major"), 0, None)
    # (memory that lowering still lays out, a block's alloc_buffer, is not held to it: the int8 schedule's
    # second k step starts 16 bytes into a row of its unlowered shared tile, CompactBufferAllocation's 0)
    wmma.run("load_matrix_sync", (a, 16, 16, 16, 0, (memory, 8, False), 24, "row_major"), 0, None)
    with pytest.raises(TVMSError, match=r"its rows 40 bytes apart: WMMA needs .* a multiple of 16 bytes"):
        wmma.run("store_matrix_sync", (c, 16, 16, 16, 2, (out, 0, True), 10, "row_major"), 0, None)
    # a float16 accumulator: 2048 + 1 rounds back to 2048 at each of the 15 steps (once, 2063 -> 2064)
    ones = wmma.Fragment("ones", "wmma.matrix_b", np.float16, 256)
    wmma.run("fill_fragment", (ones, 16, 16, 16, 0, 1.0), 0, None)
    big = np.ones(256, np.float16)
    big[0] = 2048
    wmma.run("load_matrix_sync", (a, 16, 16, 16, 0, (big, 0, True), 16, "row_major"), 0, None)
    half = wmma.Fragment("half", "wmma.accumulator", np.float16, 256)
    wmma.run("fill_fragment", (half, 16, 16, 16, 0, 0.0), 0, None)
    wmma.run("mma_sync", (half, 0, a, 0, ones, 0, half, 0), 0, None)
    assert half.tiles[0][0, 0] == 2048 and half.tiles[0][1, 0] == 16


def test_a_fragment_is_not_accessed_element_by_element():
    func = from_source('''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((16, 16), "float16")):
    F = T.alloc_buffer((16, 16), "float16", scope="wmma.matrix_a")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("copy"):
            F[0, 0] = A[0, 0]
''')
    with pytest.raises(TVMSError, match="fragment 'F' is accessed element by element"):
        run_prim_func(func, np.zeros((16, 16), np.float16))


@pytest.mark.skipif(not tvms.cuda(0).exist, reason="needs a CUDA GPU")
def test_tensor_core_matmul_on_the_device():
    """The schedule DLight gives a float16 matmul on sm_80 (staged in dynamic shared memory, as
    TVM's), built and run on the GPU, against numpy."""
    func = tensorized(rows=256).with_attr("global_symbol", "main")
    lib = tvms.build(func, target="cuda -arch=sm_80")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 128)).astype(np.float16)
    w = rng.standard_normal((128, 128)).astype(np.float16)
    device = tvms.cuda(0)
    args = [tvms.nd.array(v, device=device) for v in (x, w, np.zeros((256, 128), np.float32))]
    lib["main"](*args)
    np.testing.assert_allclose(args[2].numpy(), x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_a_wmma_call_is_the_whole_warps():
    """A WMMA call takes all 32 lanes of a warp, and its memory accesses are the warp's: a tile
    lane 0 alone stored needs a barrier before the warp loads it (other lanes read it). (The
    barrier at the end keeps the executor from adding ThreadSync's own.)"""
    text = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((256,), "float16"), C: T.Buffer((256,), "float16")):
    with T.launch_thread("threadIdx.x", 32) as threadIdx_x:
        A_s = T.alloc_buffer((256,), "float16", scope="shared")
        c = T.alloc_buffer((256,), "float16", scope="wmma.accumulator")
        if threadIdx_x == 0:
            for i in range(256):
                A_s[i] = A[i]
        T.tvm_storage_sync("shared")
        T.tvm_load_matrix_sync(c.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), A_s.data, 0, 256, 1), 16, "row_major")
        T.tvm_store_matrix_sync(c.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), C.data, 0, 256, 2), 16, "row_major")
        T.tvm_storage_sync("shared")
'''
    a, c = np.arange(256, dtype=np.float16), np.zeros(256, np.float16)
    run_prim_func(from_source(text), a, c)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(TVMSError, match=r"data race on the shared buffer 'A_s' in 'main' at `T.tvm_load_matrix_sync"
                                        r".*: warp 0 \(a WMMA call\) reads element 0, which thread \(threadIdx.x=0\)"):
        run_prim_func(from_source(text.replace('        T.tvm_storage_sync("shared")\n', "", 1)), a, c)
    with pytest.raises(TVMSError, match=r"tvm_load_matrix_sync at .* is called by 16 lanes of a warp .*: a WMMA call "
                                        r"needs all 32"):
        run_prim_func(from_source(text.replace('"threadIdx.x", 32', '"threadIdx.x", 16')), a, c)
