"""Tensor expressions: ``te.placeholder``, ``te.compute``, ``te.reduce_axis`` and reductions.

A ``Tensor`` owns the ``Buffer`` that will hold it, so ``A[i, j]`` inside a compute body is simply a
``BufferLoad`` of that buffer; ``create_prim_func`` finds which tensors a body reads by the buffers
it loads. Python operators on the elements build TensorIR expressions (``PrimExpr``'s operators).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from ...ir import arith
from ...ir.buffer import Buffer, decl_buffer
from ...ir.dtype import DataType, float_limits
from ...ir.errors import TVMSError
from ...ir.expr import (COMM_REDUCE, DATA_PAR, Add, And, BufferLoad, Call, FloatImm, IntImm, IterVar,
                        Max, Min, Mul, Or, PrimExpr, Range, Sub, Var)
from ...ir.expr import const as _const
from ...ir.node import Node, walk_fields
from ...ir.op import get_op


# ---------------------------------------------------------------- axes
class Axis(IterVar):
    """An IterVar that stands for its variable in expressions (``A[i, k]``, ``yy + ry``)."""

    __slots__ = ()

    def _bin(name: str, reflected: bool = False):  # noqa: N805  (builds methods below)
        def method(self: "Axis", other: Any) -> Any:
            other = other.var if isinstance(other, IterVar) else other
            a, b = (other, self.var) if reflected else (self.var, other)
            return getattr(a, f"__{name}__")(b) if isinstance(a, PrimExpr) else \
                getattr(b, f"__r{name}__")(a)
        return method

    __add__, __radd__ = _bin("add"), _bin("add", True)
    __sub__, __rsub__ = _bin("sub"), _bin("sub", True)
    __mul__, __rmul__ = _bin("mul"), _bin("mul", True)
    __floordiv__, __rfloordiv__ = _bin("floordiv"), _bin("floordiv", True)
    __mod__, __rmod__ = _bin("mod"), _bin("mod", True)
    __truediv__, __rtruediv__ = _bin("truediv"), _bin("truediv", True)
    __lt__, __le__, __gt__, __ge__ = _bin("lt"), _bin("le"), _bin("gt"), _bin("ge")
    del _bin


def _expr(value: Any) -> Any:
    """An index or operand: an axis stands for its variable."""
    return value.var if isinstance(value, IterVar) else value


def _range(dom: Any) -> Range:
    """A Range from ``(begin, end)`` as TVM makes it: a zero begin stays an int32 0."""
    if isinstance(dom, Range):
        return dom
    lo, hi = (arith.to_expr(_expr(x)) for x in dom)
    if isinstance(lo, IntImm) and lo.value == 0:
        return Range(lo, hi)
    lo, hi = arith.match_types(lo, hi)
    return Range(lo, arith.binary(Sub, hi, lo))


def reduce_axis(dom: Any, name: str = "rv") -> Axis:
    """``te.reduce_axis((0, n), name="k")``: an axis that a reduction sums (or maxes) over."""
    rng = _range(dom)
    return Axis(rng, Var(name, rng.extent.dtype), COMM_REDUCE)


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """``te.var("n", "int64")``: a scalar variable, such as a symbolic size."""
    return Var(name, DataType(dtype))


def const(value: Any, dtype: str = "int32") -> PrimExpr:
    """``te.const(0.0, "float32")``: a constant (int32 unless told)."""
    return _const(value, dtype)


# ---------------------------------------------------------------- reductions
@dataclass(frozen=True)
class Reduce:
    """``te.sum(expr, axis=[k])``: the body of a reducing compute (not an IR node: create_prim_func
    turns it into a block with ``T.init``)."""

    kind: str  # "sum" | "prod" | "max" | "min"
    source: PrimExpr
    axis: tuple  # of Axis

    @property
    def dtype(self) -> DataType:
        return self.source.dtype

    def identity(self) -> PrimExpr:
        if self.kind in ("sum", "prod"):
            return const(0 if self.kind == "sum" else 1, self.dtype)
        return min_value(self.dtype) if self.kind == "max" else max_value(self.dtype)

    def combine(self, lhs: PrimExpr, rhs: PrimExpr) -> PrimExpr:
        if self.kind == "sum" and self.dtype.is_bool:
            return Or(lhs, rhs)  # TVM's sum of booleans is their "or"
        return {"sum": lambda: lhs + rhs, "prod": lambda: lhs * rhs, "max": lambda: Max(lhs, rhs),
                "min": lambda: Min(lhs, rhs)}[self.kind]()


def _reduce_axes(axis: Any, what: str) -> tuple:
    """``axis=`` of a reduction as a tuple, checked to be reduce axes."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not (isinstance(a, IterVar) and a.iter_type == COMM_REDUCE):
            raise TVMSError(f"{what} reduces over te.reduce_axis axes, got {a!r}")
    return axes


