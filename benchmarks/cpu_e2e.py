"""End-to-end CPU figures of tvms, side by side in one run: an elementwise add in GB/s, the MLP
example through the Relax VM, and compile times, beside numpy and Apache TVM 0.27.

    .venv/bin/python benchmarks/cpu_e2e.py              # 16M floats, MLP at batch 1 and 64
    .venv/bin/python benchmarks/cpu_e2e.py --quick      # small sizes, 1 repeat, no TVM

* add: ``tvms.build`` of the TensorIR add of ``cpu_e2e_kernels.py``, unscheduled and scheduled
  (``T.parallel`` outer, ``T.vectorized`` inner), beside ``np.add(a, b, out=c)`` and ``np.copyto``
  (a memcpy-like baseline). GB/s are bytes moved over the median time: 3 arrays x 4 bytes x N for
  an add, 2 x 4 x N for the copy.
* MLP: ``examples/mlp.tvms`` (784-256-10) through ``tvms.compile`` + ``relax.VirtualMachine``,
  beside numpy (``relu(x @ w1.T + b1) @ w2.T + b2``); results are checked against numpy first.
  "in kernels" is the CPU time of this thread in the kernels' native code (the compiled VM: its
  kernels' entries replayed alone; the interpreter: the entries timed one by one during VM
  calls); "the VM's own work" is the rest of the VM call's CPU time.
* VM overhead: a chain of ten tiny kernels through the VM beside the same native calls, in CPU
  time of the thread, per kernel call; and a checked ``lib[name](a, b)`` call beside its entry.
* compile: the first ``tvms.compile`` of the MLP in this process (with an empty on-disk kernel
  cache), then a compile of a freshly parsed, unchanged copy (``tvms.compile``'s content-addressed
  cache returns the same executable), then one in a new process (the zero pipeline runs again; the
  kernels' object code comes from the on-disk cache the first compile wrote).

With Apache TVM found (``--tvm-python``, else as ``parse_print.py`` finds it) the same add texts
and the MLP (zero pipeline + ``tvm.compile`` + VM) run in TVM's Python (``cpu_e2e_tvm.py``). The
"vs" columns are the other side's time over tvms's (above 1: tvms is faster).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvms
from cpu_e2e_kernels import ADD_SCHEDULES, CHUNK, add_text, chain_text
from parse_print import cpu_model, find_tvm_python, load_average
from vm_native import replay_kernels
from tvms.script import from_source

MLP_PATH = Path(__file__).resolve().parent.parent / "examples" / "mlp.tvms"
WEIGHT_SHAPES = [(256, 784), (256,), (10, 256), (10,)]


def warm_up(fn, seconds: float = 0.2) -> None:
    """Call ``fn`` for about ``seconds`` (at least once). After a pause, an idle core wakes slowly:
    a 2-thread MLP call at batch 64 took 0.25 ms for its first ~400 calls after a 1 s sleep and
    0.17 ms after them, so a short measurement right after a pause timed the wake-up."""
    end = time.perf_counter() + seconds
    fn()
    while time.perf_counter() < end:
        fn()


def per_call_seconds(fn, number: int, repeat: int, clock=time.perf_counter) -> float:
    """Median over ``repeat`` runs of the seconds per call of ``number`` calls, after a warm-up."""
    warm_up(fn)
    times = []
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        times.append((clock() - start) / number)
    return float(np.median(times))


def numpy_blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # (older numpy has no dict mode; the name is only descriptive)
        return "unknown BLAS"


def measure_tvm(python: str, n: int, batches: list[int], repeat: int) -> dict:
    """Median seconds per label of Apache TVM's side, from a subprocess in its Python."""
    script = Path(__file__).with_name("cpu_e2e_tvm.py")
    done = subprocess.run([python, str(script), str(n), ",".join(map(str, batches)), str(repeat), str(MLP_PATH)],
                          capture_output=True, text=True, cwd=script.parent)
    if done.returncode != 0:
        print(f"Apache TVM run failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-400:]}")
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_rows(n: int, repeat: int) -> list[tuple]:
    """(label, seconds, bytes moved) of numpy's add and copy and of each tvms add schedule."""
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    add_bytes = 3 * 4 * n
    rows = [("add numpy np.add(out=)", per_call_seconds(lambda: np.add(a, b, out=c), 1, repeat), add_bytes),
            ("add numpy np.copyto (copy)", per_call_seconds(lambda: np.copyto(c, a), 1, repeat), 2 * 4 * n)]
    for label, template in ADD_SCHEDULES.items():
        lib = tvms.build(from_source(add_text(template, n))["main"], target="llvm")
        c[...] = 0
        lib(a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)
        timing = lib.time_evaluator("main", number=1, repeat=repeat)(a, b, c)
        rows.append((f"add tvms {label}", timing.median, add_bytes))
    return rows


