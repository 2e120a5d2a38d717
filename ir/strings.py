"""A string tensor's elements as bytes and back: a JSON list of its ``str`` elements in C order,
UTF-8. The metadata section (in base64) and a serialized VM program store string constants so."""
from __future__ import annotations

import json

import numpy as np

from .errors import TVMSError


def encode_strings(array: np.ndarray) -> bytes:
    return json.dumps(array.reshape(-1).tolist()).encode("utf-8")


def object_array(items: list, shape: tuple) -> np.ndarray:
    """An object array of ``shape`` holding ``items`` in C order (a string tensor's data)."""
    out = np.empty(shape, object)
    out.reshape(-1)[:] = items
    return out


def decode_strings(data: bytes, shape: tuple, what: str) -> np.ndarray:
    """The string tensor of ``shape`` that ``encode_strings`` wrote as ``data``; a TVMSError
    naming ``what`` for anything else."""
    try:
        items = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # (bad UTF-8 or JSON, or JSON nested past the parser's depth)
        items = None
    count = int(np.prod(shape, dtype=np.int64))
    if not isinstance(items, list) or len(items) != count or not all(type(i) is str for i in items):
        raise TVMSError(f"{what} of shape {list(shape)} is not a JSON list of {count} strings")
    return object_array(items, shape)
