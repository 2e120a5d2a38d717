"""ONNX's backend node tests (``onnx.backend.test.case.node.collect_testcases``: one model per
operator form, with inputs and expected outputs) through tvms: ``from_onnx`` -> ``tvms.compile``
-> Relax VM -> the outputs compared with the expected ones as ONNX's backend runner compares them
(same dtype; floats within the case's rtol/atol, 1e-3/1e-7 unless the case says otherwise; others
equal). Prints the pass rate and the failures by kind.

    .venv/bin/python benchmarks/onnx_suite.py                      # every case
    .venv/bin/python benchmarks/onnx_suite.py --match conv --budget 300
    .venv/bin/python benchmarks/onnx_suite.py --backend onnxruntime  # the same harness, onnxruntime
    .venv/bin/python benchmarks/onnx_suite.py --specialize          # shape/axes inputs as constants

A node whose shape or axis is decided by a run-time value is converted when the value arrives
(``tvms.onnx.specialized_node``: converted, compiled and cached on the first call of each value);
``--specialize`` binds such inputs only where from_onnx cannot defer the node (ONNX's inference
does not type its outputs) and raises ``NeedsConstantInputs``.

A case whose graph draws at random (Bernoulli, RandomUniform(Like), RandomNormal(Like),
Multinomial, Dropout in training mode with a ratio above 0) has as expected outputs one draw of
numpy's generator, which no other generator repeats: it is checked by the rule of
``check_draws`` instead (shape, dtype, seed, support, frequency) and counted as "random", apart
from the passes and the failures; "unchecked" where the rule has no check of the values drawn
(only their shape, dtype, seed and support).

Each case runs in a worker process with a timeout (``--timeout``); a worker that crashes or times
out is replaced, and the case counts as a crash or a timeout. ``--budget`` (seconds) stops taking
new cases; the report says how many ran.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import re
import sys
import time
import warnings

import numpy as np

KINDS = ("unsupported operator", "unsupported form", "conversion error", "compile error", "run error",
         "wrong result", "timeout", "crash")
# ONNX's operators that draw at random (and Dropout in training mode with a ratio above 0): a case's
# expected outputs are one draw of numpy's generator, which no other generator repeats, so such a
# case is checked by the rule of ``check_draws`` and counted as "random", not as a pass
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
DRAWN = ("random", "unchecked")  # (the verdicts of a random case that meets the rule, neither pass nor fail)
DRAWS = 8  # runs of a random case (a seeded draw must be reproducible, unseeded ones must not repeat)


def compare(outputs: list, expected: list, rtol: float, atol: float) -> str | None:
    """None when ``outputs`` match, else what differs (onnx's backend runner's checks)."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        if isinstance(ref, list) or isinstance(out, list):  # (a sequence: element by element)
            if not isinstance(out, list) or not isinstance(ref, list):
                return f"output {i}: {type(out).__name__}, expected {type(ref).__name__}"
            inner = compare(out, ref, rtol, atol)
            if inner:
                return f"output {i}: element {inner}"
            continue
        out, ref = np.asarray(out), np.asarray(ref)
        if out.dtype != ref.dtype:
            return f"output {i}: dtype {out.dtype}, expected {ref.dtype}"
        if out.shape != ref.shape:
            return f"output {i}: shape {out.shape}, expected {ref.shape}"
        try:
            narrow = ref.dtype.name.startswith(("bfloat16", "float8", "float6", "float4"))  # (ml_dtypes)
            if narrow:  # compared in float32, bfloat16 within two of its ulps, as onnx's runner does
                rtol = max(rtol, 2 ** -6) if ref.dtype.name == "bfloat16" else rtol
                out, ref = out.astype(np.float32), ref.astype(np.float32)
            if ref.dtype.kind in "fc":
                np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(out, ref)
        except AssertionError as err:
            return f"output {i}: " + " ".join(str(err).split())[:200]
    return None


def _known(model, feeds: dict) -> dict:
    """The values of ``model``'s graph known before it runs: its initializers and ``feeds``."""
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer} | feeds


def random_nodes(model, feeds: dict) -> list:
    """The nodes of ``model``'s graph that draw at random on the inputs ``feeds`` (a Dropout whose
    training_mode is true, or computed, and whose ratio is not 0)."""
    values = _known(model, feeds)
    drawn = []
    for node in model.graph.node:
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2]:
            training = values.get(node.input[2])
            ratio = values.get(node.input[1], 0.5) if node.input[1] else 0.5
            if training is None or (bool(np.asarray(training)) and float(np.asarray(ratio)) != 0):
                drawn.append(node)
        elif node.op_type in RANDOM_OPS:
            drawn.append(node)
    return drawn


