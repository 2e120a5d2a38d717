"""``T.isnullptr(handle)`` (issue 14, point 2): a boolean call of ``tir.isnullptr``, printed as
TVM 0.27 prints it, false for every buffer's data in the reference executor and in code
compiled by the LLVM generator (an ``icmp eq`` with the null pointer)."""
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
