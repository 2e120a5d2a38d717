"""GPU TIR lowering passes against Apache TVM 0.27's printed output, and the numbers they keep.

fixtures/gpu_lowering (made by generate_with_tvm.py there) holds, for functions scheduled for
cuda, the module after every pass of TVM's s_tir pipeline that changed it
(``<case>_<NN>_<Pass>.tvms``) and the kernels after the device passes
(``<case>_kernels_<NN>_<Pass>.tvms``). Each pass tvms implements is applied to TVM's stage before
it and must print TVM's stage after it byte for byte (KNOWN_DIFFERENT says where and why not);
``lower_for_cuda`` must give TVM's host function and kernels from the scheduled function; the
kernels of the cases whose threads do not communicate must compute what the schedule computes
(reference executor); DLight's schedules must lower to TVM's kernel signatures and launches.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import CORPUS_COPY, FIXTURES
import tvms
from tvms.ir.expr import BufferLoad, Call, Var
from tvms.ir.stmt import AllocBuffer, Block, BlockRealize, BufferStore
from tvms.ir.errors import TVMSError
from tvms.ir.module import IRModule
from tvms.ir.structural import structural_equal
from tvms.ir.target import Target
from tvms.ir.visitor import walk
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.transform import PassContext, Sequential
from tvms.lowering.tir import gpu  # noqa: F401  (registers the GPU passes)
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

GOLDEN = FIXTURES / "gpu_lowering"
DIALECT = "tvm-0.27"
# the passes tvms has, by TVM name; each is checked on every stage it changed in TVM
IMPLEMENTED = {"CommonSubexprElim", "LowerCrossThreadReduction", "LowerInitBlock", "PlanAndUpdateBufferAllocationLocation", "ConvertBlocksToOpaque",
               "LiftThreadBinding", "CompactBufferAllocation", "UnifyThreadBinding",
               "LowerOpaqueBlock", "FlattenBuffer", "NarrowDataType", "InjectVirtualThread",
               "StorageRewrite", "AnnotateEntryFunc", "ThreadSync", "LowerThreadAllreduce", "MergeSharedMemoryAllocations",
               "SplitHostDevice",
               "LowerWarpMemory", "StmtSimplify", "LowerIntrin"}
# TVM's StmtSimplify before LowerOpaqueBlock (s_tir's, on blocks) is not tvms's: tvms's is the
# device passes' one (tirx's), checked on the kernels
KERNELS_ONLY = {"StmtSimplify"}


def printer_reproduces(text: str) -> bool:
    """Whether tvms prints this TVM text back as it was; where not, a pass's result is compared
    with the parsed golden structurally."""
    return from_source(text).script(dialect=DIALECT) == text
STAGE = re.compile(r"(?P<case>.+?)_(?P<kernels>kernels_)?(?P<number>\d\d)_(?P<name>\w+)\.tvms")


def stages() -> dict:
    """(case, kernels?) -> the stage files in order."""
    found: dict = {}
    for path in sorted(GOLDEN.glob("*.tvms")):
        match = STAGE.fullmatch(path.name)
        found.setdefault((match["case"], bool(match["kernels"])), []).append(path)
    return found


def checked(after, kernels: bool) -> bool:
    name = STAGE.fullmatch(after.name)["name"]
    return name in IMPLEMENTED and (kernels or name not in KERNELS_ONLY)


# stages where tvms differs from TVM, and why
KNOWN_DIFFERENT = {
    # LowerOpaqueBlock: an allocation that ends its scope prints as ``with T.alloc_local(...) as``
    # where TVM prints it flat
    "dlight_rms_norm_nocse_08_LowerOpaqueBlock",
    # TVM leaves this index half simplified; tvms simplifies it whole (as on the CPU, conv2d)
    "dlight_matmul_add_relu_nocse_08_FlattenBuffer",
    # NarrowDataType: tvms narrows only bodies without a dynamic int64 size; TVM's rewrite of
    # T.clz on int32 (``T.clz(x) - 32 + 32``) is not reproduced
    "dlight_matmul_add_relu_nocse_09_NarrowDataType", "intrinsics_06_NarrowDataType",
    # StorageRewrite: TVM turns local scalars accessed as float32x2 into a vector-typed allocation
    "dlight_matmul_add_relu_nocse_12_StorageRewrite", "dlight_conv2d_nocse_12_StorageRewrite",
    # DLight's conv2d: TVM bounds floordiv regions tighter (an extent of 1 where tvms keeps the
    # expression), prints a name shared by two loops without a suffix, and simplifies more
    "dlight_conv2d_nocse_01_PlanAndUpdateBufferAllocationLocation", "dlight_conv2d_nocse_03_LiftThreadBinding",
    "dlight_conv2d_nocse_08_FlattenBuffer", "dlight_conv2d_nocse_09_NarrowDataType",
    # DLight's softmax and layer norm (pragma loops, dynamic narrowing as above: not investigated)
    "dlight_layer_norm_nocse_07_LowerOpaqueBlock",
    "dlight_softmax_nocse_07_LowerOpaqueBlock", "dlight_softmax_nocse_09_NarrowDataType",
    # DLight's argmax: as the others (pragma loops, narrowing of int64 sizes, s_tir's simplifier)
    "dlight_argmax_nocse_07_LowerOpaqueBlock", "dlight_argmax_nocse_09_NarrowDataType",
}
PAIRS = [(before, after) for (_, kernels), files in stages().items()
         for before, after in zip(files, files[1:]) if checked(after, kernels) and after.stem not in KNOWN_DIFFERENT]


def tvm_pass(name: str):
    """TVM's pass of that name; ThreadSync as the pipeline runs it, for each memory scope."""
    if name == "ThreadSync":
        return Sequential([gpu.ThreadSync(scope) for scope in ("shared", "shared.dyn", "warp")])
    return get_pass(name)


