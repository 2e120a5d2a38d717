"""``StructInfo.script()`` prints every kind of struct info as it is written in a signature."""
from __future__ import annotations

import pytest

import tvms  # noqa: F401  (registers the printer)
from tvms.ir.dtype import DataType
from tvms.ir.expr import Var
from tvms.ir.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                 TensorStructInfo, TupleStructInfo)

n = Var("n", DataType("int64"))

CASES = [
    (TensorStructInfo([n, 4], "float32"), 'R.Tensor((n, 4), dtype="float32")', None),
    (TensorStructInfo([8], "int32"), 'R.Tensor((8,), dtype="int32")', None),
    (TensorStructInfo(None, "float32", 2), 'R.Tensor(dtype="float32", ndim=2)', None),
    (TensorStructInfo([2, 3]), "R.Tensor((2, 3))", None),
    (TensorStructInfo(None), "R.Tensor", None),
    (ShapeStructInfo([n, 4]), "R.Shape([n, 4])", None),
    (ShapeStructInfo(None, 2), "R.Shape(ndim=2)", None),
    (ShapeStructInfo(), "R.Shape(ndim=-1)", None),
    (TupleStructInfo([TensorStructInfo([n], "int32"), PrimStructInfo("int64")]),
     'R.Tuple(R.Tensor((n,), dtype="int32"), R.Prim("int64"))',
     'R.Tuple(R.Tensor((n,), dtype="int32"), T.int64)'),
    (TupleStructInfo([]), "R.Tuple", None),
    (PrimStructInfo("float32"), 'R.Prim("float32")', "T.float32"),
    (PrimStructInfo("int64", n), "R.Prim(value=n)", "T.int64"),  # (0.27 has no value in struct info)
    (ObjectStructInfo(), "R.Object", "R.Any"),
    (FuncStructInfo([TensorStructInfo([n], "float32")], TensorStructInfo([n], "float32")),
     'R.Callable((R.Tensor((n,), dtype="float32"),), R.Tensor((n,), dtype="float32"), True)', None),
    (FuncStructInfo([], TupleStructInfo([]), False), "R.Callable((), R.Tuple, False)", None),
    (FuncStructInfo([PrimStructInfo("int64"), ObjectStructInfo()], ObjectStructInfo()),
     'R.Callable((R.Prim("int64"), R.Object), R.Object, True)', "R.Callable((T.int64, R.Any), R.Any, True)"),
    # opaque: TVM names only what differs from its defaults (returns anything, impure)
    (FuncStructInfo(None, ObjectStructInfo(), False), "R.Callable", None),
    (FuncStructInfo(None, ObjectStructInfo(), True), "R.Callable(purity=True)", None),
    (FuncStructInfo(None, TensorStructInfo([8], "int32"), False), 'R.Callable(ret=R.Tensor((8,), dtype="int32"))',
     None),
]


@pytest.mark.parametrize("sinfo, classic, tvm027", CASES, ids=[c[1] for c in CASES])
def test_struct_info_prints_in_both_dialects(sinfo, classic, tvm027) -> None:
    assert sinfo.script() == classic
    assert sinfo.script(dialect="tvm-0.27") == (tvm027 or classic)
