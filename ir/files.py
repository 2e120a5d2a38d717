"""Writing a result file: the one way every tvms command and ``export_library`` writes.

A regular file (or a new one) is replaced atomically: the data goes to a temporary file in
the same directory (``.NAME.tvms-tmp-XXXXXXXX``), is fsynced, gets the original's permission
bits and is renamed over it, so a reader sees the old file or the new one, never half of one.
A symbolic link is followed: the file it points to is replaced and the link stays. Anything
that is not a regular file (``/dev/null``, a FIFO, ``/dev/stdout``) is written through, never
renamed over. On any failure, an interruption included, the target is unchanged and the
temporary file is gone.
"""
from __future__ import annotations

import os
import re
import secrets
import stat
import sys

from .errors import TVMSError

TEMP_MARK = ".tvms-tmp-"  # in every temporary file's name: a killed run's leftovers are obviously ours


class WriteError(TVMSError):
    """A file that cannot be written (read-only, a missing directory, a full disk, ...)."""


def write_file(path: str, data: bytes, new_mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` as described above. ``new_mode`` (less the umask) is the mode
    of a file that did not exist. Raises WriteError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        fd = _descriptor(path) if st is not None else None
        if fd is not None:  # /dev/stdout, /dev/fd/N: the open descriptor itself (its offset, its
            if fd in (1, 2):    # O_APPEND); opening the path anew would truncate a redirected file
                (sys.stdout if fd == 1 else sys.stderr).flush()  # (what was printed comes first)
            _write_all(fd, data)
            return
        if st is not None and _writes_through(path, st):
            with open(path, "wb") as f:
                f.write(data)
            return
    except OSError as err:
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None
    if st is not None and (not st.st_mode & 0o222 or not os.access(path, os.W_OK)):
        # (checked by hand: the rename would succeed in a writable directory, and root may write anything)
        raise WriteError(f"cannot write {path}: the file is read-only")
    _replace(path, os.path.realpath(path), data, stat.S_IMODE(st.st_mode) if st else _masked(new_mode))


_FD_PATH = re.compile(r"/dev/fd/(\d+)|/proc/(?:self|(\d+))/fd/(\d+)")
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: str) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``), if any."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if current in _STD_PATHS:
            return _STD_PATHS[current]
        m = _FD_PATH.fullmatch(current)
        if m and (m.group(2) is None or int(m.group(2)) == os.getpid()):
            return int(m.group(1) or m.group(3))
        if not os.path.islink(current):
            return None
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _writes_through(path: str, st: os.stat_result) -> bool:
    """Whether ``path`` is written in place: it is not a regular file, or it reaches one through
    /dev or /proc (``/dev/stdout`` redirected to a file: renaming over that file would leave the
    shell's descriptor on the old one)."""
    if not stat.S_ISREG(st.st_mode):
        return True
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if current.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return False


def _masked(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _replace(path: str, target: str, data: bytes, mode: int) -> None:
    directory, name = os.path.split(target)
    tmp = os.path.join(directory or ".", f".{name}{TEMP_MARK}{secrets.token_hex(4)}")
    created = done = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        created = True
        try:
            _write_all(fd, data)
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        done = True
    except OSError as err:
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        if created and not done:  # an error, or an interruption (KeyboardInterrupt) while writing
            try:
                os.unlink(tmp)
            except OSError:
                pass
