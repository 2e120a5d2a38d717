"""Weights transformed once: seed 000's MLP (1x784 -> 128 -> 10) per call, with and without
``num_input`` (with it, ``tvms.compile`` lifts what depends on the weights alone into
``main_transform_params``, run once per parameter set), side by side with numpy in one run.

    .venv/bin/python benchmarks/lift_params.py [--batch 1] [--rounds 7]

Rows: the seed's flow (zero pipeline + DLight's default schedules: the weight transposes are
kernels of their own) and ``tvms.compile``'s own build (the transposes fused into the matmuls),
each without and with ``num_input``, and the latter with the Matmul rule's weight packing marked
for lifting (``mark_packing``: at batch 1 the rule makes a GEMV, which packs nothing); medians of
interleaved rounds, in microseconds per call.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from seed_mlp import MLP  # noqa: E402


def mark_packing(mod, target: str = "llvm"):
    """``mod`` lowered by tvms.compile's first steps (zero pipeline, default schedules) with each
    top-level weight-packing block of the Matmul rule (``*_global``) marked
    ``meta_schedule.layout_rewrite_preproc``, as the rule is to mark it (issue 17's interface)."""
    import tvms
    from tvms.lowering.build import default_schedules, run_relax_pipeline

    mod = default_schedules(run_relax_pipeline(mod, "zero", True, target), target)
    for gv, func in list(mod.functions_items()):
        if isinstance(func, tvms.tir.PrimFunc):
            sch = tvms.tir.Schedule(mod)
            sch.work_on(gv.name_hint)
            for block in sch.get_child_blocks(sch.get_block("root")):
                if sch.get(block).name_hint.endswith("_global"):
                    sch.annotate(block, "meta_schedule.layout_rewrite_preproc", True)
            mod = sch.mod
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=200, help="calls per round")
    args = ap.parse_args()

    import tvms
    from tvms import dlight as dl
    from tvms import relax

    text = MLP.replace("(1, 784)", f"({args.batch}, 784)").replace("(1, 10)", f"({args.batch}, 10)")
    plain = tvms.script.from_source(text)
    with_input = tvms.IRModule({"main": plain["main"].with_attr("num_input", 1)})
    rng = np.random.default_rng(0)
    shapes = [(args.batch, 784), (128, 784), (128,), (10, 128), (10,)]
    values = [rng.standard_normal(s).astype("float32") for s in shapes]
    x, w0, b0, w1, b1 = values
    want = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1

    def seed_flow(mod):
        with tvms.target.Target("llvm"):
            return tvms.transform.Sequential([relax.get_pipeline("zero"),
                                              dl.ApplyDefaultSchedule(*dl.cpu.default_rules())])(mod)

    rows = {}
    for label, mod in [("seed flow", seed_flow(plain)), ("seed flow, num_input=1", seed_flow(with_input)),
                       ("tvms.compile", plain), ("tvms.compile, num_input=1", with_input),
                       ("  + packing marked", mark_packing(with_input))]:
        vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
        fn = vm["main"]
        np.testing.assert_allclose(fn(*values).numpy(), want, rtol=1e-4, atol=1e-4)
        rows[label] = (lambda fn=fn: fn(*values))
    rows["numpy"] = lambda: np.maximum(x @ w0.T + b0, 0) @ w1.T + b1

    times: dict = {k: [] for k in rows}
    for _ in range(args.rounds):  # interleaved, so that load on the machine touches every row alike
        for label, run in rows.items():
            start = time.perf_counter()
            for _ in range(args.number):
                run()
            times[label].append((time.perf_counter() - start) / args.number)
    base = statistics.median(times["numpy"])
    print(f"seed MLP, batch {args.batch}: median us per call of {args.rounds} rounds x {args.number} calls")
    for label, ts in times.items():
        t = statistics.median(ts)
        print(f"  {label:28s} {t * 1e6:8.1f} us   numpy/this {base / t:5.2f}x")


if __name__ == "__main__":
    main()