@pytest.mark.parametrize("before,after", PAIRS, ids=lambda p: p.stem)
def test_pass_prints_what_tvm_prints(before, after) -> None:
    lowered = tvm_pass(STAGE.fullmatch(after.name)["name"])(from_source(before.read_text()))
    text = lowered.script(dialect=DIALECT)
    if text != after.read_text():  # (equal also where the golden read back prints otherwise)
        assert not printer_reproduces(after.read_text()), text
        expected = from_source(after.read_text())
        assert sorted(expected) == sorted(lowered)
        assert all(structural_equal(lowered[name], expected[name]) for name in expected)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.tvms")), ids=lambda p: p.stem)
def test_every_stage_prints_back_byte_for_byte(path) -> None:
    """TVM's text of every stage reads and prints back as it was: a free variable is defined in
    the innermost frame of TVM's printer around its uses (a launch, an attribute, an ``if``
    branch, a loop, a block), and a pragma's loop variable declared before its loop
    (``v = T.int64()``, ``T.attr(v, ...)``, ``for v in ...``) is the loop's variable."""
    assert printer_reproduces(path.read_text())


KNOWN_PAIRS = [(before, after) for files in stages().values() for before, after in zip(files, files[1:])
               if after.stem in KNOWN_DIFFERENT]


@pytest.mark.parametrize("before,after", KNOWN_PAIRS, ids=lambda p: p.stem)
def test_known_differences_still_differ(before, after) -> None:
    """A listed difference that tvms has come to reproduce must leave KNOWN_DIFFERENT."""
    lowered = tvm_pass(STAGE.fullmatch(after.name)["name"])(from_source(before.read_text()))
    assert lowered.script(dialect=DIALECT) != after.read_text()


@pytest.mark.parametrize("corpus,golden", [
    ("lower_matmul_relu_gpu_12_SplitHostDevice.tvms", "matmul_relu_12_SplitHostDevice.tvms"),
    ("lower_reduce_gpu_11_LowerThreadAllreduce.tvms", "reduce_two_warps_11_LowerThreadAllreduce.tvms"),
])
def test_the_corpus_stages_are_among_the_goldens(corpus: str, golden: str) -> None:
    """The corpus's GPU lowering stages are those the generator makes (so the pass tests above
    reproduce them from their input stage)."""
    assert (CORPUS_COPY / corpus).read_text() == (GOLDEN / golden).read_text()


def tvm_lowered(case: str) -> str:
    """TVM's host function at SplitHostDevice and its kernels after the device passes."""
    split = from_source(next(GOLDEN.glob(f"{case}_[0-9][0-9]_SplitHostDevice.tvms")).read_text())
    kernels = from_source((GOLDEN / f"{case}_kernels_03_LowerIntrin.tvms").read_text())
    return IRModule({**{gv.name_hint: f for gv, f in kernels.functions_items()},
                     "main": split["main"]}).script(dialect=DIALECT)


# scheduled functions whose lowering tvms reproduces end to end (``*_nocse``: CSE off, in both)
END_TO_END = ["matmul_relu", "matmul_dyn_nocse", "exp_dyn", "vthread", "vthread_local", "reduce_warp", "reduce_tree", "reduce_two_warps",
              "exp_dyn_nocse", "matmul_relu_nocse", "reduce_two_warps_nocse", "vthread_local_nocse",
              "warp_memory_nocse", "dlight_rms_norm_nocse", "dlight_layer_norm_nocse"]


@pytest.mark.parametrize("case", END_TO_END)
def test_lower_for_cuda_prints_what_tvm_compiles(case: str) -> None:
    """The scheduled function lowered end to end: the host function as TVM's SplitHostDevice
    stage, the kernels as TVM hands them to the CUDA code generator."""
    func = from_source((GOLDEN / f"{case}_00_input.tvms").read_text())["main"]
    with PassContext(config={"tirx.disable_cse_tir": case.endswith("_nocse")}):
        lowered = gpu.lower_for_cuda(func, Target("cuda"))
    assert lowered.script(dialect=DIALECT) == tvm_lowered(case)


