"""Formatting a large file: time and peak memory of ``tvms fmt`` against the file's size.

    python benchmarks/large_file.py [--sizes 2500,5000,10000,20000] [--build 1000,2000] [--quick]

For each size it writes a module of that many small PrimFuncs (about 500 bytes each: 20,000
make ~10 MB; the text is canonical, so ``fmt`` must print it back unchanged), runs
``tvms fmt FILE`` in a fresh process and reports the wall time, the process's peak resident
memory (``getrusage`` of the child) and both per function, above those of a 1-function file. Linear behaviour shows as flat
per-function columns. ``--build`` does the same for ``tvms build FILE -o x.so`` (every function
scheduled and compiled by LLVM: about 50 ms each). It measures and reports; it never fails on
a figure.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

TVMS = [sys.executable, "-m", "tvms"]


def many_functions(count: int) -> str:
    """A module of ``count`` small PrimFuncs, in canonical form (``fmt`` prints it unchanged)."""
    parts = ["# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n"
             "@I.ir_module\nclass Module:\n"]
    for k in range(count):
        parts.append(
            "    @T.prim_func\n"
            f"    def add_{k}(A: T.Buffer((128, 128), \"float32\"), B: T.Buffer((128, 128), \"float32\"), "
            "C: T.Buffer((128, 128), \"float32\")):\n"
            "        T.func_attr({\"tir.noalias\": T.bool(True)})\n"
            "        # with T.block(\"root\"):\n"
            "        for i, j in T.grid(128, 128):\n"
            "            with T.block(\"C\"):\n"
            "                vi, vj = T.axis.remap(\"SS\", [i, j])\n"
            "                T.reads(A[vi, vj], B[vi, vj])\n"
            "                T.writes(C[vi, vj])\n"
            f"                C[vi, vj] = A[vi, vj] * T.float32({k % 97 + 2}.0) + B[vi, vj]\n"
            + ("\n" if k < count - 1 else ""))
    return "".join(parts)


def run_measured(argv: list[str], stdout: int | None, cache: pathlib.Path) -> tuple[float, float, int]:
    """(seconds, peak resident MiB, exit code) of one process, with an empty kernel cache (a
    function compiled by an earlier run would otherwise be loaded, not compiled)."""
    env = dict(os.environ, TVMS_CACHE_DIR=str(cache))
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    proc.stderr.close()
    return seconds, usage.ru_maxrss / 1024, proc.returncode  # (ru_maxrss is in KiB on Linux)


def run_once(kind: str, n: int, workdir: pathlib.Path) -> tuple[float, float, str, int]:
    """(seconds, peak MiB, result, bytes) of ``tvms KIND`` on a module of ``n`` functions."""
    text = many_functions(n)
    path = workdir / f"module_{n}.tvms"
    path.write_text(text)
    cache = pathlib.Path(tempfile.mkdtemp(prefix=f"cache-{kind}-{n}-", dir=workdir))
    if kind == "fmt":
        out = workdir / "out.tvms"
        with open(out, "wb") as sink:
            seconds, peak, code = run_measured([*TVMS, "fmt", str(path)], sink.fileno(), cache)
        result = "unchanged" if code == 0 and out.read_text() == text else f"exit {code} / changed"
    else:
        seconds, peak, code = run_measured([*TVMS, "build", str(path), "-o", str(workdir / "x.so")],
                                           subprocess.DEVNULL, cache)
        result = "built" if code == 0 else f"exit {code}"
    return seconds, peak, result, len(text)


def measure(kind: str, sizes: list[int], workdir: pathlib.Path) -> None:
    """One row per size; the per-function columns leave out a 1-function run (start-up, imports)."""
    print(f"\n{kind}: {' '.join(['tvms', kind, 'FILE'] + (['-o', 'x.so'] if kind == 'build' else []))}")
    base_s, base_mib, _, _ = run_once(kind, 1, workdir)
    print(f"1 function: {base_s:.2f} s, {base_mib:.0f} MiB (start-up; subtracted below)")
    print(f"{'functions':>9}  {'MB':>6}  {'seconds':>8}  {'ms/func':>8}  {'peak MiB':>9}  {'KiB/func':>8}  result")
    for n in sizes:
        seconds, peak, result, size = run_once(kind, n, workdir)
        print(f"{n:>9}  {size / 1e6:>6.1f}  {seconds:>8.2f}  {(seconds - base_s) * 1e3 / (n - 1):>8.3f}  "
              f"{peak:>9.0f}  {(peak - base_mib) * 1024 / (n - 1):>8.1f}  {result}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2500,5000,10000,20000", help="function counts for fmt")
    parser.add_argument("--build", default="", help="function counts for tvms build (e.g. 1000,2000)")
    parser.add_argument("--quick", action="store_true", help="fmt of 100 and 200 functions only")
    args = parser.parse_args()
    sizes = [100, 200] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    print(f"machine: {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="tvms-large-") as tmp:
        workdir = pathlib.Path(tmp)
        if sizes:
            measure("fmt", sizes, workdir)
        if args.build and not args.quick:
            measure("build", [int(s) for s in args.build.split(",")], workdir)


if __name__ == "__main__":
    main()
