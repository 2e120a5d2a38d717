"""Building and measuring on a Ray cluster: ``RayBuilder`` and ``RayRunner``.

When one machine is not enough, the candidates are built and measured by Ray actors instead of
local worker processes. The actors start once and serve every round (their imports are paid
once), one task at a time each; a task that raises is an error result, and an actor that dies
(a segfault in generated code, its node lost), runs past ``timeout_sec``, or is left unable to
run another (a CUDA context lost to a kernel's fault) is killed and replaced, so only its task
fails, as with ``LocalBuilder`` / ``LocalRunner``.

Placement: each actor asks Ray for one CPU and the ``resources`` given, so it runs only on the
nodes that declare them: start the machines with the target hardware with, for instance,
``ray start --resources='{"tvms-target-znver4": 1}'`` and pass
``RayRunner(resources={"tvms-target-znver4": 1})``; a resource of 1 per node and one runner
actor per such node (``num_workers``) keeps two measurements from sharing a machine.
``actor_options`` goes to Ray's ``.options()`` as it is (``num_cpus``, ``scheduling_strategy``,
``runtime_env``, ...). Every node needs tvms installed (the same version as the driver's).

Artifacts travel through Ray's object store, never through a shared file system: a build actor
returns the library's bytes, which ``RayBuilder`` writes into a local temporary directory (so a
built artifact is an ordinary file: ``LocalRunner`` can measure it and the measure callbacks
remove it); ``RayRunner`` puts the file's bytes in the object store, and the measuring actor
writes them into a temporary directory of its node, loads and times the library there, and
removes it.

Ray is an optional dependency (``pip install tvms[distributed]``), imported only when a
``RayBuilder`` or ``RayRunner`` is made.
"""
from __future__ import annotations

import os
import tempfile
from concurrent.futures import Future
from typing import Any, Callable

from ...ir.errors import TVMSError
from ..transform import PassContext
from .builder import ARTIFACT_NAME, LocalBuilder, _build_in_worker
from .measure import EvaluatorConfig, RunnerInput
from .measure_callback import remove_build_dir
from .runner import LocalRunner, _run_in_worker
from .worker_pool import WorkerError, WorkerPool, WorkerSpoiled, _fail, describe_error, failed_future

_POLL_SEC = 0.05  # (how soon the dispatcher sees a task submitted while it waits on Ray)


