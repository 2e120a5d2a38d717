"""ONNX's random operators (``script/onnx_ops_random.py``, ``runtime/random_ops.py``): checked by
statistics over many draws (means and frequencies within 5 standard deviations), by their seeds
(the same draw on every call and in every VM) and by fresh draws without one, and by what the
Relax passes leave of them (impure calls, never folded or merged). ONNX's node suite cannot
compare their values (its expected outputs are one draw of numpy's generator); its rule for them
is ``benchmarks/onnx_suite.py``'s ``check_draws``. Skipped without the onnx package."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.ir.relax_well_formed import well_formed_problem  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402


def _model(nodes, inputs, outputs, opset=22):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, TP.UNDEFINED, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vm(mod):
    return relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())


def _run(vm, *args):
    out = vm["main"](*[tvms.nd.array(a) for a in args])
    return [o.numpy() for o in out] if isinstance(out, (list, tuple)) else [out.numpy()]


def _near(value, mean, sd):
    assert abs(value - mean) <= 5 * sd, (value, mean, sd)


N = 20000  # draws per statistic


@pytest.fixture(scope="module")
def draws():
    """One model of every random operator (two identical unseeded RandomUniform nodes among
    them), compiled once, and its module."""
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[100, N // 100], low=-2.0, high=3.0),
             helper.make_node("RandomUniform", [], ["u2"], shape=[100, N // 100], low=-2.0, high=3.0),
             helper.make_node("RandomNormalLike", ["x"], ["n"], mean=1.0, scale=2.0, dtype=TP.DOUBLE),
             helper.make_node("Bernoulli", ["p"], ["b"]),
             helper.make_node("Multinomial", ["logits"], ["m"], sample_size=N, dtype=TP.INT64),
             helper.make_node("RandomUniformLike", ["x"], ["s"], seed=3.0),
             helper.make_node("RandomNormal", [], ["s2"], shape=[4], seed=3.0, dtype=TP.FLOAT16)]
    model = _model(nodes, [("x", TP.FLOAT, ["rows", 100]), ("p", TP.FLOAT, [3, N]), ("logits", TP.FLOAT, [2, 3])],
                   ["u", "u2", "n", "b", "m", "s", "s2"])
    mod = from_onnx(model)
    return mod, _vm(mod)


def _inputs(rows=N // 100):
    p = np.repeat(np.array([[0.1], [0.5], [0.9]], np.float32), N, axis=1)
    logits = np.log(np.array([[0.2, 0.3, 0.5], [1, 1, 1e-30]], np.float32))
    return np.zeros((rows, 100), np.float32), p, logits


def test_draws_follow_their_distributions(draws):
    _, vm = draws
    u, u2, n, b, m, s, s2 = _run(vm, *_inputs())
    assert u.shape == (100, N // 100) and u.dtype == np.float32 and -2 <= u.min() and u.max() < 3
    _near(u.mean(), 0.5, 5 / np.sqrt(12 * N))
    assert n.shape == (N // 100, 100) and n.dtype == np.float64  # (the shape of x, the dtype asked)
    _near(n.mean(), 1.0, 2 / np.sqrt(N))
    _near(n.std(), 2.0, 2 / np.sqrt(2 * N))
    assert b.dtype == np.float32 and set(np.unique(b)) <= {0, 1}
    for row, prob in zip(b, (0.1, 0.5, 0.9)):  # (1 with probability p)
        _near(row.mean(), prob, np.sqrt(prob * (1 - prob) / N))
    assert m.shape == (2, N) and m.dtype == np.int64
    for k, prob in enumerate((0.2, 0.3, 0.5)):  # (classes drawn with probabilities softmax(logits))
        _near(np.mean(m[0] == k), prob, np.sqrt(prob * (1 - prob) / N))
    assert set(np.unique(m[1])) == {0, 1}
    assert s.shape == (N // 100, 100) and s2.dtype == np.float16


def test_a_seed_repeats_its_draw_and_no_seed_draws_afresh(draws):
    mod, vm = draws
    first, second = _run(vm, *_inputs()), _run(vm, *_inputs())
    other = _run(_vm(mod), *_inputs())  # (another VM of the same module)
    for k in (5, 6):  # seeded: the same on every call, in every VM
        np.testing.assert_array_equal(first[k], second[k])
        np.testing.assert_array_equal(first[k], other[k])
    for k in range(5):  # unseeded: a fresh draw on every call
        assert not np.array_equal(first[k], second[k])
    assert not np.array_equal(first[0], first[1])  # (two equal nodes are two draws: not merged)
    smaller = _run(vm, *_inputs(rows=3))  # (RandomUniformLike of a symbolic shape)
    assert smaller[5].shape == (3, 100) and smaller[2].shape == (3, 100)


def test_draws_are_impure_calls_outside_dataflow_blocks(draws):
    mod, _ = draws
    main = mod["main"]
    assert not main.is_pure and well_formed_problem(mod) is None
    text = mod.script()
    assert text.count('R.call_packed("tvms.random.') == 7 and "@R.function(pure=False)" in text
    # (FoldConstant, which folds calls of constants, leaves draws of no inputs)
    folded = relax.transform.FoldConstant()(mod)
    assert folded.script().count('R.call_packed("tvms.random.') == 7


def _dropout_model(ratio_input: bool):
    ratio = [] if ratio_input else [helper.make_node("Constant", [], ["r"], value_float=0.75),
                                     helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", TP.BOOL, [], [1]))]
    inputs = [("x", TP.FLOAT, [50, 400])] + ([("r", TP.FLOAT, []), ("t", TP.BOOL, [])] if ratio_input else [])
    return _model(ratio + [helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=7)], inputs, ["y", "mask"])


@pytest.mark.parametrize("ratio_input", [False, True], ids=["constant", "run-time"])
def test_training_dropout_keeps_and_scales(ratio_input):
    """Each element kept with probability 1 - ratio, scaled by 1 / (1 - ratio), and its mask; a
    ratio and training_mode known only at run time convert when they arrive (the deferred call
    is impure too)."""
    mod = from_onnx(_dropout_model(ratio_input))
    assert not mod["main"].is_pure
    x = np.random.default_rng(0).standard_normal((50, 400)).astype(np.float32) + 5
    extra = [np.array(0.75, np.float32), np.array(True)] if ratio_input else []
    vm = _vm(mod)
    y, mask = _run(vm, x, *extra)
    assert mask.dtype == np.bool_ and y.dtype == np.float32
    np.testing.assert_allclose(y, np.where(mask, x * 4, 0), rtol=1e-6)
    _near(mask.mean(), 0.25, np.sqrt(0.25 * 0.75 / x.size))
    again, _ = _run(vm, x, *extra)
    np.testing.assert_array_equal(y, again)  # (seed=7: the same mask on every call)


def test_random_operators_refuse_what_they_do_not_draw():
    cases = [(helper.make_node("RandomUniform", [], ["y"], shape=[2], dtype=TP.INT32), [], "the dtype int32"),
             (helper.make_node("Multinomial", ["x"], ["y"], dtype=TP.FLOAT), [("x", TP.FLOAT, [2, 3])], "the dtype float32"),
             (helper.make_node("Bernoulli", ["x"], ["y"]), [("x", TP.INT32, [2])], "probabilities of dtype int32")]
    for node, inputs, message in cases:
        with pytest.raises(TVMSError, match=message):
            from_onnx(_model([node], inputs, ["y"]))
    # (a draw, or a Dropout converted at run time, inside a Loop body: its function would be impure)
    for node, extra in ((helper.make_node("RandomUniformLike", ["v"], ["w"]), []),
                        (helper.make_node("Dropout", ["v", "r", "t"], ["w"]), [("r", TP.FLOAT, []), ("t", TP.BOOL, [])])):
        body = helper.make_graph([node], "body", [helper.make_tensor_value_info(*i) for i in
                                                  (("i", TP.INT64, []), ("c", TP.BOOL, []), ("v", TP.FLOAT, [2]))],
                                 [helper.make_tensor_value_info(*o) for o in (("c", TP.BOOL, []), ("w", TP.FLOAT, [2]))])
        loop = helper.make_node("Loop", ["n", "", "v0"], ["vN"], body=body)
        with pytest.raises(TVMSError, match="a random operator inside an If, Loop or Scan body"):
            from_onnx(_model([loop], [("n", TP.INT64, []), ("v0", TP.FLOAT, [2])] + extra, ["vN"]))


def test_the_suites_rule_for_draws_fails_what_is_not_a_draw():
    """``benchmarks/onnx_suite.py``'s ``check_draws`` on made-up runs: honest draws meet it; a
    repeated unseeded draw, a biased one (seeded or not, Bernoulli or its expansion) and a Dropout
    that keeps everything do not; draws it cannot check are "unchecked"."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("onnx_suite", Path(__file__).resolve().parent.parent
                                                  / "benchmarks" / "onnx_suite.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    from tvms.script.onnx_ops_random import RANDOM_OPS

    assert suite.RANDOM_OPS | {"Dropout"} == RANDOM_OPS  # (the suite keeps its own list: no tvms for onnxruntime)
    rng = np.random.default_rng(5)
    p = np.full(200, 0.3, np.float32)
    coin = _model([helper.make_node("Bernoulli", ["p"], ["y"])], [("p", TP.FLOAT, [200])], ["y"])
    x = np.ones((200,), np.float32)
    drop = _model([helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])],
                  [("x", TP.FLOAT, [200]), ("r", TP.FLOAT, []), ("t", TP.BOOL, [])], ["y", "mask"])
    feeds = {"x": x, "r": np.array(0.5, np.float32), "t": np.array(True)}

    def verdict(model, feeds, expected, run, unseeded_run=None):
        """The rule's verdict on ``run`` (and ``unseeded_run`` for the model without its seeds)."""
        nodes = suite.random_nodes(model, feeds)
        return suite.check_draws(lambda variant=None: run if variant is None else unseeded_run,
                                 expected, model, feeds, nodes)[0]

    def kept(rate):
        mask = rng.random(200) >= rate
        return [np.where(mask, x * 2, 0).astype(np.float32), mask]
    expected = [(p > 0.5).astype(np.float32)]
    assert verdict(coin, {"p": p}, expected, lambda: [(rng.random(200) < p).astype(np.float32)]) == "random"
    assert verdict(coin, {"p": p}, expected, lambda: [np.zeros(200, np.float32)]) == "wrong result"
    assert verdict(coin, {"p": p}, expected, lambda: [(rng.random(200) < 0.6).astype(np.float32)]) == "wrong result"
    assert verdict(drop, feeds, kept(0.5), lambda: kept(0.5)) == "random"
    assert verdict(drop, feeds, kept(0.5), lambda: kept(0.0)) == "wrong result"  # (keeps all)
    assert verdict(drop, feeds, kept(0.5), lambda: [x * 2, rng.random(200) >= 0.5]) == "wrong result"  # (mask ignored)

    # seeded (one draw of 10, as in ONNX's cases): the frequency is counted over runs without the seed
    p10 = np.full(10, 0.5, np.float32)
    seeded = _model([helper.make_node("Bernoulli", ["p"], ["y"], seed=1.0)], [("p", TP.FLOAT, [10])], ["y"])
    draw = (np.random.default_rng(1).random(10) < p10).astype(np.float32)
    fresh = lambda: [(rng.random(10) < p10).astype(np.float32)]  # noqa: E731
    assert verdict(seeded, {"p": p10}, [draw], lambda: [draw], fresh) == "random"
    zeros = lambda: [np.zeros(10, np.float32)]  # noqa: E731
    assert verdict(seeded, {"p": p10}, [draw], zeros, zeros) == "wrong result"
    # ONNX's expansion of Bernoulli: RandomUniformLike -> Greater -> Cast (1 where u > p)
    expanded = _model([helper.make_node("RandomUniformLike", ["p"], ["u"]), helper.make_node("Greater", ["u", "p"], ["g"]),
                       helper.make_node("Cast", ["g"], ["y"], to=TP.FLOAT)], [("p", TP.FLOAT, [200])], ["y"])
    for ones, kind in ((lambda: rng.random(200) > p, "random"), (lambda: rng.random(200) < 0.05, "wrong result"),
                       (lambda: rng.random(200) < p, "wrong result")):
        assert verdict(expanded, {"p": p}, expected, lambda: [ones().astype(np.float32)]) == kind
    # values the rule cannot check: reported as unchecked, not as meeting the rule
    normal = _model([helper.make_node("RandomNormal", [], ["y"], shape=[10])], [], ["y"])
    fresh_normal = lambda: [rng.standard_normal(10).astype(np.float32)]  # noqa: E731
    assert verdict(normal, {}, fresh_normal(), fresh_normal) == "unchecked"