def test_the_corpus_matmul_comes_out_of_its_schedule() -> None:
    """The corpus's SplitHostDevice stage of the shared-memory matmul is what lower_for_cuda
    makes of the scheduled function (before the device passes)."""
    func = from_source((GOLDEN / "matmul_relu_00_input.tvms").read_text())["main"]
    split = gpu.split_for_cuda(func, Target("cuda"))
    assert split.script(dialect=DIALECT) == (CORPUS_COPY / "lower_matmul_relu_gpu_12_SplitHostDevice.tvms").read_text()


def run_kernels(mod: IRModule, arrays: dict, sizes: dict) -> None:
    """Run the host function of a split module with the reference executor: each
    ``T.call_ffi_kernel`` runs its kernel (its threads one after another)."""
    host = mod["main"]
    values = {buf.data: arrays[buf.name].reshape(-1) for buf in host.buffer_map.values()}
    values.update({v: sizes[v.name] for v in walk(host.body) if isinstance(v, Var) and v.name in sizes})
    for alloc in walk(host.body):  # (a global scratch one kernel writes and the next reads: undefined first)
        if isinstance(alloc, AllocBuffer):
            size = int(np.prod([int(d.value) for d in alloc.buffer.shape]))
            values[alloc.buffer.data] = np.full(size, np.nan, str(alloc.buffer.dtype))
    for call in walk(host.body):
        if isinstance(call, Call) and getattr(call.op, "name", "") == "tir.call_ffi_kernel":
            kernel = mod[call.args[0].value]
            run_prim_func(kernel, *[values[a] for a in call.args[1:1 + len(kernel.params)]])


# the reference executor runs the kernels with GPU semantics (blocks of threads in lock-step,
# barriers, warp shuffles, shared memory); the kernels are those of the SplitHostDevice stage
COMPUTED = ["exp_dyn_nocse", "matmul_dyn_nocse", "vthread", "vthread_local", "intrinsics", "matmul_relu", "reduce_warp", "reduce_tree",
            "reduce_two_warps", "warp_memory", "dlight_rms_norm_nocse", "dlight_softmax_nocse",
            "dlight_argmax_nocse", "dlight_layer_norm_nocse", "layer_norm_tuple_sum"]


def check_kernels(case: str, lowered) -> None:
    """The module ``lowered(func)`` makes of the case's scheduled function (a host function and
    its kernels) computes what the function computes, on random inputs."""
    func = from_source((GOLDEN / f"{case}_00_input.tvms").read_text())["main"]
    rng = np.random.default_rng(3)
    sizes = {"n": 40}
    arrays = {}
    for p in func.params:
        if p in func.buffer_map:
            buf = func.buffer_map[p]
            shape = [sizes.get(getattr(s, "name", None), getattr(s, "value", None)) for s in buf.shape]
            values = rng.uniform(0.5, 4.0, shape) if buf.dtype.is_float else rng.integers(-50, 50, shape)
            arrays[buf.name] = values.astype(str(buf.dtype))
    expected = {name: a.copy() for name, a in arrays.items()}
    run_prim_func(func, *[expected[func.buffer_map[p].name] if p in func.buffer_map else sizes[p.name]
                          for p in func.params])
    got = {name: a.copy() for name, a in arrays.items()}
    run_kernels(lowered(func), got, sizes)
    # (the tuple-sum layer norm's variance, E[x^2] - E[x]^2 in float32 summed in another order,
    # keeps fewer digits where the output is near zero)
    atol = 1e-4 if case.startswith("layer_norm_tuple_sum") else 1e-5
    for name in arrays:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-3, atol=atol, err_msg=name)


@pytest.mark.parametrize("case", COMPUTED)
def test_kernels_compute_what_the_schedule_computes(case: str) -> None:
    check_kernels(case, lambda func: gpu.split_for_cuda(func, Target("cuda")))


# the kernels after the device passes, as the CUDA code generator receives them: LowerIntrin has
# made the warp builtins CUDA's (T.cuda.__shfl_down_sync, __activemask) and the math intrinsics
# calls of CUDA's functions (T.call_pure_extern("float32", "expf", x), "rsqrtf", "hexp", "__clz")
LOWERED = ["intrinsics", "reduce_warp", "reduce_two_warps", "warp_memory",
           pytest.param("dlight_softmax_nocse", marks=pytest.mark.slow),  # (about ten seconds)
           "dlight_rms_norm_nocse", "dlight_argmax_nocse", "dlight_layer_norm_nocse", "layer_norm_tuple_sum"]


def tvm_kernels(case: str) -> IRModule:
    """TVM's host function at SplitHostDevice with its kernels after LowerIntrin."""
    split = from_source(next(GOLDEN.glob(f"{case}_[0-9][0-9]_SplitHostDevice.tvms")).read_text())
    kernels = from_source((GOLDEN / f"{case}_kernels_03_LowerIntrin.tvms").read_text())
    return IRModule({**{gv.name_hint: f for gv, f in kernels.functions_items()}, "main": split["main"]})


