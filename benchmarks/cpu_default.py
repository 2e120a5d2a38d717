"""Fast by default on CPU: tvms's default schedules beside numpy and Apache TVM 0.27 (issues 7, 17).

Every tvms row is built the way a user gets it without writing a schedule: the operator in a
Relax function (``cpu_default_workloads.py``), ``LegalizeOps`` to TensorIR, then
``tvms.dlight.ApplyDefaultSchedule(*tvms.dlight.cpu.default_rules())`` under
``with tvms.target.Target("llvm")`` and ``tvms.build``; the MLP (``examples/mlp.tvms``) goes
through ``tvms.compile`` as it is (FuseTransposeMatmul, the zero pipeline, the same default
schedules) and the Relax VM.

* add of 16M fp32 in GB/s (12 bytes per element), beside ``np.add(out=)`` and ``np.copyto``
  (a memcpy-like baseline, 8 bytes per element);
* softmax, layer norm and GELU over the rows of 4096 x 1024 fp32, beside numpy's expressions, in
  GB/s of the least traffic (the input read once, the output written once); numpy's GELU is
  ``0.5 * x * (1 + erf(x / sqrt(2)))`` with ``scipy.special.erf``, or without scipy the tanh form
  a numpy user writes then (GPT-2's);
* matmul 512/1024/2048 fp32 in GFLOPS and % of the FMA peak, beside ``np.matmul(out=)``;
* a ResNet-style 3x3 convolution (1 x 64 x 56 x 56, 64 filters, padding 1) in GFLOPS, beside
  im2col + one matmul in numpy (``cpu_default_workloads.conv2d_im2col``);
* the MLP at batch 1, 16 and 64, beside numpy's ``relu(x @ w1.T + b1) @ w2.T + b2``;
* the MLP's compile time, cold (a fresh process, no cache: ``tvms.compile`` and the VM's
  creation) and cached (a fresh parse of the same text compiled again in that process; and in
  another new process, with the kernels' object code from the on-disk cache), and the seconds of
  ``import tvms`` in a fresh process beside ``import numpy`` (and ``import tvm``).

Each thread count (1 and all cores) is measured in a fresh worker process started with
``TVM_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set to it, so numpy and tvms share a thread
count and the ratios of a table come from one process; numpy's softmax, layer norm and GELU
(exp, sum, var: not BLAS) run on one thread whatever the count, so their goals are the 1-thread
ratios and the all-cores ones are printed as information. The FMA peak is measured in each worker
by a kernel of independent vector FMA chains (``matmul_cpu.fma_peak_kernel``); the clock is
that peak over 32 flops per cycle (2 FMA pipes x 8 lanes x 2), beside what /proc/cpuinfo says.
With Apache TVM found, the same Relax texts and the MLP go through TVM's zero pipeline
(``cpu_default_tvm.py``: TVM's default, unscheduled on CPU), and TVM builds the hand matmul
schedules of ``matmul_schedules.py`` (``matmul_cpu_tvm.py``), whose best is its column.

    .venv/bin/python benchmarks/cpu_default.py            # about 3 minutes with TVM
    .venv/bin/python benchmarks/cpu_default.py --quick    # small sizes, 1 repeat, no TVM
    .venv/bin/python benchmarks/cpu_default.py --cold 8   # the compile and import rows only, median of 8
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
MLP_PATH = HERE.parent / "examples" / "mlp.tvms"
GOAL_MATMUL = 1024
# the rows whose numpy expression runs on one thread at every thread count (ufuncs and reductions
# are not threaded; OPENBLAS_NUM_THREADS only threads BLAS): their issue-17 goals are 1-thread ones
NUMPY_ONE_THREAD = ("softmax", "layer_norm", "gelu")


def build_default(text: str):
    """``tvms.build`` of the PrimFuncs LegalizeOps makes of a Relax text, default-scheduled."""
    import tvms
    from tvms.ir.function import PrimFunc
    from tvms.ir.module import IRModule
    from tvms.script import from_source

    legalized = tvms.relax.transform.LegalizeOps()(from_source(text))
    prims = IRModule({k: legalized[k] for k in legalized if isinstance(legalized[k], PrimFunc)})
    if len(prims.functions) != 1:
        raise ValueError(f"expected one kernel, LegalizeOps made {list(prims.functions)}")
    with tvms.target.Target("llvm"):
        scheduled = tvms.dlight.ApplyDefaultSchedule(*tvms.dlight.cpu.default_rules())(prims)
    lib = tvms.build(scheduled, target="llvm")
    return lib, next(iter(lib.functions))


def default_mlp():
    """The MLP's VM as ``tvms.compile`` makes it by default: FuseTransposeMatmul, the zero
    pipeline, then the default schedules."""
    import tvms
    from tvms.script import from_source

    return tvms.relax.VirtualMachine(tvms.compile(from_source(MLP_PATH.read_text()), target="llvm"),
                                     tvms.cpu())


def numpy_form(label: str, arrays: list, out: np.ndarray):
    """numpy's side of a workload, writing into ``out`` where numpy can."""
    from cpu_default_workloads import reference

    if label == "add":
        return lambda: np.add(arrays[0], arrays[1], out=out)
    if label.startswith("matmul"):
        return lambda: np.matmul(arrays[0], arrays[1], out=out)
    if label == "gelu" and not has_scipy():
        return lambda: gelu_tanh(arrays[0])
    return lambda: reference(np, label, arrays)


