"""InjectSoftwarePipeline and ManifestSharedMemoryLocalStage (lowering/tir/gpu/) against Apache
TVM 0.27.

fixtures/software_pipeline (made by generate_with_tvm.py there) holds the functions of TVM's own
tests of the passes and what TVM's pass alone prints for them, and DLight's tensor-core matmul
before and after each pass in TVM's pipeline. tvms must print the same byte for byte; the
functions whose accesses stay in bounds must compute the same before and after (reference
executor); the inputs TVM refuses are refused. DLight's pipelined kernel, lowered for cuda, is
checked in test_reference_wmma.py (numbers) and test_infer_fragment.py (NVRTC).
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from tvms.ir.errors import TVMSError
from tvms.ir.module import IRModule
from tvms.lowering.pass_registry import get_pass
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HERE = FIXTURES / "software_pipeline"
# (``*_async``, ``async_*``: stages marked ``software_pipeline_async_stages``, their commit groups
# and waits as TVM places them)
CASES = sorted(p.name[:-len("_InjectSoftwarePipeline.tvms")] for p in HERE.glob("*_InjectSoftwarePipeline.tvms")
               if not p.name.startswith("dlight_"))
# the symbolic extent: TVM bounds the outer block's regions by ``T.max(1, k)`` (its interval
# union); tvms's union over the prologue, body and epilogue gives ``0:k`` (the same for k >= 1)
KNOWN_DIFFERENT = {"dynamic_compute"}
# TVM's nested cases index their buffers out of bounds (``B[tx, i, 0]`` of a (16, 1, 1) buffer)
NOT_RUNNABLE = {"nested_pipeline_simple", "nested_pipeline_prefetch_inner", "nested_pipeline_interleaving",
                "nested_pipeline_double_buffer"}


def _input(case: str):
    return from_source((HERE / f"{case}_input.tvms").read_text())


@pytest.mark.parametrize("case", CASES)
def test_prints_what_tvm_prints(case: str) -> None:
    got = get_pass("InjectSoftwarePipeline")(_input(case)).script(dialect="tvm-0.27")
    want = (HERE / f"{case}_InjectSoftwarePipeline.tvms").read_text()
    if case in KNOWN_DIFFERENT:
        different = [(a, b) for a, b in zip(got.splitlines(), want.splitlines()) if a != b]
        assert len(got.splitlines()) == len(want.splitlines()) and len(different) == 2
        assert all("T.reads(A[tx, 0:" in a or "T.writes(C[tx, " in a for a, _ in different)
    else:
        assert got == want


@pytest.mark.parametrize("case", CASES)
def test_tvm_s_text_reads_and_prints_back(case: str) -> None:
    # (the nested cases index B past its end: TVM's parser reads them, and so does tvms's)
    text = (HERE / f"{case}_InjectSoftwarePipeline.tvms").read_text()
    assert from_source(text).script(dialect="tvm-0.27") == text


def test_pipelined_functions_compute_what_they_computed() -> None:
    for case in sorted(set(CASES) - NOT_RUNNABLE):
        before = _input(case)["main"]
        after = get_pass("InjectSoftwarePipeline")(IRModule({"main": before}))["main"]
        rng = np.random.default_rng(1)
        arrays = [rng.standard_normal([getattr(s, "value", 13) for s in before.buffer_map[p].shape]).astype("float32")
                  for p in before.params]
        want, got = [a.copy() for a in arrays], [a.copy() for a in arrays]
        run_prim_func(before, *want)
        run_prim_func(after, *got)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w, err_msg=case)


@pytest.mark.parametrize("case", ["simple_compute_incorrect_reorder", "simple_compute_conflicting_order",
                                  "simple_compute_missing_annotation"])
def test_refuses_what_tvm_refuses(case: str) -> None:
    tvm_message = (HERE / f"{case}_error.txt").read_text()
    words = {"simple_compute_incorrect_reorder": "cannot be reordered",
             "simple_compute_conflicting_order": "cannot have the same order",
             "simple_compute_missing_annotation": "order of the software pipeline is not defined"}[case]
    assert words.lower() in tvm_message.lower()
    with pytest.raises(TVMSError, match=words):
        get_pass("InjectSoftwarePipeline")(_input(case))


def test_annotations_that_do_not_fit_the_body_are_refused() -> None:
    text = (HERE / "simple_compute_stages_1_input.tvms").read_text()
    with pytest.raises(TVMSError, match="has 2 statements in the body of loop 'i'"):
        get_pass("InjectSoftwarePipeline")(from_source(text.replace('"software_pipeline_stage": [0, 1]',
                                                                    '"software_pipeline_stage": [0, 1, 1]')))


@pytest.mark.parametrize("before,after,name", [
    ("manifest_matmul_input", "manifest_matmul_ManifestSharedMemoryLocalStage", "ManifestSharedMemoryLocalStage"),
    ("dlight_wmma_ManifestSharedMemoryLocalStage_before", "dlight_wmma_ManifestSharedMemoryLocalStage",
     "ManifestSharedMemoryLocalStage"),
    ("dlight_wmma_InjectSoftwarePipeline_before", "dlight_wmma_InjectSoftwarePipeline", "InjectSoftwarePipeline"),
], ids=["manifest_matmul", "dlight_wmma_manifest", "dlight_wmma_pipeline"])
def test_dlight_tensor_core_stages_print_what_tvm_prints(before: str, after: str, name: str) -> None:
    """The local stages of the copies into shared memory, then the two pipelines of DLight's
    tensor-core matmul (k by 64 over the shared tiles: 7 statements in 2 stages; k by 16 over the
    fragments: 3 in 2), A and B tiles and fragments double-buffered. One line differs: the
    outermost pipeline block reads ``A[..., 0:256]`` where TVM's interval union bounds the
    columns by ``threadIdx_x % 16 * 4`` and an extent of 196 (both cover what is read)."""
    got = get_pass(name)(from_source((HERE / f"{before}.tvms").read_text())).script(dialect="tvm-0.27").splitlines()
    want = (HERE / f"{after}.tvms").read_text().splitlines()
    assert len(got) == len(want)
    different = [(a, b) for a, b in zip(got, want) if a != b]
    if name == "InjectSoftwarePipeline":
        ((ours, tvm),) = different
        assert ", 0:256], B[0:256, " in ours and "threadIdx_x % 16 * 4 + 196]" in tvm
    else:
        assert not different