_COMPILE_IN_NEW_PROCESS = """
import sys, time
import tvms
from tvms.script import from_source
module = from_source(open(sys.argv[1]).read())
start = time.perf_counter()
tvms.compile(module, target="llvm")
print(time.perf_counter() - start)
"""


def compile_mlp() -> tuple:
    """The MLP's VM and the seconds of its first compile (with an empty on-disk kernel cache),
    of a compile of an unchanged copy in this process, and of one in a new process (its
    kernels' object code from the on-disk cache)."""
    text = MLP_PATH.read_text()
    module, copy = from_source(text), from_source(text)
    saved = os.environ.get("TVMS_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TVMS_CACHE_DIR"] = cache
        try:
            start = time.perf_counter()
            executable = tvms.compile(module, target="llvm")
            first_s = time.perf_counter() - start
            start = time.perf_counter()
            tvms.compile(copy, target="llvm")
            again_s = time.perf_counter() - start
            done = subprocess.run([sys.executable, "-c", _COMPILE_IN_NEW_PROCESS, str(MLP_PATH)],
                                  capture_output=True, text=True, check=True)
            new_process_s = float(done.stdout.strip().splitlines()[-1])
        finally:
            if saved is None:
                os.environ.pop("TVMS_CACHE_DIR", None)
            else:
                os.environ["TVMS_CACHE_DIR"] = saved
    return tvms.relax.VirtualMachine(executable, tvms.cpu()), (first_s, again_s, new_process_s)


class _TimedKernel:
    """A compiled kernel that adds the CPU time spent in its native code to ``inside[0]`` (the
    slots are filled outside the timed span: that is the VM's work)."""

    def __init__(self, function, inside: list) -> None:
        self.function, self.inside = function, inside

    def run(self, values: list) -> None:
        self._enter(self.function._slots(values))

    def __call__(self, *args) -> None:
        self._enter(self.function.pack(args))

    def _enter(self, slots) -> None:
        address, compiled = ctypes.addressof(slots), self.function.compiled
        if compiled.num_threads_address:  # (as the kernel's own call sets it)
            ctypes.c_int32.from_address(compiled.num_threads_address).value = compiled.target.threads
        start = time.thread_time()
        self.function._entry(address)
        self.inside[0] += time.thread_time() - start


def vm_beyond_kernels(executable, name: str, args: list, number: int, repeat: int) -> tuple:
    """(CPU seconds per call in the kernels' native code, CPU seconds of the VM's own work), of
    a VM over the same kernels with their native calls timed: CPU time of this thread, which
    other processes on the machine disturb less than the wall clock. A function compiled to
    native code (the compiled VM) is timed whole, beside its kernels' entries replayed."""
    if name in executable.stats()["native"]:
        vm_call = tvms.relax.VirtualMachine(executable, tvms.cpu())[name]
        alone = replay_kernels(executable, name, args)
        splits = [(per_call_seconds(alone, number, 1, time.thread_time),
                   per_call_seconds(lambda: vm_call(*args), number, 1, time.thread_time)) for _ in range(repeat)]
        return tuple(float(np.median(column)) for column in zip(*[(k, total - k) for k, total in splits]))
    inside = [0.0]
    kernels = executable.kernels()
    timed = tvms.runtime.vm.Executable(executable.program, tvms.runtime.module.Module(
        {k: _TimedKernel(f, inside) for k, f in kernels.functions.items()}, kernels.target))
    vm = tvms.relax.VirtualMachine(timed, tvms.cpu())
    vm[name](*args)
    splits = []
    for _ in range(repeat):
        inside[0] = 0.0
        start = time.thread_time()
        for _ in range(number):
            vm[name](*args)
        total = time.thread_time() - start
        splits.append((inside[0] / number, (total - inside[0]) / number))
    return tuple(float(np.median(column)) for column in zip(*splits))


