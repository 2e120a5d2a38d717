"""fp32 matmul on the CPU: tvms's LLVM build of scheduled loop-level TensorIR vs numpy's BLAS.

The schedules are written out in the flattened form the TIR lowering produces (the form of
``../shared/corpus/lower_matmul_sched_cpu_03_FlattenBuffer.tvms``), scaled to N x N x N:

* ``corpus``: that file's schedule exactly (i split 32, j split 8, ``T.parallel`` outer i,
  ``T.vectorized`` inner j, init loop, then ``for k, i_1``);
* ``register-tiled``: the same loops with a 4 x 16 tile per k step (``T.unroll`` over 4 rows,
  ``T.vectorized`` over 16 columns), so the accumulators stay in vector registers;
* ``k-tiled``: that, with k split by 256 outside the column tiles (needs N a multiple of 256).

    .venv/bin/python benchmarks/matmul_cpu.py            # N = 1024
    .venv/bin/python benchmarks/matmul_cpu.py --n 512 --repeat 3

Prints GFLOPS (2 N^3 / median seconds) of each and the ratio to numpy; with Apache TVM found
(``--tvm-python``, else as ``parse_print.py`` finds it) also the same texts built by
``tvm.build`` (``matmul_cpu_tvm.py``, run in TVM's Python). Results are checked against numpy
before timing. ``TVM_NUM_THREADS`` sets the thread count (default: all cores). The schedule
texts are in ``matmul_schedules.py``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np

import tvms
from matmul_schedules import SCHEDULES, fits, schedule_text
from parse_print import find_tvm_python
from tvms.script import from_source

def scheduled_matmul(template: str, n: int, ti: int, tj: int):
    return from_source(schedule_text(template, n, ti, tj))["main"]


def measure_tvm(python: str, n: int, repeat: int) -> dict:
    """Median seconds per schedule label of Apache TVM's build, from a subprocess in its Python."""
    script = Path(__file__).with_name("matmul_cpu_tvm.py")
    done = subprocess.run([python, str(script), str(n), str(repeat)], capture_output=True, text=True,
                          cwd=script.parent)
    if done.returncode != 0:
        print(f"Apache TVM run failed: {done.stderr.strip().splitlines()[-1:]}")
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM's column")
    parser.add_argument("--tvm-python", help="Python with Apache TVM 0.27 (default as parse_print.py)")
    args = parser.parse_args(argv)
    n = args.n
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    flops = 2.0 * n ** 3
    expected = a @ b
    numpy_s = median_seconds(lambda: np.matmul(a, b, out=c), args.repeat)
    tvm_python = None if args.no_tvm else find_tvm_python(args.tvm_python)
    tvm_seconds = measure_tvm(tvm_python, n, args.repeat) if tvm_python else {}
    rows = [("numpy (BLAS)", numpy_s, 0.0, None)]
    for label, (template, ti, tj) in SCHEDULES.items():
        if not fits(template, n, ti, tj):
            print(f"skipping {label}: N={n} is not a multiple of its tiles")
            continue
        func = scheduled_matmul(template, n, ti, tj)
        start = time.perf_counter()
        lib = tvms.build(func, target="llvm")
        compile_s = time.perf_counter() - start
        c[...] = 0
        lib(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-3)
        timing = lib.time_evaluator("main", number=1, repeat=args.repeat)(a, b, c)
        rows.append((f"tvms {label}", timing.median, compile_s, tvm_seconds.get(label)))
    print(f"fp32 matmul {n}x{n}x{n}, median of {args.repeat}"
          + ("" if tvm_python else " (Apache TVM not found: no TVM column)"))
    print(f"{'':36} {'ms':>9} {'GFLOPS':>8} {'vs numpy':>9} {'compile s':>10} {'TVM GFLOPS':>11} {'vs TVM':>7}")
    for label, seconds, compile_s, theirs in rows:
        tvm_cells = f"{flops / theirs / 1e9:11.1f} {theirs / seconds:7.2f}" if theirs else f"{'':11} {'':7}"
        print(f"{label:36} {seconds * 1e3:9.2f} {flops / seconds / 1e9:8.1f} {numpy_s / seconds:9.2f} "
              f"{compile_s:10.3f} {tvm_cells}")


if __name__ == "__main__":
    main()
