"""Compilation targets: ``tvms.target.Target("llvm -num-cores=2")`` and ``with target:``.

A ``Target`` is its kind (the first word) and its ``-key=value`` options. Entering it with
``with`` makes it the current target, which ``tvms.build`` and ``tvms.compile`` use when they are
called without one (TVM's ``Target.current()``). ``str(target)`` is the text it was made from
(normalized spacing), which is what the LLVM code generator reads (``-mcpu``, ``-mattr``,
``-num-cores``).
"""
from __future__ import annotations

from typing import Any

from tvms.ir.errors import TVMSError

# the kinds TVM names; tvms builds "llvm" (the host CPU) and says so for the others at build time
KNOWN_KINDS = ("llvm", "c", "cuda", "rocm", "metal", "vulkan", "opencl", "webgpu")

_CURRENT: list["Target"] = []


class Target:
    """A target: ``kind`` and ``attrs`` (the ``-key=value`` options; ``-key`` alone is True)."""

    def __init__(self, target: "str | dict | Target", host: "str | Target | None" = None) -> None:
        if isinstance(target, Target):
            text = str(target)
        elif isinstance(target, dict):
            text = " ".join([str(target.get("kind", ""))]
                            + [f"-{k}={v}" for k, v in target.items() if k != "kind"])
        elif isinstance(target, str):
            text = target
        else:
            raise TVMSError(f"a Target is made from a string or a dict, not {type(target).__name__}")
        words = text.split()
        if not words or words[0] not in KNOWN_KINDS:
            raise TVMSError(f"unknown target kind in {text!r}; the kinds are {', '.join(KNOWN_KINDS)}")
        self.kind = words[0]
        self.attrs: dict[str, Any] = {}
        for word in words[1:]:
            if not word.startswith("-"):
                raise TVMSError(f"target {text!r}: option {word!r} must start with '-'")
            key, eq, value = word.lstrip("-").partition("=")
            self.attrs[key] = value if eq else True
        if "num-cores" in self.attrs and not str(self.attrs["num-cores"]).isdigit():
            raise TVMSError(f"target {text!r}: -num-cores needs a positive integer")
        self.text = " ".join(words)
        self.host = Target(host) if host is not None else None

    @property
    def num_cores(self) -> int | None:
        value = self.attrs.get("num-cores")
        return int(value) if value is not None else None

    @property
    def mcpu(self) -> str | None:
        return self.attrs.get("mcpu")

    def __enter__(self) -> "Target":
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.pop()  # (with-statements nest: the innermost leaves first)

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target entered with ``with``; None (or an error) when there is none."""
        if not _CURRENT and not allow_none:
            raise TVMSError("no target is current (use `with tvms.target.Target(...):`)")
        return _CURRENT[-1] if _CURRENT else None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Target({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def resolve_target(target: "str | Target | None") -> "str | Target":
    """``target``, or the current target when it is None, or ``"llvm"`` when none is current."""
    if target is not None:
        return target
    return Target.current() or "llvm"


__all__ = ["KNOWN_KINDS", "Target", "resolve_target"]
