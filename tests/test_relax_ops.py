"""Relax operators: struct-info inference against hand-computed shapes (static, symbolic, only
the rank known), attribute defaults and printing order, and the errors, as Apache TVM 0.27 has
them."""
from __future__ import annotations

import numpy as np
import pytest

from tvms.ir import relax as rx
from tvms.ir.dtype import DataType
from tvms.ir.errors import TVMSError
from tvms.ir.expr import IntImm, Var
from tvms.ir.module import GlobalVar
from tvms.ir.relax_infer import dim_add, dim_mul, fmt_dim, make_tensor
from tvms.ir.relax_op import lookup, make_call
from tvms.ir.struct_info import (VOID, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                 TensorStructInfo, TupleStructInfo)

I64 = DataType("int64")
n, m, k = Var("n", I64), Var("m", I64), Var("k", I64)


def t(*dims, dtype="float32", name="x"):
    """A tensor variable; dims are ints or symbolic Vars."""
    return rx.Var(name, make_tensor(dims, DataType(dtype) if dtype else VOID))


def t_ndim(ndim, dtype="float32"):
    return rx.Var("x", TensorStructInfo(None, DataType(dtype) if dtype else VOID, ndim))


def shape(*dims):
    values = tuple(IntImm(I64, d) if isinstance(d, int) else d for d in dims)
    return rx.ShapeExpr(values, ShapeStructInfo(values))


def const(value, dtype):
    data = np.array(value, dtype=dtype)
    return rx.Constant(data, make_tensor(data.shape, DataType(dtype)))


def dims(s):
    """A tensor's shape as ints and strings: (2, "n * 3"); None when only the rank is known."""
    assert isinstance(s, TensorStructInfo), s
    if s.dims is None:
        return None
    return tuple(d.value if isinstance(d, IntImm) else fmt_dim(d) for d in s.dims)


def call(op, *args, **attrs):
    return make_call(op, list(args), attrs)


def sinfo(op, *args, **attrs):
    return call(op, *args, **attrs).struct_info


def fails(op, *args, match=None, **attrs):
    with pytest.raises(TVMSError) as info:
        call(op, *args, **attrs)
    text = str(info.value)
    assert text.startswith(f"R.{op}"), text
    for part in ([match] if isinstance(match, str) else match or []):
        assert part in text, text
    return text


REQUIRED = """add subtract multiply divide floor_divide power maximum minimum equal not_equal less
less_equal greater greater_equal exp log sqrt rsqrt tanh sigmoid negative abs matmul permute_dims
reshape expand_dims squeeze concat split strided_slice take broadcast_to astype where sum mean max
min argmax argmin zeros ones full nn.relu nn.gelu nn.gelu_tanh nn.silu nn.softmax nn.log_softmax
nn.layer_norm nn.rms_norm nn.conv2d nn.max_pool2d nn.avg_pool2d shape_of call_tir call_dps_packed
call_packed""".split()


def test_every_operator_is_registered():
    assert [op for op in REQUIRED if lookup(op) is None] == []


# ---------------------------------------------------------------- attributes as TVM prints them
ATTRS = {
    "matmul": [("out_dtype", None)],
    "permute_dims": [("axes", None)],
    "squeeze": [("axis", None)],
    "concat": [("axis", 0)],
    "take": [("axis", None), ("mode", "fast")],
    "sum": [("axis", None), ("keepdims", False)],
    "argmax": [("axis", None), ("keepdims", False)],
    "full": [("dtype", None)],
    "nn.softmax": [("axis", -1)],
    "nn.rms_norm": [("axes", (-1,)), ("epsilon", 1e-5)],
    "strided_slice": [("assume_inbound", False)],
    "nn.conv2d": [("strides", (1, 1)), ("padding", (0, 0, 0, 0)), ("dilation", (1, 1)), ("groups", 1),
                  ("data_layout", "NCHW"), ("kernel_layout", "OIHW"), ("out_layout", None),
                  ("out_dtype", None)],
    "nn.max_pool2d": [("pool_size", (1, 1)), ("strides", (1, 1)), ("dilation", (1, 1)),
                      ("padding", (0, 0, 0, 0)), ("ceil_mode", False), ("count_include_pad", False),
                      ("layout", "NCHW"), ("out_layout", None)],
}


@pytest.mark.parametrize("op", sorted(ATTRS))
def test_attributes_are_declared_in_printing_order_with_tvm_defaults(op):
    assert [(a.name, a.default) for a in lookup(op).attrs] == ATTRS[op]


