"""The tuning loop (task schedulers, tune_tasks/tune_tir/compile_tir, progress, logs, curve) run
with small in-process stand-ins for the builder, the runner, the space and the strategy, so that
it is checked on its own: budgets, resumption, the order tasks are picked in, failures recorded."""
from __future__ import annotations

import importlib.util
import io
import json

import numpy as np
import pytest
from tune_standins import (AddToDatabase, FnSpace, InProcessBuilder, InProcessRunner, Replay, matmul, parts,
                           stochastic_schedule_mm)

import tvms
from tvms.ir import TVMSError
from tvms.ir.structural import structural_equal
from tvms.lowering.build import default_schedules
from tvms.lowering.schedule import Schedule
from tvms.lowering.schedule.trace import Trace
from tvms.lowering.tune.database import MemoryDatabase, TuningRecord
from tvms.lowering.tune.flops import estimate_tir_flops
from tvms.lowering.tune.measure import args_info_of, main_func
from tvms.lowering.tune.progress import Progress, tuning_statistics, write_curve
from tvms.lowering.tune.task_scheduler import GradientBased, RoundRobin, TaskScheduler
from tvms.lowering.tune.tune import compile_tir, tune_tasks, tune_tir
from tvms.lowering.tune.tune_context import TuneContext


# ---------------------------------------------------------------- tests
def test_flops_as_tvm_counts_them() -> None:
    assert estimate_tir_flops(matmul(64)) == 2 * 64 ** 3  # TVM 0.27: 524288.0


def test_tune_tir_spends_the_budget_and_compile_tir_gives_the_best(tmp_path) -> None:
    mm = matmul(32)
    p = parts()
    db = tune_tir(mm, "llvm -num-cores=1", str(tmp_path), 6, num_trials_per_iter=4,
                  space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm),
                  task_scheduler="round-robin", seed=1, **p)
    records = db.get_all_tuning_records()
    assert len(records) == 6 and p["builder"].calls == [4, 2]
    best = min(records, key=TuningRecord.mean_secs)
    sch = compile_tir(db, mm, "llvm")
    assert str(sch.trace) == str(best.trace)
    a, b = np.random.rand(32, 32).astype("float32"), np.random.rand(32, 32).astype("float32")
    c = np.zeros((32, 32), "float32")
    tvms.build(sch.mod, "llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    log = (tmp_path / "logs" / "task_0_main.log").read_text()
    assert log.count("Trial #") == 6 and "Best GFLOPs" in log


def test_a_second_run_resumes_counting_the_trials_in_the_database(tmp_path) -> None:
    p = parts()
    kw = dict(space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm), **p)
    tune_tir(matmul(16), "llvm", str(tmp_path), 4, num_trials_per_iter=4, **kw)
    p["builder"].calls.clear()
    tune_tir(matmul(16), "llvm", str(tmp_path), 6, num_trials_per_iter=4, **kw)
    assert p["builder"].calls == [2] and len(p["database"].get_all_tuning_records()) == 6
    tune_tir(matmul(16), "llvm", str(tmp_path), 6, num_trials_per_iter=4, **kw)  # nothing left to do
    assert p["builder"].calls == [2]
    # the trials measured for another target are not this run's: a full budget of its own
    tune_tir(matmul(16), "llvm -num-cores=1", str(tmp_path), 4, num_trials_per_iter=4, **kw)
    assert p["builder"].calls == [2, 4]


def test_older_form_with_tune_config_returns_the_best_schedule(tmp_path) -> None:
    from tvms.lowering.tune.tune import TuneConfig

    sch = tune_tir(mod=matmul(16), target="llvm --num-cores=1",
                   config=TuneConfig(max_trials_global=3, num_trials_per_iter=3),
                   space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm),
                   work_dir=str(tmp_path), task_name="main", **parts())
    assert isinstance(sch, Schedule) and "sample_perfect_tile" in str(sch.trace)


def test_build_failures_are_failed_trials_and_chunks_overlap_measuring(tmp_path) -> None:
    builder = InProcessBuilder(fail=lambda mod: "T.int64" in mod.script() or "j_1 in range(16)" in mod.script())
    ctx = TuneContext(matmul(16), "llvm", FnSpace(stochastic_schedule_mm), Replay(stochastic_schedule_mm),
                      rand_state=3)
    sched = RoundRobin(build_chunk=2, measure_default=False)
    sched.tune([ctx], [1.0], 8, 8, 8, builder, InProcessRunner(builder), [AddToDatabase()], MemoryDatabase(), None)
    task = sched.tasks_[0]
    assert builder.calls == [2, 2, 2, 2] and len(task.latency_ms) == 8
    failed = sum(ms >= 1e12 for ms in task.latency_ms)
    assert failed == task.build_error_count and task.is_terminated


