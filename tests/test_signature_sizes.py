"""Scalar size parameters in a PrimFunc signature, as TVM 0.27 prints and reads them: a buffer
dimension that reads a parameter defined later is quoted (``T.Buffer(("(n + T.int64(1)) //
T.int64(2)", 4))``), the quote defines the variable, and the parameter is that variable."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from tvms import ScriptError
from tvms.ir import Var
from tvms.ir.visitor import collect
from tvms.script import from_source

QUOTED = (FIXTURES / "normal_form" / "quoted_sizes.tvms").read_text().rstrip("\n")


def test_tvm_text_round_trips() -> None:
    assert from_source(QUOTED).script(dialect="tvm-0.27") == QUOTED


@pytest.mark.parametrize("name", ["bare_param_then_compound", "compound_param_compound",
                                  "compound_twice_then_param", "two_params"])
def test_quoted_sizes_are_the_parameters(name: str) -> None:
    func = from_source(QUOTED)[name]
    scalars = {p.name: p for p in func.params if p not in func.buffer_map}
    for buf in func.buffer_map.values():
        for var in collect(buf.shape, Var):
            assert var is scalars[var.name]
    assert all(str(p.dtype) == "int64" for p in scalars.values())


def test_quoted_size_with_an_unknown_name_defaults_to_int32() -> None:
    text = '''
@T.prim_func
def f(A: T.Buffer(("k * 2",), "float32")):
    A[0] = T.float32(1.0)
'''
    (k,) = {v for v in collect(from_source(text).buffer_map, Var) if v.name == "k"}
    assert str(k.dtype) == "int32"


@pytest.mark.parametrize("size, message", [
    ('"n +"', "a quoted buffer dimension is an expression of sizes"),
    ('"2.5"', "expected an integer extent"),
])
def test_bad_quoted_size_is_a_clear_error(size: str, message: str) -> None:
    text = f'''
@T.prim_func
def f(A: T.Buffer(({size}, 4), "float32"), n: T.int64):
    A[0, 0] = T.float32(1.0)
'''
    with pytest.raises(ScriptError, match=message) as info:
        from_source(text)
    assert ":3:" in str(info.value)


def test_quoted_size_outside_a_signature_is_refused() -> None:
    text = '''
@T.prim_func
def f(n: T.int64):
    A = T.alloc_buffer(("n * 2",), "float32")
    A[0] = T.float32(1.0)
'''
    with pytest.raises(ScriptError, match="in a PrimFunc's signature only"):
        from_source(text)
