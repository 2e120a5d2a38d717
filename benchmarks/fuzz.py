"""Fuzz tvms with mutated TVMScript: every input must be handled or refused with a TVMSError.

Inputs are the corpus (../shared/corpus, or the part of it copied into tests/fixtures/corpus in a
plain clone), the examples and generated programs (tests/strategies.py), each mutated by one to
three of: byte flips, token swaps, line deletion and duplication, truncation, deep nesting
(expressions, loops), huge literals, NUL bytes and odd unicode. Each input goes through the stages
a user reaches from the command line, in process:

- fmt: parse, print in the input's dialect, parse the printed text, print it again (the same);
- opt: LegalizeOps or the zero pipeline, on modules with Relax functions;
- schedule: a few random primitives on the blocks of the first PrimFunc;
- build: tvms.build of the first PrimFunc (sampled: it is slow).

Outcomes: ok, refused (a TVMSError: an expected refusal), roundtrip (fmt's output did not parse
back or printed differently), exception (any other exception, by type and innermost frame),
crash (the worker process died) and hang (over --timeout, more for a big input). Everything but
ok and refused is an escape, written to --out (the input, and a note with its recipe and
traceback) to reproduce.

    python benchmarks/fuzz.py --inputs 100000 --seed 1 --jobs 2
    python benchmarks/fuzz.py --inputs 2000 --stages fmt --jobs 0     # in this process

An input is a function of (seed, index) alone, so ``--only INDEX`` reproduces one.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_CORPUS = ROOT.parent / "shared" / "corpus"
CORPUS_COPY = ROOT / "tests" / "fixtures" / "corpus"
STAGES = ("fmt", "opt", "schedule", "build")
ESCAPES = ("roundtrip", "exception", "crash", "hang")


# ---------------------------------------------------------------- seeds
def seed_texts(generated: int, seed: int) -> list[tuple[str, str]]:
    """(name, text) of the unmutated inputs, in a fixed order."""
    corpus = SHARED_CORPUS if SHARED_CORPUS.is_dir() else CORPUS_COPY
    files = sorted(corpus.glob("*.tvms")) + sorted((ROOT / "examples").glob("*.tvms"))
    seeds = [(path.name, path.read_text()) for path in files]
    return seeds + generated_texts(generated, seed)


def generated_texts(count: int, seed: int) -> list[tuple[str, str]]:
    """Programs drawn from the round-trip tests' strategies, printed in both dialects; none when
    Hypothesis (a test dependency) is missing. The strategies are driven by a seeded random
    source outside a test, through Hypothesis's own data object."""
    try:
        from hypothesis.control import BuildContext
        from hypothesis.internal.conjecture.data import ConjectureData
        sys.path.insert(0, str(ROOT / "tests"))
        from strategies import ir_modules
    except ImportError:
        return []
    texts = []
    for i in range(count):
        data = ConjectureData(random=random.Random(f"{seed}:generated:{i}"), prefix=())
        try:
            with BuildContext(data, is_final=False, wrapped_test=None):
                mod = data.draw(ir_modules())
        except BaseException:  # the strategy gave up on this draw (rejected, overran): skip it
            continue
        dialect = "tvm-0.27" if i % 2 else "classic"
        texts.append((f"generated_{i}.tvms", mod.script(dialect=dialect) + "\n"))
    return texts


# ---------------------------------------------------------------- mutations
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d*)?(?:e[-+]?\d+)?|\*\*=?|[-+*/%<>=!]=|//=?|\S")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")
NAME = re.compile(r"\b[A-Za-z_]\w*\b")
HUGE = ("1e400", "-1e400", "1e-400", "2" * 61, str(2 ** 200), "-" + str(2 ** 200), "0x" + "f" * 40,
        "1_000", "0", "-0", "00", "0.0e", "inf", "nan", "9" * 5000)
ODD = ("\x00", "\ufeff", "\u200b", "\u2028", "\u00a0", "\u202e", "\x0c", "\x0b", "\r", "\t", "\\",
       "\u0301", "\U0001f600", "\uff11", "\u2167", "\u210c", "é", "ß", "\x7f", "'''", '"""', "#")
NEST_DEPTHS = (3, 20, 100, 300, 1000)


def byte_flips(rng: random.Random, text: str, inputs: "Inputs") -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        if chars:
            chars[rng.randrange(len(chars))] = chr(rng.choice((rng.randint(32, 126), rng.randint(0, 255))))
    return "".join(chars)