@pytest.mark.parametrize("case", LOWERED)
def test_tvms_kernels_after_lower_intrin_compute_what_the_schedule_computes(case: str) -> None:
    """tvms's whole GPU pipeline (DLight's reductions among the schedules) down to LowerIntrin."""
    def lowered(func):
        with PassContext(config={"tirx.disable_cse_tir": case.endswith("_nocse")}):
            return gpu.lower_for_cuda(func, Target("cuda"))
    check_kernels(case, lowered)


@pytest.mark.parametrize("case, start, refused", [
    ("layer_norm_tuple_sum", ("data_red_temp_v0[ax0] = T.float32(0.0)", "data_red_temp_v0[ax0] = T.float32(1.0)"),
     r"T.float32\(1.0\), T.float32\(0.0\), not its reducer's identity \(T.float32\(0.0\), T.float32\(0.0\)\)"),
    ("dlight_argmax_nocse", ("x_red_temp_v0_shared[v0] = T.int64(-1)", "x_red_temp_v0_shared[v0] = T.int64(0)"),
     r"T.int64\(0\), T.float32\(-340282346638528859811704183484516925440.0\), not its reducer's identity "
     r"\(T.int64\(-1\), T.float32\(-340282346638528859811704183484516925440.0\)\)")])
def test_a_reduction_that_does_not_start_from_its_identity_is_refused(case, start, refused) -> None:
    """Each thread's partial result starts from the block's init, so an init other than the
    reducer's identity would be counted once a thread (silently wrong): refused, as TVM 0.27's
    LowerCrossThreadReduction refuses it ("No matched reducer")."""
    text = (GOLDEN / f"{case}_00_input.tvms").read_text()
    assert start[0] in text
    func = from_source(text.replace(*start))["main"]
    with pytest.raises(TVMSError, match=rf"LowerCrossThreadReduction: block '\w+' initializes its reduction with {refused}"):
        gpu.lower_cross_thread_reduction(func)


@pytest.mark.parametrize("init, dtype", [('T.min_value("float32")', "float32"),
                                         ("T.bfloat16(-340282346638528859811704183484516925440.0)", "bfloat16"),
                                         ('T.min_value("bfloat16")', "bfloat16")])
def test_the_identities_tvm_accepts_are_accepted(init: str, dtype: str) -> None:
    """``T.min_value(...)`` as written by hand, and bfloat16's identity as TVM writes it (float32's
    lowest, beyond bfloat16's), start a max reduction as TVM's pass takes them."""
    func = from_source(f'''# from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((128,), "{dtype}"), B: T.Buffer((1,), "{dtype}")):
    for k in T.thread_binding(128, thread="threadIdx.x"):
        with T.block("red"):
            vk = T.axis.reduce(128, k)
            with T.init():
                B[0] = {init}
            B[0] = T.max(B[0], A[vk])
''')
    assert "T.comm_reducer" in gpu.lower_cross_thread_reduction(func).script()


def test_an_argmax_over_fewer_threads_than_a_warp_computes_its_index() -> None:
    """DLight's argmax on 16 threads: the reduction's shuffles read lanes 16 to 23, outside the
    mask, whose values CUDA leaves undefined and the reduction drops; an index (an integer) has
    no undefined mark, and the executor computes the argmax all the same."""
    text = (GOLDEN / "dlight_argmax_nocse_00_input.tvms").read_text().replace("T.int64(256)", "T.int64(16)")
    func = from_source(text)["main"]
    with PassContext(config={"tirx.disable_cse_tir": True}):
        lowered = gpu.lower_for_cuda(func, Target("cuda"))
    assert "__shfl_down_sync" in lowered.script()
    x = np.random.default_rng(5).permutation(64).reshape(4, 16).astype("float32")
    got = {"x": x, "x_red": np.full(4, -7, "int64")}
    run_kernels(lowered, got, {})
    np.testing.assert_array_equal(got["x_red"], x.argmax(axis=1))


@pytest.mark.parametrize("case", LOWERED)
def test_tvm_kernels_after_lower_intrin_compute_what_the_schedule_computes(case: str) -> None:
    """TVM 0.27's own lowered kernels (the goldens), run by the executor."""
    text = (GOLDEN / f"{case}_kernels_03_LowerIntrin.tvms").read_text()
    assert "T.cuda.__shfl" in text or "T.call_pure_extern" in text  # (what this test is about)
    check_kernels(case, lambda func: tvm_kernels(case))


@pytest.mark.parametrize("case", [pytest.param("dlight_matmul_add_relu_nocse", marks=pytest.mark.slow),
                                  pytest.param("dlight_conv2d_nocse", marks=pytest.mark.slow),
                                  "dlight_transpose_nocse", "dlight_softmax_nocse", "dlight_layer_norm_nocse",
                                  "dlight_argmax_nocse"])
