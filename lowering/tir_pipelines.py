"""The TIR pipeline a build runs, by TVM 0.27's names (``tvm.compile(..., tir_pipeline=NAME)``,
``tvm.tirx.build(..., pipeline=NAME)``).

``"s_tir"`` lowers scheduled TensorIR (blocks, then loops): the pipeline tvms always ran.
``"tirx"`` is for kernels written in TVM's tirx language (scope ids, ``T.ptx.*``, ``T.cuda.*``,
thread bindings written by hand): fewer passes, none that inserts barriers (no ThreadSync) or
moves allocations. ``"default"`` is ``"s_tir"`` (TVM maps it so, for now), and None is the
target's default, which is ``"s_tir"`` for every target tvms compiles for. A name is all TVM's
``tirx.build`` takes (it asserts a string), so a pass object is refused here too; an unknown
name is refused naming the candidates, as TVM's ``get_tir_pipeline`` does.
"""
from __future__ import annotations

from typing import Any

from ..ir.errors import TVMSError

TIR_PIPELINES = ("default", "s_tir", "tirx")  # the names a user may write


def resolve_tir_pipeline(name: Any) -> str:
    """The pipeline ``name`` stands for (``"s_tir"`` or ``"tirx"``); None is the target's default."""
    if name is None or name == "default":
        return "s_tir"
    if not isinstance(name, str):
        raise TVMSError(f"tir_pipeline takes a pipeline's name ({', '.join(map(repr, TIR_PIPELINES))}) or "
                        f"None, not a {type(name).__name__} (TVM 0.27's tirx.build takes names only)")
    if name not in TIR_PIPELINES:
        raise TVMSError(f"unknown TIR pipeline {name!r}; the candidates are "
                        f"{', '.join(map(repr, TIR_PIPELINES))}")
    return name


__all__ = ["TIR_PIPELINES", "resolve_tir_pipeline"]
