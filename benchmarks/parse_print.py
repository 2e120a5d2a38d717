"""Parse and print throughput of TVMScript, tvms beside Apache TVM 0.27, in lines per second.

    python benchmarks/parse_print.py [--repeat 5] [--lines 3000] [--json OUT] [--quick] [--no-tvm]

For each generated module (benchmarks/modules.py) it times, with time.perf_counter after one
warm-up call, the median of --repeat runs of
  - tvms:  parse ``tvms.script.from_source(text)``, print ``mod.script(dialect="tvm-0.27")``;
  - TVM:   parse ``tvm.script.from_source(text)``, print ``mod.script()``, in a subprocess run
           with TVM's own Python (--tvm-python), since TVM is never a dependency of tvms.
It reports lines/s (input lines / median seconds) and the ratios tvms/TVM from this one run,
and checks that each side prints the input back (so the parse is a real one). It measures and
reports; it never fails on a figure.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # for modules.py beside us
from modules import Workload, workloads  # noqa: E402

# side virtualenvs with Apache TVM 0.27 that earlier sessions made (README: "The TVM 0.27 inventory")
DEFAULT_TVM_PYTHONS = (pathlib.Path("/work/tvm-ref-venv/bin/python"), pathlib.Path("/work/tvm-venv/bin/python"))
GOALS = {"parse": 10.0, "print": 0.5}  # the targets for the ratio tvms/TVM

# Run by TVM's Python: argv = text file, printed-text file, repeat. The timing rule is the
# same as median_seconds() below; `import tvm` takes seconds, so it stays outside the timings.
TVM_WORKER = r"""
import gc, json, platform, statistics, sys, time
import tvm
import tvm.script

def median_seconds(call, repeat):
    call()  # warm-up
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times

text_path, printed_path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(text_path).read()
parse, parse_times = median_seconds(lambda: tvm.script.from_source(text), repeat)
mod = tvm.script.from_source(text)
print_, print_times = median_seconds(mod.script, repeat)
open(printed_path, "w").write(mod.script())
print(json.dumps({"version": tvm.__version__, "python": platform.python_version(),
                  "parse_s": parse, "print_s": print_,
                  "parse_times": parse_times, "print_times": print_times}))
"""


def median_seconds(call, repeat: int) -> tuple[float, list[float]]:
    """Median wall time of ``repeat`` calls after one warm-up call (grammar and caches built)."""
    call()
    times = []
    for _ in range(repeat):
        gc.collect()  # so one call's garbage is not collected on the next call's clock
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def first_difference(expected: str, got: str) -> dict | None:
    """The first line where ``got`` differs from ``expected`` (1-based), or None if equal."""
    if expected == got:
        return None
    want, have = expected.splitlines(), got.splitlines()
    for number in range(max(len(want), len(have))):
        w = want[number] if number < len(want) else "<end of text>"
        h = have[number] if number < len(have) else "<end of text>"
        if w != h:
            return {"line": number + 1, "input": w, "printed": h}
    return {"line": len(want), "input": "<final newline differs>", "printed": ""}


def measure_tvms(work: Workload, repeat: int) -> dict:
    from tvms.script import from_source

    parse, parse_times = median_seconds(lambda: from_source(work.text), repeat)
    mod = from_source(work.text)
    print_, print_times = median_seconds(lambda: mod.script(dialect="tvm-0.27"), repeat)
    return {"parse_s": parse, "print_s": print_, "parse_times": parse_times,
            "print_times": print_times,
            "roundtrip": first_difference(work.text, mod.script(dialect="tvm-0.27"))}


def measure_tvm(python: str, work: Workload, repeat: int) -> dict:
    """TVM's figures for one workload, from a fresh subprocess; raises RuntimeError on failure."""
    with tempfile.TemporaryDirectory(prefix="tvms-bench-") as tmp:
        text_path, printed_path = pathlib.Path(tmp, "in.tvms"), pathlib.Path(tmp, "out.tvms")
        text_path.write_text(work.text)
        # Drop PYTHONPATH/PYTHONHOME so TVM's venv sees only its own packages; run outside
        # the checkout so nothing of tvms is importable there.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        done = subprocess.run([python, "-c", TVM_WORKER, str(text_path), str(printed_path),
                               str(repeat)], capture_output=True, text=True, env=env, cwd=tmp)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"exit {done.returncode}: {tail[0]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["roundtrip"] = first_difference(work.text, printed_path.read_text())
        return result


