"""CommonSubexprElim on a long straight-line function: seconds per size.

    python benchmarks/cse_stores.py [--sizes 250,500,1000,1500,3000] [--repeat 1] [--lets]

The function (``stores(n)``) is ``n`` stores in one sequence, as an unrolled loop gives them:
store ``i`` reads ``(n + i) * m`` twice (bound once per store), ``m * (i // 2 + 1)`` is shared
with its neighbour (bound before the first of the two) and ``n * m`` with every store (bound
once, at the top). So the pass binds about 1.5 variables per store. With ``--lets`` each store
comes after a ``x_i: T.int32 = m + i`` of its own, whose body is the rest of the function: the
stores nest ``n`` deep. It reports the median seconds of the pass (the parse, and a first run on
four stores, outside the timing) and seconds per thousand stores; it never fails on a figure.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time


def stores(n: int, lets: bool = False) -> str:
    """TVMScript of a function of ``n`` stores sharing subexpressions (run it with 0 <= n, m <= 1)."""
    lines = ["# from tvm.script import tir as T", "", "@T.prim_func",
             f'def main(A: T.Buffer(({n},), "int32"), B: T.Buffer(({2 * n + 4},), "int32"), '
             f'C: T.Buffer(({2 * n + 4},), "int32"), n: T.int32, m: T.int32):']
    for i in range(n):
        if lets:
            lines.append(f"    x{i}: T.int32 = m + {i}")
        lines.append(f"    A[{i}] = B[{i}] * C[(n + {i}) * m] + B[(n + {i}) * m + 1] + m * {i // 2 + 1} + n * m"
                     + (f" + x{i}" if lets else ""))
    return "\n".join(lines) + "\n"


def seconds(n: int, repeat: int, lets: bool) -> float:
    from tvms.ir.deep import run_deep
    from tvms.lowering.tir.gpu.common_subexpr_elim import common_subexpr_elim
    from tvms.script import from_source

    func = from_source(stores(n, lets))
    # (once on a small input first: the first call's costs, imports and dispatch tables, are not the pass's)
    run_deep(common_subexpr_elim, from_source(stores(4, lets)))
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        run_deep(common_subexpr_elim, func)  # (room for the nested lets' recursion)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250,500,1000,1500,3000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--lets", action="store_true", help="each store after a let of its own")
    args = parser.parse_args()
    print(f"{'stores':>7}  {'seconds':>8}  {'s/1000 stores':>13}")
    for n in (int(s) for s in args.sizes.split(",")):
        t = seconds(n, args.repeat, args.lets)
        print(f"{n:>7}  {t:>8.3f}  {t / n * 1000:>13.3f}", flush=True)


if __name__ == "__main__":
    main()
