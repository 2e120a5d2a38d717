"""Compilation targets: ``tvms.target.Target("llvm -num-cores=2")`` and ``with target:``.

A ``Target`` is its kind (the first word) and its ``-key=value`` options, read and checked here,
the one place a target string is parsed: the string form ``"llvm -mcpu=haswell -num-cores=4"``
and TVM 0.27's dict form ``{"kind": "llvm", "mcpu": "haswell", "num-cores": 4}`` give the same
target. Entering it with ``with`` makes it the current target, which ``tvms.build`` and
``tvms.compile`` use when they are called without one (TVM's ``Target.current()``).
``str(target)`` is its normalized text (the compile cache keys on it). What a kind does with its
options (LLVM's CPU and feature names, say) is its row's business (``lowering/targets.py``).
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable

from .context_stack import ContextStack
from .errors import TVMSError
from .global_info import KIND_DEFAULTS
from .registry import get_global_func

# the kinds TVM names; the target table (lowering/targets.py) says which of them tvms compiles
KNOWN_KINDS = ("llvm", "c", "cuda", "rocm", "metal", "vulkan", "opencl", "webgpu")


def _text(value: Any) -> str:
    return str(value)


def _names(value: Any) -> tuple:
    """A comma-separated list (``-mattr=+avx2,+fma``), or a list in the dict form."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(str(v) for v in items if str(v))


def _count(value: Any) -> int:
    """A positive integer (``-num-cores=4``)."""
    text = str(value)
    if not text.isdigit() or int(text) < 1:
        raise ValueError("a positive integer")
    return int(text)


def _level(value: Any) -> int:
    """A non-negative integer (``-opt-level=3``)."""
    text = str(value)
    if not text.isdigit():
        raise ValueError("a non-negative integer")
    return int(text)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true"):
        return True
    if str(value).lower() in ("0", "false"):
        return False
    raise ValueError("true or false")


# option -> how its value is read; the options every kind takes, then each kind's own
_COMMON: dict[str, Callable[[Any], Any]] = {"keys": _names, "tag": _text, "device": _text, "model": _text,
                                            "libs": _names}
_CPU = {"mcpu": _text, "mattr": _names, "mtriple": _text, "mabi": _text, "num-cores": _count,
        "opt-level": _level, "system-lib": _flag, "fast-math": _flag}
_GPU = {"arch": _text, "max_num_threads": _count, "thread_warp_size": _count,
        "max_threads_per_block": _count, "max_shared_memory_per_block": _count,
        "registers_per_block": _count, "l2_cache_size_bytes": _count}
OPTIONS: dict[str, dict] = {kind: {**_COMMON, **(_CPU if kind in ("llvm", "c") else _GPU)}
                            for kind in KNOWN_KINDS}

_CURRENT = ContextStack("tvms_targets")  # (per thread, as TVM's)