CHAIN = 10


def vm_overhead_seconds(repeat: int) -> tuple:
    """The VM's own seconds per kernel call, over a chain of CHAIN tiny kernels, and the
    checked call's (``lib[name](...)``) beyond the native entry, both in CPU time."""
    executable = tvms.compile(from_source(chain_text(CHAIN)), target="llvm")
    x = tvms.nd.array(np.zeros((1, 16), np.float32))
    _, beyond_s = vm_beyond_kernels(executable, "main", [x], 200, repeat)
    kernel = executable.kernels()["add_one"]
    a, b = np.zeros((1, 16), np.float32), np.zeros((1, 16), np.float32)
    entry, slots = kernel._entry, kernel.pack((a, b))
    address = ctypes.addressof(slots)
    checked_s = per_call_seconds(lambda: kernel(a, b), 200, repeat, time.thread_time)
    native_s = per_call_seconds(lambda: entry(address), 200, repeat, time.thread_time)
    return beyond_s / CHAIN, checked_s - native_s


def mlp_kernel_seconds(vm, batches: list[int], repeat: int) -> dict:
    """Per MLP row label, the CPU seconds in the VM's kernels and of the VM's own work."""
    rng = np.random.default_rng(0)
    seconds = {}
    for batch in batches:
        args = [tvms.nd.array(rng.standard_normal(s, dtype=np.float32))
                for s in [(batch, 784), *WEIGHT_SHAPES]]
        seconds[f"mlp batch {batch}"] = vm_beyond_kernels(vm.executable, "forward", args, 10, repeat)
    return seconds


def mlp_rows(vm, batches: list[int], repeat: int) -> list[tuple]:
    """(label, numpy seconds, tvms seconds) per batch, after checking the VM against numpy."""
    rng = np.random.default_rng(0)
    w1, b1, w2, b2 = (rng.standard_normal(s, dtype=np.float32) for s in WEIGHT_SHAPES)

    def forward_numpy(x: np.ndarray) -> np.ndarray:
        return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2

    rows = []
    for batch in batches:
        x = rng.standard_normal((batch, 784), dtype=np.float32)
        args = [tvms.nd.array(v) for v in (x, w1, b1, w2, b2)]
        np.testing.assert_allclose(vm["forward"](*args).numpy(), forward_numpy(x), rtol=1e-3, atol=1e-3)
        numpy_s = per_call_seconds(lambda: forward_numpy(x), 10, repeat)
        time.sleep(0.3)  # OpenBLAS's threads spin on the other cores for a while after a call
        warm_up(lambda: vm["forward"](*args))
        tvms_s = vm.time_evaluator("forward", number=10, repeat=repeat)(*args).median
        rows.append((f"mlp batch {batch}", numpy_s, tvms_s))
    return rows


def ratio(theirs: float | None, ours: float) -> str:
    return f"{theirs / ours:7.2f}x" if theirs else ""