def token_swap(rng: random.Random, text: str, inputs: "Inputs") -> str:
    """Replace a token by another token (of this text or of any seed)."""
    spans = [m.span() for m in TOKEN.finditer(text)]
    if not spans:
        return text
    for _ in range(rng.randint(1, 3)):
        start, end = rng.choice(spans)
        other = rng.choice(inputs.tokens) if rng.random() < 0.5 else text[slice(*rng.choice(spans))]
        text = text[:start] + other + text[end:]
        spans = [m.span() for m in TOKEN.finditer(text)]
    return text


def delete_lines(rng: random.Random, text: str, inputs: "Inputs") -> str:
    lines = text.split("\n")
    start = rng.randrange(len(lines))
    del lines[start:start + rng.randint(1, 3)]
    return "\n".join(lines)


def duplicate_lines(rng: random.Random, text: str, inputs: "Inputs") -> str:
    lines = text.split("\n")
    start = rng.randrange(len(lines))
    chunk = lines[start:start + rng.randint(1, 4)]
    at = rng.choice((start, rng.randrange(len(lines) + 1)))
    return "\n".join(lines[:at] + chunk + lines[at:])


def truncate(rng: random.Random, text: str, inputs: "Inputs") -> str:
    return text[:rng.randrange(len(text) + 1)]


def deep_expression(rng: random.Random, text: str, inputs: "Inputs") -> str:
    """A number becomes a long sum, or a number in many parentheses."""
    numbers = list(NUMBER.finditer(text))
    depths = [d for d in NEST_DEPTHS if d <= inputs.max_depth]
    if not numbers:
        return text
    m = rng.choice(numbers)
    depth = rng.choice(depths)
    value = m.group()
    deep = (" + ".join([value] * depth) if rng.random() < 0.5
            else "(" * depth + value + ")" * depth)
    return text[:m.start()] + deep + text[m.end():]


def deep_loops(rng: random.Random, text: str, inputs: "Inputs") -> str:
    """A statement inside a function is wrapped in many nested loops (or a list in many lists)."""
    lines = text.split("\n")
    body = [i for i, line in enumerate(lines) if line.startswith("        ") and line.strip()]
    depths = [d for d in NEST_DEPTHS if d <= inputs.max_depth]
    if not body:
        return text
    i = rng.choice(body)
    depth = rng.choice(depths)
    indent = len(lines[i]) - len(lines[i].lstrip())
    if rng.random() < 0.3:
        lines[i] = lines[i].rstrip() + " + " + "[" * depth + "1" + "]" * depth
        return "\n".join(lines)
    nest = [" " * (indent + 4 * d) + f"for q{d} in range(2):" for d in range(depth)]
    lines[i:i + 1] = nest + [" " * (4 * depth) + lines[i]]
    return "\n".join(lines)


def huge_literal(rng: random.Random, text: str, inputs: "Inputs") -> str:
    if rng.random() < 0.3:  # a very long name
        names = list(NAME.finditer(text))
        if names:
            m = rng.choice(names)
            return text[:m.start()] + m.group() * rng.choice((50, 2000)) + text[m.end():]
    numbers = list(NUMBER.finditer(text))
    if not numbers:
        return text
    m = rng.choice(numbers)
    return text[:m.start()] + rng.choice(HUGE) + text[m.end():]


def odd_characters(rng: random.Random, text: str, inputs: "Inputs") -> str:
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(ODD) + text[at:]
    return text


MUTATORS = (byte_flips, token_swap, delete_lines, duplicate_lines, truncate, deep_expression,
            deep_loops, huge_literal, odd_characters)


@dataclass
class Inputs:
    """The seeds and the token pool; ``make(index)`` is the mutated input number ``index``."""

    seed: int
    seeds: list
    max_depth: int = NEST_DEPTHS[-1]  # of the nesting that the deep_* mutations make
    tokens: list = field(default_factory=list)

    def __post_init__(self) -> None:
        pool = {m.group() for _, text in self.seeds for m in TOKEN.finditer(text)}
        self.tokens = sorted(pool)

    def make(self, index: int) -> tuple[str, str, str]:
        """(name, text, recipe) of input ``index``: a seed and the mutations applied to it."""
        rng = random.Random(f"{self.seed}:{index}")
        name, text = rng.choice(self.seeds)
        recipe = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutate = rng.choice(MUTATORS)
            text = mutate(rng, text, self)
            recipe.append(mutate.__name__)
        return name, text, f"{name} <- {' + '.join(recipe)}"


