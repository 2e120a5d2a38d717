"""GPU semantics of the reference executor (runtime/reference_gpu.py, reference_kernel.py): TVM
0.27's own schedules and lowerings (tests/fixtures/reference_gpu, written by its
generate_with_tvm.py) and tvms's schedules against numpy, lock-step warp shuffles, and the errors
for data races and divergent barriers. (The corpus's warp-shuffle sum,
lower_reduce_gpu_11_LowerThreadAllreduce.tvms, is among test_reference.py's corpus programs.)"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tvms import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.structural import structural_equal
from tvms.runtime.reference import run_prim_func
from tvms.runtime.tir_values import numpy_dtype
from tvms.script import from_source
from tvms.tir import Schedule

from conftest import CORPUS_COPY, FIXTURES
from test_reference import MATMUL_64

GOLDENS = FIXTURES / "reference_gpu"
RNG = np.random.default_rng(16)


def load(text: str) -> PrimFunc:
    mod = from_source(text)
    return mod if isinstance(mod, PrimFunc) else mod["main"]


def softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run_against_numpy(func: PrimFunc, oracle, outputs: int = 1) -> None:
    """Run ``func`` on random inputs (its last ``outputs`` parameters the outputs) and compare
    with what ``oracle`` computes from the inputs (a tuple for several outputs)."""
    args = []
    for p in func.params:
        buf = func.buffer_map[p]
        scale = 100 if buf.dtype.is_int else 1  # (integers: spread out, as argmax's indices)
        args.append((RNG.standard_normal(tuple(int(d.value) for d in buf.shape)) * scale).astype(str(buf.dtype)))
    for out in args[-outputs:]:
        out[...] = np.nan if out.dtype.kind == "f" else -7  # every element must be written
    run_prim_func(func, *args)
    want = oracle(*args[:-outputs])
    for got, expected in zip(args[-outputs:], want if outputs > 1 else (want,)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def argmax(idx: np.ndarray, val: np.ndarray) -> tuple:
    return idx[np.arange(len(idx)), val.argmax(axis=1)], val.max(axis=1)


def row_sum(a: np.ndarray) -> np.ndarray:
    return a.sum(axis=1)


@pytest.mark.parametrize("case, oracle, outputs", [
    ("sum64", row_sum, 1), ("sum16", row_sum, 1), ("sum48", row_sum, 1), ("sum_groups", row_sum, 1),
    ("softmax", softmax, 1), ("argmax", argmax, 2)])
def test_allreduce_before_and_after_lower_thread_allreduce(case: str, oracle, outputs: int) -> None:
    """The reduction loop bound to threadIdx.x: TVM's schedule, its tvm_thread_allreduce (in a
    block after LowerCrossThreadReduction, lowered before LowerThreadAllreduce) and the warp
    shuffles (sum_groups: two groups of 16 lanes a warp) and shared staging after it compute
    the same."""
    stages = ("scheduled", "xthread", "before", "after") if case == "argmax" else ("scheduled", "before", "after")
    texts = {stage: (GOLDENS / f"{case}_{stage}.tvms").read_text() for stage in stages}
    assert "T.tvm_thread_allreduce(" in texts["before"]
    # (48 threads: a tree in shared memory whose last warp syncs only the lanes still reducing)
    assert ('T.tvm_storage_sync("warp")' if case == "sum48" else "T.tvm_warp_shuffle_down(") in texts["after"]
    for text in texts.values():
        run_against_numpy(load(text), oracle, outputs)


def test_host_function_launches_its_kernel() -> None:
    """SplitHostDevice's module: ``run_prim_func(mod, ...)`` runs main, whose T.call_ffi_kernel
    runs the kernel on the same memory, with the grid and block it says."""
    text = (GOLDENS / "softmax_split.tvms").read_text()
    assert "T.call_ffi_kernel(" in text
    mod = from_source(text)
    a = RNG.standard_normal((8, 64)).astype("float32")
    out = np.full((8, 64), np.nan, "float32")
    run_prim_func(mod, a, out)
    np.testing.assert_allclose(out, softmax(a), rtol=1e-5, atol=1e-7)
    with pytest.raises(TVMSError, match=r"T.call_ffi_kernel: no kernel 'main_kernel' \(run the module"):
        run_prim_func(mod["main"], a, out)
    wrong_block = from_source(text.replace("S_1.data, 8, 64,", "S_1.data, 8, 32,"))
    with pytest.raises(TVMSError, match="the host launches 'main_kernel' with threadIdx.x 32, the kernel runs 64"):
        run_prim_func(wrong_block, a, out)


def test_dlight_rms_norm_cross_thread_reduction() -> None:
    """DLight's schedule: an rfactor per thread, then a reduction bound to threadIdx.x into shared."""
    func = from_source((CORPUS_COPY / "dlight_nn_rms_norm_static.tvms").read_text())["rms_norm"]
    x = RNG.standard_normal((4, 16)).astype("float32")
    y = RNG.standard_normal(16).astype("float32")
    out = np.full((4, 16), np.nan, "float32")
    run_prim_func(func, x, y, out)
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * y
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_tiled_matmul_scheduled_with_tvms() -> None:
    """16x16 thread blocks, A and B tiles cached in shared memory and fetched cooperatively: the
    barriers TVM's ThreadSync would place are what makes it right (and quick enough). The
    schedule is generate_with_tvm.py's matmul_schedule; TVM's result is matmul_scheduled.tvms."""
    sch = Schedule(load(MATMUL_64))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, k1)
    for loop, tag in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"), (j1, "threadIdx.x")):
        sch.bind(loop, tag)
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, k0)
        _, ty, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 16, 16])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    func = sch.mod["main"]
    assert structural_equal(func.body, load((GOLDENS / "matmul_scheduled.tvms").read_text()).body,
                            map_free_vars=True)
    start = time.perf_counter()
    run_against_numpy(func, lambda a, b: a @ b)
    assert time.perf_counter() - start < 4


