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
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.tir import gpu  # noqa: F401  (registers the GPU passes)
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

GOLDEN = FIXTURES / "gpu_lowering"
DIALECT = "tvm-0.27"
IMPLEMENTED = {"AnnotateEntryFunc", "LowerThreadAllreduce", "SplitHostDevice", "ThreadSync"}
STAGE = re.compile(r"(?P<case>.+?)_(?P<kernels>kernels_)?(?P<number>\d\d)_(?P<name>\w+)\.tvms")


def stages() -> dict:
    """(case, kernels?) -> the stage files in order."""
    found: dict = {}
    for path in sorted(GOLDEN.glob("*.tvms")):
        match = STAGE.fullmatch(path.name)
        found.setdefault((match["case"], bool(match["kernels"])), []).append(path)
    return found


PAIRS = [(before, after) for files in stages().values() for before, after in zip(files, files[1:])
         if STAGE.fullmatch(after.name)["name"] in IMPLEMENTED]


@pytest.mark.parametrize("before,after", PAIRS, ids=lambda p: p.stem)
def test_pass_prints_what_tvm_prints(before, after) -> None:
    lowered = get_pass(STAGE.fullmatch(after.name)["name"])(from_source(before.read_text()))
    assert lowered.script(dialect=DIALECT) == after.read_text()


@pytest.mark.parametrize("corpus,golden", [
    ("lower_matmul_relu_gpu_12_SplitHostDevice.tvms", "matmul_relu_12_SplitHostDevice.tvms"),
    ("lower_reduce_gpu_11_LowerThreadAllreduce.tvms", "reduce_two_warps_11_LowerThreadAllreduce.tvms"),
])
def test_the_corpus_stages_are_among_the_goldens(corpus: str, golden: str) -> None:
    """The corpus's GPU lowering stages are those the generator makes (so the pass tests above
    reproduce them from their input stage)."""
    assert (CORPUS_COPY / corpus).read_text() == (GOLDEN / golden).read_text()