def has_scipy() -> bool:
    try:
        import scipy.special  # noqa: F401
        return True
    except ImportError:
        return False


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU as numpy users write it without scipy's erf (GPT-2's tanh form; within 5e-4 of it)."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def numpy_gelu_name() -> str:
    return "0.5*x*(1+scipy.special.erf(x/sqrt 2))" if has_scipy() else \
        "0.5*x*(1+tanh(0.79788456*(x+0.044715*x^3))) (no scipy: the tanh form)"


def worker(args: argparse.Namespace) -> dict:
    """Seconds per row at the thread count the parent set in the environment."""
    from cpu_default_workloads import reference, workloads
    from cpu_e2e import mlp_rows, per_call_seconds, warm_up

    threads = int(os.environ.get("TVM_NUM_THREADS", "0")) or os.cpu_count() or 1
    peak, peak_scaling = fma_peak(threads, args.repeat)
    out: dict = {"threads": threads, "peak_gflops": peak, "peak_scaling": peak_scaling, "rows": {}}
    rng = np.random.default_rng(0)
    for label, (text, shapes) in workloads(args.n, args.rows, args.cols, args.sizes, args.conv).items():
        arrays = [rng.random(s, dtype=np.float32) for s in shapes]
        result = np.empty(shapes[0], np.float32)  # (every output has the first input's shape)
        try:
            lib, name = build_default(text)
        except Exception as err:  # (the default rules are young: say which workload they fail on)
            out["rows"][label] = {"error": f"{type(err).__name__}: {str(err)[:160]}"}
            continue
        lib[name](*arrays, result)
        np.testing.assert_allclose(result, reference(np, label, arrays), rtol=1e-3, atol=1e-4)
        time.sleep(0.3)  # (the reference may have run OpenBLAS, whose threads spin for a while)
        warm_up(lambda: lib[name](*arrays, result))
        timing = lib.time_evaluator(name, number=1, repeat=args.repeat)(*arrays, result)
        row = out["rows"][label] = {"tvms": timing.median}
        if threads > 1 and (label == "add" or label.startswith("matmul")):
            row["scaling"] = thread_scaling(lambda: lib[name](*arrays, result), threads, args.repeat)
        row["numpy"] = per_call_seconds(numpy_form(label, arrays, result), 1, args.repeat)
        if label == "add":
            row["copy"] = per_call_seconds(lambda: np.copyto(result, arrays[0]), 1, args.repeat)
        time.sleep(0.3)  # OpenBLAS's threads spin for a while after a call: let them sleep first
    for label, numpy_s, tvms_s in mlp_rows(default_mlp(), args.batches, args.repeat):
        out["rows"][label] = {"numpy": numpy_s, "tvms": tvms_s}
    return out


