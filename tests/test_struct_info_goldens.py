"""Struct-info inference equal to Apache TVM 0.27's, operator by operator.

For each ``fixtures/struct_info/<family>_before.tvms`` (bindings without annotations, on static,
symbolic and unknown shapes), tvms must infer every binding's struct info and print the module
exactly as TVM 0.27 did (``<family>_inferred_by_tvm.tvms``, made by generate_with_tvm.py there).
A new operator family only needs its pair of files.
"""
from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from tvms.ir import TVMSError
from tvms.script import from_source

STRUCT_INFO = FIXTURES / "struct_info"
FAMILIES = sorted(p.name.removesuffix("_before.tvms") for p in STRUCT_INFO.glob("*_before.tvms"))


@pytest.mark.parametrize("family", FAMILIES)
def test_inferred_struct_info_prints_as_tvm(family: str) -> None:
    before = from_source((STRUCT_INFO / f"{family}_before.tvms").read_text())
    golden = (STRUCT_INFO / f"{family}_inferred_by_tvm.tvms").read_text().rstrip("\n")
    assert before.script(dialect="tvm-0.27") == golden


@pytest.mark.parametrize("family", FAMILIES)
def test_tvm_print_reads_back_byte_for_byte(family: str) -> None:
    golden = (STRUCT_INFO / f"{family}_inferred_by_tvm.tvms").read_text().rstrip("\n")
    assert from_source(golden).script(dialect="tvm-0.27") == golden


REFUSALS = json.loads((STRUCT_INFO / "refusals.json").read_text())
REFUSAL_MODULE = (STRUCT_INFO / "refusal_module.tvms.in").read_text()  # (one call, "a = ...", at 5:13)


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refuses_what_tvm_refuses(case: str) -> None:
    """Operator calls on bad inputs (mismatched shapes or dtypes, axes out of range, ...) and edge
    cases TVM accepts (R.repeat 0 times): tvms refuses exactly what TVM 0.27 refuses, by a clear
    error at the call, but for the deviations the file names with their reason."""
    text = REFUSAL_MODULE.format(**REFUSALS[case])
    if REFUSALS[case]["tvm"] == "ok" and "deviation" not in REFUSALS[case]:
        from_source(text)
    else:
        with pytest.raises(TVMSError, match=r":5:13: error: "):
            from_source(text)
