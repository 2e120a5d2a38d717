"""``T.isnullptr(handle)`` and ``T.undef()`` (issue 14, point 2).

``T.isnullptr``: a boolean call of ``tir.isnullptr``, printed as TVM 0.27 prints it, false for
every buffer's data in the reference executor and in code compiled by the LLVM generator (an
``icmp eq`` with the null pointer). ``T.undef()``: an arbitrary int32 (TVM's ``tir.undef`` has
no dtype argument and no dtype print location, so it prints bare); the reference executor
picks 0, LLVM gets ``undef``."""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir.expr import Call
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
HEADER_027 = ("# from tvm.script import ir as I\n# from tvm.script import tirx as T\n"
              "# from tvm.tirx.layout import Axis\n\n@I.ir_module\nclass Module:\n")
PROGRAM = '''    @T.prim_func
    def main(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "int32")):
        for i in range(8):
            B[i] = T.Select(T.isnullptr(A.data), -1, A[i] + T.Cast("int32", T.isnullptr(B.data)))'''


@pytest.mark.parametrize("header", [HEADER, HEADER_027], ids=["classic", "tvm-0.27"])
def test_prints_back_as_written(header: str) -> None:
    mod = from_source(header + PROGRAM)
    assert mod.script(dialect="classic" if header is HEADER else "tvm-0.27") == header + PROGRAM
    call = mod["main"].body.body.value.condition
    assert isinstance(call, Call) and call.op.name == "tir.isnullptr" and str(call.dtype) == "bool"


def test_reference_and_compiled_see_non_null_data() -> None:
    func = from_source(HEADER + PROGRAM)["main"]
    a = np.arange(8, dtype="int32") * 3
    want = np.zeros(8, "int32")
    run_prim_func(func, a, want)
    np.testing.assert_array_equal(want, a)
    pytest.importorskip("llvmlite")
    import tvms

    got = np.zeros(8, "int32")
    tvms.build(func)(a, got)
    np.testing.assert_array_equal(got, want)


UNDEF = '''    @T.prim_func
    def main(A: T.Buffer((8,), "int32")):
        for i in range(8):
            A[i] = T.Select(i < 8, i, T.undef())'''


@pytest.mark.parametrize("header", [HEADER, HEADER_027], ids=["classic", "tvm-0.27"])
def test_undef_prints_bare_and_is_an_int32(header: str) -> None:
    mod = from_source(header + UNDEF)
    assert mod.script(dialect="classic" if header is HEADER else "tvm-0.27") == header + UNDEF
    call = mod["main"].body.body.value.false_value
    assert isinstance(call, Call) and call.op.name == "tir.undef" and str(call.dtype) == "int32"


def test_undef_where_it_is_not_chosen_leaves_no_trace() -> None:
    func = from_source(HEADER + UNDEF)["main"]
    want = np.zeros(8, "int32")
    run_prim_func(func, want)
    np.testing.assert_array_equal(want, np.arange(8))
    pytest.importorskip("llvmlite")
    import tvms

    got = np.zeros(8, "int32")
    tvms.build(func)(got)
    np.testing.assert_array_equal(got, want)
