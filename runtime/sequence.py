"""Sequences whose length is known only at run time (an ONNX Loop that grows one over a run-time
trip count): a tuple of tensors that these packed functions rebuild, as the VM holds tuples.
Only the sequence itself changes; its tensors are neither copied nor read.

``tvms.sequence.insert(seq, value[, position])``, ``tvms.sequence.erase(seq[, position])``,
``tvms.sequence.length(seq)`` (ONNX's SequenceInsert, SequenceErase, SequenceLength: a position
counts from the back when negative, and one out of range is an error).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .tensor import tensor


def _position(seq: tuple, position: Any, end_ok: bool, default: int) -> int:
    if position is None:
        return default
    value = position.numpy() if hasattr(position, "numpy") else np.asarray(position)
    p = int(np.asarray(value).reshape(-1)[0])
    if not -len(seq) <= p <= (len(seq) if end_ok else len(seq) - 1):
        raise TVMSError(f"position {p} is out of range for a sequence of length {len(seq)}")
    return p + len(seq) if p < 0 else p


@register_func("tvms.sequence.insert")
def insert(seq: tuple, value: Any, position: Any = None) -> tuple:
    at = _position(seq, position, True, len(seq))
    return tuple(seq[:at]) + (value,) + tuple(seq[at:])


@register_func("tvms.sequence.erase")
def erase(seq: tuple, position: Any = None) -> tuple:
    at = _position(seq, position, False, len(seq) - 1)
    return tuple(seq[:at]) + tuple(seq[at + 1:])


@register_func("tvms.sequence.length")
def length(seq: tuple) -> Any:
    return tensor(np.array(len(seq), "int64"))
