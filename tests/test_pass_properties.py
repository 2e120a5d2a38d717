"""Every Relax pass keeps the numbers: random dataflow programs (``program_strategies``) run with
the reference executor before and after each pass, and after the whole zero pipeline; the
result also prints and parses back to the same module."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings

from program_strategies import Program, assert_same_values, dataflow_programs
from tvms.ir import TVMSError, first_mismatch
from tvms.lowering.pass_registry import get_pass
from tvms.relax import get_pipeline
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

PASSES = ["LegalizeOps", "FoldConstant", "CanonicalizeBindings", "DeadCodeElimination",
          "ToNonDataflow", "ConvertToDataflow", "FuseTransposeMatmul"]

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _run(mod, program: Program):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return run_relax(mod, program.entry, *program.args)


def _check(program: Program, after, before=None) -> None:
    """``after`` computes what ``before`` (the program's module by default) computes."""
    try:
        want = _run(program.mod if before is None else before, program)
    except (TVMSError, ValueError):
        # no claim about a program that fails by itself: an index out of range in a "fast"
        # R.take, or a symbolic size the arguments make wrong (R.matmul of (3, n) and (3,))
        reject()
    try:
        got = _run(after, program)
    except TVMSError as e:
        if "make a size negative" not in str(e):
            raise
        # TVM's legalized operators assume sizes valid for the whole range of a symbolic size
        # (R.split of (n,) at [3] gives a piece of n - 3, not max(n - 3, 0), as TVM's does):
        # no claim for arguments outside it
        reject()
    assert_same_values(got, want)
    text = after.script(dialect="tvm-0.27", show_meta=True)  # (folded constants too)
    mismatch = first_mismatch(from_source(text), after)
    assert mismatch is None, f"{mismatch}\n{text}"


@pytest.mark.parametrize("name", PASSES)
@SETTINGS
@given(program=dataflow_programs())
def test_pass_keeps_results(name: str, program: Program) -> None:
    _check(program, get_pass(name)(program.mod))


# Fusion runs on legalized programs: a sequence after LegalizeOps is checked as one pass, against
# the legalized module (the same TensorIR arithmetic: a float16 sum in the TensorIR reference
# rounds differently from numpy's). CallTIRRewrite's output is checked in test_fusion by its
# text: its ``_`` bindings are dataflow variables that the text cannot tell apart from plain
# ones, so it does not parse back to the same structure.
SEQUENCES = [["AnnotateTIROpPattern", "FuseOps", "FuseTIR"]]


def _legalized(program: Program):
    try:
        return get_pass("LegalizeOps")(program.mod)
    except TVMSError:
        reject()  # a program LegalizeOps cannot lower says nothing about fusion


@pytest.mark.parametrize("names", SEQUENCES, ids=["LegalizeOps-" + "-".join(s) for s in SEQUENCES])
@SETTINGS
@given(program=dataflow_programs())
def test_pass_sequence_keeps_results(names: list, program: Program) -> None:
    mod = legalized = _legalized(program)
    for name in names:
        mod = get_pass(name)(mod)
    _check(program, mod, legalized)


@SETTINGS
@given(program=dataflow_programs())
def test_zero_pipeline_keeps_results(program: Program) -> None:
    legalized = _legalized(program)
    _check(program, get_pipeline("zero")(program.mod), legalized)
