"""TensorIR expressions (``PrimExpr``), types, ranges and iteration variables."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .dtype import DataType, boolean, float_literal_refusal, handle, int32
from .errors import TVMSError
from .node import EMPTY, FrozenDict, Node, aside, binds, derived, hint


# ---------------------------------------------------------------- types (of variables)
@dataclass(frozen=True, slots=True, eq=False)
class PrimType(Node):
    """The type of a scalar variable, ``T.int32``."""

    dtype: DataType


@dataclass(frozen=True, slots=True, eq=False)
class TensorMapType(Node):
    """What ``T.TensorMap()`` points at: a CUDA tensor-map descriptor (TMA), TVM 0.27's
    ``PointerType(TensorMapType())``."""


@dataclass(frozen=True, slots=True, eq=False)
class PointerType(Node):
    """The type of a handle variable that points at ``element`` data in ``storage_scope``."""

    element: DataType | TensorMapType
    storage_scope: str = "global"

    @property
    def is_tensor_map(self) -> bool:
        return isinstance(self.element, TensorMapType)


@dataclass(frozen=True, slots=True, eq=False)
class TupleType(Node):
    """``()`` as a function's return type: the function returns nothing."""

    fields: tuple = ()


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True, eq=False)
class PrimExpr(Node):
    """A scalar (or vector) expression. Every PrimExpr has a ``dtype``.

    Python's arithmetic and ordering operators build expressions with TVM's conversions
    (``tvms.ir.arith``), as ``te.compute`` bodies need; ``==`` stays identity, as for every node.
    """

    def __neg__(self) -> Any:
        from .arith import negate

        return negate(self)

    def __invert__(self) -> Any:
        from .arith import bitwise_not

        return bitwise_not(self)


def _operator(symbol: str, reflected: bool) -> Any:
    """A Python operator method of PrimExpr: ``a + 1`` builds Add(a, 1) with TVM's conversions."""
    def method(self: PrimExpr, other: Any) -> Any:
        from .operators import BY_SYMBOL  # (the one operator table: how a symbol builds its node)

        if not isinstance(other, (PrimExpr, int, float)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return BY_SYMBOL[symbol].build(a, b)
    return method


for _name, _symbol in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"),
                       ("floordiv", "//"), ("mod", "%"), ("and", "&"), ("or", "|"), ("xor", "^"),
                       ("lshift", "<<"), ("rshift", ">>")):
    setattr(PrimExpr, f"__{_name}__", _operator(_symbol, False))
    setattr(PrimExpr, f"__r{_name}__", _operator(_symbol, True))
for _name, _symbol in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")):
    setattr(PrimExpr, f"__{_name}__", _operator(_symbol, False))


@dataclass(frozen=True, slots=True, eq=False)
class IntImm(PrimExpr):
    dtype: DataType
    value: int

    def __post_init__(self) -> None:
        if not (self.dtype.is_integer or self.dtype.is_bool):
            raise TVMSError(f"an integer constant cannot have type {self.dtype}")


@dataclass(frozen=True, slots=True, eq=False)
class FloatImm(PrimExpr):
    dtype: DataType
    value: float

    def __post_init__(self) -> None:
        # (as TVM's FloatImm refuses them: a constant tvms made would print as text it refuses)
        refusal = float_literal_refusal(self.dtype, self.value)
        if refusal:
            raise TVMSError(refusal)


@dataclass(frozen=True, slots=True, eq=False)
class StringImm(PrimExpr):
    value: str
    dtype: DataType = derived(default=handle)


@dataclass(frozen=True, slots=True, eq=False)
class Var(PrimExpr):
    """A variable. Two Vars are the same variable only if they are the same object."""

    name: str = hint()
    dtype: DataType = int32
    type_annotation: Node | None = None  # PointerType for handles that point at data

    def __post_init__(self) -> None:
        if isinstance(self.dtype, str):  # Var("n", "int64"), as TVM allows
            object.__setattr__(self, "dtype", DataType(self.dtype))

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.dtype})"


