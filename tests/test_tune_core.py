"""The tuning engine's core: LocalBuilder and LocalRunner (worker processes; failures are results),
JSONDatabase (TVM's two files, resumption, a line cut short, records written by TVM 0.27),
ScheduleFn with ReplayTrace / ReplayFunc, the measure callbacks and RandomModel.

``fixtures/tune/tvm_records.json`` holds records TVM 0.27 made for ``matmul64.tvms``
(``generate_with_tvm.py``)."""
from __future__ import annotations

import base64
import ctypes
import json
import os
import signal
import time
import types
import warnings

import numpy as np
import pytest
from conftest import FIXTURES
from test_schedule_seed002 import stochastic_schedule_mm  # (seed 002's, as the seed writes it)

import tvms
import tvms.meta_schedule as ms
from tvms.ir.errors import TVMSError
from tvms.ir.stmt import Block, For
from tvms.ir.visitor import collect
from tvms.lowering.tune.database import FAILED_RUN_SECS
from tvms.lowering.tune.json_database import json_dumps
from tvms.lowering.tune.measure import args_info_of, main_func
from tvms.lowering.tune.measure_callback import remove_build_dir
from tvms.lowering.tune.runner import default_alloc_argument, default_run_evaluator
from tvms.runtime.reference import run_prim_func
from tvms.tir import Schedule

TUNE = FIXTURES / "tune"
TARGET = tvms.target.Target("llvm")


def matmul64() -> tvms.IRModule:
    return tvms.script.from_source((TUNE / "matmul64.tvms").read_text())


