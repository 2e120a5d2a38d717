"""The embedded form: TVMScript written in Python with @I.ir_module / @T.prim_func gives the
same IR as the same text parsed from a .tvms file."""
from __future__ import annotations

import pytest

import tvms
from tvms.ir import IRModule, PrimFunc, first_mismatch
from tvms.script import from_source
from tvms.script import ir as I
from tvms.script import tir as T

TEXT = '''# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]'''


@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def add_one(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (16,), "float32")
    B = T.match_buffer(b, (16,), "float32")
    for i in range(16):
        B[i] = A[i] + T.float32(1.0)


def test_ir_module_class_equals_the_text_form() -> None:
    assert isinstance(Module, IRModule)
    assert first_mismatch(Module, from_source(TEXT)) is None
    assert Module.script() == TEXT


def test_bare_prim_func() -> None:
    assert isinstance(add_one, PrimFunc)
    text = add_one.script()
    assert "def add_one(A: T.Buffer((16,), \"float32\"), B: T.Buffer((16,), \"float32\")):" in text
    assert first_mismatch(add_one, from_source(text)) is None


def test_prim_func_with_arguments_in_a_function_scope() -> None:
    @T.prim_func(private=True)
    def scale(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = A[i] * T.float32(2.0)

    assert scale.is_private
    assert "@T.prim_func(private=True)" in scale.script()


def test_errors_point_into_the_python_file() -> None:
    with pytest.raises(tvms.ScriptError) as info:
        @T.prim_func
        def broken(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i, 0] = T.float32(0.0)
    err = info.value
    assert err.span is not None
    assert __file__ in str(err)
    source_lines = open(__file__).read().splitlines()
    line = err.span.line + err.span.source.line_offset
    assert "A[i, 0] = T.float32(0.0)" in source_lines[line - 1]
    assert "has 1 dimension but is indexed with 2 indices" in err.message
