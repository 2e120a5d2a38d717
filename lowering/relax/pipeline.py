"""Pre-built Relax pipelines by name, as TVM's ``relax.get_pipeline``.

``get_pipeline("zero")`` is TVM 0.27's zero pipeline: LegalizeOps, AnnotateTIROpPattern,
FoldConstant, FuseOps, FuseTIR (TVM also applies a MetaSchedule database when one is current;
tvms has none).
"""
from __future__ import annotations

from typing import Any, Callable

from ...ir.errors import TVMSError
from ..transform import Pass, Sequential
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize import LegalizeOps
from .op_pattern import AnnotateTIROpPattern
from .passes import FoldConstant


def zero_pipeline() -> Pass:
    return Sequential([LegalizeOps(), AnnotateTIROpPattern(), FoldConstant(), FuseOps(), FuseTIR()],
                      name="zero_pipeline")


PIPELINES: dict[str, Callable[..., Pass]] = {"zero": zero_pipeline}


def get_pipeline(name: str = "zero", **kwargs: Any) -> Pass:
    """The pipeline registered as ``name``; an unknown name lists the known ones."""
    if name not in PIPELINES:
        raise TVMSError(f"unknown pipeline {name!r}; the known pipelines are "
                        f"{', '.join(repr(k) for k in PIPELINES)}")
    return PIPELINES[name](**kwargs)


__all__ = ["PIPELINES", "get_pipeline", "zero_pipeline"]
