"""What a parallel loop costs to start and finish, per thread pool, in one process: a kernel that
runs ``--loops`` small parallel loops back to back (2 tasks of ``--work`` stores each, as a
model's kernels follow each other in the compiled VM), timed per loop on one thread, on libgomp's
pool (its worker sleeps between loops: ``OMP_WAIT_POLICY=passive``), on tvms's pool with its
threads sleeping at once (``set_pool_spin(0)``, which also ends the caller's short spin for the
workers' last tasks: it sleeps at once too) and with the default short wait (yielding) before
they sleep; then the
CPU time tvms's worker spends after a call, while the process sleeps (its bounded wait).

    .venv/bin/python benchmarks/parallel_wake.py
    .venv/bin/python benchmarks/parallel_wake.py --work 65536 --rounds 60

The sides are timed in turns (the order reversed every round), the median of the rounds per
side; "overhead" is a side's time over half the one-thread time (the ideal split on 2 threads).
On a loaded machine the second core is rarely free, so compare the overheads, not the speedup.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
KERNEL = """
    @T.prim_func
    def main(A: T.Buffer((2, {n}), "float32"), S: T.Buffer((2, {n}), "float32")):
        for r in range({loops}):
            for t in T.parallel(2):
                for i in range({n}):
                    for k in range(64):
                        S[t, i] = S[t, i] * T.float32(0.999) + A[t, i]
"""


def build(pool: str, work: int, loops: int):
    import tvms
    from tvms.script import from_source

    before = os.environ.get("TVMS_THREAD_POOL")
    os.environ["TVMS_THREAD_POOL"] = pool
    try:
        return tvms.build(from_source(HEADER + KERNEL.format(n=work // 64, loops=loops))["main"], target="llvm")
    finally:  # (the user's setting back)
        if before is None:
            del os.environ["TVMS_THREAD_POOL"]
        else:
            os.environ["TVMS_THREAD_POOL"] = before


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=int, default=131072, help="stores per task (default 131072)")
    parser.add_argument("--loops", type=int, default=50, help="parallel loops per call (default 50)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of one call per side (default 30)")
    args = parser.parse_args(argv)
    from tvms.runtime.thread_pool import set_pool_spin
    from tvms.runtime.thread_pool_ir import SPIN_ROUNDS

    gomp, ours = build("gomp", args.work, args.loops), build("tvms", args.work, args.loops)
    n = args.work // 64
    a, s = np.ones((2, n), np.float32), np.zeros((2, n), np.float32)
    sides = {"1 thread": (gomp, 1, SPIN_ROUNDS), "libgomp": (gomp, 2, SPIN_ROUNDS),
             "tvms, sleeping": (ours, 2, 0), "tvms, waiting": (ours, 2, SPIN_ROUNDS)}
    times: dict = {k: [] for k in sides}
    for r in range(args.rounds):
        for name, (lib, threads, spin) in (list(sides.items())[::-1] if r % 2 else sides.items()):
            os.environ["TVM_NUM_THREADS"] = str(threads)
            set_pool_spin(spin)
            lib(a, s)  # (the threads' state as the side leaves it)
            start = time.perf_counter()
            lib(a, s)
            times[name].append((time.perf_counter() - start) / args.loops * 1e6)
    half = statistics.median(times["1 thread"]) / 2
    print(f"{args.loops} loops of 2 x {args.work} stores a call, median of {args.rounds} rounds "
          f"(load average {os.getloadavg()[0]:.1f}):")
    for name, values in times.items():
        us = statistics.median(values)
        print(f"  {name:<16}{us:8.1f} us a loop" + ("" if name == "1 thread" else f"   overhead {us - half:6.1f} us"))
    os.environ["TVM_NUM_THREADS"] = "2"
    set_pool_spin(SPIN_ROUNDS)
    after = []
    for _ in range(10):
        ours(a, s)
        start, mine = cpu_seconds(), time.thread_time()
        time.sleep(0.05)
        after.append(((cpu_seconds() - start) - (time.thread_time() - mine)) * 1e6)
    print(f"  tvms's worker after a call: {statistics.median(after):.0f} us of CPU, then asleep")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