def test_merged_dynamic_shared_memory() -> None:
    """MergeSharedMemoryAllocations: one uint8 array of dynamic shared memory, which the float32
    tiles view (element i of a view is bytes 4i to 4i + 3)."""
    text = (GOLDENS / "matmul_dyn_merged.tvms").read_text()
    assert 'T.alloc_buffer((2048,), "uint8", scope="shared.dyn")' in text
    run_against_numpy(load(text), lambda a, b: a @ b)


# one allocation of dynamic shared memory with two typed views, as MergeSharedMemoryAllocations
# leaves it: F's element 1 is bytes 4 to 7; H (float16) is bytes 8 to 15 from its element 4
VIEWS = """# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    with T.launch_thread("threadIdx.x", 4) as tx:
        buf_dyn_shmem = T.alloc_buffer({alloc}, scope="shared.dyn")
        H = T.decl_buffer((4,), "float16", data=buf_dyn_shmem.data, scope="shared.dyn")
        F = buf_dyn_shmem.view("float32")
        F[tx] = A[tx]
        T.tvm_storage_sync("shared.dyn")
        B[tx] = F[3 - tx]
        {second}
"""


def test_typed_views_of_one_allocation_race_as_one_buffer() -> None:
    """Merged shared memory: accesses through different typed views of the same bytes race with
    each other, and accesses of different bytes do not; also where the allocation's elements
    are larger than a view's (float32 memory that float16 H views)."""
    def run(second: str, alloc: str = '(16,), "uint8"') -> np.ndarray:
        a, b = np.arange(1, 5, dtype=np.float32), np.zeros(4, np.float32)
        run_prim_func(load(VIEWS.format(second=second, alloc=alloc)), a, b)
        return b

    np.testing.assert_array_equal(run("T.evaluate(0)"), [4, 3, 2, 1])
    # thread 1 writes bytes 4 to 5 through H (its element 2); thread 2, after it, reads them through F
    with pytest.raises(TVMSError, match=r"data race on the shared buffer 'buf_dyn_shmem' in 'main' at "
                                        r"`B\[tx\] = F\[3 - tx\]` \(<string>:11:9\): thread \(threadIdx.x=2\) reads "
                                        r"element 1 \(float32, bytes 4 to 7\), which thread \(threadIdx.x=1\) wrote"):
        run('H[tx * 2] = T.float16(7)')
    for alloc in ('(16,), "uint8"', "(4,)"):
        with pytest.raises(TVMSError, match=r"thread \(threadIdx.x=2\) reads element 1 \(float32, bytes 4 to 7\)"):
            run("H[tx * 2] = T.float16(7)", alloc)
        # bytes no other thread touched since the barrier: no race (thread 3 read bytes 0 to 3)
        run("if tx == 3:\n            H[1] = T.float16(7)", alloc)


