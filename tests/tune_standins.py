"""In-process stand-ins for the tuning engine's builder, runner, space, strategy and callback,
so that the tuning loop and its integrations are tested on their own."""
from __future__ import annotations

import time

import numpy as np
from test_schedule_seed002 import stochastic_schedule_mm  # noqa: F401  (seed 002's space)

import tvms
from tvms.lowering.schedule import Schedule
from tvms.lowering.tune.database import MemoryDatabase, TuningRecord
from tvms.lowering.tune.measure import BuilderResult, MeasureCandidate, RunnerResult, args_info_of, main_func


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


def assert_a_lost_context_ends_its_worker(runner, artifact_path: str, args: list, flag) -> None:
    """Through ``runner`` (its evaluator ``worker_pid_or_lost_context``, reading ``flag``'s name):
    one worker measures candidate after candidate; the trial whose kernel faults fails with the
    driver's error, and the next is measured by a fresh worker."""
    from tvms.lowering.tune.measure import RunnerInput

    def measure():
        [future] = runner.run([RunnerInput(artifact_path, "cpu", args)])
        return future.result()

    first, second = measure(), measure()
    assert first.run_secs and first.run_secs == second.run_secs
    flag.write_text("")
    lost = measure()
    assert lost.run_secs is None and "CUDA_ERROR_ILLEGAL_ADDRESS" in lost.error_msg
    assert "a fresh worker measures the next candidate" in lost.error_msg
    after = measure()
    assert after.error_msg is None and after.run_secs != first.run_secs


def worker_pid_or_lost_context(rt_mod, args_lists, config):
    """A runner's evaluator that gives its worker's pid as the time, or, while the file named by
    TVMS_TEST_LOSE_CONTEXT exists (removed then), fails as a kernel that faulted on a GPU does."""
    import os

    from tvms.ir.errors import TVMSError

    flag = os.environ.get("TVMS_TEST_LOSE_CONTEXT", "")
    if flag and os.path.exists(flag):
        os.remove(flag)
        raise TVMSError("CUDA driver call cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS")
    return [float(os.getpid())]
