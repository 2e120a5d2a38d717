"""CUDA C generation and NVRTC compilation, against TVM 0.27's CUDA source.

The goldens in ``fixtures/cuda_codegen`` are TVM's (``generate_with_tvm.py``): for each case,
``<case>.tvms`` is the module after ``SplitHostDevice``, ``<case>.device.tvms`` its kernels after
TVM's device passes (what TVM's code generator reads) and ``<case>.cu`` the CUDA C TVM renders
from those. tvms lowers the first with its own device passes (``finalize_kernels``: LowerIntrin
owns math functions, floor division, sigmoid and warp shuffles) and renders the result, and
renders TVM's device stage as it is: both give TVM's text byte for byte, but for a few cases where
TVM's ``StmtSimplify`` folds constants before LowerIntrin; there (and everywhere) the signatures,
arrays, fragments, barriers and shuffles are compared, and every kernel is compiled by NVRTC.
"""
from __future__ import annotations

import functools
import os
import pickle
import re
import signal
import sys

import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.target import Target
from tvms.lowering.codegen import nvrtc, nvrtc_worker
from tvms.lowering.codegen.cuda import codegen_cuda, cuda_source, kernels_of
from tvms.lowering.tir.gpu.lower_intrin_cuda import lower_cuda_intrin
from tvms.lowering.tir.gpu.pipeline import finalize_kernels
from tvms.script import from_source

from conftest import CORPUS_COPY, FIXTURES
from cuda_support import assert_compiles, kernels_source

GOLDEN = FIXTURES / "cuda_codegen"
CASES = sorted(p.name[:-len(".cu")] for p in GOLDEN.glob("*.cu"))
# TVM's simplifier reorders the floor divisions' sum (test_floor_division_is_lowered_as_tvm) and
# folds constants into the DLight matmuls' shared-memory offsets (18432 + (x + 1152) is x + 19584)
SIMPLIFIER_DIFFERS = {"floor_division", "dlight_matmul_f16", "dlight_matmul_dyn"}


def module(case: str, stage: str = "tvms"):
    path = GOLDEN / f"{case}.{stage}"
    return from_source(path.read_text(), str(path))


def golden(case: str) -> str:
    return (GOLDEN / f"{case}.cu").read_text()


@functools.cache
def lowered(case: str):
    """The case's SplitHostDevice stage with tvms's device passes run on its kernels."""
    return finalize_kernels(module(case))


def test_source_is_tvms_byte_for_byte():
    assert len(CASES) >= 24
    for case in CASES:
        assert cuda_source(kernels_of(module(case, "device.tvms"))) == golden(case), f"{case}.device.tvms"
        if case not in SIMPLIFIER_DIFFERS:
            assert cuda_source(kernels_of(lowered(case))) == golden(case), case


def test_floor_division_is_lowered_as_tvm():
    """Each floor division and modulo (of values that may be negative) becomes what TVM's
    LowerIntrin makes of it: TVM's source has the same terms, in the order its simplifier chose."""
    ours, theirs = cuda_source(kernels_of(lowered("floor_division"))), golden("floor_division")
    tx = "((int)threadIdx.x)"
    terms = [f"(((({tx} - 5) + 7) / 7) - 1)",  # a known range: shifted into the non-negative one
             "((n / 7) + ((n % 7) >> 31))",  # sign of n unknown: correct by the remainder's sign
             "((((j - 3) + 5) / 5) - 1)",
             "((j - 3) >> 2)",  # by a power of two
             f"((n % ({tx} + 1)) + (({tx} + 1) & ((n % ({tx} + 1)) >> 31)))"]
    for term in terms:
        assert term in ours and term in theirs, term


BF16_KERNEL = """
@T.prim_func
def k(A_ptr: T.handle("bfloat16", "global"), B_ptr: T.handle("int8", "global")):
    T.func_attr({"calling_conv": 2, "target": T.target({"arch": "sm_80", "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "", "thread_warp_size": 32}), "tirx.is_global_func": True, "tirx.kernel_launch_params": ["threadIdx.x"], "tirx.noalias": True})
    A = T.decl_buffer((1024,), "bfloat16", data=A_ptr)
    B = T.decl_buffer((1024,), "int8", data=B_ptr)
    with T.launch_thread("threadIdx.x", 64) as tx:
        A[tx] = T.exp(A[tx]) + T.sigmoid(A[tx + 1])
        B[tx] = B[tx] // T.int8(3) + B[tx] % T.int8(3)
"""


