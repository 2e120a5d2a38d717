"""fp32 matmul on the CPU: tvms's LLVM build (the default schedule rule and hand schedules) vs
numpy's BLAS vs Apache TVM 0.27, on one thread and on all threads, against the FMA peak.

Rows, for each N (``--n 512,1024,2048``):

* ``numpy (BLAS)``: ``np.matmul(a, b, out=c)`` (OpenBLAS);
* ``tvms default rule``: ``tvms.dlight.ApplyDefaultSchedule(Matmul())`` on the plain TensorIR
  matmul under ``with Target("llvm")``, then ``tvms.build``;
* ``tvms <hand schedule>``: the loop-level texts of ``matmul_schedules.py`` (up to N = 1024,
  the corpus's 32 x 8 tile up to 512: beyond, a call takes seconds);
* the TVM column: Apache TVM's ``tvm.build`` of the same texts, the default rule's scheduled
  TensorIR included (printed in TVM 0.27's dialect), run in TVM's Python (``matmul_cpu_tvm.py``).

Each thread count (``--threads 1,2``) is measured in a fresh worker process started with
``TVM_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set to it, so numpy and tvms run back to back
on the same number of threads, timed in rounds (one call of each row per round, medians over
the rounds), so the ratios of a table come from one worker and a change of load touches every
row alike. GFLOPS are 2 N^3 over the median time; "% peak" is against the FMA peak timed in the
same rounds: a tvms-built kernel of 12 independent vector FMA chains per thread (the peak at
whatever clock the core runs: 2 FMA pipes x 8 lanes x 2 flops per cycle on AVX2). Results are
checked against numpy first.

    .venv/bin/python benchmarks/matmul_cpu.py                          # N = 512,1024,2048
    .venv/bin/python benchmarks/matmul_cpu.py --n 1024 --repeat 7 --no-tvm
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_LABEL = "default rule (dlight Matmul)"
PEAK_ITERS = 2_000_000
PEAK_CHAINS = 12  # independent accumulators: more than FMA latency x pipes (4 x 2)
SETTLE_S = 0.3  # after a numpy call: OpenBLAS's threads spin that long on the other cores


def plain_matmul_text(n: int) -> str:
    return f"""@T.prim_func
