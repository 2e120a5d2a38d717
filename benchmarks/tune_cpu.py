"""Auto-tuning on the CPU, side by side: tvms.meta_schedule vs numpy's BLAS vs Apache TVM 0.27's
meta-schedule (when its Python is given), on one thread.

Rows:

* ``numpy (BLAS)``: ``a @ b`` with ``OPENBLAS_NUM_THREADS=1``;
* ``tvms tuned``: ``ms.tune_tir`` of the plain fp32 matmul (``--trials``, the default space,
  evolutionary search, XGBoost model) for ``llvm -num-cores=1``, then the best schedule built and
  timed; the tuning wall time is reported beside it;
* ``TVM 0.27 tuned``: the same with TVM's ``ms.tune_tir`` (``--tvm-python``), run in its own
  process with ``TVM_NUM_THREADS=1``;
* with ``--mlp``: seed 000's two-layer MLP through ``tvms.compile`` with the default schedules vs
  after ``MetaScheduleTuneTIR`` + ``MetaScheduleApplyDatabase``.

    .venv/bin/python benchmarks/tune_cpu.py --n 1024 --trials 256 --tvm-python /work/tvm-venv/bin/python
    .venv/bin/python benchmarks/tune_cpu.py --n 64 --trials 16 --mlp-trials 8     # a smoke run
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS
os.environ.setdefault("TVM_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from matmul_cpu import plain_matmul_text  # noqa: E402
from seed_mlp import MLP  # noqa: E402

TARGET = "llvm -num-cores=1"

# Run by TVM 0.27's Python: tune the same matmul with its meta-schedule, print one JSON line.
TVM_SCRIPT = r"""
import json, sys, time, numpy as np, tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T
n, trials, work_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mod = tvm.script.from_source(sys.argv[4])  # printed by tvms in TVM 0.27's dialect
target = tvm.target.Target({"kind": "llvm", "mcpu": sys.argv[5], "num-cores": 1})  # the host CPU, as tvms
t0 = time.perf_counter()
db = ms.tune_tir(mod, target, work_dir, trials, num_trials_per_iter=64)
wall = time.perf_counter() - t0
sch = ms.tir_integration.compile_tir(db, mod, target)
lib = tvm.compile(sch.mod, target=target).jit()  # (0.27: an Executable; its module times)
a, b = (np.random.rand(n, n).astype("float32") for _ in range(2))
args = [tvm.runtime.tensor(x) for x in (a, b, np.zeros((n, n), "float32"))]
secs = lib.time_evaluator("main", tvm.cpu(), number=3, repeat=5, min_repeat_ms=100)(*args).results
assert np.allclose(args[2].numpy(), a @ b, rtol=1e-3, atol=1e-3)
print(json.dumps({"secs": sorted(secs)[len(secs) // 2], "wall": wall}))
"""


def median_secs(fn, repeat: int = 5, min_secs: float = 0.1) -> float:
    fn()
    times = []
    for _ in range(repeat):
        number, elapsed = 0, 0.0
        start = time.perf_counter()
        while elapsed < min_secs:
            fn()
            number += 1
            elapsed = time.perf_counter() - start
        times.append(elapsed / number)
    return statistics.median(times)


def tvms_tuned(n: int, trials: int, work_dir: str) -> dict:
    import tvms
    from tvms import meta_schedule as ms

    mod = tvms.script.from_source(plain_matmul_text(n))
    plain = tvms.build(mod, TARGET)
    t0 = time.perf_counter()
    db = ms.tune_tir(mod, TARGET, work_dir, trials, num_trials_per_iter=min(64, trials), seed=0, progress="plain")
    wall = time.perf_counter() - t0
    sch = ms.tir_integration.compile_tir(db, mod, TARGET)
    lib = tvms.build(sch.mod, TARGET)
    a, b = (np.random.rand(n, n).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    return {"secs": median_secs(lambda: lib["main"](a, b, c)), "wall": wall,
            "plain_secs": median_secs(lambda: plain["main"](a, b, c)) if n <= 256 else None}


def tvm_tuned(python: str, n: int, trials: int, work_dir: str) -> dict:
    import llvmlite.binding as llvm

    import tvms

    text = tvms.IRModule({"main": tvms.script.from_source(plain_matmul_text(n))}).script(dialect="tvm-0.27")
    out = subprocess.run([python, "-c", TVM_SCRIPT, str(n), str(trials), work_dir, text, llvm.get_host_cpu_name()],
                         capture_output=True, text=True, env={**os.environ, "TVM_NUM_THREADS": "1"})
    if out.returncode:
        raise SystemExit(f"TVM's run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def mlp(trials: int, work_dir: str) -> list[tuple[str, float]]:
    """Seed 000's MLP four ways, (label, median seconds per call) each: tvms.compile's own build
    (it fuses each weight transpose into its matmul); the seed's flows, which keep the
    transposes as kernels of their own, with the default schedules and tuned; and tuned after
    the same fusion (what ``tvms tune`` does)."""
    import tvms
    from tvms import dlight as dl
    from tvms import relax

    mod = tvms.script.from_source(MLP)
    shapes = [(1, 784), (128, 784), (128,), (10, 128), (10,)]
    args = [np.random.rand(*s).astype("float32") for s in shapes]

    def timed(m):
        vm = relax.VirtualMachine(tvms.compile(m, target=TARGET), tvms.cpu())
        return statistics.median(vm.time_evaluator("main", tvms.cpu(), number=100, repeat=5)(*args).results)

    def tuned(first: list, folder: str):
        return tvms.transform.Sequential([
            *first, relax.get_pipeline("zero"),
            relax.transform.MetaScheduleTuneTIR(work_dir=folder, max_trials_global=trials, progress="plain"),
            relax.transform.MetaScheduleApplyDatabase(work_dir=folder),
        ])(mod)

    with tvms.target.Target(TARGET):
        seed_default = tvms.transform.Sequential([relax.get_pipeline("zero"),
                                                  dl.ApplyDefaultSchedule(*dl.cpu.default_rules())])(mod)
        seed_tuned = tuned([], os.path.join(work_dir, "seed"))
        fused_tuned = tuned([relax.transform.FuseTransposeMatmul()], os.path.join(work_dir, "fused"))
    return [("tvms.compile (transposes fused into the matmuls)", timed(mod)),
            ("seed flow: zero + ApplyDefaultSchedule", timed(seed_default)),
            ("seed flow: zero + MetaScheduleTuneTIR", timed(seed_tuned)),
            ("FuseTransposeMatmul + zero + tuning (tvms tune)", timed(fused_tuned))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--tvm-python", help="TVM 0.27's Python (e.g. /work/tvm-venv/bin/python)")
    ap.add_argument("--mlp-trials", type=int, default=0, help="also tune seed 000's MLP (trials per task)")
    args = ap.parse_args()
    n, flop = args.n, 2 * args.n ** 3
    a, b = (np.random.rand(n, n).astype("float32") for _ in range(2))
    rows = [("numpy (BLAS), 1 thread", median_secs(lambda: a @ b), None)]
    with tempfile.TemporaryDirectory() as tmp:
        ours = tvms_tuned(n, args.trials, os.path.join(tmp, "tvms"))
        if ours["plain_secs"] is not None:
            rows.append(("tvms unscheduled", ours["plain_secs"], None))
        rows.append((f"tvms tuned, {args.trials} trials", ours["secs"], ours["wall"]))
        if args.tvm_python:
            theirs = tvm_tuned(args.tvm_python, n, args.trials, os.path.join(tmp, "tvm"))
            rows.append((f"TVM 0.27 tuned, {args.trials} trials", theirs["secs"], theirs["wall"]))
        print(f"\nfp32 matmul {n}^3, one thread ({TARGET})")
        print(f"{'':34} {'ms':>10} {'GFLOPS':>8} {'x numpy':>8} {'tuning s':>9}")
        for label, secs, wall in rows:
            print(f"{label:34} {secs * 1e3:10.3f} {flop / secs / 1e9:8.2f} {rows[0][1] / secs:8.2f} "
                  f"{'' if wall is None else f'{wall:9.1f}'}")
        if args.mlp_trials:
            print(f"\nseed MLP (1x784 -> 128 -> 10), {args.mlp_trials} trials per tuning")
            for label, secs in mlp(args.mlp_trials, os.path.join(tmp, "mlp")):
                print(f"{label:50} {secs * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
