"""``tvms fmt`` on a Python file formats only its TVMScript definitions; before a write the
formatted text must parse back to the same IR."""
from __future__ import annotations

import os

import pytest

from tvms.cli import main
from tvms.script import from_source

MIXED = '''\
"""A user's file: TVMScript among ordinary Python."""
import numpy as np
from tvms.script import ir as I, tir as T, relax as R
import tvm


def helper(x):   # ordinary code,   oddly spaced
    return x  +  1


@I.ir_module  # the module of this file
class MyModule:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]   +   T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = MyModule
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y


def make():
    @T.prim_func(private=True)
    def kernel(A: T.Buffer((8,), "int32")):
        for i in range(8):
            A[i] = i*2
    return kernel


class Holder:
    @tvm.script.ir_module
    class Inner:
        @T.prim_func
        def f(A: T.Buffer((2,), "float32")):
            A[0]=T.float32(0)

x = [1,2,  3]
'''

FORMATTED = '''\
"""A user's file: TVMScript among ordinary Python."""
import numpy as np
from tvms.script import ir as I, tir as T, relax as R
import tvm


def helper(x):   # ordinary code,   oddly spaced
    return x  +  1


@I.ir_module  # the module of this file
class MyModule:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        # with T.block("root"):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1.0)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = MyModule
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
        return y


def make():
    @T.prim_func(private=True)
    def kernel(A: T.Buffer((8,), "int32")):
        for i in range(8):
            A[i] = i * 2
    return kernel


class Holder:
    @tvm.script.ir_module
    class Inner:
        @T.prim_func
        def f(A: T.Buffer((2,), "float32")):
            A[0] = T.float32(0.0)

x = [1,2,  3]
'''


@pytest.fixture
def mixed(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MIXED)
    return path


def test_only_the_tvmscript_definitions_are_formatted(mixed, capsys):
    assert main(["fmt", str(mixed)]) == 0
    assert capsys.readouterr().out == FORMATTED


def test_in_place_check_and_diff_on_a_python_file(mixed, capsys):
    assert main(["fmt", "--check", str(mixed)]) == 1
    assert capsys.readouterr().err == f"would reformat {mixed}\n"
    assert main(["fmt", "--diff", str(mixed)]) == 0
    diff = capsys.readouterr().out
    assert "-                B[vi] = A[vi]   +   T.float32(1)\n" in diff and "helper" not in diff
    assert main(["fmt", "-i", str(mixed)]) == 0
    assert mixed.read_text() == FORMATTED
    assert main(["fmt", "--check", str(mixed)]) == 0  # formatting is idempotent


def test_crlf_and_tabs_around_a_definition_are_kept(tmp_path, capsys):
    path = tmp_path / "w.py"
    text = ("import x\r\nif True:\r\n\t@T.prim_func\r\n\tdef k(A: T.Buffer((2,), \"float32\")):\r\n"
            "\t    A[0]=T.float32(0)\r\nz = 1\r\n")
    path.write_bytes(text.encode())
    assert main(["fmt", "-i", str(path)]) == 0
    assert path.read_bytes() == text.replace("A[0]=T.float32(0)", "A[0] = T.float32(0.0)").encode()


@pytest.mark.parametrize("decorator", ["tvm.script.tir.prim_func", "tvms.script.tir.prim_func",
                                       "tvms.script.prim_func", "T.prim_func(private=True)"])
def test_spelled_out_decorators(tmp_path, capsys, decorator):
    path = tmp_path / "d.py"
    path.write_text(f"@{decorator}\ndef k(A: T.Buffer((2,), \"float32\")):\n    A[0]=T.float32(0)\n")
    assert main(["fmt", "-i", str(path)]) == 0
    assert path.read_text() == f"@{decorator}\ndef k(A: T.Buffer((2,), \"float32\")):\n    A[0] = T.float32(0.0)\n"


def test_line_breaks_python_does_not_count_are_no_lines(tmp_path, capsys):
    path = tmp_path / "ff.py"
    text = ('s = "a\u2028b"  # \x0c\n\n@T.prim_func\ndef k(A: T.Buffer((2,), "float32")):\n'
            '    A[0]=T.float32(0)\nz = 1\n')
    path.write_text(text)
    assert main(["fmt", "-i", str(path)]) == 0
    assert path.read_text() == text.replace("A[0]=T.float32(0)", "A[0] = T.float32(0.0)")


