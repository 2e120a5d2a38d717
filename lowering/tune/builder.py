"""Builders: candidates' modules -> artifacts on disk (TVM's ``Builder`` / ``LocalBuilder``).

``LocalBuilder`` compiles in a pool of worker processes that live as long as the builder, so a
round of tuning pays for compiling only (TVM's starts its workers again every round). A module
travels to a worker as its TVMScript text; the worker builds it with the build driver and writes
the shared library (``export_library``) into a fresh temporary directory, whose path is the
result. A build that fails, crashes or hangs is a ``BuilderResult`` with ``error_msg``. The
directories are made in the pool's folder (worker_pool.py): an artifact lasts until it is removed
(``RemoveBuildArtifact``) or the builder shuts down, whatever its workers left with it;
``shutdown(keep_artifacts=True)`` (what ``tune_tir`` does to a builder it made, for a run without
``RemoveBuildArtifact``) leaves the artifacts still there, and only them.

A worker builds under the PassContext settings current where ``build`` is called (its opt_level,
passes and config, not its instruments): a candidate tuned under ``tirx.use_async_copy`` is
measured with the copies it will be built with. (TVM's workers build under a default context.)
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable

from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.target import as_target, host_cores
from ...script.module_parser import from_source
from ..transform import PassContext
from .measure import BuilderInput, BuilderResult
from .worker_pool import WorkerError, WorkerPool, failed_future

ARTIFACT_NAME = "tvms_tmp_mod.so"


class Builder:
    """``build(build_inputs) -> list[BuilderResult]``, one result per input, in order."""

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> "Builder":
        if kind == "local":
            return LocalBuilder(*args, **kwargs)
        if kind == "ray":
            from .ray_executor import RayBuilder

            return RayBuilder(*args, **kwargs)
        raise TVMSError(f"unknown builder kind {kind!r} (tvms has 'local' and 'ray')")


def default_build(mod: Any, target: Any, params: dict | None) -> Any:
    """Compile ``mod`` (PrimFuncs) for ``target`` with ``tvms.build``."""
    from ..build import build

    if params:
        raise TVMSError("LocalBuilder builds TensorIR modules, which take no bound parameters")
    return build(mod, target)


def default_export(rt_mod: Any) -> str:
    """Write ``rt_mod`` as a shared library in a new temporary directory; its path."""
    directory = tempfile.mkdtemp(prefix="tvms-tune-")
    path = os.path.join(directory, ARTIFACT_NAME)
    try:
        rt_mod.export_library(path)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return path


class LocalBuilder(Builder):
    """``LocalBuilder(max_workers=None, timeout_sec=30.0, f_build=None, f_export=None,
    initializer=None)``: builds on this machine, ``max_workers`` at a time (default: one per
    core). ``f_build(mod, target, params) -> runtime module`` and ``f_export(module) -> path``
    replace the default steps; like ``initializer`` (run once in each worker) they must be
    module-level functions, as they are sent to the workers by name."""

    def __init__(self, max_workers: int | None = None, timeout_sec: float = 30.0,
                 f_build: Callable | None = None, f_export: Callable | None = None,
                 initializer: Callable | None = None) -> None:
        self.max_workers = max_workers or host_cores()
        self.timeout_sec = timeout_sec
        self.f_build = f_build or default_build
        self.f_export = f_export or default_export
        self.pool = WorkerPool(self.max_workers, timeout_sec, initializer)
        self.artifact_paths: list[str] = []  # (every artifact built, for shutdown(keep_artifacts=True))

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        futures = []
        settings = PassContext.current().portable()
        for inp in build_inputs:
            try:
                futures.append(self._submit(_module_text(inp.mod), as_target(inp.target), inp.params, settings))
            except TVMSError as err:  # (a module that cannot be sent: its build fails)
                futures.append(failed_future(str(err)))
        results = []
        for future in futures:
            try:
                results.append(BuilderResult(self._artifact_path(future.result())))
                self.artifact_paths.append(results[-1].artifact_path)
            except WorkerError as err:
                results.append(BuilderResult(None, f"{type(self).__name__}: {err}"))
        return results

    def _submit(self, text: str, target: Any, params: dict | None, settings: PassContext) -> Any:
        """Start building a module (its text) in a worker under ``settings``; a future of the
        worker's result."""
        return self.pool.submit(_build_in_worker, text, target, params, self.f_build, self.f_export, settings)

    def _artifact_path(self, built: Any) -> str:
        """The artifact's path here, from what the worker returned (its path: the same machine)."""
        return built

    def shutdown(self, keep_artifacts: bool = False) -> None:
        """Stop the workers and remove their temporary files: the artifacts too, unless
        ``keep_artifacts`` (those not removed yet then stay where they are)."""
        self.pool.shutdown(keep=self.artifact_paths if keep_artifacts else ())


def _module_text(mod: Any) -> str:
    """How a module travels to a worker: its TVMScript text (IR nodes do not pickle)."""
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TVMSError(f"a BuilderInput holds an IRModule or a PrimFunc, not {type(mod).__name__}")
    try:
        return mod.script(show_meta=True)
    except Exception as err:  # (the printer does not know every node yet)
        raise TVMSError(f"the module cannot be printed to send it to a worker: {err}") from None


def _build_in_worker(text: str, target: Any, params: dict | None, f_build: Callable, f_export: Callable,
                     settings: PassContext) -> str:
    with settings:
        return f_export(f_build(from_source(text), target, params))
