"""Tuning leaves nothing in the temporary folder: the builder's artifacts and whatever its workers
write there are removed when a candidate fails to build (an error, a crash, a timeout) or to run,
when the tuned best is timed again against the default schedule, when Ctrl-C stops the loop, with
several workers, and by a real ``tvms tune`` run. Each test points TMPDIR (this process's and its
workers') at a fresh folder and looks at it afterwards."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from tune_standins import MATMUL, matmul

from tvms import meta_schedule as ms
from tvms.ir.errors import TVMSError
from tvms.lowering.tune.builder import ARTIFACT_NAME
from tvms.lowering.tune.measure import RunnerResult
from tvms.lowering.tune.runner import RunnerFuture
from tvms.lowering.tune.task_scheduler import TaskScheduler

TARGET = "llvm -num-cores=1"


@pytest.fixture
def temp_folder(tmp_path, monkeypatch):
    """A fresh, empty TMPDIR for this process (``tempfile``) and the workers it starts."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def left_in(folder) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def artifacts_in(folder) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(ARTIFACT_NAME))


# ---- builds that go wrong in a worker after writing temporary files (a linker's scratch files),
# chosen by the size of the matmul
def misbehaving_build(mod, target, params):
    n = mod["main"].buffer_map[mod["main"].params[0]].shape[0].value
    if n == 8:
        tempfile.mkstemp(prefix="scratch-")
        os.kill(os.getpid(), signal.SIGSEGV)
    if n == 12:
        tempfile.mkdtemp(prefix="scratch-")
        time.sleep(60)
    if n == 16:
        tempfile.mkstemp(prefix="scratch-")
        raise TVMSError("this build fails on purpose")
    _CRASH_AFTER_EXPORT[:] = [n == 20]
    return ms.builder.default_build(mod, target, params)


_CRASH_AFTER_EXPORT = [False]


def export_or_crash(rt_mod):
    """The default export, then a crash (for the module of size 20) before the path is returned."""
    path = ms.builder.default_export(rt_mod)
    if _CRASH_AFTER_EXPORT[0]:
        os.kill(os.getpid(), signal.SIGSEGV)
    return path


def imported():
    """A worker's initializer: importing this module before the timeouts count."""


def test_failed_builds_with_several_workers_leave_nothing(temp_folder) -> None:
    builder = ms.builder.LocalBuilder(max_workers=2, timeout_sec=5, f_build=misbehaving_build, f_export=export_or_crash,
                                      initializer=imported)
    try:
        results = builder.build([ms.BuilderInput(matmul(n), TARGET) for n in (8, 12, 16, 20, 24, 32)])
        errors = [r.error_msg for r in results]
        assert "killed by SIGSEGV" in errors[0] and "timeout" in errors[1] and "on purpose" in errors[2]
        assert "killed by SIGSEGV" in errors[3] and errors[4:] == [None, None]
        assert all(os.path.isfile(r.artifact_path) for r in results[4:])
        # (the crashed export's artifact and the failed builds' files, until the builder shuts down)
        assert len(artifacts_in(temp_folder)) == 3 and len(left_in(temp_folder)) > 3 * 2 + 3
    finally:
        builder.shutdown()
    assert left_in(temp_folder) == []


class FakeTimes(ms.runner.Runner):
    """A runner that times nothing: the first candidate (the default schedule) takes 1 ms, every
    later one 0.1 ms, so the tuned best is timed again against the default; ``interrupt_at``:
    the call of ``run`` that raises KeyboardInterrupt, as Ctrl-C would. It checks each artifact
    exists when it is sent."""

    def __init__(self, interrupt_at: int | None = None) -> None:
        self.calls, self.interrupt_at = 0, interrupt_at
        self.artifacts: set = set()  # (every artifact sent)

    def run(self, runner_inputs):
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        assert all(os.path.isfile(inp.artifact_path) for inp in runner_inputs)
        self.artifacts.update(inp.artifact_path for inp in runner_inputs)
        secs = 1e-3 if self.calls == 1 else 1e-4
        return [RunnerFuture(lambda: True, lambda: RunnerResult([secs])) for _ in runner_inputs]


def tune(work_dir, runner, builder, measure_callbacks="default") -> None:
    ms.tune_tir(matmul(16), TARGET, str(work_dir), 4, num_trials_per_iter=2, seed=0, strategy="replay-trace",
                cost_model="random", builder=builder, runner=runner, progress=None, task_scheduler="round-robin",
                measure_callbacks=measure_callbacks)


def keeping_callbacks() -> list:
    """The default callbacks but ``RemoveBuildArtifact``: the run keeps its artifacts."""
    return [ms.measure_callback.AddToDatabase(), ms.measure_callback.UpdateCostModel()]


