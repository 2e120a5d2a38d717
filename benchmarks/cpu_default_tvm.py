"""Apache TVM's side of ``cpu_default.py``: run with TVM's own Python (TVM is never a dependency
of tvms). Each workload of ``cpu_default_workloads.py`` and the MLP example go through TVM's
zero pipeline, ``tvm.compile`` and ``relax.VirtualMachine`` (what TVM does by default on CPU);
results are checked against numpy and one JSON object is printed: label -> median seconds
(of at most 3 calls for a kernel that takes over a second).

    /work/tvm-venv/bin/python benchmarks/cpu_default_tvm.py N_ADD ROWS COLS SIZES C,H REPEAT MLP BATCHES
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import tvm
from tvm import relax

from cpu_default_workloads import reference, workloads
from cpu_e2e_tvm import measure_mlp


def main() -> None:
    n_add, rows, cols = (int(v) for v in sys.argv[1:4])
    sizes = [int(v) for v in sys.argv[4].split(",") if v]
    conv = tuple(int(v) for v in sys.argv[5].split(","))
    repeat, mlp_path, batches = int(sys.argv[6]), sys.argv[7], [int(b) for b in sys.argv[8].split(",")]
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    seconds = {}
    for label, (text, shapes) in workloads(n_add, rows, cols, sizes, conv).items():
        mod = relax.get_pipeline("zero")(tvm.script.from_source(text))
        vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), dev)
        arrays = [rng.random(s, dtype=np.float32) for s in shapes]
        args = [tvm.runtime.tensor(a, dev) for a in arrays]
        start = time.perf_counter()
        got = vm["main"](*args).numpy()
        slow = time.perf_counter() - start > 1.0  # (the unscheduled matmul 1024 takes ~10 s a call)
        np.testing.assert_allclose(got, reference(np, label, arrays), rtol=1e-3, atol=1e-4)
        timer = vm.time_evaluator("main", dev, number=1, repeat=min(repeat, 3) if slow else repeat)
        seconds[label] = timer(*args).median
    seconds |= measure_mlp(mlp_path, batches, repeat, dev)
    seconds["version"] = tvm.__version__
    print(json.dumps(seconds))


if __name__ == "__main__":
    main()
