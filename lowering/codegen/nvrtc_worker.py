"""NVRTC in a process of its own, so that a crash of NVRTC or of the PTX assembler inside it (a
kernel's inline asm reaches the assembler as the user wrote it, and the assembler has bugs: NVRTC
12.9's dies on a ``wgmma.mma_async`` whose descriptors are constant zeros) is a TVMSError here, not
the end of this process.

The worker is started on the first compile and kept. It imports tvms from this process's
``sys.path`` (not from its working directory), says it is ready, then answers requests: each a
length-prefixed pickle ``(function, arguments)`` on its stdin (``function`` one of ``SERVED``),
each answer ``("ok", value)`` or ``("error", message)`` on a pipe of its own (its stdout and stderr
go to a file, shown in the message if it dies; Ctrl-C is left to this process). A worker that dies, or
whose answer was not read (an interrupt while waiting for it), is ended and started again on the
next compile; a forked child starts its own; the worker ends when this process does.
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any, BinaryIO

from ...ir.errors import TVMSError

SERVED = ("compile_here",)  # (the nvrtc module's functions the worker runs)
_LENGTH = struct.Struct("<Q")
_lock = threading.Lock()
_worker: subprocess.Popen | None = None
_STDERR_TAIL = 2000  # (characters of a dead worker's stderr its error shows)
_LARGEST = 1 << 32  # (bytes of an answer: a cubin is far smaller)
_DYING_SECS = 5  # (how long a worker whose pipe closed is given to be seen dead)


def _framed(value: Any) -> bytes:
    data = pickle.dumps(value)
    return _LENGTH.pack(len(data)) + data


def _send(stream: BinaryIO, value: Any) -> None:
    stream.write(_framed(value))
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError
    (size,) = _LENGTH.unpack(header)
    if size > _LARGEST:
        raise EOFError  # (not an answer: the stream is not the worker's protocol)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _end(worker: subprocess.Popen, kill: bool) -> tuple[int, str]:
    """End ``worker`` (killed, or left to finish) and close its pipes and log: its exit status and
    the end of its output."""
    if kill and worker.poll() is None:
        worker.kill()
    for pipe in (worker.stdin, worker.answers):
        try:
            pipe.close()
        except OSError:  # (a write the dead worker did not read)
            pass
    code = worker.wait()
    output = _tail(worker.log)
    worker.log.close()
    return code, output


def _forget() -> None:
    """In a forked child: the parent's worker and its pipes are the parent's; start one's own."""
    global _lock, _worker
    if _worker is not None:
        _worker.stdin.close()  # (this child's copies of the pipes; the parent's stay open)
        _worker.answers.close()
        _worker.log.close()
        _worker.returncode = 0  # (the parent's process, not this child's to wait for)
    _lock, _worker = threading.Lock(), None


def _stop() -> None:
    if _worker is not None and _worker.poll() is None:
        _worker.stdin.close()  # (the worker's loop ends)
        try:
            _worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _end(_worker, kill=True)


os.register_at_fork(after_in_child=_forget)
atexit.register(_stop)


def _start() -> subprocess.Popen:
    path = [os.fspath(p) for p in sys.path if isinstance(p, (str, os.PathLike))]
    # (Ctrl-C is the parent's to handle: it ends the worker if it was waiting for it)
    program = ("import json, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
               "sys.path[:] = json.loads(sys.argv[1]); "
               f"from {__name__} import serve; serve(int(sys.argv[2]))")
    log = tempfile.TemporaryFile()
    reader, writer = os.pipe()  # (the answers' own pipe: whatever prints, from startup on, goes to the log)
    try:
        worker = subprocess.Popen([sys.executable, "-u", "-c", program, json.dumps(path), str(writer)],
                                  stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(writer,))
    except OSError as err:
        os.close(reader)
        log.close()
        raise TVMSError(f"could not start the process that runs NVRTC: {err}") from None
    finally:
        os.close(writer)
    worker.log, worker.answers = log, os.fdopen(reader, "rb")
    try:
        ready = _receive(worker.answers)
    except BaseException as err:  # (an interrupt while it starts: ended too)
        if not isinstance(err, Exception):
            _end(worker, kill=True)
            raise
        ready = None
    if ready != ("ready", None):  # (dead, or alive but saying something else: ended)
        raise TVMSError(f"the process that runs NVRTC did not start: {_end(worker, kill=True)[1]}")
    return worker


def _tail(log: Any) -> str:
    try:
        log.seek(0)
        text = log.read().decode(errors="replace").strip()
    except (OSError, ValueError):
        return "(its output is lost)"
    return text[-_STDERR_TAIL:] or "(it printed nothing)"


def _death(code: int) -> str:
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


def run(function: str, *args: Any, doing: str) -> Any:
    """``function(*args)`` of the nvrtc module, run by the worker; ``doing`` says what it does,
    for the message if the worker dies."""
    global _worker
    with _lock:
        if _worker is None or _worker.poll() is not None:
            if _worker is not None:
                _end(_worker, kill=True)
            _worker = _start()
        worker = _worker
        request = _framed((function, args))  # (a request that does not pickle leaves the worker as it was)
        try:
            worker.stdin.write(request)
            worker.stdin.flush()
            status, value = _receive(worker.answers)
        except Exception as err:  # (EOF, a broken pipe, a garbled answer: the worker is gone or lost)
            _worker = None
            if isinstance(err, (EOFError, OSError)):  # (its end of a pipe closed: it is dying, if not yet dead)
                try:
                    worker.wait(timeout=_DYING_SECS)
                except subprocess.TimeoutExpired:
                    pass
            alive = worker.poll() is None
            code, output = _end(worker, kill=True)
            if alive:
                raise TVMSError(f"the process running NVRTC gave an unreadable answer {doing}; it was ended. Its "
                                f"last output: {output}") from None
            raise TVMSError(f"the process running NVRTC died {doing} ({_death(code)}): NVRTC or the PTX assembler "
                            f"in it crashed on this kernel, or the process was killed (out of memory?); nothing "
                            f"else was lost. Its last output: {output}") from None
        except BaseException:  # (an interrupt while it works: its answer would be taken for the next one's)
            _worker = None
            _end(worker, kill=True)
            raise
    if status == "error":
        raise TVMSError(value)
    return value


def serve(answers_fd: int) -> None:
    """The worker's loop: requests from stdin, answers on the pipe ``answers_fd``, until stdin
    closes."""
    answers = os.fdopen(answers_fd, "wb")
    from . import nvrtc

    requests = sys.stdin.buffer
    _send(answers, ("ready", None))
    while True:
        try:
            function, args = _receive(requests)
        except EOFError:
            return
        if function not in SERVED:
            answer = ("error", f"the NVRTC worker runs {', '.join(SERVED)}, not {function!r}")
        else:
            try:
                answer = ("ok", getattr(nvrtc, function)(*args))
            except TVMSError as err:
                answer = ("error", str(err))
            except Exception as err:  # (cuda-python's own failures: reported, the worker goes on)
                answer = ("error", f"NVRTC failed: {type(err).__name__}: {err}")
        _send(answers, answer)
