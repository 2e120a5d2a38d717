"""quantize / dequantize: LegalizeOps against Apache TVM 0.27 (golden math_quant made by
generate_math_with_tvm.py), the compiled module against the reference executor, the numpy
references against the formulas written out."""
from __future__ import annotations

import numpy as np
import pytest

from test_legalize_index import _compiled_equals_reference, _ref, _text
from tvms.ir import TVMSError
from tvms.ir.dtype import DataType
from tvms.lowering.relax.legalize import LegalizeOps
from tvms.script import from_source


def test_legalized_as_tvm_and_printed_back() -> None:
    out = LegalizeOps()(from_source(_text("math_quant", "before")))
    assert out.script(dialect="tvm-0.27") == _text("math_quant", "legalized")
    printed = _text("math_quant", "printed_by_tvm")
    assert from_source(printed).script(dialect="tvm-0.27") == printed


def test_quant_compiled_equals_reference() -> None:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 3)) * 40).astype("float32")
    x[0, 0], x[1, 0] = 1.25, -0.75  # (halves after scaling: rounded to even)
    q = rng.integers(-128, 128, (2, 3)).astype("int8")
    s = np.array([0.5, 0.25, 2.0], "float32")
    z = np.array([3, -2, 0], "int8")
    args = (x, q, s, z, np.array(0.75, "float32"), np.array([[7]], "uint8"), x.astype("float16"))
    _compiled_equals_reference("math_quant", args, 6)


def test_quant_references_follow_the_formulas() -> None:
    x = np.array([[1.25, -300.0, 2.5]], "float32")
    s, z = np.array([0.5, 1.0, 1.0], "float32"), np.array([1, 0, 0], "int8")
    got = _ref("quantize", x, s, z, out_dtype=DataType("int8"), axis=1)
    np.testing.assert_array_equal(got, np.array([[3, -128, 2]], "int8"))  # 2.5 rounds to even, -300 clips
    back = _ref("dequantize", got, s, z, out_dtype=DataType("float32"), axis=-1)
    np.testing.assert_array_equal(back, [[1, -128, 2]])
    assert _ref("dequantize", np.array([100000], "int32"), np.array(1, "float32"), np.array(0, "int8"),
                out_dtype=DataType("float16"), axis=0)[0] == np.float16(65504)


def test_quant_errors_name_the_operator() -> None:
    with pytest.raises(TVMSError, match=r"R\.quantize: the scale has 2 values for dimension 1 of size 3"):
        from_source("""
@R.function
def f(x: R.Tensor((2, 3), "float32"), s: R.Tensor((2,), "float32"), z: R.Tensor((3,), "int8")):
    a = R.quantize(x, s, z, axis=1)
    return a
""")
    with pytest.raises(TVMSError, match=r"R\.dequantize: cannot dequantize to int8"):
        from_source("""
@R.function
def f(x: R.Tensor((2, 3), "int8"), s: R.Tensor((3,), "float32"), z: R.Tensor((3,), "int8")):
    a = R.dequantize(x, s, z, out_dtype="int8")
    return a
""")
