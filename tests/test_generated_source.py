"""Generated Python never carries a user's text: names and strings of a program stay data.

The reference executor compiles a PrimFunc into Python source and the compiled module's call
path evaluates a generated slot filler; here every name and string a program can hold is hostile
(text that would break out of a string literal or an identifier if pasted into source).
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

import tvms
from tvms.ir import expr as E
from tvms.ir import stmt as S
from tvms.ir.buffer import decl_buffer
from tvms.ir.function import PrimFunc
from tvms.ir.node import FrozenDict
from tvms.runtime.reference import compile_expr, prim_func_source, run_prim_func


def payloads(marker) -> list[str]:
    """Strings that run ``touch marker`` if pasted into Python source inside or outside quotes."""
    return [f"x'); __import__('os').system('touch {marker}'); ('",
            f'y"""\n__import__("os").system("touch {marker}")\n"""',
            f"z\n__import__('os').system('touch {marker}')\n#",
            f"é) or __import__('os').system('touch {marker}') or (", ]


def hostile_func(marker) -> PrimFunc:
    """``C[i] = A[i] * x + B[i]`` for i < n after ``assert x > 0``, every name a payload."""
    evil = payloads(marker)
    n = E.Var(evil[0] + "n", "int32")
    x = E.Var(evil[1] + "x", "float32")
    a, b, c = (decl_buffer((n,), "float32", name) for name in (evil[0], evil[1], evil[2]))
    handles = [E.Var(name + "h", "handle") for name in (evil[3], evil[2], evil[1])]
    i = E.Var(evil[3] + "i", "int32")
    store = S.BufferStore(c, E.BufferLoad(a, (i,)) * x + E.BufferLoad(b, (i,)), (i,))
    loop = S.For(i, E.const(0, "int32"), n, "serial", store)
    body = S.AssertStmt(x > E.const(0.0, "float32"), (evil[2],), loop, error_kind=evil[0])
    return PrimFunc(tuple(handles) + (x,), FrozenDict(dict(zip(handles, (a, b, c)))), body,
                    attrs=FrozenDict({"global_symbol": evil[3], "tir.noalias": True}))


def test_reference_executor_keeps_hostile_names_out_of_its_source(tmp_path) -> None:
    marker = tmp_path / "pwned"
    func = hostile_func(marker)
    source = prim_func_source(func)
    # no string literal at all: names became identifiers of letters, digits and _, text is data
    assert [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)] == []
    assert "touch " not in source and "'os'" not in source
    a, b = np.arange(6, dtype="float32"), np.full(6, 0.5, dtype="float32")
    c = np.zeros(6, dtype="float32")
    run_prim_func(func, a, b, c, 2.0)
    np.testing.assert_array_equal(c, a * 2 + b)
    with pytest.raises(tvms.TVMSError) as info:  # the assert's message arrives as data, verbatim
        run_prim_func(func, a, b, c, -1.0)
    assert payloads(marker)[2] in str(info.value)
    with pytest.raises(tvms.TVMSError, match="out-of-bounds access: element -1 of buffer"):
        bad = PrimFunc(func.params, func.buffer_map, S.BufferStore(
            func.buffer_map[func.params[2]], E.const(1.0, "float32"), (E.const(-1, "int32"),)))
        run_prim_func(bad, a, b, c, 1.0)
    assert not marker.exists()


def test_constant_expressions_compile_from_their_values_only(tmp_path) -> None:
    marker = tmp_path / "pwned"
    text = E.StringImm(payloads(marker)[0])
    assert compile_expr(text)({}) == payloads(marker)[0]
    assert compile_expr(E.const(7, "int32") + E.const(5, "int32"))({}) == 12
    assert not marker.exists()


def test_compiled_module_runs_a_function_of_hostile_names(tmp_path) -> None:
    pytest.importorskip("llvmlite")
    marker = tmp_path / "pwned"
    func = hostile_func(marker)
    a, b = np.arange(6, dtype="float32"), np.full(6, 0.5, dtype="float32")
    c = np.zeros(6, dtype="float32")
    tvms.build(func, target="llvm")["main"](a, b, c, 3.0)
    np.testing.assert_array_equal(c, a * 3 + b)
    assert not marker.exists()
