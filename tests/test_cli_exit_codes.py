"""One exit-code contract for every subcommand (README, "The command line"): 0 done, 1 the
requested operation failed, 2 usage or input error, 70 an internal error; never a traceback."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES
from tvms.cli import main

KERNEL = '''# from tvm.script import tir as T

@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 2), "float32")
    B = T.match_buffer(b, (n, 2), "float32")
    for i, j in T.grid(n, 2):
        B[i, j] = A[i, j] + T.float32(1.0)
'''

RELAX = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 2), dtype="float32")) -> R.Tensor(("n", 2), dtype="float32"):
        n = T.int64()
        y: R.Tensor((n, 2), dtype="float32") = R.add(x, x)
        return y
'''

UNKNOWN_SHAPE = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=2)) -> R.Tensor(dtype="float32", ndim=2):
        return x
'''

CALLS_MISSING = RELAX.replace("@R.function", "@R.function(pure=False)").replace(
    'y: R.Tensor((n, 2), dtype="float32") = R.add(x, x)',
    'y = R.call_packed("no.such.function", x, sinfo_args=(R.Tensor((n, 2), dtype="float32"),))')

SCHEDULE = FIXTURES / "schedule" / "matmul_00_base.tvms"


@pytest.fixture
def files(tmp_path, monkeypatch) -> Path:
    from tvms.lowering import pass_registry

    # (--load registers Boom: the registry is restored afterwards)
    monkeypatch.setattr(pass_registry, "_REGISTRY", dict(pass_registry._REGISTRY))
    monkeypatch.setattr(pass_registry, "_SOURCES", dict(pass_registry._SOURCES))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.tvms").write_text(KERNEL)
    (tmp_path / "ugly.tvms").write_text(KERNEL.replace("A[i, j] + ", "A[i, j]  +  "))
    (tmp_path / "r.tvms").write_text(RELAX)
    (tmp_path / "unknown.tvms").write_text(UNKNOWN_SHAPE)
    (tmp_path / "missing_func.tvms").write_text(CALLS_MISSING)
    (tmp_path / "bad.tvms").write_text(KERNEL.replace("T.grid", "T.grdi"))
    (tmp_path / "fail.trace.py").write_text('b0 = sch.get_block(name="D", func_name="main")\n')
    (tmp_path / "boom.py").write_text("import tvms\n\n@tvms.transform.module_pass(opt_level=0, name='Boom')\n"
                                      "def boom(mod, ctx):\n    raise RuntimeError('boom')\n")
    np.save(tmp_path / "scalar.npy", np.float32(3))
    np.save(tmp_path / "flat.npy", np.zeros(4, np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((3, 2), np.int32))
    np.save(tmp_path / "ok.npy", np.ones((3, 2), np.float32))
    np.save(tmp_path / "other.npy", np.ones((5, 2), np.float32))
    return tmp_path


CASES = [
    # fmt
    (["fmt", "k.tvms"], 0, None),
    (["fmt", "--check", "ugly.tvms"], 1, "would reformat ugly.tvms"),
    (["fmt", "missing.tvms"], 2, "cannot read missing.tvms"),
    (["fmt", "bad.tvms"], 2, "bad.tvms:8:17: error: unknown builtin 'T.grdi'"),
    (["fmt", "--nope"], 2, "unrecognized arguments"),
    # opt
    (["opt", "-p", "LegalizeOps", "r.tvms"], 0, None),
    (["opt", "--load", "boom.py", "-p", "Boom", "r.tvms"], 1, "pass 'Boom': RuntimeError: boom"),
    (["opt", "-p", "LegalizeOps", "k.tvms"], 0, None),  # (a lone function: in a module of its own)
    (["opt", "-p", "NoSuchPass", "r.tvms"], 2, "NoSuchPass"),
    (["opt", "-p", "LegalizeOps", "bad.tvms"], 2, "bad.tvms:8:17"),
    # schedule
    (["schedule", "--default", str(SCHEDULE)], 0, None),
    (["schedule", str(SCHEDULE), "--trace", "fail.trace.py"], 1, "cannot find a block with the name 'D'"),
    (["schedule", "missing.tvms", "--default"], 2, "cannot read missing.tvms"),
    (["schedule", str(SCHEDULE)], 2, "give either --trace TRACE.py or --default"),
    # build
    (["build", "k.tvms", "-o", "k.so"], 0, None),
    (["build", "k.tvms", "--target", "rocm", "-o", "k.so"], 1, "cannot compile k.tvms"),
    (["build", "k.tvms"], 2, "name the library to write with -o FILE.so"),
    (["build", "k.tvms", "-o", "no/such/dir/k.so"], 2, "cannot write no/such/dir/k.so"),
    (["build", "bad.tvms", "-o", "k.so"], 2, "bad.tvms:8:17"),
    # run
    (["run", "k.tvms", "--random-inputs", "--shape", "n=3"], 0, None),
    (["run", "r.tvms", "--input", "x=ok.npy"], 0, None),
    (["run", "k.tvms", "--target", "rocm", "--random-inputs", "--shape", "n=3"], 1, "cannot compile k.tvms"),
    (["run", "missing_func.tvms", "--input", "x=ok.npy"], 1,
     "run: no global function named 'no.such.function' is registered"),
    (["run", "k.tvms", "--random-inputs", "--shape", "n=-1"], 2, "--shape n=-1: a size cannot be negative"),
    (["run", "k.tvms", "--random-inputs", "--shape", "n=abc"], 2, "--shape n=abc: the size must be an integer"),
    (["run", "k.tvms", "--random-inputs", "--shape", "n=1e30"], 2, "--shape n=1e30: the size must be an integer"),
    (["run", "k.tvms", "--random-inputs", "--shape", "n=99999999999"], 2,
     "--shape n=99999999999: out of the range of int32 (-2147483648..2147483647)"),
    (["run", "r.tvms", "--random-inputs", "--shape", "n=99999999999"], 2,
     "x of shape (99999999999, 2) would take 799,999,999,992 bytes, more than this machine's memory"),
    (["run", "r.tvms", "--input", "x=scalar.npy"], 2, "input x is 0-d (shape ()); x is declared (n, 2) float32"),
    (["run", "k.tvms", "--input", "A=scalar.npy"], 2, "input A is 0-d (shape ()); A is declared (n, 2) float32"),
    (["run", "r.tvms", "--input", "x=flat.npy"], 2, "input x is 1-d (shape (4,)); x is declared (n, 2) float32"),
    (["run", "r.tvms", "--input", "x=ints.npy"], 2, "input x has dtype int32; x is declared (n, 2) float32"),
    (["run", "r.tvms", "--input", "x=ok.npy", "--shape", "n=5"], 2,
     "input x: dimension 0 is the size n, 3 here but 5 from --shape or an earlier input"),
    (["run", "unknown.tvms", "--random-inputs"], 2,
     'parameter x of main is R.Tensor(dtype="float32", ndim=2): tvms run passes tensors whose shape'),
    (["run", "k.tvms", "--random-inputs", "--number", "0"], 2, "expected a positive integer"),
    (["run", "k.tvms", "--random-inputs", "--shape", "n=3", "--seed", "-1"], 2, "expected an integer >= 0"),
    # --pass-config, on every command that compiles or runs passes
    (["run", "k.tvms", "--random-inputs", "--shape", "n=3", "--pass-config", "tirx.disable_cse_tir=1"], 0, None),
    (["build", "k.tvms", "-o", "k.so", "--pass-config", "tirx.async_copy=1"], 2,
     "unknown option 'tirx.async_copy'; did you mean 'tirx.use_async_copy'?"),
    (["tune", "k.tvms", "--work-dir", "w", "--pass-config", "tirx.use_async_copy=on"], 2,
     "tirx.use_async_copy=on: expected a bool"),
    (["opt", "-p", "LegalizeOps", "r.tvms", "--pass-config", "tirx.UnrollLoop=1"], 2, "expected a JSON object"),
]


@pytest.mark.parametrize("argv, code, message", CASES, ids=[" ".join(c[0]) + f" -> {c[1]}" for c in CASES])
def test_exit_code(files, capsys, argv, code, message):
    if argv[0] in ("build", "run"):
        pytest.importorskip("llvmlite")
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is None:
        assert err == ""
    else:
        assert message in err
        if "usage:" not in err:  # (argparse prints its usage first)
            assert err.count("\n") <= 3  # one line (a parse error adds its source line and a caret)


@pytest.mark.parametrize("command", [["fmt", "k.tvms"], ["opt", "-p", "LegalizeOps", "r.tvms"],
                                     ["schedule", "--default", str(SCHEDULE)],
                                     ["build", "k.tvms", "-o", "k.so"],
                                     ["run", "k.tvms", "--random-inputs", "--shape", "n=3"]])
def test_an_internal_error_is_one_line_with_exit_70(files, capsys, monkeypatch, command):
    """A bug (any exception that is not a TVMSError) is one line and exit 70 in every subcommand."""
    from tvms.script import module_parser

    def buggy(*args, **kwargs):
        raise KeyError("**=")

    monkeypatch.delenv("TVMS_TRACEBACK", raising=False)
    monkeypatch.setattr(module_parser.ModuleParser, "parse", buggy)
    assert main(command) == 70
    assert capsys.readouterr().err == (
        "tvms: internal error: KeyError: '**=' (a bug in tvms: please report it with the command and "
        "its input; TVMS_TRACEBACK=1 shows the traceback)\n")