def connect_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ``ray`` module, connected: to the cluster at ``address`` (``"auto"``,
    ``"ray://host:10001"``, ``"host:6379"``; ``"auto"`` is the cluster this machine belongs to),
    else to a new Ray instance started here with ``num_cpus`` CPUs (not one found running, as
    Ray's own default would). A connection made before (``ray.init`` by the caller) is used as it is.
    The actors' output stays in Ray's logs (a crashing candidate's dump would break the progress
    display): ``ray.init(log_to_driver=True)`` before shows it here."""
    try:
        import ray
    except ImportError:
        raise TVMSError("building and measuring on Ray needs the ray package: "
                        "pip install 'tvms[distributed]'") from None
    if not ray.is_initialized():
        try:
            if address is None:
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except Exception as err:  # (Ray raises ConnectionError, ValueError, RuntimeError, ...)
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise TVMSError(f"cannot connect to {where}: {type(err).__name__}: {err}") from None
    return ray


class _Actor:
    """What each Ray actor runs: the pool's tasks, one at a time, as ``(ok, value)``."""

    def __init__(self, initializer: Callable | None, initargs: tuple) -> None:
        self.broken = None
        try:
            if initializer is not None:
                initializer(*initargs)
        except BaseException as err:  # (every task then fails with this reason)
            self.broken = "the worker's initializer failed: " + describe_error(err)

    def ready(self) -> bool:
        return True

    def call(self, fn: Callable, *args: Any) -> tuple:
        """``(ok, value, spoiled)``, as a local worker replies: a spoiled actor (``WorkerSpoiled``,
        a CUDA context lost to a kernel's fault) is replaced by the pool."""
        if self.broken is not None:
            return False, self.broken, False
        try:
            return True, fn(*args), False
        except BaseException as err:  # (a task's failure is its result; the actor goes on unless spoiled)
            return False, describe_error(err), isinstance(err, WorkerSpoiled)


class _RayWorker:
    """A Ray actor, ended as a pool ends its workers."""

    def __init__(self, ray: Any, actor_class: Any, init: tuple) -> None:
        self.ray = ray
        self.actor = actor_class.remote(*init)

    def alive(self) -> bool:
        return True  # (an actor that died while idle is found by its next task)

    def kill(self) -> None:
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # (already gone with its node, or Ray shut down)
            pass

    stop = kill


class RayPool(WorkerPool):
    """A ``WorkerPool`` whose workers are Ray actors (same ``submit``, futures and errors).
    The dispatcher, instead of reading pipes, waits on Ray's object refs (``ray.wait``) for
    ``_POLL_SEC`` at most, to see new submissions."""

    def __init__(self, ray: Any, max_workers: int, timeout_sec: float | None, initializer: Callable | None = None,
                 resources: dict | None = None, actor_options: dict | None = None) -> None:
        super().__init__(max_workers, timeout_sec, initializer)
        self.ray = ray
        self.options = {"num_cpus": 1, "resources": dict(resources or {}), **(actor_options or {}),
                        "max_restarts": 0, "max_task_retries": 0}
        _check_placement(ray, self.options)
        self._actor_class = ray.remote(_Actor).options(**self.options)

    def _wake(self) -> None:
        pass  # (the dispatcher polls)

    def _start_worker(self) -> tuple:
        try:
            worker = _RayWorker(self.ray, self._actor_class, self._init)
        except Exception as err:  # (options Ray refuses)
            raise WorkerError(f"a Ray actor could not be started: {type(err).__name__}: {err}") from None
        return worker.actor.ready.remote(), worker

    def _send(self, worker: _RayWorker, fn: Callable, args: tuple, future: Future) -> Any:
        try:
            return worker.actor.call.remote(fn, *args)
        except Exception as err:  # (Ray pickles the task here: a part that cannot be pickled)
            self._idle.append(worker)
            _fail(future, f"the task cannot be sent to a Ray actor: {type(err).__name__}: {err}")
            return None

    def _collect(self, busy: dict, starting: dict, timeout: float | None) -> None:
        refs = [*starting, *busy]
        if not refs:
            return
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=min(_POLL_SEC, _POLL_SEC if timeout is None else timeout))
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in starting:
                self._actor_ready(ref, starting.pop(ref))
            else:
                self._task_done(ref, *busy.pop(ref))

    def _actor_ready(self, ref: Any, worker: _RayWorker) -> None:
        try:
            self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            self._lose(worker)
            self._fail_next(f"a Ray actor died while starting: {_ray_message(err)}")
            return
        self._idle.append(worker)

    def _task_done(self, ref: Any, worker: _RayWorker, future: Future, deadline: Any) -> None:
        try:
            ok, value, spoiled = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as err:
            self._lose(worker)
            _fail(future, f"the Ray actor died while running the task: {_ray_message(err)}")
            return
        except self.ray.exceptions.RayError as err:  # (the task could not run: its arguments, its result)
            ok, value, spoiled = False, _ray_message(err), False
        if spoiled:  # (the next task gets a fresh actor)
            self._lose(worker)
        else:
            self._idle.append(worker)
        if ok:
            future.set_result(value)
        else:
            _fail(future, value)


def _ray_message(err: BaseException, limit: int = 400) -> str:
    """Ray's error message on one line, its start (it goes on with hints on the causes)."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_placement(ray: Any, options: dict) -> None:
    """Refuse resources that no node of the cluster has (Ray would wait for them forever)."""
    wanted = {"CPU": options.get("num_cpus") or 0, **options.get("resources", {})}
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if any(all(have.get(name, 0) >= amount for name, amount in wanted.items()) for have in nodes):
        return
    known = sorted({name for have in nodes for name in have if not name.startswith("node:")})
    raise TVMSError(f"no node of the Ray cluster has the resources {wanted} that the actors ask for "
                    f"(its nodes have {', '.join(known) or 'nothing'}; declare them with "
                    f"ray start --resources=...)")


def _write_artifact(data: bytes, parent: str | None = None) -> str:
    """Write a library's bytes into a new ``tvms-tune-`` temporary directory (in ``parent``, else
    the system's temporary folder); its path."""
    directory = tempfile.mkdtemp(prefix="tvms-tune-", dir=parent)
    path = os.path.join(directory, ARTIFACT_NAME)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _build_to_bytes(text: str, target: Any, params: dict | None, f_build: Callable, f_export: Callable,
                    settings: PassContext) -> bytes:
    path = _build_in_worker(text, target, params, f_build, f_export, settings)
    try:
        with open(path, "rb") as f:
            return f.read()
    finally:
        remove_build_dir(path)


