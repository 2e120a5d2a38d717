"""Measure callbacks: what happens to each batch once it is measured (TVM's ``MeasureCallback``).

``apply(task_scheduler, task_id, measure_candidates, builder_results, runner_results)`` reads
the scheduler's ``tasks_[task_id].ctx``, ``database_`` and ``cost_model_`` (TVM's names).
The default list (``MeasureCallback.create("default")``) records the batch in the database,
removes the built artifacts and trains the cost model, in that order.
"""
from __future__ import annotations

import os
from typing import Any

from ...ir.errors import TVMSError
from .database import FAILED_RUN_SECS, TuningRecord


class MeasureCallback:
    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: list, builder_results: list,
              runner_results: list) -> None:
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "default") -> list["MeasureCallback"]:
        if kind == "default":
            return [AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]
        raise TVMSError(f"unknown kind of measure callback list {kind!r} (tvms has 'default')")


class AddToDatabase(MeasureCallback):
    """Commit a record per candidate to the scheduler's database; a candidate that failed to
    build or run is recorded with ``FAILED_RUN_SECS`` (so it is not tried again on resumption)."""

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: list, builder_results: list,
              runner_results: list) -> None:
        database = task_scheduler.database_
        if database is None:
            return
        ctx = task_scheduler.tasks_[task_id].ctx
        workload = database.commit_workload(ctx.mod)
        for candidate, result in zip(measure_candidates, runner_results, strict=True):
            run_secs = result.run_secs if result.run_secs is not None else [FAILED_RUN_SECS]
            database.commit_tuning_record(TuningRecord(candidate.sch.trace, workload, list(run_secs),
                                                       ctx.target, list(candidate.args_info)))


class RemoveBuildArtifact(MeasureCallback):
    """Delete each built artifact (with the temporary directory the builder made for it)."""

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: list, builder_results: list,
              runner_results: list) -> None:
        remove_artifacts(builder_results)


def removes_artifacts(callbacks: list) -> bool:
    """Whether a run with these callbacks removes what it builds; without ``RemoveBuildArtifact``
    the artifacts are the user's to keep (as in TVM): the scheduler removes none of them."""
    return any(isinstance(c, RemoveBuildArtifact) for c in callbacks)


def remove_artifacts(builder_results: list) -> None:
    """Remove the artifact of each ``BuilderResult`` that has one."""
    for result in builder_results:
        if result.artifact_path is not None:
            remove_build_dir(result.artifact_path)


def remove_build_dir(artifact_path: str) -> None:
    """Remove ``artifact_path``, and its directory when that holds nothing else."""
    try:
        os.remove(artifact_path)
        os.rmdir(os.path.dirname(os.path.abspath(artifact_path)))  # (only when it is now empty)
    except OSError:
        pass


class UpdateCostModel(MeasureCallback):
    """Train the scheduler's cost model on the candidates that were built (a run that failed
    teaches the model too; a zero time does not)."""

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: list, builder_results: list,
              runner_results: list) -> None:
        cost_model = task_scheduler.cost_model_
        if cost_model is None:
            return
        kept = [(c, r) for c, b, r in zip(measure_candidates, builder_results, runner_results, strict=True)
                if b.error_msg is None and (r.error_msg is not None or (r.run_secs and sum(r.run_secs) > 0))]
        cost_model.update(task_scheduler.tasks_[task_id].ctx, [c for c, _ in kept], [r for _, r in kept])
