"""The compiled VM's own cost: the seed MLP (``examples/mlp.tvms``, 784-256-10) per
``vm["forward"](...)`` call in the compiled mode (one native call) and the bytecode mode (the
interpreter), beside its kernels' entries called back to back with the slots one call packed (the floor:
the kernels alone, ``replay_kernels``) and numpy, interleaved in one process, median of the repeats.
The lifted row is the same MLP as the seed's flow lowers it (zero pipeline, default schedules:
the weight transposes are kernels of their own), compiled with ``num_input=1``: ``tvms.compile``
lifts the transposes into ``forward_transform_params``, and a call with the weights of the
previous call runs ``forward_lifted`` on the cached transposes (``runtime/param_cache.py``);
its floor is the kernels of ``forward_lifted``.

    .venv/bin/python benchmarks/vm_native.py               # batch 1 and 64
    .venv/bin/python benchmarks/vm_native.py --repeat 5    # quicker

"beyond kernels" is what a mode adds per call to the kernels alone (argument checks, the
output's allocation, the Tensor wrapped around it, in Python and native code), measured in pairs:
the kernels alone then the mode, alternating, so both see the same caches and load; median of
the differences, in wall-clock time and in CPU time of this thread (which other processes on a
loaded machine disturb less). At batch 1 only: at batch 64 the kernels run on the thread pool.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import time
from pathlib import Path

import numpy as np

import tvms
from tvms.script import from_source

MLP_PATH = Path(__file__).resolve().parent.parent / "examples" / "mlp.tvms"
WEIGHT_SHAPES = [(256, 784), (256,), (10, 256), (10,)]


class _Recorder:
    """A kernel that runs and records each call: its entry and packed slots, and the arrays
    whose addresses the slots hold (kept alive for the replay)."""

    def __init__(self, function, calls: list) -> None:
        self.function, self.calls = function, calls

    def run(self, values: list) -> None:
        slots = self.function._slots(values)
        self.calls.append((self.function, slots, list(values)))
        self.function.run(values)

    def __call__(self, *args) -> None:
        self.run(self.function.checked(args))


def replay_kernels(executable, name: str, args: list):
    """A function that calls the kernel entries of one ``name`` call, in order, with the slots
    that call packed: the kernels alone, with nothing of the VM around them."""
    calls: list = []
    kernels = executable.kernels()
    recording = tvms.runtime.vm.Executable(executable.program, tvms.runtime.module.Module(
        {k: _Recorder(f, calls) for k, f in kernels.functions.items()}, kernels.target))
    tvms.relax.VirtualMachine(recording, tvms.cpu())[name](*args)
    steps = []
    for function, slots, _ in calls:
        threads = function.compiled.num_threads_address
        if threads:  # (as each call of the kernel sets it)
            ctypes.c_int32.from_address(threads).value = function.compiled.target.threads
        steps.append((function._entry, ctypes.addressof(slots)))

    def run() -> None:
        for entry, address in steps:
            entry(address)
    run.keep = calls  # (the slots hold addresses only)
    return run


def timed(fn, number: int, clock=time.perf_counter) -> float:
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


def beyond_kernels(fn, alone, repeat: int, number: int = 500) -> tuple:
    """(wall, CPU) seconds per call of ``fn`` beyond ``alone``'s, medians of paired runs."""
    pairs = [[timed(f, number, clock) for clock in (time.perf_counter, time.thread_time) for f in (alone, fn)]
             for _ in range(repeat)]
    return (float(np.median([p[1] - p[0] for p in pairs])), float(np.median([p[3] - p[2] for p in pairs])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--batches", default="1,64")
    args = parser.parse_args()
    module = from_source(MLP_PATH.read_text())
    compiled = tvms.compile(module, target="llvm")
    bytecode = tvms.compile(module, target="llvm", exec_mode="bytecode")
    assert compiled.stats()["native"] == ["forward"], compiled.stats()
    with tvms.target.Target("llvm"):  # (the seed's flow: transposes of their own, lifted)
        lifted = tvms.compile(tvms.transform.Sequential([
            tvms.relax.get_pipeline("zero"), tvms.dlight.ApplyDefaultSchedule(*tvms.dlight.cpu.default_rules())])(module),
            target="llvm")
    assert set(lifted.lifted_params) == {"forward"}, "the seed flow's MLP lifts nothing"
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s, dtype=np.float32) for s in WEIGHT_SHAPES]
    print(f"seed MLP 784-256-10 per call, median of {args.repeat} interleaved repeats; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'':34} {'us':>9} {'vs numpy':>9} {'beyond kernels us (wall, CPU)':>30}")
    for batch in map(int, args.batches.split(",")):
        x = rng.standard_normal((batch, 784), dtype=np.float32)
        inputs = [tvms.nd.array(v) for v in (x, *weights)]
        w1, b1, w2, b2 = weights
        ref = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
        vm_c = tvms.relax.VirtualMachine(compiled, tvms.cpu())["forward"]
        vm_b = tvms.relax.VirtualMachine(bytecode, tvms.cpu())["forward"]
        vm_lifted = tvms.relax.VirtualMachine(lifted, tvms.cpu())
        vm_l = vm_lifted["forward"]
        for f in (vm_c, vm_b, vm_l):
            np.testing.assert_allclose(f(*inputs).numpy(), ref, rtol=1e-3, atol=1e-3)
        alone = replay_kernels(compiled, "forward", inputs)
        transformed = vm_lifted.param_cache.last["forward"].outputs
        floors = {"tvms VM compiled, lifted": replay_kernels(lifted, "forward_lifted", [inputs[0], *transformed])}
        rows = {"numpy": lambda: np.maximum(x @ w1.T + b1, 0) @ w2.T + b2,
                "kernels alone": alone,
                "tvms VM compiled": lambda: vm_c(*inputs),
                "tvms VM bytecode": lambda: vm_b(*inputs),
                "tvms VM compiled, lifted": lambda: vm_l(*inputs)}
        number = max(5, 2000 // batch)
        times = {k: [] for k in rows}
        for _ in range(args.repeat):
            for label, fn in rows.items():
                times[label].append(timed(fn, number))
        median = {k: float(np.median(v)) for k, v in times.items()}
        for label, seconds in median.items():
            beyond = ""
            if label.startswith("tvms") and batch == 1:
                wall, cpu_s = beyond_kernels(rows[label], floors.get(label, alone), args.repeat)
                beyond = f"{wall * 1e6:18.2f}, {cpu_s * 1e6:.2f}"
            print(f"{f'batch {batch} ' + label:34} {seconds * 1e6:9.2f} {median['numpy'] / seconds:8.2f}x {beyond}")


if __name__ == "__main__":
    main()
