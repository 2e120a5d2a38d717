"""``tvms opt``: run passes over a module from the command line."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from conftest import CORPUS_COPY, FIXTURES, ROOT
from tvms.cli import main
from tvms.lowering import pass_registry

EXAMPLE = str(ROOT / "examples" / "relu_to_gelu.py")
BEFORE = (FIXTURES / "seeds_relax" / "seed003_relax_mlp_exported.tvms").read_text()
AFTER = (FIXTURES / "seeds_relax" / "seed003_relax_relu_to_gelu.tvms").read_text().rstrip("\n") + "\n"

FAILING = '''\
import tvms as tvm

@tvm.transform.module_pass(opt_level=0, name="Explode")
def explode(mod, ctx):
    raise RuntimeError("kaboom")

@tvm.transform.module_pass(opt_level=0, name="Unprintable")
def unprintable(mod, ctx):
    mod["forward"] = object()
    return mod

@tvm.transform.module_pass(opt_level=3, name="MarkIt")
class MarkIt:
    def transform_module(self, mod, ctx):
        return mod.with_attrs({"marked": ctx.opt_level})
'''


@pytest.fixture(autouse=True)
def clean_registry():
    saved = dict(pass_registry._REGISTRY), dict(pass_registry._SOURCES)
    yield
    pass_registry._REGISTRY.clear()
    pass_registry._REGISTRY.update(saved[0])
    pass_registry._SOURCES.clear()
    pass_registry._SOURCES.update(saved[1])


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.tvms"
    path.write_text(BEFORE)
    return path


@pytest.fixture
def failing(tmp_path):
    path = tmp_path / "failing.py"
    path.write_text(FAILING)
    return str(path)


def test_file_to_stdout(model, capsys):
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", str(model)]) == 0
    out, err = capsys.readouterr()
    assert out == AFTER
    assert err == ""
    assert model.read_text() == BEFORE


def test_stdin_to_stdout(monkeypatch, capsys):
    for argv in (["opt", "--load", EXAMPLE, "-p", "ReluToGelu"],
                 ["opt", "--load", EXAMPLE, "-p", "ReluToGelu", "-"]):
        monkeypatch.setattr(sys, "stdin", io.StringIO(BEFORE))
        assert main(argv) == 0
        assert capsys.readouterr().out == AFTER


def test_output_file_is_written_atomically(model, tmp_path, capsys):
    out_path = tmp_path / "out.tvms"
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", str(model), "-o", str(out_path)]) == 0
    assert out_path.read_text() == AFTER
    assert capsys.readouterr().out == ""
    assert [p.name for p in tmp_path.iterdir() if "tvms-tmp" in p.name] == []
    # rewriting the input in place keeps its permissions
    os.chmod(model, 0o640)
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", str(model), "-o", str(model)]) == 0
    assert model.read_text() == AFTER
    assert oct(os.stat(model).st_mode & 0o777) == oct(0o640)


def test_failed_pass_leaves_output_file_alone(model, tmp_path, failing, capsys):
    out_path = tmp_path / "out.tvms"
    out_path.write_text("old\n")
    assert main(["opt", "--load", failing, "-p", "Explode", str(model), "-o", str(out_path)]) == 1
    assert out_path.read_text() == "old\n"
    err = capsys.readouterr().err
    assert err == "tvms: error: pass 'Explode': RuntimeError: kaboom\n"


def test_tvm_0_27_dialect(capsys):
    src = str(CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms")
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", src]) == 0  # keeps the input's dialect
    expected = (CORPUS_COPY / "mlp_bias_dyn_06_relu_to_gelu.tvms").read_text().rstrip("\n") + "\n"
    assert capsys.readouterr().out == expected
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", "--dialect", "classic", src]) == 0
    assert 'R.Tensor(("n", 784)' in capsys.readouterr().out


def test_zero_pipeline_by_name(capsys):
    src = str(CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms")
    assert main(["opt", "--pipeline", "zero", src]) == 0
    expected = (CORPUS_COPY / "mlp_bias_dyn_04_zero_pipeline.tvms").read_text().rstrip("\n") + "\n"
    assert capsys.readouterr().out == expected
    assert main(["opt", "--pipeline", "zero", "-p", "DeadCodeElimination", src]) == 0  # then -p
    assert capsys.readouterr().out == expected
    assert main(["opt", "--pipeline", "one", src]) == 2
    assert "unknown pipeline 'one'; the known pipelines are 'zero'" in capsys.readouterr().err


LONE_PRIM_FUNC = """\
# from tvm.script import tir as T