def test_lower_intrin_spells_bfloat16_sigmoid_and_int8_division_as_tvm():
    """What TVM 0.27's LowerIntrin prints for this kernel: the exp of a bfloat16 is hexp, but the
    sigmoid's (TVM's C++ exp) runs in float32; an int8 floor division is corrected by a select."""
    func = lower_cuda_intrin(from_source(BF16_KERNEL))
    text = [line.strip() for line in func.script(dialect="tvm-0.27").splitlines()]
    assert text[-2:] == [
        'A[tx] = T.call_pure_extern("bfloat16", "hexp", A[tx]) + T.bfloat16(1.0) / (T.bfloat16(1.0) + T.Cast("bfloat16", T.call_pure_extern("float32", "expf", T.Cast("float32", T.bfloat16(0.0) - A[tx + 1]))))',
        'B[tx] = T.Select(T.truncmod(B[tx], T.int8(3)) >= T.int8(0), T.Div(B[tx], T.int8(3)), T.Div(B[tx], T.int8(3)) - T.int8(1)) + T.Select(T.truncmod(B[tx], T.int8(3)) >= T.int8(0), T.truncmod(B[tx], T.int8(3)), T.truncmod(B[tx], T.int8(3)) + T.int8(3))']


def _parts(source: str) -> dict:
    """What a kernel source must keep whatever the simplifier did: the function signatures, the
    shared and register arrays, the barriers, the warp shuffles and the preamble's sections."""
    body = source[source.index('extern "C"'):]
    return {"signatures": re.findall(r'^extern "C" .*$', body, re.M),
            # (their types and sizes: TVM's printer renames a second t0 to t0_1, TVM's C names it t0_ptr_1)
            "arrays": re.findall(r"^\s*((?:extern )?(?:__shared__ )?(?:alignas|__align__)\(\d+\) [\w ]+?) \w+(\[\d*\]);", body, re.M),
            "fragments": re.findall(r"^\s*(nvcuda::wmma::fragment<.*>) \w+(\[\d+\]);", body, re.M),
            "wmma": re.findall(r"nvcuda::wmma::\w+_sync\(|nvcuda::wmma::fill_fragment\(", body),
            "barriers": body.count("__syncthreads();"),
            "shuffles": re.findall(r"__shfl\w*\(", body),
            "preamble": source[:source.index('extern "C"')]}


def test_kernels_match_tvm_and_compile():
    for case in CASES:
        assert _parts(cuda_source(kernels_of(lowered(case)))) == _parts(golden(case)), case
    # every kernel of every case, in one source, for sm_80 and sm_90
    binaries = assert_compiles(kernels_source([lowered(case) for case in CASES]))
    assert all(b.startswith(b"\x7fELF") for b in binaries.values())


def test_codegen_cuda_artifact():
    mod = lowered("two_kernels")
    artifact = codegen_cuda(mod, Target("cuda -arch=sm_90"), "two_kernels")
    assert [k.name for k in artifact.kernels] == ["two_kernels_kernel", "two_kernels_kernel_1"]
    assert artifact.kernel("two_kernels_kernel_1").launch_params == ("blockIdx.x", "threadIdx.x")
    assert artifact.kernel("two_kernels_kernel").func is mod["two_kernels_kernel"]
    assert artifact.host is mod["main"] and artifact.symbol == "two_kernels"
    assert (artifact.arch, artifact.binary_format) == ("sm_90", "cubin")
    assert artifact.binary.startswith(b"\x7fELF") and artifact.source == cuda_source(kernels_of(mod))
    assert "__launch_bounds__(8) two_kernels_kernel_1(" in artifact.source
    # without -arch: PTX for sm_80, which the driver compiles for the GPU it finds
    ptx = codegen_cuda(lowered("reduce_warp"), Target("cuda"), "main")
    assert (ptx.arch, ptx.binary_format) == ("sm_80", "ptx")
    assert b".target sm_80" in ptx.binary and b".entry reduce_warp_kernel(" in ptx.binary


