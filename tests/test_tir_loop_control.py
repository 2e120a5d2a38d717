"""``T.break_loop()`` / ``T.continue_loop()`` (issue 14, point 2): calls of the intrinsics
``tir.break_loop`` / ``tir.continue_loop`` in an ``Evaluate``, printed as TVM 0.27 prints them
(src/tirx/script/printer/stmt.cc: an Evaluate of a Call prints as the bare call), run by the
reference executor as Python's ``break`` / ``continue`` and compiled by the LLVM code generator
as branches to the loop's exit / latch (serial and while loops; unrolled ones run serially).
"""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir import structural_equal
from tvms.ir.errors import TVMSError
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
HEADER_027 = ("# from tvm.script import ir as I\n# from tvm.script import tirx as T\n"
              "# from tvm.tirx.layout import Axis\n\n@I.ir_module\nclass Module:\n")

# the sum of each row's even values up to its first negative one; the same with a while loop
FOR_LOOPS = '''    @T.prim_func
    def main(A: T.Buffer((8, 8), "int32"), B: T.Buffer((8,), "int32")):
        for i in range(8):
            B[i] = 0
            for j in {loop}(8):
                if A[i, j] < 0:
                    T.break_loop()
                if A[i, j] % 2 == 1:
                    T.continue_loop()
                B[i] = B[i] + A[i, j]'''
WHILE_LOOP = '''    @T.prim_func
    def main(A: T.Buffer((8, 8), "int32"), B: T.Buffer((8,), "int32")):
        for i in range(8):
            B[i] = 0
            j = T.decl_buffer((1,), "int32", scope="local")
            j[0] = 0
            while j[0] < 8:
                j[0] = j[0] + 1
                if A[i, j[0] - 1] < 0:
                    T.break_loop()
                if A[i, j[0] - 1] % 2 == 1:
                    T.continue_loop()
                B[i] = B[i] + A[i, j[0] - 1]'''


def expected(a: np.ndarray) -> np.ndarray:
    out = []
    for row in a:
        total = 0
        for v in row:
            if v < 0:
                break
            if v % 2 == 1:
                continue
            total += v
        out.append(total)
    return np.array(out, dtype="int32")


def data() -> np.ndarray:
    return np.random.default_rng(14).integers(-3, 10, (8, 8)).astype("int32")


PROGRAMS = {"serial": FOR_LOOPS.format(loop="range"), "unroll": FOR_LOOPS.format(loop="T.unroll"),
            # (a vectorized loop that breaks runs serially; a parallel outer loop's kernel has its
            # own loop targets)
            "vectorized": FOR_LOOPS.format(loop="T.vectorized"),
            "parallel_outer": FOR_LOOPS.format(loop="range").replace("for i in range(8)",
                                                                     "for i in T.parallel(8)"),
            "while": WHILE_LOOP}


@pytest.mark.parametrize("header", [HEADER, HEADER_027], ids=["classic", "tvm-0.27"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_prints_back_as_written_in_both_dialects(header: str, name: str) -> None:
    text = header + PROGRAMS[name]
    if header is HEADER_027:  # (TVM 0.27 prints a one-element local buffer as a mutable scalar)
        text = text.replace('j = T.decl_buffer((1,), "int32", scope="local")\n            j[0] = 0',
                            'j: T.int32 = 0').replace("j[0]", "j")
    mod = from_source(text)
    assert mod.script(dialect="classic" if header is HEADER else "tvm-0.27") == text
    assert structural_equal(from_source(mod.script()), mod)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_reference_executor_equals_numpy(name: str) -> None:
    a, b = data(), np.zeros(8, "int32")
    run_prim_func(from_source(HEADER + PROGRAMS[name])["main"], a, b)
    np.testing.assert_array_equal(b, expected(a))


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_equals_reference(name: str) -> None:
    pytest.importorskip("llvmlite")
    import tvms

    func = from_source(HEADER + PROGRAMS[name])["main"]
    a = data()
    got, want = np.zeros(8, "int32"), np.zeros(8, "int32")
    tvms.build(func)(a, got)
    run_prim_func(func, a, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, expected(a))


def test_an_unrolled_loop_that_breaks_stays_a_loop_through_lowering() -> None:
    from tvms.lowering.tir import lower_for_codegen

    lowered = lower_for_codegen(from_source(HEADER + PROGRAMS["unroll"])["main"])
    assert "for j in T.unroll(8):" in lowered.script()  # (copies would leave the outer loop)
    a, b = data(), np.zeros(8, "int32")
    run_prim_func(lowered, a, b)
    np.testing.assert_array_equal(b, expected(a))


def test_python_break_and_continue_read_as_the_calls() -> None:
    written = FOR_LOOPS.format(loop="range").replace("T.break_loop()", "break").replace(
        "T.continue_loop()", "continue")
    mod = from_source(HEADER + written)
    assert mod.script() == HEADER + FOR_LOOPS.format(loop="range")
    assert structural_equal(mod, from_source(HEADER + FOR_LOOPS.format(loop="range")))


def test_leaving_a_parallel_loop_is_refused_by_the_code_generator() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    src = HEADER + '''    @T.prim_func
    def main(A: T.Buffer((8,), "int32")):
        for i in T.parallel(8):
            if A[i] < 0:
                T.break_loop()
            A[i] = 1'''
    with pytest.raises(TVMSError, match="cannot leave a parallel loop"):
        tvms.build(from_source(src)["main"])


def test_leaving_no_loop_is_an_error_in_the_reference_executor_and_the_code_generator() -> None:
    src = HEADER + '''    @T.prim_func
    def main(A: T.Buffer((8,), "int32")):
        A[0] = 1
        T.break_loop()'''
    func = from_source(src)["main"]
    with pytest.raises(TVMSError, match="outside a loop"):
        run_prim_func(func, np.zeros(8, "int32"))
    pytest.importorskip("llvmlite")
    import tvms

    with pytest.raises(TVMSError, match="outside a serial or while loop"):
        tvms.build(func)


def test_loop_control_takes_no_arguments() -> None:
    src = HEADER + '''    @T.prim_func
    def main(A: T.Buffer((8,), "int32")):
        for i in range(8):
            T.break_loop(1)'''
    with pytest.raises(TVMSError, match="break_loop") as info:
        from_source(src)
    assert ":9:" in str(info.value)
