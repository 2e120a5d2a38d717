"""The pieces every ONNX converter uses: the registry of converters (op type -> a class whose
``_impl_v<N>`` methods convert the operator as opset N defined it, as in TVM's frontend), the
node's attributes (which complain about an attribute nobody read), and the conversion context
(the BlockBuilder, constants known at import time, static shapes).

A converter gets ``(ctx, inputs, attrs)``: ``inputs`` are Relax expressions (None for an omitted
optional input), and it returns one Relax expression or a list of them (one per node output).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir.errors import TVMSError
from ..ir.expr import IntImm
from ..ir.struct_info import TensorStructInfo
from .block_builder import BlockBuilder, const
from .relax_op_api import op

CONVERTERS: dict[str, type["OnnxOpConverter"]] = {}


def converter(*op_types: str) -> Callable[[type], type]:
    """Register a converter class under one or more ONNX op types."""
    def register(cls: type) -> type:
        for name in op_types:
            CONVERTERS[name] = cls
        return cls
    return register


class OnnxOpConverter:
    """A converter: ``_impl_v<N>`` converts the operator as defined from opset N on; the version
    used for a model of opset V is the newest N <= V. Only a converter whose ``takes_strings``
    is true is given (or may give) a string tensor: others lower to kernels, which read none."""

    takes_strings = False

    @classmethod
    def versions(cls) -> list[int]:
        """The opsets the converter has an ``_impl_v<N>`` for, ascending."""
        return sorted(int(name[len("_impl_v"):]) for name in dir(cls) if name.startswith("_impl_v"))

    @classmethod
    def get_converter(cls, opset: int) -> Callable | None:
        usable = [v for v in cls.versions() if v <= opset]
        return getattr(cls, f"_impl_v{usable[-1]}") if usable else None


class Unsupported(TVMSError):
    """Raised by a converter for a form of the operator it does not handle; the importer adds
    the node, the operator and the opset to the message. ``needs`` is the value that would have
    to be a constant, when that is what is missing."""

    def __init__(self, message: str, needs: Any = None):
        super().__init__(message)
        self.needs = needs


class InvalidModel(TVMSError):
    """The model is not valid ONNX (not a model at all, an initializer whose data does not fit
    its dims, a name no node defines, a node of the wrong arity): an input error, where other
    TVMSErrors of the import are forms tvms does not convert (``tvms import`` exits 2 vs 1)."""


class Attrs(dict):
    """A node's attributes (name -> Python value). Reading one marks it used; ``unused()`` lists
    the attributes no converter looked at, which the importer rejects rather than ignore."""

    def __init__(self, values: dict):
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def ignore(self, *keys: str) -> None:
        """Attributes that do not change the result (a seed, a training-only momentum)."""
        self.read.update(keys)

    def unused(self) -> list[str]:
        return sorted(set(self) - self.read)


# ---------------------------------------------------------------------------- the context
class Context:
    """What converters share: the builder, the opset, and helpers on Relax values."""

    def __init__(self, bb: BlockBuilder, opset: int):
        self.bb = bb
        self.opset = opset
        self.node_outputs = 1  # (how many outputs the node being converted has)

    def emit(self, expr: Any) -> Any:
        return expr if isinstance(expr, (rx.Constant, rx.Var)) else self.bb.emit(expr)

    def constant(self, data: Any, dtype: str | None = None) -> rx.Constant:
        """A constant of exactly the numpy dtype given (relax.const narrows int64 without one)."""
        data = np.asarray(data, dtype=dtype)
        return const(data, str(data.dtype))


def value_of(expr: Any) -> np.ndarray | None:
    """The numpy value of a constant, None for a value known only at run time."""
    return expr.data if isinstance(expr, rx.Constant) else None


def required_value(expr: Any, what: str) -> np.ndarray:
    """The value of an input that decides a shape or an axis: it must be known at import time."""
    value = value_of(expr)
    if value is None:
        raise Unsupported(f"{what} must be a constant (an initializer or a Constant node), not a "
                          f"value known only at run time", needs=expr)
    return value


def tensor_info(expr: Any) -> TensorStructInfo:
    sinfo = expr.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise Unsupported(f"expected a tensor, got {sinfo}")
    return sinfo


def dtype_of(expr: Any) -> str:
    return str(tensor_info(expr).dtype)


def rank_of(expr: Any) -> int:
    ndim = tensor_info(expr).ndim
    if ndim < 0:
        raise Unsupported("the rank of an input is unknown", needs=expr)
    return ndim


def dims_of(expr: Any) -> list:
    """The dimensions (ints where static, PrimExprs where symbolic)."""
    dims = tensor_info(expr).dims
    if dims is None:
        raise Unsupported("the shape of an input is unknown", needs=expr)
    return [d.value if isinstance(d, IntImm) else d for d in dims]


def static_shape(expr: Any) -> list[int] | None:
    dims = tensor_info(expr).dims
    if dims is None or not all(isinstance(d, IntImm) for d in dims):
        return None
    return [d.value for d in dims]


def onnx_dtype(elem_type: int) -> str:
    """The dtype name of an ONNX TensorProto element type (1 -> "float32")."""
    from onnx.helper import tensor_dtype_to_np_dtype

    try:
        dtype = np.dtype(tensor_dtype_to_np_dtype(elem_type))
        return "string" if dtype == object else str(dtype)  # (ONNX's STRING)
    except (KeyError, TypeError):
        raise Unsupported(f"the element type {elem_type} is not an ONNX tensor type") from None


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def as_dtype(expr: Any, dtype: str) -> Any:
    """``expr`` cast to ``dtype`` (constants folded)."""
    if dtype_of(expr) == dtype:
        return expr
    value = value_of(expr)
    if value is not None:
        return const(value.astype(dtype), dtype)
    return op.astype(expr, dtype)


def scalar_like(value: float, expr: Any) -> rx.Constant:
    """A scalar constant of ``expr``'s dtype."""
    dtype = dtype_of(expr)
    return const(np.array(value, dtype=dtype), dtype)


# ---------------------------------------------------------------------------- import-time values
CONSTANT_LIMIT = 1 << 27  # elements: the largest constant the importer computes (1 GiB of float64)


def element_count(shape: Any) -> int:
    """The number of elements of a tensor of ``shape`` (Python ints: no overflow)."""
    return math.prod(int(d) for d in shape)


def check_size(count: int, what: str, limit: int = CONSTANT_LIMIT) -> None:
    """Refuse, before building it, a constant of ``count`` elements larger than ``limit``."""
    if count > limit:
        raise TVMSError(f"{what} would have {count} elements, more than the {limit} that the "
                        f"importer computes at import time")


def range_count(start: Any, limit: Any, delta: Any) -> int:
    start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in (start, limit, delta))
    return max(math.ceil((limit - start) / delta), 0) if delta and math.isfinite(limit - start) else 0


def fold(fn: Callable[..., np.ndarray], inputs: list, size: Callable[..., int] | None = None,
         what: str = "the folded constant") -> rx.Constant | None:
    """``fn`` applied to the inputs' values when all are constants (shape computations are
    evaluated at import time, so the shapes they feed stay static). ``size`` gives the result's
    element count from the same values, checked against ``CONSTANT_LIMIT`` before ``fn`` runs."""
    values = [value_of(x) for x in inputs]
    if not inputs or any(v is None for v in values):
        return None
    if size is not None:
        check_size(size(*values), what)
    result = np.asarray(fn(*values))
    return const(result, str(result.dtype))
