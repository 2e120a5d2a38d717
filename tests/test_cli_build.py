"""``tvms build`` / ``tvms run``: compile a module to a library, run modules and libraries."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.cli_build import describe_array  # noqa: E402
from tvms.cli import main  # noqa: E402

EXAMPLES = Path(__file__).parent.parent / "examples"
MATMUL = EXAMPLES / "matmul.tvms"  # 128x128x128 with blocks: lowered, then compiled

RELU = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def relu(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 2), "float32")
        B = T.match_buffer(b, (n, 2), "float32")
        for i in T.parallel(n):
            for j in T.vectorized(2):
                B[i, j] = T.max(A[i, j], T.float32(0.0))
"""


@pytest.fixture
def relu_file(tmp_path) -> Path:
    path = tmp_path / "relu.tvms"
    path.write_text(RELU)
    return path


@pytest.fixture(scope="module")
def matmul_lib(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("build") / "model.so"
    assert main(["build", str(MATMUL), "--target", "llvm", "-o", str(path)]) == 0
    return path


def test_build_writes_a_library_that_load_module_runs(matmul_lib, tmp_path):
    assert [p.name for p in matmul_lib.parent.iterdir()] == ["model.so"]  # no temporary files left
    lib = tvms.runtime.load_module(str(matmul_lib))
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), dtype=np.float32), rng.random((128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_run_library_with_inputs_prints_the_output(matmul_lib, tmp_path, capsys):
    a = np.eye(128, dtype=np.float32) * 2
    b = np.arange(128 * 128, dtype=np.float32).reshape(128, 128) / 1000
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = main(["run", str(matmul_lib), "--input", f"A={tmp_path / 'a.npy'}", "--input", f"B={tmp_path / 'b.npy'}"])
    assert code == 0
    assert capsys.readouterr().out == describe_array("C", a @ b) + "\n"


@pytest.mark.parametrize("flags, named", [
    (["--pass-config", "tirx.UnrollLoop={}"], "--pass-config"),
    (["--target", "cuda"], "--target"),
    (["--no-default-schedule", "--target", "llvm"], "--target, --no-default-schedule"),
])
def test_run_library_refuses_options_only_compiling_reads(matmul_lib, flags, named, capsys):
    # a library was compiled by 'tvms build': these would be silently ignored
    assert main(["run", str(matmul_lib), "--random-inputs", *flags]) == 2
    assert capsys.readouterr().err == (f"tvms: error: {matmul_lib} is a library, already compiled: {named} "
                                       f"applies only to a .tvms module (give it to 'tvms build' instead)\n")


def test_run_prints_small_outputs_in_full(relu_file, tmp_path, capsys):
    x = np.array([[-1.5, 2.0], [3.25, -4.0], [0.5, -0.25]], np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(relu_file), "--input", f"A={tmp_path / 'x.npy'}"]) == 0
    assert capsys.readouterr().out == (
        "B: shape (3, 2) float32\n"
        "  min 0  max 3.25  mean 0.958333\n"
        "  [[0.  , 2.  ],\n"
        "   [3.25, 0.  ],\n"
        "   [0.5 , 0.  ]]\n")


def test_random_inputs_need_concrete_sizes(relu_file, capsys):
    assert main(["run", str(relu_file), "--random-inputs"]) == 2
    assert "the shape of A depends on the size n: give --shape n=N" in capsys.readouterr().err
    assert main(["run", str(relu_file), "--random-inputs", "--shape", "n=5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("B: shape (5, 2) float32\n")
    assert main(["run", str(relu_file), "--random-inputs", "--shape", "n=5", "--seed", "1"]) == 0
    assert capsys.readouterr().out == out  # the seed makes the inputs reproducible


def test_run_with_timing_prints_latency_statistics(matmul_lib, capsys):
    assert main(["run", str(matmul_lib), "--random-inputs", "--time", "--number", "2", "--repeat", "3"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("latency (ms, 3 repeats of 2 runs): mean ")
    stats = dict(zip(last.split()[-6::2], map(float, last.split()[-5::2])))
    assert set(stats) == {"mean", "median", "min"} and 0 < stats["min"] <= stats["mean"]


@pytest.mark.parametrize("extra, message", [
    ([], "missing input A: give --input A=FILE.npy, or --random-inputs"),
    (["--input", "X=x.npy"], "has no parameter 'X' (its parameters: A, B)"),
    (["--input", "A=missing.npy"], "cannot read input A from missing.npy"),
    (["--random-inputs", "--shape", "m=3"], "has no size named 'm' (its sizes: n)"),
    (["--random-inputs", "--shape", "n=three"], "--shape n=three: the size must be an integer"),
    (["--entry", "main"], "the module has no function 'main'; it has relu"),
])
def test_run_input_errors_exit_2(relu_file, extra, message, capsys, monkeypatch):
    monkeypatch.chdir(relu_file.parent)
    assert main(["run", str(relu_file), *extra]) == 2
    assert message in capsys.readouterr().err


def test_wrong_shape_or_dtype_of_an_input_exits_2(matmul_lib, tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((128, 64), np.float32))
    assert main(["run", str(matmul_lib), "--random-inputs", "--input", f"A={tmp_path / 'a.npy'}"]) == 2
    assert "input A: dimension 1: expected extent 128, got 64 (A is declared (128, 128) float32)" \
        in capsys.readouterr().err
    np.save(tmp_path / "a.npy", np.zeros((128, 128), np.float64))
    assert main(["run", str(matmul_lib), "--random-inputs", "--input", f"A={tmp_path / 'a.npy'}"]) == 2
    assert "input A has dtype float64; A is declared (128, 128) float32" in capsys.readouterr().err


def test_build_errors(relu_file, tmp_path, capsys, monkeypatch):
    assert main(["build", str(relu_file)]) == 2
    assert "name the library to write with -o FILE.so" in capsys.readouterr().err
    bad = tmp_path / "bad.tvms"
    bad.write_text("@I.ir_module\nclass Module:\n    x = (\n")
    assert main(["build", str(bad), "-o", str(tmp_path / "bad.so")]) == 2
    assert str(bad) in capsys.readouterr().err
    out = tmp_path / "kept.so"
    out.write_bytes(b"old")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    assert main(["build", str(relu_file), "-o", str(out)]) == 1
    assert "'cc' was not found on PATH" in capsys.readouterr().err
    assert out.read_bytes() == b"old"


def test_build_for_a_target_it_cannot_compile_for_exits_1(relu_file, tmp_path, capsys):
    assert main(["build", str(relu_file), "--target", "rocm", "-o", str(tmp_path / "x.so")]) == 1
    assert f"cannot compile {relu_file}: " in capsys.readouterr().err
    assert not (tmp_path / "x.so").exists()


def test_a_build_error_in_a_statement_shows_its_line(tmp_path, capsys):
    src = tmp_path / "unroll.tvms"
    src.write_text('@T.prim_func\ndef f(A: T.Buffer((16,), "float32"), n: T.int32):\n'
                   '    for i in T.unroll(n):\n        A[i] = A[i] + T.float32(1)\n')
    assert main(["build", str(src), "-o", str(tmp_path / "u.so")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:3:9: error: cannot unroll the loop over i")
    assert "3 |     for i in T.unroll(n):" in err and not (tmp_path / "u.so").exists()


def test_run_the_corpus_mlp_from_source_and_from_its_library(tmp_path, capsys):
    from tvms.runtime.reference_relax import run_relax
    from tvms.script import from_source

    rng = np.random.default_rng(2)
    names = ["x", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    shapes = [(2, 784), (256, 784), (256,), (10, 256), (10,)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    flags = []
    for name, arr in zip(names, inputs):
        np.save(tmp_path / f"{name}.npy", arr)
        flags += ["--input", f"{name}={tmp_path / name}.npy"]
    expected = run_relax(from_source((EXAMPLES / "mlp.tvms").read_text()), "forward", *inputs)
    lib = tmp_path / "mlp.so"
    assert main(["build", str(EXAMPLES / "mlp.tvms"), "-o", str(lib)]) == 0
    for program in (EXAMPLES / "mlp.tvms", lib):
        assert main(["run", str(program), "--entry", "forward", *flags]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "output: shape (2, 10) float32"
        printed = np.array([float(v) for v in " ".join(lines[2:]).replace("[", " ").replace("]", " ")
                            .replace(",", " ").split()], np.float32).reshape(2, 10)
        np.testing.assert_allclose(printed, expected, rtol=1e-4, atol=1e-3)
    assert main(["run", str(lib), "--entry", "forward", "--random-inputs"]) == 2
    assert "the shape of x depends on the size n: give --shape n=N" in capsys.readouterr().err
    assert main(["run", str(lib), "--entry", "forward", "--random-inputs", "--shape", "n=4", "--time"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("output: shape (4, 10) float32\n") and "latency (ms, 3 repeats of 10 runs)" in out
