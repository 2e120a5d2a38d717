"""Apache TVM's side of ``matmul_cpu.py``: run with TVM's own Python (TVM is never a dependency
of tvms). Builds each schedule of ``matmul_schedules.py`` with ``tvm.build(..., "llvm")``, checks
it against numpy and prints one JSON object: schedule label -> median seconds per call. Each
further ``LABEL=PATH`` argument adds a TensorIR text to build the same way (``matmul_cpu.py``
passes the default rule's schedule, printed in TVM 0.27's dialect).

    /work/tvm-ref-venv/bin/python benchmarks/matmul_cpu_tvm.py N REPEAT [LABEL=PATH ...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import tvm

from matmul_schedules import SCHEDULES, fits, hand_schedule_limit, schedule_text


def main() -> None:
    n, repeat = int(sys.argv[1]), int(sys.argv[2])
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    a_np, b_np = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
    c = tvm.runtime.tensor(np.zeros((n, n), np.float32), dev)
    texts = {label: schedule_text(template, n, ti, tj).replace("import tir as T", "import tirx as T")
             for label, (template, ti, tj) in SCHEDULES.items()
             if fits(template, n, ti, tj) and n <= hand_schedule_limit(ti, tj)}
    for extra in sys.argv[3:]:
        label, _, path = extra.partition("=")
        texts[label] = Path(path).read_text()
    seconds = {}
    for label, text in texts.items():
        lib = tvm.build(tvm.script.from_source(text), target="llvm")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-3)
        seconds[label] = lib.time_evaluator("main", dev, number=1, repeat=repeat)(a, b, c).median
    print(json.dumps(seconds))


if __name__ == "__main__":
    main()