def test_gradient_based_prefers_the_task_with_more_to_gain() -> None:
    sched = GradientBased(alpha=0.2, window_size=3, seed=0)

    class Task:
        def __init__(self, weight):
            self.task_weight, self.is_terminated, self.runner_futures = weight, False, None
            self.latency_ms = []

    sched.tasks_ = [Task(1.0), Task(1.0), Task(5.0)]
    sched.best_latency_history_ = [[10.0, 9.0, 8.0, 7.0], [10.0, 10.0, 10.0, 10.0], [1.0, 1.0, 1.0, 1.0]]
    sched.round_robin_rounds_ = 4  # past the first round
    # g = 0.2 * (drop over 3 joins)/3 + 0.8 * best/joins, times the weight
    assert sched._gradient(0) == pytest.approx(0.2 * 1.0 + 0.8 * 7 / 4)
    assert sched._gradient(1) == pytest.approx(0.8 * 10 / 4)
    assert sched.next_task_id() == 1
    sched.tasks_[2].task_weight = 20.0  # 0.8 * 1/4 * 20 = 4 > 2
    assert sched.next_task_id() == 2
    sched.best_latency_history_[2] = []  # nothing valid yet: never picked over a live one
    assert sched.next_task_id() == 1


def test_task_scheduler_names() -> None:
    assert isinstance(TaskScheduler.create("round-robin"), RoundRobin)
    with pytest.raises(TVMSError, match="unknown task scheduler"):
        TaskScheduler.create("fastest")
    with pytest.raises(TVMSError, match="max_trials_global"):
        tune_tasks(tasks=[object()], task_weights=[1], work_dir="x", max_trials_global=0)


def test_progress_lines_table_and_curve(tmp_path) -> None:
    out = io.StringIO()
    p = parts()
    p["progress"] = Progress(stream=out, every=2, display="auto", work_dir=str(tmp_path))
    tune_tir(matmul(16), "llvm", str(tmp_path), 4, num_trials_per_iter=4, space=FnSpace(stochastic_schedule_mm),
             strategy=Replay(stochastic_schedule_mm), **p)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("trials 2/4 | building 0 running ") and "GFLOPS" in lines[0]
    assert lines[1].startswith("trials 4/4 | ")
    header = " ID | Name | FLOP | Weight | Speed (GFLOPS) | Latency (us) | Weighted Latency (us) | Trials | Done "
    assert lines[2] == header and lines[3] == "-" * len(header)
    assert lines[4].startswith("  0 | main | 8192 |      1 | ") and lines[4].endswith("|      4 |    Y ")
    assert "Total trials: 4" in out.getvalue()
    assert "Trials | Done" in (tmp_path / "logs" / "task_scheduler.log").read_text()
    write_curve(str(tmp_path / "c.svg"), p["progress"].curve)
    svg = (tmp_path / "c.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 1 and ">main</text>" in svg
    with pytest.raises(TVMSError, match="svg or .png"):
        write_curve(str(tmp_path / "c.txt"), [])


def test_the_statistics_table_without_a_valid_trial() -> None:
    class Ctx:
        task_name = "dense"

    class Task:
        ctx, flop, task_weight, latency_ms, is_terminated, gflops = Ctx(), 100.0, 2.0, [1e13], False, None

    class Sched:
        tasks_ = [Task()]

    assert tuning_statistics(Sched()).splitlines()[2] == \
        "  0 | dense |  100 |      2 |            N/A |          N/A |                   N/A |      1 |      "


def test_ctrl_c_keeps_what_was_measured_and_a_resumed_run_finishes(tmp_path) -> None:
    p = parts()
    runs = []

    class Interrupted(InProcessRunner):
        def run(self, inputs):
            runs.append(len(inputs))
            if len(runs) == 2:
                raise KeyboardInterrupt
            return super().run(inputs)

    kw = dict(space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm), num_trials_per_iter=4)
    with pytest.raises(KeyboardInterrupt):
        tune_tir(matmul(16), "llvm", str(tmp_path), 12, **{**p, "runner": Interrupted(p["builder"])}, **kw)
    assert len(p["database"].get_all_tuning_records()) == 4  # the first batch, joined before the second
    tune_tir(matmul(16), "llvm", str(tmp_path), 12, **p, **kw)
    assert len(p["database"].get_all_tuning_records()) == 12