def test_16_bit_draws_stay_below_one():
    """A uniform value just below 1 rounds to 1 in float16 and bfloat16: Bernoulli(p=1) draws
    in float32 (always 1), RandomUniform's values stay below high."""
    import ml_dtypes

    nodes = [helper.make_node("Bernoulli", ["h"], ["bh"]), helper.make_node("Bernoulli", ["b"], ["bb"]),
             helper.make_node("RandomUniform", [], ["uh"], shape=[N], dtype=TP.FLOAT16),
             helper.make_node("RandomUniform", [], ["ub"], shape=[N], dtype=TP.BFLOAT16)]
    model = _model(nodes, [("h", TP.FLOAT16, [N]), ("b", TP.BFLOAT16, [2, 5 * N])], ["bh", "bb", "uh", "ub"])
    below = 1 - 2 ** -8  # (bfloat16's largest value below 1: a bfloat16 draw makes it 1 - 3 * 2 ** -9)
    b = np.array([[1.0], [below]], ml_dtypes.bfloat16).repeat(5 * N, axis=1)
    bh, bb, uh, ub = _run(_vm(from_onnx(model)), np.ones(N, np.float16), b)
    assert bh.dtype == np.float16 and (bh == 1).all() and (bb[0].astype(np.float32) == 1).all()
    _near(bb[1].astype(np.float32).mean(), below, np.sqrt(below * (1 - below) / (5 * N)))
    assert uh.dtype == np.float16 and uh.max() < 1 and ub.astype(np.float32).max() < 1


def test_forked_processes_draw_their_own_values():
    import multiprocessing as mp

    from tvms.runtime.random_ops import uniform

    def child(conn):
        conn.send(uniform((8,), "float64", 0.0, 1.0))
    draws = []
    for _ in range(2):
        parent, end = mp.get_context("fork").Pipe()
        process = mp.get_context("fork").Process(target=child, args=(end,))
        process.start()
        draws.append(parent.recv())
        process.join()
    assert not np.array_equal(draws[0], draws[1])  # (each child its own stream, not its parent's)
    assert not np.array_equal(draws[0], uniform((8,), "float64", 0.0, 1.0))


def test_multinomial_memory_grows_with_samples_not_samples_times_classes():
    import tracemalloc

    from tvms.runtime.random_ops import multinomial

    logits = np.zeros((2, 4000), np.float32)
    tracemalloc.start()
    try:
        m = multinomial(logits, "int64", 4000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.shape == (2, 4000) and 0 <= m.min() and m.max() < 4000
    assert peak < 2_000_000, peak  # (a samples x classes mask: 32 MB)
    _near(m.mean(), 1999.5, 4000 / np.sqrt(12 * m.size))