# ---------------------------------------------------------------- stages
class RoundTripFailure(Exception):
    """fmt printed a text that does not parse back, or that prints differently."""


def stage_fmt(name: str, text: str):
    from tvms.script import from_source
    from tvms.ir.errors import TVMSError

    node = from_source(text, name)
    dialect = node.source_dialect
    printed = node.script(dialect=dialect)
    try:
        again = from_source(printed, f"{name} (printed)").script(dialect=dialect)
    except TVMSError as err:
        raise RoundTripFailure(f"the printed text does not parse back: {err}") from None
    if again != printed:
        raise RoundTripFailure("the printed text prints differently")
    return node


def _relax_functions(node) -> list:
    from tvms.ir.relax import Function
    return [gv for gv, f in getattr(node, "functions", {}).items() if isinstance(f, Function)]


def _prim_func_names(node) -> list[str]:
    from tvms.ir.function import PrimFunc
    return [gv.name_hint for gv, f in getattr(node, "functions", {}).items() if isinstance(f, PrimFunc)]


def stage_opt(node, rng: random.Random) -> None:
    from tvms import relax

    if not _relax_functions(node):
        return
    passes = relax.get_pipeline("zero") if rng.random() < 0.5 else relax.transform.LegalizeOps()
    passes(node)


BLOCK_NAME = re.compile(r"T\.s?block\(\"([^\"]*)\"")


def stage_schedule(node, rng: random.Random) -> None:
    """A few primitives on one block of the first PrimFunc (errors are ScheduleErrors)."""
    from tvms.tir import Schedule

    names = _prim_func_names(node)
    if not names:
        return
    blocks = [b for b in BLOCK_NAME.findall(node.script()) if b != "root"]
    if not blocks:
        return
    sch = Schedule(node)
    sch.work_on(names[0])
    block = sch.get_sblock(rng.choice(blocks))
    for _ in range(rng.randint(1, 3)):
        loops = sch.get_loops(block)
        step = rng.choice(("split", "fuse", "reorder", "parallel", "vectorize", "unroll",
                           "compute_inline", "reverse_compute_inline", "cache_read", "decompose"))
        if step == "compute_inline":
            sch.compute_inline(block)
            return
        if step == "reverse_compute_inline":
            sch.reverse_compute_inline(block)
            return
        if step == "cache_read":
            sch.cache_read(block, rng.randint(0, 1), rng.choice(("local", "shared")))
            continue
        if not loops:
            return
        loop = rng.choice(loops)
        if step == "split":
            sch.split(loop, factors=[None, rng.choice((1, 2, 3, 4, 16))])
        elif step == "fuse" and len(loops) > 1:
            at = rng.randrange(len(loops) - 1)
            sch.fuse(loops[at], loops[at + 1])
        elif step == "reorder" and len(loops) > 1:
            sch.reorder(*rng.sample(loops, len(loops)))
        elif step == "decompose":
            sch.decompose_reduction(block, loop)
            return
        elif step in ("parallel", "vectorize", "unroll"):
            getattr(sch, step)(loop)
    sch.mod.script()


def stage_build(node, rng: random.Random) -> None:
    import tvms

    names = _prim_func_names(node)
    if names:
        tvms.build(node[names[0]], target="llvm")


LATER_STAGES = {"opt": stage_opt, "schedule": stage_schedule, "build": stage_build}


@dataclass(frozen=True)
class Config:
    seed: int
    stages: tuple
    rates: dict  # stage -> the share of inputs that go through it (build is slow)
    generated: int
    max_depth: int = NEST_DEPTHS[-1]

    def inputs(self) -> Inputs:
        return Inputs(self.seed, seed_texts(self.generated, self.seed), self.max_depth)