def assert_computes_matmul(mod: tvms.IRModule) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    tvms.build(mod, "llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def tvm_record_lines() -> list[str]:
    return (TUNE / "tvm_records.json").read_text().splitlines()


def tvms_workload_line(mod: tvms.IRModule) -> str:
    return json_dumps(["1", base64.b64encode(mod.script(show_meta=True).encode()).decode()])


# --------------------------------------------------------------------------- builder and runner
# (module level: a worker finds the functions it runs by module and name)

def failing_build(mod, target, params):
    raise TVMSError("this build fails on purpose")


def build_naming_its_context(mod, target, params):
    ctx = tvms.transform.PassContext.current()
    raise TVMSError(f"built under opt_level={ctx.opt_level} disabled={list(ctx.disabled_pass)} "
                    f"config={sorted(ctx.config.items())} instruments={len(ctx.instruments)}")


def crashing_build(mod, target, params):
    ctypes.string_at(0)  # SIGSEGV in the worker


def sleeping_build(mod, target, params):
    time.sleep(60)


CRASH = """
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("w"):
            vi = T.axis.spatial(64, i)
            A[vi * 50000000] = T.float32(1.0)
"""

HANG = """
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((1,), "float32")):
    for i, j in T.grid(2000000000, 2000000000):
        with T.block("w"):
            vi, vj = T.axis.remap("RR", [i, j])
            A[0] = A[0] * T.float32(0.5) + T.float32(1.0)
"""


def test_builder_and_runner_turn_failures_into_results() -> None:
    builder = ms.builder.LocalBuilder(max_workers=1)
    runner = ms.runner.LocalRunner(evaluator_config=ms.EvaluatorConfig(number=2, repeat=3, min_repeat_ms=0))
    try:
        mod, crash = matmul64(), tvms.script.from_source(CRASH)
        built = builder.build([ms.BuilderInput(mod, TARGET), ms.BuilderInput(crash, TARGET),
                               ms.BuilderInput(mod, TARGET, params={"w": np.ones(3)}),
                               ms.BuilderInput("C = A @ B", TARGET)])
        assert all(r.error_msg is None and os.path.isfile(r.artifact_path) for r in built[:2])
        assert built[2].artifact_path is None and "take no bound parameters" in built[2].error_msg
        assert built[3].artifact_path is None and "holds an IRModule or a PrimFunc, not str" in built[3].error_msg
        worker = builder.pool._idle[0].proc.pid
        [again] = builder.build([ms.BuilderInput(mod, TARGET)])
        assert builder.pool._idle[0].proc.pid == worker  # (the worker stays, warm)

        args = args_info_of(main_func(mod))
        inputs = [ms.RunnerInput(built[0].artifact_path, "cpu", args),
                  ms.RunnerInput(built[1].artifact_path, "cpu", [ms.TensorInfo("float32", (64,))]),
                  ms.RunnerInput(again.artifact_path, "cpu", args),
                  ms.RunnerInput(again.artifact_path, "rocm", args),
                  ms.RunnerInput("/nonexistent/x.so", "cpu", args)]
        futures = runner.run(inputs)
        ok, crashed, after, wrong_device, missing = [f.result() for f in futures]
        assert all(f.done() for f in futures)
        assert ok.error_msg is None and len(ok.run_secs) == 3 and all(0 < s < 1 for s in ok.run_secs)
        assert crashed.run_secs is None and "killed by SIGSEGV" in crashed.error_msg
        assert after.error_msg is None  # (a fresh worker took over)
        assert wrong_device.run_secs is None and "measures on cpu, llvm, cuda, not on 'rocm'" in wrong_device.error_msg
        assert "does not exist" in missing.error_msg
        lib = tvms.runtime.load_module(again.artifact_path)
        a, b, c = (np.ones((64, 64), np.float32) for _ in range(3))
        lib["main"](a, b, c)
        assert (c == 64).all()
        for r in [*built[:2], again]:
            remove_build_dir(r.artifact_path)
            assert not os.path.exists(os.path.dirname(r.artifact_path))
    finally:
        builder.shutdown()
        runner.shutdown()


def test_a_worker_builds_under_the_callers_pass_context() -> None:
    """A candidate is built with the options it will be built with after tuning (say,
    ``tirx.use_async_copy``): the worker enters the PassContext current at ``build``, less its
    instruments, which stay in this process."""
    builder = ms.builder.LocalBuilder(max_workers=1, f_build=build_naming_its_context)
    try:
        [plain] = builder.build([ms.BuilderInput(matmul64(), TARGET)])
        assert "built under opt_level=2 disabled=[] config=[] instruments=0" in plain.error_msg
        with tvms.transform.PassContext(opt_level=3, disabled_pass=["UnrollLoop"], config={"tirx.use_async_copy": True},
                                        instruments=[tvms.instrument.PassTimingInstrument()]):
            [under] = builder.build([ms.BuilderInput(matmul64(), TARGET)])
        assert ("built under opt_level=3 disabled=['UnrollLoop'] config=[('tirx.use_async_copy', True)] "
                "instruments=0") in under.error_msg
    finally:
        builder.shutdown()


def test_a_candidate_that_loses_the_cuda_context_ends_its_worker(tmp_path, monkeypatch) -> None:
    """A kernel's fault (CUDA_ERROR_ILLEGAL_ADDRESS) leaves its process's CUDA context unusable:
    that trial fails with the driver's error, and the next candidate is measured by a fresh
    worker (it was measured by the spoiled one and failed, one after the other)."""
    from tune_standins import assert_a_lost_context_ends_its_worker, worker_pid_or_lost_context

    flag = tmp_path / "lose_context"
    monkeypatch.setenv("TVMS_TEST_LOSE_CONTEXT", str(flag))
    builder = ms.builder.LocalBuilder(max_workers=1)
    runner = ms.runner.LocalRunner(f_run_evaluator=worker_pid_or_lost_context)
    try:
        [built] = builder.build([ms.BuilderInput(matmul64(), TARGET)])
        assert_a_lost_context_ends_its_worker(runner, built.artifact_path, args_info_of(main_func(matmul64())), flag)
    finally:
        builder.shutdown()
        runner.shutdown()


@pytest.mark.slow
def test_a_crashing_or_hanging_build_and_a_hanging_kernel_are_failed_trials() -> None:
    mod = matmul64()
    for f_build, why in [(crashing_build, "killed by SIGSEGV"), (sleeping_build, "timeout"),
                         (failing_build, "this build fails on purpose"),
                         (lambda *args: None, "must be picklable, the function defined at module level")]:
        b = ms.builder.LocalBuilder(max_workers=1, timeout_sec=3, f_build=f_build)
        try:
            [result] = b.build([ms.BuilderInput(mod, TARGET)])
            assert result.artifact_path is None and why in result.error_msg
            b.f_build = ms.builder.default_build  # (the pool started a new worker if it had to)
            [result] = b.build([ms.BuilderInput(mod, TARGET)])
            assert result.error_msg is None
            idle = b.pool._idle[0].proc
            os.kill(idle.pid, signal.SIGKILL)  # (a worker that died while idle is replaced)
            idle.wait()
            [result] = b.build([ms.BuilderInput(mod, TARGET)])
            assert result.error_msg is None
        finally:
            b.shutdown()
    runner = ms.runner.LocalRunner(timeout_sec=3)
    try:
        [hang] = ms.builder.LocalBuilder(max_workers=1).build([ms.BuilderInput(tvms.script.from_source(HANG), TARGET)])
        [future] = runner.run([ms.RunnerInput(hang.artifact_path, "cpu", [ms.TensorInfo("float32", (1,))])])
        assert "timeout: the task ran longer than 3 s" in future.result().error_msg
        [future] = runner.run([ms.RunnerInput(result.artifact_path, "cpu", args_info_of(main_func(mod)))])
        assert future.result().error_msg is None
    finally:
        runner.shutdown()
        remove_build_dir(result.artifact_path)
        remove_build_dir(hang.artifact_path)


def test_time_evaluator_runs_the_preprocessing_before_each_repeat() -> None:
    lib = tvms.build(matmul64(), "llvm")
    calls = []
    a, b, c = (np.ones((64, 64), np.float32) for _ in range(3))
    result = lib.time_evaluator("main", number=2, repeat=3, f_preproc=lambda *args: calls.append(len(args)))(a, b, c)
    assert calls == [3, 3, 3] and len(result.results) == 3
    # the runner's evaluation, with a cache flush before each repeat, on two sets of arguments
    config = ms.EvaluatorConfig(number=1, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True)
    args = default_alloc_argument(args_info_of(main_func(matmul64())), 2)
    assert [x.shape for x in args[1]] == [(64, 64)] * 3 and not (args[0][0] == args[1][0]).all()
    assert (default_alloc_argument(args_info_of(main_func(matmul64())), 1)[0][0] == args[0][0]).all()
    secs = default_run_evaluator(lib, args, config)
    assert len(secs) == 4 and all(s > 0 for s in secs)


# --------------------------------------------------------------------------- JSONDatabase


def record_of(db, mod: tvms.IRModule, decision: list, secs: float | None) -> ms.TuningRecord:
    sch = Schedule(mod)
    block = sch.get_block("C", "main")
    _, j, _ = sch.get_loops(block)
    sch.split(j, sch.sample_perfect_tile(j, n=2, decision=decision))
    return ms.TuningRecord(sch.trace, db.commit_workload(mod), None if secs is None else [secs], TARGET,
                           args_info_of(main_func(mod)))


def test_json_database_round_trips_and_resumes(tmp_path) -> None:
    mod = matmul64()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "work"))
    for decision, secs in ([8, 8], 3e-5), ([4, 16], 2e-5), ([16, 4], FAILED_RUN_SECS):
        db.commit_tuning_record(record_of(db, mod, decision, secs))
    best = Schedule(mod)
    best.split(best.get_loops(best.get_block("C"))[1], [4, 16])
    again = ms.database.JSONDatabase(work_dir=str(tmp_path / "work"))
    assert again.query_ir_module(mod).script() == best.mod.script()  # (replaying the record gives its module)
    assert [r.as_json() for r in again.get_all_tuning_records()] == [r.as_json() for r in db.get_all_tuning_records()]
    assert again.query_tuning_record(mod, TARGET).run_secs == [2e-5]
    assert again.query_schedule(mod).trace.as_json() == db.query_schedule(mod).trace.as_json()
    assert_computes_matmul(again.query_ir_module(mod))
    workload = again.commit_workload(mod)
    assert [r.run_secs for r in again.get_top_k(workload, 5)] == [[2e-5], [3e-5]]  # (the failed one is left out)
    # resuming: the workload is found, not written again; new records follow the old ones
    again.commit_tuning_record(record_of(again, mod, [2, 32], 1e-5))
    assert len((tmp_path / "work" / "database_workload.json").read_text().splitlines()) == 1
    lines = (tmp_path / "work" / "database_tuning_record.json").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)[0] == 0 for line in lines)
    reopened = ms.database.create("json", work_dir=str(tmp_path / "work"))
    assert reopened.query_tuning_record(mod).run_secs == [1e-5]
    assert ms.database.create(reopened) is reopened and isinstance(ms.database.create("memory"), ms.MemoryDatabase)
    with pytest.raises(TVMSError, match="does not exist"):
        ms.database.JSONDatabase(work_dir=str(tmp_path / "none"), allow_missing=False)


