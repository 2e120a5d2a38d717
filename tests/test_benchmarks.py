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
    # numpy's GELU is on one thread at every count: a goal on one thread, information on more
    assert sum(line.startswith("goal: gelu 64x128 >= 1.0x numpy (1 thread(s))") for line in lines) == 1, done.stdout
    assert not any(line.startswith("goal: gelu") and "(1 thread(s))" not in line for line in lines), done.stdout
    assert sum(line.startswith("info: gelu 64x128 ") for line in lines) == tables - 1, done.stdout
    for goal in ("cold compile of the MLP <= 1 s", "cached compile of the MLP <= 50 ms", "import tvms <= 0.25 s"):
        assert sum(line.startswith(f"goal: {goal}: ") for line in lines) == 1, (goal, done.stdout)


def test_quick_large_file_benchmark_formats_without_changes() -> None:
    done = run_quick("large_file.py")
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["100"], ["200"])]
    assert [row[0] for row in rows] == ["100", "200"], done.stdout
    assert all(row[-1] == "unchanged" for row in rows), done.stdout  # fmt printed each file back


def test_quick_thread_split_benchmark_prints_each_workload() -> None:
    done = run_quick("thread_split.py")
    rows = {line.split("  ")[0] for line in done.stdout.splitlines()}
    assert {"mlp batch 16", "conv2d", "matmul 64"} <= rows, done.stdout


def test_numpy_im2col_convolution_of_a_batch() -> None:
    """The numpy baseline of the conv2d row against a direct sum over the 3x3 window, two images
    (it convolved the first image only)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from cpu_default_workloads import conv2d_im2col
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 3, 3, 3))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,fc->nfhw", padded[:, :, r:r + 5, s:s + 6], w[:, :, r, s])
               for r in range(3) for s in range(3))
    np.testing.assert_allclose(conv2d_im2col(np, x, w), want, rtol=1e-12, atol=1e-12)


def test_quick_gpu_host_overhead_benchmark_counts_the_driver_calls_of_a_call() -> None:
    done = run_quick("gpu_host_overhead.py")
    rows = {line[:34].strip(): line[34:].split() for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"VM call of the MLP", "CudaFunction call (first layer)", "CudaFunction call with a workspace",
                         "VM call with alloc_storage"}, done.stdout
    assert rows["VM call of the MLP"][1:] == ["cuLaunchKernel", "2"], done.stdout  # (no allocation, no context)
    # (pooled: a workspace and a storage allocate nothing after the first call; the storage is zeroed)
    assert rows["CudaFunction call with a workspace"][1:] == ["cuLaunchKernel", "2"], done.stdout
    assert rows["VM call with alloc_storage"][1:] == ["cuLaunchKernel", "2,", "cuMemsetD8Async", "1"], done.stdout
