"""Shape computations on symbolic sizes, followed at import time: in a model with a dynamic batch,
``Shape(x) -> Gather/Slice/Concat/Cast/arithmetic -> Reshape/Expand/ConstantOfShape/Range`` computes
tensors whose elements are the symbolic sizes (``n``, ``n * 4``). The importer keeps those
elements (a ``ShapeValue``) in place of a Relax value, the consumers build their result from them
(``R.reshape(x, R.shape([n, 12]))``), so the graph stays compiled for any ``n`` (TVM's frontend
follows them as ShapeExpr and PrimValue); a ShapeValue becomes a Relax tensor
(``R.shape_to_tensor``) only where another node reads it. Only what is known exactly is
followed; anything else is converted as usual.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import relax as rx
from ..ir.arith import Analyzer
from ..ir.errors import TVMSError
from ..ir.expr import Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var
from .block_builder import const
from .onnx_convert import dims_of, onnx_dtype
from .relax_op_api import op

_SIMPLIFY = Analyzer().simplify
_INT_TYPES = ("int64", "int32")


class ShapeValue:
    """An integer tensor of rank 0 or 1 whose elements are ints or PrimExprs (int64 sizes)."""

    def __init__(self, elems: list, scalar: bool = False, dtype: str = "int64"):
        self.elems = [e.value if isinstance(e, IntImm) else e for e in elems]
        self.scalar, self.dtype = scalar, dtype
        self.var = None  # (the importer's binding of ``relax()``, once a node reads it)

    @property
    def symbolic(self) -> bool:
        return any(isinstance(e, PrimExpr) for e in self.elems)

    def relax(self) -> Any:
        """The Relax expression of this value: ``R.shape_to_tensor(R.shape([...]))`` of sizes
        and constants, the arithmetic of an element that computes on sizes as tensor operators."""
        if all(isinstance(e, (int, Var)) for e in self.elems):
            value = op.shape_to_tensor(rx.ShapeExpr(self.elems))
        else:
            parts = [_as_tensor(e) for e in self.elems]
            value = op.concat(parts, axis=0) if len(parts) != 1 else parts[0]
        if self.dtype != "int64":
            value = op.astype(value, self.dtype)
        return op.squeeze(value, [0]) if self.scalar else value


_TENSOR_OPS = {Add: op.add, Sub: op.subtract, Mul: op.multiply, FloorDiv: op.floor_divide,
               FloorMod: op.floor_mod, Min: op.minimum, Max: op.maximum}


def _as_tensor(elem: Any) -> Any:
    """An int64 tensor of shape (1,) of the value of ``elem`` (an int, a size, or arithmetic
    on them)."""
    if isinstance(elem, int):
        return const(np.array([elem], "int64"), "int64")
    if isinstance(elem, IntImm):
        return _as_tensor(elem.value)
    if isinstance(elem, Var):
        return op.shape_to_tensor(rx.ShapeExpr([elem]))
    fn = _TENSOR_OPS.get(type(elem))
    if fn is None:
        raise TVMSError(f"the size expression {elem} has no tensor form here")
    return fn(_as_tensor(elem.a), _as_tensor(elem.b))


def shape_value_of(x: Any) -> "ShapeValue | None":
    """What is known of ``x``'s elements: ``x`` itself, or a small integer constant's."""
    if x is None or isinstance(x, ShapeValue):
        return x
    if isinstance(x, rx.Constant) and x.data.dtype.kind in "iu" and x.data.ndim <= 1 and x.data.size <= 64:
        return ShapeValue([int(v) for v in x.data.reshape(-1)], x.data.ndim == 0, str(x.data.dtype))
    return None


def evaluate(op_type: str, opset: int, attrs: Any, inputs: list) -> "ShapeValue | Any | None":
    """The node's result when its inputs' elements are followed: a ShapeValue for a shape
    computation, a Relax expression for a consumer, None when the node is converted as usual
    (no symbolic input, or a form not followed here). Reads ``attrs`` only when it applies."""
    if op_type == "Shape":
        return _shape(inputs[0], attrs)
    values = [shape_value_of(x) for x in inputs]
    if not any(v is not None and v.symbolic for v in values):
        return None
    rule = _CONSUMERS.get(op_type)
    if rule is not None:
        return rule(inputs, values, attrs, opset)
    rule = _FOLLOWED.get(op_type)
    if rule is None or any(v is None for v, x in zip(values, inputs) if x is not None):
        return None
    return rule(values, attrs, opset, inputs)


def _shape(x: Any, attrs: Any) -> "ShapeValue | None":
    dims = None if isinstance(x, ShapeValue) else getattr(x.struct_info, "dims", None)
    if dims is None or all(isinstance(d, IntImm) for d in dims):
        return None  # (static shapes fold to constants in the converter)
    rank = len(dims)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    return ShapeValue(list(dims[start:end]))


def _ints(value: "ShapeValue | None") -> list | None:
    if value is None or value.symbolic:
        return None
    return value.elems


def _gather(values, attrs, opset, inputs):
    data, indices = values
    if data.scalar or attrs.get("axis", 0) != 0 or indices.symbolic:
        return None
    n = len(data.elems)
    if not all(-n <= i < n for i in indices.elems):
        return None
    return ShapeValue([data.elems[i] for i in indices.elems], indices.scalar, data.dtype)


def _slice(values, attrs, opset, inputs):
    data = values[0]
    if opset < 10:
        starts, ends, axes, steps = attrs.get("starts"), attrs.get("ends"), attrs.get("axes"), None
    else:
        starts, ends, axes, steps = (_ints(v) if v is not None else None for v in (values[1:] + [None] * 4)[:4])
        if starts is None or ends is None or any(v is not None and v.symbolic for v in values[1:]):
            return None
    if data.scalar or (axes is not None and list(axes) not in ([0], [-1])):
        return None
    step = steps[0] if steps else 1
    big = 1 << 62  # (ONNX's "to the end" is INT64_MAX; Python slicing clamps the same way)
    start, end = (max(min(v, big), -big) for v in (starts[0], ends[0]))
    return ShapeValue(data.elems[slice(start, end, step)], False, data.dtype)


def _concat(values, attrs, opset, inputs):
    if any(v.scalar for v in values) or len({v.dtype for v in values}) != 1:
        return None
    return ShapeValue([e for v in values for e in v.elems], False, values[0].dtype)


def _unsqueeze(values, attrs, opset, inputs):
    axes = attrs.get("axes") if opset < 13 else _ints(values[1]) if len(values) > 1 else None
    if not values[0].scalar or axes is None or list(axes) not in ([0], [-1]):
        return None
    return ShapeValue(values[0].elems, False, values[0].dtype)


def _squeeze(values, attrs, opset, inputs):
    data = values[0]
    if data.scalar or len(data.elems) != 1:
        return None
    return ShapeValue(data.elems, True, data.dtype)


def _cast(values, attrs, opset, inputs):
    dtype = onnx_dtype(attrs["to"])
    return ShapeValue(values[0].elems, values[0].scalar, dtype) if dtype in _INT_TYPES else None


def _arithmetic(fn):
    def rule(values, attrs, opset, inputs):
        a, b = values
        if a.dtype != b.dtype or not (a.scalar or b.scalar or len(a.elems) == len(b.elems)
                                      or 1 in (len(a.elems), len(b.elems))):
            return None
        n = max(len(a.elems), len(b.elems))
        pick = lambda v, i: v.elems[0] if len(v.elems) == 1 else v.elems[i]  # noqa: E731
        elems = [fn(pick(a, i), pick(b, i)) for i in range(n)]
        if any(e is None for e in elems):
            return None
        return ShapeValue([_SIMPLIFY(e) if isinstance(e, PrimExpr) else e for e in elems],
                          a.scalar and b.scalar, a.dtype)
    return rule


def _divide(x, y):
    # (ONNX divides integers toward zero: the floor division of sizes, which are >= 0, by a
    # positive constant is the same)
    if isinstance(y, int) and y > 0 and (isinstance(x, PrimExpr) or x >= 0):
        return x // y
    return None


_FOLLOWED = {
    "Gather": _gather, "Slice": _slice, "Concat": _concat, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Cast": _cast, "Identity": lambda values, attrs, opset, inputs: values[0],
    "Add": _arithmetic(lambda x, y: x + y), "Sub": _arithmetic(lambda x, y: x - y),
    "Mul": _arithmetic(lambda x, y: x * y), "Div": _arithmetic(_divide),
}


# ---------------------------------------------------------------------------- consumers
def _reshape(inputs, values, attrs, opset):
    if len(inputs) < 2 or isinstance(inputs[0], ShapeValue):  # (before opset 5 the shape is an attribute)
        return None
    x, shape = inputs[0], values[1]
    if shape is None or shape.scalar:
        return None
    dims = dims_of(x)
    out = []
    for i, e in enumerate(shape.elems):
        if isinstance(e, int) and e == 0 and not attrs.get("allowzero", 0):
            if i >= len(dims):
                return None
            e = dims[i]
        out.append(e)
    unknown = [i for i, e in enumerate(out) if isinstance(e, int) and e == -1]
    if len(unknown) > 1 or any(isinstance(e, int) and e < -1 for e in out):
        return None
    if unknown:
        out[unknown[0]] = _quotient(list(dims), [e for i, e in enumerate(out) if i != unknown[0]])
        if out[unknown[0]] is None:
            return None
    return op.reshape(x, out)


def _quotient(num: list, den: list) -> Any:
    """prod(num) / prod(den) for products of sizes, the symbolic factors cancelled one by one;
    None when it does not divide exactly."""
    num = list(num)
    rest = []
    for factor in den:
        match = next((i for i, f in enumerate(num) if f is factor or (isinstance(f, PrimExpr) and
                      isinstance(factor, PrimExpr) and str(f) == str(factor))), None)
        if isinstance(factor, int):
            rest.append(factor)
        elif match is None:
            return None
        else:
            num.pop(match)
    top, bottom = math.prod(f for f in num if isinstance(f, int)), math.prod(rest)
    if bottom == 0 or top % bottom:
        return None
    return _SIMPLIFY(math.prod([f for f in num if not isinstance(f, int)], start=top // bottom))


def _expand(inputs, values, attrs, opset):
    x, shape = inputs[0], values[1]
    if shape is None or shape.scalar or isinstance(x, ShapeValue):
        return None
    dims = dims_of(x)
    rank = max(len(dims), len(shape.elems))
    a = [1] * (rank - len(dims)) + list(dims)
    b = [1] * (rank - len(shape.elems)) + list(shape.elems)
    out = []
    for p, q in zip(a, b):
        if isinstance(q, int) and q == 1:
            out.append(p)
        elif isinstance(p, int) and p == 1:
            out.append(q)
        elif isinstance(p, int) or p is q or _SIMPLIFY(p - q) == 0:
            out.append(p)  # (a static extent other than 1: the other must equal it)
        elif isinstance(q, int):
            out.append(q)
        else:
            return None  # (two different symbolic extents: which one is 1 is not known)
    return op.broadcast_to(x, out)


def _constant_of_shape(inputs, values, attrs, opset):
    shape = values[0]
    if shape is None or shape.scalar:
        return None
    value = attrs.get("value")
    fill = np.zeros(1, "float32") if value is None else np.asarray(value).reshape(-1)
    return op.full(shape.elems, const(fill[0], str(fill.dtype)), str(fill.dtype))


def _range(inputs, values, attrs, opset):
    if any(v is None or not v.scalar for v in values) or not isinstance(values[2].elems[0], int) \
            or values[2].elems[0] <= 0:  # (a positive step: the count the arange infers)
        return None
    start, limit, delta = (rx.PrimValue(v.elems[0]) for v in values)
    return op.arange(start, limit, delta, dtype=values[0].dtype)


_CONSUMERS = {"Reshape": _reshape, "Expand": _expand, "ConstantOfShape": _constant_of_shape, "Range": _range}