def test_a_schedule_counts_by_its_latest_measurement_on_each_target() -> None:
    mod = matmul64()
    db = ms.MemoryDatabase()
    lucky, other = record_of(db, mod, [8, 8], 1e-5), record_of(db, mod, [4, 16], 2e-5)
    failed = record_of(db, mod, [8, 8], FAILED_RUN_SECS)  # (measured again: it fails)
    haswell = record_of(db, mod, [4, 16], 5e-5)
    haswell.target = tvms.target.Target("llvm -mcpu=haswell")
    for record in (lucky, other, failed, haswell):
        db.commit_tuning_record(record)
    workload = db.commit_workload(mod)
    # the failure replaces the lucky time; the haswell record does not hide this target's one
    assert [r.run_secs for r in db.get_top_k(workload, 5)] == [[2e-5], [5e-5]]
    assert db.query_tuning_record(mod, TARGET) is other


def test_a_line_cut_short_is_skipped_then_removed(tmp_path) -> None:
    mod = matmul64()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    db.commit_tuning_record(record_of(db, mod, [8, 8], 3e-5))
    records = tmp_path / "database_tuning_record.json"
    whole = records.read_text()
    records.write_text(whole + whole[: len(whole) // 2])  # (killed in the middle of a write)
    with pytest.warns(UserWarning, match="database_tuning_record.json:2: the last line is cut short"):
        db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    assert len(db) == 1
    db.commit_tuning_record(record_of(db, mod, [4, 16], 2e-5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(ms.database.JSONDatabase(work_dir=str(tmp_path))) == 2
    assert records.read_text().startswith(whole) and len(records.read_text().splitlines()) == 2
    records.write_text("[0, [oops\n" + whole)
    with pytest.raises(TVMSError, match="database_tuning_record.json:1: not a JSON line"):
        ms.database.JSONDatabase(work_dir=str(tmp_path))
    for bad, message in (('[-1,' + whole.split(",", 1)[1], "index below"),
                         ('[0, [[[], []], "x", null, null]]\n', "run_secs is a list of numbers")):
        records.write_text(bad)
        with pytest.raises(TVMSError, match=message):
            ms.database.JSONDatabase(work_dir=str(tmp_path))


def test_records_written_by_tvm_read_and_write_back_byte_for_byte(tmp_path) -> None:
    mod = matmul64()
    (tmp_path / "database_workload.json").write_text(tvms_workload_line(mod) + "\n")
    (tmp_path / "database_tuning_record.json").write_text((TUNE / "tvm_records.json").read_text())
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    records = db.get_all_tuning_records()
    assert len(records) == 3
    for line, record in zip(tvm_record_lines(), records):
        assert json_dumps([0, record.as_json()]) == line
        assert record.target.kind == "llvm" and record.target.attrs["num-cores"] == 1
        assert record.args_info == [ms.TensorInfo("float32", (64, 64))] * 3
    best = min(records, key=lambda r: sum(r.run_secs))
    assert db.query_tuning_record(mod) is best
    for n, record in enumerate(records):  # replaying each record makes TVM's loop nest, computing a matmul
        sch = Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        tvm_text = (TUNE / f"tvm_scheduled_{n}.tvms").read_text()
        assert loop_nest(sch.mod) == loop_nest(tvms.script.from_source(tvm_text))
        if n > 0:  # (record 0's fused index adds its terms in another order than TVM's simplifier)
            assert sch.mod.script(dialect="tvm-0.27") + "\n" == tvm_text
        assert_computes_matmul(sch.mod)


def loop_nest(mod: tvms.IRModule) -> list:
    """Each loop's extent, kind and annotations, and each block's name, in order."""
    return [(n.extent.value, n.kind, dict(n.annotations)) if isinstance(n, For) else n.name_hint
            for n in collect(main_func(mod).body, (For, Block))]


def test_a_workload_tvm_wrote_is_matched_by_replaying(tmp_path) -> None:
    mod = matmul64()
    graph = base64.b64encode(json.dumps({"root": 1, "nodes": []}).encode()).decode()
    (tmp_path / "database_workload.json").write_text(json_dumps(["123", graph]) + "\n")
    (tmp_path / "database_tuning_record.json").write_text((TUNE / "tvm_records.json").read_text())
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    assert len(db) == 3
    other = tvms.script.from_source((TUNE / "matmul64.tvms").read_text().replace("64", "32"))
    assert db.query_tuning_record(other) is None
    sch = db.query_schedule(mod)
    assert sch is not None and db.has_workload(mod)
    assert_computes_matmul(sch.mod)


# --------------------------------------------------------------------------- spaces and strategies


def tune_context(strategy) -> ms.TuneContext:
    return ms.TuneContext(matmul64(), "llvm", ms.space_generator.ScheduleFn(stochastic_schedule_mm),
                          strategy, rand_state=5)


def split_decision(sch: Schedule) -> list:
    trace = sch.trace
    return next(trace.get_decision(i) for i in trace.insts if i.kind == "SamplePerfectTile")


def test_replay_trace_draws_distinct_valid_candidates_from_a_schedule_fn() -> None:
    ctx = tune_context(ms.search_strategy.ReplayTrace())
    spaces = ctx.generate_design_space()
    assert len(spaces) == 1
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=3, design_spaces=spaces)
    batches = []
    while (candidates := ctx.generate_measure_candidates()) is not None:
        batches.append(candidates)
        ctx.notify_runner_results(candidates, [ms.RunnerResult([1e-3]) for _ in candidates])
    ctx.post_tuning()
    drawn = [split_decision(c.sch) for batch in batches for c in batch]
    # 64 has five tilings [a, b] with b <= 16 (sample_perfect_tile's default): each drawn once
    assert sorted(drawn) == [[4, 16], [8, 8], [16, 4], [32, 2], [64, 1]]
    assert [len(b) for b in batches][:1] == [3]
    for batch in batches:
        for c in batch:
            assert c.args_info == [ms.TensorInfo("float32", (64, 64))] * 3
            assert [i.kind for i in c.sch.trace.insts][-1] == "EnterPostproc"
    f = main_func(batches[0][0].sch.mod)
    rng = np.random.default_rng(1)
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    run_prim_func(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_replay_trace_skips_what_the_database_already_holds() -> None:
    ctx = tune_context(ms.search_strategy.ReplayTrace())
    db = ms.MemoryDatabase()
    workload = db.commit_workload(ctx.mod)
    for decision in ([4, 16], [8, 8], [16, 4], [32, 2]):
        sch = ms.TuningRecord(stochastic_schedule_mm(Schedule(ctx.mod)).trace, workload)
        sch.trace.decisions[next(i for i in sch.trace.insts if i.kind == "SamplePerfectTile")] = decision
        db.commit_tuning_record(sch)
    ctx.pre_tuning(max_trials=4, num_trials_per_iter=4, database=db)
    [only] = ctx.generate_measure_candidates()
    assert split_decision(only.sch) == [64, 1]


def fixed_splits(sch: Schedule) -> list[Schedule]:
    """Six design spaces without a sampled decision: the first loop split by a fixed factor."""
    spaces = []
    for inner in (1, 2, 4, 8, 16, 32):
        copy = sch.copy()
        copy.split(copy.get_loops(copy.get_block("C"))[0], [None, inner])
        spaces.append(copy)
    return spaces


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_replay_trace_draws_each_space_without_decisions_once(seed) -> None:
    """A space with nothing to sample replays to one candidate: once drawn it leaves the pool, so
    even a strict max_fail_count gets each of them (drawn at random, the last ones were missed)."""
    ctx = ms.TuneContext(matmul64(), "llvm", ms.space_generator.ScheduleFn(fixed_splits),
                         ms.search_strategy.ReplayTrace(max_fail_count=1), rand_state=seed)
    ctx.pre_tuning(max_trials=10, num_trials_per_iter=10, design_spaces=ctx.generate_design_space())
    candidates = ctx.generate_measure_candidates()
    inner = [collect(main_func(c.sch.mod).body, For)[1].extent.value for c in candidates]
    assert sorted(inner) == [1, 2, 4, 8, 16, 32]
    ctx.notify_runner_results(candidates, [ms.RunnerResult([1e-3]) for _ in candidates])
    assert ctx.generate_measure_candidates() is None


def test_replay_func_runs_the_schedule_function_again() -> None:
    ctx = tune_context(ms.search_strategy.ReplayFunc())
    ctx.pre_tuning(max_trials=4, num_trials_per_iter=4)
    candidates = ctx.generate_measure_candidates()
    assert len(candidates) == 4 and len({str(split_decision(c.sch)) for c in candidates}) == 4
    with pytest.raises(TVMSError, match="pre_tuning was called twice"):
        ctx.pre_tuning(max_trials=4, num_trials_per_iter=4)


class RejectOddTiles:
    """A postprocessor: rejects a candidate whose inner tile is below 8."""

    context = None

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context

    def apply(self, sch: Schedule) -> bool:
        return split_decision(sch)[1] >= 8

    def clone(self) -> "RejectOddTiles":
        return RejectOddTiles()


def test_postprocessors_reject_candidates_and_the_space_parts_resolve() -> None:
    ms.space_generator.register_defaults("test-kind", postprocs=lambda: [RejectOddTiles()])
    space = ms.space_generator.ScheduleFn(stochastic_schedule_mm, sch_rules=[], postprocs="test-kind",
                                          mutator_probs={})
    first = ms.TuneContext(matmul64(), "llvm", space, ms.search_strategy.ReplayTrace(max_fail_count=50), rand_state=3)
    ctx = first.clone()  # (a task's copy: its own parts, told the new context)
    [postproc] = ctx.space_generator.postprocs
    assert postproc.context is ctx and space.postprocs[0].context is first
    ctx.pre_tuning(max_trials=5, num_trials_per_iter=5)
    assert sorted(split_decision(c.sch) for c in ctx.generate_measure_candidates()) == [[4, 16], [8, 8]]
    defaults = ms.space_generator.ScheduleFn(stochastic_schedule_mm)
    ms.TuneContext(matmul64(), "llvm", defaults)
    assert isinstance(defaults.postprocs, list) and isinstance(defaults.mutator_probs, dict)
    bare = ms.space_generator.create(stochastic_schedule_mm)
    assert (bare.sch_rules, bare.postprocs, bare.mutator_probs) == ([], [], {})
    with pytest.raises(TVMSError, match="returned int"):
        ms.space_generator.ScheduleFn(lambda sch: 3).generate_design_space(matmul64())


# --------------------------------------------------------------------------- callbacks, cost model


def test_measure_callbacks_record_remove_and_train(tmp_path) -> None:
    ctx = tune_context(ms.search_strategy.ReplayTrace())
    ctx.pre_tuning(max_trials=3, num_trials_per_iter=3)
    candidates = ctx.generate_measure_candidates()
    (tmp_path / "tvms-tune-x").mkdir()
    artifact = tmp_path / "tvms-tune-x" / "a.so"
    artifact.write_bytes(b"")
    built = [ms.BuilderResult(str(artifact)), ms.BuilderResult(None, "failed"), ms.BuilderResult(str(artifact))]
    ran = [ms.RunnerResult([2e-5]), ms.RunnerResult(None, "failed"), ms.RunnerResult([0.0])]
    trained = []

    class Model(ms.CostModel):
        def update(self, context, cands, results):
            trained.append((context, cands, results))

    db = ms.MemoryDatabase()
    scheduler = types.SimpleNamespace(database_=db, cost_model_=Model(), tasks_=[types.SimpleNamespace(ctx=ctx)])
    for callback in ms.MeasureCallback.create("default"):
        callback.apply(scheduler, 0, candidates, built, ran)
    assert [r.run_secs for r in db.get_all_tuning_records()] == [[2e-5], [FAILED_RUN_SECS], [0.0]]
    assert not artifact.parent.exists()
    assert trained == [(ctx, candidates[:1], ran[:1])]


def test_random_model_scores_and_continues_after_reload(tmp_path) -> None:
    model = ms.cost_model.RandomModel(seed=4)
    scores = model.predict(None, [1, 2, 3])
    assert scores.shape == (3,) and ((0 <= scores) & (scores < 100)).all()
    model.save(str(tmp_path / "m.json"))
    expected = model.predict(None, [1, 2])
    reloaded = ms.cost_model.RandomModel(path=str(tmp_path / "m.json"))
    np.testing.assert_array_equal(reloaded.predict(None, [1, 2]), expected)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(TVMSError, match="cannot read the model state"):
        reloaded.load(str(tmp_path / "bad.json"))