def thread_scaling(call, threads: int, repeat: int) -> float:
    """Seconds at 1 thread over seconds at ``threads``, from calls alternating between the two
    (TVM_NUM_THREADS is read at each call), so a change of load touches both alike."""
    from matmul_cpu import interleaved_medians

    def at(count: int):
        def run() -> None:
            os.environ["TVM_NUM_THREADS"] = str(count)
            call()
        return run

    medians = interleaved_medians({1: at(1), threads: at(threads)}, repeat)
    os.environ["TVM_NUM_THREADS"] = str(threads)
    return medians[1] / medians[threads]


def fma_peak(threads: int, repeat: int) -> tuple:
    """GFLOPS of ``threads`` threads of independent FMA chains (``matmul_cpu``'s peak kernel), and
    its speed-up over one thread when ``threads`` > 1."""
    from matmul_cpu import fma_peak_kernel

    lib, args, flops = fma_peak_kernel(threads)  # (the best of the repeats: a peak is what the core can do)
    peak = flops / lib.time_evaluator("main", number=1, repeat=max(20, repeat))(*args).min / 1e9  # (~4 ms a call)
    # how much faster its tasks run on all threads than on one, now: the ceiling of any scaling
    scaling = thread_scaling(lambda: lib(*args), threads, repeat) if threads > 1 else None
    return peak, scaling


def run_worker(threads: int, argv: list) -> dict:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", *argv],
                          capture_output=True, text=True, env=env, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"worker ({threads} threads) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def tvm_json(python: str, script: str, *argv: object, threads: int | None = None) -> dict:
    """The JSON a TVM-side script prints, or {} (with a note) when it fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if threads:
        env["TVM_NUM_THREADS"] = str(threads)
    done = subprocess.run([python, str(HERE / script), *map(str, argv)], capture_output=True, text=True,
                          cwd=HERE, env=env)
    if done.returncode != 0:
        print(f"Apache TVM run of {script} failed: {(done.stderr or done.stdout).strip()[-300:]}")
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine(peak_1: float) -> list[str]:
    """CPU, cores, vector flags, clocks, numpy's BLAS."""
    from cpu_e2e import numpy_blas
    from parse_print import cpu_model

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    mhz = next((float(line.split(":", 1)[1]) for line in info.splitlines() if line.startswith("cpu MHz")), 0.0)
    vector = " ".join(f for f in flags if f.startswith(("avx", "fma"))) or "no AVX"
    lanes = 16 if "avx512f" in flags else 8  # fp32 lanes of the widest FMA
    return [f"machine: {cpu_model()}, {os.cpu_count()} cores, {vector}; numpy {np.__version__} with {numpy_blas()}",
            f"clock: {mhz / 1e3:.2f} GHz by /proc/cpuinfo; {peak_1 / (4 * lanes):.2f} GHz by a timing loop (the "
            f"measured 1-thread FMA peak, {peak_1:.1f} GFLOPS, over 2 FMA pipes x {lanes} lanes x 2 flops per cycle)"]


def work(label: str, args: argparse.Namespace) -> tuple:
    """(amount, unit) of a row: bytes moved for the memory-bound ones, flops for matmul."""
    if label == "add":
        return 12.0 * args.n, "GB/s"
    if label in ("softmax", "layer_norm", "gelu"):
        return 8.0 * args.rows * args.cols, "GB/s"
    if label.startswith("matmul"):
        return 2.0 * int(label.split()[1]) ** 3, "GFLOPS"
    if label == "conv2d":
        channels, size = args.conv
        return 2.0 * channels * channels * 9 * size * size, "GFLOPS"
    return 0.0, ""


def cells(seconds: float | None, amount: float) -> str:
    if not seconds:
        return f"{'':>9} {'':>8}"
    return f"{seconds * 1e3:9.3f} " + (f"{amount / seconds / 1e9:8.1f}" if amount else f"{'':>8}")