SYNC = '                    T.tvm_storage_sync("shared")\n'


def test_lowered_tiled_matmul_and_its_missing_barriers() -> None:
    """TVM's lowering of the same matmul: right with its two barriers. Without the one at the top
    of the k_0 loop, a thread reads a tile element another thread has already replaced; without
    the one before the k_1 loop, a thread replaces an element another thread read too early.
    Without both, it is what TVM's pipeline has before ThreadSync."""
    text = (GOLDENS / "matmul_before.tvms").read_text()
    assert text.count(SYNC) == 2
    run_against_numpy(load(text), lambda a, b: a @ b)
    first = text.index(SYNC)
    second = text.index(SYNC, first + 1)
    race = (r"data race on the shared buffer 'A_shared' in 'main' at `{}` \(<string>:\d+:\d+\): "
            r"thread \(threadIdx.x=1, threadIdx.y=0\) of block \(blockIdx.y=0, blockIdx.x=0\) {} element {}, "
            r"which thread \(threadIdx.x=0, threadIdx.y=0\)")
    compute = r"C_1\[cse_v7\] = C_1\[cse_v7\] \+ A_shared\[cse_v3 \+ k_1\] \*.*"
    fetch = r"A_shared\[cse_v6\] = A_1\[cse_v5 \+ cse_v2 \+ threadIdx_x\]"
    for at, stmt, what, element in ((first, compute, "reads", 0), (second, fetch, "overwrites", 1)):
        func = load(text[:at] + text[at + len(SYNC):])
        with pytest.raises(TVMSError, match=race.format(stmt, what, element)):
            run_against_numpy(func, lambda a, b: a @ b)
    # without both, it is the code before ThreadSync: the executor places ThreadSync's barriers
    run_against_numpy(load(text.replace(SYNC, "")), lambda a, b: a @ b)


def test_conflicting_writes_are_a_race() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32"), B: T.Buffer((1,), "float32")):
    S = T.alloc_shared((1,))
    tx = T.launch_thread("threadIdx.x", 32)
    S[0] = A[tx]
    T.tvm_storage_sync("shared")
    B[0] = S[0]
""")
    with pytest.raises(TVMSError, match=r"'S' .* at `S\[0\] = A\[tx\]` \(<string>:6:5\): thread "
                                        r"\(threadIdx.x=1\) writes element 0, which thread \(threadIdx.x=0\) accessed"):
        run_prim_func(func, np.arange(32, dtype="float32"), np.zeros(1, "float32"))
    same = np.ones(32, "float32")  # every thread writing the same value is no race
    out = np.zeros(1, "float32")
    run_prim_func(func, same, out)
    assert out[0] == 1


def test_divergent_barrier_is_refused() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((64,), "float32")):
    bx = T.launch_thread("blockIdx.x", 2)
    tx = T.launch_thread("threadIdx.x", 32)
    if tx < 16:
        T.tvm_storage_sync("shared")
    A[bx * 32 + tx] = T.float32(1)
""")
    with pytest.raises(TVMSError, match=r"divergent barrier in 'f': thread \(threadIdx.x=0\) of block "
                                        r"\(blockIdx.x=0\) waits at `T.tvm_storage_sync\(\"shared\"\)` "
                                        r"\(<string>:7:9\), which 16 threads of its block \(e.g. thread "
                                        r"\(threadIdx.x=16\)\) never reach"):
        run_prim_func(func, np.zeros(64, "float32"))