def test_lower_for_cuda_lowers_dlight_schedules(case: str) -> None:
    """DLight's schedules (a matmul with dynamic rows, storage-aligned shared tiles, vector loads
    and virtual threads; a conv2d; a transpose; softmax and layer norm with cross-thread
    reductions; an argmax reducing two buffers together) lower to the kernels TVM makes: the same signatures and launches, loop-level
    bodies with flat buffers (the bodies differ where tvms simplifies or narrows less, see
    KNOWN_DIFFERENT)."""
    func = from_source((GOLDEN / f"{case}_00_input.tvms").read_text())["main"]
    with PassContext(config={"tirx.disable_cse_tir": True}):
        lowered = gpu.lower_for_cuda(func, Target("cuda"))
    expected = from_source(tvm_lowered(case))
    assert sorted(lowered) == sorted(expected)
    for name in expected:
        got, want = lowered[name], expected[name]
        assert [p.name for p in got.params] == [p.name for p in want.params]
        assert got.attrs.get("tir.kernel_launch_params") == want.attrs.get("tir.kernel_launch_params")
        assert not any(isinstance(n, (Block, BlockRealize)) for n in walk(got.body))
        assert all(len(n.buffer.shape) == 1 for n in walk(got.body) if isinstance(n, (BufferLoad, BufferStore)))


def test_bad_input_is_a_clear_error() -> None:
    func = from_source((GOLDEN / "exp_dyn_nocse_00_input.tvms").read_text())["main"]
    with pytest.raises(TVMSError, match="target must be cuda"):
        gpu.lower_for_cuda(func, Target("llvm"))
    with pytest.raises(TVMSError, match="expected a PrimFunc"):
        gpu.lower_for_cuda(IRModule({"main": func}), Target("cuda"))
    text = (GOLDEN / "warp_memory_kernels_00_SplitHostDevice.tvms").read_text()
    wide = from_source(text.replace('launch_thread("threadIdx.x", 32)', 'launch_thread("threadIdx.x", 48)'))
    with pytest.raises(TVMSError, match="must divide the warp size"):
        gpu.lower_warp_memory(wide["main_kernel"])


def test_narrow_data_type_keeps_int64_data() -> None:
    """Indices narrow to int32 when they fit; int64 data (an argmax's indices) is never narrowed."""
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((T.int64(8),), "{dtype}")):
        for i in range(T.int64(8)):
            A[i] = A[i] + T.{dtype}(1)
'''
    data = from_source(src.format(dtype="int64"))["main"]
    assert gpu.narrow_data_type(data) is data
    narrowed = gpu.narrow_data_type(from_source(src.format(dtype="float32"))["main"])
    assert "for i in range(8):" in IRModule({"main": narrowed}).script(dialect=DIALECT)


def test_dynamic_shared_memory_is_one_allocation_sized_at_launch():
    """A kernel's shared.dyn buffers become one (MergeSharedMemoryAllocations), whose bytes the
    host passes as the launch's last extent; SplitHostDevice refuses a kernel with two."""
    from tvms.ir.errors import TVMSError
    from tvms.ir.target import Target
    from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
    from tvms.script import from_source

    text = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float16")):
    S = T.alloc_buffer((64,), scope="shared.dyn")
    H = T.alloc_buffer((64,), "float16", scope="shared.dyn")
    for t in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("copy"):
            v = T.axis.spatial(64, t)
            S[v] = A[v]
            H[v] = T.Cast("float16", A[v])
        with T.block("out"):
            v = T.axis.spatial(64, t)
            B[v] = T.Cast("float16", S[63 - v]) + H[63 - v]
'''
    lowered = lower_for_cuda(from_source(text), Target("cuda"))
    kernel = lowered["main_kernel"].script(dialect=DIALECT)
    assert 'buf_dyn_shmem = T.alloc_buffer((384,), "uint8", scope="shared.dyn")' in kernel
    # (as TVM: the smaller first, H's 128 bytes, then S's, 64-byte aligned: at float 32)
    assert "S[threadIdx_x + 32] = A[threadIdx_x]" in kernel and "H[threadIdx_x] = " in kernel
    assert lowered["main_kernel"].attrs["tir.kernel_launch_params"] == ("threadIdx.x", "tirx.use_dyn_shared_memory")
    assert "64, T.int64(384), launch_params=" in lowered["main"].script(dialect=DIALECT)
    unmerged = from_source('''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32")):
    T.func_attr({"target": T.target({"kind": "cuda", "host": {"kind": "llvm"}})})
    with T.launch_thread("threadIdx.x", 64) as tx:
        S = T.alloc_buffer((64,), scope="shared.dyn")
        H = T.alloc_buffer((64,), scope="shared.dyn")
        S[tx] = A[tx]
        H[tx] = S[tx]
''')
    with pytest.raises(TVMSError, match=r"kernel main_kernel has 2 dynamic shared memory allocations \(S, H\)"):
        gpu.split_host_device(IRModule({"main": unmerged}))
    # a symbolic size: its bytes as TVM writes them (the size in int64 times the element's bytes)
    one = from_source('''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32"), n: T.int32):
    T.func_attr({"target": T.target({"kind": "cuda", "host": {"kind": "llvm"}})})
    with T.launch_thread("threadIdx.x", 64) as tx:
        S = T.alloc_buffer((n,), scope="shared.dyn")
        S[tx] = A[tx]
''')
    host = gpu.split_host_device(IRModule({"main": one}))["main"].script(dialect=DIALECT)
    assert 'n, 64, T.Cast("int64", n) * T.int64(4), launch_params=["threadIdx.x", "tirx.use_dyn_shared_memory"]' in host