def test_attribute_names_of_the_remaining_operators():
    names = {op: [a.name for a in lookup(op).attrs] for op in REQUIRED}
    assert names["split"] == ["indices_or_sections", "axis"]
    assert names["expand_dims"] == ["axis"] and names["astype"] == ["dtype"]
    assert names["zeros"] == names["ones"] == ["dtype"]
    assert names["nn.layer_norm"] == ["axes", "epsilon", "center", "scale"]
    assert names["nn.avg_pool2d"] == names["nn.max_pool2d"]
    assert names["argmin"] == names["argmax"] and names["mean"] == names["sum"]
    for op in ("add", "less", "exp", "nn.relu", "reshape", "where", "broadcast_to", "shape_of"):
        assert names[op] == []


def test_attributes_are_normalized_by_kind():
    c = call("sum", t(2, 3), axis=1)
    assert dict(c.attrs) == {"axis": (1,), "keepdims": False}
    c = call("matmul", t(2, 3), t(3, 4), out_dtype="float16")
    assert c.attrs["out_dtype"] == DataType("float16") and isinstance(c.attrs["out_dtype"], DataType)
    assert call("matmul", t(2, 3), t(3, 4), out_dtype="void").attrs["out_dtype"] is None
    assert call("expand_dims", t(2, 3), axis=[0, 1]).attrs["axis"] == (0, 1)
    assert call("nn.layer_norm", t(2, 3), t(3), t(3), axes=-1, epsilon=1).attrs["epsilon"] == 1.0
    fails("sum", t(2, 3), axis="1", match="'axis' must be a list of integers")
    fails("nn.softmax", t(2, 3), axis=1.5, match="'axis' must be an integer")
    fails("sum", t(2, 3), keepdims="yes", match="'keepdims' must be True or False")
    fails("astype", t(2, 3), dtype="float33", match="'dtype' must be a data type")
    fails("sum", t(2, 3), axes=[1], match="has no attribute 'axes'")
    fails("expand_dims", t(2, 3), match="needs the attribute 'axis'")


def test_conv2d_and_pool_attributes_are_expanded_as_tvm_does():
    c = call("nn.conv2d", t(1, 3, 8, 8), t(4, 3, 3, 3), strides=2, padding=(1, 2), dilation=1)
    assert c.attrs["strides"] == (2, 2) and c.attrs["padding"] == (1, 2, 1, 2)
    assert c.attrs["dilation"] == (1, 1) and c.attrs["out_layout"] == "NCHW"
    assert list(c.attrs) == [name for name, _ in ATTRS["nn.conv2d"]]
    c = call("nn.max_pool2d", t(1, 8, 8, 3), pool_size=3, padding=1, layout="NHWC")
    assert c.attrs["pool_size"] == (3, 3) and c.attrs["padding"] == (1, 1, 1, 1)
    assert c.attrs["out_layout"] == "NHWC"
    fails("nn.conv2d", t(1, 3, 8, 8), t(4, 3, 3, 3), padding=(1, 2, 3),
          match="padding must have 1, 2 or 4")
    fails("nn.conv2d", t(1, 3, 8, 8), t(4, 3, 3, 3), groups=0, match="groups must be positive")


def test_attributes_may_come_positionally_and_arguments_by_keyword():
    assert call("expand_dims", t(2, 3), rx.PrimValue(IntImm(I64, 0))).attrs["axis"] == (0,)
    assert call("astype", t(2, 3), rx.StringImm("float16")).struct_info.dtype == "float16"
    c = make_call("nn.max_pool2d", [t(1, 3, 8, 8), rx.PrimValue(IntImm(I64, 2)),
                                    rx.PrimValue(IntImm(I64, 2)), rx.PrimValue(IntImm(I64, 1))])
    assert c.attrs["pool_size"] == (2, 2) and c.attrs["padding"] == (1, 1, 1, 1)  # TVM's order
    c = make_call("full", [], {"shape": shape(2, 3), "fill_value": const(1.0, "float32")})
    assert dims(c.struct_info) == (2, 3)
    with pytest.raises(TVMSError, match="got the attribute 'axis' twice"):
        make_call("expand_dims", [t(2, 3), rx.PrimValue(IntImm(I64, 0))], {"axis": 1})
    with pytest.raises(TVMSError, match=r"R\.exp takes at most 1"):
        make_call("exp", [t(2, 3), t(2, 3)])


# ---------------------------------------------------------------- elementwise
ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.parametrize("op", ARITH + COMPARE)
def test_binary_broadcasting(op):
    dtype = "bool" if op in COMPARE else "float32"
    s = sinfo(op, t(2, 3), t(4, 1, 3))
    assert dims(s) == (4, 2, 3) and s.dtype == dtype
    assert dims(sinfo(op, t(n, 3), t(1, 3))) == ("n", 3)
    assert dims(sinfo(op, t(1, 3), t(n, 1))) == ("n", 3)
    fails(op, t(2, 3), t(4, 3), match=["(2, 3)", "(4, 3)", "do not broadcast"])


