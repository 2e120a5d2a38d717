"""GPU TIR lowering passes against Apache TVM 0.27's printed output, and the numbers they keep.

fixtures/gpu_lowering (made by generate_with_tvm.py there) holds, for functions scheduled for
cuda, the module after every pass of TVM's s_tir pipeline that changed it
(``<case>_<NN>_<Pass>.tvms``) and the kernels after the device passes
(``<case>_kernels_<NN>_<Pass>.tvms``). Each pass tvms implements is applied to TVM's stage before
it and must print TVM's stage after it byte for byte.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import CORPUS_COPY, FIXTURES
from tvms.ir.structural import structural_equal
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.transform import Sequential
from tvms.lowering.tir import gpu  # noqa: F401  (registers the GPU passes)
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

GOLDEN = FIXTURES / "gpu_lowering"
DIALECT = "tvm-0.27"
# the passes tvms has, by TVM name; each is checked on every stage it changed in TVM
IMPLEMENTED = {"LowerInitBlock", "ConvertBlocksToOpaque", "LiftThreadBinding", "UnifyThreadBinding",
               "LowerOpaqueBlock", "FlattenBuffer", "InjectVirtualThread",
               "AnnotateEntryFunc", "ThreadSync", "LowerThreadAllreduce", "SplitHostDevice",
               "LowerWarpMemory", "StmtSimplify", "LowerIntrin"}
# TVM's StmtSimplify before LowerOpaqueBlock (s_tir's, on blocks) is not tvms's: tvms's is the
# device passes' one (tirx's), checked on the kernels
KERNELS_ONLY = {"StmtSimplify"}
# the tvms printer does not print TVM's text back (free ``T.Let`` variables are declared where the
# printer first needs them): the result must equal the parsed golden structurally
PRINTER_GAPS = {"intrinsics_05_FlattenBuffer", "intrinsics_10_SplitHostDevice",
                "intrinsics_kernels_03_LowerIntrin"}
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


PAIRS = [(before, after) for (_, kernels), files in stages().items()
         for before, after in zip(files, files[1:]) if checked(after, kernels)]


def tvm_pass(name: str):
    """TVM's pass of that name; ThreadSync as the pipeline runs it, for each memory scope."""
    if name == "ThreadSync":
        return Sequential([gpu.ThreadSync(scope) for scope in ("shared", "shared.dyn", "warp")])
    return get_pass(name)


@pytest.mark.parametrize("before,after", PAIRS, ids=lambda p: p.stem)
def test_pass_prints_what_tvm_prints(before, after) -> None:
    lowered = tvm_pass(STAGE.fullmatch(after.name)["name"])(from_source(before.read_text()))
    if after.stem in PRINTER_GAPS:
        expected = from_source(after.read_text())
        assert sorted(expected) == sorted(lowered)
        assert all(structural_equal(lowered[name], expected[name]) for name in expected)
    else:
        assert lowered.script(dialect=DIALECT) == after.read_text()


@pytest.mark.parametrize("corpus,golden", [
    ("lower_matmul_relu_gpu_12_SplitHostDevice.tvms", "matmul_relu_12_SplitHostDevice.tvms"),
    ("lower_reduce_gpu_11_LowerThreadAllreduce.tvms", "reduce_two_warps_11_LowerThreadAllreduce.tvms"),
])
def test_the_corpus_stages_are_among_the_goldens(corpus: str, golden: str) -> None:
    """The corpus's GPU lowering stages are those the generator makes (so the pass tests above
    reproduce them from their input stage)."""
    assert (CORPUS_COPY / corpus).read_text() == (GOLDEN / golden).read_text()