def test_an_error_inside_a_definition_is_positioned_in_the_python_file(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text("import tvm\n\n\nclass C:\n    @T.prim_func\n    def k(A: T.Buffer((2,), \"float32\")):\n"
                    "        A[0] = T.flaot32(0)\n")
    assert main(["fmt", "-i", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:7:16: error: ") and "T.flaot32" in err


def test_a_python_syntax_error_is_positioned(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text("x = (\n")
    assert main(["fmt", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:1:5: error: not valid Python: ") and "Traceback" not in err


def test_a_python_file_is_never_executed(tmp_path, capsys):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n\n@T.prim_func\ndef k(A: T.Buffer((2,), \"float32\")):\n"
                    "    A[0] = T.float32(0.0)\n")
    assert main(["fmt", str(path)]) == 0
    assert not marker.exists()


# ----------------------------------------------------------------------------- names and verify

@pytest.mark.parametrize("symbol, shown", [("my func-1", "my_func_1"), ("class", "class_"),
                                           ("1abc", "_1abc"), ("ok", "ok")])
@pytest.mark.parametrize("kind", ["tir", "relax"])
def test_a_function_name_that_is_no_identifier_round_trips(tmp_path, capsys, symbol, shown, kind):
    if kind == "tir":
        text = (f'# from tvm.script import tir as T\n\n@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
                f'    T.func_attr({{"global_symbol": "{symbol}"}})\n    A[0] = T.float32(0.0)\n')
    else:
        text = (f'# from tvm.script import relax as R\n\n@R.function\n'
                f'def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):\n'
                f'    R.func_attr({{"global_symbol": "{symbol}"}})\n    return x\n')
    path = tmp_path / "f.tvms"
    path.write_text(text)
    assert main(["fmt", "-i", str(path)]) == 0
    written = path.read_text()
    assert f"def {shown}(" in written
    assert ('global_symbol' in written) == (symbol != shown)
    assert from_source(written).attrs["global_symbol"] == symbol


def test_a_printer_bug_is_refused_before_the_write(tmp_path, capsys, monkeypatch):
    from tvms.ir.function import PrimFunc

    path = tmp_path / "f.tvms"
    text = ('# from tvm.script import tir as T\n\n@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
            '    A[0]  =  T.float32(1.0)\n')
    path.write_text(text)
    os.utime(path, (1_000_000, 1_000_000))
    real = PrimFunc.script

    def buggy(self, **kwargs):  # a printer that loses a digit
        return real(self, **kwargs).replace("T.float32(1.0)", "T.float32(2.0)")

    monkeypatch.setattr(PrimFunc, "script", buggy)
    for argv in (["fmt", "-i", str(path)], ["fmt", str(path), "-o", str(tmp_path / "out.tvms")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"{path}: not written: the formatted text parses to different IR")
        assert "this is a bug in tvms" in err
    assert path.read_bytes() == text.encode() and path.stat().st_mtime == 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.tvms"]
    monkeypatch.setattr(PrimFunc, "script", lambda self, **kw: real(self, **kw).replace("A[0]", "A[0"))
    assert main(["fmt", "-i", str(path)]) == 2
    assert "not written: the formatted text does not parse" in capsys.readouterr().err
    assert path.read_bytes() == text.encode()
    monkeypatch.setattr(PrimFunc, "script", buggy)
    assert main(["fmt", str(path)]) == 0  # printing to standard output writes no file: no check


def test_a_printer_bug_in_a_python_file_is_refused(tmp_path, capsys, monkeypatch):
    from tvms.script import formatting

    path = tmp_path / "m.py"
    path.write_text(MIXED)
    real = formatting.print_definition

    def buggy(*args, **kwargs):
        printed = real(*args, **kwargs)
        printed.definition = [line.replace("range(4)", "range(5)") for line in printed.definition]
        return printed

    monkeypatch.setattr(formatting, "print_definition", buggy)
    assert main(["fmt", "-i", str(path)]) == 2
    assert "not written: the formatted text parses to different IR" in capsys.readouterr().err
    assert path.read_text() == MIXED


def test_inline_constants_survive_formatting(tmp_path, capsys):
    """R.const([...]) prints as metadata[...]: the metadata section is written with it (it used to
    be "# Metadata omitted", and the values were lost)."""
    from conftest import FIXTURES
    from tvms.ir.structural import structural_equal

    path = tmp_path / "fold.tvms"
    text = (FIXTURES / "relax_passes" / "fold1.input.tvms").read_text()
    path.write_text(text)
    assert main(["fmt", "-i", str(path)]) == 0
    written = path.read_text()
    assert 'metadata["relax.expr.Constant"][0]' in written and "Metadata omitted" not in written
    assert structural_equal(from_source(written), from_source(text))