def test_live_displays_draw_and_end_with_the_table(tmp_path) -> None:
    # rich is optional (tqdm is the dependency): its display is drawn when it is installed
    displays = ("rich", "tqdm", "line") if importlib.util.find_spec("rich") else ("tqdm", "line")
    for display in displays:  # as on a terminal
        out = io.StringIO()
        p = {**parts(), "progress": Progress(stream=out, display=display)}
        tune_tir(matmul(8), "llvm", str(tmp_path / display), 2, num_trials_per_iter=2,
                 space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm), **p)
        text = out.getvalue()
        assert "Total trials: 2" in text, display
        assert ("2/2" in text) if display != "rich" else ("main" in text and "GFLOPS" in text), display


def test_round_robin_builds_the_next_task_while_the_last_one_is_measured(tmp_path) -> None:
    events = []

    class Lazy:  # a measurement still in flight until asked for
        def __init__(self, future, n):
            self.future, self.n = future, n

        def done(self):
            return False

        def result(self):
            events.append(("measured", self.n))
            return self.future.result()

    builder = InProcessBuilder()

    class Runner(InProcessRunner):
        def run(self, inputs):
            n = inputs[0].args_info[0].shape[0] if inputs else None
            return [Lazy(f, n) for f in super().run(inputs)]

    class Logged(InProcessBuilder):
        def build(self, inputs):
            events.append(("built", args_info_of(main_func(inputs[0].mod))[0].shape[0]))
            return builder.build(inputs)

    ctxs = [TuneContext(matmul(n), "llvm", FnSpace(stochastic_schedule_mm), Replay(stochastic_schedule_mm),
                        task_name=f"mm{n}", rand_state=n) for n in (8, 16)]
    RoundRobin(measure_default=False).tune(ctxs, [1, 1], 8, 4, 2, Logged(), Runner(builder), [], None, None)
    assert [e for e in events if e[0] == "built"] == [("built", 8), ("built", 16)] * 2
    first = events.index(("measured", 8))
    assert events[:first] == [("built", 8), ("built", 16)]  # task 1 was built before task 0 was joined


def test_a_trace_read_from_json_writes_the_same_json() -> None:
    # records are read back and written again (resumed runs, strategies keying them by JSON)
    sch = Schedule(matmul(16))
    sch.transform_layout(sch.get_block("C"), ("write", 0), lambda i, j: (j // 4, i, j % 4))
    once = json.dumps(sch.trace.as_json())
    again = json.dumps(Trace.from_json(json.loads(once)).as_json())
    assert again == once and "lambda i, j: (j // 4, i, j % 4,)" in once


def test_in_the_built_in_space_the_first_trial_is_the_default_schedule(tmp_path) -> None:
    mm = matmul(32)
    p = parts()
    db = tune_tir(mm, "llvm -num-cores=1", str(tmp_path), 3, num_trials_per_iter=2, strategy="replay-trace",
                  cost_model="random", seed=0, **{k: v for k, v in p.items() if k != "cost_model"})
    # (then, when a tuned one measured faster, it and the default are built again to be timed in turns)
    assert p["builder"].calls[:2] == [1, 2] and p["builder"].calls[2:] in ([], [2], [2, 2])
    first = db.get_all_tuning_records()[0].as_measure_candidate().sch.mod["main"]
    default = default_schedules(tvms.IRModule({"main": mm}), "llvm -num-cores=1")["main"]
    assert structural_equal(first, default.with_changes(attrs=first.attrs))


def test_each_task_keeps_to_its_own_budget(tmp_path) -> None:
    class Eager(Replay):  # offers more than it was asked for
        def pre_tuning(self, max_trials, *args):
            super().pre_tuning(100, *args)

    ctxs = [TuneContext(matmul(n), "llvm", FnSpace(stochastic_schedule_mm), Eager(stochastic_schedule_mm),
                        task_name=f"mm{n}", rand_state=n) for n in (8, 16)]
    p = parts()
    sched = RoundRobin(measure_default=False)
    tune_tasks(tasks=ctxs, task_weights=[1, 1], work_dir=str(tmp_path), max_trials_global=4, max_trials_per_task=2,
               num_trials_per_iter=4, task_scheduler=sched, **p)
    assert [len(t.latency_ms) for t in sched.tasks_] == [2, 2]


@pytest.mark.skipif(importlib.util.find_spec("rich") is not None, reason="rich is installed here")
def test_asking_for_a_display_whose_package_is_missing_is_a_clear_error(tmp_path) -> None:
    p = {**parts(), "progress": Progress(stream=io.StringIO(), display="rich")}
    with pytest.raises(TVMSError, match="pip install rich"):
        tune_tir(matmul(8), "llvm", str(tmp_path), 2, num_trials_per_iter=2,
                 space=FnSpace(stochastic_schedule_mm), strategy=Replay(stochastic_schedule_mm), **p)