@pytest.mark.parametrize("op", ARITH)
def test_arithmetic_dtypes_must_match(op):
    fails(op, t(2, 3), t(2, 3, dtype="int32"), match=["float32", "int32"])
    assert sinfo(op, t(2, 3, dtype="int32"), t(2, 3, dtype="int32")).dtype == "int32"


def test_binary_dtype_rules():
    assert sinfo("less", t(2, 3, dtype="int32"), t(2, 3)).dtype == "bool"  # not compared
    assert sinfo("add", t(2, 3), t(2, 3, dtype="bool")).dtype == "float32"  # bool lets through
    assert sinfo("add", t(2, 3, dtype="bool"), t(2, 3)).dtype == "bool"  # ... the left dtype
    s = sinfo("add", t(2, 3, dtype=None), t(2, 3))
    assert s.dtype == VOID and dims(s) == (2, 3)
    assert sinfo("less", t(2, 3, dtype=None), t(2, 3)).dtype == "bool"


def test_symbolic_broadcasting_that_cannot_be_decided_keeps_only_the_rank():
    for a, b in ((t(n, 3), t(m, 3)), (t(n, 3), t(2, 3)), (t(2, 3), t(n, 3))):
        s = sinfo("add", a, b)
        assert s.dims is None and s.ndim == 2
    assert dims(sinfo("add", t(n), t(n))) == ("n",)
    assert sinfo("add", t_ndim(2), t(4, n, 3)).ndim == 3
    assert sinfo("add", t_ndim(-1), t(4, 3)).ndim == -1
    sv = rx.Var("s", ShapeStructInfo(None, 2))
    a = rx.Var("a", TensorStructInfo(sv, DataType("float32"), 2))
    b = rx.Var("b", TensorStructInfo(sv, DataType("float32"), 2))
    assert sinfo("add", a, b).shape is sv  # the same shape variable on both sides


def test_binary_operands_may_be_scalars():
    p = rx.Var("p", PrimStructInfo(DataType("float32")))
    assert dims(sinfo("multiply", t(2, 3), p)) == (2, 3)
    assert dims(sinfo("add", t(dtype="float32"), p)) == (1,)  # a scalar counts as (1,)
    s = sinfo("add", p, p)
    assert isinstance(s, PrimStructInfo) and s.dtype == "float32"
    assert sinfo("less", p, p).dtype == "bool"
    fails("add", t(2, 3), rx.Var("q", PrimStructInfo(I64)), match=["float32", "int64"])
    fails("add", t(2, 3), shape(2, 3), match="must be a tensor or a scalar")


FLOAT_UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "nn.gelu", "nn.gelu_tanh", "nn.silu"]


@pytest.mark.parametrize("op", FLOAT_UNARY + ["negative", "abs", "nn.relu"])
def test_unary_keeps_the_struct_info(op):
    x = t(n, 3)
    assert sinfo(op, x) is x.struct_info
    assert sinfo(op, t_ndim(3)).ndim == 3
    assert sinfo(op, t(2, 3, dtype=None)).dtype == VOID
    fails(op, shape(2), match="must be a tensor")


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_transcendental_unary_ops_need_floats(op):
    fails(op, t(2, 3, dtype="int32"), match=["float dtype", "int32"])
    assert sinfo(op, t(2, 3, dtype="bfloat16")).dtype == "bfloat16"


def test_integer_friendly_unary_ops():
    for op in ("negative", "abs", "nn.relu"):
        assert sinfo(op, t(2, 3, dtype="int32")).dtype == "int32"


def test_astype():
    s = sinfo("astype", t(n, 3), dtype="float16")
    assert dims(s) == ("n", 3) and s.dtype == "float16"
    assert sinfo("astype", t_ndim(-1, None), dtype="int32").dtype == "int32"
    fails("astype", t(2, 3), match="needs the attribute 'dtype'")


def test_where():
    c = t(2, 1, dtype="bool")
    assert dims(sinfo("where", c, t(1, 3), t(3))) == (2, 3)
    assert dims(sinfo("where", t(n, 1, dtype="bool"), t(n, 3), t(1, 3))) == ("n", 3)
    assert sinfo("where", t(m, 1, dtype="bool"), t(n, 3), t(1, 3)).ndim == 2
    assert sinfo("where", t(2, 3, dtype=None), t(2, 3), t(2, 3)).dtype == "float32"
    fails("where", t(2, 3), t(2, 3), t(2, 3), match="condition must be a bool tensor")
    fails("where", c, t(2, 3), t(2, 3, dtype="int32"), match=["float32", "int32"])
    fails("where", t(5, 3, dtype="bool"), t(2, 3), t(2, 3), match="do not broadcast")


