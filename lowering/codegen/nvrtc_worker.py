"""NVRTC in a process of its own, so that a crash of NVRTC or of the PTX assembler inside it (a
kernel's inline asm reaches the assembler as the user wrote it, and the assembler has bugs: NVRTC
12.9's dies on a ``wgmma.mma_async`` whose descriptors are constant zeros) is a TVMSError here, not
the end of this process.

The worker is started on the first compile (``python -m tvms.lowering.codegen.nvrtc_worker``) and
kept: each request is a length-prefixed pickle ``(function, arguments)`` on its stdin, each answer
``("ok", value)`` or ``("error", message)`` on its stdout. A worker that dies is started again on
the next compile; a forked child starts its own; the worker ends when this process does.
"""
from __future__ import annotations

import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from typing import Any, BinaryIO

from ...ir.errors import TVMSError

_LENGTH = struct.Struct("<Q")
_lock = threading.Lock()
_worker: subprocess.Popen | None = None


def _send(stream: BinaryIO, value: Any) -> None:
    data = pickle.dumps(value)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError
    (size,) = _LENGTH.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _forget() -> None:
    """In a forked child: the parent's worker and its pipes are the parent's; start one's own."""
    global _lock, _worker
    if _worker is not None:
        _worker.stdin.close()  # (this child's copies of the pipes; the parent's stay open)
        _worker.stdout.close()
        _worker.returncode = 0  # (the parent's process, not this child's to wait for)
    _lock, _worker = threading.Lock(), None


def _stop() -> None:
    if _worker is not None and _worker.poll() is None:
        _worker.stdin.close()  # (the worker's loop ends)
        try:
            _worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _worker.kill()
        _worker.stdout.close()


os.register_at_fork(after_in_child=_forget)
atexit.register(_stop)


def _start() -> subprocess.Popen:
    try:
        return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    except OSError as err:
        raise TVMSError(f"could not start the process that runs NVRTC: {err}") from None


def run(function: str, *args: Any, doing: str) -> Any:
    """``function(*args)`` of the nvrtc module, run by the worker; ``doing`` says what it does,
    for the message if the worker dies."""
    global _worker
    with _lock:
        if _worker is None or _worker.poll() is not None:
            _worker = _start()
        try:
            _send(_worker.stdin, (function, args))
            status, value = _receive(_worker.stdout)
        except (EOFError, BrokenPipeError, OSError):
            code = _worker.wait()
            for pipe in (_worker.stdin, _worker.stdout):
                try:
                    pipe.close()
                except OSError:  # (a write the dead worker did not read)
                    pass
            _worker = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            raise TVMSError(f"NVRTC crashed {doing} ({how}): a bug of NVRTC or of the PTX assembler in it, "
                            f"which this kernel's code reaches; NVRTC ran in a process of its own, so "
                            f"nothing else was lost") from None
    if status == "error":
        raise TVMSError(value)
    return value


def serve() -> None:
    """The worker's loop: requests from stdin, answers to stdout, until stdin closes."""
    from . import nvrtc

    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            function, args = _receive(requests)
        except EOFError:
            return
        try:
            answer = ("ok", getattr(nvrtc, function)(*args))
        except TVMSError as err:
            answer = ("error", str(err))
        except Exception as err:  # (cuda-python's own failures: reported, the worker goes on)
            answer = ("error", f"NVRTC failed: {type(err).__name__}: {err}")
        _send(answers, answer)


if __name__ == "__main__":
    serve()
