"""Pass instruments, as TVM's ``tvm.instrument``: objects a ``PassContext`` calls around passes.

An instrument defines any of ``enter_pass_ctx()``, ``exit_pass_ctx()``,
``should_run(mod, info)`` (False skips the pass), ``run_before_pass(mod, info)`` and
``run_after_pass(mod, info)``; ``info`` is the pass's ``PassInfo``. Any object with these methods
will do; ``PassInstrument`` is a base class with empty ones.

::

    timing = PassTimingInstrument()
    with PassContext(instruments=[timing, VerifyEachInstrument()]):
        mod = seq(mod)
        print(timing.render())
"""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..ir.module import IRModule
from .transform import PassError, PassInfo


class PassInstrument:
    """A base class with every hook doing nothing."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass


def pass_instrument(cls: type | None = None) -> Any:
    """Decorator kept for TVM's spelling (``@tvm.instrument.pass_instrument``): any class with the
    hooks is already an instrument, so the class is returned as it is."""
    return cls if cls is not None else (lambda c: c)


class PrintBeforeAll(PassInstrument):
    """Print the module before every pass (``Before Running Pass: NAME``, then its script)."""

    def __init__(self, file: TextIO | None = None, **script_kwargs: Any):
        self.file = file
        self.script_kwargs = script_kwargs

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        out = self.file or sys.stdout
        print(f"Before Running Pass: {info}", file=out)
        print(mod.script(**self.script_kwargs), file=out)


class PrintAfterAll(PassInstrument):
    """Print the module after every pass (``After Running Pass: NAME``, then its script).
    ``file`` defaults to standard output; other keywords go to ``mod.script`` (``dialect=``)."""

    def __init__(self, file: TextIO | None = None, **script_kwargs: Any):
        self.file = file
        self.script_kwargs = script_kwargs

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        out = self.file or sys.stdout
        print(f"After Running Pass: {info}", file=out)
        print(mod.script(**self.script_kwargs), file=out)


class PassTimingInstrument(PassInstrument):
    """Wall-clock time of every pass. ``timings`` lists ``(name, seconds)`` in the order the
    passes ran; ``render()`` gives a table and forgets them (as TVM's does)."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self._started: list[float] = []

    def enter_pass_ctx(self) -> None:
        self._started.clear()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._started.append(time.perf_counter())

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self._started:
            self.timings.append((info.name, time.perf_counter() - self._started.pop()))

    def render(self) -> str:
        """``Pass timing:`` then one line per pass (milliseconds) and the total."""
        width = max([len(n) for n, _ in self.timings] + [5])
        lines = ["Pass timing:"]
        lines += [f"  {name:<{width}}  {sec * 1e3:10.3f} ms" for name, sec in self.timings]
        total = sum(sec for _, sec in self.timings)
        lines.append(f"  {'total':<{width}}  {total * 1e3:10.3f} ms")
        self.timings = []
        return "\n".join(lines)


class VerifyEachInstrument(PassInstrument):
    """After every pass, check that the module prints, that the text parses back, and that the
    parsed module is structurally equal to it; a failure is a ``PassError`` naming the pass."""

    def __init__(self, **script_kwargs: Any):
        self.script_kwargs = script_kwargs

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        verify_roundtrip(mod, info.name, **self.script_kwargs)


def verify_roundtrip(mod: IRModule, pass_name: str, **script_kwargs: Any) -> None:
    """Raise ``PassError`` unless ``mod`` prints, parses back and stays structurally equal."""
    from ..ir.errors import TVMSError
    from ..ir.structural import first_mismatch, structural_equal
    from ..script import from_source  # the checker needs the printer and parser

    # (with the constants' values: text that leaves them out parses back to constants of unknown shape)
    script_kwargs = {"show_meta": True, **script_kwargs}
    try:
        text = mod.script(**script_kwargs)
    except Exception as err:  # noqa: BLE001  (any printer failure means the IR is malformed)
        raise PassError(pass_name, f"produced IR that cannot be printed: "
                                   f"{type(err).__name__}: {err}") from err
    try:
        back = from_source(text, f"<after {pass_name}>")
    except TVMSError as err:
        raise PassError(pass_name, f"produced IR whose printed text does not parse:\n{err}") from err
    if not structural_equal(back, mod):
        where = ""
        try:
            mismatch = first_mismatch(back, mod)
            if mismatch:
                path, got, had = mismatch
                where = f" at {path or 'the module'}: {_short(had)} became {_short(got)}"
        except Exception:  # noqa: BLE001  (the message is best effort)
            pass
        raise PassError(pass_name, f"produced IR that does not survive printing and parsing "
                                   f"again (not structurally equal){where}")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


__all__ = ["PassInstrument", "PassTimingInstrument", "PrintAfterAll", "PrintBeforeAll",
           "VerifyEachInstrument", "pass_instrument", "verify_roundtrip"]