# ---------------------------------------------------------------- matmul
def test_matmul_shapes():
    assert dims(sinfo("matmul", t(2, 3), t(3, 4))) == (2, 4)
    assert dims(sinfo("matmul", t(5, 1, 2, 3), t(7, 3, 4))) == (5, 7, 2, 4)
    assert dims(sinfo("matmul", t(3), t(3, 4))) == (4,)
    assert dims(sinfo("matmul", t(2, 3), t(3))) == (2,)
    assert dims(sinfo("matmul", t(3), t(3))) == ()
    assert dims(sinfo("matmul", t(n, 3), t(3, m))) == ("n", "m")
    assert dims(sinfo("matmul", t(2, k), t(k, 4))) == (2, 4)
    assert dims(sinfo("matmul", t(2, n), t(3, 4))) == (2, 4)  # n may be 3: trusted
    assert sinfo("matmul", t(n, 2, 3), t(m, 3, 4)).ndim == 3
    assert sinfo("matmul", t_ndim(3), t_ndim(2)).ndim == 3
    assert sinfo("matmul", t_ndim(1), t_ndim(1)).ndim == 0
    assert sinfo("matmul", t_ndim(-1), t(3, 4)).ndim == -1


def test_matmul_dtypes_and_errors():
    assert sinfo("matmul", t(2, 3, dtype="float16"), t(3, 4, dtype="float16"),
                 out_dtype="float32").dtype == "float32"
    assert sinfo("matmul", t(2, 3), t(3, 4, dtype="float16"), out_dtype="float32").dtype == "float32"
    assert sinfo("matmul", t(2, 3, dtype=None), t(3, 4)).dtype == VOID
    fails("matmul", t(2, 3), t(4, 5), match=["(2, 3)", "(4, 5)", "3 against 4"])
    fails("matmul", t(2, n), t(dim_add(n, 1), 4), match="reduction")
    fails("matmul", t(2, 3), t(3, 4, dtype="float16"), match=["float32", "float16"])
    fails("matmul", t(5, 2, 3), t(6, 3, 4), match="do not broadcast")
    fails("matmul", t(dtype="float32"), t(3, 4), match="scalar")


# ---------------------------------------------------------------- layout
def test_permute_dims():
    x = t(2, n, 4)
    assert dims(sinfo("permute_dims", x)) == (4, "n", 2)
    assert dims(sinfo("permute_dims", x, axes=[0, -1, 1])) == (2, 4, "n")
    assert sinfo("permute_dims", x, axes=[0, 1, 2]) is x.struct_info
    assert sinfo("permute_dims", t_ndim(3)).ndim == 3
    assert sinfo("permute_dims", t_ndim(-1)).ndim == -1
    fails("permute_dims", x, axes=[0, 1], match="3 dimensions")
    fails("permute_dims", x, axes=[0, 1, 1], match="more than once")
    fails("permute_dims", x, axes=[0, 1, 3], match="axis 3 is out of range")
    fails("permute_dims", t_ndim(-1), axes=[1, 0], match="known rank")


def test_reshape():
    assert dims(sinfo("reshape", t(2, 3), (3, 2))) == (3, 2)
    c = call("reshape", t(2, 3), (-1, 2))
    assert dims(c.struct_info) == (3, 2) and [v.value for v in c.args[1].values] == [3, 2]
    assert dims(sinfo("reshape", t(2, 3), shape(0, 3))) == (2, 3)
    assert dims(sinfo("reshape", t(n, 3), (-1, 3))) == ("n", 3)
    assert dims(sinfo("reshape", t(n, 2, 3), (-1,))) == ("n * 6",)
    assert dims(sinfo("reshape", t(n, 2, 3), (2, -1))) == (2, "n * 3")
    assert dims(sinfo("reshape", t(n, 2, 3), (0, -1))) == ("n", 6)
    assert dims(sinfo("reshape", t(n, m, 4), (n, -1))) == ("n", "m * 4")
    assert dims(sinfo("reshape", t(n, 3), (m, 2))) == ("m", 2)  # cannot be disproved
    assert dims(sinfo("reshape", t_ndim(2), (4, 2))) == (4, 2)
    sv = rx.Var("s", ShapeStructInfo(None, 2))
    s = sinfo("reshape", t(2, 3), sv)
    assert s.shape is sv and s.ndim == 2
    fails("reshape", t(2, 3), (4, 2), match=["(2, 3)", "(4, 2)", "6", "8"])
    fails("reshape", t(2, 3), (-1, -1), match="more than one -1")
    fails("reshape", t(2, 3), (-1, 4), match="cannot reshape")
    fails("reshape", t_ndim(2), (-1, 4), match="needs the input's shape")
    fails("reshape", t(2, 3), t(2), match="must be a shape")


def test_broadcast_to():
    assert dims(sinfo("broadcast_to", t(1, 3), (4, 2, 3))) == (4, 2, 3)
    assert dims(sinfo("broadcast_to", t(1, 3), shape(n, 2, 3))) == ("n", 2, 3)
    assert dims(sinfo("broadcast_to", t(n, 3), (4, m))) == (4, "m")
    assert sinfo("broadcast_to", t(3, dtype=None), (2, 3)).dtype == VOID
    fails("broadcast_to", t(2, 3), (4, 2, 4), match=["(2, 3)", "(4, 2, 4)"])
    fails("broadcast_to", t(2, 3), (3,), match="fewer dimensions")