def run_input(config: Config, inputs: Inputs, index: int) -> tuple[str, str, str]:
    """(outcome, signature, detail) of input ``index``; never raises."""
    from tvms.ir.errors import TVMSError

    name, text, _ = inputs.make(index)
    rng = random.Random(f"{config.seed}:{index}:stages")
    stage = "fmt"
    try:
        node = stage_fmt(name, text)
        for stage in STAGES[1:]:  # fmt gives the others their module
            if stage in config.stages and rng.random() < config.rates.get(stage, 1.0):
                LATER_STAGES[stage](node, rng)
    except TVMSError:
        return "refused", "", ""
    except RoundTripFailure as err:
        return "roundtrip", f"{stage}: {str(err)[:60]}", str(err)
    except Exception as err:  # noqa: BLE001  (everything else is what the fuzzer looks for)
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"
        signature = f"{stage}: {type(err).__name__} at {where}"
        return "exception", signature, "".join(traceback.format_exception(err))[-4000:]
    return "ok", "", ""


# ---------------------------------------------------------------- running
@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    escapes: Counter = field(default_factory=Counter)  # signature -> count
    examples: dict = field(default_factory=dict)  # signature -> first input index
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def inputs(self) -> int:
        return sum(self.counts.values())

    @property
    def escaped(self) -> int:
        return sum(self.counts[o] for o in ESCAPES)