TWO_BUFFERS = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    with T.launch_thread("threadIdx.x", 64) as threadIdx_x:
        X = T.alloc_buffer((64,), scope="SCOPE")
        Y = T.alloc_buffer((64,), scope="SCOPE")
        X[threadIdx_x] = A[threadIdx_x]
        C[threadIdx_x] = X[63 - threadIdx_x]
        Y[threadIdx_x] = A[threadIdx_x]
        C[threadIdx_x] = C[threadIdx_x] + Y[63 - threadIdx_x]
'''


def test_thread_sync_sees_shared_dyn_as_one_memory() -> None:
    """ThreadSync on shared.dyn, as TVM's planner: every shared.dyn buffer is one memory (merged
    later, buffers that do not live together share bytes), so writing Y after other threads read
    X needs a barrier that two buffers of shared memory do not (TVM 0.27's ThreadSync places 2
    and 3 barriers on this function, as here)."""
    for scope, barriers in (("shared", 2), ("shared.dyn", 3)):
        synced = gpu.ThreadSync(scope)(IRModule({"main": from_source(TWO_BUFFERS.replace("SCOPE", scope))}))["main"]
        assert synced.script().count(f'T.tvm_storage_sync("{scope}")') == barriers, scope
        a, c = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
        run_prim_func(synced, a, c)
        np.testing.assert_array_equal(c, 2 * a[::-1])


def test_thread_sync_sees_merged_static_shared_as_one_memory() -> None:
    """Under tirx.merge_static_smem, MergeSharedMemoryAllocations lays the shared buffers X and Y
    of TWO_BUFFERS over the same bytes (they do not live together), so ThreadSync("shared") treats
    shared memory as one, as shared.dyn: 3 barriers. A deliberate departure from TVM 0.27, which
    places 2 there (the barrier between the read of X[63 - threadIdx_x] and the write of
    Y[threadIdx_x] missing) and then merges X and Y onto one buf_shmem.view("float32"): a race,
    which the reference executor reports."""
    func = from_source(TWO_BUFFERS.replace("SCOPE", "shared"))
    with PassContext(config={"tirx.merge_static_smem": True}):
        synced = gpu.ThreadSync("shared")(IRModule({"main": func}))["main"]
        assert synced.script().count('T.tvm_storage_sync("shared")') == 3
        merged = gpu.merge_shared_memory_allocations(synced)
    racy = gpu.merge_shared_memory_allocations(gpu.thread_sync(func, "shared"), merge_static=True)
    a, c = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    run_prim_func(merged, a, c)
    np.testing.assert_array_equal(c, 2 * a[::-1])
    with pytest.raises(TVMSError, match="race"):  # (the barriers planned without the config)
        run_prim_func(racy, a, c)


def test_thread_sync_takes_an_access_ptr_of_a_bare_buffer() -> None:
    """TVM 0.27 prints T.tvm_access_ptr(t, x_reindex_shared_dyn, ...) with the buffer for its
    data (DLight's tensor-core matmul as TVM's pipeline hands it to MergeSharedMemoryAllocations):
    ThreadSync("shared.dyn") with its barriers taken out puts back the five TVM placed."""
    synced = from_source((FIXTURES / "merge_shared_memory" / "dlight_matmul_f16_before.tvms").read_text())["main"]
    bare = synced.script(dialect=DIALECT)
    assert "T.tvm_access_ptr(T.type_annotation(\"float16\"), x_reindex_shared_dyn, " in bare
    barrier = 'T.tvm_storage_sync("shared.dyn")'
    assert bare.count(barrier) == 5
    stripped = from_source("".join(line for line in bare.splitlines(keepends=True) if barrier not in line))
    assert gpu.thread_sync(stripped, "shared.dyn").script(dialect=DIALECT) == bare



def test_thread_sync_same_element_of_one_buffer_only() -> None:
    """Each thread touching only its own element is no race only within one buffer: X (float32)
    and Y (float16) of shared.dyn are merged over the same bytes, where Y[1] is half of X[0].
    A deliberate departure from TVM 0.27, whose ThreadSync places no barrier here (its merged
    kernel then races: thread 1 writes Y[1] over X[0], which thread 0 read); tvms places one
    before the write of Y."""
    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    with T.launch_thread("threadIdx.x", 64) as threadIdx_x:
        X = T.alloc_buffer((64,), scope="shared.dyn")
        Y = T.alloc_buffer((64,), "float16", scope="shared.dyn")
        X[threadIdx_x] = A[threadIdx_x]
        C[threadIdx_x] = X[threadIdx_x]
        Y[threadIdx_x] = T.Cast("float16", A[threadIdx_x])
        C[threadIdx_x] = C[threadIdx_x] + T.Cast("float32", Y[threadIdx_x])
''')
    synced = gpu.thread_sync(func, "shared.dyn")
    assert 'T.tvm_storage_sync("shared.dyn")\n    Y[threadIdx_x] = ' in synced.script(dialect=DIALECT)
    a, c = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    run_prim_func(gpu.merge_shared_memory_allocations(synced), a, c)
    np.testing.assert_array_equal(c, 2 * a)
    # TVM's kernel (no barrier; one at the end keeps the executor from adding its own) races
    racy = from_source(func.script(dialect=DIALECT).rstrip("\n") + '\n    T.tvm_storage_sync("shared.dyn")\n')
    with pytest.raises(TVMSError, match=r"thread \(threadIdx.x=1\) writes element 1 \(float16, bytes 2 to 3\), which "
                                        r"thread \(threadIdx.x=0\) accessed"):
        run_prim_func(gpu.merge_shared_memory_allocations(racy), a, c)


