"""What TVM's Python operators fold while a script is read (``n + 0`` is ``n``, ``n * 0`` is
``0``), and how a node that such an operator would have folded prints (``T.Add(n, 0)``), so
that it reads back as itself. The golden is TVM 0.27's output for the input."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from tvms.ir import structural_equal
from tvms.script import from_source

FOLDING = FIXTURES / "tir_folding"


def test_operators_fold_and_explicit_nodes_print_as_tvm() -> None:
    func = from_source((FOLDING / "input.tvms").read_text())
    assert func.script(dialect="tvm-0.27") == (FOLDING / "tvm_0.27.tvms").read_text().rstrip("\n")


@pytest.mark.parametrize("dialect", ["classic", "tvm-0.27"])
def test_explicit_nodes_read_back_as_themselves(dialect: str) -> None:
    func = from_source((FOLDING / "input.tvms").read_text())
    assert structural_equal(from_source(func.script(dialect=dialect)), func)
