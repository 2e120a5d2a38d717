"""PTX registers for the reference executor: a register is its bits, read as the instruction's
type says (``s32``: a signed 32-bit integer, ``f16x2``: two halves, the first in the low bits).

A value travels as a Python int: an integer type's value (negative for a signed one) or a float
type's bits. ``bits_of`` makes one of a TensorIR value (a float's bits, an integer as it is),
``register_value`` turns one back into a value of the destination's dtype (its low bits; a wider
integer register sign-extends a signed result, as PTX's ld.s8 into a .s32 register does).

Floats are rounded as PTX says (``rounded``): the exact result (a Fraction) to the nearest value
of the type (ties to even) with ``rn``, toward zero, minus or plus infinity with ``rz``, ``rm``,
``rp``; beyond the largest finite value, to it or to an infinity as IEEE 754 says.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from tvms.ir.dtype import DataType, ml_dtype
from tvms.ir.errors import TVMSError

from .tir_values import cast_value, numpy_dtype

_FLOAT_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


def float_dtype(ptx_type: str) -> np.dtype:
    """The numpy dtype of a PTX float type (bf16's from ml_dtypes, loaded only when used)."""
    name = _FLOAT_TYPES[ptx_type]
    return ml_dtype(DataType(name)) if name == "bfloat16" else np.dtype(name)
_SCALAR = re.compile(r"(pred)|([subf]|bf)(\d+)$")
_PACKED = re.compile(r"([subf]|bf)(\d+)x(\d+)$")


def element(ptx_type: str) -> tuple[str, int]:
    """(the element type, how many) of a PTX type: ``f16x2`` -> (``f16``, 2), ``s32`` -> (``s32``, 1)."""
    m = _PACKED.fullmatch(ptx_type)
    return (f"{m[1]}{m[2]}", int(m[3])) if m else (ptx_type, 1)


def width(ptx_type: str) -> int:
    """Bits of a PTX type (``pred``: 1)."""
    name, count = element(ptx_type)
    m = _SCALAR.fullmatch(name)
    if m is None:
        raise TVMSError(f"the reference executor has no PTX type {ptx_type!r}")
    return 1 if m[1] else int(m[3]) * count


def is_float(ptx_type: str) -> bool:
    return element(ptx_type)[0] in _FLOAT_TYPES


def is_signed(ptx_type: str) -> bool:
    return ptx_type.startswith("s")


def as_int(x: int, ptx_type: str) -> int:
    """The low bits of ``x`` as an integer of ``ptx_type`` (``b`` types unsigned)."""
    w = width(ptx_type)
    x = int(x) & ((1 << w) - 1)
    return x - (1 << w) if is_signed(ptx_type) and x >> (w - 1) else x


def as_float(x: int, ptx_type: str) -> np.floating:
    w = width(ptx_type)
    return np.array(int(x) & ((1 << w) - 1), f"uint{w}").view(float_dtype(ptx_type))[()]


def float_bits(value: Any, ptx_type: str) -> int:
    """The bits of ``value`` (already of the type, or rounded to it to nearest)."""
    w = width(ptx_type)
    with np.errstate(over="ignore", invalid="ignore"):
        return int(np.array(value, float_dtype(ptx_type)).view(f"uint{w}")[()])


def split(x: int, ptx_type: str) -> list[int]:
    """A packed register's elements' bits, the first in the low bits."""
    name, count = element(ptx_type)
    w = width(name)
    return [int(x) >> (w * i) & ((1 << w) - 1) for i in range(count)]


def join(parts: list[int], ptx_type: str) -> int:
    w = width(element(ptx_type)[0])
    return sum((int(p) & ((1 << w) - 1)) << (w * i) for i, p in enumerate(parts))


def lanewise(ptx_type: str, fn: Callable, *xs: int) -> int:
    """``fn(element type, *element bits)`` on each element of packed registers (or on the one)."""
    name, count = element(ptx_type)
    if count == 1:
        return fn(name, *xs)
    return join([fn(name, *parts) for parts in zip(*(split(x, ptx_type) for x in xs))], ptx_type)


# ---------------------------------------------------------------- TensorIR values and registers
def bits_of(value: Any, dtype: str) -> int:
    """A TensorIR value of ``dtype`` as a register: a float's bits, an integer's value."""
    dt = DataType(dtype)
    if dt.lanes > 1:
        raise TVMSError(f"a PTX register is a scalar, not a {dtype} vector")
    if dt.is_float:
        return int(np.array(value, numpy_dtype(dt)).view(f"uint{dt.bits}")[()])
    return int(value)


def register_value(x: int, dtype: DataType) -> Any:
    """A register's value ``x`` (an int: module docstring) as a value of the destination's dtype."""
    if dtype.is_float:
        return np.array(int(x) & ((1 << dtype.bits) - 1), f"uint{dtype.bits}").view(numpy_dtype(dtype))[()]
    if dtype.is_bool:
        return bool(x & 1)
    return cast_value(int(x), dtype)


# ---------------------------------------------------------------- rounding
def _step(c: np.floating, ptx_type: str, up: bool) -> np.floating:
    """The neighbour of the finite ``c`` of its type toward plus (``up``) or minus infinity."""
    w = width(ptx_type)
    if c == 0:
        return as_float(1 if up else 1 | 1 << (w - 1), ptx_type)
    b = float_bits(c, ptx_type)
    return as_float(b + 1 if (c > 0) == up else b - 1, ptx_type)


def exact(x: np.floating) -> Fraction | None:
    """The exact value of a finite float, None for an infinity or NaN."""
    return Fraction(float(x)) if math.isfinite(float(x)) else None


def rounded(q: Fraction | float, ptx_type: str, rnd: str = "rn") -> int:
    """The bits of ``q`` rounded to ``ptx_type`` by the rounding mode (rn, rz, rm, rp; the
    integer ones rni, ... are the caller's); a float ``q`` is an infinity, NaN or signed zero."""
    ft = float_dtype(ptx_type)
    if not isinstance(q, Fraction):
        return float_bits(q, ptx_type)
    top = Fraction(float(as_float(_LARGEST[ptx_type], ptx_type)))
    if abs(q) > top:  # (IEEE 754's overflow: an infinity where the mode rounds away from the largest finite value)
        beyond = 2 ** math.frexp(float(top))[1]  # (the next value, were the exponent unbounded: rn's tie is to it)
        away = rnd == ("rp" if q > 0 else "rm") or rnd == "rn" and 2 * abs(q) >= top + beyond
        return float_bits(math.inf if q > 0 else -math.inf, ptx_type) if away else largest(ptx_type, q < 0)
    c = ft.type(float(q))  # (one of q's two neighbours of the type: float64's, then the type's, nearest)
    fc = Fraction(float(c))
    if fc == q:
        return float_bits(c, ptx_type)
    lo, hi = (_step(c, ptx_type, False), c) if fc > q else (c, _step(c, ptx_type, True))
    if rnd == "rm" or rnd == "rz" and q > 0:
        pick = lo
    elif rnd == "rp" or rnd == "rz":
        pick = hi
    else:
        d_lo, d_hi = q - Fraction(float(lo)), Fraction(float(hi)) - q
        pick = lo if d_lo < d_hi or d_lo == d_hi and float_bits(lo, ptx_type) % 2 == 0 else hi
    return float_bits(pick, ptx_type)


# the bits of each type's largest finite value and of its smallest normal one
_LARGEST = {"f16": 0x7BFF, "bf16": 0x7F7F, "f32": 0x7F7FFFFF, "f64": 0x7FEFFFFFFFFFFFFF}
_SMALLEST_NORMAL = {"f16": 0x0400, "bf16": 0x0080, "f32": 0x00800000, "f64": 0x0010000000000000}


def largest(ptx_type: str, negative: bool = False) -> int:
    """The bits of the type's largest finite value, or of its negation."""
    return _LARGEST[ptx_type] | (1 << (width(ptx_type) - 1) if negative else 0)


def flush(x: np.floating, ptx_type: str) -> np.floating:
    """``.ftz``: a subnormal is a zero of its sign."""
    tiny = float(as_float(_SMALLEST_NORMAL[ptx_type], ptx_type))
    return float_dtype(ptx_type).type(math.copysign(0.0, float(x))) if 0 < abs(float(x)) < tiny else x