def _reducer(kind: str, elementwise: Callable) -> Callable:
    def reducer(expr: Any, *args: Any, axis: Any = None, where: Any = None) -> Any:
        if axis is None and len(args) == 1 and isinstance(args[0], (IterVar, list, tuple)):
            axis, args = args[0], ()
        if axis is None:  # te.max(a, b): the elementwise operator
            if not args:
                raise TVMSError(f"te.{kind} needs axis= (a reduction) or two operands")
            result = _expr(expr)
            for other in args:
                result = elementwise(result, _expr(other))
            return result
        if where is not None:
            raise TVMSError(f"te.{kind}(..., where=...) is not supported yet")
        return Reduce(kind, arith.to_expr(_expr(expr)), _reduce_axes(axis, f"te.{kind}"))

    reducer.__name__ = kind
    reducer.__doc__ = (f"``te.{kind}(expr, axis=k)`` reduces over reduce axes; "
                       f"``te.{kind}(a, b)`` is the elementwise operator.")
    return reducer


sum = _reducer("sum", lambda a, b: arith.binary(Add, a, b))  # noqa: A001  (TVM's name)
prod = _reducer("prod", lambda a, b: arith.binary(Mul, a, b))
max = _reducer("max", lambda a, b: arith.binary(Max, a, b))  # noqa: A001
min = _reducer("min", lambda a, b: arith.binary(Min, a, b))  # noqa: A001


@dataclass(frozen=True)
class MultiReduce:
    """A reduction of several values together (argmax reduces an (index, value) pair) with a
    custom combiner: the body of a compute with one output per value (not an IR node)."""

    sources: tuple  # of PrimExpr, one per output
    axis: tuple  # of Axis
    combine: Callable  # (accumulated values, new values) -> combined values
    identity: tuple  # of PrimExpr, one per output

    @property
    def dtypes(self) -> tuple:
        return tuple(s.dtype for s in self.sources)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Callable:
    """``te.comm_reducer``: a reducer of tuples of values. ``fcombine(lhs, rhs)`` combines two
    tuples into one, ``fidentity(*dtypes)`` gives the identity tuple; the reducer is called as
    ``reducer((idx, val), axis=[k])``."""
    def reducer(exprs: Any, axis: Any, where: Any = None) -> MultiReduce:
        if where is not None:
            raise TVMSError(f"{name}(..., where=...) is not supported")
        axes = _reduce_axes(axis, name)
        sources = tuple(arith.to_expr(_expr(e)) for e in exprs)
        identity = tuple(fidentity(*(s.dtype for s in sources)))
        if len(identity) != len(sources):
            raise TVMSError(f"{name}: {len(sources)} values but {len(identity)} identities")
        return MultiReduce(sources, axes, fcombine, identity)

    reducer.__name__ = name
    return reducer


# ---------------------------------------------------------------- scalar helpers
def min_value(dtype: "str | DataType") -> PrimExpr:
    """The smallest value of ``dtype`` (the identity of ``te.max``)."""
    dt = DataType(dtype)
    if dt.is_float:
        return FloatImm(dt, -_float_max(dt))
    if dt.is_bool:
        return IntImm(dt, 0)
    return IntImm(dt, 0 if dt.is_uint else -(1 << (dt.bits - 1)))


def max_value(dtype: "str | DataType") -> PrimExpr:
    """The largest value of ``dtype`` (the identity of ``te.min``)."""
    dt = DataType(dtype)
    if dt.is_float:
        return FloatImm(dt, _float_max(dt))
    if dt.is_bool:
        return IntImm(dt, 1)
    return IntImm(dt, (1 << dt.bits) - 1 if dt.is_uint else (1 << (dt.bits - 1)) - 1)


def _float_max(dt: DataType) -> float:
    try:
        return float_limits(dt)[1]
    except TVMSError:
        raise TVMSError(f"no maximum value known for {dt}") from None


def all(*conds: Any) -> PrimExpr:  # noqa: A001  (TVM's name)
    """``a and b and ...`` (left to right, as TVM builds it)."""
    result = _expr(conds[0])
    for c in conds[1:]:
        result = arith.binary(And, result, _expr(c))
    return result


def any(*conds: Any) -> PrimExpr:  # noqa: A001
    """``a or b or ...``."""
    result = _expr(conds[0])
    for c in conds[1:]:
        result = arith.binary(Or, result, _expr(c))
    return result


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """``T.if_then_else(cond, t, f)``: only the chosen branch is evaluated."""
    t, f = arith.match_types(_expr(t), _expr(f))
    return Call(t.dtype, get_op("tir.if_then_else"), (arith.to_expr(_expr(cond)), t, f))