def test_unsupported_kernels_are_refused():
    # the corpus kernel allocates a global array Y: CUDA kernels cannot (TVM refuses it too)
    corpus = from_source((CORPUS_COPY / "lower_matmul_relu_gpu_12_SplitHostDevice.tvms").read_text())
    with pytest.raises(TVMSError, match="cannot allocate global memory"):
        cuda_source(kernels_of(corpus))
    text = (GOLDEN / "misc.tvms").read_text()
    atomic = 'T.call_extern("float32", "atomicAdd", T.address_of(C[0]), B[cse_v1])'
    assert atomic in text
    packed = kernels_of(finalize_kernels(from_source(text.replace(atomic, 'T.call_packed("host_function", B[cse_v1])'))))
    with pytest.raises(TVMSError, match="no rendering for T.tvm_call_packed"):
        cuda_source(packed)
    with pytest.raises(TVMSError, match="expects one host function beside the kernels, found none"):
        codegen_cuda(module("hand_written"), Target("cuda"), "main")  # (kernels only)
    # the renderer renders what it is given: a kernel that LowerIntrin did not lower is refused
    with pytest.raises(TVMSError, match="no rendering for T.exp"):
        cuda_source(kernels_of(module("math_fp32")))
    with pytest.raises(TVMSError, match="cannot render FloorDiv"):
        cuda_source(kernels_of(module("floor_division")))


BAD = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_name;\n}\n'


def test_nvrtc_errors_show_the_source_line_and_cache_by_content():
    with pytest.raises(TVMSError) as err:
        nvrtc.compile_cuda(BAD, "sm_80", "ptx")
    message = str(err.value)
    assert 'tvms_kernels.cu:2: error: identifier "undefined_name" is undefined' in message
    assert message.endswith("\n  2 |   a[0] = undefined_name;\n    |          ^")  # (the caret under the u)
    good = BAD.replace("undefined_name", "1.0f")
    first = nvrtc.compile_cuda(good, "sm_80", "ptx")
    assert first.startswith(b"//") and nvrtc.compile_cuda(good, "compute_80", "ptx") is first
    with pytest.raises(TVMSError, match="makes ptx or cubin"):
        nvrtc.compile_cuda(good, "sm_80", "fatbin")
    with pytest.raises(TVMSError, match="unknown CUDA architecture"):
        nvrtc.compile_cuda(good, "volta", "ptx")


def test_missing_nvrtc_or_headers_name_the_package(monkeypatch):
    # (compile_here: the NVRTC worker's work, in this process, where the monkeypatches are)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    with pytest.raises(TVMSError, match="nvidia-cuda-nvrtc-cu12"):
        nvrtc.compile_here(BAD + "// new\n", "80", False, ())
    monkeypatch.undo()
    everywhere = nvrtc._candidates  # (wheels and toolkits: none has libcu++ now)
    monkeypatch.setattr(nvrtc, "_candidates", lambda module, major: [
        d for d in everywhere(module, major) if not (d / "cuda/std/cstdint").is_file()])
    major = nvrtc._nvrtc_major()  # (the wheel named is that of NVRTC's CUDA version)
    with pytest.raises(TVMSError, match="pip install nvidia-cuda-cccl" + ("$" if major >= 13 else "-cu12$")):
        nvrtc.include_dirs(major)
    if nvrtc._nvrtc_major() >= 13:  # (CUDA 13's wheels keep mma.h's headers beside cuda_fp16.h)
        return
    monkeypatch.undo()
    real = nvrtc.importlib.util.find_spec
    monkeypatch.setattr(nvrtc, "_toolkit_includes", lambda major: [])  # (no toolkit to fall back on)
    # without the nvcc wheel a tensor-core kernel cannot include mma.h: the error names the wheel
    monkeypatch.setattr(nvrtc.importlib.util, "find_spec",
                        lambda name: None if name == "nvidia.cuda_nvcc" else real(name))
    with pytest.raises(TVMSError) as err:
        nvrtc.compile_here("#include <mma.h>\n", "80", False, ())
    assert 'mma.h:' in str(err.value) and 'cannot open source file "crt/mma.h"' in str(err.value)
    assert "pip install nvidia-cuda-nvcc-cu12" in str(err.value) and " | " not in str(err.value)


