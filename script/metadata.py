"""The metadata section: constants too large to print inline, after the module.

Without ``show_meta=True`` the printer writes ``metadata["ir.GenericConst"][0]`` in place of each
tensor constant and ends with a note; a text printed that way still parses, each constant
becoming a placeholder that keeps its struct info. With ``show_meta=True`` it appends::

    metadata = {
        "ir.GenericConst": [
            {"dtype": "float32", "shape": [2, 3], "data": "AACAPwAAAEAAAEBA..."},
        ],
    }

where ``data`` is the array's bytes in C order, little-endian, in base64 (of a ``string``
constant: its elements in C order as a JSON list, UTF-8, in base64). The parser reads the
section back, so the constants survive a round-trip exactly. (Apache TVM writes a JSON blob of
its own serialization instead; tvms does not read that.)
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

from ..ir.dtype import ML_DTYPES, ml_dtype
from ..ir.errors import TVMSError
from ..ir.strings import decode_strings, encode_strings

CONSTANT_KEYS = ("relax.expr.Constant", "ir.GenericConst")  # classic, tvm-0.27


def encode_array(data: np.ndarray) -> str:
    if data.dtype == object:  # (a string tensor)
        return base64.b64encode(encode_strings(data)).decode("ascii")
    little = np.asarray(data).astype(np.asarray(data).dtype.newbyteorder("<"), copy=False)
    return base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")


def decode_entry(entry: Any) -> np.ndarray:
    """One ``{"dtype", "shape", "data"}`` entry back to an array."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data"}:
        raise TVMSError('a metadata constant is {"dtype": ..., "shape": [...], "data": "<base64>"}')
    name = entry["dtype"]
    if name == "string":
        return _decode_strings(entry)
    # (ml_dtypes' types: bfloat16, float8_e4m3fn, int4, ... one element a byte or two)
    dtype = ml_dtype(name) if name in ML_DTYPES else np.dtype(name).newbyteorder("<")
    shape = tuple(int(d) for d in entry["shape"])
    raw = base64.b64decode(entry["data"], validate=True)
    count = int(np.prod(shape)) if shape else 1
    if len(raw) != count * dtype.itemsize:
        raise TVMSError(f"metadata constant of shape {list(shape)} {entry['dtype']} needs "
                        f"{count * dtype.itemsize} bytes, the data has {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _decode_strings(entry: dict) -> np.ndarray:
    try:
        data = base64.b64decode(entry["data"], validate=True)
    except ValueError as err:
        raise TVMSError(f"a string metadata constant is a JSON list in base64: {err}") from None
    return decode_strings(data, tuple(int(d) for d in entry["shape"]), "a string metadata constant")


def render_section(key: str, constants: list) -> list[str]:
    lines = ["metadata = {", f'    "{key}": [']
    for c in constants:
        shape = ", ".join(str(d) for d in c.data.shape)
        dtype = "string" if c.data.dtype == object else c.data.dtype
        lines.append(f'        {{"dtype": "{dtype}", "shape": [{shape}], "data": "{encode_array(c.data)}"}},')
    lines += ["    ],", "}"]
    return lines
