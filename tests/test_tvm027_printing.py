"""Texts of Apache TVM's own tests as TVM 0.27 prints them (issue 14, point 4), reduced from the
corpus that benchmarks/tvm_tests_corpus.py builds: each reads in the 0.27 dialect, prints back byte
for byte and re-parses structurally equal. fixtures/tvm027_printing/check_with_tvm.py checks that
TVM 0.27 prints every one of them exactly so."""
from __future__ import annotations

import pytest
from conftest import FIXTURES

from tvms.ir import structural_equal
from tvms.script import from_source
from tvms.script.formatting import format_script

GOLDENS = sorted((FIXTURES / "tvm027_printing").glob("*.tvms"))


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_a_text_tvm_printed_prints_back_byte_for_byte(path) -> None:
    text = path.read_text()
    node = from_source(text, path.name)
    assert node.source_dialect == "tvm-0.27"
    out = format_script(text, path.name)
    assert out == text
    assert structural_equal(from_source(out, path.name), node)