def unseeded(model):
    """A copy of ``model`` whose nodes draw without their ``seed``: independent draws, run after
    run, to count frequencies over (a seeded draw repeats one draw of a few values)."""
    copy = type(model)()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        kept = [a for a in node.attribute if a.name != "seed"]
        del node.attribute[:]
        node.attribute.extend(kept)
    return copy


def coin_flips(model, feeds: dict, nodes: list) -> list:
    """(node, output, probabilities of 1) of each Bernoulli draw of ``nodes`` that is a graph
    output: a Bernoulli node of known probabilities, or ONNX's expansion of one, a RandomUniformLike
    compared (Less, Greater) with known values, the result cast or not."""
    from onnx import helper

    values, outputs = _known(model, feeds), {o.name for o in model.graph.output}
    users = collections.defaultdict(list)
    for node in model.graph.node:
        for name in node.input:
            users[name].append(node)
    flips = []
    for node in nodes:
        if node.op_type == "Bernoulli" and node.input[0] in values and node.output[0] in outputs:
            flips.append((node, node.output[0], np.asarray(values[node.input[0]], np.float64)))
        if node.op_type != "RandomUniformLike" or len(users[node.output[0]]) != 1:
            continue
        compare, = users[node.output[0]]
        if compare.op_type not in ("Less", "Greater") or len(set(compare.input)) != 2:
            continue
        other = [n for n in compare.input if n != node.output[0]][0]
        if other not in values or node.input[0] not in values:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        low, high = attrs.get("low", 0.0), attrs.get("high", 1.0)
        below = np.clip((np.asarray(values[other], np.float64) - low) / (high - low), 0, 1)  # (P(u < t))
        # (Less(u, t) and Greater(t, u) hold where u < t; the other two where u > t)
        p = below if (compare.op_type == "Less") == (compare.input[0] == node.output[0]) else 1 - below
        p = np.broadcast_to(p, np.broadcast_shapes(p.shape, np.shape(values[node.input[0]])))  # (the compare's shape)
        out = compare.output[0]
        casts = users[out]
        if len(casts) == 1 and casts[0].op_type == "Cast":
            out = casts[0].output[0]
        if out in outputs:
            flips.append((node, out, p))
    return flips


def _plausible(hits: float, mean: float, variance: float) -> bool:
    """Whether a count of ``hits`` is within 4 standard deviations (and one) of its ``mean``."""
    return abs(hits - mean) <= 4 * np.sqrt(variance) + 1


