"""One round of EvolutionarySearch on the llvm (or cuda) design space of an fp32 matmul: where its time goes.

The round is ``pre_tuning`` + one ``generate_measure_candidates`` with a RandomModel and a
MemoryDatabase (nothing measured), so it is the search's own cost: sampling, mutating, replaying
traces and post-processing them. It prints the wall time of the round, of each replay (the trace
applied to the module) and of each postprocessor, and a fingerprint of the picked candidates
(their decisions), which stays the same when the engine is made faster without changing results.

    .venv/bin/python benchmarks/tune_search_round.py --n 1024 --population 512
    .venv/bin/python benchmarks/tune_search_round.py --population 128 --profile 30   # cProfile's top 30
    .venv/bin/python benchmarks/tune_search_round.py --target cuda --n 512 --population 64 --trials 16
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import time
from collections import defaultdict

from matmul_cpu import plain_matmul_text

import tvms  # noqa: F401  (the package, before its parts)
from tvms.ir.target import Target
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune.cost_model import RandomModel
from tvms.lowering.tune.database import MemoryDatabase
from tvms.lowering.tune.evolutionary_search import EvolutionarySearch
from tvms.lowering.tune.post_order_apply import PostOrderApply
from tvms.lowering.tune.search_strategy import decisions_key
from tvms.lowering.tune.tune_context import TuneContext
from tvms.script import from_source


def _timed(obj: object, name: str, totals: dict, key: str) -> None:
    """Wrap ``obj.name`` to add its wall time and call count to ``totals[key]``."""
    inner = getattr(obj, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[key][0] += time.perf_counter() - start
            totals[key][1] += 1
    setattr(obj, name, wrapper)


# cuda: the limits of an sm_80 card (the default cuda space binds threads within them)
TARGETS = {"llvm": "llvm -num-cores=2",
           "cuda": {"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024, "thread_warp_size": 32,
                    "max_shared_memory_per_block": 49152}}


def run_round(n: int, population: int, seed: int, trials: int, target: str = "llvm") -> tuple[float, dict, str]:
    func = from_source(plain_matmul_text(n))
    ctx = TuneContext(func, Target(TARGETS[target]), space_generator=PostOrderApply(),
                      search_strategy=EvolutionarySearch(population_size=population), rand_state=seed)
    spaces = ctx.generate_design_space()
    search = ctx.search_strategy
    totals: dict = defaultdict(lambda: [0.0, 0])
    for postproc in search.postprocs:
        _timed(postproc, "apply", totals, f"postproc {type(postproc).__name__}")
    original_apply = Trace.apply_to_schedule
    _timed(Trace, "apply_to_schedule", totals, "replay (apply_to_schedule)")
    _timed(search, "replay", totals, "replay + postprocs")
    start = time.perf_counter()
    try:
        search.pre_tuning(trials, trials, spaces, MemoryDatabase(), RandomModel(seed=seed))
        picks = search.generate_measure_candidates()
    finally:
        Trace.apply_to_schedule = original_apply
    elapsed = time.perf_counter() - start
    fingerprint = hashlib.sha256("\n".join(decisions_key(c.sch.trace) for c in picks).encode()).hexdigest()[:16]
    return elapsed, dict(totals), fingerprint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="the matmul's size (n x n x n)")
    parser.add_argument("--population", type=int, default=512)
    parser.add_argument("--trials", type=int, default=64, help="candidates picked in the round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=sorted(TARGETS), default="llvm")
    parser.add_argument("--profile", type=int, default=0, metavar="K", help="print cProfile's top K functions")
    args = parser.parse_args()
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    elapsed, totals, fingerprint = run_round(args.n, args.population, args.seed, args.trials, args.target)
    if profiler:
        profiler.disable()
    print(f"round: {elapsed:.2f} s ({args.target}, n={args.n}, population {args.population}, seed {args.seed}); "
          f"picks fingerprint {fingerprint}")
    for key, (secs, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"  {key:45s} {secs:8.2f} s  {calls:6d} calls  {1000 * secs / max(calls, 1):8.2f} ms/call")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
