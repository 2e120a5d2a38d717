"""The records a trial passes along: candidate -> builder -> runner -> database (TVM's names).

A candidate is a schedule plus the description of its arguments (``TensorInfo``); the builder turns
its module into an artifact on disk; the runner loads that artifact in another process, fills the
arguments with random data and times it. Failures are results too (``error_msg``), never exceptions,
so one bad candidate costs one trial.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.target import Target


@dataclass(frozen=True)
class TensorInfo:
    """One tensor argument: its dtype and static shape. JSON: ``["TENSOR", dtype, shape]``."""

    dtype: str
    shape: tuple

    def as_json(self) -> list:
        return ["TENSOR", self.dtype, [int(n) for n in self.shape]]

    @staticmethod
    def from_json(json_obj: Any) -> "TensorInfo":
        try:
            tag, dtype, shape = json_obj
            if tag != "TENSOR":
                raise ValueError(f"unknown argument kind {tag!r}")
            return TensorInfo(str(dtype), tuple(int(n) for n in shape))
        except (TypeError, ValueError) as e:
            raise TVMSError(f"not an argument description in JSON form ({json_obj!r}): {e}") from None


def args_info_of(func: PrimFunc) -> list[TensorInfo]:
    """The arguments of ``func`` as ``TensorInfo``s; a symbolic size is refused (a tuning task
    measures one shape)."""
    infos = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            raise TVMSError(f"cannot tune a PrimFunc with the scalar parameter {param.name!r}")
        shape = []
        for dim in buffer.shape:
            value = getattr(dim, "value", None)
            if not isinstance(value, int):
                raise TVMSError(f"cannot tune a PrimFunc whose buffer {buffer.name!r} has the symbolic "
                                f"size {dim.script()}; bind it to a number first")
            shape.append(value)
        infos.append(TensorInfo(str(buffer.dtype), tuple(shape)))
    return infos


def main_func(mod: IRModule) -> PrimFunc:
    """The one PrimFunc a tuning task works on: ``main``, or the only PrimFunc of ``mod``."""
    funcs = {name: mod[name] for name in mod if isinstance(mod[name], PrimFunc)}
    if "main" in funcs:
        return funcs["main"]
    if len(funcs) == 1:
        return next(iter(funcs.values()))
    raise TVMSError(f"a tuning task is one PrimFunc; this module has {len(funcs)} "
                    f"({', '.join(sorted(funcs)) or 'none'})")


@dataclass
class MeasureCandidate:
    """A schedule to measure, with the arguments its function takes."""

    sch: Any  # lowering.schedule.Schedule
    args_info: list


@dataclass
class BuilderInput:
    mod: IRModule
    target: Target
    params: dict | None = None


@dataclass
class BuilderResult:
    """The path of the built artifact, or why it could not be built."""

    artifact_path: str | None
    error_msg: str | None = None


@dataclass
class RunnerInput:
    artifact_path: str
    device_type: str
    args_info: list


@dataclass
class RunnerResult:
    """The seconds of each repeat, or why the candidate could not run."""

    run_secs: list | None
    error_msg: str | None = None


@dataclass
class EvaluatorConfig:
    """How a runner times a candidate (TVM's fields): ``repeat`` measurements, each the mean of
    ``number`` calls, ``number`` grown until one measurement takes ``min_repeat_ms``; with
    ``enable_cpu_cache_flush`` the caches are flushed before each repeat (so flushing is
    meant with ``number=1`` and ``min_repeat_ms=0``, as in TVM)."""

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False
    extra: dict = field(default_factory=dict)