def main(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for i, j, k in T.grid({n}, {n}, {n}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def default_scheduled(n: int):
    """The plain matmul scheduled by the default CPU matmul rule."""
    import tvms
    from tvms.lowering.dlight.cpu_matmul import Matmul
    from tvms.script import from_source

    mod = tvms.IRModule({"main": from_source(plain_matmul_text(n))})
    with tvms.target.Target("llvm"):
        mod = tvms.dlight.ApplyDefaultSchedule(Matmul())(mod)
    return mod["main"]


def peak_kernel_text(threads: int, lanes: int) -> str:
    """``threads`` x 12 vector accumulators, each updated ``x = x * y + z`` PEAK_ITERS times:
    independent FMA chains that keep both pipes busy (y = 1, z = 0: the values stay put)."""
    width = PEAK_CHAINS * lanes
    return f"""@T.prim_func
def main(X: T.Buffer(({threads * width},), "float32"), Y: T.Buffer((2,), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for t in T.parallel({threads}):
        for it in range({PEAK_ITERS}):
            for r in T.unroll({PEAK_CHAINS}):
                for l in T.vectorized({lanes}):
                    X[t * {width} + r * {lanes} + l] = X[t * {width} + r * {lanes} + l] * Y[0] + Y[1]
"""


def fma_peak_kernel(threads: int) -> tuple:
    """The built peak kernel, its arguments and the flops of one call."""
    import tvms
    from tvms.lowering.dlight.analysis import vector_lanes
    from tvms.script import from_source

    lanes = vector_lanes("llvm", 32)
    lib = tvms.build(from_source(peak_kernel_text(threads, lanes)), target="llvm")
    args = (np.ones(threads * PEAK_CHAINS * lanes, np.float32), np.array([1.0, 0.0], np.float32))
    return lib, args, threads * PEAK_CHAINS * lanes * 2.0 * PEAK_ITERS


def seconds_of(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_medians(calls: dict, repeat: int, settle_after: tuple = ()) -> dict:
    """Median seconds of each call, timed in rounds (one call of each per round, after a warm-up
    round): a change of the machine's load touches every row alike. The calls named in
    ``settle_after`` are followed by a pause of SETTLE_S: a 2-thread tvms kernel started while
    OpenBLAS's threads still spin on the other core ran at one-thread speed (0.92x numpy at 1024)."""
    times: dict = {label: [] for label in calls}
    for round_ in range(repeat + 1):
        for label, fn in calls.items():
            elapsed = seconds_of(fn)
            if round_:
                times[label].append(elapsed)
            if label in settle_after:
                time.sleep(SETTLE_S)
    return {label: float(np.median(t)) for label, t in times.items()}


def worker(sizes: list[int], repeat: int, text_dir: str | None) -> dict:
    """One thread count (set by the parent in the environment): seconds per row per N, and the
    FMA peak timed in the same rounds."""
    import tvms
    from matmul_schedules import SCHEDULES, fits, hand_schedule_limit, schedule_text
    from tvms.script import from_source

    threads = int(os.environ.get("TVM_NUM_THREADS", "0")) or os.cpu_count() or 1
    peak_lib, peak_args, peak_flops = fma_peak_kernel(threads)
    out: dict = {"threads": threads, "peak_gflops": {}, "sizes": {}}
    for n in sizes:
        rng = np.random.default_rng(0)
        a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
        c = np.zeros((n, n), np.float32)
        expected = a @ b
        funcs = {DEFAULT_LABEL: default_scheduled(n)}
        for label, (template, ti, tj) in SCHEDULES.items():
            if fits(template, n, ti, tj) and n <= hand_schedule_limit(ti, tj):
                funcs[label] = from_source(schedule_text(template, n, ti, tj))["main"]
        calls = {"numpy (BLAS)": lambda: np.matmul(a, b, out=c)}
        for label, func in funcs.items():
            lib = tvms.build(func, target="llvm")
            c[...] = 0
            lib(a, b, c)
            np.testing.assert_allclose(c, expected, rtol=1e-3)
            calls[label] = lambda lib=lib: lib(a, b, c)
        calls["peak"] = lambda: peak_lib(*peak_args)
        rows = interleaved_medians(calls, repeat, settle_after=("numpy (BLAS)",))
        out["peak_gflops"][str(n)] = peak_flops / rows.pop("peak") / 1e9
        if text_dir:  # the default rule's schedule, for TVM to build the same TensorIR
            Path(text_dir, f"default_{n}.tvms").write_text(funcs[DEFAULT_LABEL].script(dialect="tvm-0.27"))
        out["sizes"][str(n)] = rows
    return out


def run_worker(threads: int, sizes: list[int], repeat: int, text_dir: str | None) -> dict:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--n", ",".join(map(str, sizes)),
           "--repeat", str(repeat)] + (["--text-dir", text_dir] if text_dir else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"worker ({threads} threads) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_tvm(python: str, threads: int, sizes: list[int], repeat: int, text_dir: str) -> dict:
    """Apache TVM's seconds per label per N, or {} (with a note) when its run fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(TVM_NUM_THREADS=str(threads))
    result = {}
    for n in sizes:
        texts = [f"{DEFAULT_LABEL}={Path(text_dir, f'default_{n}.tvms')}"]
        done = subprocess.run([python, str(HERE / "matmul_cpu_tvm.py"), str(n), str(repeat), *texts],
                              capture_output=True, text=True, cwd=HERE, env=env)
        if done.returncode != 0:
            print(f"Apache TVM run failed (N={n}, {threads} threads): "
                  f"{done.stderr.strip().splitlines()[-1:]}")
            continue
        result[str(n)] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def render(per_threads: dict, tvm: dict, sizes: list[int]) -> list[str]:
    lines = []
    counts = sorted(per_threads)
    for threads in counts:
        run = per_threads[threads]
        peaks = ", ".join(f"{p:.1f}" for p in run["peak_gflops"].values())
        lines.append(f"\n{threads} thread(s): measured FMA peak {peaks} GFLOPS (in the rounds of each N)")
        lines.append(f"{'':40} {'N':>5} {'ms':>9} {'GFLOPS':>8} {'% peak':>7} {'vs numpy':>9} "
                     f"{'TVM GFLOPS':>11} {'vs TVM':>7}" + (f" {'x 1 thread':>10}" if threads != counts[0] else ""))
        for n in sizes:
            rows = run["sizes"][str(n)]
            peak = run["peak_gflops"][str(n)]
            flops = 2.0 * n ** 3
            for label, seconds in rows.items():
                theirs = tvm.get(threads, {}).get(str(n), {}).get(label)
                tvm_cells = f"{flops / theirs / 1e9:11.1f} {theirs / seconds:7.2f}" if theirs else f"{'':11} {'':7}"
                base = per_threads[counts[0]]["sizes"][str(n)].get(label)
                scale = f" {base / seconds:10.2f}" if threads != counts[0] and base else ""
                name = label if label.startswith("numpy") else f"tvms {label}"
                lines.append(f"{name:40} {n:5} {seconds * 1e3:9.2f} {flops / seconds / 1e9:8.1f} "
                             f"{100 * flops / seconds / 1e9 / peak:6.0f}% {rows['numpy (BLAS)'] / seconds:9.2f} "
                             f"{tvm_cells}{scale}")
    return lines


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="512,1024,2048", help="comma-separated sizes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", default=f"1,{os.cpu_count() or 1}", help="comma-separated thread counts")
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM's column")
    parser.add_argument("--tvm-python", help="Python with Apache TVM 0.27 (default as parse_print.py)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--text-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.n.split(",")]
    if args.worker:
        print(json.dumps(worker(sizes, args.repeat, args.text_dir)))
        return
    from parse_print import cpu_model, find_tvm_python, load_average

    counts = sorted({int(x) for x in args.threads.split(",")})
    tvm_python = None if args.no_tvm else find_tvm_python(args.tvm_python)
    before = load_average()
    per_threads, tvm = {}, {}
    with tempfile.TemporaryDirectory(prefix="tvms-matmul-") as text_dir:
        for threads in counts:
            per_threads[threads] = run_worker(threads, sizes, args.repeat, text_dir if tvm_python else None)
            if tvm_python:
                tvm[threads] = run_tvm(tvm_python, threads, sizes, args.repeat, text_dir)
    print(f"fp32 matmul N x N x N, median of {args.repeat}"
          + ("" if tvm_python else " (Apache TVM not run: no TVM column)"))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, numpy {np.__version__}; "
          f"load average {before} before / {load_average()} after")
    print("\n".join(render(per_threads, tvm, sizes)))


if __name__ == "__main__":
    main()
