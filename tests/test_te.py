"""te.compute / te.create_prim_func against Apache TVM 0.27.

The programs are in fixtures/te/cases.py, written once against a ``te`` module: generate.py runs
them with TVM to write the goldens, these tests run them with tvms.te.
"""
from __future__ import annotations

import importlib.util

import pytest

import tvms
from conftest import CORPUS_COPY, FIXTURES
from tvms import te
from tvms.ir import (GE, IRModule, LT, Add, BufferLoad, Cast, FloatImm, IntImm, Max, Mul, Sub, Var,
                     first_mismatch, structural_equal)
from tvms.ir.errors import TVMSError
from tvms.script import from_source

TE_DIR = FIXTURES / "te"
_spec = importlib.util.spec_from_file_location("tvms_te_cases", TE_DIR / "cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
CASES = {c.__name__: c for c in cases.CASES}


def module_of(name: str) -> IRModule:
    return IRModule({"main": te.create_prim_func(CASES[name](te))})


@pytest.mark.parametrize("name", sorted(CASES))
def test_create_prim_func_prints_as_tvm(name: str) -> None:
    golden = (TE_DIR / f"{name}.tvms").read_text()
    assert module_of(name).script(dialect="tvm-0.27") + "\n" == golden


def test_hand_built_conv2d_matches_topi_corpus() -> None:
    text = module_of("conv2d_nchw").script(dialect="tvm-0.27")
    assert text == (CORPUS_COPY / "te_conv2d_nchw.tvms").read_text().rstrip("\n")


@pytest.mark.parametrize("dialect", ["classic", "tvm-0.27"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_text_parses_back(name: str, dialect: str) -> None:
    mod = module_of(name)
    text = mod.script(dialect=dialect)
    back = from_source(text)
    if name == "dynamic_scale":
        # TVM's iterator domain of an int64 axis starts at an int32 0, which the text cannot show
        # (the printer writes T.axis.spatial(n, i), as TVM does); it reads back as an int64 0.
        path, ours, theirs = first_mismatch(mod, back)
        assert path.endswith("iter_vars[0].dom.min.dtype") and (str(ours), str(theirs)) == ("int32", "int64")
        return
    assert back.script(dialect=dialect) == text
    assert structural_equal(mod, back)


def test_function_shape() -> None:
    f = te.create_prim_func(CASES["two_outputs"](te))
    assert [p.name for p in f.params] == ["var_A", "var_B", "var_C"]
    assert [b.name for b in f.buffer_map.values()] == ["A", "B", "C"]
    assert f.attrs == {"global_symbol": "main", "tir.noalias": True} and f.attrs["tir.noalias"] is True
    assert f.s_tir
    root = f.body.block
    assert root.name_hint == "root" and [b.name for b in root.alloc_buffers] == ["T_sym"]
    assert 'T.func_attr({"tir.noalias": True})' in IRModule({"main": f}).script()


def test_scalar_var_argument_is_a_parameter() -> None:
    n = te.var("n")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    f = te.create_prim_func([A, B, n])
    assert f.params[-1] is n and n not in f.buffer_map


# ---------------------------------------------------------------- operators on PrimExprs
def test_operators_build_expressions_with_tvm_conversions() -> None:
    i = Var("i")
    assert isinstance(i + 1, Add) and (i + 1).b.dtype == i.dtype
    e = 1 - i
    assert isinstance(e, Sub) and isinstance(e.a, IntImm) and e.b is i
    f = i * 2.0
    assert isinstance(f, Mul) and isinstance(f.a, Cast) and f.dtype.is_float
    assert isinstance(i >= 1, GE) and isinstance(3 > i, LT)  # reflected: i < 3
    assert isinstance(IntImm(i.dtype, 2) + 3, IntImm)  # two constants fold
    assert -i is not i and (-i).dtype == i.dtype
    d = {i: 1}  # == stays identity: variables remain usable as keys
    assert d[i] == 1 and Var("i") not in d


def test_tensor_elements_and_axes_in_expressions() -> None:
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    load = A[1, k]
    assert isinstance(load, BufferLoad) and load.indices[1] is k.var
    assert isinstance(k + 1, Add) and isinstance(2 * k, Mul)
    assert A(0, 1).indices[1].value == 1  # topi writes data(*indices)
    with pytest.raises(TVMSError, match="2 dimensions"):
        A[0]


def test_max_elementwise_and_reduction() -> None:
    X = te.placeholder((4, 8), name="X")
    assert isinstance(te.max(X[0, 0], te.const(0, "float32")), Max)
    k = te.reduce_axis((0, 8), name="k")
    r = te.max(X[0, k], axis=k)
    assert isinstance(r, te.Reduce) and r.axis == (k,)
    assert isinstance(r.identity(), FloatImm) and r.identity().value < -3e38
    assert te.min(X[0, k], axis=[k]).identity().value > 3e38
    assert te.sum(X[0, k], axis=k).identity().value == 0
    assert te.max_value("int8").value == 127 and te.min_value("int32").value == -2**31


def test_axis_names_follow_fcompute() -> None:
    A = te.placeholder((2, 3), name="A")
    B = te.compute((2, 3), lambda *idx: A[idx], name="B")
    assert [a.var.name for a in B.op.axis] == ["i0", "i1"]
    C = te.compute((2, 3), lambda x, *rest: A[(x,) + rest], name="C")
    assert [a.var.name for a in C.op.axis] == ["x", "i0"]
    assert C.op.inputs == (A,)


def test_errors() -> None:
    A = te.placeholder((4,), name="A")
    with pytest.raises(TVMSError, match="1 indices"):
        te.compute((4, 4), lambda i: A[i])
    i_axis = te.compute((4,), lambda i: A[i]).op.axis[0]
    with pytest.raises(TVMSError, match="reduce_axis"):
        te.sum(A[0], axis=i_axis)
    with pytest.raises(TVMSError, match="several outputs"):
        te.compute((4,), lambda i: [A[i], A[i]])
    with pytest.raises(TVMSError, match="tensors"):
        te.create_prim_func([A, 3])


def test_face_reexports_the_layer() -> None:
    import tvms.lowering.te as layer

    assert tvms.te.compute is layer.compute and tvms.te.create_prim_func is layer.create_prim_func
