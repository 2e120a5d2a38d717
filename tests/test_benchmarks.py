"""Smoke test of the parse/print benchmark: a --quick run without TVM finishes and prints its
table. It checks no figure (timings are never asserted)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_quick_benchmark_runs_and_prints_a_table() -> None:
    done = subprocess.run([sys.executable, "benchmarks/parse_print.py", "--quick", "--no-tvm"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("workload") and "parse tvms" in line for line in lines)
    for workload in ("matmul", "conv2d", "tiled", "gpu", "all"):
        assert any(line.startswith(workload + " ") for line in lines), done.stdout
    assert "tvms print differs" not in done.stdout  # every workload round-trips in tvms
