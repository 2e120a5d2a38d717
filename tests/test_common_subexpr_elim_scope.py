"""CommonSubexprElim: where its variables are read and its values evaluated. Each read of a
``cse_v`` lies inside the let that binds it, and the pass evaluates a value where the program
would not in one case only, as TVM 0.27 does: an argument of ``T.if_then_else``."""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir.expr import Var
from tvms.ir.stmt import LetStmt
from tvms.ir.visitor import children
from tvms.lowering.tir.gpu.common_subexpr_elim import common_subexpr_elim
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source


def unbound_reads(node, bound: frozenset = frozenset()) -> set:
    """The names of the ``cse_v`` variables read outside the let that binds them."""
    if isinstance(node, LetStmt) and node.var.name.startswith("cse_v"):
        return unbound_reads(node.value, bound) | unbound_reads(node.body, bound | {id(node.var)})
    if isinstance(node, Var):
        return {node.name} if node.name.startswith("cse_v") and id(node) not in bound else set()
    return set().union(*(unbound_reads(child, bound) for child in children(node)))


# ``n * m + 1`` twice in a branch, and once more after it where the planner did not look: a
# loop's step, an allocation's body, a let expression's body
IN_A_BRANCH = """
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "int32"), n: T.int32, m: T.int32):
    if n < 5:
        A[0] = n * m + 1
        A[1] = n * m + 1
"""
AFTER_THE_BRANCH = {
    "loop_step": """
    for j in T.serial(0, 8, step=n * m + 1):
        A[j + 20] = 1
""",
    "allocate": """
    D = T.allocate([4], "int32", "global")
    D_1 = T.Buffer((4,), "int32", data=D)
    D_1[0] = n * m + 1
    A[3] = D_1[0]
""",
    "let_body": """
    x = T.int32()
    A[2] = T.Let(n * m + 1 + x, where={x: 2})
""",
}


@pytest.mark.parametrize("after", AFTER_THE_BRANCH.values(), ids=AFTER_THE_BRANCH.keys())
def test_no_occurrence_reads_a_variable_outside_its_binding(after) -> None:
    """The rewriter replaced every occurrence of a bound expression, also those the planner never
    counted (a loop's step, anything under ``T.allocate``, a let's body): they read ``cse_v1``,
    bound in the branch, where the branch does not run (``n = 7``)."""
    func = from_source(IN_A_BRANCH + after)
    bound = common_subexpr_elim(func)
    assert "cse_v1" in bound.script()
    assert unbound_reads(bound.body) == set()
    expected, got = np.zeros(64, np.int32), np.zeros(64, np.int32)
    run_prim_func(func, expected, 7, 5)
    run_prim_func(bound, got, 7, 5)
    np.testing.assert_array_equal(got, expected)


def test_a_bound_value_puts_nothing_in_a_lets_body() -> None:
    """A binding's value (``(T.Let(...) + 1) * (p * q)``, met twice after the branch) had the
    branch's ``cse_v1`` put into the let's body, where the planner counts nothing: read unbound."""
    func = from_source("""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "int32"), n: T.int32, m: T.int32, p: T.int32, q: T.int32):
    if n < 5:
        A[0] = n * m
        A[1] = n * m
    x = T.int32()
    A[2] = (T.Let(n * m + x, where={x: 2}) + 1) * (p * q)
    A[3] = (T.Let(n * m + x, where={x: 2}) + 1) * (p * q)
""")
    bound = common_subexpr_elim(func)
    assert "cse_v2" in bound.script() and unbound_reads(bound.body) == set()
    expected, got = np.zeros(64, np.int32), np.zeros(64, np.int32)
    run_prim_func(func, expected, 7, 5, 2, 3)
    run_prim_func(bound, got, 7, 5, 2, 3)
    np.testing.assert_array_equal(got, expected)


def test_an_if_then_else_argument_is_bound_above_it_as_in_tvm() -> None:
    """TVM 0.27 counts a call's arguments as any operand, ``T.if_then_else``'s too, and binds
    ``n // d + 1`` above the two calls: evaluated where ``d == 0`` too (a hazard kept for parity)."""
    func = from_source("""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "int32"), n: T.int32, d: T.int32):
    A[0] = T.if_then_else(d != 0, n // d + 1, 0)
    A[1] = T.if_then_else(d != 0, n // d + 1, 0)
""")
    assert common_subexpr_elim(func).script().splitlines()[4:7] == [
        "    cse_v1: T.int32 = n // d + 1",
        "    A[0] = T.if_then_else(d != 0, cse_v1, 0)",
        "    A[1] = T.if_then_else(d != 0, cse_v1, 0)"]
