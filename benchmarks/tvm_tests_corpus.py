"""The modules of Apache TVM's own Python tests, as TVM 0.27 prints them: how many tvms parses, prints
back byte for byte (``tvms fmt``, in the dialect it detects) and re-parses structurally equal.

Two steps; the texts are not kept in the repository:

    # 1. with Apache TVM 0.27 (a side virtualenv) and the test folders of an apache/tvm snapshot
    /work/tvm-venv/bin/python benchmarks/tvm_tests_corpus.py collect OUT TVM/tests/python/{tvmscript,relax,s_tir,tirx-transform} \
        --extra-path .venv/lib/python3.11/site-packages   # where pytest is, if not in TVM's venv
    # 2. with tvms
    .venv/bin/python benchmarks/tvm_tests_corpus.py measure OUT [--show N]

``collect`` runs each test file under pytest in a process of its own (killed after ``--timeout``
seconds, a test stopped after ``--test-timeout``: a slow or crashing file costs only itself) and keeps
every ``IRModule``, ``PrimFunc`` and ``relax.Function`` the file makes at import or in its tests
(module-level and class-level objects, every result of TVMScript parsing, i.e. of ``@I.ir_module``,
``@T.prim_func``, ``@R.function``, ``tvm.script.from_source``, and both sides of every
``tvm.ir.assert_structural_equal`` / ``structural_equal``) whose text, as TVM prints it, TVM
parses back structurally equal. Each text goes to ``OUT/<folder>/<sha1>.tvms`` (``<folder>``: the
test folder that found it first) as soon as it is found, so a killed file keeps what it found;
``OUT/sources/`` lists which test file gave which texts, ``OUT/COLLECT.txt`` the files that timed
out or crashed. Tests that fail under TVM 0.27 contribute what they made before failing.

``measure`` writes ``OUT/SUMMARY.txt``: the counts by folder and the failures grouped by their first
message (names and numbers kept, positions dropped).
"""
from __future__ import annotations

import argparse
import collections
import difflib
import hashlib
import os
import pathlib
import re
import signal
import sys
import time
import traceback

GROUPS = ("tvmscript", "relax", "s_tir", "tirx-transform")  # (the folders of the figures in benchmarks/README.md)


def text_folders(out: pathlib.Path) -> list[str]:
    """The folders of texts under ``out``: GROUPS first (a text found in several folders counts in
    the first), then any other test folder collected, by name."""
    others = sorted(p.name for p in out.iterdir() if p.is_dir() and p.name != "sources" and p.name not in GROUPS) \
        if out.is_dir() else []
    return [*GROUPS, *others]


# --- collect (runs under TVM 0.27) ---------------------------------------------------------------