def ratio(theirs: float | None, ours: float | None) -> str:
    return f"{theirs / ours:7.2f}x" if theirs and ours else f"{'':>8}"


def copy_fraction(row: dict, args: argparse.Namespace) -> float:
    """The add's bandwidth over np.copyto's (both as bytes moved per second)."""
    return (12.0 * args.n / row["tvms"]) / (8.0 * args.n / row["copy"])


def render(run: dict, args: argparse.Namespace, tvm: dict, hand: dict) -> list[str]:
    """One thread count's table; rates are GB/s (add, softmax, layer norm) or GFLOPS (matmul)."""
    peak = run["peak_gflops"]
    scaling = f" ({run['peak_scaling']:.2f}x vs 1 thread: the ceiling of this table's scaling)" \
        if run.get("peak_scaling") else ""
    lines = [f"\n{run['threads']} thread(s); FMA peak measured {peak:.1f} GFLOPS{scaling}",
             f"{'workload':16} {'numpy ms':>9} {'rate':>8} {'tvms ms':>9} {'rate':>8} {'vs numpy':>8} "
             f"{'note':>31} {'TVM ms':>9} {'vs TVM':>8}"]
    if run["threads"] > 1:
        lines.insert(1, f"(numpy's {', '.join(NUMPY_ONE_THREAD)} run on one thread: numpy's exp, sum and var "
                        "are not threaded, whatever OPENBLAS_NUM_THREADS says)")
    for label, row in run["rows"].items():
        if "error" in row:
            lines.append(f"{label:16} tvms default schedule not available: {row['error']}")
            continue
        amount, unit = work(label, args)
        note = ""
        if label == "add":
            note = f"{100 * copy_fraction(row, args):.0f}% of copy"
        elif unit == "GFLOPS":
            note = f"{100 * amount / row['tvms'] / 1e9 / peak:.0f}% of peak"
        if "scaling" in row:
            note += f", {row['scaling']:.2f}x vs 1 thread"
        theirs = tvm.get(label)
        tvm_ms = f"{theirs * 1e3:9.3f}" if theirs else f"{'':>9}"
        lines.append(f"{label:16} {cells(row['numpy'], amount)} {cells(row['tvms'], amount)} "
                     f"{ratio(row['numpy'], row['tvms'])} {note:>31} {tvm_ms} {ratio(theirs, row['tvms'])}")
        if label == "add":
            lines.append(f"{'  np.copyto':16} {cells(row['copy'], 8.0 * args.n)}")
        best = best_hand(hand, label)
        if best:
            gflops = f"{amount / best / 1e9:.1f} GFLOPS"
            lines.append(f"{'  TVM best hand':16} {'':>9} {'':>8} {'':>9} {'':>8} {'':>8} {gflops:>31} "
                         f"{best * 1e3:9.3f} {ratio(best, row['tvms'])}")
    return lines


def best_hand(hand: dict, label: str) -> float | None:
    """The least seconds of TVM's hand matmul schedules for a ``matmul N`` row."""
    if not label.startswith("matmul"):
        return None
    return min(hand.get(label.split()[1], {}).values(), default=None)


def goal(text: str, figure: str, met: bool | None) -> str:
    return f"goal: {text}: {figure} ({'met' if met else 'not met' if met is not None else 'not measured'})"


