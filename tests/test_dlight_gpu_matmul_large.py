"""tvms's cuda plans for large matmuls (gpu_matmul_large.py: float32 in 64 x 128 tiles;
gpu_matmul_tensorcore.py's ``large``: float16 with B staged as stored): which matmuls take them,
that they compute what numpy computes (scheduled and lowered for cuda, in the reference executor
with GPU semantics), and that their kernels compile with NVRTC."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_support import assert_compiles

from tvms.ir.function import PrimFunc
from tvms.ir.module import IRModule
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.dlight.base import ApplyDefaultSchedule
from tvms.lowering.dlight.gpu_matmul import Matmul, normalize, reduction_block
from tvms.lowering.dlight.gpu_matmul_large import LargeMatmul, SimtTiles, large_matmul, schedule_large_tiles
from tvms.lowering.dlight.gpu_matmul_tensorcore import schedule_tensor_core
from tvms.lowering.schedule import Schedule
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.lowering.transform import PassContext
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

SM90 = "cuda -arch=sm_90"


def matmul(m: int, n: int, k: int, b_layout: str = "kn", dtype: str = "float32", batch: int = 0,
           a_layout: str = "mk", out_dtype: str | None = None) -> str:
    """A matmul PrimFunc's text: A stored ``[m, k]`` or ``[k, m]``, B ``[k, n]`` or ``[n, k]``,
    accumulating in ``out_dtype`` (default ``dtype``), a bias and relu epilogue."""
    out = out_dtype or dtype
    a_read, b_read = ("a[{}]", "b[{}]") if out == dtype else (f'T.Cast("{out}", a[{{}}])', f'T.Cast("{out}", b[{{}}])')
    s, sv, si = (f"{batch}, ", "vs, ", "s, ") if batch else ("", "", "")
    b_shape, b_index = ((f"{k}, {n}", "vk, vj") if b_layout == "kn" else (f"{n}, {k}", "vj, vk"))
    a_shape, a_index = ((f"{s}{m}, {k}", f"{sv}vi, vk") if a_layout == "mk" else (f"{k}, {m}", "vk, vi"))
    loops = f"T.grid({batch}, {m}, {n}, {k})" if batch else f"T.grid({m}, {n}, {k})"
    kinds = '"SSSR"' if batch else '"SSR"'
    epi_loops = f"T.grid({batch}, {m}, {n})" if batch else f"T.grid({m}, {n})"
    return f'''
@T.prim_func
def mm(a: T.Buffer(({a_shape}), "{dtype}"), b: T.Buffer(({b_shape}), "{dtype}"), bias: T.Buffer(({n},), "{out}"), c: T.Buffer(({s}{m}, {n}), "{out}")):
    acc = T.alloc_buffer(({s}{m}, {n}), "{out}")
    for {si}i, j, k in {loops}:
        with T.block("mm"):
            {sv}vi, vj, vk = T.axis.remap({kinds}, [{si}i, j, k])
            with T.init():
                acc[{sv}vi, vj] = T.{out}(0)
            acc[{sv}vi, vj] = acc[{sv}vi, vj] + {a_read.format(a_index)} * {b_read.format(b_index)}
    for {si}i, j in {epi_loops}:
        with T.block("epilogue"):
            {sv}vi, vj = T.axis.remap({'"SSS"' if batch else '"SS"'}, [{si}i, j])
            c[{sv}vi, vj] = T.max(acc[{sv}vi, vj] + bias[vj], T.{out}(0))
'''


def module(text: str) -> IRModule:
    return IRModule({"mm": from_source(text).with_attr("global_symbol", "mm")})


def by_rule(text: str, rule: Matmul | None = None) -> PrimFunc:
    """``text``'s function as DLight's Matmul rule schedules it under sm_90."""
    with Target(SM90):
        return ApplyDefaultSchedule(rule or Matmul())(module(text))["mm"]


def kernel_source(scheduled: PrimFunc) -> str:
    return cuda_source(kernels_of(lower_for_cuda(scheduled, Target(SM90))))


def forced_plan(text: str, dtype: str, shape: Any = None) -> PrimFunc:
    """The large plan of ``dtype`` forced on ``text``'s matmul (whatever its size), in its own
    shape or in ``shape`` (a ``SimtTiles`` or ``WarpTiles``)."""
    if dtype == "float16":
        return schedule_tensor_core(from_source(text), "float16", large=True, warp_tiles=shape).mod["main"]
    sch = Schedule(from_source(text))
    main = reduction_block(sch, sch.get_child_blocks(sch.get_block("root")))
    normalize(sch, main)
    schedule_large_tiles(sch, main, shape or SimtTiles())
    return sch.mod["main"]


def assert_computes_as_numpy(scheduled: PrimFunc, m: int, n: int, k: int, b_layout: str, dtype: str, batch: int,
                             a_layout: str, out: str, seed: int, lowered_only: bool = False) -> None:
    """``matmul(m, n, k, ..)`` as ``scheduled``, and as lowered for cuda, on small integers (exact
    sums in either type) equals numpy."""
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch else ()
    a = rng.integers(-2, 3, lead + (m, k) if a_layout == "mk" else (k, m)).astype(dtype)
    b = rng.integers(-2, 3, (k, n) if b_layout == "kn" else (n, k)).astype(dtype)
    bias = rng.integers(-2, 3, (n,)).astype(out)
    product = (a if a_layout == "mk" else a.T).astype(np.float64) @ (b if b_layout == "kn" else b.T)
    want = np.maximum(product + bias, 0)
    lowered = lower_for_cuda(scheduled.with_attr("global_symbol", "main"), Target(SM90))
    for runnable in (lowered,) if lowered_only else (scheduled, lowered):
        c = np.zeros(lead + (m, n), out)
        run_prim_func(runnable, a, b, bias, c)
        np.testing.assert_array_equal(c.astype(np.float64), want)


def large_of(text: str, target: str = SM90) -> LargeMatmul | None:
    sch = Schedule(from_source(text))
    return large_matmul(sch.get(reduction_block(sch, sch.get_child_blocks(sch.get_block("root")))), Target(target))


def test_large_matmuls():
    assert large_of(matmul(2048, 2048, 64)) == LargeMatmul("float32", "float32", 64, 2048, 2048)
    assert large_of(matmul(1024, 4096, 8, "nk")) == LargeMatmul("float32", "float32", 8, 1024, 4096)
    # (a batch only A has is rows: the normalized matmul fuses it into i)
    assert large_of(matmul(1024, 1024, 16, batch=4)) == LargeMatmul("float32", "float32", 16, 4096, 1024)
    assert large_of(matmul(2048, 2048, 128, dtype="float16")) == LargeMatmul("float16", "float16", 128, 2048, 2048)


@pytest.mark.parametrize("text, why", [
    (matmul(1024, 1024, 64), "256 tiles of 128 x 128 at least (TVM's goldens are all below)"),
    (matmul(2048, 2048 + 64, 64), "columns a multiple of 128"),
])
def test_other_matmuls_are_not_large(text, why):
    assert large_of(text) is None, why


def test_which_large_matmuls_take_which_plan():
    f32, ragged_k = large_of(matmul(2048, 2048, 64)), large_of(matmul(2048, 2048, 60))
    f16 = large_of(matmul(2048, 2048, 128, dtype="float16"))
    assert f32.takes_simt_plan and not f32.takes_tensor_core_plan
    assert not ragged_k.takes_simt_plan  # (a reduction in whole steps of 8)
    assert f16.takes_tensor_core_plan and not f16.takes_simt_plan
    assert not LargeMatmul("float16", "float32", 64).takes_simt_plan


def test_only_cuda_has_large_matmuls():
    assert large_of(matmul(2048, 2048, 64), "rocm") is None


def test_the_rule_schedules_a_large_matmul_by_the_plan():
    text = by_rule(matmul(2048, 2048, 64)).script()
    assert 'T.thread_binding(2, thread="vthread.y")' in text and 'T.thread_binding(16, thread="threadIdx.x")' in text
    assert '"software_pipeline_stage": [0, 0, 0, 0, 1]' in text
    assert "epilogue" not in text  # (inlined into the write-back)
    tvm_tiles = by_rule(matmul(2048, 2048, 64), Matmul(large_tiles=False))
    assert 'T.thread_binding(2, thread="vthread.y")' not in tvm_tiles.script()
    assert repr(Matmul(large_tiles=False)) == "Matmul(large_tiles=False)" and repr(Matmul()) == "Matmul()"


@pytest.mark.parametrize("b_layout, batch, a_layout", [("kn", 0, "mk"), ("nk", 0, "mk"), ("kn", 2, "mk"), ("kn", 0, "km")])
def test_the_plan_computes_as_numpy(b_layout, batch, a_layout):
    """One or two blocks of 128 x 128 (the plan forced on a small matmul), k = 32: four
    pipelined steps, as scheduled and as lowered for cuda (virtual threads, the software
    pipeline, registers per stage), on small integers so that the sums are exact."""
    m, n, k = 128, 256, 32
    scheduled = forced_plan(matmul(m, n, k, b_layout, batch=batch, a_layout=a_layout), "float32")
    assert_computes_as_numpy(scheduled, m, n, k, b_layout, "float32", batch, a_layout, "float32", seed=0)


def test_the_plans_kernel_compiles_with_vector_loads_from_shared_memory():
    """4096^3 through the rule and the cuda build: 8 x 16 threads, the k-major tiles read as
    float4 (the point of the plan), and NVRTC compiles it for sm_80 and sm_90."""
    source = kernel_source(by_rule(matmul(4096, 4096, 4096)))
    assert "__launch_bounds__(128)" in source
    assert source.count("= *(float4*)(a_reindex_shared") + source.count("= *(float4*)(b_reindex_shared") >= 4
    assert_compiles(source)


def test_a_large_float16_matmul_stages_b_as_stored():
    """R.matmul's B is contiguous along j: a large float16 matmul copies it in 16-byte vectors
    of rows of j into [k][j] tiles and reads them into row-major fragments (TVM's schedule
    reads it 2 bytes a thread into [j][k] tiles); the kernel compiles with NVRTC."""
    source = kernel_source(by_rule(matmul(2048, 2048, 128, dtype="float16")))
    assert "fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major>" in source
    assert "= *(uint4*)(b_ptr + " in source and "= *(uint4*)(a_ptr + " in source
    assert_compiles(source)
    assert "col_major" in by_rule(matmul(2048, 2048, 128, dtype="float16"), Matmul(large_tiles=False)).script()


@pytest.mark.parametrize("n, warps", [(2048, 8), (2176, 4)])
def test_the_large_float16_plan_takes_8_warps_where_the_columns_are_whole_256s(n, warps):
    """Accumulating in float16, 8 warps of 64 x 64 (128 x 256 a block: the fastest tiling
    measured at 4096^3 on an H200) where the columns are whole 256s, else 4 (128 x 128); its
    copies stay synchronous under ``tirx.use_async_copy`` (there the slower, measured)."""
    text = matmul(2048, n, 128, dtype="float16")
    assert f'T.thread_binding({warps}, thread="threadIdx.y")' in by_rule(text).script()
    with PassContext(config={"tirx.use_async_copy": True}):
        assert "software_pipeline_async_stages" not in by_rule(text).script()


def test_the_8_warp_float16_plan_computes_as_numpy():
    """The 8-warp plan on one 128 x 256 block, two pipelined k steps, lowered for cuda."""
    scheduled = forced_plan(matmul(128, 256, 128, dtype="float16"), "float16")
    assert 'T.thread_binding(8, thread="threadIdx.y")' in scheduled.script()
    assert_computes_as_numpy(scheduled, 128, 256, 128, "kn", "float16", 0, "mk", "float16", seed=1, lowered_only=True)


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_b_staged_as_stored_computes_as_numpy(out_dtype):
    """The row-major staging forced on one 128 x 128 block (two pipelined k steps), float16
    accumulating in float16 and in float32, with R.matmul's epilogue, as scheduled and as
    lowered for cuda, on small integers (exact sums)."""
    scheduled = forced_plan(matmul(128, 128, 128, dtype="float16", out_dtype=out_dtype), "float16")
    assert "col_major" not in scheduled.script()
    warps = 4 if out_dtype == "float16" else 16  # (64 x 64 a warp accumulating in float16)
    assert f'T.thread_binding({warps}, thread="threadIdx.y")' in scheduled.script()
    assert_computes_as_numpy(scheduled, 128, 128, 128, "kn", "float16", 0, "mk", out_dtype, seed=0)


TRANSPOSE_INTO_MATMUL = '''
@T.prim_func
def mm(a: T.Buffer((64, 2048), "float32"), b: T.Buffer((64, 2048), "float32"), c: T.Buffer((2048, 2048), "float32")):
    at = T.alloc_buffer((2048, 64))
    for i, k in T.grid(2048, 64):
        with T.block("transpose"):
            vi, vk = T.axis.remap("SS", [i, k])
            at[vi, vk] = a[vk, vi]
    for i, j, k in T.grid(2048, 2048, 64):
        with T.block("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + at[vi, vk] * b[vk, vj]
'''


@pytest.mark.parametrize("text", [matmul(2048, 2048, 64, a_layout="km"), TRANSPOSE_INTO_MATMUL],
                         ids=["a-stored-k-major", "a-transposed-by-a-producer"])
def test_the_copies_read_vectors_along_the_axis_the_operand_is_stored_by(text):
    """A stored [k][m] (or made so by a transpose the rule inlines into the copy): the copy of A
    reads float4 along m where A is stored, not 4 elements 2048 apart."""
    source = kernel_source(by_rule(text))
    assert "= *(float4*)(a_ptr + " in source and "= *(float4*)(b_ptr + " in source
    assert "make_float4(a_ptr[" not in source


def _f16_b(b_param: str, producer: str) -> str:
    """A large float16 matmul whose B comes from ``producer`` (a block writing ``b1[k, j]``)."""
    return f'''
@T.prim_func
def mm(a: T.Buffer((2048, 128), "float16"), {b_param}, c: T.Buffer((2048, 2048), "float16")):
    b1 = T.alloc_buffer((128, 2048), "float16")
    for k, j in T.grid(128, 2048):
        with T.block("producer"):
            vk, vj = T.axis.remap("SS", [k, j])
            b1[vk, vj] = {producer}
    for i, j, k in T.grid(2048, 2048, 128):
        with T.block("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float16(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * b1[vk, vj]
'''


@pytest.mark.parametrize("text, row_major", [
    (_f16_b('b0: T.Buffer((128, 2048), "float16"), sc: T.Buffer((128,), "float16")', "sc[vk] * b0[vk, vj]"), True),
    (_f16_b('b0: T.Buffer((192, 2048), "float16")', "b0[vk + 64, vj]"), True),
    (_f16_b('b0: T.Buffer((128, 2048), "float16", strides=(1, 128))', "b0[vk, vj]"), False),
], ids=["a-scale-read-first", "a-slice", "strides-along-k"])
def test_b_is_staged_by_the_axis_its_main_load_steps_along(text, row_major):
    """reads_along_k judges by the load that uses both iterators (not a per-row scale read
    first), past constant offsets (a slice), by the buffer's strides where it has them."""
    scheduled = by_rule(text)
    assert ("col_major" not in scheduled.script()) == row_major
    if row_major:
        assert "= *(uint4*)(b0_ptr + " in kernel_source(scheduled)


