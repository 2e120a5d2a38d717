"""The CUDA runtime without a GPU: what is missing is said plainly (cuda-python, the NVIDIA
driver, a device, the device index); the host function of a SplitHostDevice module (as TVM 0.27
prints it) is evaluated and its launches run on the reference executor against numpy; the cuda
target and its row. The tests at the end need a GPU and skip without one."""
from __future__ import annotations

import collections
import dataclasses
import gc
import importlib.util
import itertools
import threading

import numpy as np
import pytest

import tvms
from conftest import CORPUS_COPY
from cuda_emulated import FIXTURES, Counting, EmulatedDriver, FakeDriver, fixture_artifact
from tvms import TVMSError
from tvms.ir.registry import get_global_func
from tvms.lowering.codegen.cuda_artifact import CudaArtifact, CudaKernel
from tvms.lowering.targets import check_target, target_kind
from tvms.runtime import cuda_driver
from tvms.runtime.cuda_module import CudaModule, DriverLauncher, ReferenceLauncher
from tvms.runtime.cuda_pool import BlockPool
from tvms.runtime.dlpack import read_capsule, to_capsule
from tvms.script import from_source
from tvms.target import Target

VM_STORAGE = FIXTURES.parent / "runtime" / "vm_storage.tvms"  # (two tensors in one R.vm.alloc_storage)
HAS_GPU = cuda_driver.cuda_device_count() > 0
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU: " + cuda_driver.missing_reason(0))



def reference_lib(name: str) -> CudaModule:
    return CudaModule({"main": fixture_artifact(name)}, "cuda").with_launcher(ReferenceLauncher())


# --------------------------------------------------------------------------- what is missing


_UNCACHED_INIT = cuda_driver._initialized.__wrapped__
_UNCACHED_CONTEXT = cuda_driver.primary_context.__wrapped__


@pytest.fixture
def driver_as(monkeypatch):
    """Make the driver look like ``module`` (None: cuda-python missing) for one test."""
    def use(module):
        monkeypatch.setattr(cuda_driver, "_driver_module", lambda: module)
        monkeypatch.setattr(cuda_driver, "_initialized", _UNCACHED_INIT)
    return use


@pytest.mark.parametrize("module, reason", [
    (None, "cuda-python is not installed"),
    (FakeDriver(0, init_error=100), "the CUDA driver does not start: cuInit gives CUDA_ERROR_NO_DEVICE"),
    (FakeDriver(0), "the CUDA driver reports no GPU"),
])
def test_what_is_missing_is_named(driver_as, module, reason) -> None:
    driver_as(module)
    assert not tvms.cuda(0).exist and tvms.cpu(0).exist
    for attempt, message in [
        (lambda: tvms.cuda(0).sync(), "cannot synchronize cuda:0: "),
        (lambda: tvms.cuda(0).max_threads_per_block, "cannot read max_threads_per_block of cuda:0: "),
        (lambda: tvms.nd.array(np.zeros(3, "float32"), device=tvms.cuda(0)), "cannot place a tensor on cuda:0: "),
        (lambda: tvms.nd.empty((3,), "float32", tvms.cuda(0)), "cannot place a tensor on cuda:0: "),
        (lambda: Target.from_device(tvms.cuda(0)), "Target.from_device: cannot detect the device cuda:0: "),
        (lambda: reference_lib("add_dyn_SplitHostDevice.tvms").with_launcher(None)["main"](),
         "cannot run a CUDA function on cuda:0: "),
    ]:
        with pytest.raises(TVMSError, match=message + reason):
            attempt()
    assert tvms.cpu(0).max_threads_per_block is None  # (TVM's CPU device answers None)


def test_this_machine_says_why_it_has_no_gpu() -> None:
    if HAS_GPU:
        pytest.skip("this machine has a GPU")
    assert not tvms.cuda(0).exist
    assert cuda_driver.missing_reason(0)  # (the real reason: no libcuda.so here)
    with pytest.raises(TVMSError, match="CUDA is not available: " + cuda_driver.missing_reason(0)[:20]):
        cuda_driver.call("cuDeviceGet", 0)


def test_a_device_index_out_of_range(driver_as) -> None:
    driver_as(FakeDriver(2))
    assert tvms.cuda(0).exist and tvms.cuda(1).exist and not tvms.cuda(2).exist
    with pytest.raises(TVMSError, match="cuda:2: device index 2 is out of range: the CUDA driver reports 2 GPUs"):
        tvms.nd.empty((3,), "float32", tvms.cuda(2))
    with pytest.raises(TVMSError, match="cannot use cuda:5: device index 5 is out of range"):
        cuda_driver.primary_context(5)


# --------------------------------------------------------------------------- the host function


def test_the_host_function_launches_with_symbolic_sizes() -> None:
    """TVM 0.27's SplitHostDevice of a split-and-bound ``C = 2 A + B`` over ``n``: the grid is
    ceil(n / 128) blocks, which the reference launcher checks against the kernel's own extents."""
    lib = reference_lib("add_dyn_SplitHostDevice.tvms")
    rng = np.random.default_rng(0)
    for n in (1, 128, 300):
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        c = tvms.nd.empty((n,), "float32")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c.numpy(), 2 * a + b, rtol=1e-6)
    with pytest.raises(TVMSError, match=r"argument 1 \(B\): dimension 0: expected 4, got 5"):
        lib["main"](np.zeros(4, "float32"), np.zeros(5, "float32"), np.zeros(4, "float32"))
    with pytest.raises(TVMSError, match=r"argument 0 \(A\): expected dtype float32, got float64"):
        lib["main"](np.zeros(4), np.zeros(4, "float32"), np.zeros(4, "float32"))
    with pytest.raises(TVMSError, match=r"main takes 3 arguments \(A, B, C\), got 2"):
        lib["main"](np.zeros(4, "float32"), np.zeros(4, "float32"))
    with pytest.raises(TVMSError, match="launch extent of blockIdx.x is 0"):
        lib["main"](*(np.zeros(0, "float32"),) * 3)


def test_lets_asserts_workspaces_scalars_and_two_kernels() -> None:
    """Two kernels through a host workspace: a 2-D grid, a scalar argument, a let, an assert and
    a dynamic-shared-memory extent; Y = alpha * X summed by rows."""
    lib = reference_lib("scale_rowsum_SplitHostDevice.tvms")
    x = np.random.default_rng(1).random((5, 70), dtype=np.float32)
    y = np.zeros(5, "float32")
    lib["main"](x, y, 0.5)
    np.testing.assert_allclose(y, 0.5 * x.sum(axis=1), rtol=1e-5)
    with pytest.raises(TVMSError, match="main: a row per thread: at most 1024 rows"):
        lib["main"](np.zeros((1025, 1), "float32"), np.zeros(1025, "float32"), 1.0)
    with pytest.raises(TVMSError, match=r"argument 2 \(alpha\): expected a float32 scalar, got str"):
        lib["main"](x, y, "half")


STATIC_HOST = """# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((300,), "float32"), B: T.Buffer((300,), "float32"), C: T.Buffer((300,), "float32"), flag: T.int32):
    if flag == 1:
        T.call_ffi_kernel("no_such_kernel", A.data, 1, launch_params=["blockIdx.x"], ret_ty="int32")
    T.call_ffi_kernel("add_kernel", A.data, B.data, C.data, 300, 3, 128, launch_params=["blockIdx.x", "threadIdx.x"], ret_ty="int32")
"""


def test_a_host_function_of_constant_shapes_checks_its_arguments_as_any() -> None:
    """The host function is compiled once (its arguments of constant shapes checked at a glance);
    what it cannot do is an error only when a call reaches it, and a wrong argument says what
    differs as for symbolic shapes."""
    art = fixture_artifact("add_dyn_SplitHostDevice.tvms")
    lib = CudaModule({"main": dataclasses.replace(art, host=from_source(STATIC_HOST))}, "cuda")
    main = lib.with_launcher(ReferenceLauncher())["main"]
    a, b, c = np.arange(300, dtype="float32"), np.ones(300, "float32"), np.zeros(300, "float32")
    for _ in range(2):
        main(a, b, c, 0)
        np.testing.assert_array_equal(c, 2 * a + b)
    for args, message in [
        ((a, b, c, 1), r"main: the host function launches 'no_such_kernel', which is not among the kernels \(add_kernel\)"),
        ((a, b[:5], c, 0), r"main argument 1 \(B\): dimension 0: expected 300, got 5"),
        ((a, b.astype("float64"), c, 0), r"main argument 1 \(B\): expected dtype float32, got float64"),
        ((a, b.reshape(3, 100), c, 0), r"main argument 1 \(B\): expected 1 dimensions, got shape \(3, 100\)"),
        ((a, b, c), r"main takes 4 arguments \(A, B, C, flag\), got 3"),
    ]:
        with pytest.raises(TVMSError, match=message):
            main(*args)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tvms.runtime.reference_gpu") is None,
                    reason="the reference executor runs a block's threads one after another until its "
                           "GPU semantics are merged, and this kernel synchronizes them")