def test_warp_shuffles_in_lockstep() -> None:
    """Two warps of 32 lanes; shuffles within segments of 16 lanes; activemask where half the
    lanes branched away."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((64,), "float32"), O: T.Buffer((4, 64), "float32"), M: T.Buffer((64,), "uint32")):
    tx = T.launch_thread("threadIdx.x", 64)
    mask = T.tvm_warp_activemask()
    O[0, tx] = T.tvm_warp_shuffle_up(mask, A[tx], 1, 16, 32)
    O[1, tx] = T.tvm_warp_shuffle_down(mask, A[tx], 3, 16, 32)
    O[2, tx] = T.tvm_warp_shuffle(mask, A[tx], 5, 16, 32)
    O[3, tx] = T.tvm_warp_shuffle(mask, A[tx], tx + 1, 32, 32)
    M[tx] = T.uint32(0)
    if tx % 2 == 0:
        M[tx] = T.tvm_warp_activemask()
""")
    a = RNG.standard_normal(64).astype("float32")
    out = np.zeros((4, 64), "float32")
    masks = np.zeros(64, "uint32")
    run_prim_func(func, a, out, masks)
    lane = np.arange(64) % 16
    base = np.arange(64) - lane
    np.testing.assert_array_equal(out[0], a[np.where(lane >= 1, np.arange(64) - 1, np.arange(64))])
    np.testing.assert_array_equal(out[1], a[np.where(lane + 3 < 16, np.arange(64) + 3, np.arange(64))])
    np.testing.assert_array_equal(out[2], a[base + 5])
    np.testing.assert_array_equal(out[3], a[np.arange(64) // 32 * 32 + (np.arange(64) + 1) % 32])
    np.testing.assert_array_equal(masks, np.where(np.arange(64) % 2 == 0, 0x55555555, 0))


def test_shuffle_mask_honoured_and_missing_lanes_undefined() -> None:
    """The lanes of each half-warp shuffle among themselves with their own mask; a lane reading
    from a lane that is not there gets an undefined value (NaN)."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((24,), "float32"), O: T.Buffer((24,), "float32")):
    tx = T.launch_thread("threadIdx.x", 24)
    if tx < 16:
        O[tx] = T.tvm_warp_shuffle_down(T.uint32(65535), A[tx], 8, 32, 32)
    else:
        O[tx] = T.tvm_warp_shuffle_down(T.uint32(16711680), A[tx], 4, 32, 32)
""")
    a = np.arange(24, dtype="float32")
    out = np.zeros(24, "float32")
    run_prim_func(func, a, out)
    np.testing.assert_array_equal(out[:8], a[8:16])
    assert np.isnan(out[8:16]).all()  # (lanes 16-23 are at the other shuffle)
    np.testing.assert_array_equal(out[16:20], a[20:24])
    assert np.isnan(out[20:]).all()


def test_cuda_warp_intrinsics_after_lower_intrin() -> None:
    """CUDA's spellings that LowerIntrin leaves (``T.cuda.__shfl*_sync(mask, v, arg, width)``,
    ``T.cuda.__activemask()``) run in lock-step as TVM's builtins do; a xor shuffle reads lane
    ``lane ^ m``, its own value where that falls past its segment."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((64,), "float32"), O: T.Buffer((5, 64), "float32"), M: T.Buffer((64,), "uint32")):
    tx = T.launch_thread("threadIdx.x", 64)
    mask = T.cuda.__activemask()
    O[0, tx] = T.cuda.__shfl_up_sync(mask, A[tx], 1, 16)
    O[1, tx] = T.cuda.__shfl_down_sync(mask, A[tx], 3, 16)
    O[2, tx] = T.cuda.__shfl_sync(mask, A[tx], 5, 16)
    O[3, tx] = T.cuda.__shfl_xor_sync(mask, A[tx], 5, 32)
    O[4, tx] = T.cuda.__shfl_xor_sync(mask, A[tx], 8, 8)
    M[tx] = T.uint32(0)
    if tx < 40:
        M[tx] = T.cuda.__activemask()
""")
    a = RNG.standard_normal(64).astype("float32")
    out = np.zeros((5, 64), "float32")
    masks = np.zeros(64, "uint32")
    run_prim_func(func, a, out, masks)
    me = np.arange(64)
    lane = me % 16
    np.testing.assert_array_equal(out[0], a[np.where(lane >= 1, me - 1, me)])
    np.testing.assert_array_equal(out[1], a[np.where(lane + 3 < 16, me + 3, me)])
    np.testing.assert_array_equal(out[2], a[me - lane + 5])
    np.testing.assert_array_equal(out[3], a[me ^ 5])
    # (lane ^ 8 is in the next segment of 8 for lanes 0-7, and in the one before for lanes 8-15)
    np.testing.assert_array_equal(out[4], a[np.where(me % 16 >= 8, me ^ 8, me)])
    np.testing.assert_array_equal(masks, np.where(me < 32, 0xFFFFFFFF, np.where(me < 40, 0xFF, 0)))


