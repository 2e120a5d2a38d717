"""How the work of a 2-thread call splits between the caller's thread and the pool's, measured in
CPU time, so that it holds on a busy machine where wall-clock scaling cannot be measured.

For each workload (the seed MLP at each batch, through ``tvms.compile``'s VM; the 3x3 ResNet
convolution and a matmul, default-scheduled), over rounds of calls at ``TVM_NUM_THREADS=2``: the
CPU time of the calling thread (``time.thread_time``) and of the whole process
(``time.process_time``), medians. "others" is the share of the CPU time spent on other threads:
0% means the second thread had nothing to do (the MLP's first layer at batch 16 and 64 was one
parallel task until the Matmul rule cut a symbolic row count into column chunks); near 50% means
the work is shared. Wall-clock times of 1 and 2 threads, alternating, are printed beside them
with the load average: they mean something only on a quiet machine.

    .venv/bin/python benchmarks/thread_split.py                 # MLP batches 16, 64, conv, matmul 512
    .venv/bin/python benchmarks/thread_split.py --batches 64 --rounds 500
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def split(call, rounds: int) -> dict:
    """Medians of the caller's and the process's CPU seconds per call at 2 threads, and of wall
    seconds at 1 and 2 threads (calls alternating)."""
    caller, process, wall = [], [], {1: [], 2: []}
    for threads in (1, 2):
        os.environ["TVM_NUM_THREADS"] = str(threads)
        call()  # (warm-up; the pool's workers start on first need)
    for _ in range(rounds):
        for threads in (1, 2):
            os.environ["TVM_NUM_THREADS"] = str(threads)
            start, mine, everyone = time.perf_counter(), time.thread_time(), time.process_time()
            call()
            wall[threads].append(time.perf_counter() - start)
            if threads == 2:
                caller.append(time.thread_time() - mine)
                process.append(time.process_time() - everyone)
    return {"caller": float(np.median(caller)), "process": float(np.median(process)),
            "wall1": float(np.median(wall[1])), "wall2": float(np.median(wall[2]))}


def workloads(batches: list[int], conv: tuple, matmul: int) -> dict:
    """label -> a call of it, each checked against numpy once."""
    import tvms
    from cpu_default import MLP_PATH, build_default
    from cpu_default_workloads import reference
    from cpu_default_workloads import workloads as kernels
    from cpu_e2e import WEIGHT_SHAPES
    from tvms.script import from_source

    rng = np.random.default_rng(0)
    calls = {}
    vm = tvms.relax.VirtualMachine(tvms.compile(from_source(MLP_PATH.read_text()), target="llvm"), tvms.cpu())
    weights = [rng.standard_normal(s, dtype=np.float32) for s in WEIGHT_SHAPES]
    for batch in batches:
        x = rng.standard_normal((batch, 784), dtype=np.float32)
        args = [tvms.nd.array(v) for v in (x, *weights)]
        w1, b1, w2, b2 = weights
        np.testing.assert_allclose(vm["forward"](*args).numpy(), np.maximum(x @ w1.T + b1, 0) @ w2.T + b2,
                                   rtol=1e-3, atol=1e-3)
        calls[f"mlp batch {batch}"] = lambda args=args: vm["forward"](*args)
    for label, (text, shapes) in kernels(16, 8, 8, [matmul], conv).items():
        if label != "conv2d" and not label.startswith("matmul"):
            continue
        lib, name = build_default(text)
        arrays = [rng.random(s, dtype=np.float32) for s in shapes]
        out = np.empty(shapes[0], np.float32)
        lib[name](*arrays, out)
        np.testing.assert_allclose(out, reference(np, label, arrays), rtol=1e-3, atol=1e-3)
        calls[label] = lambda lib=lib, name=name, arrays=arrays, out=out: lib[name](*arrays, out)
    return calls


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="16,64", help="MLP batch sizes, comma-separated")
    parser.add_argument("--conv", default="64,56", help="C,H of the 3x3 convolution")
    parser.add_argument("--matmul", type=int, default=512, help="N of the N x N x N matmul")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.conv, args.matmul, args.rounds = "16", "8,8", 64, 3
    conv = tuple(int(v) for v in args.conv.split(","))
    calls = workloads([int(b) for b in args.batches.split(",")], conv, args.matmul)
    print(f"2 threads against 1 (TVM_NUM_THREADS), medians of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f} before")
    print(f"{'':16} {'caller CPU ms':>13} {'all CPU ms':>10} {'others':>7} {'1T ms':>9} {'2T ms':>9} {'x 1T':>6}")
    for label, call in calls.items():
        r = split(call, args.rounds)
        print(f"{label:16} {r['caller'] * 1e3:13.4f} {r['process'] * 1e3:10.4f} "
              f"{100 * (1 - r['caller'] / r['process']):6.0f}% {r['wall1'] * 1e3:9.4f} {r['wall2'] * 1e3:9.4f} "
              f"{r['wall1'] / r['wall2']:6.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
