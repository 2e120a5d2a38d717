"""Round-trip properties of the TensorIR printer and parser on random well-formed programs
(``tests/strategies.py``), in both dialects:

1. IR fixpoint: parsing the printed text gives back the same IR (structurally);
2. text fixpoint: printing what was parsed gives back the same text;
3. across dialects: the classic text, read back and printed as TVM 0.27, is what printing the
   original as TVM 0.27 gives.

The tests at the end pin down, each with the smallest program that shows it, the bugs these
properties found (all fixed; ``strategies.GENERATE`` can turn a family of programs off to
isolate a regression).
"""
from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from strategies import (BOOL, F16, F32, HANDLE, I32, I64, SCALAR_DTYPES, TRUE, Scope, Shown,
                        check_well_formed, exprs, ir_modules, prim_funcs, root_block)
from tvms.ir import (Add, AllocBuffer, AssertStmt, Block, BlockRealize, BufferRegion, Evaluate,
                     For, FrozenDict, IntImm, IRModule, Let, Mul, Not, PrimFunc, Var, decl_buffer,
                     seq)
from roundtrip_checks import assert_same_ir, assert_same_text, roundtrip

DIALECTS = ("classic", "tvm-0.27")

# Drawing a program takes hundreds of choices; hypothesis' health checks would call that slow.
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


# ---------------------------------------------------------------- the generators themselves
@settings(max_examples=100, deadline=None, suppress_health_check=_HEALTH)
@given(shown=prim_funcs().map(Shown))
def test_generated_functions_are_well_formed(shown: Shown) -> None:
    check_well_formed(shown.node)


@settings(max_examples=20, deadline=None, suppress_health_check=_HEALTH)
@given(shown=ir_modules().map(Shown))
def test_generated_modules_are_well_formed(shown: Shown) -> None:
    for name in shown.node:
        check_well_formed(shown.node[name])


# ---------------------------------------------------------------- 1. IR fixpoint
@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=200, deadline=None, suppress_health_check=_HEALTH)
@given(shown=prim_funcs().map(Shown))
def test_printed_function_parses_back_to_the_same_ir(shown: Shown, dialect: str) -> None:
    text, parsed = roundtrip(shown.node, dialect)
    assert isinstance(parsed, PrimFunc)
    assert_same_ir(shown.node, parsed, text)


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=40, deadline=None, suppress_health_check=_HEALTH)
@given(shown=ir_modules().map(Shown))
def test_printed_module_parses_back_to_the_same_ir(shown: Shown, dialect: str) -> None:
    text, parsed = roundtrip(shown.node, dialect)
    assert isinstance(parsed, IRModule)
    assert_same_ir(shown.node, parsed, text)


# Deeper expressions than the programs hold, over one parameter and one buffer of each type.
_PARAMS = tuple(Var(name, dt) for name, dt in (("a", I32), ("b", I64), ("x", F32), ("h", F16), ("p", BOOL)))
_BUFFERS = tuple(decl_buffer((4, 4), dt, f"B_{dt}") for dt in SCALAR_DTYPES)
_HANDLES = tuple(Var(b.name, HANDLE) for b in _BUFFERS)
_SCOPE = Scope(globals=_PARAMS, vars=_PARAMS, buffers=_BUFFERS)


def _evaluating(expr) -> Shown:
    return Shown(PrimFunc(_PARAMS + _HANDLES, FrozenDict(zip(_HANDLES, _BUFFERS)), Evaluate(expr),
                          None, FrozenDict({"global_symbol": "main"})))


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=150, deadline=None, suppress_health_check=_HEALTH)
@given(shown=st.sampled_from(SCALAR_DTYPES).flatmap(lambda dt: exprs(dt, _SCOPE, 3)).map(_evaluating))
def test_printed_expression_parses_back_to_the_same_ir(shown: Shown, dialect: str) -> None:
    text, parsed = roundtrip(shown.node, dialect)
    assert_same_ir(shown.node, parsed, text)
    assert_same_text(text, parsed.script(dialect=dialect), "the text of the parsed expression differs")


# ---------------------------------------------------------------- 2. text fixpoint
@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=100, deadline=None, suppress_health_check=_HEALTH)
@given(shown=prim_funcs().map(Shown))
def test_parsed_function_prints_back_to_the_same_text(shown: Shown, dialect: str) -> None:
    text, parsed = roundtrip(shown.node, dialect)
    assert_same_text(text, parsed.script(dialect=dialect), f"{dialect}: the parsed function prints differently")


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=30, deadline=None, suppress_health_check=_HEALTH)
@given(shown=ir_modules().map(Shown))
def test_parsed_module_prints_back_to_the_same_text(shown: Shown, dialect: str) -> None:
    text, parsed = roundtrip(shown.node, dialect)
    assert_same_text(text, parsed.script(dialect=dialect), f"{dialect}: the parsed module prints differently")


# ---------------------------------------------------------------- 3. across dialects
# ``cross_dialect=True``: only what both dialects print alike (see prim_funcs).
@settings(max_examples=100, deadline=None, suppress_health_check=_HEALTH)
@given(shown=prim_funcs(cross_dialect=True).map(Shown))
def test_classic_text_prints_as_tvm_027_would_print_the_function(shown: Shown) -> None:
    classic, parsed = roundtrip(shown.node, "classic")
    assert_same_text(shown.node.script(dialect="tvm-0.27"), parsed.script(dialect="tvm-0.27"),
                     f"read from the classic text:\n{classic}\nit prints differently as TVM 0.27")