def test_common_subexpr_elim_binds_before_every_use_of_a_sequence() -> None:
    """An expression first met inside a let (or a buffer declaration) and again after it is bound
    before the let, not inside it, where the later use would read a variable out of its scope
    (seen on the 127^3 mma.sync sketch: the write-back read ``blockIdx_y * 64`` bound around the
    copy before it)."""
    from tvms.lowering.tir.gpu.common_subexpr_elim import common_subexpr_elim

    func = from_source("""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "int32"), n: T.int32):
    with T.LetStmt(n + 1) as m:
        A[n * 4 + 1] = m
        A[n * 4 + 2] = m
    A[n * 4 + 3] = 7
""")
    # (the broken form printed the later use's variable as a free one: ``cse_v1 = T.int32()``)
    assert common_subexpr_elim(func).script().splitlines()[4:] == [
        "    cse_v1: T.int32 = n * 4",
        "    with T.LetStmt(n + 1) as m:",
        "        A[cse_v1 + 1] = m",
        "        A[cse_v1 + 2] = m",
        "    A[cse_v1 + 3] = 7"]


def test_common_subexpr_elim_binds_nothing_above_the_launch_of_its_thread() -> None:
    """``tx * 2 + 1`` in two launches of one thread variable: bound in each launch, not above
    (where ``tx`` is not: it printed as a free ``tx = T.int32()``), so it is left as written."""
    from tvms.lowering.tir.gpu.common_subexpr_elim import common_subexpr_elim

    func = from_source("""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "int32")):
    tx = T.env_thread("threadIdx.x")
    with T.launch_thread(tx, 32):
        A[tx * 2 + 1] = 1
    with T.launch_thread(tx, 32):
        A[tx * 2 + 1] = 2
""")
    assert common_subexpr_elim(func).script() == func.script()


def test_a_kernels_own_allocation_is_not_one_of_its_parameters() -> None:
    """SplitHostDevice's free variables: a ``T.allocate`` inside the region defines its pointer,
    and a buffer over that pointer is the region's own (they were listed as parameters)."""
    from tvms.lowering.tir.gpu.free_vars import undefined

    func = from_source('''
@T.prim_func
def main(A: T.Buffer((16,), "float32")):
    ptr = T.allocate([16], "float32", "local")
    B = T.Buffer((16,), data=ptr, scope="local")
    for i in range(16):
        B[i] = A[i] + T.float32(1)
    for i in range(16):
        A[i] = B[i]
''')
    func = func["main"] if isinstance(func, IRModule) else func
    variables, buffers = undefined(func.body)
    assert [v.name for v in variables] == ["A"] and [b.name for b in buffers] == ["A"]


def test_a_malformed_buffer_dim_align_is_named():
    """TVM's test of an invalid annotation (``[0]``, not [buffer, dim, factor, offset]): it was a
    TypeError in CompactBufferAllocation."""
    text = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.sblock_alloc_buffer((128, 128))
    for i0 in range(128):
        for ax1 in range(128):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i0, ax1])
                T.sblock_attr({"buffer_dim_align": [0]})
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
        for i1 in range(128):
            with T.sblock("C"):
                vi_1, vj_1 = T.axis.remap("SS", [i0, i1])
                C[vi_1, vj_1] = B[vi_1, vj_1] + T.float32(1.0)
'''
    with pytest.raises(TVMSError, match=re.escape("block 'B': the annotation buffer_dim_align is a list of [buffer "
                                                  "index, dim, factor, offset]")):
        tvms.build(from_source(text), target="llvm")
    # (a factor of 0 built code that crashed when called; a dimension past the rank was ignored)
    for entry in ("[[0, 1, 0, 0]]", "[[0, 5, 16, 8]]", "[[0, 1, 16, 16]]"):
        with pytest.raises(TVMSError, match=re.escape("storage_align needs a dimension of the buffer, a factor "
                                                      "above 0 and an offset in [0, factor)")):
            tvms.build(from_source(text.replace('"buffer_dim_align": [0]', f'"buffer_dim_align": {entry}')),
                       target="llvm")


UNBOUND = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), n: T.int32):
    for i in T.thread_binding(64, thread="threadIdx.x"):
        B[i] = A[i] * T.float32(2)
    for i in range(n):
        B[i] = B[i] + T.float32(1)
'''


