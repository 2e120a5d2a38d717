"""Data types: ``float32``, ``int64``, ``bool``, ``handle``, ``void``, vector lanes ``float32x4``,
scalable vectors ``float32xvscalex4`` (``4 * vscale`` lanes, vscale known only on the machine),
and ``string``: the element of a tensor of text (ONNX's string tensors; TVM has no such type, so
only the run-time string functions and the VM read such tensors, never a kernel)."""
from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from .errors import TVMSError

_SCALAR = re.compile(r"^(int|uint|float|bfloat)(\d+)(?:_(e\d+m\d+\w*?))?(?:x(vscalex)?(\d+))?$")
_LANES = re.compile(r"x(?:vscalex)?\d+$")


class DataType:
    """An interned data type. Compare with ``is`` or ``==``; ``str()`` gives the canonical name."""

    __slots__ = ("code", "bits", "lanes", "scalable", "name", "__weakref__")
    _cache: dict[str, "DataType"] = {}

    code: str
    bits: int
    lanes: int  # of a scalable vector: the factor of vscale
    scalable: bool
    name: str

    def __new__(cls, name: "str | DataType") -> "DataType":
        if isinstance(name, DataType):
            return name
        hit = cls._cache.get(name)
        if hit is not None:
            return hit
        code, bits, lanes, scalable, canonical = _parse(name)
        hit = cls._cache.get(canonical)
        if hit is None:
            hit = object.__new__(cls)
            hit.code, hit.bits, hit.lanes, hit.scalable, hit.name = code, bits, lanes, scalable, canonical
            cls._cache[canonical] = hit
        cls._cache[name] = hit
        return hit

    def __repr__(self) -> str:
        return f"DataType({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.name == other
        return self is other

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return (DataType, (self.name,))

    def with_lanes(self, lanes: int, scalable: bool = False) -> "DataType":
        """This element type in ``lanes`` lanes (``lanes * vscale`` when ``scalable``)."""
        base = self.element_of.name
        if scalable:
            return DataType(f"{base}xvscalex{lanes}")
        return DataType(base if lanes == 1 else f"{base}x{lanes}")

    def with_lanes_of(self, other: "DataType") -> "DataType":
        """This element type in as many lanes as ``other`` has."""
        return self.with_lanes(other.lanes, other.scalable)

    @property
    def element_of(self) -> "DataType":
        return self if self.lanes == 1 and not self.scalable else DataType(_LANES.sub("", self.name))

    @property
    def is_int(self) -> bool:
        return self.code == "int"

    @property
    def is_uint(self) -> bool:
        return self.code == "uint"

    @property
    def is_integer(self) -> bool:
        """int or uint (not bool)."""
        return self.code in ("int", "uint")

    @property
    def is_float(self) -> bool:
        return self.code in ("float", "bfloat")

    @property
    def is_narrow_float(self) -> bool:
        """bfloat16 and the 8-, 6- and 4-bit float formats: stored as bits, computed in float32."""
        return self.is_float and self.element_of.name not in ("float16", "float32", "float64")

    @property
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def is_void(self) -> bool:
        return self.code == "void"

    @property
    def is_string(self) -> bool:
        return self.code == "string"

    def holds_int(self, value: int) -> bool:
        """Whether an integer type (or bool: 0 and 1) has the value ``value``."""
        if self.is_bool:
            return value in (0, 1)
        if self.is_uint:
            return 0 <= value < 1 << self.bits
        return -(1 << (self.bits - 1)) <= value < 1 << (self.bits - 1)

    def literal_range(self) -> "tuple[float, float] | None":
        """The values a constant of this float type may hold, as TVM 0.27 bounds its literals
        (None: unbounded, as float64 here), infinities and NaN aside: its FloatImm's bounds, under
        float32's largest value, since TVM's parser makes every float literal a float32 constant
        first. Some bounds are above the type's largest value (float8_e4m3, float8_e3m4): such a
        constant rounds to infinity as the code generators round it. (TVM also refuses negative
        literals of the fnuz float8 types, which have negative values, and float64 literals
        beyond float32's range; tvms refuses negatives only of float8_e8m0fnu, which has none.)"""
        top = _LITERAL_BOUNDS.get(self.element_of.name)
        if top is None:
            return None
        return (0.0 if self.element_of.name == "float8_e8m0fnu" else -top), top


