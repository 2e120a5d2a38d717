"""Texts of Apache TVM's own tests as TVM 0.27 prints them (issue 14, point 4), reduced from the
corpus that benchmarks/tvm_tests_corpus.py builds: each prints back byte for byte (in the dialect
tvms detects; a Relax-only text may have no 0.27 spelling) and re-parses structurally equal. fixtures/tvm027_printing/check_with_tvm.py checks that
TVM 0.27 prints every one of them exactly so."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms.ir import structural_equal
from tvms.script import from_source
from tvms.script.formatting import format_script

GOLDENS = sorted((FIXTURES / "tvm027_printing").glob("*.tvms"))


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_a_text_tvm_printed_prints_back_byte_for_byte(path) -> None:
    text = path.read_text()
    node = from_source(text, path.name)
    out = format_script(text, path.name)
    assert out == text
    assert structural_equal(from_source(out, path.name), node)


def test_an_iterator_bound_to_a_value_of_another_type_keeps_both_and_builds() -> None:
    func = from_source((FIXTURES / "tvm027_printing" / "axis_binding_type.tvms").read_text())
    realize = func.body.block.body  # (under the implicit root block)
    assert str(realize.block.iter_vars[0].var.dtype) == "int32"
    assert str(realize.iter_values[0].dtype) == "int64"  # not cast, as TVM keeps it
    a, b = tvms.nd.array(np.array(4.0, "float32")), tvms.nd.array(np.array(0.0, "float32"))
    tvms.build(func, target="llvm")(a, b)
    assert b.numpy() == 2.0
