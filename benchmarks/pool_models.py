"""The light ONNX models compiled for several thread pools, timed in one process in turns.

    .venv/bin/python benchmarks/pool_models.py resnet50 tvms mixed

Each pool (``TVMS_THREAD_POOL``'s values: ``tvms``, ``mixed``, ``gomp``, ``pthread``) gets its own compile of
the model (the code generator emits the pool's launch code), then every round times each side,
onnxruntime's too, as 3 calls after a 0.15 s warm-up (onnxruntime's threads spin for a while after
a call and took a core from the side timed right after it). Medians of the rounds, in ms.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tvms  # noqa: E402
from cpu_e2e import warm_up  # noqa: E402
from onnx_models import MODELS, load  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402
from tvms.runtime.thread_pool import POOL_KINDS  # noqa: E402

ROUNDS = 12


def main(name: str, pools: list[str]) -> None:
    model, feeds, _ = load(name)
    mod = from_onnx(model)
    inputs = [tvms.nd.array(v) for v in feeds.values()]
    sides = {}
    for pool in pools:
        os.environ["TVMS_THREAD_POOL"] = pool
        run = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())["main"]
        sides[pool] = lambda run=run: run(*inputs)
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sides["onnxruntime"] = lambda: session.run(None, feeds)
    times: dict = {side: [] for side in sides}
    for _ in range(ROUNDS):
        for side, call in sides.items():
            warm_up(call, 0.15)
            start = time.perf_counter()
            for _ in range(3):
                call()
            times[side].append((time.perf_counter() - start) / 3 * 1e3)
    print(name, "  ".join(f"{side}: {statistics.median(t):.2f} ms" for side, t in times.items()))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[1] not in MODELS:
        sys.exit(f"pool_models.py: no light model {sys.argv[1]!r}; one of {', '.join(MODELS)}")
    unknown = [p for p in sys.argv[2:] if p not in POOL_KINDS[1:]]
    if unknown:
        sys.exit(f"pool_models.py: no thread pool {unknown[0]!r}; one of {', '.join(POOL_KINDS[1:])}")
    main(sys.argv[1], sys.argv[2:])