def test_the_loop_removes_every_artifact_it_built(temp_folder, tmp_path, monkeypatch) -> None:
    """Measured batches, and the best and the default schedule timed again in turns
    (``_confirm_best``): nothing built stays while the builder still runs."""
    confirmed = []
    real = TaskScheduler._confirm_best
    monkeypatch.setattr(TaskScheduler, "_confirm_best", lambda self, task: confirmed.append(real(self, task)))
    builder = ms.builder.LocalBuilder(max_workers=2)
    try:
        runner = FakeTimes()
        tune(tmp_path / "w", runner, builder)
        assert confirmed and runner.calls > 3  # (the baseline, two batches, and the confirmation)
        assert artifacts_in(temp_folder) == []
    finally:
        builder.shutdown()
    assert left_in(temp_folder) == []


def test_ctrl_c_in_the_loop_leaves_nothing(temp_folder, tmp_path) -> None:
    builder = ms.builder.LocalBuilder(max_workers=2)
    try:
        with pytest.raises(KeyboardInterrupt):  # (Ctrl-C as a built batch goes to the runner)
            tune(tmp_path / "w", FakeTimes(interrupt_at=3), builder)
        assert artifacts_in(temp_folder) == []  # (the batch in flight: removed by the loop)
    finally:
        builder.shutdown()
    assert left_in(temp_folder) == []
    # a builder made by tune_tir itself ends with the run, its folder with it
    with pytest.raises(KeyboardInterrupt):
        tune(tmp_path / "w2", FakeTimes(interrupt_at=2), "local")
    assert left_in(temp_folder) == []


def test_tvms_tune_leaves_nothing(tmp_path) -> None:
    """A real run, in a process of its own (its TMPDIR read at start, as a user's would be)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    model = tmp_path / "m.tvms"
    model.write_text(MATMUL.replace("N", "16"))
    env = dict(os.environ, TMPDIR=str(folder))
    run = subprocess.run([sys.executable, "-m", "tvms", "tune", str(model), "--work-dir", str(tmp_path / "w"),
                          "--trials", "4", "--strategy", "replay-trace", "--cost-model", "random",
                          "--progress", "none", "--target", TARGET], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert left_in(folder) == []


def export_to_users_folder(rt_mod):
    """A user's export: each library in a folder of its own under $KEEP_FOLDER."""
    folder = tempfile.mkdtemp(dir=os.environ["KEEP_FOLDER"])
    path = os.path.join(folder, "mod.so")
    rt_mod.export_library(path)
    return path


def test_a_run_without_remove_build_artifact_keeps_the_users_exports(temp_folder, tmp_path, monkeypatch) -> None:
    """Without ``RemoveBuildArtifact`` nothing built is removed: not the measured batches, not the
    best and the default schedule timed again in turns (``_confirm_best``), not their folders."""
    keep = tmp_path / "keep"
    keep.mkdir()
    monkeypatch.setenv("KEEP_FOLDER", str(keep))
    confirmed = []
    real = TaskScheduler._confirm_best
    monkeypatch.setattr(TaskScheduler, "_confirm_best", lambda self, task: confirmed.append(real(self, task)))
    builder = ms.builder.LocalBuilder(max_workers=2, f_export=export_to_users_folder)
    try:
        runner = FakeTimes()
        tune(tmp_path / "w", runner, builder, keeping_callbacks())
    finally:
        builder.shutdown()
    assert confirmed and runner.calls > 3 and len(runner.artifacts) > 4
    assert all(os.path.isfile(p) and os.path.dirname(p).startswith(str(keep)) for p in runner.artifacts)
    assert sorted(keep.rglob("mod.so")) == sorted(map(type(keep), runner.artifacts))
    assert left_in(temp_folder) == []  # (the workers' scratch folder: gone with the builder)
    # the default callbacks remove the user's exports (RemoveBuildArtifact says so)
    runner = FakeTimes()
    builder = ms.builder.LocalBuilder(max_workers=2, f_export=export_to_users_folder)
    try:
        tune(tmp_path / "w2", runner, builder)
    finally:
        builder.shutdown()
    assert runner.artifacts and not any(os.path.exists(p) for p in runner.artifacts)


def test_a_builder_made_by_tune_tir_keeps_the_artifacts_of_a_run_that_keeps_them(temp_folder, tmp_path) -> None:
    """``builder="local"`` shuts down with the run: the artifacts a run without
    ``RemoveBuildArtifact`` keeps stay in TMPDIR, and nothing else of its workers does."""
    runner = FakeTimes()
    tune(tmp_path / "w", runner, "local", keeping_callbacks())
    assert len(runner.artifacts) > 4 and all(os.path.isfile(p) for p in runner.artifacts)
    assert sorted(str(temp_folder / p) for p in artifacts_in(temp_folder)) == sorted(runner.artifacts)
    assert all(os.path.basename(p) == ARTIFACT_NAME or (temp_folder / p).is_dir() for p in left_in(temp_folder))
