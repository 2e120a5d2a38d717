"""CommonSubexprElim: TVM 0.27's output on small programs (those of the GPU pipeline are in
test_gpu_lowering.py), the work of planning grows with the function, not with its square, and
a statement object met twice gets its binding before the first occurrence."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.ir.deep import run_deep
from tvms.ir.stmt import SeqStmt
from tvms.lowering.tir.gpu.common_subexpr_elim import CommonSubexprElim, _Planner, common_subexpr_elim
from tvms.lowering.tir.unroll_loop import unroll_loop
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source


# TVM 0.27's output, written by
#   .venv/bin/python tools/cse_vs_tvm.py --write tests/fixtures/common_subexpr_elim --only 103,556,772,176,285,806 \
#       tests/fixtures/common_subexpr_elim/propagate.input.tvms tests/fixtures/common_subexpr_elim/select_condition.input.tvms
# (random_0_<N>: the harness's program N of seed 0; the other two inputs are written by hand)
GOLDEN = FIXTURES / "common_subexpr_elim"


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".input.tvms") for p in GOLDEN.glob("*.input.tvms")))
def test_output_is_tvm_027s(name: str) -> None:
    """``propagate``: a bound expression's variable goes into the deeper values already
    rewritten (``cse_v3 = cse_v2 * 2``, not ``(cse_v1 + 1) * 2``); ``select_condition``: not
    into one that a variable of the same depth went into first, behind a comparison."""
    mod = from_source((GOLDEN / f"{name}.input.tvms").read_text())
    assert CommonSubexprElim()(mod).script(dialect="tvm-0.27") == (GOLDEN / f"{name}.expected.tvms").read_text()


def _main(size: int, body: str):
    """``main(A, m)`` of an int32 buffer of ``size`` and the statements ``body``."""
    return from_source(f"""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer(({size},), "int32"), m: T.int32):
{body}
""")


def unrolled(n: int):
    """A loop body of ``n`` stores, as unrolling leaves it: store ``k`` reads ``(i + k + 1) * m``
    twice, shares ``m * (k // 2 + 2)`` with its neighbour, and ``i * m`` and the row ``i * n``
    with all."""
    stores = "\n".join(f"        A[i * {n} + {k}] = (i + {k + 1}) * m + ((i + {k + 1}) * m + 1) * (m * {k // 2 + 2})"
                       " + i * m" for k in range(n))
    return _main(4 * n, "    for i in range(4):\n" + stores)


def let_chain(n: int):
    """``n`` stores in a loop, each after a let of its own whose body is the rest (as a sequence of
    ``x = T.let(...)`` leaves them), so they nest ``n`` deep: store ``k`` reads ``(t + k) * m``
    twice, and ``m * 7`` and the row ``t * n`` with all."""
    stores = "\n".join(f"        x{k}: T.int32 = m + {k}\n"
                       f"        A[t * {n} + {k}] = (t + {k}) * m + (t + {k}) * m + m * 7 + x{k}" for k in range(n))
    return _main(4 * n, "    for t in range(4):\n" + stores)


def long_sum(n: int):
    """One store of a sum of ``n`` products, ``(m + k % 10) * m`` (each of ten met n / 10 times)."""
    terms = " + ".join(f"(m + {k % 10}) * m" for k in range(n))
    return _main(80, f"    A[0] = {terms}")


def work(func) -> tuple[int, int]:
    """The Python function calls (and calls of builtins) the pass makes on ``func``, in all and in
    planning (``_Planner.plan``): its work, counted the same on any machine."""
    counts = [0, 0]
    planning = False

    def tally(frame, event, arg) -> None:
        nonlocal planning
        if frame.f_code is _Planner.plan.__code__ and event in ("call", "return"):
            planning = event == "call"
        counts[0] += 1
        counts[1] += planning

    sys.setprofile(tally)
    try:
        common_subexpr_elim(func)
    finally:
        sys.setprofile(None)
    return counts[0], counts[1]


@pytest.mark.parametrize("make", [unrolled, let_chain, long_sum], ids=lambda make: make.__name__)
def test_planning_work_grows_linearly_with_the_function(make) -> None:
    """Twice the stores (or terms), about twice the work, in all and in planning. It was four
    times: each new variable was put into every deeper expression of the table, each binding
    scanned its whole sequence or climbed from each occurrence to the statement it goes before,
    and each operation walked its whole operand tree for calls; 1,500 stores took 24 s. (Room
    for the recursion of nested lets and long sums: ``run_deep``.)"""
    small, large = run_deep(work, make(100)), run_deep(work, make(200))
    assert large[0] < 2.3 * small[0]
    assert large[1] < 2.3 * small[1]


@pytest.mark.parametrize("make,bound", [(unrolled, 20 + 10 + 2), (let_chain, 20 + 2), (long_sum, 10)],
                         ids=["unrolled", "let_chain", "long_sum"])
def test_the_generated_functions_compute_what_they_computed(make, bound) -> None:
    """(The inputs of the work test, checked for what they bind and compute: a variable per store,
    per pair, and for the two shared by all; one per product of the long sum.)"""
    func = make(20)
    after = run_deep(common_subexpr_elim, func)
    assert sum(line.lstrip().startswith("cse_v") for line in after.script().splitlines()) == bound
    expected, got = np.zeros(80, np.int32), np.zeros(80, np.int32)
    run_prim_func(func, expected, 3)
    run_prim_func(after, got, 3)
    np.testing.assert_array_equal(got, expected)


STORE = from_source("""
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "int32"), n: T.int32, m: T.int32):
    for j in T.unroll(2):
        A[0] = A[0] + (n * m + 1)
""")
LOOP = STORE.body
# one BufferStore object twice: in a sequence, before a loop that holds it, and as UnrollLoop
# leaves a body that does not read its loop's variable
TWICE = {"in_a_sequence": SeqStmt((LOOP.body, LOOP.body)), "before_its_loop": SeqStmt((LOOP.body, LOOP)),
         "unrolled": unroll_loop(STORE).body}


@pytest.mark.parametrize("body", TWICE.values(), ids=TWICE.keys())
def test_a_statement_met_twice_is_bound_before_its_first_occurrence(body) -> None:
    """The planner knows a place by its statement's identity: the binding went around the
    occurrence the rewriter met last, and the first read ``cse_v1`` unbound."""
    assert body.seq[0] is body.seq[1] or body.seq[0] is body.seq[1].body
    func = STORE.with_changes(body=body)
    bound = common_subexpr_elim(func)
    assert bound.script().splitlines()[4] == "    cse_v1: T.int32 = n * m + 1"
    expected, got = np.zeros(4, np.int32), np.zeros(4, np.int32)
    run_prim_func(func, expected, 2, 3)
    run_prim_func(bound, got, 2, 3)
    np.testing.assert_array_equal(got, expected)