@settings(max_examples=8, deadline=None)
@given(plan=st.sampled_from(["float32", "float16", "float16->float32"]), a_layout=st.sampled_from(["mk", "km"]),
       b_layout=st.sampled_from(["kn", "nk"]), batch=st.sampled_from([0, 2]), n=st.sampled_from([128, 256]),
       k_steps=st.integers(1, 5), ragged=st.integers(0, 7), seed=st.integers(0, 2**16))
def test_drawn_large_plans_compute_as_numpy(plan, a_layout, b_layout, batch, n, k_steps, ragged, seed):
    """Either plan forced on a drawn layout (A, B, a batch of A over a shared B), width, and
    reduction (float32: steps of 8; float16: any k, padded to steps of 64), lowered for cuda and
    run in the reference executor (virtual threads, the software pipeline, WMMA, the epilogue)."""
    dtype, _, out = plan.partition("->")
    out = out or dtype
    k = 8 * k_steps if dtype == "float32" else 16 * k_steps + ragged
    batch = 0 if a_layout == "km" else batch  # (the helper's batch is A's)
    scheduled = forced_plan(matmul(128, n, k, b_layout, dtype, batch, a_layout, out), dtype)
    assert_computes_as_numpy(scheduled, 128, n, k, b_layout, dtype, batch, a_layout, out, seed, lowered_only=True)
