"""Data types: ``float32``, ``int64``, ``bool``, ``handle``, ``void``, vector lanes ``float32x4``,
scalable vectors ``float32xvscalex4`` (``4 * vscale`` lanes, vscale known only on the machine)."""
from __future__ import annotations

import re

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
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def is_void(self) -> bool:
        return self.code == "void"


def _parse(name: str) -> tuple[str, int, int, bool, str]:
    if not isinstance(name, str):
        raise TVMSError(f"a data type must be a string, not {type(name).__name__}")
    if name == "bool":
        return "bool", 1, 1, False, name
    if name in ("handle", "void"):
        return name, 0 if name == "void" else 64, 1, False, name
    m = re.match(r"^bool(?:x(vscalex)?(\d+))$", name)
    if m:
        return "bool", 1, int(m.group(2)), m.group(1) is not None, name
    m = _SCALAR.match(name)
    if not m:
        raise TVMSError(f"unknown data type {name!r}")
    code, bits, fmt, scalable, lanes = m.group(1), int(m.group(2)), m.group(3), m.group(4), m.group(5)
    if code in ("int", "uint") and bits not in (1, 4, 8, 16, 32, 64):
        raise TVMSError(f"unknown data type {name!r}: {code} has 1, 4, 8, 16, 32 or 64 bits")
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
