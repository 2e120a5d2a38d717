"""CommonSubexprElim against Apache TVM 0.27's: random TIR programs through both passes, printed
text compared byte for byte.

    .venv/bin/python tools/cse_vs_tvm.py [--programs 500] [--seed 0] [--out /tmp/cse_diffs]
    .venv/bin/python tools/cse_vs_tvm.py --write tests/fixtures/common_subexpr_elim --only 3,17 [FILE.tvms ...]

Each program (a function of seed and index alone) is TVMScript in TVM 0.27's dialect: stores,
loops (some of symbolic extent), branches, lets, while loops, attributes and thread launches over
integer expressions drawn from a small pool, so subexpressions repeat at several depths and
scopes. (No buffer declarations: tvms leaves their shapes alone on purpose, see the pass.) TVM's Python (the side
virtualenv, or --tvm-python) parses each text, prints it, and prints it after its pass; tvms does
the same in the same dialect. A program whose input already prints differently is counted apart
(a parser or printer difference, not the pass's). The report gives the match rate of the pass's
output and writes each divergence (input, TVM's, tvms's) to --out.

With --write, the programs named by --only and the FILE.tvms given are written to the folder as
``<name>.input.tvms`` (TVM's print of the input) and ``<name>.expected.tvms`` (TVM's output of
the pass): the goldens of tests/test_common_subexpr_elim.py. Not part of ``make test``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import subprocess
import sys

TVM_PYTHON = "/work/tvm-venv/bin/python"
HEADER = ["# from tvm.script import ir as I", "# from tvm.script import tirx as T", "", "@I.ir_module",
          "class Module:", "    @T.prim_func",
          '    def main(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32"), x: T.int32, y: T.int32, z: T.int32):']
CONSTANTS = (2, 3, 5, 7)  # (never 0 or 1: parsers fold x * 1, x + 0, x // 1)
BINARY = ("+", "-", "*", "//", "%", "T.min", "T.max")


class _Program:
    """A random function body, written as text line by line."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list = []
        self.names = 0  # loop and let variables made so far (each name is new)
        self.pool: list = []  # (text, the variables it reads): expressions to use again
        self.threads = ["threadIdx.x", "blockIdx.x"]  # (each launched once at most)

    def leaf(self, visible: list) -> str:
        roll = self.rng.random()
        if roll < 0.25:
            return str(self.rng.choice(CONSTANTS))
        if roll < 0.3:
            return f"B[{self.rng.choice(visible)}]"  # (a load: never bound, nor what holds it)
        return self.rng.choice(visible)

    def expr(self, visible: list, depth: int) -> str:
        usable = [text for text, reads in self.pool if reads <= set(visible) and len(text) < 60]
        if usable and self.rng.random() < 0.35:
            return self.rng.choice(usable)
        if depth == 0 or self.rng.random() < 0.2:
            return self.leaf(visible)
        a, b = self.expr(visible, depth - 1), self.expr(visible, depth - 1)
        if a.isdigit() and b.isdigit():
            b = self.rng.choice(visible)  # (two constants fold)
        roll = self.rng.random()
        if roll < 0.06:
            text = f"T.Select({a} < {b}, {a}, {self.expr(visible, depth - 1)})"
        elif roll < 0.1 and not a.isdigit():
            text = f'T.Cast("int32", T.Cast("int64", {a}) * T.int64({self.rng.choice(CONSTANTS)}))'
        else:
            op = self.rng.choice(BINARY)
            text = f"{op}({a}, {b})" if op.startswith("T.") else f"({a} {op} {b})"
        self.pool.append((text, set(re.findall(r"\b[a-z]\w*", text)) & set(visible)))
        return text

    def extent(self, visible: list) -> str:
        """A loop's extent: TVM's parser simplifies one (``2 * x`` is ``x * 2``), so only forms it
        keeps as written: a name, or a name and a name or constant after it."""
        roll, a = self.rng.random(), self.rng.choice(visible)
        if roll < 0.3:
            return self.rng.choice(["4", a])
        b = self.rng.choice([str(self.rng.choice(CONSTANTS))] + [v for v in visible if v != a])
        text = f"T.min({a}, {b})" if roll < 0.4 else f"({a} {self.rng.choice(('+', '-', '*', '//', '%'))} {b})"
        self.pool.append((text, {a, b} & set(visible)))
        return text

    def body(self, visible: list, indent: int, depth: int) -> None:
        visible = list(visible)
        for _ in range(self.rng.randint(1, 3 if depth else 4)):
            pad = " " * indent
            roll = self.rng.random() if depth < 3 else 0.0
            if roll < 0.45:
                index = self.rng.choice([str(self.rng.randrange(64)), self.expr(visible, 1)])
                self.lines.append(f"{pad}A[{index}] = {self.expr(visible, 3)}")
            elif roll < 0.65:
                var, extent = self.fresh("i"), self.extent(visible)
                self.lines.append(f"{pad}for {var} in range({extent}):")
                self.body(visible + [var], indent + 4, depth + 1)
            elif roll < 0.8:
                self.lines.append(f"{pad}if {self.expr(visible, 2)} < {self.rng.choice(visible)}:")
                self.body(visible, indent + 4, depth + 1)
                if self.rng.random() < 0.5:
                    self.lines.append(f"{pad}else:")
                    self.body(visible, indent + 4, depth + 1)
            elif roll < 0.9:
                var = self.fresh("t")
                self.lines.append(f"{pad}{var}: T.let[T.int32] = {self.expr(visible, 2)}")
                visible.append(var)  # (the rest of the sequence reads it)
            elif roll < 0.93 and self.threads:
                var = self.fresh("t")
                self.lines.append(f'{pad}{var} = T.launch_thread("{self.threads.pop()}", {self.rng.choice(CONSTANTS) * 8})')
                visible.append(var)
            elif roll < 0.96:
                self.lines.append(f'{pad}with T.attr(0, "pragma_auto_unroll_max_step", {self.expr(visible, 2)}):')
                self.body(visible, indent + 4, depth + 1)
            else:
                self.lines.append(f"{pad}while {self.expr(visible, 1)} < {self.rng.choice(visible)}:")
                self.body(visible, indent + 4, depth + 1)

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"