def _exit_with_parent(parent: int) -> None:
    """A worker busy with a hanging input never reads its pipe: it leaves when its parent is gone."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def _worker(conn, config: Config, memory_mb: int, parent: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    try:
        import resource
        limit = memory_mb * 2 ** 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    inputs = config.inputs()
    conn.send("ready")
    while (index := conn.recv()) is not None:
        conn.send(run_input(config, inputs, index))


class Pool:
    """Worker processes that each run one input at a time; one past its deadline is killed."""

    def __init__(self, config: Config, jobs: int, memory_mb: int):
        self.config, self.jobs, self.memory_mb = config, jobs, memory_mb
        self.context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.context.Pipe()
        proc = self.context.Process(target=_worker, daemon=True,
                                    args=(child, self.config, self.memory_mb, os.getpid()))
        proc.start()
        child.close()
        parent.recv()  # "ready": the seeds are loaded
        return [proc, parent, None, 0.0]  # process, connection, input index, deadline

    def run(self, indices, budget, record, stop_at: float) -> None:
        """Run ``indices``; ``budget(index)`` is the seconds after which input ``index`` hangs."""
        pending = iter(indices)
        busy = 0
        while True:
            for w in self.workers:
                if w[2] is None and time.monotonic() < stop_at:
                    index = next(pending, None)
                    if index is not None:
                        w[2], w[3] = index, time.monotonic() + budget(index)
                        w[1].send(index)
                        busy += 1
            if busy == 0:
                break
            soonest = min(w[3] for w in self.workers if w[2] is not None)
            ready = wait([w[1] for w in self.workers if w[2] is not None],
                         timeout=max(0.0, soonest - time.monotonic()))
            for slot, w in enumerate(self.workers):
                if w[2] is None:
                    continue
                index = w[2]
                if w[1] in ready:
                    try:
                        record(index, *w[1].recv())
                        w[2] = None
                        busy -= 1
                        continue
                    except (EOFError, OSError):
                        w[0].join()
                        record(index, "crash", f"worker died (exit code {w[0].exitcode})", "")
                elif time.monotonic() >= w[3]:
                    w[0].kill()
                    w[0].join()
                    record(index, "hang", "over its time", f"over {budget(index):.1f} s")
                else:
                    continue
                busy -= 1
                self.workers[slot] = self._start()

    def close(self) -> None:
        for proc, conn, index, _ in self.workers:
            if index is None:  # idle: asked to stop; busy (interrupted): killed
                conn.send(None)
                proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()


def fuzz(count: int, config: Config, jobs: int = 0, timeout: float = 10.0, out: Path | None = None,
         memory_mb: int = 4096, start: int = 0, progress=None, minutes: float = float("inf")) -> Report:
    """Run inputs ``start .. start+count-1``, or those begun within ``minutes``; ``jobs=0`` runs
    them in this process (no timeout)."""
    inputs = config.inputs()
    report = Report()
    saved = Counter()

    def record(index: int, outcome: str, signature: str, detail: str) -> None:
        report.counts[outcome] += 1
        if outcome in ESCAPES:
            signature = signature if outcome == "exception" else f"{outcome}: {signature}"
            report.escapes[signature] += 1
            report.examples.setdefault(signature, index)
            if out is not None and saved[signature] < 5:
                saved[signature] += 1
                save_escape(out, inputs, index, signature, detail)
        done = sum(report.counts.values())
        if progress is not None and done % 2000 == 0:
            progress(done, report)

    began = time.perf_counter()
    stop_at = time.monotonic() + minutes * 60
    indices = range(start, start + count)
    try:
        if jobs == 0:
            for index in indices:
                if time.monotonic() >= stop_at:
                    break
                record(index, *run_input(config, inputs, index))
        else:
            pool = Pool(config, jobs, memory_mb)
            try:
                # a big input may take longer: the time allowed grows with its size
                pool.run(indices, lambda i: timeout * (1 + len(inputs.make(i)[1]) / 100_000), record,
                         stop_at)
            finally:
                pool.close()
    except KeyboardInterrupt:  # the report counts the inputs run so far
        report.interrupted = True
    report.seconds = time.perf_counter() - began
    return report


def save_escape(out: Path, inputs: Inputs, index: int, signature: str, detail: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _, text, recipe = inputs.make(index)
    (out / f"{index}.tvms").write_text(text, errors="surrogatepass")
    (out / f"{index}.txt").write_text(f"{signature}\ninput {index} of seed {inputs.seed}: "
                                      f"{recipe}\n\n{detail}\n")


def print_report(report: Report, out: Path | None) -> None:
    count = report.inputs
    rate = count / report.seconds if report.seconds else 0.0
    stopped = " (interrupted)" if report.interrupted else ""
    print(f"{count} inputs in {report.seconds:.1f} s ({rate:.1f} inputs/s){stopped}")
    print(f"{'outcome':<10} {'count':>8}")
    for outcome in ("ok", "refused") + ESCAPES:
        print(f"{outcome:<10} {report.counts[outcome]:>8}")
    if report.escapes:
        print("\nescapes (count, first input, signature):")
        for signature, n in report.escapes.most_common():
            print(f"{n:>8}  #{report.examples[signature]:<8} {signature}")
        if out is not None:
            print(f"\ninputs written to {out}/ (reproduce one with --only INDEX)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=2000, help="how many inputs (default 2000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2, help="worker processes; 0: in this process, no timeout")
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated, of " + ", ".join(STAGES))
    p.add_argument("--sample", default="build=0.02",
                   help="STAGE=SHARE,...: the share of inputs a stage sees (default build=0.02)")
    p.add_argument("--generated", type=int, default=40, help="generated programs among the seeds")
    p.add_argument("--max-depth", type=int, default=NEST_DEPTHS[-1],
                   help=f"deepest nesting made, of {', '.join(map(str, NEST_DEPTHS))}")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds an input may take, and as many per 100 KB of it (default 5)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit of a worker")
    p.add_argument("--out", type=Path, default=Path("fuzz-escapes"), help="where escaping inputs go")
    p.add_argument("--minutes", type=float, default=float("inf"),
                   help="begin no input after this many minutes (the report counts those run)")
    p.add_argument("--start", type=int, default=0, help="index of the first input")
    p.add_argument("--only", type=int, help="run input INDEX alone, in this process, and show it")
    args = p.parse_args(argv)
    stages = tuple(s for s in args.stages.split(",") if s)
    if not stages or set(stages) - set(STAGES):
        p.error(f"--stages: choose from {', '.join(STAGES)}")
    try:
        rates = {k: float(v) for k, v in (item.split("=") for item in args.sample.split(",") if item)}
    except ValueError:
        p.error("--sample: write STAGE=SHARE,... (build=0.02)")
    config = Config(args.seed, stages, rates, args.generated, args.max_depth)
    if args.only is not None:
        inputs = config.inputs()
        _, text, recipe = inputs.make(args.only)
        print(f"{recipe}\n{text!r}\n" if len(text) < 3000 else recipe)
        print(run_input(config, inputs, args.only))
        return 0

    began = time.perf_counter()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill: workers stop too

    def progress(done: int, report: Report) -> None:
        counts = ", ".join(f"{o} {report.counts[o]}" for o in ("ok", "refused") + ESCAPES)
        print(f"  {done} inputs in {time.perf_counter() - began:.0f} s: {counts}", file=sys.stderr, flush=True)

    report = fuzz(args.inputs, config, args.jobs, args.timeout, args.out, args.memory_mb,
                  args.start, progress, args.minutes)
    print_report(report, args.out)
    return 1 if report.escaped else 0


if __name__ == "__main__":
    sys.exit(main())