def is_tensor_map(e: Any) -> bool:
    """Whether ``e`` is a variable of type ``T.TensorMap()`` (a CUDA tensor-map descriptor)."""
    ann = e.type_annotation if isinstance(e, Var) else None
    return isinstance(ann, PointerType) and ann.is_tensor_map


@dataclass(frozen=True, slots=True, eq=False)
class SizeVar(Var):
    """A variable known to be non-negative (a symbolic size)."""


@dataclass(frozen=True, slots=True, eq=False)
class BinaryOp(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.a.dtype)


class Add(BinaryOp): __slots__ = ()
class Sub(BinaryOp): __slots__ = ()
class Mul(BinaryOp): __slots__ = ()
class Div(BinaryOp): __slots__ = ()
class Mod(BinaryOp): __slots__ = ()  # noqa: E701  truncated modulo
class FloorDiv(BinaryOp): __slots__ = ()
class FloorMod(BinaryOp): __slots__ = ()
class Min(BinaryOp): __slots__ = ()
class Max(BinaryOp): __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False)
class CmpOp(BinaryOp):
    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", boolean.with_lanes_of(self.a.dtype))


class EQ(CmpOp): __slots__ = ()
class NE(CmpOp): __slots__ = ()
class LT(CmpOp): __slots__ = ()
class LE(CmpOp): __slots__ = ()
class GT(CmpOp): __slots__ = ()
class GE(CmpOp): __slots__ = ()
class And(BinaryOp): __slots__ = ()
class Or(BinaryOp): __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        if not self.a.dtype.is_bool:  # (as TVM's: ``not i`` of an integer is no bitwise ~i)
            raise TVMSError(f"'not' takes a bool, not {self.a.dtype}: compare with zero (x == 0)")
        object.__setattr__(self, "dtype", self.a.dtype)


@dataclass(frozen=True, slots=True, eq=False)
class Select(PrimExpr):
    """``T.Select(c, t, f)``: both branches are evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, slots=True, eq=False)
class Cast(PrimExpr):
    dtype: DataType
    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False)
class Ramp(PrimExpr):
    """The vector ``base, base + stride, ..., base + (lanes - 1) * stride``; ``lanes`` is a
    number, or ``T.vscale() * k`` for a scalable vector."""

    base: PrimExpr
    stride: PrimExpr
    lanes: Any  # int | PrimExpr (scalable)
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.base.dtype.with_lanes(*lane_count(self.lanes)))


@dataclass(frozen=True, slots=True, eq=False)
class Broadcast(PrimExpr):
    value: PrimExpr
    lanes: Any  # int | PrimExpr (scalable), as in Ramp
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.value.dtype.with_lanes(*lane_count(self.lanes)))


@dataclass(frozen=True, slots=True, eq=False)
class Shuffle(PrimExpr):
    """``T.Shuffle([a, b], [7, 6, 5, 4])``: lanes picked, by index, from the vectors laid end
    to end (TVM's concatenation, extraction and reversal of vectors)."""

    vectors: tuple
    indices: tuple  # IntImm lane numbers into the concatenated vectors
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.vectors[0].dtype.with_lanes(len(self.indices)))


@dataclass(frozen=True, slots=True, eq=False)
class Let(PrimExpr):
    var: Var = binds()
    value: PrimExpr = field()
    body: PrimExpr = field()
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.body.dtype)


@dataclass(frozen=True, slots=True, eq=False)
class BufferLoad(PrimExpr):
    buffer: Any  # tvms.ir.buffer.Buffer
    indices: tuple
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        lanes, scalable = self.buffer.dtype.lanes, self.buffer.dtype.scalable
        for index in self.indices:
            lanes *= index.dtype.lanes
            scalable |= index.dtype.scalable
        object.__setattr__(self, "dtype", self.buffer.dtype.with_lanes(lanes, scalable))