def test_verify_memory_refuses_a_host_access_of_a_device_buffer() -> None:
    """A loop left unbound to threads would run on the host, through device pointers (a crash
    where a GPU runs it; TVM 0.27 builds it so): refused at the access, in a loop or not (a store
    keeps its position through FlattenBuffer)."""
    func = from_source(UNBOUND, name="unbound.tvms")
    with pytest.raises(TVMSError, match=r"unbound.tvms:7:9: error: the host function writes 'B', a buffer "
                                        r"argument in device memory, outside any kernel: the access must run under "
                                        r"a loop bound to GPU threads"):
        gpu.lower_for_cuda(func, Target("cuda"))
    top = from_source(UNBOUND.replace("    for i in range(n):\n        B[i] = B[i] + T.float32(1)\n",
                                      "    B[0] = T.float32(1)\n"), name="top.tvms")
    with pytest.raises(TVMSError, match=r"top.tvms:6:5: error: the host function writes 'B'"):
        gpu.lower_for_cuda(top, Target("cuda"))
    bound = UNBOUND.replace("for i in range(n):", 'for i in T.thread_binding(64, thread="threadIdx.x"):')
    assert "main_kernel" in [gv.name_hint for gv in gpu.lower_for_cuda(from_source(bound), Target("cuda")).get_global_vars()]
    # the registered pass checks a function bound to a GPU target only
    on_gpu = IRModule({"main": func.with_attr("target", gpu.cuda_target_attr(Target("cuda")))})
    with pytest.raises(TVMSError, match="the host function writes 'B'"):
        get_pass("VerifyMemory")(on_gpu)
    on_cpu = IRModule({"main": func})
    assert get_pass("VerifyMemory")(on_cpu)["main"] is func


def test_a_shared_buffer_under_launch_thread_spans_every_thread() -> None:
    """CompactBufferAllocation relaxes the threads launched by ``T.launch_thread`` around a block
    as it does thread-bound loops: a shared buffer written by each ``threadIdx.x`` keeps its 32
    rows, as TVM's lowering keeps them (a TVM async-copy test). Compacted to one row, the
    threads raced on it."""
    from tvms.lowering.tir.gpu.pipeline import lower_for_cuda

    func = from_source('''
@T.prim_func
def main(A: T.Buffer((32, 128), "float32"), B: T.Buffer((32, 128), "float32")):
    bx = T.launch_thread("blockIdx.x", 1)
    tx = T.launch_thread("threadIdx.x", 32)
    with T.block(""):
        A_shared = T.alloc_buffer((32, 128), scope="shared")
        for i in range(128):
            A_shared[tx, i] = A[tx, i]
        for i in range(128):
            B[tx, i] = A_shared[tx, i] + T.float32(1)
''')
    lowered = lower_for_cuda(func, Target("cuda -arch=sm_80"))
    assert "__shared__ alignas(64) float A_shared_ptr[4096];" in tvms.build(func, target="cuda -arch=sm_80").get_source()
    a = np.random.default_rng(3).random((32, 128), dtype=np.float32)
    b = np.zeros((32, 128), "float32")
    run_prim_func(lowered, a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_a_view_of_an_allreduce_result_goes_with_its_allocation() -> None:
    """LowerThreadAllreduce replaces the result buffer of a ``T.tvm_thread_allreduce`` by its own
    register; a ``T.decl_buffer`` over the result's data goes too. It stayed, so its data became
    a kernel parameter that the host passed unbound (13 texts of TVM's tests)."""
    from tvms.lowering.tir.gpu.pipeline import lower_for_cuda

    func = from_source('''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32,), "float32")):
    threadIdx_y = T.launch_thread("threadIdx.y", 32)
    red = T.alloc_local((1,))
    with T.launch_thread("threadIdx.x", 32) as threadIdx_x:
        red_1 = T.decl_buffer((1,), data=red.data, scope="local")
        with T.attr(T.comm_reducer(lambda x0, y0: x0 + y0, [T.float32(0.0)]), "reduce_scope", 0):
            A_1 = A.view(1024)
            T.tvm_thread_allreduce(T.uint32(1), A_1[threadIdx_y * 32 + threadIdx_x], T.bool(True), red_1[0], threadIdx_x)
        if threadIdx_x == 0:
            B_1 = T.decl_buffer((32,), data=B.data)
            B_1[threadIdx_y] = red_1[0]
''')
    lowered = lower_for_cuda(func, Target("cuda -arch=sm_80"))
    assert [p.name for p in lowered["main_kernel"].params] == ["A_ptr", "B_ptr"]
    source = tvms.build(func, target="cuda -arch=sm_80").get_source()
    assert "red" not in re.search(r"main_kernel\(([^)]*)\)", source).group(1)
