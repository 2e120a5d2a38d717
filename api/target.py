"""tvms.target: compilation targets, as ``tvm.target`` (``Target("llvm -num-cores=2")``)."""
from __future__ import annotations

from .ir.target import Target

__all__ = ["Target"]