def test_expand_dims():
    assert dims(sinfo("expand_dims", t(2, n), axis=1)) == (2, 1, "n")
    assert dims(sinfo("expand_dims", t(2, 3), axis=[-1, -4])) == (1, 2, 3, 1)
    assert call("expand_dims", t(2, 3), axis=1).attrs["axis"] == (1,)
    assert sinfo("expand_dims", t_ndim(2), axis=[1]).ndim == 3
    assert sinfo("expand_dims", t_ndim(-1), axis=[1]).ndim == -1
    fails("expand_dims", t(2, 3), axis=3, match="axis 3 is out of range")
    fails("expand_dims", t(2, 3), axis=[1, 1], match="more than once")


def test_squeeze():
    assert dims(sinfo("squeeze", t(2, 1, 3, 1))) == (2, 3)
    assert dims(sinfo("squeeze", t(2, 1, 3, 1), axis=[1, -1])) == (2, 3)
    assert dims(sinfo("squeeze", t(2, 1, 3, 1), axis=[0])) == (2, 1, 3, 1)  # not 1: kept
    assert dims(sinfo("squeeze", t(n, 1, 3), axis=[0])) == (1, 3)  # symbolic: assumed 1
    assert sinfo("squeeze", t(n, 1, 3)).ndim == -1
    assert sinfo("squeeze", t_ndim(3), axis=[0]).ndim == 2
    fails("squeeze", t(2, 1), axis=[2], match="axis 2 is out of range")


def test_concat():
    assert dims(sinfo("concat", [t(2, 3), t(2, 4)], axis=1)) == (2, 7)
    assert dims(sinfo("concat", [t(2, 3), t(5, 3)])) == (7, 3)
    assert dims(sinfo("concat", [t(n, 3), t(m, 3)], axis=0)) == ("n + m", 3)
    assert dims(sinfo("concat", [t(n, 3), t(n, 3)], axis=0)) == ("n * 2", 3)
    assert dims(sinfo("concat", [t(n, 3), t(2, 3), t(m, 3)], axis=0)) == ("n + 2 + m", 3)
    assert dims(sinfo("concat", [t(n, 3), t(n, m)], axis=-1)) == ("n", "3 + m")
    assert sinfo("concat", [t(n, 3), t(m, 3)], axis=1).ndim == 2
    assert dims(sinfo("concat", [t(2), t(3)], axis=None)) == (5,)
    assert sinfo("concat", [t_ndim(-1), t(2, 3)], axis=1).ndim == 2
    assert sinfo("concat", [t(2, 3, dtype=None), t(2, 3)], axis=1).dtype == VOID
    fails("concat", [t(2, 3), t(3, 4)], axis=1, match=["(2, 3)", "(3, 4)"])
    fails("concat", [t(2, 3), t(2, 3, 4)], axis=1, match="same rank")
    fails("concat", [t(2, 3), t(2, 3, dtype="float16")], axis=1, match="same dtype")
    fails("concat", [t(2, 3), t(2, 3)], axis=2, match="axis 2 is out of range")
    fails("concat", [], axis=0, match="at least one tensor")
    fails("concat", t(2, 3), axis=0, match="tuple of tensors")


def test_split():
    s = sinfo("split", t(4, 8), indices_or_sections=3, axis=1)
    assert isinstance(s, TupleStructInfo) and [dims(f) for f in s.fields] == [(4, 3), (4, 3), (4, 2)]
    s = sinfo("split", t(4, 8), indices_or_sections=[2, 5, 10], axis=-1)
    assert [dims(f) for f in s.fields] == [(4, 2), (4, 3), (4, 3), (4, 0)]
    assert dims(sinfo("split", t(4, 8), indices_or_sections=1)) == (4, 8)  # one piece: the input
    s = sinfo("split", t(n, 8), indices_or_sections=2)
    assert [dims(f) for f in s.fields] == [("(n + 1) // 2", 8), ("n - (n + 1) // 2", 8)]
    s = sinfo("split", t(dim_mul(n, 2), 8), indices_or_sections=2)
    assert [dims(f) for f in s.fields] == [("n", 8), ("n", 8)]
    s = sinfo("split", t(n, 8), indices_or_sections=[2, 5])
    assert [dims(f)[0] for f in s.fields] == ["T.min(2, n)", "T.max(T.min(5, n) - T.min(2, n), 0)",
                                              "T.max(n - 5, 0)"]
    assert [f.ndim for f in sinfo("split", t_ndim(2), indices_or_sections=2).fields] == [2, 2]
    fails("split", t(4, 8), indices_or_sections=2, axis=2, match="axis 2 is out of range")
    fails("split", t(4, 8), indices_or_sections=0, match="must be positive")
    fails("split", t(4, 8), match="needs the attribute 'indices_or_sections'")


