"""Worker processes that stay alive between rounds, for building and measuring candidates.

A tuning round builds and measures dozens of candidates; starting a Python process per candidate
(or per round, as TVM's builder does, paying its imports every time) would cost more than the
work. A ``WorkerPool`` starts its workers once and sends them tasks over pipes. A task that
raises comes back as an error; a worker that crashes (a segfault in generated code) or runs past
the timeout is killed and replaced, and only its task fails.

Workers are fresh interpreters (``python -c``), not forks: a fork would inherit the parent's
threads and OpenMP state, and multiprocessing's spawn would re-run the user's script (a tuning
script at top level, as the tutorials write it). A task is a function and its arguments, pickled:
the function is found by module and name in the worker, so it must be defined at module level
(the worker's ``sys.path`` is the parent's).

A worker's temporary files (its ``TMPDIR``: a builder's artifacts, a linker's scratch files) go
into a directory of the pool's, removed with it at ``shutdown`` or, for a pool nobody shut down,
when the process ends: what a worker killed midway leaves there (a timeout, a crash, Ctrl-C) goes
too, where a file of the system's temporary folder would stay behind. ``shutdown(keep=paths)``
leaves the files named (a tuning run's artifacts, kept as it asked) where they are, and removes
the rest.
"""
from __future__ import annotations

import atexit
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable

from ...ir.errors import TVMSError


class WorkerError(TVMSError):
    """A task that did not return: it raised, its worker died, or it ran past the timeout."""


class WorkerSpoiled(TVMSError):
    """Raised by a task that failed so that its worker cannot run another (a CUDA context lost
    to a kernel's illegal address): its message is the task's result, and the pool starts a
    fresh worker for the next task."""