def test_the_corpus_split_host_device_module_computes_relu_of_a_matmul() -> None:
    """The corpus's SplitHostDevice stage of a 128x128 matmul + relu (shared memory, barriers):
    the host's launch of 64 blocks of 256 threads, run on the reference executor."""
    mod = from_source((CORPUS_COPY / "lower_matmul_relu_gpu_12_SplitHostDevice.tvms").read_text())
    kernel = CudaKernel("main_kernel", mod["main_kernel"], ("blockIdx.x", "threadIdx.x"))
    lib = CudaModule({"main": CudaArtifact("main", mod["main"], (kernel,), "", "sm_50", b"", "cubin")}, "cuda")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 128), dtype=np.float32)
    d = np.zeros((128, 128), np.float32)
    lib.with_launcher(ReferenceLauncher())["main"](a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_the_reference_launcher_checks_the_host_extents_against_the_kernel() -> None:
    text = (FIXTURES / "add_dyn_SplitHostDevice.tvms").read_text()
    mod = from_source(text.replace("(n + 127) // 128, 128, launch_params", "(n + 127) // 128, 64, launch_params"))
    art = fixture_artifact("add_dyn_SplitHostDevice.tvms")
    lib = CudaModule({"main": CudaArtifact("main", mod["main"], art.kernels, "", "sm_80", b"", "cubin")}, "cuda")
    with pytest.raises(TVMSError, match="the host launches threadIdx.x with extent 64, the kernel runs 128"):
        lib.with_launcher(ReferenceLauncher())["main"](*(np.zeros(4, "float32"),) * 3)


def test_the_module_shows_its_source_and_times_calls() -> None:
    art = fixture_artifact("add_dyn_SplitHostDevice.tvms", source="extern \"C\" __global__ void add_kernel() {}")
    lib = CudaModule({"main": art}, "cuda -arch=sm_80").with_launcher(ReferenceLauncher())
    assert lib.imported_modules[0].get_source() == lib.get_source() == art.source
    with pytest.raises(TVMSError, match="the module holds cubins"):
        lib.imported_modules[0].get_source("ptx")
    timing = lib.time_evaluator("main", tvms.cuda(0), number=2, repeat=3)(*(np.ones(8, "float32"),) * 3)
    assert len(timing.results) == 3 and timing.mean > 0


# --------------------------------------------------------------------------- the driver path


@pytest.fixture
def emulated(driver_as, monkeypatch):
    """``use(fixture_name)``: (an emulated GPU made the driver, a CudaModule of the fixture);
    at the end of the test, no block was freed twice."""
    drivers = []

    def use(name, function="main", run_kernels=True):
        gc.collect()  # (device memory that earlier tests left is freed now, not in this driver's memory)
        art = fixture_artifact(name, binary=b"\x7fELF a cubin")
        driver = EmulatedDriver({k.name: k for k in art.kernels}, run_kernels)
        drivers.append(driver)
        driver_as(driver)
        monkeypatch.setattr(cuda_driver, "primary_context", _UNCACHED_CONTEXT)
        return driver, CudaModule({function: art}, "cuda")
    yield use
    gc.collect()
    assert [d.double_frees for d in drivers if d.double_frees] == []


def test_the_driver_path_allocates_copies_and_launches(emulated) -> None:
    driver, lib = emulated("add_dyn_SplitHostDevice.tvms")
    dev = tvms.cuda(0)
    a, b = np.arange(300, dtype="float32"), np.ones(300, "float32")
    A, B, C = (tvms.nd.array(v, device=dev) for v in (a, b, np.zeros(300, "float32")))
    assert (type(A).__name__, A.shape, A.dtype, str(A.device)) == ("CudaTensor", (300,), "float32", "cuda:0")
    assert A.__cuda_array_interface__ == {"shape": (300,), "typestr": "<f4", "data": (A.ptr, False),
                                          "strides": None, "version": 3, "stream": 1}
    lib["main"](A, B, C)
    assert driver.launches == [("add_kernel", (3, 1, 1), (128, 1, 1), 0)]
    np.testing.assert_array_equal(C.numpy(), 2 * a + b)
    np.testing.assert_array_equal(tvms.nd.empty((300,), "float32", dev).copyfrom(C).numpy(), 2 * a + b)
    np.testing.assert_array_equal(C.copyto(tvms.cpu()).numpy(), 2 * a + b)
    assert lib.time_evaluator("main", dev, number=4)(A, B, C).mean == pytest.approx(4e-3 / 4)
    with pytest.raises(TVMSError, match=r"argument 0 \(A\): the data is on cpu; a CUDA function takes tensors"):
        lib["main"](a, B, C)
    dev.set_raw_stream(dev.create_raw_stream())  # (later launches queue there)
    lib["main"](A, B, C)
    dev.sync()
    dev.set_raw_stream(None)
    assert driver.streams[0] == 0 and driver.streams[-1] == "stream"
    del A, B, C
    gc.collect()
    assert not driver.memory  # (freed with the tensors)


def test_the_driver_path_with_a_workspace_and_dynamic_shared_memory(emulated) -> None:
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms")
    x = np.random.default_rng(2).random((5, 70), dtype=np.float32)
    X, Y = tvms.nd.array(x, device=tvms.cuda(0)), tvms.nd.empty((5,), "float32", tvms.cuda(0))
    lib["main"](X, Y, 2.0)
    assert driver.launches == [("scale_kernel", (3, 5, 1), (32, 1, 1), 0),
                               ("rowsum_kernel", (1, 1, 1), (5, 1, 1), 20)]
    np.testing.assert_allclose(Y.numpy(), 2 * x.sum(axis=1), rtol=1e-5)
    assert len(driver.memory) == 3  # (the host's workspace, kept by the module for the next call)


SYNCHRONIZATIONS = ("cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize")


def driver_calls(counting: Counting, run) -> tuple:
    """(cuMemAlloc, cuMemFree, synchronizations) that ``run()`` makes."""
    counting.counts.clear()
    run()
    return (counting.counts["cuMemAlloc"], counting.counts["cuMemFree"],
            sum(counting.counts[name] for name in SYNCHRONIZATIONS))


def test_a_host_workspace_comes_from_the_modules_pool(emulated, driver_as, monkeypatch) -> None:
    """A host function's workspace is taken from the module's block pool and handed back once
    the call's kernels are queued, without waiting for them: a later call on the same stream
    (its kernels queued after) gets the same block, allocating, freeing and synchronizing
    nothing; after a stream change it gets a new block and the idle one is freed."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms")
    counting = Counting(driver)
    driver_as(counting)
    monkeypatch.setattr(cuda_driver, "_CURRENT_STREAMS", {})
    dev, x = tvms.cuda(0), np.random.default_rng(2).random((5, 70), dtype=np.float32)
    X, Y = tvms.nd.array(x, device=dev), tvms.nd.empty((5,), "float32", dev)

    def workspace():  # (the pointer the last call gave its kernels for the workspace)
        return driver.arguments[-1][0].ctypes.data

    assert driver_calls(counting, lambda: lib["main"](X, Y, 2.0)) == (1, 0, 0)
    first = workspace()
    for alpha in (3.0, 4.0):
        assert driver_calls(counting, lambda: lib["main"](X, Y, alpha)) == (0, 0, 0)
        assert workspace() == first
        np.testing.assert_allclose(Y.numpy(), alpha * x.sum(axis=1), rtol=1e-5)
    dev.set_raw_stream(dev.create_raw_stream())
    assert driver_calls(counting, lambda: lib["main"](X, Y, 5.0)) == (1, 1, 0)
    assert driver.streams[-1] == "stream" and workspace() != first
    np.testing.assert_allclose(Y.numpy(), 5 * x.sum(axis=1), rtol=1e-5)


def test_workspaces_of_many_sizes_stay_bounded(emulated) -> None:
    """A symbolic shape called with 60 sizes: the module keeps the workspaces of the last
    ``WORKSPACE_SIZES`` sizes, not one per size."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    dev = tvms.cuda(0)
    for n in range(1, 61):
        X, Y = tvms.nd.empty((2, n), "float32", dev), tvms.nd.empty((2,), "float32", dev)
        lib["main"](X, Y, 1.0)
    assert len(driver.memory) <= 2 + 1 + DriverLauncher.WORKSPACE_SIZES  # (X, Y and the last sizes' workspaces)


@pytest.mark.parametrize("sizes", [range(1, 9), range(8, 0, -1), range(1, DriverLauncher.WORKSPACE_SIZES + 1)])
def test_workspaces_of_sizes_called_in_turn_are_all_reused(emulated, driver_as, sizes) -> None:
    """A function called with workspaces of several sizes in turn (as a VM call running kernels
    whose workspaces differ, all from the module's one pool), up to ``WORKSPACE_SIZES``: once
    each size has run, a round allocates, frees and waits for nothing; the pool keeps one
    workspace a size."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    counting = Counting(driver)
    driver_as(counting)
    dev = tvms.cuda(0)
    args = [(tvms.nd.empty((2, n), "float32", dev), tvms.nd.empty((2,), "float32", dev)) for n in sizes]

    def one_round():
        for X, Y in args:
            lib["main"](X, Y, 1.0)
    one_round()
    assert [driver_calls(counting, one_round) for _ in range(3)] == [(0, 0, 0)] * 3
    assert len(driver.memory) == 3 * len(args)


def pool_call(pool: BlockPool, *sizes: int) -> None:
    """A call of ``pool`` taking blocks of ``sizes`` at once, then handing them back."""
    pool.begin_call()
    for block in [pool.take(nbytes) for nbytes in sizes]:
        pool.give_back(block)


def test_a_small_workspace_does_not_take_the_large_one(emulated) -> None:
    """Calls of a module's workspace pool with one 1 MiB workspace, and with a 64-byte one then
    a 1 MiB one, in turn: the small request takes no large block that the large one would then
    allocate again, so the pool keeps 1 MiB and 64 bytes, not 2 MiB, and allocates two blocks
    in all."""
    emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    pool = DriverLauncher({}, 0).workspaces
    for _ in range(10):
        pool_call(pool, 1 << 20)
        pool_call(pool, 64, 1 << 20)
    assert (sum(nbytes * len(blocks) for nbytes, blocks in pool.idle.items()), pool.fresh) == ((1 << 20) + 64, 2)


def test_workspaces_of_a_size_later_calls_did_without_are_dropped(emulated) -> None:
    """A call with four 64-byte workspaces, then calls with one (and a new size each, so that
    they allocate): the size stays among those kept, but only its block the later calls used."""
    emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    pool = DriverLauncher({}, 0).workspaces
    pool_call(pool, 64, 64, 64, 64)
    for k in range(1, BlockPool.KEEP_CALLS + 3):
        pool_call(pool, 64, 128 * k)
    assert len(pool.idle[64]) == 1 and len(pool.idle) == BlockPool.KEEP_CALLS + 3


def test_a_dropped_module_frees_its_workspaces_at_once(emulated) -> None:
    """A module's functions do not point back at it: the workspaces it keeps are freed when it
    and its functions are dropped, without the cyclic garbage collector; a function held alone
    keeps them, and runs."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    dev = tvms.cuda(0)
    X, Y = tvms.nd.empty((64, 1000), "float32", dev), tvms.nd.empty((64,), "float32", dev)
    gc.disable()
    try:
        main = lib["main"]
        del lib
        main(X, Y, 1.0)
        assert len(driver.memory) == 3  # (X, Y, the workspace)
        del main
        assert len(driver.memory) == 2
    finally:
        gc.enable()


def test_a_stream_change_does_not_slip_into_a_request(emulated, monkeypatch) -> None:
    """A thread changing the stream (and handing a block of the new one back) while another
    thread's request for the old stream has checked its stream and not yet taken a block: the
    request still gets a block of its own stream, not one whose work is on the new."""
    emulated("add_dyn_SplitHostDevice.tvms")
    monkeypatch.setattr(cuda_driver, "_CURRENT_STREAMS", {})
    pool = BlockPool(0)
    pool.begin_call()
    old = pool.stream
    pool.give_back(pool.take(64))

    def change_the_stream():
        cuda_driver.set_current_stream(0, cuda_driver.Stream(0))
        pool.begin_call()
        pool.give_back(pool.take(64))
    other = threading.Thread(target=change_the_stream)

    class Interleaved(collections.defaultdict):  # (the other thread runs inside the request's look-up)
        def __getitem__(self, nbytes):
            return self._after_the_other_thread(super().__getitem__, nbytes)

        def get(self, nbytes, default=None):
            return self._after_the_other_thread(super().get, nbytes, default)

        def _after_the_other_thread(self, look_up, *args):
            if not other.is_alive() and other.ident is None:
                other.start()
                other.join(0.5)  # (it waits for the request, if the pool makes it wait)
            return look_up(*args)
    pool.idle = Interleaved(list, pool.idle)
    block = pool.take(64, old)
    other.join(10)
    assert block.stream is old and pool.stream is not old


def test_threads_calling_one_function_keep_their_own_workspaces(emulated) -> None:
    """Two threads call one function with a host workspace: the second's call, made while the
    first's is between its allocation and its launch, frees its own workspace at its end, not
    the first's (whose launch would then fault)."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms")
    x = np.random.default_rng(3).random((5, 70), dtype=np.float32)
    launch, waiting, done, failed = driver.cuLaunchKernel, threading.Event(), threading.Event(), []

    def launch_after_the_other_call(*args):
        if threading.current_thread() is not threading.main_thread():
            waiting.set()
            done.wait(10)
        return launch(*args)

    def first_call():
        try:
            lib["main"](X, Y, 2.0)
        except TVMSError as err:
            failed.append(err)

    driver.cuLaunchKernel = launch_after_the_other_call
    X, Y, Y2 = (tvms.nd.array(a, device=tvms.cuda(0)) for a in (x, np.zeros(5, "float32"), np.zeros(5, "float32")))
    thread = threading.Thread(target=first_call)
    thread.start()
    waiting.wait(10)
    lib["main"](X, Y2, 3.0)
    pool = lib.launcher_for((X,)).workspaces
    idle = [block.ptr for blocks in pool.idle.values() for block in blocks]  # (the first call still runs)
    done.set()
    thread.join()
    assert not failed
    # (the launches: the second call's two, then the first's; the workspace is rowsum's first argument)
    second, first = (driver.arguments[k][0].ctypes.data for k in (1, 3))
    assert second != first and idle == [second]
    np.testing.assert_allclose(Y.numpy(), 2 * x.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(Y2.numpy(), 3 * x.sum(axis=1), rtol=1e-5)


def test_tvm_split_host_device_workspaces_and_dynamic_shared_memory(emulated) -> None:
    """Two host functions as TVM 0.27 prints them after SplitHostDevice: one passes a workspace
    (``T.alloc_buffer`` in the host, ``A.view(...)``) from a kernel to the next over a symbolic
    ``n``, one launches with 256 bytes of dynamic shared memory."""
    driver, lib = emulated("two_stage_SplitHostDevice.tvms", run_kernels=False)
    A, C = (tvms.nd.empty((5, 64), "float32", tvms.cuda(0)) for _ in range(2))
    lib["main"](A, C)
    assert [launch[:3] for launch in driver.launches] == [("two_stage_kernel", (5, 1, 1), (64, 1, 1)),
                                                          ("two_stage_kernel_1", (5, 1, 1), (64, 1, 1))]
    (a, workspace, n), (workspace_again, c, n_again) = driver.arguments
    assert (a.ctypes.data, c.ctypes.data) == (A.ptr, C.ptr) and (n, n_again) == (5, 5)
    assert workspace.nbytes == 5 * 64 * 4 and workspace_again.ctypes.data == workspace.ctypes.data
    assert len(driver.memory) == 3  # (the workspace is kept for the next call)
    x = np.random.default_rng(5).random(200, dtype=np.float32)
    _, lib = emulated("dyn_shared_SplitHostDevice.tvms")
    c = np.zeros(200, "float32")
    lib.with_launcher(ReferenceLauncher())["main"](x, c)
    np.testing.assert_allclose(c, 3 * x, rtol=1e-6)
    driver, lib = emulated("dyn_shared_SplitHostDevice.tvms")
    X, C = tvms.nd.array(x, device=tvms.cuda(0)), tvms.nd.empty((200,), "float32", tvms.cuda(0))
    lib["main"](X, C)
    assert driver.launches == [("scale_kernel", (4, 1, 1), (64, 1, 1), 256)]
    np.testing.assert_allclose(C.numpy(), 3 * x, rtol=1e-6)


def test_more_than_48_kib_of_dynamic_shared_memory_is_asked_for(emulated) -> None:
    """Above 48 KiB a kernel's dynamic shared memory is asked for before its launch (once), up to
    the device's opt-in maximum (163 KiB on this 8.0 GPU); beyond it a clear error."""
    driver, _ = emulated("dyn_shared_SplitHostDevice.tvms")
    art = fixture_artifact("dyn_shared_SplitHostDevice.tvms")
    text = (FIXTURES / "dyn_shared_SplitHostDevice.tvms").read_text()
    dev = tvms.cuda(0)
    x = np.random.default_rng(6).random(200, dtype=np.float32)
    X, C = tvms.nd.array(x, device=dev), tvms.nd.empty((200,), "float32", dev)
    for nbytes in (48 * 1024, 64 * 1024, 100 * 1024, 163 * 1024 + 1):
        host = from_source(text.replace("T.int64(256)", f"T.int64({nbytes})"))["main"]
        lib = CudaModule({"main": dataclasses.replace(art, host=host)}, "cuda")
        if nbytes > 166912:
            with pytest.raises(TVMSError, match="kernel scale_kernel launches with 166913 bytes of dynamic "
                                                r"shared memory; a block of cuda\(0\) has at most 166912"):
                lib["main"](X, C)
            continue
        for _ in range(2):
            lib["main"](X, C)
        np.testing.assert_allclose(C.numpy(), 3 * x, rtol=1e-6)
    assert [launch[3] for launch in driver.launches] == [49152, 49152, 65536, 65536, 102400, 102400]
    assert driver.function_attributes == [  # (once per kernel of a loaded module)
        ("scale_kernel", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", n) for n in (65536, 102400)]


def test_the_context_is_made_current_once_per_thread_on_one_gpu(emulated, driver_as) -> None:
    driver, _ = emulated("add_dyn_SplitHostDevice.tvms")
    counting = Counting(driver)
    driver_as(counting)

    def made_current() -> int:  # (cuCtxSetCurrent calls of three uses of cuda(0))
        counting.counts.clear()
        for _ in range(3):
            cuda_driver.use_device(0)
        return counting.counts["cuCtxSetCurrent"]

    made_current()
    assert made_current() == 0
    in_thread = []
    thread = threading.Thread(target=lambda: in_thread.append(made_current()))
    thread.start()
    thread.join()
    assert in_thread == [1]
    driver.count = 2  # (with two GPUs, users of the CUDA runtime switch contexts: set at each use)
    assert made_current() == 3


def test_the_emulated_gpu_tells_double_frees_and_contexts_apart(emulated) -> None:
    """What the real driver would refuse shows in the emulator: a block freed twice is recorded
    (cuda_driver's finalizer swallows the error; the fixture asserts none happened), and each
    device has a context of its own."""
    driver, _ = emulated("add_dyn_SplitHostDevice.tvms")
    block = cuda_driver.DeviceMemory(0, 16)
    ptr = block.ptr
    cuda_driver._free(0, ptr)
    del block  # (its finalizer frees it again)
    assert driver.double_frees == [ptr]
    driver.double_frees.clear()
    driver.count = 2
    assert cuda_driver.primary_context(0) != cuda_driver.primary_context(1)


def test_a_context_another_library_popped_is_made_current_again(emulated) -> None:
    """tvms makes the context current once per thread; when a library pops it (numba's ``with
    cuda.gpus[0]:`` around tvms's first call), the next call finds none (CUDA_ERROR_INVALID_
    CONTEXT): the context is made current again and the call made once more."""
    driver, _ = emulated("add_dyn_SplitHostDevice.tvms")
    cuda_driver.use_device(0)
    current = {"context": None}
    allocate, make_current = driver.cuMemAlloc, driver.cuCtxSetCurrent
    driver.cuCtxSetCurrent = lambda context: (current.update(context=context), make_current(context))[1]
    driver.cuMemAlloc = lambda nbytes: allocate(nbytes) if current["context"] else (201,)
    A = tvms.nd.array(np.arange(4, dtype="float32"), device=tvms.cuda(0))
    np.testing.assert_array_equal(A.numpy(), np.arange(4, dtype="float32"))
    assert current["context"] == cuda_driver.primary_context(0)


def test_device_attributes_and_the_detected_target(emulated) -> None:
    emulated("add_dyn_SplitHostDevice.tvms")
    dev = tvms.cuda(0)
    assert (dev.exist, dev.compute_version, dev.max_threads_per_block, dev.warp_size,
            dev.multi_processor_count, dev.max_shared_memory_per_block) == (True, "8.0", 1024, 32, 108, 49152)
    assert Target.from_device(dev).export() == {
        "kind": "cuda", "tag": "", "keys": ["cuda", "gpu"], "max_num_threads": 1024, "thread_warp_size": 32,
        "max_shared_memory_per_block": 49152, "max_threads_per_block": 1024, "arch": "sm_80"}
    assert Target("cuda").arch == "sm_80"  # (as TVM: the arch of GPU 0 when none is given)
    from tvms.lowering.codegen.cuda import target_arch

    assert target_arch(Target("cuda")) == "sm_80"  # (so a plain cuda build is a cubin for that GPU)
    assert target_arch(Target("cuda -arch=sm_90")) == "sm_90"


def test_device_memory_borrowed_at_an_unaligned_address_is_refused(emulated) -> None:
    from tvms.runtime.dlpack import cuda_from_dlpack

    emulated("add_dyn_SplitHostDevice.tvms")
    dev = tvms.cuda(0)
    t = tvms.nd.array(np.arange(32, dtype="float32"), device=dev)

    class OffsetView:  # (a peer's view of t from its second element, as torch's x[1:])
        def __dlpack__(self, stream=None):
            return to_capsule(t.ptr + 4, (31,), np.dtype("float32"), (2, 0), t)

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(TVMSError, match="64-byte boundary"):
        cuda_from_dlpack(OffsetView(), dev)


def test_from_dlpack_names_the_stream_tvms_works_on(emulated, monkeypatch) -> None:
    """``tvms.nd.from_dlpack`` of a peer's device tensor asks the peer to order its work before
    tvms's current stream: 1 (the legacy default stream) by default, else the stream's handle."""
    from tvms.runtime.vm_memory import aligned_empty

    driver, _ = emulated("add_dyn_SplitHostDevice.tvms")
    driver.cuStreamCreate = lambda flags: (0, 0x1000)  # (real handles are numbers)
    monkeypatch.setattr(cuda_driver, "_CURRENT_STREAMS", {})

    dev, data = tvms.cuda(0), aligned_empty((32,), np.dtype("float32"))  # (the peer's memory: never read)
    asked = []

    class Peer:
        def __dlpack__(self, stream=None):
            asked.append(stream)
            return to_capsule(data.ctypes.data, data.shape, data.dtype, (2, 0), data)

        def __dlpack_device__(self):
            return (2, 0)
    tvms.nd.from_dlpack(Peer())
    stream = dev.create_raw_stream()
    dev.set_raw_stream(stream)
    tvms.nd.from_dlpack(Peer())
    assert asked == [1, 0x1000]


RELAX_ON_GPU = """# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func
    def add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        C = T.match_buffer(c, (n,))
        for i in range(n):
            C[i] = A[i] * T.float32(2) + B[i]

    @R.function
    def main(x: R.Tensor(("n",), dtype="float32"), y: R.Tensor(("n",), dtype="float32")):
        n = T.int64()
        cls = Module
        z = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((n,), dtype="float32"))
        w = R.call_tir(cls.add, (z, y), out_sinfo=R.Tensor((n,), dtype="float32"))
        v = R.call_dps_packed("test_cuda.negate", (w,), out_sinfo=R.Tensor((n,), dtype="float32"))
        return v
"""


def test_the_vm_runs_on_the_device(emulated) -> None:
    """The VM program of a Relax function (two kernel calls and a packed function) with the
    cuda kernels: arguments go to the device, outputs are allocated there, the packed function
    gets device tensors."""
    seen = []

    @tvms.register_func("test_cuda.negate", override=True)
    def negate(x, out):
        seen.append((type(x).__name__, type(out).__name__))
        out.copyfrom(-x.numpy())

    cpu_ex = tvms.compile(from_source(RELAX_ON_GPU), target="llvm")
    driver, kernels = emulated("add_dyn_SplitHostDevice.tvms", function="add")
    ex = tvms.runtime.vm.Executable(cpu_ex.program, kernels)
    vm = tvms.relax.VirtualMachine(ex, tvms.cuda(0))
    x, y = np.arange(200, dtype="float32"), np.ones(200, "float32")
    out = vm["main"](x, tvms.nd.array(y, device=tvms.cuda(0)))
    assert type(out).__name__ == "CudaTensor" and seen == [("CudaTensor", "CudaTensor")]
    np.testing.assert_array_equal(out.numpy(), -(2 * (2 * x + y) + y))
    assert [launch[1] for launch in driver.launches] == [(2, 1, 1)] * 2
    assert vm.time_evaluator("main", tvms.cuda(0), number=2)(x, y).mean > 0
    with pytest.raises(TVMSError, match="compiled for cuda; it runs on a CUDA device"):
        tvms.relax.VirtualMachine(ex, tvms.cpu())
    with pytest.raises(TVMSError, match="runs on the CPU, not on cuda:0"):
        tvms.relax.VirtualMachine(cpu_ex, tvms.cuda(0))
    with pytest.raises(TVMSError, match="argument 'x': the tensor is on cuda:0; this executable runs on the CPU"):
        tvms.relax.VirtualMachine(cpu_ex, tvms.cpu())["main"](tvms.nd.array(x, device=tvms.cuda(0)), y)


def counted_vm(emulated, driver_as) -> tuple:
    """A VM of RELAX_ON_GPU on the emulated GPU, its driver, and the counter of its calls."""
    tvms.register_func("test_cuda.negate", lambda x, out: out.copyfrom(-x.numpy()), override=True)
    cpu_ex = tvms.compile(from_source(RELAX_ON_GPU), target="llvm")
    driver, kernels = emulated("add_dyn_SplitHostDevice.tvms", function="add")
    counting = Counting(driver)
    driver_as(counting)
    vm = tvms.relax.VirtualMachine(tvms.runtime.vm.Executable(cpu_ex.program, kernels), tvms.cuda(0))
    return vm, driver, counting


def allocated_and_freed(counting: Counting, run) -> tuple:
    """(cuMemAlloc, cuMemFree) calls that ``run()`` makes."""
    counting.counts.clear()
    run()
    return counting.counts["cuMemAlloc"], counting.counts["cuMemFree"]


def test_vm_calls_after_the_first_reuse_the_vms_device_memory(emulated, driver_as) -> None:
    """A VM's outputs and arguments' copies take blocks the VM keeps and get back when they die:
    a call after the first allocates and frees nothing, sets no context (one GPU: its primary
    context stays current) and launches what the first did; the blocks are freed with the VM,
    and a tensor that outlives it frees its own."""
    vm, driver, counting = counted_vm(emulated, driver_as)
    x, y = np.arange(200, dtype="float32"), np.ones(200, "float32")

    def call(k):
        counting.counts.clear()
        start = len(driver.launches)
        out = vm["main"](x + k, y)  # (both arguments copied to the device by the VM)
        np.testing.assert_array_equal(out.numpy(), -(2 * (2 * (x + k) + y) + y))
        counted = tuple(counting.counts[name] for name in ("cuMemAlloc", "cuMemFree", "cuCtxSetCurrent"))
        return out, counted, driver.launches[start:]

    first, counted, launches = call(0)
    # (two arguments' copies, two intermediates of the VM's pool, the output: in the block the
    # first intermediate gave back)
    assert counted[:2] == (4, 0)
    assert launches == [("add_kernel", (2, 1, 1), (128, 1, 1), 0)] * 2
    again = [call(k)[1:] for k in (1, 2)]  # (their outputs dropped at once)
    # (the first output's block is not back; the context is current on this thread already)
    assert again == [((1, 0, 0), launches), ((0, 0, 0), launches)]
    held = len(driver.memory)
    del vm
    gc.collect()
    assert len(driver.memory) == 1 < held  # (what the first output holds)
    np.testing.assert_array_equal(first.numpy(), -(2 * (2 * x + y) + y))
    del first
    gc.collect()
    assert not driver.memory


def test_the_vms_idle_blocks_stay_bounded_over_many_sizes(emulated, driver_as) -> None:
    """A symbolic shape called with 200 sizes: the blocks of sizes no longer asked for are
    freed (a server of variable-length inputs keeps a few calls' worth, not every size)."""
    vm, driver, _ = counted_vm(emulated, driver_as)
    for n in range(1, 201):
        x = np.arange(n, dtype="float32")
        np.testing.assert_array_equal(vm["main"](x, x).numpy(), -(2 * (2 * x + x) + x))
    # (5 blocks a call: two arguments' copies, two intermediates, the output)
    assert len(driver.memory) <= 25  # (a few calls' worth)


def test_a_block_lent_to_another_library_is_freed_not_reused(emulated, driver_as) -> None:
    """An output read through DLPack or ``__cuda_array_interface__`` (by torch or cupy, maybe on
    a stream of their own) frees its block when it dies (cuMemFree waits for that stream)
    rather than giving it to the next call; one not lent goes back to the VM."""
    vm, _, counting = counted_vm(emulated, driver_as)
    x = np.arange(200, dtype="float32")
    vm["main"](x, x)
    for counted, lend in [((0, 0), lambda t: None), ((1, 1), lambda t: t.__dlpack__()),
                          ((1, 1), lambda t: t.__cuda_array_interface__),
                          ((1, 1), lambda t: t.__dlpack__(stream=-1)),
                          ((0, 0), lambda t: t.__dlpack__(stream=1)),  # (the VM's stream, torch's default)
                          # (lent twice: a second library on the VM's stream does not make it the VM's again)
                          ((1, 1), lambda t: (t.__cuda_array_interface__, t.__dlpack__(stream=1)))]:
        out = [vm["main"](x, x)]
        lend(out[0])
        assert allocated_and_freed(counting, lambda: (out.clear(), vm["main"](x, x))) == counted


def numbered_streams(driver, monkeypatch) -> None:
    """Streams the emulated driver creates get numbers as handles (as real ones have)."""
    handles = itertools.count(0x1000)
    driver.cuStreamCreate = lambda flags: (0, next(handles))
    monkeypatch.setattr(cuda_driver, "_CURRENT_STREAMS", {})


def test_dlpack_waits_unless_the_consumer_reads_on_the_stream_of_the_work(emulated, driver_as, monkeypatch) -> None:
    """DLPack's ``stream`` is compared with the stream the VM's work on the tensor was queued on
    and with the current one: outputs of calls on s1 are waited for when handed to consumers
    while s2 is current, on s2 or on s1 (s2 may have queued more work on them), and not when s1
    is current again and the consumer reads on s1; -1 (the consumer orders its reads itself)
    never is, None (read as a stream not known) always; a tensor not the VM's, its stream
    unknown, is waited for but with -1. ``__cuda_array_interface__`` names s1 too."""
    vm, driver, counting = counted_vm(emulated, driver_as)
    numbered_streams(driver, monkeypatch)
    dev, x = tvms.cuda(0), np.arange(200, dtype="float32")
    s1, s2 = dev.create_raw_stream(), dev.create_raw_stream()
    dev.set_raw_stream(s1)
    outs = [vm["main"](x, x) for _ in range(6)]
    dev.set_raw_stream(s2)

    def synchronizations(lend) -> int:
        counting.counts.clear()
        lend()
        return sum(counting.counts[name] for name in SYNCHRONIZATIONS)
    assert outs[0].__cuda_array_interface__["stream"] == s1.handle
    streams = (s2.handle, s1.handle, -1, None)
    assert [synchronizations(lambda: out.__dlpack__(stream=s)) for out, s in zip(outs[1:], streams)] == [1, 1, 0, 1]
    dev.set_raw_stream(s1)
    assert synchronizations(lambda: outs[5].__dlpack__(stream=s1.handle)) == 0
    plain = tvms.nd.empty((4,), "float32", dev)
    assert [synchronizations(lambda: plain.__dlpack__(stream=s)) for s in (s2.handle, 1, -1)] == [1, 1, 0]


def test_dlpack_waits_for_a_kernel_writing_a_vm_tensor_on_another_stream(emulated, driver_as, monkeypatch) -> None:
    """A VM's output (its work on s1), then written by a module's kernel on s2: a consumer on s1
    is not ordered after that kernel, so DLPack synchronizes."""
    vm, driver, counting = counted_vm(emulated, driver_as)
    numbered_streams(driver, monkeypatch)
    dev, x = tvms.cuda(0), np.arange(200, dtype="float32")
    s1, s2 = dev.create_raw_stream(), dev.create_raw_stream()
    dev.set_raw_stream(s1)
    out = vm["main"](x, x)
    dev.set_raw_stream(s2)
    lib = CudaModule({"main": fixture_artifact("add_dyn_SplitHostDevice.tvms", binary=b"\x7fELF a cubin")}, "cuda")
    a = tvms.nd.array(x, device=dev)
    lib["main"](a, a, out)
    assert driver.streams[-1] == s2.handle
    assert driver_calls(counting, lambda: out.__dlpack__(stream=s1.handle))[2] == 1
    np.testing.assert_array_equal(out.numpy(), 3 * x)


def test_a_lent_tensor_still_names_the_stream_of_its_work(emulated, driver_as, monkeypatch) -> None:
    """Lending a VM's tensor (``__cuda_array_interface__``, or DLPack to a consumer on another
    stream) does not make its stream unknown: a second read of the interface, or one after the
    DLPack lend, names s1, the stream of the VM's work, not s2, the current one."""
    vm, driver, _ = counted_vm(emulated, driver_as)
    numbered_streams(driver, monkeypatch)
    dev, x = tvms.cuda(0), np.arange(200, dtype="float32")
    s1, s2 = dev.create_raw_stream(), dev.create_raw_stream()
    dev.set_raw_stream(s1)
    read, lent = vm["main"](x, x), vm["main"](x, x)
    dev.set_raw_stream(s2)
    assert [read.__cuda_array_interface__["stream"] for _ in range(2)] == [s1.handle] * 2
    lent.__dlpack__(stream=s2.handle)
    assert lent.__cuda_array_interface__["stream"] == s1.handle


@pytest.mark.parametrize("lend, per_call", [
    (lambda x, out: out.__dlpack__(stream=1), (0, 0, 0)),
    (lambda x, out: out.__dlpack__(), (1, 1, 1)),
    (lambda x, out: x.__dlpack__(stream=1), (0, 0, 0)),
    (lambda x, out: x.__cuda_array_interface__, (1, 1, 0)),
])
def test_a_packed_function_lending_a_vm_tensor(emulated, driver_as, lend, per_call) -> None:
    """A packed function that hands the VM's output, or its input (an intermediate of the VM's
    pool), to a library during the call (as one wrapping a torch or cupy kernel does): a library
    reading it on the VM's stream (DLPack's ``stream=1``, the legacy default stream, which torch
    and cupy name on their default stream) is ordered after the VM's work and before its next,
    so the block goes back to the VM and nothing is waited for; one that names no stream (it
    gets a synchronized device through DLPack) may read it later on its own: its block is
    freed, not reused."""
    vm, _, counting = counted_vm(emulated, driver_as)
    lent = []

    def negate(x, out):
        lent.append(lend(x, out))
        out.copyfrom(-x.numpy())
        lent.clear()  # (the library is done with it)
    tvms.register_func("test_cuda.negate", negate, override=True)
    x = np.arange(200, dtype="float32")
    vm["main"](x, x)
    for _ in range(2):
        assert driver_calls(counting, lambda: vm["main"](x, x)) == per_call


def test_a_block_serves_only_the_stream_its_work_was_queued_on(emulated, driver_as, monkeypatch) -> None:
    """When the current stream changes between calls, the idle blocks (their work queued on the
    old stream) are freed, not taken by work on the new one; so is a block of the old stream
    that comes back later."""
    vm, _, counting = counted_vm(emulated, driver_as)
    monkeypatch.setattr(cuda_driver, "_CURRENT_STREAMS", {})
    dev, x = tvms.cuda(0), np.arange(200, dtype="float32")
    dev.set_raw_stream(dev.create_raw_stream())
    held = [vm["main"](x, x)]
    vm["main"](x, x)  # (its four blocks idle on the first stream)
    dev.set_raw_stream(dev.create_raw_stream())
    assert allocated_and_freed(counting, lambda: vm["main"](x, x)) == (4, 4)
    assert allocated_and_freed(counting, lambda: vm["main"](x, x)) == (0, 0)
    assert allocated_and_freed(counting, held.clear) == (0, 1)


def test_the_vm_places_tensors_in_device_storage(emulated) -> None:
    """``R.vm.alloc_storage`` / ``R.vm.alloc_tensor`` on the GPU (``vm_storage.tvms``): two
    tensors at offsets 0 and 16 of one zeroed device storage; one that does not fit is refused."""

    _, kernels = emulated("add_one_SplitHostDevice.tvms", function="add_one")
    for size, fits in (32, True), (24, False):
        text = VM_STORAGE.read_text().replace("R.shape([32])", f"R.shape([{size}])")
        program = tvms.compile(from_source(text), target="llvm", relax_pipeline=None)
        vm = tvms.relax.VirtualMachine(tvms.runtime.vm.Executable(program.program, kernels), tvms.cuda(0))
        x = np.arange(4, dtype="float32")
        if fits:
            np.testing.assert_array_equal(vm["main"](x).numpy(), x + 2)
        else:
            with pytest.raises(TVMSError, match=r"a tensor of shape \(4,\) at offset 16 does not fit its storage"):
                vm["main"](x)


def test_vm_storage_comes_from_the_vms_pool(emulated, driver_as) -> None:
    """``R.vm.alloc_storage`` takes a block of the VM's pool, given back when the storage and the
    tensors placed in it (the output among them) die: the first call allocates the argument's
    copy and the storage, a later one nothing, freeing and synchronizing nothing either; while
    an output still holds its storage, the next call takes another block. The storage is zeroed
    at each call, on the VM's stream."""

    driver, kernels = emulated("add_one_SplitHostDevice.tvms", function="add_one")
    counting = Counting(driver)
    driver_as(counting)
    program = tvms.compile(from_source(VM_STORAGE.read_text()), target="llvm", relax_pipeline=None)
    vm = tvms.relax.VirtualMachine(tvms.runtime.vm.Executable(program.program, kernels), tvms.cuda(0))
    x = np.arange(4, dtype="float32")

    def call(k):
        np.testing.assert_array_equal(vm["main"](x + k).numpy(), x + k + 2)
    assert driver_calls(counting, lambda: call(0)) == (2, 0, 0)
    assert counting.counts["cuMemsetD8Async"] == 1
    for k in (1, 2):
        assert driver_calls(counting, lambda: call(k)) == (0, 0, 0)
        assert counting.counts["cuMemsetD8Async"] == 1
    held = vm["main"](x)
    assert driver_calls(counting, lambda: call(3)) == (1, 0, 0)
    np.testing.assert_array_equal(held.numpy(), x + 2)


def test_a_cuda_executable_without_a_gpu_says_why(driver_as) -> None:
    driver_as(None)
    cpu_ex = tvms.compile(from_source(RELAX_ON_GPU), target="llvm")
    kernels = CudaModule({"add": fixture_artifact("add_dyn_SplitHostDevice.tvms")}, "cuda")
    ex = tvms.runtime.vm.Executable(cpu_ex.program, kernels)
    with pytest.raises(TVMSError, match="VirtualMachine: cannot run on cuda:0: cuda-python is not installed"):
        tvms.relax.VirtualMachine(ex, tvms.cuda(0))


def test_export_library_embeds_the_binary_and_the_host_function(emulated, tmp_path) -> None:
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms")
    lib.export_library(str(tmp_path / "k.so"))
    loaded = tvms.runtime.load_module(str(tmp_path / "k.so"))
    assert loaded.get_source() == lib.get_source() and loaded.artifacts["main"].binary == b"\x7fELF a cubin"
    x = np.random.default_rng(3).random((4, 33), dtype=np.float32)
    X, Y = tvms.nd.array(x, device=tvms.cuda(0)), tvms.nd.empty((4,), "float32", tvms.cuda(0))
    loaded["main"](X, Y, 3.0)
    np.testing.assert_allclose(Y.numpy(), 3 * x.sum(axis=1), rtol=1e-5)
    assert driver.images == [b"\x7fELF a cubin"]  # (loaded once, for both kernels)
    with pytest.raises(TVMSError, match="loaded from a library, which keeps its binary"):
        loaded.with_launcher(ReferenceLauncher())["main"](x, np.zeros(4, "float32"), 3.0)


def test_a_cubin_of_another_architecture_loads_its_ptx(emulated, tmp_path) -> None:
    """A cubin for sm_80 does not load on an sm_90 GPU (CUDA_ERROR_NO_BINARY_FOR_GPU): the
    driver is given the PTX the cubin came from, as a fatbin's PTX serves newer GPUs; an
    exported library keeps it too. Without PTX the error names the architectures."""
    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms")
    art = lib.artifacts["main"]
    load = driver.cuModuleLoadData
    driver.cuModuleLoadData = lambda image: (209,) if image.startswith(b"\x7fELF") else load(image)
    driver.cuGetErrorName = lambda err: (0, b"CUDA_ERROR_NO_BINARY_FOR_GPU")
    x = np.random.default_rng(4).random((4, 33), dtype=np.float32)
    with_ptx = CudaModule({"main": dataclasses.replace(art, ptx=b"// ptx\0")}, "cuda")
    with_ptx.export_library(str(tmp_path / "k.so"))
    for module in (with_ptx, tvms.runtime.load_module(str(tmp_path / "k.so"))):
        X, Y = tvms.nd.array(x, device=tvms.cuda(0)), tvms.nd.empty((4,), "float32", tvms.cuda(0))
        module["main"](X, Y, 3.0)
        np.testing.assert_allclose(Y.numpy(), 3 * x.sum(axis=1), rtol=1e-5)
    assert driver.images == [b"// ptx\0", b"// ptx\0"]
    X, Y = tvms.nd.array(x, device=tvms.cuda(0)), tvms.nd.empty((4,), "float32", tvms.cuda(0))
    with pytest.raises(TVMSError, match=r"built for sm_80, which cuda:0 \(compute 8\.0\) cannot run: build"):
        lib["main"](X, Y, 3.0)
    driver.cuModuleLoadData = lambda image: (209,)  # (the PTX's target is newer than the GPU too)
    newer = CudaModule({"main": dataclasses.replace(art, ptx=b"// ptx\0")}, "cuda")
    with pytest.raises(TVMSError, match=r"cannot run \(nor its PTX: CUDA driver call cuModuleLoadData failed"):
        newer["main"](X, Y, 3.0)


def test_the_tuning_runner_times_a_cuda_library_on_the_gpu(emulated, tmp_path) -> None:
    """What a LocalRunner's worker does with a candidate built for cuda: the random arguments go
    to the GPU, the entry function is timed with CUDA events (the emulated driver's 4 ms between
    two events). A machine without a GPU fails the trial with the reason, not the device type."""
    from tvms.lowering.tune.measure import EvaluatorConfig, RunnerInput, TensorInfo
    from tvms.lowering.tune.runner import LocalRunner, _run_in_worker, default_alloc_argument, default_run_evaluator

    driver, lib = emulated("scale_rowsum_SplitHostDevice.tvms", run_kernels=False)
    lib.export_library(str(tmp_path / "k.so"))
    info = [TensorInfo("float32", (4, 33)), TensorInfo("float32", (4,))]
    with_scale = lambda info_, repeat: [args + [2.0] for args in default_alloc_argument(info_, repeat)]
    secs = _run_in_worker(str(tmp_path / "k.so"), info, EvaluatorConfig(number=2, repeat=3, min_repeat_ms=0),
                          0.0, 1, with_scale, default_run_evaluator)
    assert secs == [pytest.approx(4e-3 / 2)] * 3
    # (two kernels a call: a warm-up call, then 3 x 2; the launcher takes tensors on the GPU only)
    assert len(driver.launches) == 2 * (1 + 3 * 2) and not driver.memory  # (freed with the module)
    # a candidate built for another architecture than GPU 0's (compute 8.0 here) is not timed there
    other = CudaModule({"main": dataclasses.replace(lib.artifacts["main"], arch="sm_90a")}, "cuda")
    other.export_library(str(tmp_path / "sm90.so"))
    with pytest.raises(TVMSError, match="built for sm_90a, and GPU 0 is of compute 8.0"):
        _run_in_worker(str(tmp_path / "sm90.so"), info, EvaluatorConfig(number=2, repeat=3, min_repeat_ms=0),
                       0.0, 1, with_scale, default_run_evaluator)
    if not HAS_GPU:
        runner = LocalRunner(timeout_sec=60)
        try:
            (result,) = [f.result() for f in runner.run([RunnerInput(str(tmp_path / "k.so"), "cuda", info)])]
        finally:
            runner.shutdown()
        assert result.run_secs is None and "cuda:0: the NVIDIA driver library" in result.error_msg


def test_exported_cuda_libraries_run_from_the_cli(emulated, driver_as, tmp_path, capsys) -> None:
    """``tvms run`` on a library of a Relax program and of a TensorIR function built for cuda:
    inputs go to the GPU, outputs come back; without a GPU it says why (exit 1)."""
    from tvms.cli import main

    tvms.register_func("test_cuda.negate", lambda x, out: out.copyfrom(-x.numpy()), override=True)
    cpu_ex = tvms.compile(from_source(RELAX_ON_GPU), target="llvm")
    _, kernels = emulated("add_dyn_SplitHostDevice.tvms", function="add")
    tvms.runtime.vm.Executable(cpu_ex.program, kernels).export_library(str(tmp_path / "m.so"))
    np.save(tmp_path / "x.npy", np.arange(4, dtype="float32"))
    np.save(tmp_path / "y.npy", np.ones(4, "float32"))
    assert main(["run", str(tmp_path / "m.so"), "--input", f"x={tmp_path / 'x.npy'}",
                 "--input", f"y={tmp_path / 'y.npy'}"]) == 0
    assert "[ -3.,  -7., -11., -15.]" in capsys.readouterr().out
    _, lib = emulated("add_dyn_SplitHostDevice.tvms")
    lib.export_library(str(tmp_path / "k.so"))
    np.save(tmp_path / "a.npy", np.arange(3, dtype="float32"))
    assert main(["run", str(tmp_path / "k.so"), "--input", f"A={tmp_path / 'a.npy'}", "--random-inputs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("C: shape (3,) float32") and "A:" not in out
    driver_as(None)
    assert main(["run", str(tmp_path / "k.so"), "--random-inputs", "--shape", "n=3"]) == 1
    assert "run: tensor: cannot place a tensor on cuda:0: cuda-python is not installed" in capsys.readouterr().err


# --------------------------------------------------------------------------- DLPack, the target


def test_dlpack_capsules_both_ways_with_numpy_as_the_peer() -> None:
    """The capsule code that device tensors use, checked on host memory: numpy reads a capsule
    made here, and a numpy capsule is read here; the lender is released once."""
    from tvms.runtime import dlpack

    a = np.arange(12, dtype=np.float32).reshape(3, 4)

    class Lender:
        def __dlpack__(self, **kwargs):
            return to_capsule(a.ctypes.data, a.shape, a.dtype, (1, 0), a)

        def __dlpack_device__(self):
            return (1, 0)

    b = np.from_dlpack(Lender())
    assert np.shares_memory(a, b) and b.tolist() == a.tolist() and len(dlpack._LENT) == 1
    del b
    gc.collect()
    assert not dlpack._LENT
    ptr, shape, dtype, owner = read_capsule(np.array([[True, False]]))
    assert (shape, dtype) == ((1, 2), np.dtype(bool)) and ptr
    with pytest.raises(TVMSError, match="not compact and row-major"):
        read_capsule(a[:, ::2])


# TVM 0.27's Target(...).export() on a machine without a GPU (mtriple, detected on the host, aside)
TVM_EXPORTS = [
    ("cuda", {"kind": "cuda", "tag": "", "keys": ["cuda", "gpu"], "arch": "sm_50",
              "max_num_threads": 1024, "thread_warp_size": 32}),
    ({"kind": "cuda", "arch": "sm_80"}, {"kind": "cuda", "tag": "", "keys": ["cuda", "gpu"],
                                         "max_num_threads": 1024, "thread_warp_size": 32, "arch": "sm_80"}),
    ({"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": 49152},
     {"kind": "cuda", "tag": "", "keys": ["cuda", "gpu"], "max_num_threads": 1024, "thread_warp_size": 32,
      "max_shared_memory_per_block": 49152, "arch": "sm_90"}),
    ("llvm", {"kind": "llvm", "tag": "", "keys": ["cpu"]}),
]


@pytest.mark.parametrize("spec, exported", TVM_EXPORTS)
def test_targets_export_as_tvm(spec, exported) -> None:
    if spec == "cuda" and HAS_GPU:
        exported = {**exported, "arch": cuda_driver.detected_arch()}
    target = Target(spec)
    assert target.export() == exported
    assert (target.arch, target.max_num_threads, target.thread_warp_size, target.keys) == \
        (exported.get("arch"), exported.get("max_num_threads"), exported.get("thread_warp_size"),
         tuple(exported["keys"]))


def test_the_cuda_row_and_its_checks() -> None:
    row = target_kind(Target("cuda"))
    assert row.kind == "cuda" and row.loader == "runtime.module.load_cuda"
    assert get_global_func("runtime.module.load_cuda") is tvms.runtime.cuda_module.load_cuda
    assert check_target("cuda -arch=sm_90a").arch == "sm_90a"
    assert Target("cuda -arch=sm_80") == Target({"kind": "cuda", "arch": "sm_80"})
    for bad, message in [("cuda -arch=80", "-arch=80 is not a CUDA architecture"),
                         ("cuda -arch=sm_35", "-arch=sm_35 is not a CUDA architecture"),
                         ("cuda -max_num_threads=2048", "a CUDA block has at most 1024 threads"),
                         ("cuda -thread_warp_size=64", "CUDA warps have 32 threads"),
                         ("cuda -mcpu=sm_80", "unknown option -mcpu for kind 'cuda'")]:
        with pytest.raises(TVMSError, match=message):
            check_target(bad)


# --------------------------------------------------------------------------- on a GPU

needs_codegen = pytest.mark.skipif(
    importlib.util.find_spec("tvms.lowering.codegen.cuda") is None
    or importlib.util.find_spec("tvms.lowering.tir.gpu.pipeline") is None,
    reason="the cuda row's TIR pipeline and code generator are not merged yet")

BOUND_ADD = """# from tvm.script import tir as T

@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,))
    B = T.match_buffer(b, (n,))
    C = T.match_buffer(c, (n,))
    for i_0 in T.thread_binding((n + 127) // 128, thread="blockIdx.x"):
        for i_1 in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("C"):
                vi = T.axis.spatial(n, i_0 * 128 + i_1)
                T.where(i_0 * 128 + i_1 < n)
                C[vi] = A[vi] * T.float32(2) + B[vi]
"""


@needs_codegen
def test_a_cuda_build_runs_on_the_reference_launcher() -> None:
    lib = tvms.build(from_source(BOUND_ADD), target="cuda -arch=sm_80").with_launcher(ReferenceLauncher())
    a, b, c = np.arange(200, dtype="float32"), np.ones(200, "float32"), np.zeros(200, "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, 2 * a + 1)
    assert "__global__" in lib.imported_modules[0].get_source()
    # the PTX beside the cubin, for newer GPUs; none for sm_90a (its PTX runs on sm_90 alone)
    assert lib.artifacts["main"].ptx.startswith(b"//") and lib.artifacts["main"].binary.startswith(b"\x7fELF")
    assert tvms.build(from_source(BOUND_ADD), target="cuda -arch=sm_90a").artifacts["main"].ptx == b""


@needs_codegen
@pytest.mark.skipif(importlib.util.find_spec("tvms.lowering.dlight.gpu") is None,
                    reason="the GPU default schedules (tvms.dlight.gpu) are not merged yet")
def test_a_relax_model_compiled_for_cuda_runs_on_the_reference_launcher() -> None:
    """The whole cuda compile of a Relax model (GPU default schedules, the cuda TIR pipeline,
    CUDA C through NVRTC, the VM program), its kernels run by the reference executor."""
    ex = tvms.compile(from_source(RELAX_MLP), target="cuda -arch=sm_80")
    on_host = tvms.runtime.vm.Executable(ex.program, ex.kernels().with_launcher(ReferenceLauncher()))
    args, expected = mlp_case()
    out = tvms.relax.VirtualMachine(on_host, tvms.cpu())["main"](*args)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4)


@needs_gpu
def test_device_tensors_and_attributes() -> None:
    dev = tvms.cuda(0)
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    t = tvms.nd.array(x, device=dev)
    assert (t.shape, t.dtype, t.device) == ((2, 3, 4), "float32", dev)
    np.testing.assert_array_equal(t.numpy(), x)
    t.copyfrom(x * 2)
    u = tvms.nd.empty((2, 3, 4), "float32", dev).copyfrom(t)
    np.testing.assert_array_equal(u.numpy(), x * 2)
    np.testing.assert_array_equal(u.copyto(tvms.cpu()).numpy(), x * 2)
    dev.sync()
    assert dev.max_threads_per_block >= 1024 and dev.warp_size == 32 and dev.multi_processor_count > 0
    assert Target.from_device(dev).arch == "sm_" + dev.compute_version.replace(".", "")


@needs_gpu
def test_device_dlpack_with_torch_or_cupy() -> None:
    peer = next((importlib.import_module(m) for m in ("torch", "cupy") if importlib.util.find_spec(m)), None)
    if peer is None:
        pytest.skip("neither torch nor cupy is installed")
    t = tvms.nd.array(np.arange(6, dtype="float32"), device=tvms.cuda(0))
    other = peer.from_dlpack(t)
    back = tvms.nd.from_dlpack(other)
    np.testing.assert_array_equal(back.numpy(), np.arange(6, dtype="float32"))


@needs_gpu
@needs_codegen
def test_a_cuda_build_runs_on_the_device() -> None:
    dev = tvms.cuda(0)
    lib = tvms.build(from_source(BOUND_ADD), target=Target.from_device(dev))
    a = np.arange(1000, dtype="float32")
    args = [tvms.nd.array(v, device=dev) for v in (a, np.ones(1000, "float32"), np.zeros(1000, "float32"))]
    lib["main"](*args)
    np.testing.assert_allclose(args[2].numpy(), 2 * a + 1)
    assert lib.time_evaluator("main", dev, number=5)(*args).mean > 0
    with pytest.raises(TVMSError, match="the data is on cpu"):
        lib["main"](a, a, a)


# two shared.dyn buffers of 32 KiB, live together: merged into 64 KiB, more than a block gets
# without asking (48 KiB)
BIG_SHARED = """
@T.prim_func
def main(A: T.Buffer((16384,), "float32"), B: T.Buffer((16384,), "float32")):
    X = T.alloc_buffer((8192,), scope="shared.dyn")
    Y = T.alloc_buffer((8192,), scope="shared.dyn")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            for i in range(32):
                with T.block("load"):
                    b = T.axis.spatial(2, bx)
                    v = T.axis.spatial(8192, i * 256 + tx)
                    X[v] = A[b * 8192 + v]
                    Y[v] = A[b * 8192 + v] * T.float32(2)
            for i in range(32):
                with T.block("store"):
                    b = T.axis.spatial(2, bx)
                    v = T.axis.spatial(8192, i * 256 + tx)
                    B[b * 8192 + v] = X[8191 - v] + Y[v]
"""


@needs_gpu
@needs_codegen
def test_more_than_48_kib_of_dynamic_shared_memory_on_the_device() -> None:
    dev = tvms.cuda(0)
    most = cuda_driver.attribute(0, "max_shared_memory_per_block_optin")
    if most < 64 * 1024:
        pytest.skip(f"this GPU gives a block at most {most} bytes of shared memory")
    lib = tvms.build(from_source(BIG_SHARED), target=Target.from_device(dev))
    assert lib.artifacts["main"].host.script().count("T.int64(65536)") == 1  # (the launch's bytes)
    a = np.random.default_rng(8).random(16384, dtype=np.float32)
    A, B = tvms.nd.array(a, device=dev), tvms.nd.empty((16384,), "float32", dev)
    lib["main"](A, B)
    halves = a.reshape(2, 8192)
    np.testing.assert_allclose(B.numpy(), (halves[:, ::-1] + 2 * halves).reshape(-1), rtol=1e-6)


RELAX_MLP = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 64), dtype="float32"), b: R.Tensor((4, 64), dtype="float32"),
             w: R.Tensor((64, 32), dtype="float32")):
        with R.dataflow():
            y = R.matmul(R.nn.relu(R.add(x, b)), w)
            R.output(y)
        return y
"""


def mlp_case() -> tuple:
    rng = np.random.default_rng(4)
    x, b, w = rng.random((4, 64), dtype=np.float32), rng.random((4, 64), dtype=np.float32), \
        rng.random((64, 32), dtype=np.float32)
    return (x, b, w), np.maximum(x + b, 0) @ w


@needs_gpu
@needs_codegen
@pytest.mark.skipif(importlib.util.find_spec("tvms.lowering.dlight.gpu") is None,
                    reason="the GPU default schedules (tvms.dlight.gpu) are not merged yet")
def test_a_relax_model_compiled_for_cuda_runs_on_the_device(tmp_path) -> None:
    dev = tvms.cuda(0)
    ex = tvms.compile(from_source(RELAX_MLP), target=Target.from_device(dev))
    (x, b, w), expected = mlp_case()
    out = tvms.relax.VirtualMachine(ex, dev)["main"](x, b, tvms.nd.array(w, device=dev))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4)
    ex.export_library(str(tmp_path / "mlp.so"))
    again = tvms.relax.VirtualMachine(tvms.runtime.load_module(str(tmp_path / "mlp.so")), dev)
    np.testing.assert_allclose(again["main"](x, b, w).numpy(), expected, rtol=1e-4)


@needs_gpu
def test_tuning_under_cuda_measures_on_the_gpu(tmp_path) -> None:
    """MetaSchedule under the GPU's target: candidates built for cuda, timed on the GPU by the
    LocalRunner's worker; the best schedule compiles and computes the matmul."""
    from tune_standins import matmul
    from tvms.lowering.tune.tune import compile_tir, tune_tir

    mod = matmul(128)
    target = Target.from_device(tvms.cuda(0))
    db = tune_tir(mod, target, str(tmp_path), 8, num_trials_per_iter=8, seed=0, progress=None)
    # (a failed trial is recorded at 1e10 seconds: most of the eight must have run on the GPU)
    timed = [r for r in db.get_all_tuning_records() if all(0 < s < 0.1 for s in r.run_secs or [1e10])]
    assert len(timed) >= 4
    sch = compile_tir(db, mod, target)
    a, b = (np.random.default_rng(k).random((128, 128), dtype=np.float32) for k in (1, 2))
    args = [tvms.nd.array(v, device=tvms.cuda(0)) for v in (a, b, np.zeros((128, 128), "float32"))]
    tvms.build(sch.mod, target=target)["main"](*args)
    np.testing.assert_allclose(args[2].numpy(), a @ b, rtol=1e-4)


@needs_gpu
def test_tuning_in_the_tiles_space_on_the_gpu(tmp_path) -> None:
    """The tiles space (one candidate per shape of the large float32 plan) under the GPU's
    target, every candidate timed on the GPU; the best compiles and computes the matmul."""
    from tune_standins import matmul
    from tvms.lowering.tune.tile_space import tile_space
    from tvms.lowering.tune.tune import compile_tir, tune_tir

    n = 2048
    mod = matmul(n)
    target = Target.from_device(tvms.cuda(0))
    db = tune_tir(mod, target, str(tmp_path), 32, num_trials_per_iter=32, space=tile_space(target),
                  strategy="replay-trace", seed=0, progress=None)
    timed = [r for r in db.get_all_tuning_records() if all(0 < s < 0.1 for s in r.run_secs or [1e10])]
    assert len(timed) >= 20
    sch = compile_tir(db, mod, target)
    a, b = (np.random.default_rng(s).random((n, n), dtype=np.float32) for s in (1, 2))
    args = [tvms.nd.array(v, device=tvms.cuda(0)) for v in (a, b, np.zeros((n, n), "float32"))]
    tvms.build(sch.mod, target=target)["main"](*args)
    np.testing.assert_allclose(args[2].numpy(), a @ b, rtol=1e-4)