def check_draws(start, expected: list, model, feeds: dict, nodes: list) -> tuple[str, str]:
    """The rule for a case that draws at random: ``DRAWS`` runs in one session, each of the
    expected outputs' count, dtype and shape; seeded (every drawing node has a seed), the first
    run of a second session the same as the first's (a seed may give the same draw in every
    run, as tvms does, or a stream of draws, as onnxruntime does); unseeded, not all the same; an
    output whose expected values are all 0 or 1 (a Bernoulli draw, a mask) holding only 0 and 1.
    Then the frequencies, over ``DRAWS`` runs of the model without its seeds
    (``start(unseeded(model))``): a Bernoulli draw's ones (``coin_flips``) as many as its
    probabilities make likely; a training-mode Dropout's output the input where its mask keeps
    it, scaled by 1 / (1 - ratio), 0 elsewhere, keeping as many as 1 - ratio makes likely; a
    RandomUniform(Like) within [low, high], its sum near its mean. ("random", what was checked),
    ("unchecked", ...) where a drawing node's values reach no such check, or the failure's
    (kind, detail). ``start(variant=None)`` gives a function running ``variant`` (default: the
    case's model) in a session of its own."""
    from onnx import helper

    want = [(str(np.asarray(e).dtype), np.shape(e)) for e in expected]

    def sample(run) -> tuple:
        """(``DRAWS`` runs' outputs, None), or (None, the failure's (kind, detail))."""
        draws = []
        for _ in range(DRAWS):
            try:
                draws.append([np.asarray(o) for o in run()])
            except Exception as err:
                return None, ("run error", f"{type(err).__name__}: {err}")
            got = [(str(o.dtype), o.shape) for o in draws[-1]]
            if got != want:
                return None, ("wrong result", f"outputs (dtype, shape) {got}, expected {want}")
        return draws, None
    runs, failure = sample(start())
    if failure:
        return failure
    has_seed = [any(a.name == "seed" for a in n.attribute) for n in nodes]
    seeded = all(has_seed)

    def same(a, b):
        return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    if seeded and not same(runs[0], start()()):
        return "wrong result", "a seeded draw differs between two sessions"
    if not seeded and all(same(runs[0], r) for r in runs[1:]):
        return "wrong result", f"the unseeded draws are the same in all {DRAWS} runs"
    checked = ["shape/dtype", "seed" if seeded else "fresh draws"]
    outputs = [o.name for o in model.graph.output]
    for i, ref in enumerate(expected):
        if np.isin(np.asarray(ref), [0, 1]).all() and not all(np.isin(r[i], [0, 1]).all() for r in runs):
            return "wrong result", f"output {i}: values other than 0 and 1, where the expected draw holds only those"
    checked.append("support")
    if any(has_seed):  # (frequencies over independent draws)
        try:
            runs, failure = sample(start(unseeded(model)))
        except Exception as err:
            failure = "compile error", f"{type(err).__name__}: {err}"
        if failure:
            return failure[0], "without the seeds: " + failure[1]
        checked.append(f"{DRAWS} runs without the seeds")

    def values(name: str) -> np.ndarray:
        return np.stack([r[outputs.index(name)] for r in runs]).astype(np.float64)
    done = set()
    for node, out, p in coin_flips(model, feeds, nodes):
        y = values(out)
        if not _plausible(y.sum(), DRAWS * p.sum(), DRAWS * np.sum(p * (1 - p))):
            return "wrong result", f"{y.sum():g} ones in {DRAWS} draws, where {DRAWS * p.sum():.1f} are likely"
        checked.append("Bernoulli frequency")
        done.add(id(node))
    for node in nodes:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if id(node) in done or node.output[0] not in outputs:
            continue
        y = values(node.output[0])
        x = feeds.get(node.input[0]) if node.input else None
        if node.op_type == "Dropout" and x is not None:
            ratio = float(np.asarray(feeds.get(node.input[1], 0.5) if node.input[1] else 0.5))
            masks = values(node.output[1]) != 0 if len(node.output) > 1 and node.output[1] in outputs else y != 0
            for out, mask in zip(y, masks):
                if not np.allclose(out, np.where(mask, x.astype(np.float64) / (1 - ratio), 0), rtol=1e-5, atol=1e-6):
                    return "wrong result", "the output is not the input scaled by 1 / (1 - ratio) where the mask keeps it, 0 elsewhere"
            kept = sum(int(np.count_nonzero(m[x != 0])) for m in masks)
            n = DRAWS * int(np.count_nonzero(x))
            if not _plausible(kept, n * (1 - ratio), n * ratio * (1 - ratio)):
                return "wrong result", f"{kept} elements kept of {n} at a ratio of {ratio:g}"
            checked.append("Dropout mask and kept fraction")
        elif node.op_type.startswith("RandomUniform"):
            low, high = attrs.get("low", 0.0), attrs.get("high", 1.0)
            if not (low <= y).all() or not (y <= high).all():
                return "wrong result", "values outside [low, high]"
            if not _plausible(y.sum(), y.size * (low + high) / 2, y.size * (high - low) ** 2 / 12):
                return "wrong result", f"a mean of {y.mean():g}, where {(low + high) / 2:g} is likely"
            checked.append("range and mean")
        else:
            continue
        done.add(id(node))
    blind = sorted({n.op_type for n in nodes if id(n) not in done})
    if blind:  # (no real check of these draws: not counted under the rule)
        return "unchecked", f"checked: {', '.join(checked)}; no check of the values drawn by {', '.join(blind)}"
    return "random", "checked: " + ", ".join(checked)


