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


def test_operator_functions_fold_as_tvm() -> None:
    """``T.truncdiv(n, 1)``, ``T.floormod(-7, 2)``, ``T.min(n, n)``, ``T.floordiv(0, n)``: TVM's
    operator functions fold constants and neutral operands as its Python operators do."""
    func = from_source((FOLDING / "functions_input.tvms").read_text())
    assert func.script(dialect="tvm-0.27") == (FOLDING / "functions_tvm_0.27.tvms").read_text().rstrip("\n")


@pytest.mark.parametrize("text", ["T.Min(0, 0)", "T.Max(n, n)", "T.Mod(7, 2)", "T.min(n, 2)"])
def test_explicit_function_nodes_read_back_as_themselves(text: str) -> None:
    func = from_source(f"@T.prim_func\ndef f(A: T.Buffer((4,), \"int32\"), n: T.int32):\n    A[0] = {text}\n")
    printed = func.script(dialect="tvm-0.27")
    assert f"A[0] = {text}" in printed
    assert structural_equal(from_source(printed), func)