@dataclass(frozen=True, slots=True, eq=False)
class Op(Node):
    """A built-in operator (intrinsic) that a Call applies; see ``tvms.ir.op``."""

    name: str

    def __repr__(self) -> str:
        return f"Op({self.name!r})"


@dataclass(frozen=True, slots=True, eq=False)
class Call(PrimExpr):
    """A call to an intrinsic (``Op``) or to another function of the module (``GlobalVar``)."""

    dtype: DataType
    op: Node
    args: tuple
    attrs: FrozenDict = EMPTY  # keyword arguments some intrinsics take (launch_params=[...])
    type_annotation: Node | None = None  # PointerType of a handle result that points at data
    # per argument, the buffer whose data it was written as (``B.data``; TVM 0.27's
    # ``buffer_data(B)`` names the buffer, where tvms has its data Var), else None
    data_of: tuple = aside(default=())


@dataclass(frozen=True, slots=True, eq=False)
class CommReducer(Node):
    """A commutative reducer ``lambda x, y: x + y`` with its identity element(s)."""

    lhs: tuple = binds()
    rhs: tuple = binds()
    result: tuple = ()
    identity_element: tuple = ()


def lane_count(lanes: Any) -> tuple[int, bool]:
    """(k, scalable) of a vector's lanes: a number k, or ``T.vscale() * k`` (k lanes per vscale,
    the only scalable form TVM accepts)."""
    if isinstance(lanes, int):
        return lanes, False
    if isinstance(lanes, Mul) and is_vscale(lanes.a) and isinstance(lanes.b, IntImm) and lanes.b.value > 0:
        return lanes.b.value, True
    raise TVMSError(f"the lanes of a vector are a number or T.vscale() * k, not {lanes!r}")


def is_vscale(e: Any) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "tir.vscale"


# ---------------------------------------------------------------- ranges and iteration variables
@dataclass(frozen=True, slots=True, eq=False)
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr


# IterVar kinds, named as TVM names them.
DATA_PAR, THREAD_INDEX, COMM_REDUCE, ORDERED, OPAQUE = (
    "DataPar", "ThreadIndex", "CommReduce", "Ordered", "Opaque")


@dataclass(frozen=True, slots=True, eq=False)
class IterVar(Node):
    """A block iterator (``T.axis.spatial``) or a thread index (``threadIdx.x``)."""

    dom: Range | None
    var: Var = binds()
    iter_type: str = DATA_PAR
    thread_tag: str = ""


PrimExprLike = Union[PrimExpr, int, float, bool]


def const(value: PrimExprLike, dtype: str | DataType | None = None) -> PrimExpr:
    """A constant of the given type (int32 / float32 / bool inferred from the Python value)."""
    if isinstance(value, PrimExpr):
        return value
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
    dt = DataType(dtype)
    if dt.is_float:
        return FloatImm(dt, float(value))
    if dt.is_bool:
        return IntImm(dt, int(bool(value)))
    if dt.is_integer:
        if isinstance(value, float) and not value.is_integer():
            raise TVMSError(f"{value!r} is not a value of type {dt}")
        return IntImm(dt, int(value))
    raise TVMSError(f"cannot make a constant of type {dt}")


def wrap_int(value: int, dtype: Any) -> int:
    """A folded integer as the machine computes it in ``dtype``: two's complement wrap-around
    (``T.Mul(2147483647, -2147483648)`` in int32 is ``-2147483648``), so a folded constant
    always fits its type and prints back as itself."""
    if not dtype.is_integer or dtype.is_bool:
        return value
    bits = dtype.bits
    value &= (1 << bits) - 1
    return value - (1 << bits) if not dtype.is_uint and value >= 1 << (bits - 1) else value


def is_const_int(expr: Any, value: int | None = None) -> bool:
    return isinstance(expr, IntImm) and (value is None or expr.value == value)