def goals(runs: dict, args: argparse.Namespace, hand: dict) -> list[str]:
    """The issue's goals, each with its figure: reached or not."""
    one, most = runs[1]["rows"], runs[max(runs)]["rows"]  # (1 thread, all threads)
    label = f"matmul {GOAL_MATMUL}"
    out = []
    mm = one.get(label, {})
    if "tvms" in mm:
        share = mm["numpy"] / mm["tvms"]
        out.append(goal(f"{label} >= 90% of numpy on 1 thread", f"{100 * share:.0f}%", share >= 0.9))
        best = best_hand(hand.get(1, {}), label)
        out.append(goal(f"{label} ahead of TVM's best hand schedule (1 thread)",
                        f"{best / mm['tvms']:.2f}x its speed" if best else "TVM not run", best and best > mm["tvms"]))
        if "scaling" in most.get(label, {}):
            scale = most[label]["scaling"]
            ceiling = runs[max(runs)]["peak_scaling"]
            out.append(goal(f"{label} 1 -> {max(runs)} threads >= 1.7x (calls alternating in one process)",
                            f"{scale:.2f}x; the FMA peak kernel's own: {ceiling:.2f}x", scale >= 1.7))
    else:
        out.append(goal(f"{label}", "no default-scheduled matmul of that size in this run", None))
    for threads, run in sorted(runs.items()):  # (numpy's BLAS threads behave differently: both)
        for batch in args.batches:
            row = run["rows"].get(f"mlp batch {batch}")
            if row:
                slower = row["tvms"] / row["numpy"]
                out.append(goal(f"MLP batch {batch} within 1.5x of numpy ({threads} thread(s))",
                                f"{slower:.2f}x numpy's time", slower <= 1.5))
        add = run["rows"].get("add", {})
        if "tvms" in add:
            share = copy_fraction(add, args)
            out.append(goal(f"add >= 90% of np.copyto's bandwidth ({threads} thread(s))", f"{100 * share:.0f}%",
                            share >= 0.9))
    return out


def goals_17(runs: dict, args: argparse.Namespace, start: dict) -> list[str]:
    """Issue 17's goals, each a ratio from this run (numpy's time over tvms's unless said)."""
    one, most, threads = runs[1]["rows"], runs[max(runs)]["rows"], max(runs)
    out = []
    for n in (1024, 2048):
        row = one.get(f"matmul {n}", {})
        if "tvms" in row:
            speed = row["numpy"] / row["tvms"]
            out.append(goal(f"matmul {n} on 1 thread >= 1.0x numpy", f"{speed:.2f}x", speed >= 1.0))
        scale = most.get(f"matmul {n}", {}).get("scaling")
        if scale:
            out.append(goal(f"matmul {n} on {threads} threads >= 1.8x tvms's 1-thread speed (calls alternating)",
                            f"{scale:.2f}x; the FMA peak kernel's own: {runs[threads]['peak_scaling']:.2f}x",
                            scale >= 1.8))
    shape = f"{args.rows}x{args.cols}"
    for count, run in sorted(runs.items()):
        for label in [f"mlp batch {b}" for b in (1, 64) if b in args.batches] + list(NUMPY_ONE_THREAD):
            row = run["rows"].get(label, {})
            what = label.replace("mlp", "MLP") if label.startswith("mlp") else f"{label} {shape}"
            if "tvms" not in row:
                continue
            speed = row["numpy"] / row["tvms"]
            if count > 1 and label in NUMPY_ONE_THREAD:  # (numpy is on one thread still: no goal)
                out.append(f"info: {what} {speed:.2f}x numpy ({count} thread(s) against numpy's one)")
            else:
                out.append(goal(f"{what} >= 1.0x numpy ({count} thread(s))", f"{speed:.2f}x", speed >= 1.0))
    return out + startup_goals(start)


def startup_goals(start: dict) -> list[str]:
    """Issue 17's goals of compile and import time, each as a share of its limit."""
    out = []
    for key, text, limit in (("cold", "cold compile of the MLP <= 1 s", 1.0),
                             ("cached", "cached compile of the MLP <= 50 ms", 0.05),
                             ("import", "import tvms <= 0.25 s", 0.25)):
        seconds = start[key]
        out.append(goal(text, f"{seconds * 1e3:.1f} ms, {seconds / limit:.2f}x the limit", seconds <= limit))
    return out


# a fresh process's seconds of `import tvms`, the MLP's compile + VM, the same again (from a fresh
# parse), and of all its work up to the first VM (import, parse, compile: imports left for first use
# move between the three)
COMPILE = """
import sys, time
begin = time.perf_counter()
import tvms
imported = time.perf_counter() - begin
from tvms.script import from_source
text = open(sys.argv[1]).read()

def seconds_to_vm(module):
    start = time.perf_counter()
    tvms.relax.VirtualMachine(tvms.compile(module, target="llvm"), tvms.cpu())
    return time.perf_counter() - start

cold = seconds_to_vm(from_source(text))
total = time.perf_counter() - begin
print(imported, cold, seconds_to_vm(from_source(text)), total)
"""
IMPORT = "import time; start = time.perf_counter(); import {}; print(time.perf_counter() - start)"