# wgmma with constant zero descriptors: NVRTC 12.9's PTX assembler dies on it (a segmentation fault)
WGMMA = """
extern "C" __global__ void k(float* out) {
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(0ULL), "l"(0ULL));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];
}
"""


def test_a_crash_of_nvrtc_is_an_error_and_the_next_compile_works():
    """NVRTC runs in a worker process: where it dies (as NVRTC 12.9 does on WGMMA), this process
    gets a TVMSError saying so, and the next compile starts a new worker."""
    try:
        nvrtc.compile_cuda(WGMMA, "sm_90a", "cubin")
    except TVMSError as err:
        assert re.match(r"the process running NVRTC died compiling the CUDA source for sm_90a \(signal SIG[A-Z]+\)",
                        str(err))
    assert nvrtc.compile_cuda(WGMMA.replace("0ULL", "7ULL"), "sm_90a", "cubin")


def test_a_worker_that_dies_mid_compile_is_an_error_and_then_replaced(monkeypatch):
    """The crash path on any NVRTC: the worker killed as the request is sent."""
    framed = nvrtc_worker._framed

    def kill_then_frame(value):
        if value[0] == "compile_here":
            os.kill(nvrtc_worker._worker.pid, signal.SIGKILL)
            nvrtc_worker._worker.wait()
        return framed(value)

    nvrtc.compile_cuda(BAD.replace("undefined_name", "2.0f"), "sm_80", "ptx")  # (a worker running)
    monkeypatch.setattr(nvrtc_worker, "_framed", kill_then_frame)
    with pytest.raises(TVMSError, match=re.escape("the process running NVRTC died compiling the CUDA source for "
                                                  "compute_80 (signal SIGKILL)")):
        nvrtc.compile_cuda(BAD.replace("undefined_name", "3.0f"), "sm_80", "ptx")
    monkeypatch.undo()
    assert nvrtc.compile_cuda(BAD.replace("undefined_name", "4.0f"), "sm_80", "ptx").startswith(b"//")