def test_strided_slice():
    x = t(4, 8)
    c = call("strided_slice", x, [0, 1], [1, 0], [3, 2])
    assert dims(c.struct_info) == (2, 2) and isinstance(c.args[1], rx.Tuple)
    assert dims(sinfo("strided_slice", x, [1], [0], [8], [2])) == (4, 4)
    assert dims(sinfo("strided_slice", x, [1], [-3], [100])) == (4, 3)
    assert dims(sinfo("strided_slice", x, [1], [7], [0], [-1])) == (4, 7)
    assert dims(sinfo("strided_slice", x, [0], [5], [3])) == (-1, 8)  # as TVM computes it
    assert dims(sinfo("strided_slice", t(n, m), [1], [1], [3])) == ("n", "T.min(3, m) - T.min(1, m)")
    assert dims(sinfo("strided_slice", t(n, 8), [0], [0], [n])) == ("n", 8)
    assert dims(sinfo("strided_slice", t(n, 8), [0], [0], [8], [2])) == ("(T.min(8, n) + 1) // 2", 8)
    assert dims(sinfo("strided_slice", t(n, 8), [0], [1], [3], assume_inbound=True)) == (2, 8)
    assert sinfo("strided_slice", t_ndim(2), [0], [1], [3]).ndim == 2
    fails("strided_slice", x, [2], [1], [3], match="axis 2 is out of range")
    fails("strided_slice", x, [0, 1], [0], [8], match="same length")


def test_take():
    idx = t(2, 4, dtype="int32", name="i")
    assert dims(sinfo("take", t(5, 3), idx, axis=1)) == (5, 2, 4)
    assert dims(sinfo("take", t(5), idx)) == (2, 4)
    assert dims(sinfo("take", t(n, 3), t(m, dtype="int64"), axis=0)) == ("m", 3)
    scalar = rx.PrimValue(IntImm(I64, 1))
    assert dims(sinfo("take", t(5, 3), scalar, axis=0)) == (3,)
    assert sinfo("take", t_ndim(2), t(2, dtype="int64"), axis=0).ndim == 2
    assert call("take", t(5, 3), idx, axis=0, mode="clip").attrs["mode"] == "clip"
    fails("take", t(5, 3), t(2), axis=0, match="integer dtype")
    fails("take", t(5, 3), idx, match="without an axis the data must be 1-d")
    fails("take", t(5, 3), idx, axis=2, match="axis 2 is out of range")


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_statistical_reductions(op):
    x = t(2, n, 4, dtype="int32")
    assert dims(sinfo(op, x)) == ()
    assert sinfo(op, x).dtype == "int32"
    assert dims(sinfo(op, x, axis=1)) == (2, 4)
    assert dims(sinfo(op, x, axis=[0, -1], keepdims=True)) == (1, "n", 1)
    assert dims(sinfo(op, x, keepdims=True)) == (1, 1, 1)
    assert dims(sinfo(op, x, axis=[])) == (2, "n", 4)
    assert sinfo(op, t_ndim(3), axis=[1]).ndim == 2
    assert dims(sinfo(op, t_ndim(3), keepdims=True)) == (1, 1, 1)
    assert sinfo(op, t_ndim(-1), axis=[1]).ndim == -1
    assert dims(sinfo(op, t_ndim(-1))) == ()
    fails(op, x, axis=[3], match="axis 3 is out of range")
    fails(op, x, axis=[1, -2], match="more than once")


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_index_reductions_give_int64(op):
    x = t(2, 3, 4)
    assert sinfo(op, x).dtype == "int64" and dims(sinfo(op, x)) == ()
    assert dims(sinfo(op, x, axis=1)) == (2, 4)
    assert dims(sinfo(op, x, axis=-1, keepdims=True)) == (2, 3, 1)
    assert dims(sinfo(op, t(n, 3), axis=0)) == (3,)
    assert sinfo(op, t_ndim(3), axis=0).ndim == 2
    assert call(op, x, axis=1).attrs["axis"] == 1  # an int, printed axis=1
    fails(op, t(n, 3), axis=2, match="axis 2 is out of range")