@settings(max_examples=30, deadline=None, suppress_health_check=_HEALTH)
@given(shown=ir_modules(cross_dialect=True).map(Shown))
def test_classic_text_prints_as_tvm_027_would_print_the_module(shown: Shown) -> None:
    classic, parsed = roundtrip(shown.node, "classic")
    assert_same_text(shown.node.script(dialect="tvm-0.27"), parsed.script(dialect="tvm-0.27"),
                     f"read from the classic text:\n{classic}\nit prints differently as TVM 0.27")


# ---------------------------------------------------------------- bugs found (minimal cases)
def _func(body, params=(), buffer_map=None) -> PrimFunc:
    return PrimFunc(tuple(params), FrozenDict(buffer_map or {}), body, None,
                    FrozenDict({"global_symbol": "main"}))


def _assert_roundtrips(func, dialect: str) -> None:
    text, parsed = roundtrip(func, dialect)
    assert_same_ir(func, parsed, text)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_not_of_a_constant_roundtrips(dialect: str) -> None:
    # T.evaluate(not T.bool(True))
    _assert_roundtrips(_func(Evaluate(Not(TRUE))), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_alloc_buffer_before_another_statement_roundtrips(dialect: str) -> None:
    # with T.decl_buffer((4,), "int32", scope="local") as B:
    #     T.evaluate(1)
    # T.evaluate(2)
    buffer = decl_buffer((4,), "int32", "B", scope="local")
    body = seq([AllocBuffer(buffer, Evaluate(IntImm(I32, 1))), Evaluate(IntImm(I32, 2))])
    _assert_roundtrips(_func(body), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_assert_before_another_statement_roundtrips(dialect: str) -> None:
    # with T.Assert(T.bool(True), "msg"):
    #     T.evaluate(1)
    # T.evaluate(2)
    body = seq([AssertStmt(TRUE, ("msg",), Evaluate(IntImm(I32, 1))), Evaluate(IntImm(I32, 2))])
    _assert_roundtrips(_func(body), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_a_no_op_of_another_type_after_an_assert_roundtrips(dialect: str) -> None:
    """Fixed: ``T.evaluate(T.bool(False))`` as the rest after an assert printed as nothing (a
    no-op), which reads back as ``T.evaluate(0)`` of int32; only that one prints as nothing."""
    # assert T.bool(True), "msg"
    # T.evaluate(T.bool(False))
    _assert_roundtrips(_func(AssertStmt(TRUE, ("msg",), Evaluate(IntImm(BOOL, 0)))), dialect)


def test_bug_buffer_map_keeps_parameter_order() -> None:
    """Fixed: the parser added T.match_buffer'ed parameters to the buffer map after the ones
    inline in the signature, and structural equality compares buffer maps in order."""
    # def main(var_B: T.handle, A: T.Buffer((4,), "int32")):
    #     n = T.int64()
    #     B = T.match_buffer(var_B, (n,))
    n = Var("n", I64)
    a, b = decl_buffer((4,), "int32", "A"), decl_buffer((n,), "float32", "B")
    pa, pb = Var("A", HANDLE), Var("var_B", HANDLE)
    _assert_roundtrips(_func(Evaluate(IntImm(I32, 0)), (pb, pa), {pb: b, pa: a}), "classic")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_auto_broadcast_buffer_roundtrips(dialect: str) -> None:
    # A = T.match_buffer(var_A, (4,), buffer_type="auto")
    a = decl_buffer((4,), "float32", "A", buffer_type="auto_broadcast")
    pa = Var("var_A", HANDLE)
    _assert_roundtrips(_func(Evaluate(IntImm(I32, 0)), (pa,), {pa: a}), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_let_expression_roundtrips(dialect: str) -> None:
    # T.evaluate(T.Let(x + 1, where={x: 3}))
    x = Var("x", I32)
    _assert_roundtrips(_func(Evaluate(Let(x, IntImm(I32, 3), Add(x, IntImm(I32, 1))))), dialect)


def _scaled_extent_func(kind: str) -> PrimFunc:
    n = Var("n", I64)
    a = decl_buffer((Mul(n, IntImm(I64, 2)),), "float32", "A")
    pa = Var("var_A", HANDLE)
    if kind == "loop":
        # for i in range(T.int64(2), T.int64(2) + n * T.int64(2)):
        body = For(Var("i", I64), IntImm(I64, 2), Mul(n, IntImm(I64, 2)), "serial", Evaluate(IntImm(I32, 0)))
    else:
        # with T.block("b"):
        #     T.reads(A[T.int64(0):n * T.int64(2)])
        block = Block((), (), (), (BufferRegion.full(a),), (), "b", None, Evaluate(IntImm(I32, 0)))
        body = root_block(BlockRealize((), TRUE, block))
    func = _func(body, (pa,), {pa: a})
    return func.with_changes(s_tir=kind != "loop")


@pytest.mark.parametrize("kind", ["loop", "slice"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_bug_scaled_extent_from_a_start_roundtrips(kind: str, dialect: str) -> None:
    _assert_roundtrips(_scaled_extent_func(kind), dialect)
