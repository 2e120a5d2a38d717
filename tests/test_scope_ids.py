"""Scope ids of TVM 0.27's tirx kernels (``bx = T.cta_id([4])``, ``w = T.warp_id([4])`` ...): read
and printed as TVM prints them (the texts in fixtures/tvm027_printing/scope_ids_*.tvms, checked
with TVM there), made thread launches by LowerTIRx with TVM's formulas and checks, computed by
the reference executor as numpy says, compiled by NVRTC, and run on a GPU where there is one."""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms.ir import ScriptError, TVMSError
from tvms.ir.target import Target
from tvms.lowering.tir.gpu import lower_for_cuda, lower_tirx
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HEADER = "# from tvm.script import tirx as T\n\n@T.prim_func\ndef main(A: T.Buffer((512,), \"int32\")):\n"


def kernel(body: str, params: str = 'A: T.Buffer((512,), "int32")') -> str:
    return (f"# from tvm.script import tirx as T\n\n@T.prim_func\ndef main({params}):\n"
            "    T.device_entry()\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n")))


WARPS = (FIXTURES / "tvm027_printing" / "scope_ids_warps.tvms").read_text()
GRID = kernel("""
bx, by = T.cta_id([2, 3])
tx, ty = T.thread_id([16, 4])
A[(bx * 3 + by) * 64 + ty * 16 + tx] = bx * 1000 + by * 100 + ty * 16 + tx""")
WARPGROUPS = kernel("""
g = T.warpgroup_id([2])
w = T.warp_id_in_wg([4])
t = T.thread_id_in_wg([128])
lane = T.lane_id()
tid = T.thread_id([256], dtype="uint32")
A[T.Cast("int32", tid)] = g * 100000 + w * 1000 + t * 10 + lane % 10""")


