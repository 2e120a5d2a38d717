"""Building and measuring on a Ray cluster: ``RayBuilder`` and ``RayRunner``.

When one machine is not enough, the candidates are built and measured by Ray actors instead of
local worker processes. The actors start once and serve every round (their imports are paid
once), one task at a time each; a task that raises is an error result, and an actor that dies
(a segfault in generated code, its node lost) or runs past ``timeout_sec`` is killed and
replaced, so only its task fails, as with ``LocalBuilder`` / ``LocalRunner``.

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
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

from ...ir.errors import TVMSError
from .builder import ARTIFACT_NAME, LocalBuilder, _build_in_worker
from .measure import EvaluatorConfig, RunnerInput
from .measure_callback import remove_build_dir
from .runner import LocalRunner, _run_in_worker
from .worker_pool import WorkerError, describe_error, failed_future

_POLL_SEC = 0.05  # (how soon the dispatcher sees a task submitted while it waits on Ray)


def connect_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ``ray`` module, connected: to the cluster at ``address`` (``"auto"``,
    ``"ray://host:10001"``, ``"host:6379"``), else to a Ray instance started here with
    ``num_cpus`` CPUs. A connection made before (``ray.init`` by the caller) is used as it is.
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
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
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
        if self.broken is not None:
            return False, self.broken
        try:
            return True, fn(*args)
        except BaseException as err:  # (a task's failure is its result; the actor goes on)
            return False, describe_error(err)


class RayPool:
    """``WorkerPool``'s interface on Ray actors: ``submit(fn, *args)`` returns a
    ``concurrent.futures.Future`` of ``fn(*args)`` run in an actor, failing with a
    ``WorkerError``. Actors start on first use, at most ``max_workers``, and stay until
    ``shutdown``; a dispatcher thread, running while there is work, hands tasks to idle actors
    and watches the timeouts (counted from when a ready actor takes the task)."""

    def __init__(self, ray: Any, max_workers: int, timeout_sec: float | None, initializer: Callable | None = None,
                 resources: dict | None = None, actor_options: dict | None = None) -> None:
        if max_workers < 1:
            raise TVMSError(f"a worker pool needs at least one worker, got max_workers={max_workers}")
        self.ray = ray
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self.options = {"num_cpus": 1, "resources": dict(resources or {}), **(actor_options or {}),
                        "max_restarts": 0, "max_task_retries": 0}
        _check_placement(ray, self.options)
        self._actor_class = ray.remote(_Actor).options(**self.options)
        self._initializer = initializer
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._idle: list = []
        self._starting: dict = {}  # ready() ref -> actor
        self._busy: dict = {}  # call ref -> (actor, future, deadline)
        self._count = 0  # actors alive: idle, starting or busy
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable, *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise TVMSError("the worker pool is shut down")
            self._pending.append((fn, args, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._dispatch, name="tvms-ray-pool", daemon=True)
                self._thread.start()
        return future

    def shutdown(self) -> None:
        """Kill the actors (tasks still waiting or running fail)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._stop_all("the worker pool was shut down")

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # (interpreter or Ray shutting down: nothing left to do)
            pass

    # ------------------------------------------------------------ the dispatcher thread
    def _dispatch(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    if not (self._pending or self._busy or self._starting):
                        self._thread = None  # (no work: the next submit starts a thread again)
                        return
                self._assign()
                self._collect()
        except BaseException as err:  # (a bug here must fail the futures, not leave them waiting)
            with self._lock:
                self._closed = True
                self._thread = None
            self._stop_all(f"the worker pool failed: {describe_error(err)}")

    def _assign(self) -> None:
        """Give waiting tasks to idle actors; start actors for the rest, up to ``max_workers``."""
        while self._idle:
            with self._lock:
                if not self._pending:
                    break
                fn, args, future = self._pending.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            actor = self._idle.pop()
            deadline = None if self.timeout_sec is None else time.monotonic() + self.timeout_sec
            self._busy[actor.call.remote(fn, *args)] = (actor, future, deadline)
        with self._lock:
            wanted = len(self._pending) - len(self._starting)
        while wanted > 0 and self._count < self.max_workers:
            try:
                actor = self._actor_class.remote(self._initializer, ())
            except Exception as err:  # (options Ray refuses)
                self._fail_next(f"a Ray actor could not be started: {type(err).__name__}: {err}")
                return
            self._count += 1
            self._starting[actor.ready.remote()] = actor
            wanted -= 1

    def _collect(self) -> None:
        """Wait a little for actors that become ready and tasks that end; stop the late ones."""
        refs = [*self._starting, *self._busy]
        if not refs:
            return
        deadlines = [d for _, _, d in self._busy.values() if d is not None]
        wait = min([_POLL_SEC, *(d - time.monotonic() for d in deadlines)])
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=max(0.0, wait))
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in self._starting:
                self._started(ref, self._starting.pop(ref))
            else:
                self._finished(ref, *self._busy.pop(ref))
        now = time.monotonic()
        for ref, (actor, future, deadline) in list(self._busy.items()):
            if deadline is not None and now >= deadline:
                del self._busy[ref]
                self._lose(actor)
                _fail(future, f"timeout: the task ran longer than {self.timeout_sec:g} s and was stopped")

    def _started(self, ref: Any, actor: Any) -> None:
        try:
            self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            self._lose(actor)
            self._fail_next(f"a Ray actor died while starting: {_ray_message(err)}")
            return
        self._idle.append(actor)

    def _finished(self, ref: Any, actor: Any, future: Future, deadline: Any) -> None:
        try:
            ok, value = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as err:
            self._lose(actor)
            _fail(future, f"the Ray actor died while running the task: {_ray_message(err)}")
            return
        except self.ray.exceptions.RayError as err:  # (the task could not run: its arguments, its result)
            ok, value = False, _ray_message(err)
        self._idle.append(actor)
        if ok:
            future.set_result(value)
        else:
            _fail(future, value)

    def _fail_next(self, message: str) -> None:
        with self._lock:
            task = self._pending.popleft() if self._pending else None
        if task is not None and task[2].set_running_or_notify_cancel():
            _fail(task[2], message)

    def _lose(self, actor: Any) -> None:
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # (already gone with its node, or Ray shut down)
            pass
        self._count -= 1

    def _stop_all(self, why: str) -> None:
        for actor, future, _ in self._busy.values():
            self._lose(actor)
            _fail(future, f"{why} while the task ran")
        for actor in [*self._starting.values(), *self._idle]:
            self._lose(actor)
        self._busy.clear()
        self._starting.clear()
        self._idle.clear()
        with self._lock:
            pending, self._pending = list(self._pending), deque()
        for _, _, future in pending:
            if future.set_running_or_notify_cancel():
                _fail(future, f"{why} before the task ran")


def _fail(future: Future, message: str) -> None:
    future.set_exception(WorkerError(message))


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


def _write_artifact(data: bytes) -> str:
    """Write a library's bytes into a new ``tvms-tune-`` temporary directory; its path."""
    directory = tempfile.mkdtemp(prefix="tvms-tune-")
    path = os.path.join(directory, ARTIFACT_NAME)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _build_to_bytes(text: str, target: Any, params: dict | None, f_build: Callable, f_export: Callable) -> bytes:
    path = _build_in_worker(text, target, params, f_build, f_export)
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

    def _submit(self, text: str, target: Any, params: dict | None) -> Future:
        return self.pool.submit(_build_to_bytes, text, target, params, self.f_build, self.f_export)

    def _artifact_path(self, built: bytes) -> str:
        try:
            return _write_artifact(built)
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