# ---------------------------------------------------------------- creation
def test_zeros_ones_full():
    c = call("zeros", (2, n), dtype="float16")
    assert dims(c.struct_info) == (2, "n") and c.struct_info.dtype == "float16"
    assert isinstance(c.args[0], rx.ShapeExpr) and c.struct_info.shape is c.args[0]
    assert call("ones", shape(2, 3), dtype="int32").struct_info.dtype == "int32"
    sv = rx.Var("s", ShapeStructInfo(None, 3))
    s = sinfo("zeros", sv, dtype="float32")
    assert s.shape is sv and s.ndim == 3
    fill = const(1.5, "float32")
    assert sinfo("full", (2, 3), fill).dtype == "float32"
    assert sinfo("full", (2, 3), fill, dtype="float16").dtype == "float16"
    fails("zeros", (2, 3), match="needs the attribute 'dtype'")
    fails("full", (2, 3), const([1.0, 2.0], "float32"), match="zero-rank tensor")
    fails("full", (2, 3), rx.PrimValue(IntImm(I64, 1)), match="zero-rank tensor")
    fails("zeros", t(2), dtype="float32", match="must be a shape")


def test_shape_of():
    s = sinfo("shape_of", t(n, 3))
    assert isinstance(s, ShapeStructInfo) and [fmt_dim(v) for v in s.values] == ["n", "3"]
    assert sinfo("shape_of", t_ndim(3)).ndim == 3 and sinfo("shape_of", t_ndim(3)).values is None


# ---------------------------------------------------------------- nn
@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
def test_softmax(op):
    x = t(n, 3)
    assert sinfo(op, x) is x.struct_info and call(op, x).attrs["axis"] == -1
    assert sinfo(op, x, axis=0) is x.struct_info
    assert sinfo(op, t_ndim(-1, "int32"), axis=5).ndim == -1  # nothing to check yet
    fails(op, x, axis=2, match="axis 2 is out of range")
    fails(op, t(2, 3, dtype="int32"), match="float dtype")


def test_layer_norm_and_rms_norm():
    x, g = t(2, n, 4), t(4, name="g")
    assert sinfo("nn.layer_norm", x, g, g, axes=[-1]) is x.struct_info
    assert sinfo("nn.layer_norm", x, t(n, 4), t(n, 4), axes=[1, 2], center=False) is x.struct_info
    assert sinfo("nn.rms_norm", x, g) is x.struct_info
    s = sinfo("nn.layer_norm", t(2, n, m), t(k), t(m), axes=[-1])
    assert s.dims is None and s.ndim == 3
    fails("nn.layer_norm", x, t(5), g, axes=[-1], match=["(4,)", "(5,)"])
    fails("nn.rms_norm", x, t(5), match=["(4,)", "(5,)"])
    fails("nn.layer_norm", x, t(1, 4), g, axes=[-1], match="one dimension per axis")
    fails("nn.layer_norm", x, t(4, dtype="float16"), g, axes=[-1], match="float16")
    fails("nn.layer_norm", t(2, 4, dtype="int32"), t(4, dtype="int32"), t(4, dtype="int32"),
          axes=[-1], match="float dtype")
    fails("nn.layer_norm", x, g, g, axes=[3], match="axis 3 is out of range")


def test_conv2d_shapes():
    data, weight = t(1, 3, 32, 32), t(8, 3, 3, 3, name="w")
    assert dims(sinfo("nn.conv2d", data, weight)) == (1, 8, 30, 30)
    assert dims(sinfo("nn.conv2d", data, weight, strides=2, padding=1)) == (1, 8, 16, 16)
    assert dims(sinfo("nn.conv2d", data, weight, strides=(2, 1), padding=(1, 2, 3, 4),
                      dilation=2)) == (1, 8, 16, 34)
    sym = t(n, 3, m, k)
    assert dims(sinfo("nn.conv2d", sym, weight)) == ("n", 8, "m - 2", "k - 2")
    assert dims(sinfo("nn.conv2d", sym, weight, padding=1)) == ("n", 8, "m", "k")
    assert dims(sinfo("nn.conv2d", sym, weight, strides=2)) == ("n", 8, "(m - 3) // 2 + 1",
                                                                "(k - 3) // 2 + 1")
    assert dims(sinfo("nn.conv2d", data, t(8, 3, n, m))) == (1, 8, "33 - n", "33 - m")
    assert dims(sinfo("nn.conv2d", t(1, 32, 32, 3), t(3, 3, 3, 8), data_layout="NHWC",
                      kernel_layout="HWIO")) == (1, 30, 30, 8)
    assert dims(sinfo("nn.conv2d", data, weight, out_layout="NHWC")) == (1, 30, 30, 8)
    assert dims(sinfo("nn.conv2d", t(1, 1, 8, 8, 4), t(8, 4, 3, 3),
                      data_layout="NCHW4c")) == (1, 2, 6, 6, 4)
    assert dims(sinfo("nn.conv2d", t(1, 4, 32, 32), t(8, 2, 3, 3), groups=2)) == (1, 8, 30, 30)
    assert sinfo("nn.conv2d", t_ndim(-1), weight).ndim == 4