def collect(out: pathlib.Path, folders: list[pathlib.Path], extra_path: str | None, jobs: int,
            timeout: float, test_timeout: float, attempts: int, exclude: list[str]) -> None:
    """Run every test file of ``folders`` in a process of its own, ``jobs`` at a time.

    The processes are forked from this one after it imported TVM and pytest (seconds a file that
    each would otherwise spend again). A file whose process crashes (TVM 0.27 segfaults in some
    tests) runs again without the tests it started before, up to ``attempts`` times; one killed
    for its time does not. Sub-folders named in ``exclude`` are left out.
    A file's pytest output goes to ``OUT/logs/<folder>__<name>.log``, the tests it started to
    ``.started`` beside it."""
    files = [(folder.name, path) for folder in folders for path in sorted(folder.rglob("test_*.py"))
             if not any(part in exclude for part in path.relative_to(folder).parts[:-1])]
    for sub in ("sources", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    _import_tvm(extra_path)
    start = time.time()
    queue = [(group, path, 1) for group, path in files]
    running: dict[int, tuple] = {}
    problems = []
    while queue or running:
        while queue and len(running) < jobs:
            group, path, attempt = queue.pop(0)
            log = out / "logs" / f"{group}__{path.stem}"
            if attempt == 1:
                for what in (log.with_suffix(".log"), log.with_suffix(".started"),
                             out / "sources" / f"{log.name}.txt"):
                    what.write_text("")
            pid = os.fork()
            if pid == 0:  # the child: one test file
                code = 3
                try:
                    fd = os.open(log.with_suffix(".log"), os.O_WRONLY | os.O_APPEND)
                    os.dup2(fd, 1)
                    os.dup2(fd, 2)
                    os.chdir(path.parent)
                    code = collect_file(out, group, path, log.with_suffix(".started"), test_timeout)
                except BaseException:  # pylint: disable=broad-except
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = (group, path, attempt, log, time.time())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for pid, (*_, began) in running.items():
                if time.time() - began > timeout:
                    os.kill(pid, signal.SIGKILL)  # reaped (and reported) below
            time.sleep(0.05)
            continue
        group, path, attempt, log, began = running.pop(pid)
        took = time.time() - began
        rel = f"{group}/{path.relative_to(next(f for f in folders if f.name == group))}"
        started = log.with_suffix(".started").read_text().splitlines()
        if took > timeout or os.WIFSIGNALED(status):
            why = f"killed after {timeout:.0f} s" if took > timeout else \
                f"crashed ({signal.Signals(os.WTERMSIG(status)).name})"
            verdict = f"{why} in {started[-1] if started else 'collection'}"
            if started and attempt < attempts and took <= timeout:  # (a slow file: not again)
                queue.append((group, path, attempt + 1))
                verdict += "; runs again without the tests it started"
            problems.append(f"{rel}: {verdict}")
        elif os.WEXITSTATUS(status) in (0, 1, 5):  # (1: some tests failed, 5: none collected)
            verdict = "ok"
        else:
            tail = [line for line in log.with_suffix(".log").read_text(errors="replace").splitlines()
                    if line.strip()]
            verdict = f"exit {os.WEXITSTATUS(status)}: {(tail or ['?'])[-1][:160]}"
            problems.append(f"{rel}: {verdict}")
        print(f"{took:6.1f} s  {rel}  {verdict}", flush=True)
    texts = sum(1 for group in text_folders(out) for _ in (out / group).glob("*.tvms"))
    report = [f"{len(files)} test files in {time.time() - start:.0f} s; {texts} texts in {out}",
              f"{len(problems)} runs did not finish normally (what they found before is kept):"]
    (out / "COLLECT.txt").write_text("\n".join(report + ["  " + line for line in problems]) + "\n")
    print("\n".join(report) + f" (listed in {out / 'COLLECT.txt'})")


def _import_tvm(extra_path: str | None) -> None:
    if extra_path:
        sys.path.append(extra_path)  # after TVM's own packages: only what they lack comes from it
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # (hypothesis & co.: seconds a file)
    # what most test files import, loaded once before forking
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import tvm  # noqa: F401
    import tvm.relax.script.parser.entry  # noqa: F401
    import tvm.s_tir  # noqa: F401
    import tvm.script.parser._core  # noqa: F401
    import tvm.testing  # noqa: F401
    import tvm.tirx.script.parser.entry  # noqa: F401
    import tvm.topi  # noqa: F401
    _alias_moved_names()


# Names a newer apache/tvm snapshot's tests import from where TVM 0.27 does not have them:
# (module, name, module that has it in 0.27). Aliasing them lets those files run (and print) under 0.27.
MOVED_NAMES = (("tvm.ir", "VDevice", "tvm.relax"), ("tvm.ir", "DummyGlobalInfo", "tvm.relax.global_info"),
               ("tvm.relax.expr", "Constant", "tvm.ir.expr"), ("tvm.tirx", "StringImm", "tvm.ir.expr"),
               ("tvm.tirx.analysis", "expr_deep_equal", "tvm.ir.prim"), ("tvm.tirx.stmt", "SBlock", "tvm.s_tir.stmt"),
               ("tvm.tirx", "TensorIntrin", "tvm.s_tir"))


def _alias_moved_names() -> None:
    import importlib
    for where, name, home in MOVED_NAMES:
        module = importlib.import_module(where)
        if not hasattr(module, name):
            setattr(module, name, getattr(importlib.import_module(home), name))


def collect_file(out: pathlib.Path, group: str, path: pathlib.Path, started: pathlib.Path,
                 test_timeout: float) -> int:
    """(In a forked process.) Run one test file under pytest, writing what it makes as it goes,
    without the tests ``started`` lists (a run before crashed in or after them)."""
    import pytest
    import tvm
    import tvm_ffi
    from tvm import relax, tirx

    for folder in (out / group, out / "sources"):
        folder.mkdir(parents=True, exist_ok=True)
    found: set[str] = set()
    sources = (out / "sources" / f"{group}__{path.stem}.txt").open("a")
    seen: dict[int, object] = {}  # (holding each object keeps its id unique)
    parse = tvm.script.parser._core.parse
    equal = tvm_ffi.structural_equal

    def keep(obj) -> None:
        if not isinstance(obj, (tvm.IRModule, tirx.PrimFunc, relax.Function)) or id(obj) in seen:
            return
        seen[id(obj)] = obj
        try:
            text = obj.script()
            key = hashlib.sha1(text.encode()).hexdigest()[:16]
            if key in found:
                return
            known = any((out / g / f"{key}.tvms").exists() for g in text_folders(out))
            if known or equal(parse(text), obj):  # (only what TVM reads back as it was)
                if not known:
                    (out / group / f"{key}.tvms").write_text(text + "\n")
                found.add(key)
                sources.write(key + "\n")
                sources.flush()
        except Exception:  # pylint: disable=broad-except
            pass  # a module TVM cannot print or read back is not kept

    def recording(fn, *positions):
        def wrapper(*args, **kwargs):
            try:
                result = fn(*args, **kwargs)
            finally:  # (a comparison that fails still compares two modules TVM made)
                for k in positions:
                    if k < len(args):
                        keep(args[k])
            if not positions:
                keep(result)
            return result
        return wrapper

    def save_json(*args, **kwargs):
        raise RuntimeError("tvm.ir.save_json crashes the process in this TVM 0.27 build")

    # Replace each function everywhere TVM's modules hold it (``from .x import parse`` copies it).
    patches = {parse: recording(parse), tvm.ir.assert_structural_equal:
               recording(tvm.ir.assert_structural_equal, 0, 1),
               equal: recording(equal, 0, 1), tvm.ir.save_json: save_json}
    for name, module in list(sys.modules.items()):
        if name.startswith("tvm"):
            for attr, value in list(vars(module).items()):
                if callable(value) and any(value is f for f in patches):
                    setattr(module, attr, next(w for f, w in patches.items() if value is f))
    for attr in ("from_source", "parse"):
        setattr(tvm.script, attr, patches[parse])

    skip = set(started.read_text().splitlines())
    progress = started.open("a")

    class Recorder:  # a pytest plugin
        def pytest_collection_modifyitems(self, items):
            items[:] = [item for item in items if item.nodeid not in skip]

        def pytest_runtest_logstart(self, nodeid):
            progress.write(nodeid + "\n")
            progress.flush()

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            signal.signal(signal.SIGALRM, _too_slow)
            signal.setitimer(signal.ITIMER_REAL, test_timeout)
            try:
                yield
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)

        def pytest_collection_finish(self, session):
            modules = {id(item.module): item.module for item in session.items
                       if getattr(item, "module", None) is not None}
            for module in modules.values():
                for value in list(vars(module).values()):
                    keep(value)
                    if isinstance(value, type) and value.__module__ == module.__name__:
                        for inner in list(vars(value).values()):
                            keep(inner)

    code = pytest.main([str(path), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "--no-header", "-o", "addopts="], plugins=[Recorder()])
    return 0 if code in (0, 1, 5) else int(code)