def run_tvms(model_bytes: bytes, data_sets: list, rtol: float, atol: float,
             specialize: bool = False) -> tuple[str, str]:
    """(kind, detail) of one case through tvms; kind "pass" when every data set matches.
    ``specialize``: a graph input that from_onnx needs as a constant (an axes or shape input) is
    bound to the data set's value (``bind_inputs``), one compile per data set."""
    import onnx

    import tvms
    from tvms import relax
    from tvms.ir.errors import TVMSError
    from tvms.relax.frontend.onnx import NeedsConstantInputs, bind_inputs, from_onnx

    model = onnx.load_from_string(model_bytes)
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    structured = {i.name for i in model.graph.input if not i.type.HasField("tensor_type")}
    drawn = None  # (a random case's verdict, one of DRAWN, unless a data set fails)
    for inputs, expected in data_sets:
        feeds, bound = dict(zip(names, inputs)), {}
        # (sequence and optional inputs: their lengths and element shapes, known at import)
        shapes = {n: _structure(feeds[n]) for n in names if n in structured}
        try:
            while True:
                try:
                    mod = from_onnx(bind_inputs(model, bound) if bound else model, shape_dict=shapes)
                    break
                except NeedsConstantInputs as err:
                    if not specialize or set(err.inputs) <= set(bound):
                        raise
                    bound.update({name: feeds[name] for name in err.inputs})
        except TVMSError as err:
            text = str(err)
            if re.search(r"the operator \S+ is not supported|operators of domain", text):
                return "unsupported operator", text
            return ("unsupported form" if "not supported" in text else "conversion error"), text
        except Exception as err:  # (a converter's bug: counted, not raised)
            return "conversion error", f"{type(err).__name__}: {err}"
        try:
            executable = tvms.compile(mod, "llvm")
            vms = [relax.VirtualMachine(executable, tvms.cpu())]
        except Exception as err:
            return "compile error", f"{type(err).__name__}: {err}"

        def start(variant=None):  # (a later start, or a variant of the model: a VM of its own)
            if variant is not None:
                mod = from_onnx(bind_inputs(variant, bound) if bound else variant, shape_dict=shapes)
                vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
            else:
                vm = vms.pop() if vms else relax.VirtualMachine(executable, tvms.cpu())

            def run():
                result = vm["main"](*[_vm_value(tvms, feeds[n]) for n in names if n not in bound and feeds[n] is not None])
                return [_numpy(r) for r in (result if len(model.graph.output) > 1 else [result])]
            return run

        verdict = checked(start, expected, rtol, atol, model, feeds)
        if verdict and verdict[0] not in DRAWN:
            return verdict
        drawn = drawn or verdict
    return drawn or ("pass", "")


def checked(start, expected: list, rtol: float, atol: float, model, feeds: dict) -> tuple[str, str] | None:
    """``check_draws`` for a case that draws at random, else ``check``; ``start()`` gives a
    function running the model in a session (a VM) of its own (``start(variant)``: ``variant``)."""
    nodes = random_nodes(model, feeds)
    return check_draws(start, expected, model, feeds, nodes) if nodes else check(start(), expected, rtol, atol)


def _structure(value):
    """What from_onnx's shape_dict says of a sequence or optional input's value."""
    if value is None:
        return None
    return [_structure(v) for v in value] if isinstance(value, list) else list(np.shape(value))


def _vm_value(tvms, value):
    """A value for the VM: a sequence is a tuple."""
    if isinstance(value, list):
        return tuple(_vm_value(tvms, v) for v in value)
    return tvms.nd.array(np.asarray(value))


def _numpy(result):
    return [_numpy(r) for r in result] if isinstance(result, (list, tuple)) else result.numpy()


def check(run, expected: list, rtol: float, atol: float) -> tuple[str, str] | None:
    """None when ``run()``'s outputs match ``expected``, else the failure's (kind, detail)."""
    try:
        outputs = run()
    except Exception as err:
        return "run error", f"{type(err).__name__}: {err}"
    mismatch = compare(outputs, expected, rtol, atol)
    return ("wrong result", mismatch) if mismatch else None


def run_onnxruntime(model_bytes: bytes, data_sets: list, rtol: float, atol: float,
                    specialize: bool = False) -> tuple[str, str]:
    import onnx
    import onnxruntime

    model = onnx.load_from_string(model_bytes)
    try:
        session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    except Exception as err:
        return "conversion error", f"{type(err).__name__}: {err}"
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    drawn, sessions = None, [session]
    for inputs, expected in data_sets:
        feeds = {n: x if isinstance(x, list) else np.asarray(x) for n, x in zip(names, inputs)}  # (scalars)

        def start(variant=None):  # (a later start, or a variant of the model: a session of its own)
            own = sessions.pop() if sessions and variant is None else onnxruntime.InferenceSession(
                model_bytes if variant is None else variant.SerializeToString(), providers=["CPUExecutionProvider"])
            return lambda: own.run(None, feeds)

        verdict = checked(start, expected, rtol, atol, model, feeds)
        if verdict and verdict[0] not in DRAWN:
            return verdict
        drawn = drawn or verdict
    return drawn or ("pass", "")


BACKENDS = {"tvms": run_tvms, "onnxruntime": run_onnxruntime}


def _worker(backend: str, conn) -> None:
    warnings.simplefilter("ignore")
    run = BACKENDS[backend]
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            conn.send(run(*job))
        except Exception as err:  # (the harness's own failure still reports the case)
            conn.send(("crash", f"{type(err).__name__}: {err}"))