def test_a_worker_that_cannot_start_says_why(monkeypatch, tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho this interpreter is broken >&2\nexit 3\n")
    broken.chmod(0o755)
    nvrtc_worker._stop()  # (a worker of its own)
    monkeypatch.setattr(sys, "executable", str(broken))
    with pytest.raises(TVMSError, match="the process that runs NVRTC did not start: this interpreter is broken"):
        nvrtc.compile_cuda(BAD.replace("undefined_name", "5.0f"), "sm_80", "ptx")


def test_an_interrupted_compile_does_not_answer_the_next_one(monkeypatch):
    """An interrupt while the worker works (Jupyter's stop button) ends that worker: its late
    answer cannot be taken for the next compile's."""
    def interrupted(stream):  # (while the worker works: its answer is still to come, in the pipe)
        raise KeyboardInterrupt

    nvrtc.compile_cuda(BAD.replace("undefined_name", "6.0f"), "sm_80", "ptx")
    monkeypatch.setattr(nvrtc_worker, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nvrtc.compile_cuda('extern "C" __global__ void slow(float* a) { a[0] = 7.0f; }\n', "sm_80", "ptx")
    monkeypatch.undo()
    fast = nvrtc.compile_cuda('extern "C" __global__ void fast(float* a) { a[0] = 8.0f; }\n', "sm_80", "ptx")
    assert b".entry fast(" in fast and b"slow" not in fast


def test_the_worker_leaves_ctrl_c_to_this_process_and_prints_aside(monkeypatch, tmp_path):
    """Ctrl-C reaches the terminal's whole process group: an idle worker lives on. Whatever prints
    at its start (a sitecustomize) goes to its log, not into its answers."""
    (tmp_path / "sitecustomize.py").write_text("print('a stray line at startup')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    nvrtc_worker._stop()  # (a worker of its own)
    nvrtc.compile_cuda(BAD.replace("undefined_name", "9.0f"), "sm_80", "ptx")
    worker = nvrtc_worker._worker
    os.kill(worker.pid, signal.SIGINT)
    assert nvrtc.compile_cuda(BAD.replace("undefined_name", "10.0f"), "sm_80", "ptx").startswith(b"//")
    assert nvrtc_worker._worker is worker and worker.poll() is None
    nvrtc_worker._end(worker, kill=True)


def test_an_interrupt_while_the_worker_starts_ends_it(monkeypatch):
    ended = []
    real_end = nvrtc_worker._end

    def end(worker, kill):
        ended.append(worker)
        return real_end(worker, kill)

    def interrupted(stream):
        raise KeyboardInterrupt

    nvrtc_worker._stop()  # (a worker of its own)
    old = nvrtc_worker._worker
    monkeypatch.setattr(nvrtc_worker, "_end", end)
    monkeypatch.setattr(nvrtc_worker, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nvrtc.compile_cuda(BAD.replace("undefined_name", "11.0f"), "sm_80", "ptx")
    started = [w for w in ended if w is not old]
    assert len(started) == 1 and started[0].poll() is not None


def test_an_unreadable_answer_or_request_is_told_apart_from_a_crash(monkeypatch):
    nvrtc.compile_cuda(BAD.replace("undefined_name", "12.0f"), "sm_80", "ptx")
    worker = nvrtc_worker._worker
    with pytest.raises(Exception) as err:  # (a request that does not pickle: the worker is left as it was)
        nvrtc_worker.run("compile_here", lambda: 0, doing="compiling")
    assert not isinstance(err.value, TVMSError) and nvrtc_worker._worker is worker and worker.poll() is None

    def garbled(stream):
        raise pickle.UnpicklingError("garbled")

    monkeypatch.setattr(nvrtc_worker, "_receive", garbled)
    with pytest.raises(TVMSError, match="the process running NVRTC gave an unreadable answer compiling the CUDA "
                                        "source for compute_80; it was ended"):
        nvrtc.compile_cuda(BAD.replace("undefined_name", "13.0f"), "sm_80", "ptx")
    assert worker.poll() is not None


def test_headers_come_from_nvrtcs_own_cuda_version(monkeypatch, tmp_path) -> None:
    """Without NVIDIA's wheels at all (a toolkit-only machine) the search goes on to a toolkit
    rather than failing in the import system; a toolkit is taken only for NVRTC's own CUDA major
    version (its cuda.h says which), since headers of another version may not compile."""
    from tvms.ir.nvidia_wheels import package_folders

    toolkit = tmp_path / "cuda"
    for header in ("include/cuda.h", "include/cuda_fp16.h", "include/cccl/cuda/std/cstdint"):
        (toolkit / header).parent.mkdir(parents=True, exist_ok=True)
        (toolkit / header).write_text("#define CUDA_VERSION 12080\n" if header.endswith("cuda.h") else "")
    monkeypatch.setitem(sys.modules, "nvidia", None)  # (the namespace package is not installed)
    monkeypatch.setattr(nvrtc, "_TOOLKIT_DEFAULT", str(toolkit))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert package_folders("nvidia.cuda_runtime") == []
    assert nvrtc.include_dirs(12) == [str(toolkit / "include"), str(toolkit / "include/cccl")]
    with pytest.raises(TVMSError, match="needs cuda_fp16.h from the nvidia-cuda-runtime wheel"):
        nvrtc.include_dirs(13)


def test_a_function_without_a_symbol_names_its_kernel_apart_from_the_others():
    """tvms.build gives a PrimFunc without a ``global_symbol`` its name as one (as TVM's build
    does for a legalized operator), numbered where another function's symbol already has it, so
    the module's kernels have distinct names and its source compiles as one unit."""
    import tvms
    from tvms.ir.module import IRModule

    func = from_source('''
@T.prim_func(private=True)
def f(a: T.Buffer((64,), "float32")):
    for i in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("b"):
            vi = T.axis.spatial(64, i)
            a[vi] = a[vi] + T.float32(1)
''')
    lib = tvms.build(IRModule({"f": func, "g": func.with_attr("global_symbol", "f"), "h": func}), target="cuda -arch=sm_80")
    names = re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", lib.get_source())
    assert sorted(set(names)) == ["f_1_kernel", "f_kernel", "h_kernel"]
    assert_compiles(lib.get_source())


def test_two_functions_with_one_symbol_are_refused_as_tvm_refuses_them():
    """Two PrimFuncs whose ``global_symbol`` is the same would export one symbol twice: TVM
    0.27's build refuses them ("Duplicate PrimFunc global_symbol"), and so does tvms's, naming
    both functions (for llvm as for cuda, before anything is compiled)."""
    import tvms
    from tvms.ir.module import IRModule

    func = from_source('''
@T.prim_func
def f(a: T.Buffer((4,), "float32")):
    a[0] = T.float32(1)
''')
    mod = IRModule({"a": func.with_attr("global_symbol", "main"), "b": func.with_attr("global_symbol", "main")})
    for target in ("llvm", "cuda -arch=sm_80"):
        with pytest.raises(TVMSError, match="duplicate PrimFunc global_symbol 'main': the functions 'a' and 'b'"):
            tvms.build(mod, target=target)


def test_a_guard_the_same_for_every_lane_of_a_vectorized_load_stays_a_scalar_branch():
    """A ``T.if_then_else`` in a vectorized loop whose condition does not vary by lane (a padded
    row, dlight's GEMV) keeps its scalar condition around the vector load, as TVM's
    VectorizeLoop keeps it: a broadcast condition rendered ``if (make_ushort4(...))`` did not
    compile. A condition written as a vector of conditions is refused by name."""
    import tvms

    func = from_source('''
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"), n: T.int32):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        for j in T.vectorized(4):
            B[i, j] = T.if_then_else(i < n, A[i, j], T.float32(0.0))
''')
    source = tvms.build(func, target="cuda -arch=sm_90a").get_source()
    assert "if (((int)threadIdx.x) < n) {" in source and "make_ushort4" not in source
    assert_compiles(source)
    broadcast = from_source('''
@T.prim_func
def main(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32"), n: T.int32):
    for i in T.thread_binding(8, thread="threadIdx.x"):
        B[T.Ramp(i * 4, 1, 4)] = T.if_then_else(T.Broadcast(i < n, 4), A[T.Ramp(i * 4, 1, 4)], T.Broadcast(T.float32(0.0), 4))
''')
    assert_compiles(tvms.build(broadcast, target="cuda -arch=sm_90a").get_source())
    # broadcasts compared are the same in every lane too: one branch on the scalars
    compared = from_source(broadcast.script().replace("T.Broadcast(i < n, 4)", "T.Broadcast(i, 4) < T.Broadcast(n, 4)"))
    source = tvms.build(compared, target="cuda -arch=sm_90a").get_source()
    assert "if (((int)threadIdx.x) < n) {" in source
    assert_compiles(source)
    by_lane = from_source(broadcast.script().replace("T.Broadcast(i < n, 4)", "T.Ramp(i, 1, 4) < T.Broadcast(n, 4)"))
    with pytest.raises(TVMSError, match="not a vector of 4 conditions that may differ"):
        tvms.build(by_lane, target="cuda -arch=sm_90a")


@pytest.mark.parametrize("dtype", ["int32", "uint32", "float32", "int8", "int16"])
def test_a_broadcast_into_a_type_holding_several_lanes_per_component_compiles(dtype):
    """An 8-lane vector whose CUDA type holds two lanes per component (``int32x8`` as
    ``longlong4``, ``float32x8`` as ``ulonglong4``) or four (``int8x8`` as ``int2``) is broadcast
    lane by lane: ``make_longlong4`` with eight arguments did not compile (a CSE'd vector index
    of a dlight GEMV kernel)."""
    import tvms

    func = from_source(f'''
@T.prim_func
def main(A: T.Buffer((64,), "{dtype}"), B: T.Buffer((64,), "{dtype}"), n: T.{dtype}):
    for i in T.thread_binding(8, thread="threadIdx.x"):
        B[T.Ramp(i * 8, 1, 8)] = A[T.Ramp(i * 8, 1, 8)] + T.Broadcast(n, 8)
''')
    source = tvms.build(func, target="cuda -arch=sm_90a").get_source()
    assert "make_longlong4(n, n" not in source and "make_ulonglong4(n, n" not in source
    assert "make_int2(n, n" not in source and "make_int4(n, n" not in source
    assert_compiles(source)
