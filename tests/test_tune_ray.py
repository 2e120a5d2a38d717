"""Building and measuring on Ray (``RayBuilder`` / ``RayRunner``), on a local Ray instance.

The Ray tests skip when ray is not installed (``pip install tvms[distributed]``); starting Ray
takes seconds, so they are slow and share one instance."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from test_schedule_seed002 import stochastic_schedule_mm
from test_tune_core import CRASH, HANG, TARGET, assert_computes_matmul, matmul64

import tvms
import tvms.meta_schedule as ms
from tvms.ir.errors import TVMSError
from tvms.lowering.tune.measure import args_info_of, main_func
from tvms.lowering.tune.measure_callback import remove_build_dir
from tvms.lowering.tune.worker_pool import WorkerError
from tvms.tir import Schedule

RESOURCE = "tvms-target-llvm"  # (the custom resource the local "machine with the target" declares)


def test_importing_tvms_does_not_import_ray_and_its_absence_is_a_clear_error(monkeypatch) -> None:
    code = "import sys, tvms, tvms.meta_schedule as ms; ms.builder.RayBuilder; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "ray", None)  # (import ray then fails, as when it is absent)
    for make in ms.builder.RayBuilder, ms.runner.RayRunner, lambda: ms.runner.create("ray"):
        with pytest.raises(TVMSError, match=r"needs the ray package: pip install 'tvms\[distributed\]'"):
            make()


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, resources={RESOURCE: 1}, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def executor(ray):
    """A builder and a runner on the Ray started above (the builder: one actor, its CPUs but one;
    the runner: one actor on the node with the target's resource)."""
    builder = ms.builder.RayBuilder()
    runner = ms.runner.RayRunner(timeout_sec=2, resources={RESOURCE: 1},
                                 evaluator_config=ms.EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0))
    yield builder, runner
    builder.shutdown()
    runner.shutdown()


def tiled(factor: int) -> tvms.IRModule:
    sch = Schedule(matmul64())
    _, j, _ = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, factor])
    return sch.mod


@pytest.mark.slow
def test_candidates_are_built_and_measured_by_ray_actors(executor) -> None:
    builder, runner = executor
    mods = [tiled(8), tiled(16), matmul64()]
    built = builder.build([ms.BuilderInput(m, TARGET) for m in mods] + [
        ms.BuilderInput(mods[0], TARGET, params={"w": np.ones(3)}),
        ms.BuilderInput(tvms.script.from_source(CRASH), TARGET),
        ms.BuilderInput(tvms.script.from_source(HANG), TARGET)])
    assert built[3].artifact_path is None and built[3].error_msg.startswith("RayBuilder: TVMSError: ")
    assert all(r.error_msg is None for r in built[:3] + built[4:])
    for mod, result in zip(mods, built):  # (the bytes came back through Ray's object store)
        assert os.path.basename(os.path.dirname(result.artifact_path)).startswith("tvms-tune-")
        lib = tvms.runtime.load_module(result.artifact_path)
        a, b, c = (np.random.default_rng(n).random((64, 64), dtype=np.float32) for n in range(3))
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert_computes_matmul(mods[0])

    args = args_info_of(main_func(mods[0]))
    futures = runner.run([ms.RunnerInput(r.artifact_path, "cpu", args) for r in built[:3]] + [
        ms.RunnerInput(built[4].artifact_path, "cpu", [ms.TensorInfo("float32", (64,))]),
        ms.RunnerInput(built[0].artifact_path, "cpu", args),
        ms.RunnerInput(built[5].artifact_path, "cpu", [ms.TensorInfo("float32", (1,))]),
        ms.RunnerInput(built[1].artifact_path, "cpu", args),
        ms.RunnerInput("/nonexistent/x.so", "cpu", args),
        ms.RunnerInput(built[0].artifact_path, "rocm", args)])
    *measured, crashed, after_crash, hung, after_hang, missing, wrong_device = [f.result() for f in futures]
    assert all(f.done() for f in futures)
    for result in measured + [after_crash, after_hang]:
        assert result.error_msg is None and len(result.run_secs) == 2 and all(0 < s < 1 for s in result.run_secs)
    assert crashed.run_secs is None and "RayRunner: the Ray actor died while running the task" in crashed.error_msg
    assert hung.error_msg == "RayRunner: timeout: the task ran longer than 2 s and was stopped"
    assert "the artifact cannot be read" in missing.error_msg and "'rocm'" in wrong_device.error_msg

    # the actors stay between rounds: a second round starts none
    actors = set(builder.pool._idle) | set(runner.pool._idle)
    with pytest.raises(WorkerError, match="cannot be sent to a Ray actor: TypeError: Could not serialize"):
        builder.pool.submit(len, threading.Lock()).result()  # (fails alone: the pool goes on)
    [again] = builder.build([ms.BuilderInput(mods[1], TARGET)])
    [future] = runner.run([ms.RunnerInput(again.artifact_path, "cpu", args)])
    assert future.result().error_msg is None
    assert set(builder.pool._idle) | set(runner.pool._idle) == actors
    for result in built + [again]:
        if result.artifact_path is not None:
            remove_build_dir(result.artifact_path)
    with pytest.raises(TVMSError, match="no node of the Ray cluster has the resources .*'tvms-gpu': 1"):
        ms.runner.RayRunner(resources={"tvms-gpu": 1})


@pytest.mark.slow
def test_tune_tir_through_ray(executor, tmp_path) -> None:
    builder, runner = executor
    mod = matmul64()
    db = ms.tune_tir(mod, "llvm -num-cores=1", str(tmp_path), 6, num_trials_per_iter=3, builder=builder,
                     runner=runner, space=ms.space_generator.ScheduleFn(stochastic_schedule_mm),
                     strategy="replay-func", cost_model="random", seed=0, progress="none")
    records = db.get_all_tuning_records()
    # (the space has 5 schedules, j's inner factor 1 to 16, each measured once; none failed)
    assert len(records) == 5 and all(0 < r.run_secs[0] < 1 for r in records)
    best = ms.tir_integration.compile_tir(db, mod, "llvm -num-cores=1")
    assert_computes_matmul(best.mod)


@pytest.mark.slow
def test_an_actor_whose_cuda_context_is_lost_is_replaced(executor, tmp_path) -> None:
    """As with a local worker: the trial whose kernel faulted fails with the driver's error, and
    the next candidate is measured by a fresh actor (another process), not the spoiled one."""
    from tune_standins import assert_a_lost_context_ends_its_worker, worker_pid_or_lost_context

    builder, _ = executor
    flag = tmp_path / "lose_context"
    # (the actors import the evaluator from the tests' folder, and read the flag's name; they take
    # no CPU and no target resource, which the fixture's builder and runner hold once they ran)
    env = {"TVMS_TEST_LOSE_CONTEXT": str(flag), "PYTHONPATH": os.path.dirname(os.path.abspath(__file__))}
    runner = ms.runner.RayRunner(f_run_evaluator=worker_pid_or_lost_context,
                                 actor_options={"runtime_env": {"env_vars": env}, "num_cpus": 0})
    try:
        [built] = builder.build([ms.BuilderInput(matmul64(), TARGET)])
        assert_a_lost_context_ends_its_worker(runner, built.artifact_path, args_info_of(main_func(matmul64())), flag)
        remove_build_dir(built.artifact_path)
    finally:
        runner.shutdown()