def float_literal_refusal(dtype: "DataType", value: "int | float") -> "str | None":
    """Why ``value`` cannot be written as a literal of the float type ``dtype`` (its range as TVM
    0.27 bounds it: ``DataType.literal_range``), or None."""
    try:
        number = float(value)
    except OverflowError:  # (an integer beyond every float)
        return f"{value} is out of the range of {dtype}"
    bounds = dtype.literal_range()
    if bounds is None or not math.isfinite(number) or bounds[0] <= number <= bounds[1]:
        return None
    return f"{number!r} is out of the range of {dtype} literals ({bounds[0]!r} to {bounds[1]!r})"


# (TVM 0.27's support/limits.h and FloatImm's checks, under float32's largest value)
_FLOAT32_MAX = 3.4028234663852886e38
_LITERAL_BOUNDS = {
    "float32": _FLOAT32_MAX, "float16": 65504.0, "bfloat16": _FLOAT32_MAX,
    "float8_e3m4": 31.0, "float8_e4m3": 448.0, "float8_e4m3b11fnuz": 30.0, "float8_e4m3fn": 448.0,
    "float8_e4m3fnuz": 448.0, "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0,
    "float8_e8m0fnu": _FLOAT32_MAX, "float6_e2m3fn": 7.5, "float6_e3m2fn": 28.0, "float4_e2m1fn": 6.0,
}


def _parse(name: str) -> tuple[str, int, int, bool, str]:
    if not isinstance(name, str):
        raise TVMSError(f"a data type must be a string, not {type(name).__name__}")
    if name == "bool":
        return "bool", 1, 1, False, name
    if name in ("handle", "void", "string"):
        return name, 0 if name == "void" else 64, 1, False, name  # (a string element: a pointer)
    m = re.match(r"^bool(?:x(vscalex)?(\d+))$", name)
    if m:
        return "bool", 1, int(m.group(2)), m.group(1) is not None, name
    m = _SCALAR.match(name)
    if not m:
        raise TVMSError(f"unknown data type {name!r}")
    code, bits, fmt, scalable, lanes = m.group(1), int(m.group(2)), m.group(3), m.group(4), m.group(5)
    if code in ("int", "uint") and bits not in (1, 2, 4, 8, 16, 32, 64):
        raise TVMSError(f"unknown data type {name!r}: {code} has 1, 2, 4, 8, 16, 32 or 64 bits")
    if code == "float" and fmt is None and bits not in (4, 6, 8, 16, 32, 64):  # (TVM's float8 too)
        raise TVMSError(f"unknown data type {name!r}: float has 4, 6, 8, 16, 32 or 64 bits")
    if code == "bfloat" and bits != 16:
        raise TVMSError(f"unknown data type {name!r}: only bfloat16 exists")
    n = int(lanes) if lanes else 1
    if lanes is not None and n < (1 if scalable else 2):
        raise TVMSError(f"unknown data type {name!r}: a vector has at least 2 lanes")
    if fmt is not None:
        code = f"float{bits}_{fmt}"
    return code if fmt is None else "float", bits, n, scalable is not None, name


class FloatFormat(NamedTuple):
    """The encoding of a narrow float: ``ebits`` exponent bits (bias ``bias``), ``mbits`` mantissa
    bits, then what the top codes mean: "ieee" (all-ones exponent: inf and NaN), "fn" (finite:
    the all-ones code is NaN), "fnuz" (finite, no negative zero: the code of -0 is NaN), "none"
    (neither inf nor NaN: float4/float6), "e8m0" (unsigned powers of two, 0xff is NaN)."""

    ebits: int
    mbits: int
    bias: int
    kind: str

    @property
    def bits(self) -> int:
        return self.ebits + self.mbits + (self.kind != "e8m0")

    @property
    def max_code(self) -> int:
        """The code of the largest finite value."""
        top = (1 << (self.ebits + self.mbits)) - 1
        return {"ieee": top - (1 << self.mbits), "fn": top - 1, "e8m0": top - 1}.get(self.kind, top)

    def value(self, code: int) -> float:
        """The value of the non-negative, finite ``code``."""
        exponent, mantissa = code >> self.mbits, code & ((1 << self.mbits) - 1)
        if exponent == 0 and self.kind != "e8m0":  # subnormal
            return mantissa * 2.0 ** (1 - self.bias - self.mbits)
        return (1 + mantissa / (1 << self.mbits)) * 2.0 ** (exponent - self.bias)

    @property
    def max_value(self) -> float:
        return self.value(self.max_code)