def test_undefined_shuffles_are_refused_or_marked() -> None:
    """A lane that shuffles with a mask that leaves it out is refused (CUDA: undefined). A read
    from a lane that is not in the mask is undefined too, but TVM's reductions over fewer lanes
    than a warp make it (an argmax's index over 16 threads) and drop the value: a float reads
    NaN, so that a use shows, and an integer its own value."""
    outside = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32"), O: T.Buffer((32,), "float32")):
    tx = T.launch_thread("threadIdx.x", 32)
    O[tx] = T.cuda.__shfl_sync(T.uint32(65535), A[tx], 0, 32)
""")
    with pytest.raises(TVMSError, match=r"lane 16 at the warp shuffle `O\[tx\] = T.cuda.__shfl_sync\(T.uint32\(65535\), "
                                        r"A\[tx\], 0, 32\)` \(<string>:5:5\) \(mask 0xffff\): its mask leaves it out"):
        run_prim_func(outside, np.zeros(32, "float32"), np.zeros(32, "float32"))
    missing = load("""
@T.prim_func
def f(A: T.Buffer((16,), "int32"), O: T.Buffer((16,), "int32")):
    tx = T.launch_thread("threadIdx.x", 16)
    O[tx] = T.cuda.__shfl_down_sync(T.cuda.__activemask(), A[tx], 8, 32)
""")
    index, out = np.arange(16, dtype="int32"), np.zeros(16, "int32")
    run_prim_func(missing, index, out)
    np.testing.assert_array_equal(out, np.concatenate([index[8:], index[8:]]))
    for width in (0, 3, 64):
        wrong = load(missing.script().replace("8, 32)", f"8, {width})"))
        with pytest.raises(TVMSError, match=rf"\(mask 0xffff\): a width of {width} lanes; CUDA's is a power of two "
                                            r"from 1 to 32"):
            run_prim_func(wrong, index, out)
    floats = load(missing.script().replace('"int32"', '"float32"'))
    a, out = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    run_prim_func(floats, a, out)
    np.testing.assert_array_equal(out[:8], a[8:])
    assert np.isnan(out[8:]).all()
    bf16 = load(missing.script().replace('"int32"', '"bfloat16"'))  # (ml_dtypes: numpy kind "V", not "f")
    a16 = a.astype(numpy_dtype("bfloat16"))
    out16 = np.zeros(16, a16.dtype)
    run_prim_func(bf16, a16, out16)
    np.testing.assert_array_equal(out16[:8].astype("float32"), a[8:])
    assert np.isnan(out16[8:].astype("float32")).all()


def test_cuda_math_functions_in_kernels() -> None:
    """``T.call_pure_extern`` of CUDA's math functions, as LowerIntrin writes the intrinsics
    (float32's ``expf``, fast math's ``__expf``, ``rsqrtf``, float16's ``hexp``, float64's
    ``exp``, ``__clz``, ``__popc``); any other extern function is refused by name."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32"), H: T.Buffer((32,), "float16"), D: T.Buffer((32,), "float64"),
      N: T.Buffer((32,), "int32"), U: T.Buffer((32,), "uint32"), O: T.Buffer((4, 32), "float32"),
      OH: T.Buffer((32,), "float16"), OD: T.Buffer((32,), "float64"), ON: T.Buffer((2, 32), "int32")):
    tx = T.launch_thread("threadIdx.x", 32)
    O[0, tx] = T.call_pure_extern("float32", "expf", A[tx])
    O[1, tx] = T.call_pure_extern("float32", "__expf", A[tx])
    O[2, tx] = T.call_pure_extern("float32", "rsqrtf", A[tx])
    O[3, tx] = T.call_pure_extern("float32", "powf", A[tx], T.float32(2.5))
    OH[tx] = T.call_pure_extern("float16", "hexp", H[tx])
    OD[tx] = T.call_pure_extern("float64", "exp", D[tx])
    ON[0, tx] = T.call_pure_extern("int32", "__clz", N[tx])
    ON[1, tx] = T.Cast("int32", T.call_pure_extern("uint32", "__popc", U[tx]))
