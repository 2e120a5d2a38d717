"""The IR layer: data types, immutability, structural equality and hashing, the walkers."""
from __future__ import annotations

import dataclasses

import pytest

from tvms import TVMSError
from tvms.ir import (Add, DataType, FloatImm, For, IntImm, Mul, Mutator, PrimFunc, Var, Visitor,
                     decl_buffer, first_mismatch, structural_equal, structural_hash, walk)
from tvms.ir.arith import binary, negate, to_expr
from tvms.ir.arith import simplify
from tvms.ir.stmt import BufferStore, seq
from tvms.script import from_source

from conftest import ROOT

I32 = DataType("int32")
_MATMUL = (ROOT / "examples" / "matmul.tvms").read_text()


def test_dtypes_parse_and_intern() -> None:
    assert DataType("float32") is DataType("float32")
    v = DataType("float32x4")
    assert (v.code, v.bits, v.lanes) == ("float", 32, 4)
    assert v.element_of is DataType("float32")
    assert DataType("bool").is_bool and DataType("handle").is_handle
    assert DataType("float8_e4m3fn").bits == 8
    assert DataType("float8_e4m3fnx2").element_of is DataType("float8_e4m3fn")  # (the format, then lanes)
    assert (DataType("float8").bits, DataType("float8").is_float) == (8, True)  # TVM's plain float8
    scalable = DataType("float32xvscalex4")
    assert (scalable.lanes, scalable.scalable, str(scalable.element_of)) == (4, True, "float32")
    assert DataType("bool").with_lanes_of(scalable) is DataType("boolxvscalex4")
    for bad in ("float33", "float7", "int7", "vec4", "float32x1", "bfloat32", "float32xvscalex0"):
        with pytest.raises(TVMSError, match="unknown data type"):
            DataType(bad)


def test_nodes_are_immutable_and_identity_equal() -> None:
    x = Var("x")
    e = Add(x, IntImm(I32, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.a = x  # type: ignore[misc]
    assert e != Add(x, IntImm(I32, 1))  # equality is identity
    assert structural_equal(e, Add(x, IntImm(I32, 1)))


def test_structural_equality_binds_variables_where_they_are_defined() -> None:
    def loop(name: str, offset: Var) -> For:
        i = Var(name)
        buf = decl_buffer((4,), "float32", "A")  # buffers compare by their declaration
        return For(i, IntImm(I32, 0), IntImm(I32, 4), "serial",
                   BufferStore(buf, FloatImm(DataType("float32"), 0.0), (Add(i, offset),)))

    k = Var("k")
    a, b = loop("i", k), loop("j", k)
    assert structural_equal(a, b)  # the loop variables are bound: their names do not matter
    assert structural_hash(a) == structural_hash(b)
    c = loop("i", Var("k"))  # another free variable of the same name is another variable
    assert not structural_equal(a, c)
    assert structural_equal(a, c, map_free_vars=True)
    x, y = Var("x"), Var("y")
    assert not structural_equal(Add(x, y), Add(x, x), map_free_vars=True)
    assert structural_equal(Add(x, y), Add(y, x), map_free_vars=True)


def test_first_mismatch_names_the_path() -> None:
    f = from_source(_MATMUL.replace("128", "64"))
    g = from_source(_MATMUL)
    path, lhs, rhs = first_mismatch(f, g)
    assert "shape" in path and (lhs, rhs) == (64, 128)


def test_mutator_returns_the_same_object_when_nothing_changes() -> None:
    mod = from_source(_MATMUL)
    func = mod["main"]
    assert Mutator().visit(func) is func

    class Double(Mutator):
        def visit_IntImm(self, node: IntImm) -> IntImm:
            return IntImm(node.dtype, node.value * 2) if node.value == 128 else node

    doubled = Double().visit(func)
    assert doubled is not func and isinstance(doubled, PrimFunc)
    assert "T.grid(256, 256, 256)" in doubled.script()


def test_visitor_dispatches_on_class_name() -> None:
    class CountStores(Visitor):
        def __init__(self) -> None:
            self.count = 0

        def visit_BufferStore(self, node) -> None:
            self.count += 1
            self.generic_visit(node)

    counter = CountStores()
    counter.visit(from_source(_MATMUL)["main"])
    assert counter.count == 2  # the init and the update
    assert sum(isinstance(n, BufferStore) for n in walk(from_source(_MATMUL)["main"])) == 2


def test_python_operators_follow_tvm_conversions() -> None:
    n = Var("n", DataType("int64"))
    e = binary(Mul, n, 16)
    assert e.b.dtype == DataType("int64")  # the literal takes the variable's type
    assert binary(Add, IntImm(I32, 2), IntImm(I32, 3)).value == 5  # constants fold
    assert negate(IntImm(I32, 4)).value == -4
    widened = binary(Add, Var("i"), n)
    assert widened.dtype == DataType("int64")
    assert to_expr(2 ** 40).dtype == DataType("int64")


def test_a_scalar_meets_a_vector_broadcast_as_tvm_does() -> None:
    """A vector index plus a scalar offset (InjectVirtualThread on a vectorized access) is a
    vector; two vectors of different lanes are still refused."""
    from tvms.ir.expr import Broadcast, Ramp

    ramp = Ramp(Var("i"), IntImm(I32, 1), 4)
    offset = binary(Add, ramp, Var("v", DataType("int64")))
    assert offset.dtype == DataType("int64x4") and isinstance(offset.b, Broadcast)
    assert binary(Mul, 2, ramp).dtype == DataType("int32x4")
    with pytest.raises(TVMSError, match="cannot combine vectors of int32x4 and int32x2"):
        binary(Add, ramp, Ramp(Var("j"), IntImm(I32, 1), 2))


def test_simplify_cancels_affine_terms() -> None:
    i = Var("i")
    start = binary(Mul, i, 15)
    stop = binary(Add, start, 15)
    assert simplify(binary(__import__("tvms.ir", fromlist=["Sub"]).Sub, stop, start)).value == 15


def test_seq_flattens() -> None:
    buf = decl_buffer((1,), "float32", "A")
    s = BufferStore(buf, FloatImm(DataType("float32"), 1.0), (IntImm(I32, 0),))
    assert seq([s]) is s
    assert len(seq([seq([s, s]), s]).seq) == 3