# TVM's names; "fn": finite, "uz": unsigned zero (no -0), "u": unsigned
FLOAT_FORMATS = {
    "bfloat16": FloatFormat(8, 7, 127, "ieee"),
    "float8_e4m3fn": FloatFormat(4, 3, 7, "fn"), "float8_e4m3fnuz": FloatFormat(4, 3, 8, "fnuz"),
    "float8_e5m2": FloatFormat(5, 2, 15, "ieee"), "float8_e5m2fnuz": FloatFormat(5, 2, 16, "fnuz"),
    "float8_e4m3": FloatFormat(4, 3, 7, "ieee"), "float8_e3m4": FloatFormat(3, 4, 3, "ieee"),
    "float8_e4m3b11fnuz": FloatFormat(4, 3, 11, "fnuz"), "float8_e8m0fnu": FloatFormat(8, 0, 127, "e8m0"),
    "float6_e2m3fn": FloatFormat(2, 3, 1, "none"), "float6_e3m2fn": FloatFormat(3, 2, 3, "none"),
    "float4_e2m1fn": FloatFormat(2, 1, 1, "none"),
}


def float_format(dtype: "str | DataType") -> FloatFormat:
    """The encoding of a narrow float type (its vector types: of their element)."""
    dt = DataType(dtype).element_of
    fmt = FLOAT_FORMATS.get(dt.name)
    if fmt is None:
        raise TVMSError(f"the data type {dt} has no known encoding")
    return fmt


def ml_dtype(dtype: "str | DataType") -> Any:
    """The numpy dtype of ``dtype``'s element from ``ml_dtypes`` (bfloat16, the float8/6/4 formats,
    int4/uint4/int2/uint2: one element a byte, two for bfloat16). Imported only when used."""
    name = DataType(dtype).element_of.name
    try:
        import ml_dtypes
    except ImportError:
        raise TVMSError(f"numpy arrays of {name} need the ml_dtypes package (pip install ml_dtypes)") from None
    import numpy as np

    return np.dtype(getattr(ml_dtypes, name))


def float_limits(dtype: "str | DataType") -> tuple[float, float]:
    """The lowest and the largest finite value of the float type ``dtype``."""
    name = DataType(dtype).element_of.name
    top = {"float16": 65504.0, "float32": _FLOAT32_MAX, "float64": 1.7976931348623157e308}.get(name)
    if top is not None:
        return -top, top
    fmt = float_format(name)
    return (fmt.value(0) if fmt.kind == "e8m0" else -fmt.max_value), fmt.max_value


ML_DTYPES = (*FLOAT_FORMATS, "int4", "uint4", "int2", "uint2")


def is_dtype_name(name: str) -> bool:
    """True when ``name`` spells a data type (``T.float32`` and friends are then constructors)."""
    try:
        DataType(name)
    except TVMSError:
        return False
    return True


int32 = DataType("int32")
int64 = DataType("int64")
float32 = DataType("float32")
float64 = DataType("float64")
boolean = DataType("bool")
handle = DataType("handle")
void = DataType("void")


# TVM's script shorthands of data types (``T.f32``, ``T.i64``, ``T.bf16``, ``T.boolean``)
SHORTHANDS = {
    "boolean": "bool", "bf16": "bfloat16",
    **{f"f{b}": f"float{b}" for b in (16, 32, 64)},
    **{f"i{b}": f"int{b}" for b in (8, 16, 32, 64)},
    **{f"u{b}": f"uint{b}" for b in (8, 16, 32, 64)},
}
