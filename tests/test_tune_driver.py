"""The tuning loop (task schedulers, tune_tasks/tune_tir/compile_tir, progress, logs, curve) run
with small in-process stand-ins for the builder, the runner, the space and the strategy, so that
it is checked on its own: budgets, resumption, the order tasks are picked in, failures recorded."""
from __future__ import annotations

import io
import time

import numpy as np
import pytest

import tvms
from tvms.ir import TVMSError
from tvms.lowering.schedule import Schedule
from tvms.lowering.tune.database import MemoryDatabase, TuningRecord
from tvms.lowering.tune.flops import estimate_tir_flops
from tvms.lowering.tune.measure import (BuilderResult, MeasureCandidate, RunnerResult, args_info_of,
                                        main_func)
from tvms.lowering.tune.progress import Progress, tuning_statistics, write_curve
from tvms.lowering.tune.task_scheduler import GradientBased, RoundRobin, TaskScheduler
from tvms.lowering.tune.tune import compile_tir, tune_tasks, tune_tir
from tvms.lowering.tune.tune_context import TuneContext


MATMUL = """
@T.prim_func
def main(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    for i, j, k in T.grid(N, N, N):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def matmul(n: int):
    return tvms.script.from_source(MATMUL.replace("N", str(n)))


def stochastic_schedule_mm(sch):  # seed 002's space
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


# ---------------------------------------------------------------- stand-ins (in process)
class Future:
    def __init__(self, result):
        self._result = result

    def done(self):
        return True

    def result(self):
        return self._result


class InProcessBuilder:
    """Compiles with tvms.build; ``fail`` names modules (by a trace decision) that fail to build."""

    def __init__(self, fail=lambda mod: False):
        self.built, self.fail, self.calls = {}, fail, []

    def build(self, inputs):
        self.calls.append(len(inputs))
        out = []
        for inp in inputs:
            if self.fail(inp.mod):
                out.append(BuilderResult(None, "refused by the test"))
                continue
            path = f"mem://{len(self.built)}"
            self.built[path] = tvms.build(inp.mod, inp.target)
            out.append(BuilderResult(path))
        return out


class InProcessRunner:
    def __init__(self, builder):
        self.builder = builder

    def run(self, inputs):
        futures = []
        for inp in inputs:
            lib = self.builder.built[inp.artifact_path]
            args = [np.random.rand(*a.shape).astype(a.dtype) for a in inp.args_info]
            start = time.perf_counter()
            lib["main"](*args)
            futures.append(Future(RunnerResult([time.perf_counter() - start])))
        return futures


class FnSpace:
    def __init__(self, f):
        self.f = f

    def generate_design_space(self, mod):
        return [self.f(Schedule(mod, seed=0))]

    def clone(self):
        return FnSpace(self.f)


class Replay:
    """Fresh samples of the space's function until ``max_trials`` (a ReplayFunc)."""

    def __init__(self, f):
        self.f = f

    def _initialize_with_tune_context(self, ctx):
        self.ctx = ctx

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database, cost_model):
        self.max_trials, self.per_iter, self.done = max_trials, num_trials_per_iter, 0
        self.database = database

    def generate_measure_candidates(self):
        n = min(self.per_iter, self.max_trials - self.done)
        if n <= 0:
            return None
        info = args_info_of(main_func(self.ctx.mod))
        return [MeasureCandidate(self.f(Schedule(self.ctx.mod, seed=self.ctx.fork_seed())), info) for _ in range(n)]

    def notify_runner_results(self, candidates, results):
        self.done += len(results)

    def post_tuning(self):
        pass

    def clone(self):
        return Replay(self.f)


class AddToDatabase:
    def apply(self, scheduler, task_id, candidates, builder_results, runner_results):
        ctx = scheduler.tasks_[task_id].ctx
        workload = scheduler.database_.commit_workload(ctx.mod)
        for cand, result in zip(candidates, runner_results):
            secs = result.run_secs if result.error_msg is None else [1e10]
            scheduler.database_.commit_tuning_record(
                TuningRecord(cand.sch.trace, workload, secs, ctx.target, cand.args_info))


def parts():
    builder = InProcessBuilder()
    return dict(builder=builder, runner=InProcessRunner(builder), database=MemoryDatabase(),
                measure_callbacks=[AddToDatabase()], cost_model=None, progress=None)


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
    sched = RoundRobin(build_chunk=2)
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