def render(add: list[tuple], mlp: list[tuple], kernels: dict, overhead: tuple, compiles: tuple,
           theirs: dict) -> list[str]:
    lines = [f"{'':34} {'ms':>9} {'GB/s':>7} {'vs numpy':>9} {'TVM ms':>9} {'TVM GB/s':>9} {'vs TVM':>8}"]
    numpy_add_s = add[0][1]
    for label, seconds, moved in add:
        tvm_s = theirs.get(label.replace("add tvms ", "add "), None) if label.startswith("add tvms") else None
        tvm_cells = f"{tvm_s * 1e3:9.3f} {moved / tvm_s / 1e9:9.2f} {ratio(tvm_s, seconds):>8}" if tvm_s else ""
        lines.append(f"{label:34} {seconds * 1e3:9.3f} {moved / seconds / 1e9:7.2f} "
                     f"{ratio(numpy_add_s, seconds):>9} {tvm_cells}")
    for label, numpy_s, tvms_s in mlp:
        tvm_s, (kernels_s, beyond_s) = theirs.get(label), kernels[label]
        lines.append(f"{label + ' numpy':34} {numpy_s * 1e3:9.3f} {'':7} {ratio(numpy_s, numpy_s):>9}")
        lines.append(f"{label + ' tvms VM':34} {tvms_s * 1e3:9.3f} {'':7} {ratio(numpy_s, tvms_s):>9} "
                     + (f"{tvm_s * 1e3:9.3f} {'':9} {ratio(tvm_s, tvms_s):>8}" if tvm_s else ""))
        lines.append(f"{label + ' tvms VM: in kernels':34} {kernels_s * 1e3:9.3f} {'':7} {'':9}   "
                     f"(CPU time; the VM's own work: {beyond_s * 1e3:.3f} ms)")
    vm_per_kernel_s, checked_s = overhead
    lines.append(f"VM overhead per kernel call (a chain of {CHAIN} tiny kernels, CPU time): "
                 f"{vm_per_kernel_s * 1e6:.1f} us; a checked lib[name](...) call beyond the native "
                 f"entry: {checked_s * 1e6:.1f} us")
    first_s, again_s, new_process_s = compiles
    tvm_s = theirs.get("mlp compile")
    lines.append(f"{'compile mlp, first':34} {first_s * 1e3:9.1f} {'':7} {'':9} "
                 + (f"{tvm_s * 1e3:9.1f} {'':9} {ratio(tvm_s, first_s):>8}" if tvm_s else ""))
    lines.append(f"{'compile mlp, unchanged (cache)':34} {again_s * 1e3:9.1f} {'':7} {'':9} "
                 f"{'':9} {'':9} {ratio(tvm_s, again_s):>8}")
    lines.append(f"{'compile mlp, new process (disk)':34} {new_process_s * 1e3:9.1f} {'':7} {'':9} "
                 f"{'':9} {'':9} {ratio(tvm_s, new_process_s):>8}")
    lines.append(f"repeated compile: {first_s / again_s:.1f}x faster than the first in the same process, "
                 f"{first_s / new_process_s:.1f}x in a new process")
    return lines


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024, help="floats per add array")
    parser.add_argument("--batches", default="1,64", help="MLP batch sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, no TVM")
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM's columns")
    parser.add_argument("--tvm-python", help="Python with Apache TVM 0.27 (default as parse_print.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.batches, args.repeat, args.no_tvm = 16 * CHUNK, "1,4", 1, True
    batches = [int(b) for b in args.batches.split(",")]
    load_before = load_average()
    # the compile comes first, so its "first" is this process's first build of the MLP's kernels
    vm, compiles = compile_mlp()
    add = add_rows(args.n, args.repeat)
    mlp = mlp_rows(vm, batches, args.repeat)
    kernels = mlp_kernel_seconds(vm, batches, args.repeat)
    overhead = vm_overhead_seconds(max(args.repeat, 3))
    tvm_python = None if args.no_tvm else find_tvm_python(args.tvm_python)
    theirs = measure_tvm(tvm_python, args.n, batches, args.repeat) if tvm_python else {}
    print(f"tvms CPU end to end: add of N={args.n:,} float32, MLP 784-256-10, median of {args.repeat}"
          + ("" if theirs else " (no Apache TVM columns)"))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, numpy {np.__version__} with {numpy_blas()}, "
          f"load average {load_before} before / {load_average()} after"
          + (f"; Apache TVM {theirs['version']}" if theirs else ""))
    print("\n".join(line.rstrip() for line in render(add, mlp, kernels, overhead, compiles, theirs)))


if __name__ == "__main__":
    main()
