"""Smoke tests of the benchmarks: a --quick run without TVM finishes and prints its
table. It checks no figure (timings are never asserted)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_quick(script: str, *flags: str) -> subprocess.CompletedProcess:
    """A finished ``--quick`` run of ``benchmarks/SCRIPT``; fails the test when it exits with an error."""
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--quick", *flags],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_quick_benchmark_runs_and_prints_a_table() -> None:
    done = run_quick("parse_print.py", "--no-tvm")
    lines = done.stdout.splitlines()
    assert any(line.startswith("workload") and "parse tvms" in line for line in lines)
    for workload in ("matmul", "conv2d", "tiled", "gpu", "all"):
        assert any(line.startswith(workload + " ") for line in lines), done.stdout
    assert "tvms print differs" not in done.stdout  # every workload round-trips in tvms


def test_quick_cpu_e2e_benchmark_runs_and_prints_a_table() -> None:
    done = run_quick("cpu_e2e.py")
    lines = done.stdout.splitlines()
    assert any(line.startswith("machine: ") and " cores, numpy " in line for line in lines), done.stdout
    for row in ("add numpy np.add", "add tvms unscheduled", "add tvms parallel + vectorized",
                "mlp batch 1 tvms VM", "mlp batch 4 tvms VM", "compile mlp, first",
                "compile mlp, unchanged (cache)"):
        assert any(line.startswith(row) for line in lines), done.stdout


def test_quick_cpu_default_benchmark_runs_and_prints_its_goals() -> None:
    done = run_quick("cpu_default.py")
    lines = done.stdout.splitlines()
    tables = len({1, os.cpu_count() or 1})  # one per thread count: 1, and all cores
    assert any(line.startswith("machine: ") and " cores, " in line for line in lines), done.stdout
    assert any(line.startswith("clock: ") and "timing loop" in line for line in lines), done.stdout
    for row in ("add ", "  np.copyto", "softmax ", "layer_norm ", "gelu ", "conv2d ", "matmul 64 ", "mlp batch 1 ",
                "mlp batch 4 "):
        assert sum(line.startswith(row) for line in lines) == tables, (row, done.stdout)
    for row in ("import tvms ", "mlp compile + VM, cold", "mlp compile + VM, cached", "mlp compile + VM, new process"):
        assert sum(line.startswith(row) for line in lines) == 1, (row, done.stdout)
    assert sum(line.startswith("goal: add >= 90% of np.copyto") for line in lines) == tables, done.stdout
    assert sum(line.startswith("goal: MLP batch 4 within 1.5x") for line in lines) == tables, done.stdout
    assert sum(line.startswith("goal: gelu 64x128 >= 1.0x numpy") for line in lines) == tables, done.stdout
    for goal in ("cold compile of the MLP <= 1 s", "cached compile of the MLP <= 50 ms", "import tvms <= 0.25 s"):
        assert sum(line.startswith(f"goal: {goal}: ") for line in lines) == 1, (goal, done.stdout)


def test_quick_large_file_benchmark_formats_without_changes() -> None:
    done = run_quick("large_file.py")
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["100"], ["200"])]
    assert [row[0] for row in rows] == ["100", "200"], done.stdout
    assert all(row[-1] == "unchanged" for row in rows), done.stdout  # fmt printed each file back