class WorkerPool:
    """``WorkerPool(max_workers, timeout_sec, initializer=None, initargs=())``.

    ``submit(fn, *args)`` returns a ``concurrent.futures.Future`` of ``fn(*args)`` run in a
    worker; its exception is a ``WorkerError`` saying what went wrong. Workers start on first
    use, at most ``max_workers``; each runs ``initializer(*initargs)`` once when it starts.
    A dispatcher thread hands tasks to idle workers and watches the timeouts, so ``submit``
    never blocks; it runs while there is work, so a pool nobody refers to is collected, and its
    workers stopped, like any object (``shutdown`` stops them at once). ``scratch_dir()`` is the
    workers' temporary directory (this module's doc): ``shutdown`` removes it; a pool collected
    without one leaves it to the end of the process (its builder's artifacts may still be in use).
    """

    def __init__(self, max_workers: int, timeout_sec: float | None, initializer: Callable | None = None,
                 initargs: tuple = ()) -> None:
        if max_workers < 1:
            raise TVMSError(f"a worker pool needs at least one worker, got max_workers={max_workers}")
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self._init = (initializer, tuple(initargs))
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._idle: list[_Worker] = []
        self._count = 0  # workers alive, idle or busy
        self._closed = False
        self._wake_r, self._wake_w = _pipe()
        self._thread: threading.Thread | None = None
        self._scratch: str | None = None

    # ------------------------------------------------------------ the caller's side
    def submit(self, fn: Callable, *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise TVMSError("the worker pool is shut down")
            self._pending.append((fn, args, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._dispatch, name="tvms-worker-pool", daemon=True)
                self._thread.start()
        self._wake()
        return future

    def shutdown(self, keep: Iterable[str] = ()) -> None:
        """Stop the workers (tasks still waiting fail) and remove the scratch directory, but for
        the files of it named in ``keep`` (the directory then stays, past the process's end)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._stop_all({}, {})
        with self._lock:
            scratch, self._scratch = self._scratch, None
        if scratch is not None:
            _remove_scratch(scratch, keep)

    def scratch_dir(self) -> str:
        """The workers' temporary directory, made on first use."""
        with self._lock:
            if self._scratch is None:
                if self._closed:
                    raise TVMSError("the worker pool is shut down")
                self._scratch = tempfile.mkdtemp(prefix="tvms-workers-")
                _SCRATCH_DIRS.add(self._scratch)
            return self._scratch

    def __del__(self) -> None:
        try:
            with self._lock:
                self._scratch = None  # (kept to the end of the process: its artifacts may be in use)
            self.shutdown()
        except Exception:  # (interpreter shutdown: nothing left to do)
            pass

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"!")
        except OSError:
            pass

    # ------------------------------------------------------------ the dispatcher thread
    def _dispatch(self) -> None:
        busy: dict = {}  # connection -> (worker, future, deadline)
        starting: dict = {}  # connection -> worker, until it says it is ready
        try:
            self._serve_tasks(busy, starting)
        except BaseException as err:  # (a bug here must fail the futures, not leave them waiting)
            with self._lock:
                self._closed = True
                self._thread = None
            self._stop_all(busy, starting, f"the worker pool failed: {describe_error(err)}")

    def _serve_tasks(self, busy: dict, starting: dict) -> None:
        while True:
            with self._lock:
                closed = self._closed
                if not closed and not (self._pending or busy or starting):
                    self._thread = None  # (no work: the next submit starts a thread again)
                    return
            if closed:
                self._stop_all(busy, starting)
                return
            self._assign(busy, starting)
            deadlines = [d for _, _, d in busy.values() if d is not None]
            self._collect(busy, starting, None if not deadlines else max(0.0, min(deadlines) - time.monotonic()))
            now = time.monotonic()
            for conn, (worker, future, deadline) in list(busy.items()):
                if deadline is not None and now >= deadline:
                    del busy[conn]
                    self._lose(worker)
                    _fail(future, f"timeout: the task ran longer than {self.timeout_sec:g} s and was stopped")

    def _assign(self, busy: dict, starting: dict) -> None:
        """Give waiting tasks to ready workers; start workers for the rest, up to ``max_workers``
        (a task's timeout counts from when a ready worker takes it, not from the worker's start)."""
        for worker in [w for w in self._idle if not w.alive()]:  # (died while idle)
            self._idle.remove(worker)
            self._lose(worker)
        while self._idle:
            with self._lock:
                if not self._pending:
                    break
                fn, args, future = self._pending.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            worker = self._idle.pop()
            key = self._send(worker, fn, args, future)
            if key is not None:
                deadline = None if self.timeout_sec is None else time.monotonic() + self.timeout_sec
                busy[key] = (worker, future, deadline)
        with self._lock:
            wanted = len(self._pending) - len(starting)
        while wanted > 0 and self._count < self.max_workers:
            try:
                key, worker = self._start_worker()
            except WorkerError as err:
                self._fail_next(str(err))
                break
            self._count += 1
            starting[key] = worker
            wanted -= 1

    # ------------------------------------------------------------ how workers are reached (a RayPool's differ)
    def _start_worker(self) -> tuple:
        """Start a worker: ``(key, worker)``, the key ``_collect`` sees it ready by."""
        try:
            worker = _Worker(self._init, self.scratch_dir())
        except (OSError, TVMSError) as err:
            raise WorkerError(f"a worker process could not be started: {err}") from None
        return worker.conn, worker

    def _send(self, worker: "_Worker", fn: Callable, args: tuple, future: Future) -> Any:
        """Hand a task to an idle worker: the key ``_collect`` sees it done by, or None (the task
        failed at once)."""
        try:
            worker.conn.send((fn, args))
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            self._idle.append(worker)
            _fail(future, f"the task cannot be sent to a worker process: {err} (the function "
                          f"and its arguments must be picklable, the function defined at module level)")
            return None
        except OSError:
            self._lose(worker)
            _fail(future, f"the worker process died before the task ({worker.exit_status()})")
            return None
        return worker.conn

    def _collect(self, busy: dict, starting: dict, timeout: float | None) -> None:
        """Wait up to ``timeout`` for workers that become ready and tasks that end (or a submit)."""
        idle = {w.conn: w for w in self._idle}
        for conn in wait([self._wake_r, *busy, *starting, *idle], timeout):
            if conn is self._wake_r:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            elif conn in starting:
                self._started(starting.pop(conn))
            elif conn in busy:
                self._finished(*busy.pop(conn))
            else:  # (an idle worker has nothing to say: it died)
                self._idle.remove(idle[conn])
                self._lose(idle[conn])

    def _started(self, worker: "_Worker") -> None:
        try:
            worker.conn.recv()  # (its "ready")
        except (EOFError, OSError):
            self._lose(worker)
            self._fail_next(f"a worker process died while starting ({worker.exit_status()})")
            return
        self._idle.append(worker)

    def _finished(self, worker: "_Worker", future: Future, deadline: Any) -> None:
        spoiled = False
        try:
            ok, value, spoiled = worker.conn.recv()
        except (EOFError, OSError) as err:
            self._lose(worker)
            _fail(future, f"the worker process died while running the task ({worker.exit_status() or err})")
            return
        except Exception as err:  # (read whole: the worker can go on)
            ok, value = False, f"the task's result cannot be read here: {describe_error(err)}"
        if spoiled:  # (it ends itself; the next task gets a fresh one)
            self._lose(worker)
        else:
            self._idle.append(worker)
        if ok:
            future.set_result(value)
        else:
            _fail(future, value)

    def _fail_next(self, message: str) -> None:
        """Fail the first waiting task (so a worker that cannot start ends the tasks one by one)."""
        with self._lock:
            task = self._pending.popleft() if self._pending else None
        if task is not None and task[2].set_running_or_notify_cancel():
            _fail(task[2], message)

    def _lose(self, worker: "_Worker") -> None:
        worker.kill()
        self._count -= 1

    def _stop_all(self, busy: dict, starting: dict, why: str = "the worker pool was shut down") -> None:
        for worker, future, _ in busy.values():
            worker.kill()
            _fail(future, f"{why} while the task ran")
        for worker in starting.values():
            worker.kill()
        for worker in self._idle:
            worker.stop()
        self._idle.clear()
        with self._lock:
            pending, self._pending = list(self._pending), deque()
        for _, _, future in pending:
            if future.set_running_or_notify_cancel():
                _fail(future, f"{why} before the task ran")
        self._count = 0


_SCRATCH_DIRS: set = set()  # the scratch directories of pools not shut down yet


def _remove_scratch(directory: str, keep: Iterable[str] = ()) -> None:
    """Remove ``directory`` but for the files named in ``keep`` that lie in it (and the
    directories on their way); with nothing to keep, the directory goes too."""
    _SCRATCH_DIRS.discard(directory)
    directory = os.path.abspath(directory)
    kept = {os.path.abspath(p) for p in keep}
    kept = {p for p in kept if p.startswith(directory + os.sep) and os.path.isfile(p)}
    if not kept:
        shutil.rmtree(directory, ignore_errors=True)
        return
    on_the_way = {os.path.dirname(p) for p in kept}
    for path in list(on_the_way):
        while path != directory:
            on_the_way.add(path)
            path = os.path.dirname(path)
    for root, dirs, files in os.walk(directory):
        for name in files:
            if os.path.join(root, name) not in kept:
                _remove_quietly(os.path.join(root, name))
        for name in list(dirs):
            if os.path.join(root, name) not in on_the_way:
                dirs.remove(name)  # (not walked into: removed whole)
                path = os.path.join(root, name)
                if os.path.islink(path):
                    _remove_quietly(path)
                else:
                    shutil.rmtree(path, ignore_errors=True)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


@atexit.register
def _remove_scratch_dirs() -> None:
    for directory in list(_SCRATCH_DIRS):
        _remove_scratch(directory)


def _fail(future: Future, message: str) -> None:
    future.set_exception(WorkerError(message))


def failed_future(message: str) -> Future:
    """A future already failed with ``WorkerError(message)``: a task refused before it is sent."""
    future: Future = Future()
    _fail(future, message)
    return future


def _pipe() -> tuple[Connection, Connection]:
    r, w = os.pipe()
    return Connection(r, writable=False), Connection(w, readable=False)


class _Worker:
    """One worker process and the two pipes to it."""

    def __init__(self, init: tuple, scratch: str) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["TMPDIR"] = scratch  # (what tempfile and the tools it runs use: removed with the pool)
        code = f"from tvms.lowering.tune.worker_pool import serve; serve({to_child_r}, {from_child_w})"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(to_child_r, from_child_w),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.conn = _Duplex(Connection(from_child_r, writable=False), Connection(to_child_w, readable=False))
        self.conn.send(init)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_status(self) -> str:
        code = self.proc.poll()
        if code is None:
            return ""
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.conn.close()

    def stop(self) -> None:
        """Ask the worker to finish; kill it if it does not."""
        try:
            self.conn.send(None)
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _Duplex:
    """A reading and a writing connection used as one (``wait`` watches the reading one)."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self.reader, self.writer = reader, writer

    def fileno(self) -> int:
        return self.reader.fileno()

    def send(self, obj: Any) -> None:
        self.writer.send(obj)

    def recv(self) -> Any:
        return self.reader.recv()

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def serve(read_fd: int, write_fd: int) -> None:
    """A worker's loop: run the initializer, then each task sent, replying ``(ok, value,
    spoiled)``; a spoiled worker (``WorkerSpoiled``) ends after its reply."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the tuner, which then shuts its workers down
    reader, writer = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    initializer, initargs = reader.recv()
    broken = None
    try:
        if initializer is not None:
            initializer(*initargs)
    except BaseException as err:  # (every task then fails with this reason)
        broken = "the worker's initializer failed: " + describe_error(err)
    writer.send("ready")
    while True:
        try:
            task = reader.recv()
        except EOFError:
            return
        except Exception as err:  # (read whole, so the next message is intact)
            writer.send((False, f"the worker cannot load the task: {describe_error(err)}", False))
            continue
        if task is None:
            return
        fn, args = task
        spoiled = False
        try:
            if broken is not None:
                raise WorkerError(broken)
            reply = (True, fn(*args))
        except BaseException as err:  # (a task's failure is its result; the worker goes on)
            spoiled = isinstance(err, WorkerSpoiled)
            reply = (False, describe_error(err))
        try:
            writer.send(reply + (spoiled,))
        except Exception as err:
            writer.send((False, f"the task's result cannot be sent back: {err}", spoiled))
        if spoiled:
            return


def describe_error(err: BaseException) -> str:
    """One line for a TVMSError (it already says what is wrong), else the traceback."""
    if isinstance(err, WorkerSpoiled):
        return str(err)
    if isinstance(err, TVMSError):
        return f"{type(err).__name__}: {err}"
    return "".join(traceback.format_exception(type(err), err, err.__traceback__)).rstrip()