@T.prim_func
def scale(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("s"):
            vi = T.axis.spatial(4, i)
            with T.init():
                A[vi] = T.float32(0.0)
            A[vi] = A[vi] * T.float32(2.0)
"""

LONE_RELAX = """\
# from tvm.script import relax as R

@R.function
def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
    y = R.add(x, x)
    return y
"""


def test_a_lone_function_runs_in_a_module_of_its_own(tmp_path, capsys):
    """A file holding one function (no @I.ir_module) is that function's module, as
    IRModule.from_expr makes it; it prints back alone while it is alone in the module."""
    tir, relax = tmp_path / "scale.tvms", tmp_path / "add.tvms"
    tir.write_text(LONE_PRIM_FUNC)
    relax.write_text(LONE_RELAX)
    assert main(["opt", "-p", "LowerInitBlock", str(tir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# from tvm.script import tir as T\n\n@T.prim_func\ndef scale(")
    assert "T.init()" not in out and "A[vi] = T.float32(0.0)\n            A[vi] = A[vi] * T.float32(2.0)" in out
    assert main(["opt", "-p", "LegalizeOps", str(relax)]) == 0  # (it adds a PrimFunc: a module)
    out = capsys.readouterr().out
    assert "class Module:" in out and "def add(" in out and "R.call_tir(cls.add, (x, x)" in out


def test_list_passes(failing, capsys):
    assert main(["opt", "--load", EXAMPLE, "--load", failing, "--list-passes"]) == 0
    names = capsys.readouterr().out.split()
    assert {"ReluToGelu", "Explode", "Unprintable", "MarkIt"} <= set(names)
    assert names == sorted(names)


def test_unknown_pass_names_close_ones(model, capsys):
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu,ReluToGelo", str(model)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("tvms: error: unknown pass 'ReluToGelo'; did you mean 'ReluToGelu'?")
    assert "Traceback" not in err


def test_usage_errors_exit_2(model, tmp_path, capsys):
    assert main(["opt", str(model)]) == 2  # no -p
    assert "-p PASS" in capsys.readouterr().err
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu,", str(model)]) == 2
    assert "empty pass name" in capsys.readouterr().err
    assert main(["opt", "--load", str(tmp_path / "nope.py"), "--list-passes"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", str(tmp_path / "missing.tvms")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["opt", "--bogus"]) == 2


def test_parse_error_exit_2_with_position(tmp_path, capsys):
    bad = tmp_path / "bad.tvms"
    bad.write_text(BEFORE.replace("R.nn.relu(add)", "R.nn.relu(add"))
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "^" in err and "Traceback" not in err


def test_verify_each_names_the_broken_pass(model, failing, capsys):
    assert main(["opt", "--load", EXAMPLE, "--load", failing, "--verify-each",
                 "-p", "ReluToGelu,Unprintable", str(model)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("tvms: error: pass 'Unprintable': produced IR that cannot be printed")


def test_print_after_all_and_timing_go_to_stderr(model, capsys):
    assert main(["opt", "--load", EXAMPLE, "-p", "ReluToGelu", "--print-after-all", "--timing",
                 "--verify-each", str(model)]) == 0
    out, err = capsys.readouterr()
    assert out == AFTER
    assert err.startswith("After Running Pass: ReluToGelu (opt_level=0)\n" + AFTER)
    assert "Pass timing:" in err and "ReluToGelu" in err.split("Pass timing:")[1]


def test_named_passes_run_whatever_their_opt_level(model, failing, capsys):
    assert main(["opt", "--load", failing, "-p", "MarkIt", "--opt-level", "1", str(model)]) == 0
    assert '"marked": 1' in capsys.readouterr().out


def test_the_installed_command(model):
    proc = subprocess.run(
        [sys.executable, "-m", "tvms", "opt", "--load", EXAMPLE, "-p", "ReluToGelu"],
        input=BEFORE, capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == AFTER
    proc = subprocess.run([sys.executable, "-m", "tvms", "opt", "-p", "Nope", str(model)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown pass 'Nope'" in proc.stderr


def test_pass_config_sets_the_options_passes_read(capsys):
    """``--pass-config KEY=VALUE`` runs the passes under a PassContext with that option (here
    FuseOps's depth, giving TVM 0.27's depth-2 fusion); an option no pass reads, or a value of
    the wrong kind, is a usage error that names the option and what was expected."""
    fusion = FIXTURES / "fusion"
    argv = ["opt", str(fusion / "mlp.AnnotateTIROpPattern.tvms"), "-p", "FuseOps", "--dialect", "tvm-0.27"]
    assert main(argv + ["--pass-config", "relax.FuseOps.max_depth=2"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == (fusion / "mlp.FuseOps_depth2.tvms").read_text().rstrip("\n")
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip("\n") == (fusion / "mlp.FuseOps.tvms").read_text().rstrip("\n")
    assert main(argv + ["--pass-config", "relax.FuseOps.maxdepth=2"]) == 2
    err = capsys.readouterr().err
    assert "unknown option 'relax.FuseOps.maxdepth'; did you mean 'relax.FuseOps.max_depth'?" in err
    assert "tirx.use_async_copy" in err  # (the options are listed)
    assert main(argv + ["--pass-config", "relax.FuseOps.max_depth=two"]) == 2
    assert "--pass-config relax.FuseOps.max_depth=two: expected an integer" in capsys.readouterr().err
    assert main(argv + ["--pass-config", "relax.FuseOps.max_depth"]) == 2
    assert "--pass-config 'relax.FuseOps.max_depth': expected KEY=VALUE" in capsys.readouterr().err
