"""Bitwise operators and shifts in TensorIR (issue 14, point 2): ``a & b``, ``a | b``, ``a ^ b``,
``~a``, ``a << b``, ``a >> b`` read as calls of the intrinsics ``tir.bitwise_and`` ...
``tir.shift_right``, as TVM's operators build them, and printed back as the operators, as Apache
TVM 0.27 prints those calls (checked by printing the texts below with apache-tvm 0.27.0.post1);
``T.bitwise_and(a, b)`` written as a function reads as the same call.
"""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir import structural_equal
from tvms.ir.errors import TVMSError
from tvms.ir.expr import Call, IntImm, Var
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
HEADER_027 = ("# from tvm.script import ir as I\n# from tvm.script import tirx as T\n"
              "# from tvm.tirx.layout import Axis\n\n@I.ir_module\nclass Module:\n")

WRITTEN = '''    @T.prim_func
    def main(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32"), C: T.Buffer((16,), "uint8")):
        for i in range(16):
            B[i] = (A[i] & 12 | A[i] >> 1) ^ ~A[i] << 2
            C[i] = T.Cast("uint8", A[i]) & T.uint8(15)
'''
# the same function written with TVM's function forms: it reads as the same calls, and prints as
# TVM 0.27 prints them, as the operators (both dialects)
AS_CALLS = '''    @T.prim_func
    def main(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32"), C: T.Buffer((16,), "uint8")):
        for i in range(16):
            B[i] = T.bitwise_xor(T.bitwise_or(T.bitwise_and(A[i], 12), T.shift_right(A[i], 1)), T.shift_left(T.bitwise_not(A[i]), 2))
            C[i] = T.bitwise_and(T.Cast("uint8", A[i]), T.uint8(15))
'''
PRINTED = WRITTEN  # (apache-tvm 0.27 prints WRITTEN back as it is)


def numpy_result(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return ((a & 12) | (a >> 1)) ^ (~a << 2), a.astype("uint8") & np.uint8(15)


@pytest.mark.parametrize("header", [HEADER, HEADER_027], ids=["classic", "tvm-0.27"])
def test_operators_print_as_tvm_027_prints_the_calls(header: str) -> None:
    mod = from_source(header + WRITTEN)
    dialect = "classic" if header is HEADER else "tvm-0.27"
    assert mod.script(dialect=dialect) + "\n" == header + PRINTED


@pytest.mark.parametrize("header", [HEADER, HEADER_027], ids=["classic", "tvm-0.27"])
def test_calls_print_as_the_operators_and_equal_them(header: str) -> None:
    dialect = "classic" if header is HEADER else "tvm-0.27"
    calls = from_source(header + AS_CALLS)
    assert calls.script(dialect=dialect) + "\n" == header + PRINTED
    assert structural_equal(calls, from_source(header + WRITTEN))


def test_reference_executor_equals_numpy() -> None:
    func = from_source(HEADER + WRITTEN)["main"]
    a = np.array([0, 1, 2, 3, 7, 12, 15, 255, -1, -2, -7, -128, 1 << 20, -(1 << 20), 2**31 - 1, -2**31],
                 dtype="int32")
    b, c = np.zeros(16, "int32"), np.zeros(16, "uint8")
    run_prim_func(func, a, b, c)
    want_b, want_c = numpy_result(a)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(c, want_c)


def test_compiled_equals_reference() -> None:
    pytest.importorskip("llvmlite")
    import tvms

    func = from_source(HEADER + WRITTEN)["main"]
    a = np.random.default_rng(14).integers(-2**31, 2**31, 16, dtype="int64").astype("int32")
    got = [a.copy(), np.zeros(16, "int32"), np.zeros(16, "uint8")]
    want = [a.copy(), np.zeros(16, "int32"), np.zeros(16, "uint8")]
    tvms.build(func)(*got)
    run_prim_func(func, *want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], numpy_result(a)[0])


def test_python_operators_on_expressions_build_the_same_calls() -> None:
    x = Var("x", "int32")
    e = (x & 3) | (x << 1) ^ ~x
    assert isinstance(e, Call) and e.op.name == "tir.bitwise_or"
    assert structural_equal(3 & x, Call(x.dtype, (x & 3).op, (IntImm(x.dtype, 3), x)))


def test_constants_fold_as_tvm_folds_them() -> None:
    x = Var("x", "int32")
    assert (IntImm(x.dtype, 12) & 10).value == 8
    assert (IntImm(x.dtype, 1) << 4).value == 16
    assert x << 0 is x and x >> 0 is x  # a shift by 0 is its operand
    assert isinstance(x & 0, Call)  # (no identity folding for the bitwise operators)


def test_the_functions_build_what_the_operators_build() -> None:
    written = WRITTEN.replace("(A[i] & 12 | A[i] >> 1) ^ ~A[i] << 2",
                              "T.bitwise_xor(T.bitwise_or(T.bitwise_and(A[i], 12), A[i] >> 1), "
                              "T.shift_left(T.bitwise_not(A[i]), 2))")
    assert structural_equal(from_source(HEADER + written), from_source(HEADER + WRITTEN))
    folded = from_source(HEADER + WRITTEN.replace("(A[i] & 12 | A[i] >> 1) ^ ~A[i] << 2",
                                                  "T.bitwise_and(T.int32(12), 10) + T.shift_left(A[i], 0)"))
    assert "B[i] = 8 + A[i]" in folded.script()  # (as TVM's functions fold)


@pytest.mark.parametrize("expr, message", [
    ("A[i] & 1.5", "needs integer or boolean operands"),
    ("T.float32(1) << 2", "needs integer operands"),
    ("~T.float32(1)", "needs integer or boolean operands"),
    ("T.int32(1) << 40", "shift amount 40"),
    ("T.bitwise_and(A[i], T.float32(1))", "needs integer or boolean operands"),
    ("T.shift_right(T.float32(1), 1)", "needs integer operands"),
    ("T.bitwise_not(1.5)", "needs integer or boolean operands"),
])
def test_bad_operands_are_errors_with_a_location(expr: str, message: str) -> None:
    src = HEADER + f'''    @T.prim_func
    def main(A: T.Buffer((4,), "int32")):
        for i in range(4):
            A[i] = T.Cast("int32", {expr})
'''
    with pytest.raises(TVMSError, match=message) as info:
        from_source(src)
    assert ":9:" in str(info.value)
