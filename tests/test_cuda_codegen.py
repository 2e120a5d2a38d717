"""CUDA C generation and NVRTC compilation, against TVM 0.27's CUDA source.

The goldens in ``fixtures/cuda_codegen`` are TVM's (``generate_with_tvm.py``): for each case,
``<case>.tvms`` is the module after ``SplitHostDevice`` (what the cuda row's ``lower`` returns),
``<case>.device.tvms`` its kernels after TVM's device passes (what TVM's code generator reads) and
``<case>.cu`` the CUDA C TVM renders from those. tvms renders the same text byte for byte from both
stages, but for a few cases where TVM's ``StmtSimplify`` folds constants before rendering; there
(and everywhere) the signatures, arrays, fragments, barriers and shuffles are compared, and every
kernel is compiled by NVRTC.
"""
from __future__ import annotations

import re
import sys

import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.target import Target
from tvms.lowering.codegen import nvrtc
from tvms.lowering.codegen.cuda import codegen_cuda, cuda_source, kernels_of
from tvms.script import from_source

from conftest import CORPUS_COPY, FIXTURES
from cuda_support import assert_compiles, kernels_source

GOLDEN = FIXTURES / "cuda_codegen"
CASES = sorted(p.name[:-len(".cu")] for p in GOLDEN.glob("*.cu"))
# TVM prints the device stages of reductions with warp shuffles as T.cuda.__shfl_down_sync (after
# its LowerIntrin), which tvms does not read; their SplitHostDevice stages are compared
NO_DEVICE_TEXT = {case for case in CASES if "T.cuda." in (GOLDEN / f"{case}.device.tvms").read_text()}
# floor_division: TVM's simplifier reorders the sum's terms (test_floor_division_is_lowered_as_tvm);
# the DLight matmuls and conv2d: it folds constants into the shared-memory offsets (18432 + (x +
# 1152) is x + 19584 in TVM's text) and simplifies vector index arithmetic
SPLIT_STAGE_DIFFERS = {"floor_division", "dlight_matmul_f16", "dlight_matmul_dyn", "dlight_conv2d"}


def module(case: str, stage: str = "tvms"):
    path = GOLDEN / f"{case}.{stage}"
    return from_source(path.read_text(), str(path))


def golden(case: str) -> str:
    return (GOLDEN / f"{case}.cu").read_text()


def test_source_is_tvms_byte_for_byte():
    assert len(CASES) >= 23 and len(NO_DEVICE_TEXT) <= 6
    for case in CASES:
        stages = [stage for stage, skip in (("tvms", SPLIT_STAGE_DIFFERS), ("device.tvms", NO_DEVICE_TEXT))
                  if case not in skip]
        for stage in stages:
            source = cuda_source(kernels_of(module(case, stage)), device_passes_done=stage == "device.tvms")
            assert source == golden(case), f"{case}.{stage}"


def test_floor_division_is_lowered_as_tvm():
    """Each floor division and modulo (of values that may be negative) becomes what TVM's
    LowerIntrin makes of it: TVM's source has the same terms, in the order its simplifier chose."""
    ours, theirs = cuda_source(kernels_of(module("floor_division"))), golden("floor_division")
    tx = "((int)threadIdx.x)"
    terms = [f"(((({tx} - 5) + 7) / 7) - 1)",  # shifted into the non-negative range
             "((n / 7) + ((n % 7) >> 31))",  # sign of n unknown: correct by the remainder's sign
             "((((j - 3) + 5) / 5) - 1)",
             "((j - 3) >> 2)",  # by a power of two
             f"((n % ({tx} + 1)) + (({tx} + 1) & ((n % ({tx} + 1)) >> 31)))"]
    for term in terms:
        assert term in ours and term in theirs, term


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


def test_split_stage_kernels_match_tvm_and_compile():
    modules = [module(case) for case in CASES]
    for case, mod in zip(CASES, modules):
        assert _parts(cuda_source(kernels_of(mod))) == _parts(golden(case)), case
    # every kernel of every case, in one source, for sm_80 and sm_90
    binaries = assert_compiles(kernels_source(modules))
    assert all(b.startswith(b"\x7fELF") for b in binaries.values())


def test_codegen_cuda_artifact():
    mod = module("two_kernels")
    artifact = codegen_cuda(mod, Target("cuda -arch=sm_90"), "two_kernels")
    assert [k.name for k in artifact.kernels] == ["two_kernels_kernel", "two_kernels_kernel_1"]
    assert artifact.kernel("two_kernels_kernel_1").launch_params == ("blockIdx.x", "threadIdx.x")
    assert artifact.kernel("two_kernels_kernel").func is mod["two_kernels_kernel"]
    assert artifact.host is mod["main"] and artifact.symbol == "two_kernels"
    assert (artifact.arch, artifact.binary_format) == ("sm_90", "cubin")
    assert artifact.binary.startswith(b"\x7fELF") and artifact.source == cuda_source(kernels_of(mod))
    assert "__launch_bounds__(8) two_kernels_kernel_1(" in artifact.source
    # without -arch: PTX for sm_80, which the driver compiles for the GPU it finds
    ptx = codegen_cuda(module("reduce_warp"), Target("cuda"), "main")
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
    packed = kernels_of(from_source(text.replace(atomic, 'T.call_packed("host_function", B[cse_v1])')))
    with pytest.raises(TVMSError, match="no rendering for T.tvm_call_packed"):
        cuda_source(packed)
    with pytest.raises(TVMSError, match="expects one host function beside the kernels, found none"):
        codegen_cuda(module("hand_written"), Target("cuda"), "main")  # (kernels only)


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
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    with pytest.raises(TVMSError, match="nvidia-cuda-nvrtc-cu12"):
        nvrtc.compile_cuda(BAD + "// new\n", "sm_80", "ptx")
    monkeypatch.undo()
    real = nvrtc.importlib.util.find_spec
    monkeypatch.setattr(nvrtc.importlib.util, "find_spec",
                        lambda name: None if name == "nvidia.cuda_cccl" else real(name))
    with pytest.raises(TVMSError, match="pip install nvidia-cuda-cccl-cu12"):
        nvrtc.include_dirs()
    # without the nvcc wheel a tensor-core kernel cannot include mma.h: the error names the wheel
    monkeypatch.setattr(nvrtc.importlib.util, "find_spec",
                        lambda name: None if name == "nvidia.cuda_nvcc" else real(name))
    with pytest.raises(TVMSError) as err:
        nvrtc.compile_cuda("#include <mma.h>\n", "sm_80", "ptx")
    assert 'mma.h:' in str(err.value) and 'cannot open source file "crt/mma.h"' in str(err.value)
    assert "pip install nvidia-cuda-nvcc-cu12" in str(err.value) and " | " not in str(err.value)