class Target:
    """A target: ``kind`` and ``attrs`` (its options, values read: ``-mattr`` a tuple of names,
    ``-num-cores`` an int), and ``host`` (the target of the host code, or None)."""

    def __init__(self, target: "str | dict | Target", host: "str | dict | Target | None" = None) -> None:
        if isinstance(target, Target):
            kind, options, host = target.kind, dict(target.attrs), host if host is not None else target.host
        elif isinstance(target, dict):
            kind, options = _from_dict(target)
        elif isinstance(target, str):
            kind, options = _from_text(target)
        else:
            raise TVMSError(f"a Target is made from a string or a dict, not {type(target).__name__}")
        if "host" in options:  # (-host=... or a "host" entry: the target of the host code)
            host = options.pop("host") if host is None else host
            options.pop("host", None)
        where = repr(target) if not isinstance(target, Target) else repr(str(target))
        if kind not in KNOWN_KINDS:
            raise TVMSError(f"unknown target kind {kind!r} in {where}; the kinds are {', '.join(KNOWN_KINDS)}")
        known = OPTIONS[kind]
        self.kind = kind
        self.attrs: dict[str, Any] = {}
        for key, value in options.items():
            read = known.get(key)
            if read is None:
                raise TVMSError(f"target {where}: unknown option -{key} for kind {kind!r}; it takes "
                                f"{', '.join('-' + k for k in sorted(known))}")
            try:
                self.attrs[key] = read(value)
            except ValueError as err:
                raise TVMSError(f"target {where}: -{key}={value} is not valid (-{key} needs {err})") from None
        self.text = " ".join([kind] + [f"-{k}={_show(v)}" for k, v in self.attrs.items()])
        self.host = None if host is None else host if isinstance(host, Target) else Target(host)

    @property
    def num_cores(self) -> int | None:
        return self.attrs.get("num-cores")

    @property
    def mcpu(self) -> str | None:
        return self.attrs.get("mcpu")

    @property
    def mattr(self) -> tuple:
        return self.attrs.get("mattr", ())

    @property
    def keys(self) -> tuple:
        """The target's keys: as given, else the kind's (``("cuda", "gpu")``, ``("cpu",)``)."""
        return self.attrs.get("keys") or tuple(KIND_DEFAULTS.get(self.kind, {}).get("keys", ()))

    # a GPU target's limits, as TVM 0.27 fills them in (None where TVM sets none)
    @property
    def arch(self) -> str | None:
        """``-arch``; for ``cuda`` without one, as TVM: the architecture of GPU 0, else sm_50."""
        if "arch" in self.attrs or self.kind != "cuda":
            return self.attrs.get("arch")
        detect = get_global_func("runtime.cuda_driver.detected_arch", allow_missing=True)
        return (detect() if detect else None) or "sm_50"

    @property
    def max_num_threads(self) -> int | None:
        return self.attrs.get("max_num_threads", KIND_DEFAULTS.get(self.kind, {}).get("max_num_threads"))

    @property
    def thread_warp_size(self) -> int | None:
        return self.attrs.get("thread_warp_size", KIND_DEFAULTS.get(self.kind, {}).get("thread_warp_size"))

    @property
    def max_shared_memory_per_block(self) -> int | None:
        return self.attrs.get("max_shared_memory_per_block",
                              KIND_DEFAULTS.get(self.kind, {}).get("max_shared_memory_per_block"))

    def export(self) -> dict:
        """The target as TVM 0.27's ``Target.export()`` gives it: kind, tag, keys, the kind's
        defaults and the options given (less what TVM detects on the host, llvm's mtriple)."""
        config = {"kind": self.kind, "tag": self.attrs.get("tag", ""), "keys": list(self.keys)}
        for key, value in {**KIND_DEFAULTS.get(self.kind, {}), **self.attrs}.items():
            if key not in ("keys", "tag"):
                config[key] = list(value) if isinstance(value, tuple) else value
        if self.kind == "cuda":
            config["arch"] = self.arch
        if self.host is not None:
            config["host"] = self.host.export()
        return config

    @property
    def threads(self) -> int:
        """Threads for parallel loops: TVM_NUM_THREADS, else ``-num-cores``, else all cores."""
        return thread_count(self.num_cores)

    def __enter__(self) -> "Target":
        _CURRENT.push(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.pop(self)

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target entered with ``with``; None (or an error) when there is none."""
        current = _CURRENT.current()
        if current is None and not allow_none:
            raise TVMSError("no target is current (use `with tvms.target.Target(...):`)")
        return current

    @staticmethod
    def from_device(device: Any) -> "Target":
        """The target that compiles for ``device`` (``"cpu"``, ``"cuda"`` or a ``tvms.cpu(0)``-style
        device), as TVM's ``Target.from_device``: ``llvm`` for the CPU (tvms's llvm target is the
        host CPU); a CUDA GPU gives a ``cuda`` target with its architecture (``sm_XY`` from its
        compute capability), shared memory, threads per block and warp size, as TVM's."""
        kind = device if isinstance(device, str) else getattr(device, "type", None)
        if kind in ("cpu", "llvm"):
            return Target("llvm")
        if kind == "cuda":
            if isinstance(device, str):
                raise TVMSError("Target.from_device: pass the device (tvms.cuda(0)) to read its architecture")
            if not device.exist:
                raise TVMSError(f"Target.from_device: cannot detect the device {device}: {device.missing_reason}")
            return Target({"kind": "cuda", "max_shared_memory_per_block": device.max_shared_memory_per_block,
                           "max_threads_per_block": device.max_threads_per_block,
                           "thread_warp_size": device.warp_size,
                           "arch": "sm_" + device.compute_version.replace(".", "")})
        raise TVMSError(f"Target.from_device: expected a device or 'cpu'/'cuda', not {device!r}")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Target({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and other.text == self.text and other.host == self.host

    def __hash__(self) -> int:
        return hash(self.text)


def _from_text(text: str) -> tuple[str, dict]:
    words = text.split()
    if not words:
        raise TVMSError("an empty target string; a target starts with its kind (e.g. 'llvm')")
    options: dict[str, Any] = {}
    for word in words[1:]:
        if not word.startswith("-"):
            raise TVMSError(f"target {text!r}: option {word!r} must start with '-'")
        key, eq, value = word.lstrip("-").partition("=")
        options[key] = value if eq else True  # (a bare -flag: only a true-or-false option takes it)
    return words[0], options


def _from_dict(config: dict) -> tuple[str, dict]:
    """TVM 0.27's dict form: ``kind`` and the options by name (values as in the string form, or
    lists for the list options)."""
    if "kind" not in config:
        raise TVMSError(f"a target dict needs a 'kind' entry: {config!r}")
    return str(config["kind"]), {str(k): v for k, v in config.items() if k != "kind"}


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def thread_count(num_cores: int | None) -> int:
    """Threads for parallel loops: TVM_NUM_THREADS, else ``num_cores``, else all cores."""
    env = os.environ.get("TVM_NUM_THREADS", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    return num_cores or host_cores()


@functools.lru_cache(maxsize=None)
def host_cores() -> int:
    """The host's cores (1 when unknown), read once: ``os.cpu_count()`` reads /sys at each
    call, 10-20 us, and kernels ask at each call."""
    return os.cpu_count() or 1


def as_target(target: "str | dict | Target | None") -> Target:
    """``target`` as a Target: itself, parsed, or when None the current target, else ``llvm``."""
    if target is None:
        return Target.current() or Target("llvm")
    return target if isinstance(target, Target) else Target(target)


__all__ = ["KNOWN_KINDS", "OPTIONS", "Target", "as_target", "host_cores", "thread_count"]
