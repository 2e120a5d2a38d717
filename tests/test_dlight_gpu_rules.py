"""The DLight GPU rules of tvms.dlight.gpu (lowering/dlight/gpu_*.py): Reduction, GeneralReduction,
Transpose, RMSNorm and Fallback. On every legalized operator of the goldens (made with TVM 0.27 by
tests/fixtures/dlight_gpu/generate_with_tvm.py) the rules give TVM's schedule, printed byte for
byte, and pick the rule TVM picks; on the 375 functions of tvms's legalization fixtures they give
TVM's schedules but for a listed few (red_legalize_sweep.txt holds TVM's rule and a hash of its
text); the scheduled functions compute what they computed before (the reference executor, with
GPU semantics); no rule fails on any legalized operator."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import tvms.dlight as dl
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.lowering.dlight import ApplyDefaultSchedule, apply_rules, mark_scheduled
from tvms.lowering.tir.gpu.lower_cross_thread_reduction import lower_cross_thread_reduction
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source
from tvms.target import Target

from conftest import CORPUS, CORPUS_COPY, FIXTURES
from test_dlight_rules import NOT_RUN_ON_RANDOM_ARGUMENTS, assert_same_results, random_arguments, run_reference

HERE = FIXTURES / "dlight_gpu"
CUDA = Target("cuda")
# case -> [(function, the rule TVM used)], as the generator recorded it
TVM_RULES: dict[str, list[tuple[str, str]]] = {}
for _line in (HERE / "red_rules.txt").read_text().splitlines():
    _case, _func, _rule = _line.split()
    TVM_RULES.setdefault(_case, []).append((_func, _rule))
# where tvms's text differs from TVM's, and why (the rule and its decisions are still TVM's)
DIFFERENT_TEXT = {
    "log_softmax": "TVM prints its two buffers named 'compute' as compute and compute_1; tvms reads the "
                   "second back as 'compute_1', so set_scope names it compute_1_shared, TVM compute_shared",
    "concat_dyn": "TVM's iterator-map simplifier writes the offset v0 - n as v0 + (0 - n) and expands "
                  "the body's index with T.max terms; tvms keeps v0 - n",
}


def rules_for(case: str) -> list:
    if case.startswith("rmsnorm_"):  # (RMSNorm on its own: in the list Reduction takes rms_norm first)
        return [dl.gpu.RMSNorm()]
    return [dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Transpose(), dl.gpu.RMSNorm(),
            dl.gpu.Fallback()]


def legalized(case: str):
    return from_source((HERE / f"red_{case}_legalized.tvms").read_text())


def scheduled(case: str):
    with CUDA:
        return ApplyDefaultSchedule(*rules_for(case))(legalized(case))


def golden(case: str) -> str:
    return (HERE / f"red_{case}_dlight.tvms").read_text().rstrip("\n")


def test_one_golden_of_each_rule_is_tvms_text():
    for case in ("sum_last", "softmax_dyn", "transpose", "rmsnorm_f16", "add_broadcast",
                 "corpus_dlight_nn_rms_norm_static"):
        assert scheduled(case).script(dialect="tvm-0.27") == golden(case), case


def test_the_corpus_rms_norm_schedule():
    path = CORPUS_COPY / "dlight_nn_rms_norm_static.tvms"
    assert scheduled("corpus_dlight_nn_rms_norm_static").script(dialect="tvm-0.27") == path.read_text().rstrip("\n")


@pytest.mark.slow
def test_every_golden_is_tvms_text():
    differ = [case for case in TVM_RULES
              if case not in DIFFERENT_TEXT and scheduled(case).script(dialect="tvm-0.27") != golden(case)]
    assert not differ
    assert all(scheduled(case).script(dialect="tvm-0.27") != golden(case) for case in DIFFERENT_TEXT)


@pytest.mark.slow
def test_each_function_gets_the_rule_tvm_chose():
    for case, funcs in TVM_RULES.items():
        mod = legalized(case)
        for name, tvm_rule in funcs:
            chosen = next((type(r).__name__ for r in rules_for(case)
                           if apply_rules(mod[name], CUDA, [r]) is not None), "-")
            assert chosen == ("-" if tvm_rule == "raises" else tvm_rule), (case, name)


def assert_computes_the_same(before: PrimFunc, after: PrimFunc, rng: np.random.Generator) -> None:
    """Before and after, on the same random inputs, in the reference executor (a symbolic n = 5).
    A reduction across threads into registers runs as the GPU pipeline's next step makes it (the
    executor runs each thread's registers apart: LowerCrossThreadReduction's allreduce combines them)."""
    args = random_arguments(before, rng, {"n": 5})
    try:
        want = run_reference(before, args)
    except TVMSError as err:  # an integer division by one of the zeros: divide by ones
        assert "division by zero" in str(err)
        args = random_arguments(before, rng, {"n": 5}, low=1)
        want = run_reference(before, args)
    try:
        got = run_reference(after, args)
    except TVMSError as err:
        assert "LowerCrossThreadReduction" in str(err)
        got = run_reference(lower_cross_thread_reduction(after), args)
    assert_same_results(got, want)


@pytest.mark.slow
def test_scheduled_functions_compute_what_they_did():
    rng = np.random.default_rng(0)
    for case in TVM_RULES:
        before, after = legalized(case), scheduled(case)
        for name in before:
            if isinstance(before[name], PrimFunc):
                assert_computes_the_same(before[name], after[name], rng)


def test_scheduled_reduction_computes_numpy():
    """A row sum and a softmax of symbolic row count, scheduled, against numpy."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (16, 256)).astype("float32")
    sums = np.zeros(16, "float32")
    run_prim_func(scheduled("sum_last")["sum"], x, sums)
    np.testing.assert_allclose(sums, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    x = rng.uniform(-2, 2, (5, 64)).astype("float32")
    y = np.zeros_like(x)
    run_prim_func(scheduled("softmax_dyn")["softmax"], x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def legalized_functions() -> list[tuple[str, PrimFunc]]:
    paths = sorted(CORPUS.glob("relax_op_*_legalized.tvms")) + sorted((FIXTURES / "legalize").glob("*_legalized.tvms"))
    return [(f"{path.name}:{name}", mod[name]) for path in paths for mod in [from_source(path.read_text())]
            for name in mod if isinstance(mod[name], PrimFunc)]


# the functions TVM 0.27's Fallback declines too (blocks not bound one to one to their loops)
FALLBACK_DECLINES = {f"math_bucketize_legalized.tvms:searchsorted{k}" for k in ("", "1", "2", "3")} | {
    "math_index_put_legalized.tvms:index_put", "math_scatter_legalized.tvms:scatter_elements"}


@pytest.mark.slow
def test_no_rule_fails_on_any_legalized_operator():
    """Each rule alone on every legalized function of the corpus and the legalization fixtures
    (412 of them): it schedules or declines, never raises; what the rules schedule computes what
    the function did. Fallback schedules all but six, which TVM's Fallback declines as well."""
    funcs = legalized_functions()
    rng = np.random.default_rng(0)
    declined = set()
    for where, func in funcs:
        for rule in rules_for("any"):
            sch = apply_rules(func, CUDA, [rule])
            if isinstance(rule, dl.gpu.Fallback) and sch is None:
                declined.add(where)
        sch = apply_rules(func, CUDA, rules_for("any"))
        if sch is not None and not where.startswith(tuple(NOT_RUN_ON_RANDOM_ARGUMENTS)):
            assert_computes_the_same(func, sch.mod["main"], rng)
    assert len(funcs) > 400 and declined == FALLBACK_DECLINES


_REVERSE_INLINED = ("TVM's Fallback folds the averaging into the pooled sum (its reverse_compute_inline takes a "
                    "reduction producer, which is wrong for windows of several elements); tvms keeps the two")
# the sweep's functions where tvms does not print TVM's text, and why
SWEEP_DIFFERENT = {
    "manip_avg_pool_legalized.tvms:avg_pool2d4": _REVERSE_INLINED,
    "math_nn_adaptive_legalized.tvms:adaptive_avg_pool2d1": _REVERSE_INLINED,
    "math_nn_avgpool_legalized.tvms:avg_pool1d3": _REVERSE_INLINED,
    "math_nn_avgpool_legalized.tvms:avg_pool1d8": _REVERSE_INLINED,
    "math_nn_avgpool_legalized.tvms:avg_pool1d9": _REVERSE_INLINED,
    "manip_concat_split_legalized.tvms:concatenate1": "TVM simplifies an index under two if_then_else "
                                                      "conditions to v1 + -3; tvms keeps v1 - 3",
    "math_index_tensor_legalized.tvms:index_tensor": "TVM lists the reads of an indirect load inner loads first",
    "math_index_tensor_legalized.tvms:index_tensor2": "TVM lists the reads of an indirect load inner loads first",
    "math_nn_symbolic_legalized.tvms:reshape": "TVM's iterator maps fold a reshape's symbolic index "
                                               "(v0 * (w * 4) + v1) // (w * 4); tvms's analyzer does not",
}


@pytest.mark.slow
def test_legalized_fixtures_get_tvms_schedules():
    """Every function of tests/fixtures/legalize/*_legalized.tvms: the rule TVM 0.27 chose and
    the SHA-256 of its printed schedule (red_legalize_sweep.txt) against tvms's. Where TVM's rules
    raise there is nothing to compare (tvms's schedules of those are checked above)."""
    mods: dict = {}
    differ, tvm_raises = set(), set()
    for line in (HERE / "red_legalize_sweep.txt").read_text().splitlines():
        key, tvm_rule, digest = line.split()
        if tvm_rule == "raises":
            tvm_raises.add(key)
            continue
        name, func_name = key.split(":")
        if name not in mods:
            mods[name] = from_source((FIXTURES / "legalize" / name).read_text())
        sch = apply_rules(mods[name][func_name], CUDA, rules_for("any"))
        text = None if sch is None else mark_scheduled(sch.mod["main"]).script(dialect="tvm-0.27")
        mine = "-" if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]
        chosen = "-" if sch is None else next(type(r).__name__ for r in rules_for("any")
                                              if apply_rules(mods[name][func_name], CUDA, [r]) is not None)
        if (chosen, mine) != (tvm_rule, digest):
            differ.add(key)
    assert differ == set(SWEEP_DIFFERENT), sorted(differ ^ set(SWEEP_DIFFERENT))
    assert len(tvm_raises) == 18


def test_gpu_rules_leave_cpu_targets_alone():
    mod = legalized("softmax")
    with Target("llvm"):
        out = ApplyDefaultSchedule(*rules_for("softmax"))(mod)
    assert out.script() == mod.script()
    assert not dl.gpu.Fallback().is_target_available(Target("llvm"))
    assert dl.gpu.Fallback().is_target_available(Target("cuda -arch=sm_80"))


def test_namespace_and_default_rules():
    import tvms.dlight.gpu as gpu_module

    assert gpu_module is dl.gpu
    # TVM 0.27's CUDA pipeline (relax/backend/cuda/pipeline.py)
    assert [type(r).__name__ for r in dl.gpu.default_rules()] == ["Matmul", "GEMV", "Reduction", "GeneralReduction",
                                                                  "Fallback"]
    assert dl.gpu.LowBatchGEMV().is_target_available(CUDA)