""")
    a = RNG.uniform(0.5, 2, 32).astype("float32")
    n = RNG.integers(1, 1 << 30, 32).astype("int32")
    u = RNG.integers(0, 1 << 32, 32, dtype=np.uint64).astype("uint32")
    o, oh, od, on = np.zeros((4, 32), "float32"), np.zeros(32, "float16"), np.zeros(32), np.zeros((2, 32), "int32")
    run_prim_func(func, a, a.astype("float16"), a.astype("float64"), n, u, o, oh, od, on)
    np.testing.assert_allclose(o[0], np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(o[1], np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(o[2], 1 / np.sqrt(a), rtol=1e-6)
    np.testing.assert_allclose(o[3], a ** 2.5, rtol=1e-6)
    np.testing.assert_allclose(oh, np.exp(a.astype("float16")), rtol=1e-3)
    np.testing.assert_allclose(od, np.exp(a.astype("float64")), rtol=1e-12)
    np.testing.assert_array_equal(on[0], [32 - int(x).bit_length() for x in n])
    np.testing.assert_array_equal(on[1], [bin(int(x)).count("1") for x in u])
    unknown = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32")):
    tx = T.launch_thread("threadIdx.x", 32)
    A[tx] = T.call_pure_extern("float32", "my_expf", A[tx])
""")
    with pytest.raises(TVMSError, match="does not implement the extern function 'my_expf'"):
        run_prim_func(unknown, a.copy())


def test_vthreads_and_thread_extents() -> None:
    """A virtual thread is a loop in its thread (InjectVirtualThread interleaves them): local
    memory is the thread's, written by its virtual threads, read after them; shared memory
    written under one vthread loop and read under the next is separated by a barrier.
    Every loop bound to one thread axis has one extent."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((2, 64), "float32"), B: T.Buffer((2, 64), "float32"), C: T.Buffer((2, 32), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    L = T.alloc_buffer((2,), scope="local")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for v in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                S[v * 32 + tx] = A[bx, v * 32 + tx]
                L[v] = A[bx, v * 32 + tx] * T.float32(2)
        for v in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                B[bx, v * 32 + tx] = S[63 - v * 32 - tx]
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            C[bx, tx] = L[0] + L[1]
""")
    a = RNG.standard_normal((2, 64)).astype("float32")
    b = np.zeros((2, 64), "float32")
    c = np.zeros((2, 32), "float32")
    run_prim_func(func, a, b, c)
    np.testing.assert_array_equal(b, a[:, ::-1])
    np.testing.assert_allclose(c, 2 * (a[:, :32] + a[:, 32:]), rtol=1e-6)
    bad = load("""
@T.prim_func
def f(A: T.Buffer((64,), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        A[tx] = T.float32(1)
        for tx2 in T.thread_binding(64, thread="threadIdx.x"):
            A[tx2] = T.float32(2)
""")
    with pytest.raises(TVMSError, match="all loops bound to 'threadIdx.x' must have the same extent"):
        run_prim_func(bad, np.zeros(64, "float32"))


def test_a_vthread_loop_inside_one_of_the_same_tag_is_the_same_virtual_thread() -> None:
    """Two nested loops bound to ``vthread.x`` (a TVM schedule test prints them) are one virtual
    thread, as TVM's UnifyThreadBinding makes them and its CUDA code runs them: the pairs where
    they agree, the diagonal blocks here, not every pair. The executor ran both as loops, so it
    disagreed with the lowered kernel; another extent inside is refused."""
    from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
    from tvms.target import Target

    text = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i_0 in T.thread_binding(2, thread="vthread.x"):
        for i_1 in T.thread_binding(4, thread="threadIdx.x"):
            for j_0 in T.thread_binding(2, thread="vthread.x"):
                for j_1 in range(4):
                    with T.block("b"):
                        vi = T.axis.spatial(8, i_0 * 4 + i_1)
                        vj = T.axis.spatial(8, j_0 * 4 + j_1)
                        B[vi, vj] = A[vi, vj] * T.float32(2)
