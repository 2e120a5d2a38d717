"""Apache TVM's side of ``cpu_e2e.py``: run with TVM's own Python (TVM is never a dependency of
tvms). Builds the add texts of ``cpu_e2e_kernels.py`` with ``tvm.build`` and the MLP example with
the zero pipeline + ``tvm.compile``, checks them against numpy and prints one JSON object: label ->
median seconds per call (the MLP's compile time under "mlp compile").

    /work/tvm-ref-venv/bin/python benchmarks/cpu_e2e_tvm.py N BATCH[,BATCH...] REPEAT MLP_PATH
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import tvm
from tvm import relax

from cpu_e2e_kernels import ADD_SCHEDULES, add_text


def measure_add(n: int, repeat: int, dev) -> dict:
    rng = np.random.default_rng(0)
    a_np, b_np = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    a, b, c = (tvm.runtime.tensor(x, dev) for x in (a_np, b_np, np.zeros(n, np.float32)))
    seconds = {}
    for label, template in ADD_SCHEDULES.items():
        text = add_text(template, n).replace("import tir as T", "import tirx as T")
        lib = tvm.build(tvm.script.from_source(text), target="llvm")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c.numpy(), a_np + b_np, rtol=1e-6)
        seconds[f"add {label}"] = lib.time_evaluator("main", dev, number=1, repeat=repeat)(a, b, c).median
    return seconds


def measure_mlp(path: str, batches: list[int], repeat: int, dev) -> dict:
    start = time.perf_counter()
    mod = relax.get_pipeline("zero")(tvm.script.from_source(open(path).read()))
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), dev)
    seconds = {"mlp compile": time.perf_counter() - start}
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s, dtype=np.float32) for s in [(256, 784), (256,), (10, 256), (10,)]]
    for batch in batches:
        args = [tvm.runtime.tensor(x, dev) for x in [rng.standard_normal((batch, 784), dtype=np.float32)] + weights]
        vm["forward"](*args)
        seconds[f"mlp batch {batch}"] = vm.time_evaluator("forward", dev, number=10, repeat=repeat)(*args).median
    return seconds


def main() -> None:
    n, batches, repeat, mlp_path = int(sys.argv[1]), [int(b) for b in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4]
    dev = tvm.cpu()
    seconds = measure_add(n, repeat, dev) | measure_mlp(mlp_path, batches, repeat, dev)
    seconds["version"] = tvm.__version__
    print(json.dumps(seconds))


if __name__ == "__main__":
    main()