def test_conv2d_dtypes_and_errors():
    data, weight = t(1, 3, 32, 32), t(8, 3, 3, 3, name="w")
    half = t(1, 3, 32, 32, dtype="float16")
    assert sinfo("nn.conv2d", half, t(8, 3, 3, 3, dtype="float16"),
                 out_dtype="float32").dtype == "float32"
    assert sinfo("nn.conv2d", t(1, 3, 32, 32, dtype="int8"), t(8, 3, 3, 3, dtype="int8")).dtype == "int8"
    fails("nn.conv2d", half, weight, match=["float16", "float32"])
    fails("nn.conv2d", t(1, 4, 32, 32), weight, match=["4 channels", "3 input channels"])
    fails("nn.conv2d", t(1, 6, 32, 32), t(8, 2, 3, 3), groups=3, match="8 output channels")
    fails("nn.conv2d", t(4, 32, 32), weight, match=["NCHW needs a 4-d tensor", "(4, 32, 32)"])
    fails("nn.conv2d", data, weight, data_layout="NCW", match="'NCW' is not a layout of NCHW")
    fails("nn.conv2d", data, t(2, 8, 3, 3, 4), kernel_layout="OIHW4x", match="not a layout of OIHW")


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
def test_pool2d(op):
    x = t(1, 3, 32, 32)
    assert dims(sinfo(op, x)) == (1, 3, 32, 32)
    assert dims(sinfo(op, x, pool_size=2, strides=2)) == (1, 3, 16, 16)
    assert dims(sinfo(op, x, pool_size=3, strides=2, padding=1)) == (1, 3, 16, 16)
    assert dims(sinfo(op, x, pool_size=3, strides=2, ceil_mode=True)) == (1, 3, 16, 16)
    assert dims(sinfo(op, t(1, 3, 31, 31), pool_size=2, strides=2, ceil_mode=True)) == (1, 3, 16, 16)
    small = t(1, 3, 5, 5)
    assert dims(sinfo(op, small, pool_size=2, strides=2, padding=1, ceil_mode=True)) == (1, 3, 3, 3)
    assert dims(sinfo(op, x, pool_size=3, dilation=2)) == (1, 3, 28, 28)
    sym = t(n, 3, m, k)
    assert dims(sinfo(op, sym, pool_size=3, strides=2, padding=1)) == ("n", 3, "(m - 1) // 2 + 1",
                                                                       "(k - 1) // 2 + 1")
    assert dims(sinfo(op, sym, pool_size=3, strides=2, ceil_mode=True)) == ("n", 3, "m // 2", "k // 2")
    assert dims(sinfo(op, t(1, 32, 32, 3), pool_size=2, strides=2, layout="NHWC")) == (1, 16, 16, 3)
    assert sinfo(op, t(1, 3, 8, 8, dtype="int32")).dtype == "int32"
    assert sinfo(op, t_ndim(4)).ndim == 4
    fails(op, t(3, 32, 32), match="NCHW needs a 4-d tensor")
    fails(op, x, pool_size=(1, 2, 3), match="pool_size must have 1 or 2 values")


# ---------------------------------------------------------------- calls
def test_call_tir_and_call_dps_packed():
    out = make_tensor((4,), DataType("float32"))
    x = t(4)
    c = make_call("call_tir", [GlobalVar("add"), [x]], {}, (out,))
    assert c.struct_info is out and isinstance(c.args[1], rx.Tuple)
    c = make_call("call_tir", [GlobalVar("add"), rx.Tuple((x,))], {}, (out, out))
    assert isinstance(c.struct_info, TupleStructInfo) and len(c.struct_info.fields) == 2
    f = rx.ExternFunc("my_func")
    assert make_call("call_dps_packed", [f, [x]], {}, (out,)).struct_info is out
    with pytest.raises(TVMSError, match=r"R\.call_tir: .*output struct info is missing"):
        make_call("call_tir", [GlobalVar("add"), [x]], {})
    with pytest.raises(TVMSError, match=r"R\.call_tir: .*known shape"):
        rank_only = TensorStructInfo(None, DataType("float32"), 1)
        make_call("call_tir", [GlobalVar("add"), [x]], {}, (rank_only,))
    with pytest.raises(TVMSError, match=r"R\.call_tir: the callee must be a TensorIR function"):
        make_call("call_tir", [f, [x]], {}, (out,))
    with pytest.raises(TVMSError, match=r"R\.call_dps_packed: the arguments must be a tuple"):
        make_call("call_dps_packed", [f, x], {}, (out,))


def test_call_packed():
    f = rx.ExternFunc("my_packed")
    out = make_tensor((4,), DataType("float32"))
    assert make_call("call_packed", [f, t(4)], {}, (out,)).struct_info is out
    assert isinstance(make_call("call_packed", [f], {}).struct_info, ObjectStructInfo)
    two = make_call("call_packed", [f, t(4), t(4)], {}, (out, ObjectStructInfo())).struct_info
    assert isinstance(two, TupleStructInfo) and two.fields[0] is out
