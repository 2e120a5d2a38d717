"""Relax-only modules of Apache TVM's own Relax tests, as TVM 0.27 prints them: how many tvms parses,
reads in which dialect, prints back byte for byte (``tvms fmt``) and re-parses structurally equal.

Two steps; the texts are not kept in the repository:

    # 1. with Apache TVM 0.27 (a side virtualenv) and test files of an apache/tvm snapshot
    /work/tvm-venv/bin/python benchmarks/relax_tvm_tests.py collect OUT_DIR TVM/tests/python/relax/test_*.py \
        --extra-path .venv/lib/python3.11/site-packages   # where pytest is, if not in TVM's venv
    # 2. with tvms
    .venv/bin/python benchmarks/relax_tvm_tests.py measure OUT_DIR [--show N]

``collect`` runs every argument-free ``test_*`` function of the given files and keeps each module
(or Relax function, as a module) that they compare with ``tvm.ir.assert_structural_equal``, when all
its functions are Relax functions, it has no metadata, and TVM parses its own print back equal.
Tests that fail under TVM 0.27 (the snapshot may be newer) simply contribute nothing.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import importlib.util
import inspect
import pathlib
import sys


def collect(out: pathlib.Path, files: list[str], extra_path: str | None) -> None:
    if extra_path:
        sys.path.append(extra_path)  # after TVM's own packages: only what they lack comes from it
    import tvm
    import tvm_ffi
    from tvm import relax

    texts: dict[str, str] = {}
    assert_equal = tvm.ir.assert_structural_equal

    def keep(obj) -> None:
        if isinstance(obj, relax.Function):
            attrs = obj.attrs
            name = str(attrs["global_symbol"]) if attrs and "global_symbol" in attrs else "main"
            obj = tvm.IRModule({name: obj})
        if not (isinstance(obj, tvm.IRModule) and obj.functions
                and all(isinstance(f, relax.Function) for f in obj.functions.values())):
            return
        text = obj.script()
        if "metadata[" not in text and tvm_ffi.structural_equal(tvm.script.from_source(text), obj):
            texts[hashlib.sha1(text.encode()).hexdigest()[:12]] = text

    def recording_assert(lhs, rhs, *args, **kwargs):
        for obj in (lhs, rhs):
            try:
                keep(obj)
            except Exception:  # a module TVM cannot print or read back is not kept
                pass
        return assert_equal(lhs, rhs, *args, **kwargs)

    tvm.ir.assert_structural_equal = recording_assert
    for path in files:
        spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            print(f"skipped {path}: {type(e).__name__}: {e}")
            continue
        for name, fn in list(vars(module).items()):
            if name.startswith("test_") and callable(fn) and not inspect.signature(fn).parameters:
                try:
                    fn()
                except BaseException:  # (pytest.skip raises BaseException)
                    pass
    out.mkdir(parents=True, exist_ok=True)
    for key, text in texts.items():
        (out / f"{key}.tvms").write_text(text + "\n")
    print(f"{len(texts)} Relax-only texts in {out}")


def measure(folder: pathlib.Path, show: int) -> None:
    from tvms.ir import structural_equal
    from tvms.script import from_source
    from tvms.script.formatting import format_script

    counts: collections.Counter = collections.Counter()
    problems = []
    paths = sorted(folder.glob("*.tvms"))
    for path in paths:
        text = path.read_text()
        try:
            mod = from_source(text, path.name)
        except Exception as e:
            problems.append(f"{path.name}: does not parse: {str(e).splitlines()[0]}")
            continue
        counts["parse"] += 1
        counts[f"read as {mod.source_dialect}"] += 1
        try:
            out = format_script(text, path.name)
        except Exception as e:
            problems.append(f"{path.name}: does not print: {str(e).splitlines()[0]}")
            continue
        if out == text:
            counts["print back byte for byte"] += 1
        else:
            problems.append(f"{path.name}: prints back differently")
        if structural_equal(from_source(out), mod):
            counts["re-parse structurally equal"] += 1
    print(f"{len(paths)} texts")
    for what, n in counts.items():
        print(f"  {what}: {n} ({100 * n / max(len(paths), 1):.1f}%)")
    for line in problems[:show]:
        print("  " + line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("collect", help="with Apache TVM 0.27: write the texts")
    c.add_argument("out", type=pathlib.Path)
    c.add_argument("files", nargs="+")
    c.add_argument("--extra-path", help="a folder appended to sys.path (pytest, which the tests import)")
    m = sub.add_parser("measure", help="with tvms: parse and print the texts back")
    m.add_argument("folder", type=pathlib.Path)
    m.add_argument("--show", type=int, default=0, help="list N texts that fail")
    args = ap.parse_args()
    if args.step == "collect":
        collect(args.out, args.files, args.extra_path)
    else:
        measure(args.folder, args.show)


if __name__ == "__main__":
    sys.exit(main())
