"""A target's ``-mcpu``, ``-mattr`` and ``-mtriple`` are checked before LLVM sees them
(``lowering/codegen/llvm_names.py``): LLVM exits or aborts the process on several bad names."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.cli import main  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.lowering.codegen import llvm_names  # noqa: E402
from tvms.lowering.codegen.llvm_target import parse_llvm_target, require_llvm  # noqa: E402
from tvms.script import from_source  # noqa: E402

SCALE = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in T.parallel(64):
            B[i] = A[i] * T.float32(3.0)
"""


def _host_arch() -> str:
    llvm = require_llvm()
    return llvm.get_triple_parts(llvm.get_process_triple()).Arch


needs_x86_64 = pytest.mark.skipif(_host_arch() != "x86_64", reason="the names are x86_64's")


@needs_x86_64
@pytest.mark.parametrize("target", ["llvm -mcpu=skylakee", "llvm -mattr=avx2", "llvm -mcpu=i686"])
def test_a_bad_name_is_an_error_in_a_fresh_process_not_an_llvm_abort(target):
    # before the check: "LLVM ERROR: 64-bit code requested on a subtarget that doesn't support it!"
    # (exit 1 from inside LLVM) for the CPUs, a failed assertion (SIGABRT) for the unsigned feature
    script = textwrap.dedent(f"""
        import sys, tvms
        from tvms.script import from_source
        try:
            tvms.build(from_source({SCALE!r}), target={target!r})
        except tvms.TVMSError as err:
            print("refused:", err)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"refused: target {target!r}: ") and "LLVM ERROR" not in done.stderr


@needs_x86_64
@pytest.mark.parametrize("target, message", [
    ("llvm -mcpu=skylakee", "unknown -mcpu 'skylakee' for x86_64; did you mean skylake, skylake_avx512, "
                            "skylake-avx512?"),
    ("llvm -mcpu=i686", "LLVM cannot generate x86_64 code for -mcpu=i686 (a CPU without x86_64's 64-bit mode)"),
    ("llvm -mcpu=cortex-a72", "unknown -mcpu 'cortex-a72' for x86_64; did you mean "),
    ("llvm -mattr=+avx9", "unknown -mattr feature '+avx9' for x86_64; did you mean +avx, +avx2"),
    ("llvm -mattr=+avx2,+fmaa", "unknown -mattr feature '+fmaa' for x86_64; did you mean +fma"),
    ("llvm -mattr=avx2", "-mattr feature 'avx2' must start with '+' (enable) or '-' (disable); "
                         "did you mean +avx2"),
    ("llvm -mattr=-sse2", "LLVM cannot generate x86_64 code with '-sse2'"),
    ("llvm -mtriple=foo-bar-baz", "LLVM knows no architecture in -mtriple 'foo-bar-baz' (a triple is "
                                  "arch-vendor-os)"),
    ("llvm -mtriple=x86-64-pc-linux-gnu", "LLVM knows no architecture in -mtriple 'x86-64-pc-linux-gnu' "
                                          "(a triple is arch-vendor-os); did you mean x86_64-pc-linux-gnu"),
    ("llvm -mtriple=aarch64-linux-gnu", "-mtriple 'aarch64-linux-gnu' is aarch64 for linux; tvms generates "
                                        "code for this machine only"),
])
def test_bad_names_are_refused_with_the_close_valid_ones(target, message):
    with pytest.raises(TVMSError) as err:
        parse_llvm_target(target)
    assert str(err.value).startswith(f"target {target!r}: {message}")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=native", "llvm -num-cores=2",
                                    "llvm -mcpu=native -mattr=+sse2"])
def test_host_targets_still_build_and_compute(target):
    lib = tvms.build(from_source(SCALE), target=target)
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    lib(a, b)
    np.testing.assert_array_equal(b, a * 3)


@needs_x86_64
@pytest.mark.parametrize("target", ["llvm -mcpu=skylake-avx512 -mattr=+avx2", "llvm -mcpu=znver3",
                                    "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=haswell -mattr=+avx2,+fma,-avx512f"])
def test_named_cpus_and_features_still_compile(target):
    # (compiled, not run: the host need not have these CPUs' instructions)
    lib = tvms.build(from_source(SCALE), target=target)
    assert "vmul" in lib.get_source("asm")


def test_native_is_the_host_cpu_with_its_features():
    native = parse_llvm_target("llvm -mcpu=native")
    assert native.cpu == require_llvm().get_host_cpu_name() and native.features == parse_llvm_target("llvm").features


@needs_x86_64
@pytest.mark.parametrize("command", ["build", "run"])
def test_the_cli_exits_2_on_a_bad_target(command, tmp_path, capsys):
    source = tmp_path / "scale.tvms"
    source.write_text(SCALE)
    extra = ["-o", str(tmp_path / "x.so")] if command == "build" else ["--random-inputs"]
    assert main([command, str(source), "--target", "llvm -mcpu=skylakee", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown -mcpu 'skylakee' for x86_64; did you mean skylake" in err
    assert not (tmp_path / "x.so").exists()


def test_the_table_was_made_by_the_installed_llvm():
    table = llvm_names.table()
    assert table["llvm_version"] == ".".join(map(str, require_llvm().llvm_version_info)), (
        "llvmlite links another LLVM: write the table again with python -m tvms.lowering.codegen.llvm_names")
    assert set(table["arches"]) == {"x86_64", "aarch64"}
    x86 = table["arches"]["x86_64"]
    assert "skylake-avx512" in x86["cpus"] and "i386" in x86["known_cpus"] and "i386" not in x86["cpus"]
    assert x86["features"]["avx2"] == "+-" and x86["features"]["sse2"] == "+"


@pytest.mark.slow
def test_the_table_is_what_the_generator_writes():
    with open(llvm_names.TABLE, encoding="utf-8") as f:
        assert json.load(f) == llvm_names.build_table()