class TestTooSlow(Exception):
    pass


def _too_slow(signum, frame):
    raise TestTooSlow("test took longer than --test-timeout")


# --- measure (runs with tvms) --------------------------------------------------------------------

_POSITION = re.compile(r"^\S+?\.tvms(:\d+)+:\s*")


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines() or [type(err).__name__]
    return _POSITION.sub("", lines[0])[:200]


def _first_difference(expected: str, got: str) -> str:
    """The first line TVM printed that tvms prints otherwise: 'TVM: ... | tvms: ...'."""
    a, b = expected.splitlines(), got.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            left = a[i1].strip() if i1 < i2 else "(nothing)"
            right = b[j1].strip() if j1 < j2 else "(nothing)"
            return f"TVM: {left[:110]} | tvms: {right[:110]}"
    return "only trailing whitespace differs"


def measure(folder: pathlib.Path, show: int, examples: int) -> None:
    from tvms.ir import structural_equal
    from tvms.script import from_source
    from tvms.script.formatting import format_script

    texts: dict[str, pathlib.Path] = {}
    for group in text_folders(folder):
        for path in sorted((folder / group).glob("*.tvms")):
            texts.setdefault(path.stem, path)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures: dict[str, dict[str, list[str]]] = {"does not parse": {}, "prints back differently": {},
                                                 "re-parses differently": {}}
    start = time.time()
    signal.signal(signal.SIGALRM, _too_slow)
    for key, path in sorted(texts.items()):
        group = path.parent.name
        text = path.read_text()
        row = counts[group]
        row["texts"] += 1
        kind = "mixed" if "@R.function" in text and "@T.prim_func" in text else \
            "relax" if "@R.function" in text else "tir"
        row[f"kind {kind}"] += 1
        signal.alarm(60)
        try:
            stage = "does not parse"
            mod = from_source(text, path.name)
            row["parse"] += 1
            row[f"read as {mod.source_dialect}"] += 1
            stage = "prints back differently"
            out = format_script(text, path.name)
            if out == text:
                row["print back byte for byte"] += 1
            else:
                failures[stage].setdefault(_first_difference(text, out), []).append(path.name)
            stage = "re-parses differently"
            if structural_equal(from_source(out, path.name), mod):
                row["re-parse structurally equal"] += 1
            else:
                failures[stage].setdefault("not structurally equal", []).append(path.name)
        except (Exception, TestTooSlow, RecursionError) as err:  # pylint: disable=broad-except
            failures[stage].setdefault(_first_line(err), []).append(path.name)
        finally:
            signal.alarm(0)
    total = collections.Counter()
    for row in counts.values():
        total.update(row)
    columns = ("texts", "parse", "print back byte for byte", "re-parse structurally equal")

    def pct(row, what):
        base = row["parse"] if what == "re-parse structurally equal" else row["texts"]
        return f"{row[what]} ({100 * row[what] / max(base, 1):.1f}%)"

    report = [f"{total['texts']} texts in {folder} (measured in {time.time() - start:.0f} s)",
              f"{'folder':16}" + "".join(f"{c:>30}" for c in columns)]
    for group, row in sorted(counts.items()) + [("all", total)]:
        report.append(f"{group:16}{row['texts']:>30}" + "".join(f"{pct(row, c):>30}" for c in columns[1:]))
    report.append("(re-parse % is of those that parse)")
    report.append("kinds: " + ", ".join(f"{k[5:]} {n}" for k, n in sorted(total.items()) if k.startswith("kind ")))
    report.append("dialects read: " + ", ".join(f"{k[8:]} {n}" for k, n in sorted(total.items())
                                                 if k.startswith("read as ")))
    for stage, groups in failures.items():
        n = sum(len(v) for v in groups.values())
        report.append(f"\n{stage}: {n} texts, {len(groups)} distinct first messages")
        for message, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:show]:
            report.append(f"  {len(names):5} texts  {message}")
            report.append("               e.g. " + " ".join(names[:examples]))
    (folder / "SUMMARY.txt").write_text("\n".join(report) + "\n")
    print("\n".join(report))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("collect", help="with Apache TVM 0.27: write the texts")
    c.add_argument("out", type=pathlib.Path)
    c.add_argument("folders", nargs="+", type=pathlib.Path, help="test folders, e.g. TVM/tests/python/relax")
    c.add_argument("--extra-path", help="a folder appended to sys.path (pytest, which the tests import)")
    c.add_argument("--jobs", type=int, default=2, help="test files run at once")
    c.add_argument("--timeout", type=float, default=30, help="seconds a test file may run")
    c.add_argument("--test-timeout", type=float, default=10, help="seconds one test may run")
    c.add_argument("--attempts", type=int, default=3, help="runs of a file that crashes")
    c.add_argument("--exclude", action="append", default=[],
                   help="a sub-folder name to leave out (e.g. meta_schedule: tuning, slow, few texts)")
    m = sub.add_parser("measure", help="with tvms: parse and print the texts back")
    m.add_argument("folder", type=pathlib.Path)
    m.add_argument("--show", type=int, default=25, help="failure groups listed per stage")
    m.add_argument("--examples", type=int, default=3, help="text names listed per failure group")
    args = ap.parse_args()
    if args.step == "collect":
        collect(args.out, [p.resolve() for p in args.folders], args.extra_path, args.jobs,
                args.timeout, args.test_timeout, args.attempts, args.exclude)
        return 0
    measure(args.folder, args.show, args.examples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
