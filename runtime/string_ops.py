"""The string operators of ONNX as run-time functions: a string tensor (dtype ``string``) is a numpy
object array of str, which no kernel reads, so ``script/onnx_ops_string.py`` converts each string
operator into ``R.call_pure_packed("tvms.string.NAME", ...)`` of one of these. Attributes arrive
as ``R.str``/``R.prim_value`` arguments, tables (LabelEncoder's) as constant tensors. Every
result is a new array (the VM may hand it to the caller as a tensor)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import TVMSError
from ..ir.registry import register_func
from ..ir.re2 import compile_pattern
from ..ir.strings import object_array


def _strings(x: np.ndarray, name: str) -> np.ndarray:
    if x.dtype != object:
        raise TVMSError(f"tvms.string.{name}: expected a string tensor, got {x.dtype} data")
    return x


@register_func("tvms.string.concat")
def concat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ONNX StringConcat: element by element, broadcast as numpy does."""
    a, b = np.broadcast_arrays(_strings(x, "concat"), _strings(y, "concat"))
    return object_array([s + t for s, t in zip(a.flat, b.flat)], a.shape)


@register_func("tvms.string.equal")
def equal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ONNX Equal of two string tensors (broadcast)."""
    a, b = np.broadcast_arrays(_strings(x, "equal"), _strings(y, "equal"))
    return np.array([s == t for s, t in zip(a.flat, b.flat)], bool).reshape(a.shape)


@register_func("tvms.string.split")
def split(x: np.ndarray, delimiter: str, maxsplit: int) -> tuple:
    """ONNX StringSplit: each string's pieces along a new last axis padded with "" to the most
    pieces of any element, and the count of each. An empty delimiter splits at runs of
    whitespace, leading and trailing whitespace dropped; ``maxsplit`` < 0 splits everywhere."""
    pieces = [s.split(delimiter or None, maxsplit) for s in _strings(x, "split").flat]
    width = max(map(len, pieces), default=0)
    padded = [p + [""] * (width - len(p)) for p in pieces]
    counts = np.array([len(p) for p in pieces], np.int64).reshape(x.shape)
    return object_array([s for p in padded for s in p], x.shape + (width,)), counts


_CASE_CHANGES = {"LOWER": str.lower, "UPPER": str.upper, "NONE": str}


@register_func("tvms.string.normalize")
def normalize(x: np.ndarray, case_change: str, case_sensitive: int, *stopwords: str) -> np.ndarray:
    """ONNX StringNormalizer on a [C] or [1, C] tensor: the elements equal to a stop word dropped
    (compared in lower case unless ``case_sensitive``), the rest lower- or upper-cased by Unicode's
    default case mapping ("NONE": unchanged); when every element is dropped, one "" remains."""
    flat = _strings(x, "normalize").reshape(-1)
    if case_change not in _CASE_CHANGES or not isinstance(case_sensitive, (int, np.integer)) or \
            not all(isinstance(w, str) for w in stopwords):
        raise TVMSError(f"tvms.string.normalize: expected a case change of {'/'.join(_CASE_CHANGES)}, an int "
                        f"and str stop words, got {case_change!r}, {case_sensitive!r}, {stopwords!r}")
    if case_sensitive:
        stops = set(stopwords)
        kept = [s for s in flat if s not in stops]
    else:
        stops = {w.lower() for w in stopwords}
        kept = [s for s in flat if s.lower() not in stops]
    kept = [_CASE_CHANGES[case_change](s) for s in kept] or [""]
    return object_array(kept, x.shape[:-1] + (len(kept),))


@register_func("tvms.string.regex_full_match")
def regex_full_match(x: np.ndarray, pattern: str) -> np.ndarray:
    """ONNX RegexFullMatch: whether all of each string matches the RE2 ``pattern`` (``ir/re2.py``:
    linear time in the string's length)."""
    matches = compile_pattern(pattern)
    return np.array([matches(s) for s in _strings(x, "regex_full_match").flat], bool).reshape(x.shape)


@register_func("tvms.string.lookup")
def lookup(x: np.ndarray, keys: np.ndarray, values: np.ndarray, default: np.ndarray) -> np.ndarray:
    """ONNX-ML LabelEncoder where keys or values are strings: each element's value in the table
    ``keys`` -> ``values`` (a repeated key keeps its last value), ``default`` (0-d) elsewhere."""
    table = dict(zip(keys.tolist(), values.tolist()))
    fallback = default.item()
    found = [table.get(k, fallback) for k in x.flat]
    if values.dtype == object:
        return object_array(found, x.shape)
    return np.array(found, values.dtype).reshape(x.shape)
