"""The host side of a call on a CUDA GPU, measured without one (issue 16): seed 000's MLP through
the Relax VM on ``tvms.cuda(0)``, one of its kernels as a plain ``CudaFunction`` call, a function
whose host allocates a workspace (the tests' ``scale_rowsum`` fixture) and a VM program placing its
tensors in ``R.vm.alloc_storage`` (``tests/fixtures/runtime/vm_storage.tvms``), with the emulated driver of the
tests (``tests/cuda_emulated.py``: host memory, launches recorded and not run) standing in for
the GPU. What it prints is Python's time per call (the VM, the host
functions, argument packing, allocation) and the driver calls one call makes, by name: the
device's own time is not in it, and is measured on a GPU by ``benchmarks/gpu.py``.

    .venv/bin/python benchmarks/gpu_host_overhead.py              # about 10 seconds
    .venv/bin/python benchmarks/gpu_host_overhead.py --profile    # and where the VM call spends it
"""
from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from cuda_emulated import Counting, EmulatedDriver, fixture_artifact, install  # noqa: E402
from seed_mlp import MLP  # noqa: E402

STORAGE = (HERE.parent / "tests" / "fixtures" / "runtime" / "vm_storage.tvms").read_text()
SHAPES = [(1, 784), (128, 784), (128,), (10, 128), (10,)]


def us_per_call(fn, number: int) -> float:
    """The best of 5 rounds of ``number`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=1000, help="calls per timed round")
    ap.add_argument("--quick", action="store_true", help="20 calls a round (a smoke run)")
    ap.add_argument("--profile", action="store_true", help="also profile the VM call (cProfile)")
    ap.add_argument("--sort", default="tottime", help="the profile's order (pstats: tottime, cumulative)")
    args = ap.parse_args()
    if args.quick:
        args.number = 20
    import tvms

    from tvms.runtime.cuda_module import CudaModule

    ex = tvms.compile(tvms.script.from_source(MLP), target=tvms.target.Target("cuda -arch=sm_80"))
    lib = ex.kernels()
    rowsum = CudaModule({"main": fixture_artifact("scale_rowsum_SplitHostDevice.tvms")}, "cuda")
    stored = tvms.runtime.vm.Executable(
        tvms.compile(tvms.script.from_source(STORAGE), target="llvm", relax_pipeline=None).program,
        CudaModule({"add_one": fixture_artifact("add_one_SplitHostDevice.tvms")}, "cuda"))
    artifacts = [*lib.artifacts.values(), *rowsum.artifacts.values(), *stored.kernels().artifacts.values()]
    # (no kernel runs, so kernels of the same name in two artifacts need not be told apart)
    driver = EmulatedDriver({k.name: k for a in artifacts for k in a.kernels}, run_kernels=False)
    counting = Counting(driver)
    install(driver)
    dev = tvms.cuda(0)
    rng = np.random.default_rng(0)
    inputs = [tvms.nd.array(rng.random(s, dtype=np.float32), device=dev) for s in SHAPES]
    vm = tvms.relax.VirtualMachine(ex, dev)
    main_fn = vm["main"]
    hidden = tvms.nd.empty((1, 128), "float32", dev)
    layer = lib["fused_NT_matmul_add_relu"]
    rows = tvms.nd.array(rng.random((64, 100), dtype=np.float32), device=dev)
    sums = tvms.nd.empty((64,), "float32", dev)
    stored_fn = tvms.relax.VirtualMachine(stored, dev)["main"]
    four = tvms.nd.array(np.arange(4, dtype="float32"), device=dev)
    calls = {"VM call of the MLP": lambda: main_fn(*inputs),
             "CudaFunction call (first layer)": lambda: layer(*inputs[:3], hidden),
             "CudaFunction call with a workspace": lambda: rowsum["main"](rows, sums, 2.0),
             "VM call with alloc_storage": lambda: stored_fn(four)}
    print(f"host side of one call, emulated driver ({args.number} calls a round, best of 5)")
    print(f"{'':36} {'us/call':>8}  driver calls per call")
    for label, fn in calls.items():
        install(counting)  # (counted in a call of their own, after a warm-up: the counter is not timed)
        fn()
        counting.counts.clear()
        fn()
        counted = dict(sorted(counting.counts.items()))
        install(driver)
        fn()
        print(f"{label:36} {us_per_call(fn, args.number):8.1f}  "
              f"{', '.join(f'{n} {c}' for n, c in counted.items())}")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [main_fn(*inputs) for _ in range(args.number)])
        pstats.Stats(profile).sort_stats(args.sort).print_stats(24)
    return 0


if __name__ == "__main__":
    sys.exit(main())