def expected(case: str) -> np.ndarray:
    i = np.arange(512)
    if case == "warps":  # 4 blocks of 128 threads: warp i // 32 % 4, lane i % 32
        return i % 128 // 32 * 100 + i % 32
    if case == "grid":  # (6 blocks of 64 threads: the rest of A is not written)
        block, thread = i // 64, i % 64
        return np.where(i < 384, block // 3 * 1000 + block % 3 * 100 + thread, -1)
    t = i % 256  # (one block of 256 threads: the upper half of A is not written)
    return np.where(i < 256, t // 128 * 100000 + t // 32 % 4 * 1000 + t % 128 * 10 + t % 32 % 10, -1)


CASES = {"warps": WARPS, "grid": GRID, "warpgroups": WARPGROUPS}


@pytest.mark.parametrize("case", CASES)
def test_the_ids_compute_as_tvms_formulas_say(case: str) -> None:
    a = np.full(512, -1, "int32")
    run_prim_func(from_source(CASES[case]), a)
    np.testing.assert_array_equal(a, expected(case))


def test_lower_tirx_makes_launches_and_lets() -> None:
    printed = lower_tirx(from_source(WARPS)).script(dialect="tvm-0.27")
    assert ('    blockIdx_x = T.launch_thread("blockIdx.x", 4)\n'
            '    threadIdx_x = T.launch_thread("threadIdx.x", 128)\n'
            "    bx: T.let[T.int32] = blockIdx_x\n"
            "    wid: T.let[T.int32] = threadIdx_x // 32\n"
            "    lid: T.let[T.int32] = threadIdx_x % 32\n") in printed
    grid = lower_tirx(from_source(GRID)).script(dialect="tvm-0.27")
    for launch in ('"blockIdx.x", 2', '"blockIdx.y", 3', '"threadIdx.x", 16', '"threadIdx.y", 4'):
        assert f"T.launch_thread({launch})" in grid


def test_the_kernels_compile_with_nvrtc() -> None:
    from cuda_support import assert_compiles, kernels_source

    pytest.importorskip("cuda.bindings.nvrtc")
    modules = []
    for case, text in CASES.items():
        func = from_source(text).with_attr("global_symbol", case)
        modules.append(lower_for_cuda(func, Target("cuda -arch=sm_90")))
    source = kernels_source(modules)
    assert "__launch_bounds__(256)" in source and "blockIdx.y" in source
    assert_compiles(source)


@pytest.mark.skipif(not tvms.cuda(0).exist, reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", CASES)
def test_the_kernels_run_on_the_gpu(case: str) -> None:
    device = tvms.cuda(0)
    a = tvms.nd.array(np.full(512, -1, "int32"), device)
    tvms.build(from_source(CASES[case]), target="cuda")(a)
    np.testing.assert_array_equal(a.numpy(), expected(case))


@pytest.mark.parametrize("body, message", [
    ("w = T.warp_id([4])\nl = T.lane_id([32])\nt = T.thread_id([64])\nA[t] = w + l",
     "inconsistent extents: 64 for thread_id is not 4 (warp_id) x 32 (lane_id)"),
    ("t = T.thread_id([100])\nw = T.warp_id([3])\nA[t] = w", "the extents do not divide: 100 (thread_id) by 3 (warp_id)"),
    ("t = T.thread_id([48])\nw = T.warp_id([2])\nA[t] = w", "the kernel names warps but has 48 threads"),
    ("b = T.cta_id([4])\nA[b] = 1", "the kernel has no thread count"),
    ("t = T.thread_id([32])\nb = T.cta_id()\nA[t] = b", "cannot tell the extent of T.cta_id()"),
    ("c = T.cluster_id([2])\nt = T.thread_id([32])\nA[t] = c", "tvms does not launch thread-block clusters yet"),
    ("b = T.cta_id([4])\nc = T.cta_id([8])\nt = T.thread_id([32])\nA[t] = b + c",
     "T.cta_id is declared with 8 here and 4 before"),
    ("b = T.cta_id([6])\nc, d = T.cta_id([2, 3])\nt = T.thread_id([32])\nA[t] = b + c + d",
     "T.cta_id is declared with 2 dimensions here and 1 before"),
])
def test_what_tvm_refuses_is_refused_when_lowered(body: str, message: str) -> None:
    func = from_source(kernel(body), "k.tvms")
    with pytest.raises(TVMSError, match=re.escape(message)):
        lower_tirx(func)
    with pytest.raises(TVMSError, match=re.escape(message)):
        run_prim_func(func, np.zeros(512, "int32"))


def test_ids_outside_a_device_region_are_refused_at_their_line() -> None:
    func = from_source(HEADER + "    t = T.thread_id([32])\n    A[t] = 1\n", "k.tvms")
    with pytest.raises(ScriptError, match=r"^k\.tvms:5:9: error: T\.thread_id outside a device region"):
        lower_tirx(func)


@pytest.mark.parametrize("line, col, message", [
    ("w = T.warp_id([2, 2])", 9, "T.warp_id has one dimension, got 2"),
    ("b = T.cta_id([2, 3])", 9, "T.cta_id defines 2 ids: name each on the left of '=', got 1 name"),
    ("b = T.cta_id([2], dtype=\"int64\")", 9, "a scope id is an int32 or a uint32, not int64"),
    ("b = T.cta_id([2], preferred=[2])", 9, "preferred= is a cluster's shape"),
    ("b = T.cta_id([1, 2, 3, 4])", 9, "T.cta_id has 1 to 3 dimensions, got 4"),
    ("b = T.cta_id(4)", 9, "T.cta_id takes a list of extents"),
])
def test_bad_ids_are_refused_when_read(line: str, col: int, message: str) -> None:
    with pytest.raises(ScriptError) as err:
        from_source(HEADER + "    T.device_entry()\n    " + line + "\n", "k.tvms")
    assert str(err.value).startswith(f"k.tvms:6:{col}: error: {message}")


def test_a_loop_unroll_argument_reaches_the_cuda_source() -> None:
    """``T.serial(n, unroll=...)`` (TVM 0.27's spelling of the ``pragma_unroll`` and
    ``disable_unroll`` annotations, fixtures/tvm027_printing/loop_unroll_sugar.tvms) becomes the
    ``#pragma unroll`` of the loop."""
    from cuda_support import kernels_source

    func = from_source(kernel("tx = T.thread_id([32])\nfor i in T.serial(4, unroll=2):\n    A[tx * 4 + i] = i\n"
                              "for i in T.serial(4, unroll=False):\n    A[128 + tx * 4 + i] = i"))
    source = kernels_source([lower_for_cuda(func, Target("cuda -arch=sm_90"))])
    assert "#pragma unroll 2\n" in source and "#pragma unroll 1\n" in source
    with pytest.raises(ScriptError, match="unroll= is True, False or a positive count, got 0"):
        from_source(kernel("for i in T.serial(4, unroll=0):\n    A[i] = i"))


def test_the_generic_scope_id_reads_as_its_kind() -> None:
    func = from_source(kernel('w = T.scope_id([4], "cta", "warp")\nt = T.thread_id([128])\nA[t] = w'))
    assert func.script(dialect="tvm-0.27").count("w = T.warp_id([4])") == 1
    with pytest.raises(ScriptError, match="T.scope_id takes extents, the enclosing scope and the scope counted"):
        from_source(kernel('w = T.scope_id([4], "warp", "cta")'))


def test_symbolic_extents_multiply_folded_and_int32_only() -> None:
    params = 'A: T.Buffer((512,), "int32"), n: T.int32'
    printed = lower_tirx(from_source(kernel("w = T.warp_id([n])\nl = T.lane_id([32])\nA[w * 32 + l] = w",
                                            params))).script(dialect="tvm-0.27")
    assert 'T.launch_thread("threadIdx.x", n * 32)' in printed
    grid = lower_tirx(from_source(kernel("tx, ty, tz = T.thread_id([16, 8, 2])\nw = T.warp_id([8])\nA[tx] = tz + w"))).script(dialect="tvm-0.27")
    assert "w: T.let[T.int32] = (threadIdx_x + threadIdx_y * 16 + threadIdx_z * 128) // 32" in grid
    wide = from_source(kernel("b = T.cta_id([m])\nt = T.thread_id([32])\nA[t] = 1", params.replace("n: T.int32", "m: T.int64")))
    with pytest.raises(TVMSError, match="the extents of T.cta_id are int32, as the thread indices it is made of; got int64"):
        lower_tirx(wide)


def test_a_kernel_with_scope_ids_built_for_llvm_is_told_to_build_for_cuda() -> None:
    """No CPU lowering makes code of scope ids: the llvm build says the kernel is GPU code."""
    with pytest.raises(TVMSError, match=re.escape("the llvm target cannot run T.cta_id(...): a kernel with "
                                                  "scope ids is GPU code (TVM 0.27's tirx language); build "
                                                  "it for a cuda target")):
        tvms.build(from_source(GRID), target="llvm")