# ---------------------------------------------------------------- tensors and operations
class Tensor:
    """The output of an operation. ``A[i, j]`` is an element: a PrimExpr."""

    __slots__ = ("op", "buffer")

    def __init__(self, op: "Operation", buffer: Buffer):
        self.op = op
        self.buffer = buffer

    shape = property(lambda self: self.buffer.shape)
    dtype = property(lambda self: self.buffer.dtype)
    name = property(lambda self: self.buffer.name)
    ndim = property(lambda self: len(self.buffer.shape))

    def __getitem__(self, indices: Any) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise TVMSError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(indices)}")
        if _reading:
            _reading[-1][id(self.buffer)] = self
        return BufferLoad(self.buffer, tuple(arith.to_expr(_expr(i)) for i in indices))

    __call__ = lambda self, *indices: self[indices]  # noqa: E731  (topi writes data(*idx))

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype})"


@dataclass(frozen=True, eq=False)
class Operation:
    name: str


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    pass


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """``output[axis] = body``; ``body`` is a PrimExpr or a ``Reduce`` over ``reduce_axis``."""

    tag: str
    attrs: dict
    axis: tuple  # of IterVar (DataPar)
    body: Any
    inputs: tuple  # of Tensor, in the order the body first reads them
    buffers: tuple = ()  # the output buffers (several for a MultiReduce body)

    @property
    def reduce_axis(self) -> tuple:
        return self.body.axis if isinstance(self.body, (Reduce, MultiReduce)) else ()


def _shape(shape: Any) -> tuple:
    shape = shape if isinstance(shape, (list, tuple)) else (shape,)
    return tuple(const(int(s), "int32") if isinstance(s, (int, float)) else _expr(s) for s in shape)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """``te.placeholder((n, n), name="A")``: an input tensor."""
    shape = _shape(shape)
    return Tensor(PlaceholderOp(name), decl_buffer(shape, dtype or "float32", name))


_reading: list = []  # while an fcompute runs: the tensors it indexes (see Tensor.__getitem__)


def compute(shape: Any, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None, varargs_names: list | None = None) -> Tensor:
    """``te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")``.

    The axes are named after ``fcompute``'s parameters (``i0, i1, ...`` for ``*args``, unless
    ``varargs_names`` names them), as TVM names them.
    A ``MultiReduce`` body (``te.comm_reducer``) gives a list of tensors, ``{name}_v0, ...``.
    """
    shape = _shape(shape)
    spec = inspect.getfullargspec(fcompute)
    if spec.varkw or spec.defaults or spec.kwonlyargs:
        raise TVMSError("fcompute takes positional index arguments only")
    names = list(spec.args)
    if spec.varargs is not None:
        extra = len(shape) - len(spec.args)
        names += list(varargs_names)[:extra] if varargs_names else [f"i{i}" for i in range(extra)]
    if len(names) != len(shape):
        raise TVMSError(f"fcompute takes {len(names)} indices but the shape has {len(shape)} dimensions")
    axis = tuple(Axis(_range((0, s)), Var(n, s.dtype), DATA_PAR) for n, s in zip(names, shape))
    _reading.append({})
    try:
        body = fcompute(*[a.var for a in axis])
    finally:
        read = _reading.pop()
    if isinstance(body, (list, tuple)):
        if len(body) != 1:
            raise TVMSError("a compute with several outputs is not supported yet")
        body = body[0]
    if not isinstance(body, (Reduce, MultiReduce)):
        body = arith.to_expr(_expr(body))
    source = body.source if isinstance(body, Reduce) else body.sources if isinstance(body, MultiReduce) \
        else body
    # TVM orders a compute's inputs as a post-order walk of its body first reaches them
    inputs = tuple(read[id(b)] for b in loaded_buffers(source) if id(b) in read)
    if isinstance(body, MultiReduce):
        buffers = tuple(decl_buffer(shape, dt, f"{name}_v{i}") for i, dt in enumerate(body.dtypes))
    else:
        buffers = (decl_buffer(shape, body.dtype, name),)
    op = ComputeOp(name, tag, dict(attrs or {}), axis, body, inputs, buffers)
    tensors = [Tensor(op, b) for b in buffers]
    return tensors if isinstance(body, MultiReduce) else tensors[0]


def loaded_buffers(expr: Any) -> list:
    """The buffers ``expr`` loads from, each once, in post-order (children first)."""
    seen: dict = {}

    def visit(node: Any) -> None:
        if isinstance(node, tuple):
            for x in node:
                visit(x)
            return
        if not isinstance(node, Node):
            return
        for f, _, _ in walk_fields(type(node)):
            visit(getattr(node, f))
        if isinstance(node, BufferLoad):
            seen.setdefault(id(node.buffer), node.buffer)

    visit(expr)
    return list(seen.values())
