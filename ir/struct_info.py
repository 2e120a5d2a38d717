"""Relax struct info: what is statically known about a value (its kind, shape, dtype).

``R.Tensor((n, 784), dtype="float32")``, ``R.Shape([m, k])``, ``R.Tuple(...)``, ``R.Prim("int64")``,
``R.Object``, and function signatures. Symbolic dimensions are TensorIR variables (``n``), the
same objects that TensorIR functions use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dtype import DataType
from .expr import IntImm, PrimExpr
from .node import Node

VOID = DataType("void")  # "unknown dtype" in struct info


@dataclass(frozen=True, slots=True, eq=False)
class StructInfo(Node):
    """The static description of a Relax value."""


@dataclass(frozen=True, slots=True, eq=False)
class ObjectStructInfo(StructInfo):
    """``R.Object``: anything."""


@dataclass(frozen=True, slots=True, eq=False)
class PrimStructInfo(StructInfo):
    """``R.Prim("int64")``: a scalar, with its value when known (``R.Prim(value=n)``)."""

    dtype: DataType
    value: PrimExpr | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ShapeStructInfo(StructInfo):
    """``R.Shape([m, k])``: a shape; ``values`` is None when only ``ndim`` is known (-1: unknown)."""

    values: tuple | None = None
    ndim: int = -1

    def __post_init__(self) -> None:
        if self.values is not None and self.ndim != len(self.values):
            object.__setattr__(self, "ndim", len(self.values))


@dataclass(frozen=True, slots=True, eq=False)
class TensorStructInfo(StructInfo):
    """``R.Tensor((n, 784), dtype="float32")``. ``shape`` is a relax ShapeExpr or a Var of shape
    type, or None; ``ndim`` is -1 when unknown; ``dtype`` is void when unknown."""

    shape: Any = None
    dtype: DataType = VOID
    ndim: int = -1
    vdevice: Any = None

    def __post_init__(self) -> None:
        values = shape_values(self.shape)
        if values is not None and self.ndim != len(values):
            object.__setattr__(self, "ndim", len(values))

    @property
    def dims(self) -> tuple | None:
        """The dimensions as PrimExprs, when the shape is known."""
        return shape_values(self.shape)


@dataclass(frozen=True, slots=True, eq=False)
class TupleStructInfo(StructInfo):
    """``R.Tuple(a, b)``."""

    fields: tuple = ()


@dataclass(frozen=True, slots=True, eq=False)
class FuncStructInfo(StructInfo):
    """``R.Callable((params...), ret, purity)``; ``params`` None for an opaque signature."""

    params: tuple | None
    ret: StructInfo
    purity: bool = True


def shape_values(shape: Any) -> tuple | None:
    """The PrimExpr dimensions of a tensor's shape field, or None when not statically listed."""
    values = getattr(shape, "values", None)
    return tuple(values) if values is not None else None


def static_dims(sinfo: StructInfo) -> tuple[int, ...] | None:
    """Concrete integer dimensions when all are constants."""
    dims = sinfo.dims if isinstance(sinfo, TensorStructInfo) else None
    if dims is None or not all(isinstance(d, IntImm) for d in dims):
        return None
    return tuple(d.value for d in dims)