"""
    func = load(text)
    a = RNG.standard_normal((8, 8)).astype("float32")
    b, lowered = np.zeros((8, 8), "float32"), np.zeros((8, 8), "float32")
    run_prim_func(func, a, b)
    run_prim_func(lower_for_cuda(func, Target("cuda -arch=sm_80")), a, lowered)
    diagonal = np.kron(np.eye(2), np.ones((4, 4))).astype(bool)
    np.testing.assert_array_equal(b, np.where(diagonal, 2 * a, 0))
    np.testing.assert_array_equal(lowered, b)
    with pytest.raises(TVMSError, match=r"all loops bound to 'vthread.x' must have the same range \(got \[0, \+2\) for "
                                        r"'i_0' and \[0, \+4\) for 'j_0'"):
        run_prim_func(load(text.replace("T.thread_binding(2, thread=\"vthread.x\"):\n                for j_1 in range(4)",
                                        "T.thread_binding(4, thread=\"vthread.x\"):\n                for j_1 in range(2)")), a, b)
    # a start of 1 (the inner loop's variable is the outer's, start included) and a symbolic extent
    shifted = load(text.replace("T.thread_binding(2, thread=", "T.thread_binding(1, 3, thread=")
                   .replace("i_0 * 4", "(i_0 - 1) * 4").replace("j_0 * 4", "(j_0 - 1) * 4"))
    b = np.zeros((8, 8), "float32")
    run_prim_func(shifted, a, b)
    np.testing.assert_array_equal(b, np.where(diagonal, 2 * a, 0))
    symbolic = load(text.replace("def main(A: T.Buffer((8, 8), \"float32\"), B: T.Buffer((8, 8), \"float32\")):",
                                 "def main(A: T.Buffer((8, 8), \"float32\"), B: T.Buffer((8, 8), \"float32\"), n: T.int32):")
                    .replace("T.thread_binding(2, thread=", "T.thread_binding(n, thread="))
    b = np.zeros((8, 8), "float32")
    run_prim_func(symbolic, a, b, 2)
    np.testing.assert_array_equal(b, np.where(diagonal, 2 * a, 0))

def test_warp_memory_is_per_row_of_threadidx_x() -> None:
    """``warp`` scope (before LowerWarpMemory): the 16 threads of a row along threadIdx.x share
    one array; two rows in one hardware warp do not."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((2, 16), "float32"), B: T.Buffer((2, 16), "float32")):
    ty = T.launch_thread("threadIdx.y", 2)
    tx = T.launch_thread("threadIdx.x", 16)
    W = T.alloc_buffer((16,), scope="warp")
    W[tx] = A[ty, tx]
    T.tvm_storage_sync("warp")
    B[ty, tx] = W[15 - tx]
""")
    a = RNG.standard_normal((2, 16)).astype("float32")
    b = np.zeros((2, 16), "float32")
    run_prim_func(func, a, b)
    np.testing.assert_array_equal(b, a[:, ::-1])


@pytest.mark.parametrize("body, message", [
    ('bx = T.launch_thread("blockIdx.x", 1)\n    T.tvm_storage_sync("global")',
     "cannot synchronise 'global' memory across blocks"),
    ("A[0] = T.tvm_warp_shuffle(T.uint32(1), A[0], 0, 32, 32)", "tvm_warp_shuffle outside a GPU kernel"),
    ("T.tvm_thread_allreduce(T.uint32(1), A[0], T.bool(True), A[1], A[2])", "outside a GPU kernel"),
])
def test_gpu_intrinsics_where_they_cannot_run(body: str, message: str) -> None:
    func = load(f"""
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    {body}
""")
    with pytest.raises(TVMSError, match=message):
        run_prim_func(func, np.zeros(4, "float32"))


def test_cross_thread_reduction_into_local_memory_is_refused() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32"), B: T.Buffer((1,), "float32")):
    L = T.alloc_buffer((1,), scope="local")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("sum"):
            vk = T.axis.reduce(32, tx)
            with T.init():
                L[0] = T.float32(0)
            L[0] = L[0] + A[vk]
    B[0] = L[0]
""")
    with pytest.raises(TVMSError, match="cross-thread reduction of block 'sum' into the local buffer 'L'"):
        run_prim_func(func, np.ones(32, "float32"), np.zeros(1, "float32"))



