"""Sequences whose length is known only at run time (an ONNX Loop that grows one over a run-time
trip count): a tuple of tensors that these packed functions rebuild, as the VM holds tuples.
Only the sequence itself changes; its tensors are neither copied nor read.

``tvms.sequence.insert(seq, value[, position])``, ``tvms.sequence.erase(seq[, position])``,
``tvms.sequence.length(seq)`` (ONNX's SequenceInsert, SequenceErase, SequenceLength: a position
counts from the back when negative, and one out of range is an error);
``tvms.sequence.position(p, length, end_ok)`` checks a run-time position into a sequence of an
import-time length and makes it non-negative (for the converters that stack and pick).

An optional whose emptiness only the run decides (an If with an empty branch) is the value or
None: ``tvms.optional.has_element(x)`` and ``tvms.optional.get_element(x)`` (ONNX's
OptionalHasElement and OptionalGetElement; getting from an empty optional is an error).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from .tensor import tensor


def _scalar(value: Any, what: str) -> int:
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if array.size != 1:
        raise TVMSError(f"a sequence {what} is one integer, not a tensor of shape {array.shape}")
    return int(array.reshape(-1)[0])


def _checked(p: int, length: int, end_ok: bool) -> int:
    if not -length <= p <= (length if end_ok else length - 1):
        raise TVMSError(f"position {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


def _position(seq: tuple, position: Any, end_ok: bool, default: int) -> int:
    if position is None:
        return default
    return _checked(_scalar(position, "position"), len(seq), end_ok)


@register_func("tvms.sequence.insert")
def insert(seq: tuple, value: Any, position: Any = None) -> tuple:
    at = _position(seq, position, True, len(seq))
    return tuple(seq[:at]) + (value,) + tuple(seq[at:])


@register_func("tvms.sequence.erase")
def erase(seq: tuple, position: Any = None) -> tuple:
    if not seq:
        raise TVMSError("erasing from an empty sequence")
    at = _position(seq, position, False, len(seq) - 1)
    return tuple(seq[:at]) + tuple(seq[at + 1:])


@register_func("tvms.sequence.length")
def length(seq: tuple) -> Any:
    return tensor(np.array(len(seq), "int64"))


@register_func("tvms.sequence.position")
def position(p: Any, length: Any, end_ok: Any) -> Any:
    n = _scalar(length, "length")
    return tensor(np.array(_checked(_scalar(p, "position"), n, bool(_scalar(end_ok, "flag"))), "int64"))


@register_func("tvms.optional.has_element")
def has_element(optional: Any) -> Any:
    return tensor(np.array(optional is not None))


@register_func("tvms.optional.get_element")
def get_element(optional: Any) -> Any:
    if optional is None:
        raise TVMSError("OptionalGetElement of an empty optional")
    return optional