class Worker:
    """A process that runs cases one at a time; replaced after a crash or a timeout."""

    def __init__(self, backend: str):
        self.backend = backend
        self._start()

    def _start(self) -> None:
        self.conn, child = mp.Pipe()
        self.process = mp.get_context("fork").Process(target=_worker, args=(self.backend, child), daemon=True)
        self.process.start()

    def run(self, job: tuple, timeout: float) -> tuple[str, str]:
        try:
            self.conn.send(job)
            if self.conn.poll(timeout):
                return self.conn.recv()
            kind, detail = "timeout", f"over {timeout:g} s"
        except (EOFError, OSError, BrokenPipeError) as err:
            kind, detail = "crash", f"the worker died ({type(err).__name__}, exit {self.process.exitcode})"
        self.process.kill()
        self.process.join()
        self._start()
        return kind, detail

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(5)


def node_cases(match: str | None = None) -> list:
    """ONNX's node test cases (made in memory by the onnx package), optionally those whose name
    contains ``match``."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return [c for c in cases if not match or re.search(match, c.name)]


def case_job(case, specialize: bool = False) -> tuple:
    from onnx import TensorProto, numpy_helper

    def arrays(values):  # (some cases hold TensorProtos, which ONNX's runner converts so)
        return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for v in values]

    return (case.model.SerializeToString(), [(arrays(i), arrays(o)) for i, o in case.data_sets],
            case.rtol, case.atol, specialize)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=list(BACKENDS), default="tvms")
    parser.add_argument("--match", help="a regular expression: only the cases whose name matches")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    parser.add_argument("--budget", type=float, help="seconds: take no new case after this")
    parser.add_argument("--failures", action="store_true", help="list every failing case with its reason")
    parser.add_argument("--specialize", action="store_true",
                        help="bind the graph inputs that decide shapes or axes to the case's values "
                             "(a compile per data set, as a runtime specializing on them would); "
                             "a node whose inputs are then all constants is evaluated at import "
                             "by onnx's reference evaluator, which also made the expected "
                             "outputs, so such cases do not test its converter")
    args = parser.parse_args(argv)

    cases = node_cases(args.match)
    worker = Worker(args.backend)
    start = time.monotonic()
    results: dict[str, tuple[str, str]] = {}
    for case in cases:
        if args.budget and time.monotonic() - start > args.budget:
            break
        results[case.name] = worker.run(case_job(case, args.specialize), args.timeout)
        print(f"{len(results)}/{len(cases)} {case.name}: {results[case.name][0]}", file=sys.stderr)
    worker.close()
    title = args.backend + " (inputs deciding shapes bound)" * args.specialize
    report(title, results, len(cases), time.monotonic() - start, args.failures)
    return 0


def report(backend: str, results: dict, total: int, seconds: float, list_failures: bool) -> None:
    passed = sum(kind == "pass" for kind, _ in results.values())
    drawn = sorted(name for name, (kind, _) in results.items() if kind == "random")
    ran = len(results)
    print(f"{backend}: {passed} of {ran} cases pass ({100 * passed / max(ran, 1):.1f}%); "
          f"{ran} of {total} cases ran in {seconds:.0f} s")
    if drawn:
        print(f"random: {len(drawn)} cases draw at random and meet the rule for draws (check_draws: shape, "
              f"dtype, seed, support, frequency), not counted as passes: {' '.join(drawn)}")
    blind = sorted(name for name, (kind, _) in results.items() if kind == "unchecked")
    if blind:
        print(f"unchecked: {len(blind)} cases draw values the rule for draws cannot check (shape, dtype, seed "
              f"and support only), neither passes nor failures: {' '.join(blind)}")
    by_kind = collections.Counter(kind for kind, _ in results.values() if kind not in ("pass",) + DRAWN)
    print(f"{'failure kind':<22}{'cases':>6}  most frequent reasons")
    for kind in KINDS:
        if by_kind[kind]:
            reasons = collections.Counter(_reason(d) for k, d in results.values() if k == kind)
            top = "; ".join(f"{r} ({n})" for r, n in reasons.most_common(3))
            print(f"{kind:<22}{by_kind[kind]:>6}  {top[:160]}")
    if list_failures:
        for name, (kind, detail) in sorted(results.items()):
            if kind not in ("pass",) + DRAWN:
                print(f"  {name}: {kind}: {detail[:300]}")


def _reason(detail: str) -> str:
    """A failure's message without what is particular to the case (node names, numbers)."""
    operator = re.search(r"the operator (\S+) is not supported", detail)
    if operator:
        return operator.group(1)
    detail = re.sub(r"node '[^']*' ", "", detail)
    return re.sub(r"\d+", "N", detail)[:80]


if __name__ == "__main__":
    sys.exit(main())
