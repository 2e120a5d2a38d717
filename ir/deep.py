"""Room for walks whose recursion follows the depth of the input.

The parser, the printer, the visitors, structural equality, the passes, the reference executor and
the code generator all recurse into nested expressions and statements, so their Python depth grows
with the program's nesting (a 2,000-term sum is a 2,000-deep chain of ``Add``). Rather than rewrite
every walk iteratively, the public entry points (``@deep_recursion``: parsing, printing, structural
equality and hashing, passes, build, compile, the reference executors, the VM) run as they are and,
when they run out of recursion, again on a thread with a large stack and a higher recursion limit.
The parser refuses nesting beyond ``MAX_NESTING``, which that room covers with a wide margin in
every layer (``tests/test_deep_nesting.py`` checks each one near the limit with --runslow). IR built
from Python that nests deeper still ends in a ``TVMSError``, never in a ``RecursionError``.
"""
from __future__ import annotations

import contextvars
import functools
import sys
import threading
from typing import Any, Callable, TypeVar

from .errors import TVMSError

# The deepest nesting of expressions and statements the parser accepts.
MAX_NESTING = 5000
# Python frames a deep walk may use: the deepest layers (parsing nested calls, code generation,
# LegalizeOps on nested tuples) use about 4 per level of nesting (measured at depth 1,000), so
# MAX_NESTING levels need ~20,000; the rest is room for walks started inside walks.
RECURSION_LIMIT = 120_000
# A Python frame that goes through C (a dataclass constructor, ``map``, a generator) costs at most
# about 700 bytes of C stack on CPython 3.11 (measured): 2 KiB a frame leaves room.
STACK_SIZE = RECURSION_LIMIT * 2048

_room = threading.local()  # .inside: this thread is a deep walk's
_limit_lock = threading.Lock()
_walks_running = 0
_saved_limit = 0

F = TypeVar("F", bound=Callable[..., Any])


def _raise_limit() -> None:
    global _walks_running, _saved_limit
    with _limit_lock:
        if _walks_running == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _walks_running += 1


def _restore_limit() -> None:
    global _walks_running
    with _limit_lock:
        _walks_running -= 1
        if _walks_running == 0:
            sys.setrecursionlimit(_saved_limit)


_TOO_DEEP = f"the program is nested too deeply to process (more than {MAX_NESTING} levels)"


def run_deep(fn: Callable[..., Any], *args: Any, too_deep: str = _TOO_DEEP, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with room for recursion as deep as ``MAX_NESTING`` levels of IR.

    Runs on a thread of its own (the caller waits) unless the caller is already such a thread.
    A ``RecursionError`` becomes a ``TVMSError`` saying ``too_deep``.
    """
    if getattr(_room, "inside", False):
        return fn(*args, **kwargs)
    outcome: list = []
    settings = contextvars.copy_context()  # (the caller's, e.g. its PassContext, go with the walk)

    def walk() -> None:
        _room.inside = True
        try:
            outcome.append((True, settings.run(fn, *args, **kwargs)))
        except RecursionError:
            outcome.append((False, TVMSError(too_deep)))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread as it is
            outcome.append((False, e))

    _raise_limit()
    try:
        with _limit_lock:  # stack_size is process-wide state: set it only for this thread
            previous = threading.stack_size(STACK_SIZE)
            try:
                thread = threading.Thread(target=walk, name="tvms-deep-walk", daemon=True)
                thread.start()
            finally:
                threading.stack_size(previous)
        thread.join()
    finally:
        _restore_limit()
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def from_recursion(err: BaseException) -> bool:
    """Whether ``err`` is a RecursionError or was raised while handling one (a pass wraps the
    errors of its walk in a PassError)."""
    seen = 0
    while err is not None and seen < 32:
        if isinstance(err, RecursionError):
            return True
        err = err.__cause__ or err.__context__
        seen += 1
    return False


def in_deep_walk() -> bool:
    """Whether this thread already runs with the room ``run_deep`` gives."""
    return getattr(_room, "inside", False)


def deep_recursion(fn: F | None = None, *, too_deep: str = _TOO_DEEP) -> F:
    """Decorator for an entry point whose walk follows the input's depth: ``fn`` runs as it is
    (no cost for ordinary inputs), and again with ``run_deep`` when it ran out of recursion;
    ``too_deep`` is the message when even that is not enough. For functions that may run
    twice: they change nothing outside what they return."""
    if fn is None:
        return functools.partial(deep_recursion, too_deep=too_deep)  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if in_deep_walk():
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - only a walk that ran out of stack is retried
            if not from_recursion(err):
                raise
        return run_deep(fn, *args, too_deep=too_deep, **kwargs)

    return wrapper  # type: ignore[return-value]