def test_a_write_races_with_every_reader_since_the_barrier_not_only_the_last() -> None:
    """Thread 1 reads S[0] after thread 0 did, then writes it: thread 0's read still races with it."""
    func = load("""
@T.prim_func
def f(A: T.Buffer((2,), "float32")):
    S = T.alloc_shared((1,))
    tx = T.launch_thread("threadIdx.x", 2)
    if tx == 0:
        S[0] = T.float32(1)
    T.tvm_storage_sync("shared")
    A[tx] = S[0]
    if tx == 1:
        S[0] = T.float32(2)
""")
    with pytest.raises(TVMSError, match=r"thread \(threadIdx.x=1\) overwrites element 0, which thread "
                                        r"\(threadIdx.x=0\) accessed since the last barrier"):
        run_prim_func(func, np.zeros(2, "float32"))

def test_race_in_a_condition_names_its_statement() -> None:
    func = load("""
@T.prim_func
def f(A: T.Buffer((32,), "float32")):
    S = T.alloc_shared((32,))
    tx = T.launch_thread("threadIdx.x", 32)
    S[tx] = A[tx]
    if S[0] > T.float32(0):
        A[tx] = T.float32(1)
    T.tvm_storage_sync("shared")
""")
    with pytest.raises(TVMSError, match=r"at `if S\[0\] > T.float32\(0.0\):` \(<string>:7:\d+\): thread "
                                        r"\(threadIdx.x=1\) reads element 0, which thread \(threadIdx.x=0\) wrote"):
        run_prim_func(func, np.ones(32, "float32"))


def test_warp_size_comes_from_the_target() -> None:
    func = load("""
@T.prim_func
def f(M: T.Buffer((32,), "uint32")):
    T.func_attr({"target": T.target({"kind": "rocm", "thread_warp_size": 16, "keys": ["rocm", "gpu"]})})
    tx = T.launch_thread("threadIdx.x", 32)
    M[tx] = T.tvm_warp_activemask()
""")
    masks = np.zeros(32, "uint32")
    run_prim_func(func, masks)
    np.testing.assert_array_equal(masks, np.full(32, 0xFFFF))


@pytest.mark.parametrize("branches", [
    ('T.tvm_storage_sync("shared")', 'T.tvm_storage_sync("shared")'),
    ("A[tx] = T.tvm_warp_shuffle(T.uint32(4294967295), A[tx], 0, 32, 32)", 'T.tvm_storage_sync("shared")'),
])
def test_threads_waiting_at_different_points_never_meet(branches: tuple) -> None:
    """A barrier in each branch of an if, or a full-warp shuffle some lanes branched away from."""
    func = load(f"""
@T.prim_func
def f(A: T.Buffer((32,), "float32")):
    tx = T.launch_thread("threadIdx.x", 32)
    if tx < 8:
        {branches[0]}
    else:
        {branches[1]}
""")
    with pytest.raises(TVMSError, match=r"threads of 'f' wait for each other at different points and never meet "
                                        r"\(8 at `.*` \(<string>:6:9\); 24 at `T.tvm_storage_sync\(\"shared\"\)` "
                                        r"\(<string>:8:9\)\)"):
        run_prim_func(func, np.zeros(32, "float32"))


MATCHED_SHARED = """
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        with T.sblock(""):
            S = T.sblock_alloc_buffer((64,), scope="shared")
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.sblock("store"):
                    T.reads(A[tx])
                    T.writes(S[tx])
                    view = T.match_buffer(S[tx], (1,), scope="shared")
                    view[0] = A[tx] * T.float32(2.0)
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.sblock("load"):
                    T.reads(S[63 - tx])
                    T.writes(B[tx])
                    {sync}B[tx] = S[63 - tx]
"""


def test_a_match_buffer_of_shared_memory_is_shared_memory() -> None:
    """Its stores go to the block's shared memory (they were a TypeError: a plain array store into
    the Shared memory), which the other threads read after the barrier."""
    func = from_source(MATCHED_SHARED.format(sync='T.tvm_storage_sync("shared")\n                    '))
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    run_prim_func(func, a, b)
    assert b.tolist() == (a[::-1] * 2).tolist()
