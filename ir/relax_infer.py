"""Struct-info inference helpers shared by the Relax operators: broadcasting, dtype rules,
symbolic dimensions."""
from __future__ import annotations

from typing import Any

from .dtype import DataType
from .expr import IntImm, PrimExpr, const
from .relax_op import CallInfo
from .struct_info import (VOID, ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)
from .structural import structural_equal


def tensor_arg(info: CallInfo, i: int) -> TensorStructInfo:
    s = info.sinfo[i]
    if not isinstance(s, TensorStructInfo):
        raise info.fail(f"argument {info.spec.args[min(i, len(info.spec.args) - 1)]!r} must be a "
                        f"tensor, got {describe(s)}")
    return s


def describe(s: StructInfo) -> str:
    """A short description of struct info for messages: ``a tensor of (n, 784) float32``."""
    if isinstance(s, TensorStructInfo):
        shape = fmt_dims(s.dims) if s.dims is not None else f"{s.ndim}-d" if s.ndim >= 0 else "unknown shape"
        return f"a tensor of {shape} {s.dtype if s.dtype != VOID else ''}".rstrip()
    return {"ObjectStructInfo": "an object", "PrimStructInfo": "a scalar", "ShapeStructInfo": "a shape",
            "TupleStructInfo": "a tuple", "FuncStructInfo": "a function"}.get(type(s).__name__, "a value")


def make_tensor(dims: Any, dtype: DataType, ndim: int = -1) -> TensorStructInfo:
    from .relax import ShapeExpr

    if dims is None:
        return TensorStructInfo(None, dtype, ndim)
    dims = tuple(dims)
    return TensorStructInfo(ShapeExpr(dims, ShapeStructInfo(dims)), dtype, len(dims))


def dim_equal(a: PrimExpr, b: PrimExpr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b or structural_equal(a, b)


def broadcast_dims(info: CallInfo, a: tuple, b: tuple) -> tuple:
    """numpy broadcasting of two symbolic shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else None
        y = b[-i] if i <= len(b) else None
        if x is None:
            out.append(y)
        elif y is None:
            out.append(x)
        elif isinstance(x, IntImm) and x.value == 1:
            out.append(y)
        elif isinstance(y, IntImm) and y.value == 1:
            out.append(x)
        elif dim_equal(x, y):
            out.append(x)
        elif isinstance(x, IntImm) and isinstance(y, IntImm):
            raise info.fail(f"shapes {fmt_dims(a)} and {fmt_dims(b)} do not broadcast "
                            f"(dimension {x.value} against {y.value})")
        else:
            out.append(x)  # symbolic: assumed equal, as TVM does
    return tuple(reversed(out))


def fmt_dims(dims: tuple) -> str:
    parts = [str(d.value) if isinstance(d, IntImm) else getattr(d, "name", "?") for d in dims]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def binary_dtype(info: CallInfo, a: TensorStructInfo, b: TensorStructInfo) -> DataType:
    if a.dtype == VOID or b.dtype == VOID:
        return VOID
    if a.dtype != b.dtype:
        raise info.fail(f"data types {a.dtype} and {b.dtype} do not match")
    return a.dtype


def infer_broadcast(info: CallInfo, out_dtype: DataType | None = None) -> StructInfo:
    a, b = tensor_arg(info, 0), tensor_arg(info, 1)
    dtype = out_dtype or binary_dtype(info, a, b)
    if a.dims is None or b.dims is None:
        ndim = max(a.ndim, b.ndim) if a.ndim >= 0 and b.ndim >= 0 else -1
        return TensorStructInfo(None, dtype, ndim)
    return make_tensor(broadcast_dims(info, a.dims, b.dims), dtype)


def infer_unary(info: CallInfo) -> StructInfo:
    return tensor_arg(info, 0)


def int_of(value: Any) -> int | None:
    if isinstance(value, IntImm):
        return value.value
    if isinstance(value, int):
        return value
    return None


def normalize_axis(info: CallInfo, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise info.fail(f"axis {axis} is out of range for a tensor of {ndim} dimensions")
    return axis % ndim


__all__ = ["tensor_arg", "make_tensor", "broadcast_dims", "infer_broadcast", "infer_unary",
           "binary_dtype", "normalize_axis", "int_of", "const", "ObjectStructInfo",
           "TupleStructInfo"]
