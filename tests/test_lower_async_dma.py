"""LowerAsyncDMA (lowering/tir/gpu/lower_async_dma.py) and the DMA builtins' semantics in the
reference executor (runtime/reference_dma.py), against Apache TVM 0.27.

fixtures/async_dma (generate_with_tvm.py) holds TVM's LowerAsyncDMA of three flat functions
with async commit and wait scopes (``contiguous``: one 2-d copy nest; ``grouped``: two copies in
one group, a strided copy left alone, waits of a queue never copied to and without a count;
``edges``: what is and is not a contiguous copy: reversed, split and fused, transposed, rows with
gaps, a symbolic extent, one element, a strided source, a repeating source), and of a software
pipeline whose async stage copies with a serial loop, lowered by TVM's cuda pipeline under
``tirx.use_async_copy`` (``pipeline_serial``), with what ``tvm.compile`` says of it.
Nothing here runs on a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.module import IRModule
from tvms.ir.target import Target
from tvms.lowering.codegen.cuda import cuda_source, kernels_of
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.tir.gpu import pipeline
from tvms.lowering.transform import PassContext
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES

HERE = FIXTURES / "async_dma"
SM80 = Target("cuda -arch=sm_80")


def text(name: str) -> str:
    return (HERE / name).read_text()


def test_lower_async_dma_prints_what_tvm_prints():
    for case in ("contiguous", "grouped", "edges", "pipeline_serial"):
        got = get_pass("LowerAsyncDMA")(from_source(text(f"{case}.before.tvms")))
        assert got.script(dialect="tvm-0.27") == text(f"{case}.after.tvms"), case


def test_the_cuda_pipeline_runs_it_after_storage_rewrite():
    """Under ``tirx.use_async_copy`` the pipeline reaches TVM's stage before LowerAsyncDMA and
    runs it there; the DMA builtins then reach the CUDA code generator, which refuses them, as
    TVM's does (``tvm.compile`` fails on an unresolved ``tirx.dma_start_group``)."""
    func = from_source(text("pipeline_serial.input.tvms"))["pipeline_serial"]
    func = func.with_attr("target", pipeline.cuda_target_attr(SM80))
    upto = pipeline.BEFORE_ENTRY[:pipeline.BEFORE_ENTRY.index(pipeline.storage_rewrite) + 1]
    with PassContext(config={"tirx.use_async_copy": True}):
        stage = IRModule({"pipeline_serial": func})
        for step in upto:
            stage = IRModule({"pipeline_serial": step(stage["pipeline_serial"])})
        assert stage.script(dialect="tvm-0.27") == text("pipeline_serial.before.tvms")
        lowered = pipeline.lower_for_cuda(func, SM80)
    assert "T.dma_copy(0, T.address_of(A_shared[threadIdx_x * 8])" in lowered.script(dialect="tvm-0.27")
    assert "tirx.dma_start_group" in text("pipeline_serial.error.txt")
    with pytest.raises(TVMSError, match="no rendering for T.dma_start_group"):
        cuda_source(kernels_of(lowered))
    with pytest.raises(TVMSError, match="DMA builtins are Hexagon's"):  # (nor does the executor in a kernel)
        run_prim_func(lowered["pipeline_serial_kernel"], np.zeros(8192, "float32"), np.zeros(8192, "float32"))
    with PassContext():  # (without the option: neither DMA nor cp.async)
        assert "dma_copy" not in pipeline.lower_for_cuda(func, SM80).script()


def test_refusals():
    """TVM 0.27 registers no ``tirx.experimental_dma_bypass_cache`` (its PassContext refuses it),
    and a queue must be a constant."""
    before = from_source(text("grouped.before.tvms"))
    with PassContext(config={"tirx.experimental_dma_bypass_cache": True}):
        with pytest.raises(TVMSError, match=text("bypass_cache.error.txt").strip()):
            get_pass("LowerAsyncDMA")(before)
    symbolic = text("grouped.before.tvms").replace('"async_commit_queue_scope": 1', '"async_commit_queue_scope": T.int32(1) + 0 * A.shape[0]')
    symbolic = symbolic.replace("def main(", "def main(q: T.int32, ").replace("T.int32(1) + 0 * A.shape[0]", "q")
    with pytest.raises(TVMSError, match="queue of 'async_commit_queue_scope' must be an integer constant"):
        get_pass("LowerAsyncDMA")(from_source(symbolic))


def test_copies_land_at_their_wait():
    """The builtins in the reference executor: TVM's lowered functions compute what their inputs
    compute (numpy); without its wait a copy has not landed; a group opened twice, a wait while
    one is open, a run ending with copies never waited for or a group open, and a pointer that is
    not ``T.address_of(buf[i])`` are errors."""
    a = np.arange(256, dtype="float32")
    after = text("contiguous.after.tvms")
    for source in (text("contiguous.before.tvms"), after):
        b = np.zeros(256, "float32")
        run_prim_func(from_source(source)["main"], a, b)
        np.testing.assert_array_equal(b, a * 2)
    b = np.zeros(256, "float32")
    lagging = after.replace("T.dma_wait(0, 0)", "T.dma_wait(0, 1)")
    run_prim_func(from_source(lagging + "\n        T.dma_wait(0, 0)")["main"], a, b)
    np.testing.assert_array_equal(b[:64], 0)  # (the first copy waits for the second's wait)
    np.testing.assert_array_equal(b[64:], a[:192] * 2)
    x, y = np.arange(128).astype("float16"), (np.arange(128) * 3).astype("float16")
    for stage in ("before", "after"):
        c = np.zeros(128, "float16")
        run_prim_func(from_source(text(f"grouped.{stage}.tvms"))["main"], x, y, c)
        np.testing.assert_array_equal(c, np.concatenate([x[:64] + y[64:] + x[:64], x[::2]]))
    for bad, message in ((after.replace("T.dma_end_group(0)", "T.dma_start_group(0)"), "while a group of queue 0 is open"),
                         (after.replace("T.dma_end_group(0)", "T.evaluate(0)"), r"dma_wait\(0, 0\) while a group"),
                         (after.replace("T.dma_start_group(0)", "T.evaluate(0)"), "with no group of queue 0 open"),
                         (after.replace("T.address_of(A[k * 64])", "T.address_of(A[k * 64 + 1])"), "out of its bounds"),
                         (lagging, "ends with 1 dma_copy copies of queue 0 it never waited for"),
                         (after.replace("T.dma_end_group(0)\n            T.dma_wait(0, 0)", "T.evaluate(0)")
                          .replace("range(4)", "range(1)"), "ends with 1 dma_copy copies .* a group still open"),
                         (after.replace("T.address_of(A[k * 64])", "A.data"), "takes T.address_of")):
        with pytest.raises(TVMSError, match=message):
            run_prim_func(from_source(bad)["main"], a, np.zeros(256, "float32"))