def fresh_seconds(python: str, code: str, *argv: str, **env: str) -> list[float]:
    """The seconds a fresh ``python -c code`` prints. Bytecode is cached (``PYTHONDONTWRITEBYTECODE``
    dropped; ``env`` may give ``PYTHONPYCACHEPREFIX``, tvms's), as after an install: otherwise every
    import compiles its module's source again, which is most of an import's time."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
    environ = {k: v for k, v in os.environ.items() if k not in drop} | env
    done = subprocess.run([python, "-c", code, *argv], env=environ, capture_output=True, text=True, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"{python} -c {code.strip()[:60]!r}... failed:\n{done.stderr}")
    return [float(v) for v in done.stdout.split()]


def startup(repeat: int, tvm_python: str | None) -> dict:
    """Median seconds over ``repeat`` rounds of fresh processes, one of each kind per round (so a
    change of load touches all alike): ``import tvms`` and the MLP's compile with no cache (the
    object cache off: ``TVMS_CACHE_DIR=""``), then again in that process, and that process's time
    from ``import tvms`` to its first VM (the imports, the parse, the compile); the same compile in a
    new process whose kernels come from the on-disk cache (filled before the rounds); ``import
    numpy``; ``import tvm`` in TVM's Python. tvms's bytecode is cached in a temporary folder, which
    the process filling the disk cache fills too; numpy and TVM import without that prefix, from the
    bytecode in their installs' ``__pycache__`` (with the prefix, each of their rows would be the
    compilation of all their modules' sources)."""
    rounds: dict = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pycache:
        mlp, warm = str(MLP_PATH), {"PYTHONPYCACHEPREFIX": pycache}
        fresh_seconds(sys.executable, COMPILE, mlp, TVMS_CACHE_DIR=cache, **warm)  # fills both caches
        for _ in range(repeat):
            figures = dict(zip(("import", "cold", "cached", "first VM"),
                               fresh_seconds(sys.executable, COMPILE, mlp, TVMS_CACHE_DIR="", **warm)))
            figures["disk"] = fresh_seconds(sys.executable, COMPILE, mlp, TVMS_CACHE_DIR=cache, **warm)[1]
            figures["import numpy"] = fresh_seconds(sys.executable, IMPORT.format("numpy"))[0]
            if tvm_python:
                figures["import tvm"] = fresh_seconds(tvm_python, IMPORT.format("tvm"))[0]
            for key, value in figures.items():
                rounds.setdefault(key, []).append(value)
    return {key: float(np.median(values)) for key, values in rounds.items()}