def program(seed: int, index: int) -> str:
    """The TVMScript text (TVM 0.27's dialect) of program ``index`` of ``seed``."""
    made = _Program(random.Random(f"{seed}:{index}"))
    made.body(["x", "y", "z"], 8, 0)
    return "\n".join(HEADER + made.lines) + "\n"


def tvm_worker() -> None:
    """Run by TVM's Python: a JSON list of texts on stdin, [input, output] (or an error) for each."""
    import tvm

    results = []
    for text in json.load(sys.stdin):
        try:
            mod = tvm.script.from_source(text)
            results.append([mod.script(), tvm.tirx.transform.CommonSubexprElim()(mod).script()])
        except Exception as error:  # noqa: BLE001 (a program TVM refuses is counted, not fatal)
            results.append(f"error: {type(error).__name__}: {str(error).strip().splitlines()[-1:]}")
    json.dump(results, sys.stdout)


def through_tvm(texts: list, tvm_python: str) -> list:
    done = subprocess.run([tvm_python, __file__, "--tvm-worker"], input=json.dumps(texts), capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"TVM's worker failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def through_tvms(text: str):
    from tvms.lowering.tir.gpu.common_subexpr_elim import CommonSubexprElim
    from tvms.script import from_source

    try:
        mod = from_source(text)
        return [mod.script(dialect="tvm-0.27"), CommonSubexprElim()(mod).script(dialect="tvm-0.27")]
    except Exception as error:  # noqa: BLE001 (counted as an outcome)
        return f"error: {type(error).__name__}: {error}"


def outcome(theirs, ours) -> str:
    if isinstance(theirs, str):
        return "tvm refused"
    if isinstance(ours, str):
        return "tvms error"
    if theirs[0] != ours[0]:
        return "input prints differently"
    if theirs[1] == ours[1]:
        return "same"
    # (tvms prints T.Min(a, a) where reading T.min(a, a) back would fold it; TVM prints T.min)
    unfolded = ours[1].replace("T.Min(", "T.min(").replace("T.Max(", "T.max(")
    return "same but T.Min / T.Max" if theirs[1] == unfolded else "pass differs"


def write_goldens(folder: pathlib.Path, named: dict, results: list) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, result in zip(named, results):
        if isinstance(result, str):
            sys.exit(f"{name}: TVM refused it ({result})")
        (folder / f"{name}.input.tvms").write_text(result[0])
        (folder / f"{name}.expected.tvms").write_text(result[1])
        print(f"wrote {folder / name}.{{input,expected}}.tvms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=pathlib.Path, help="TVMScript inputs to write as goldens too")
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated program indexes")
    parser.add_argument("--out", type=pathlib.Path, help="a folder for the divergences")
    parser.add_argument("--write", type=pathlib.Path, help="write goldens of --only and FILEs here")
    parser.add_argument("--tvm-python", default=os.environ.get("TVMS_TVM_PYTHON", TVM_PYTHON))
    parser.add_argument("--tvm-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tvm_worker:
        return tvm_worker()
    indexes = [int(i) for i in args.only.split(",")] if args.only else range(args.programs)
    named = {f"random_{args.seed}_{i}": program(args.seed, i) for i in indexes}
    named.update({path.name.removesuffix(".tvms").removesuffix(".input"): path.read_text() for path in args.files})
    theirs = through_tvm(list(named.values()), args.tvm_python)
    if args.write:
        return write_goldens(args.write, named, theirs)
    counts: dict = {}
    for (name, text), their in zip(named.items(), theirs):
        ours = through_tvms(text)
        kind = outcome(their, ours)
        counts[kind] = counts.get(kind, 0) + 1
        if kind != "same" and args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.txt").write_text(f"{kind}\n=== input\n{text}\n=== TVM\n{their if isinstance(their, str) else their[1]}"
                                                  f"\n=== tvms\n{ours if isinstance(ours, str) else ours[1]}\n")
    same, minmax = counts.get("same", 0), counts.get("same but T.Min / T.Max", 0)
    compared = same + minmax + counts.get("pass differs", 0)
    print(", ".join(f"{kind}: {n}" for kind, n in sorted(counts.items())))
    print(f"pass output the same as TVM 0.27's on {same} of {compared} programs ({100 * same / max(compared, 1):.1f}%),"
          f" on {same + minmax} ({100 * (same + minmax) / max(compared, 1):.1f}%) but for T.Min / T.Max")


if __name__ == "__main__":
    main()