def _run_from_bytes(data: bytes, *measure_args: Any) -> list[float]:
    path = _write_artifact(data)
    try:
        return _run_in_worker(path, *measure_args)
    finally:
        remove_build_dir(path)


class RayBuilder(LocalBuilder):
    """``RayBuilder(max_workers=None, timeout_sec=30.0, f_build=None, f_export=None,
    initializer=None, *, address=None, num_cpus=None, resources=None, actor_options=None)``:
    ``LocalBuilder`` on Ray actors (``max_workers`` of them; default: the cluster's CPUs but one,
    left to a runner). ``address`` and ``num_cpus`` say which Ray to use (``connect_ray``);
    ``resources`` and ``actor_options`` where the actors go (this module's doc)."""

    def __init__(self, max_workers: int | None = None, timeout_sec: float = 30.0, f_build: Callable | None = None,
                 f_export: Callable | None = None, initializer: Callable | None = None, *,
                 address: str | None = None, num_cpus: int | None = None, resources: dict | None = None,
                 actor_options: dict | None = None) -> None:
        ray = connect_ray(address, num_cpus)
        if max_workers is None:
            max_workers = max(1, int(ray.cluster_resources().get("CPU", 1)) - 1)
        super().__init__(max_workers, timeout_sec, f_build, f_export)
        self.pool = RayPool(ray, max_workers, timeout_sec, initializer, resources, actor_options)

    def _submit(self, text: str, target: Any, params: dict | None, settings: PassContext) -> Future:
        return self.pool.submit(_build_to_bytes, text, target, params, self.f_build, self.f_export, settings)

    def _artifact_path(self, built: bytes) -> str:
        try:
            return _write_artifact(built, self.pool.scratch_dir())  # (removed with the pool if not before)
        except OSError as err:
            raise WorkerError(f"the built library cannot be written here: {err}") from None


class RayRunner(LocalRunner):
    """``RayRunner(timeout_sec=30, evaluator_config=None, cooldown_sec=0.0, alloc_repeat=1,
    f_alloc_argument=None, f_run_evaluator=None, initializer=None, *, num_workers=1,
    address=None, num_cpus=None, resources=None, actor_options=None)``: ``LocalRunner`` on
    ``num_workers`` Ray actors, each measuring one candidate at a time (give each its own
    machine with ``resources``: this module's doc)."""

    def __init__(self, timeout_sec: float = 30, evaluator_config: EvaluatorConfig | None = None,
                 cooldown_sec: float = 0.0, alloc_repeat: int = 1, f_alloc_argument: Callable | None = None,
                 f_run_evaluator: Callable | None = None, initializer: Callable | None = None, *,
                 num_workers: int = 1, address: str | None = None, num_cpus: int | None = None,
                 resources: dict | None = None, actor_options: dict | None = None) -> None:
        ray = connect_ray(address, num_cpus)
        super().__init__(timeout_sec, evaluator_config, cooldown_sec, alloc_repeat, f_alloc_argument, f_run_evaluator)
        self.ray = ray
        self.pool = RayPool(ray, num_workers, timeout_sec, initializer, resources, actor_options)

    def _submit(self, inp: RunnerInput) -> Future:
        try:
            with open(inp.artifact_path, "rb") as f:
                data = f.read()
        except (OSError, TypeError) as err:
            return failed_future(f"the artifact cannot be read: {err}")
        return self.pool.submit(_run_from_bytes, self.ray.put(data), *self._measure_args(inp))