def find_tvm_python(option: str | None) -> str | None:
    """--tvm-python, else a side venv with TVM if present, else $TVMS_TVM_PYTHON."""
    if option:
        return option
    found = next((p for p in DEFAULT_TVM_PYTHONS if p.exists()), None)
    return str(found) if found else os.environ.get("TVMS_TVM_PYTHON") or None


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def tvms_version() -> str:
    import tvms

    root = pathlib.Path(__file__).resolve().parent.parent
    try:  # the commit says which tvms was measured; "+dirty" for uncommitted changes
        commit = subprocess.run(["git", "describe", "--always", "--dirty=+dirty"], cwd=root,
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return f"{tvms.__version__} ({commit})" if commit else tvms.__version__


def rates(lines: int, ours: dict, theirs: dict | None) -> dict:
    """Lines/s of each side and the ratio tvms/TVM, for parse and print (None: not measured)."""
    out = {}
    for what in ("parse", "print"):
        mine = lines / ours[f"{what}_s"]
        other = lines / theirs[f"{what}_s"] if theirs else None
        out |= {f"{what}_tvms_lines_per_s": mine, f"{what}_tvm_lines_per_s": other,
                f"{what}_ratio": mine / other if other else None}
    return out


def summarize(work: Workload, ours: dict, theirs: dict | None) -> dict:
    return {"workload": work.name, "description": work.description, "lines": work.lines,
            "functions": work.functions, "tvm_roundtrips": work.tvm_roundtrips,
            "tvms": ours, "tvm": theirs,
            **rates(work.lines, ours, theirs)}


def total_row(rows: list[dict]) -> dict:
    """All workloads together: total lines over the summed median times."""
    def summed(side):
        if not all(r[side] for r in rows):
            return None
        return {k: sum(r[side][k] for r in rows) for k in ("parse_s", "print_s")}

    lines = sum(r["lines"] for r in rows)
    ours, theirs = summed("tvms"), summed("tvm")
    roundtrips = {side: (sum(1 for r in rows if r[side] and r[side]["roundtrip"] is None),
                         sum(1 for r in rows if r[side])) for side in ("tvms", "tvm")}
    return {"workload": "all", "description": "all workloads", "lines": lines,
            "functions": sum(r["functions"] for r in rows), "tvms": ours, "tvm": theirs,
            "roundtrips": roundtrips, **rates(lines, ours, theirs)}


def roundtrip_cell(row: dict) -> str:
    """"ok", or the first differing line, per side; the total row counts the workloads."""
    cells = []
    for side in ("tvms", "tvm"):
        if "roundtrips" in row:
            ok, n = row["roundtrips"][side]
            cells.append(f"{ok}/{n} ok" if n else "-")
        elif row[side] is None:
            cells.append("-")
        else:
            diff = row[side]["roundtrip"]
            cells.append("ok" if diff is None else f"line {diff['line']}")
    return " / ".join(cells)


def render_table(rows: list[dict]) -> str:
    """A plain-text table, numbers right-aligned."""
    def rate(x):
        return "-" if x is None else f"{x:,.0f}"

    def ratio(x):
        return "-" if x is None else f"{x:.2f}x"

    header = ["workload", "lines", "funcs", "parse tvms", "parse TVM", "parse x",
              "print tvms", "print TVM", "print x", "round-trip tvms/TVM"]
    body = [[r["workload"], str(r["lines"]), str(r["functions"]),
             rate(r["parse_tvms_lines_per_s"]), rate(r["parse_tvm_lines_per_s"]),
             ratio(r["parse_ratio"]), rate(r["print_tvms_lines_per_s"]),
             rate(r["print_tvm_lines_per_s"]), ratio(r["print_ratio"]), roundtrip_cell(r)]
            for r in rows]
    widths = [max(len(line[i]) for line in [header] + body) for i in range(len(header))]

    def fmt(cells):
        return "  ".join(c.ljust(w) if i in (0, 9) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = "-" * len(fmt(header))
    return "\n".join([fmt(header), rule] + [fmt(b) for b in body[:-1]] + [rule, fmt(body[-1])])


def goal_lines(total: dict) -> list[str]:
    if total["parse_ratio"] is None:
        return []
    out = []
    for what, goal in GOALS.items():
        got = total[f"{what}_ratio"]
        out.append(f"goal: {what} >= {goal:g}x TVM's speed: {got:.2f}x over all workloads"
                   f" ({'met' if got >= goal else 'not met'})")
    return out


def roundtrip_notes(rows: list[dict]) -> list[str]:
    """The first differing line of each print that does not give the input back."""
    notes = []
    for row in rows:
        for side, label in (("tvms", "tvms"), ("tvm", "TVM")):
            diff = (row[side] or {}).get("roundtrip")
            if not diff:
                continue
            known = side == "tvm" and not row["tvm_roundtrips"]
            why = " (expected: TVM 0.27 does not round-trip this corpus text)" if known else ""
            notes.append(f"{label} print differs from the input of {row['workload']} at line "
                         f"{diff['line']}{why}:\n    input:   {diff['input'].strip()}\n"
                         f"    printed: {diff['printed'].strip()}")
    return notes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="timed runs per measure (median)")
    p.add_argument("--lines", type=int, default=3000, help="about this many lines per module")
    p.add_argument("--quick", action="store_true", help="small modules, one timed run")
    p.add_argument("--no-tvm", action="store_true", help="measure tvms only")
    p.add_argument("--tvm-python", help="Python with Apache TVM 0.27 (default: "
                   f"{' or '.join(map(str, DEFAULT_TVM_PYTHONS))} if present, else $TVMS_TVM_PYTHON)")
    p.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.repeat, args.lines = 1, 150
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    notes: list[str] = []
    tvm_python = None if args.no_tvm else find_tvm_python(args.tvm_python)
    if tvm_python is None:
        notes.append("Apache TVM not found (give --tvm-python or set TVMS_TVM_PYTHON): "
                     "TVM columns skipped" if not args.no_tvm
                     else "--no-tvm: TVM columns skipped")

    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
               "tvms": tvms_version(), "tvm": None, "tvm_python": None,
               "load_before": load_average()}
    rows = []
    # Per workload, tvms then TVM back to back, so a change in the machine's load between
    # workloads touches both sides of a ratio alike.
    for work in workloads(args.lines):
        ours = measure_tvms(work, args.repeat)
        theirs = None
        if tvm_python:
            try:
                theirs = measure_tvm(tvm_python, work, args.repeat)
                machine["tvm"], machine["tvm_python"] = theirs["version"], theirs["python"]
            except OSError as e:  # no such interpreter: no use trying the next workloads
                notes.append(f"cannot run {tvm_python}: {e}; TVM columns skipped")
                tvm_python = None
            except (RuntimeError, ValueError) as e:
                notes.append(f"TVM failed on {work.name} ({tvm_python}): {e}")
        rows.append(summarize(work, ours, theirs))
    machine["load_after"] = load_average()
    total = total_row(rows)

    print(f"TVMScript parse/print throughput (lines/s; median of {args.repeat} after 1 warm-up)")
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, "
          f"load average {machine['load_before']} before / {machine['load_after']} after")
    print(f"tvms {machine['tvms']} on Python {machine['python']}; Apache TVM "
          + (f"{machine['tvm']} on Python {machine['tvm_python']}" if machine["tvm"] else "-"))
    print()
    print(render_table(rows + [total]))
    print()
    for line in goal_lines(total) + roundtrip_notes(rows) + notes:
        print(line)
    if args.json:
        settings = {"repeat": args.repeat, "lines": args.lines, "tvm_python": tvm_python}
        pathlib.Path(args.json).write_text(json.dumps(
            {"machine": machine, "settings": settings, "workloads": rows, "total": total,
             "notes": notes}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
