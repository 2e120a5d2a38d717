"""Where a buffer access of the reference executor lands in the buffer's flat array, checked to lie
in it: numpy would wrap a negative position around, and cut a slice past the end short, silently."""
from __future__ import annotations

from typing import Any

import numpy as np

from tvms.ir.errors import TVMSError


def negative_index(index: int, name: str) -> None:
    raise TVMSError(f"out-of-bounds access: element {index} of buffer {name!r}")


def vector_positions(index: Any, lanes: int, size: int, name: str) -> np.ndarray:
    """Where the elements of a vector access lie in the flat array: one per index, or for a
    buffer of ``lanes``-lane vectors each element's lanes one after the other; each checked to
    lie in the buffer (numpy would wrap a negative position around silently)."""
    positions = np.asarray(index, dtype=np.int64).reshape(-1)
    if lanes > 1:
        positions = (positions[:, None] * lanes + np.arange(lanes)).reshape(-1)
    if positions.size and not (0 <= positions.min() and positions.max() < size):
        bad = positions[(positions < 0) | (positions >= size)][0]
        raise TVMSError(f"out-of-bounds access: element {bad // lanes} of buffer {name!r}")
    return positions


def vector_element(index: int, lanes: int, size: int, name: str) -> slice:
    """Where element ``index`` of a buffer of ``lanes``-lane vectors lies in its flat array (a
    slice past either end would be cut short silently)."""
    if not 0 <= index * lanes <= size - lanes:
        raise TVMSError(f"out-of-bounds access: element {index} of buffer {name!r}")
    return slice(index * lanes, index * lanes + lanes)