def render_startup(start: dict, tvm: dict, repeat: int) -> list[str]:
    """The compile and import rows: seconds, with ratios where numpy or TVM has a counterpart."""
    def seconds(value: float | None) -> str:
        return f"{value:9.4f}" if value is not None else f"{'':>9}"

    rows = [("import tvms (numpy: import numpy)", start["import"], start["import numpy"], start.get("import tvm")),
            ("mlp compile + VM, cold (no cache)", start["cold"], None, tvm.get("mlp compile")),
            ("  + import tvms and parse", start["first VM"], None, None),
            ("mlp compile + VM, cached", start["cached"], None, None),
            ("mlp compile + VM, new process (disk)", start["disk"], None, None)]
    lines = [f"\ncompile and import, seconds in fresh processes with bytecode cached, median of {repeat} "
             f"(TVM's compile: zero pipeline + tvm.compile + VM, in its benchmark process)",
             f"{'':38} {'tvms s':>9} {'numpy s':>9} {'vs numpy':>8} {'TVM s':>9} {'vs TVM':>8}"]
    for label, ours, numpy_s, tvm_s in rows:
        lines.append(f"{label:38} {seconds(ours)} {seconds(numpy_s)} {ratio(numpy_s, ours)} "
                     f"{seconds(tvm_s)} {ratio(tvm_s, ours)}".rstrip())
    return lines


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024, help="floats per add array")
    parser.add_argument("--rows", type=int, default=4096, help="rows of softmax, layer norm and GELU")
    parser.add_argument("--cols", type=int, default=1024, help="columns of softmax, layer norm and GELU")
    parser.add_argument("--sizes", default="512,1024,2048", help="matmul sizes, comma-separated")
    parser.add_argument("--conv", default="64,56", help="C,H of the 3x3 convolution: 1xCxHxH, C filters")
    parser.add_argument("--batches", default="1,16,64", help="MLP batch sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, no TVM")
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM's columns")
    parser.add_argument("--tvm-python", help="Python with Apache TVM 0.27 (default as parse_print.py)")
    parser.add_argument("--cold", type=int, metavar="N", default=0,
                        help="only the compile and import rows: the median of N rounds of fresh processes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.rows, args.cols, args.sizes, args.conv, args.batches, args.repeat, args.no_tvm = (
            1 << 16, 64, 128, "64", "8,14", "1,4", 1, True)
    argv = ["--n", str(args.n), "--rows", str(args.rows), "--cols", str(args.cols), "--sizes", args.sizes,
            "--conv", args.conv, "--batches", args.batches, "--repeat", str(args.repeat)]
    args.sizes = [int(v) for v in args.sizes.split(",") if v]
    args.conv = tuple(int(v) for v in args.conv.split(","))
    args.batches = [int(v) for v in args.batches.split(",") if v]
    if args.worker:
        print(json.dumps(worker(args)))
        return
    from parse_print import find_tvm_python, load_average

    tvm_python = None if args.no_tvm else find_tvm_python(args.tvm_python)
    if args.cold:
        print(f"load average {load_average()}")
        start = startup(args.cold, tvm_python)
        print("\n".join(render_startup(start, {}, args.cold) + [""] + startup_goals(start)))
        return
    before = load_average()
    runs = {threads: run_worker(threads, argv) for threads in sorted({1, os.cpu_count() or 1})}
    start = startup(args.repeat, tvm_python)
    tvm, hand = {}, {}
    if tvm_python:  # TVM's zero pipeline leaves kernels single-threaded; the 2048 one would take minutes
        tvm = tvm_json(tvm_python, "cpu_default_tvm.py", args.n, args.rows, args.cols,
                       ",".join(str(n) for n in args.sizes if n <= GOAL_MATMUL), ",".join(map(str, args.conv)),
                       args.repeat, MLP_PATH, ",".join(map(str, args.batches)))
        hand = {threads: {str(n): tvm_json(tvm_python, "matmul_cpu_tvm.py", n, args.repeat, threads=threads)
                          for n in args.sizes if n <= GOAL_MATMUL} for threads in runs}
    channels, size = args.conv
    print(f"tvms default schedules on CPU, median of {args.repeat}: add {args.n:,} fp32, softmax, layer norm and "
          f"GELU {args.rows}x{args.cols}, matmul {args.sizes}, conv2d 3x3 1x{channels}x{size}x{size} by "
          f"{channels} filters, MLP batch {args.batches}"
          + (f"; Apache TVM {tvm['version']} (zero pipeline)" if tvm else " (no Apache TVM columns)"))
    print("\n".join(machine(runs[1]["peak_gflops"])))
    print(f"numpy's GELU: {numpy_gelu_name()}; numpy's conv2d: im2col (a strided view copied) + one matmul")
    print(f"load average {before} before / {load_average()} after")
    for threads in sorted(runs):
        print("\n".join(line.rstrip() for line in render(runs[threads], args, tvm, hand.get(threads, {}))))
    print("\n".join(render_startup(start, tvm, args.repeat)))
    print()
    print("\n".join(goals(runs, args, hand)))
    print("\n".join(goals_17(runs, args, start)))


if __name__ == "__main__":
    main()
