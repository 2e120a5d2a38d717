"""Struct-info inference helpers shared by the Relax operators: argument access, messages,
symbolic dimension arithmetic (with the folding TVM's analyzer does), broadcasting, axes and
dtype rules. The operators themselves live in ``relax_ops*.py``."""
from __future__ import annotations

from typing import Any, Callable

from .arith import DIMENSION, Analyzer, binary
from .distributed import DTensorStructInfo
from .dtype import DataType
from .errors import TVMSError
from .expr import Add, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var
from .operators import ATOM, BY_NODE
from .relax import PrimValue, ShapeExpr, Tuple
from .relax_op import CallInfo, OpSpec
from .struct_info import (VOID, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo)
from .structural import structural_equal

INT64 = DataType("int64")
BOOL = DataType("bool")


# ---------------------------------------------------------------- arguments
def tensor_arg(info: CallInfo, i: int) -> TensorStructInfo:
    s = info.sinfo[i]
    if not isinstance(s, TensorStructInfo):
        raise info.fail(f"argument {arg_name(info, i)!r} must be a tensor, got {describe(s)}")
    return s


def arg_name(info: CallInfo, i: int) -> str:
    names = info.spec.args
    return names[min(i, len(names) - 1)] if names else f"#{i}"


def tensor_args(info: CallInfo) -> list[TensorStructInfo]:
    return [tensor_arg(info, i) for i in range(len(info.args))]


def tuple_of_tensors(info: CallInfo, i: int) -> list[TensorStructInfo]:
    """The tensors of a tuple argument (``R.concat((x, y))``)."""
    s = info.sinfo[i]
    if not isinstance(s, TupleStructInfo):
        raise info.fail(f"argument {arg_name(info, i)!r} must be a tuple of tensors, got {describe(s)}")
    for f in s.fields:
        if not isinstance(f, TensorStructInfo):
            raise info.fail(f"argument {arg_name(info, i)!r} must be a tuple of tensors, "
                            f"but it holds {describe(f)}")
    return list(s.fields)


def typed_arg(info: CallInfo, i: int, kind: type, example: str) -> Any:
    """The struct info of argument ``i``, which must be a ``kind`` (``example`` shows one)."""
    s = info.sinfo[i]
    if not isinstance(s, kind):
        raise info.fail(f"argument {arg_name(info, i)!r} must be {example}, got {describe(s)}")
    return s


def shape_arg(info: CallInfo, i: int) -> ShapeStructInfo:
    return typed_arg(info, i, ShapeStructInfo, "a shape such as R.shape([2, 3])")


def op_error(spec: OpSpec, message: str) -> TVMSError:
    """An error naming the operator, for code that runs before a CallInfo exists (``prepare``)."""
    return TVMSError(f"R.{spec.script_name}: {message}")


def as_shape_expr(value: Any) -> Any:
    """``(2, n)`` / ``[2, n]`` / a tuple of R.prim_value become ``R.shape([2, n])``; Relax shape
    expressions and variables pass through."""
    if isinstance(value, Tuple) and all(isinstance(f, PrimValue) for f in value.fields):
        value = [f.value for f in value.fields]
    if isinstance(value, (list, tuple)):
        dims = tuple(to_dim(v) for v in value)
        return ShapeExpr(dims, ShapeStructInfo(dims))
    return value


def prepare_arg(index: int, convert: Callable) -> Any:
    """A ``prepare`` step converting argument ``index`` (given as Python values) with ``convert``."""
    def prepare(spec: OpSpec, args: tuple, attrs: dict) -> tuple:
        args = list(args)
        args[index] = convert(args[index])
        return args, attrs
    return prepare


def prepare_tuple_arg(index: int) -> Any:
    """A ``prepare`` step making argument ``index`` an R.Tuple when given as a Python list/tuple."""
    return prepare_arg(index, as_tuple_expr)


def prepare_shape_arg(index: int) -> Any:
    """A ``prepare`` step making argument ``index`` a ShapeExpr (``R.zeros((2, n), ...)``)."""
    return prepare_arg(index, as_shape_expr)


def as_tuple_expr(value: Any) -> Any:
    """A Python list/tuple of Relax expressions becomes an R.Tuple."""
    if isinstance(value, (list, tuple)):
        fields = tuple(value)
        return Tuple(fields, TupleStructInfo(tuple(f.struct_info for f in fields)))
    return value


# ---------------------------------------------------------------- messages
def describe(s: StructInfo) -> str:
    """A short description of struct info for messages: ``a tensor of (n, 784) float32``."""
    if isinstance(s, TensorStructInfo):
        if s.dims is not None:
            shape = fmt_dims(s.dims)
        else:
            shape = f"{s.ndim}-d" if s.ndim >= 0 else "unknown shape"
        return f"a tensor of {shape} {s.dtype if s.dtype != VOID else ''}".rstrip()
    if isinstance(s, PrimStructInfo):
        return f"a {s.dtype} scalar"
    if isinstance(s, DTensorStructInfo):
        return f"{describe(s.tensor_sinfo)} placed {s.placement}"
    names = {"ObjectStructInfo": "an object", "ShapeStructInfo": "a shape",
             "TupleStructInfo": "a tuple", "FuncStructInfo": "a function"}
    return names.get(type(s).__name__, "a value")


_DIM_OPERATORS = (Add, Sub, Mul, FloorDiv, FloorMod)  # (symbols and precedence: ir/operators.py)


def fmt_dim(d: Any) -> str:
    """A dimension as TVMScript writes it: ``n * 2``, ``(n + 1) // 2``, ``T.min(3, n)``."""
    if isinstance(d, int):
        return str(d)
    if isinstance(d, IntImm):
        return str(d.value)
    if isinstance(d, Var):
        return d.name
    if type(d) in _DIM_OPERATORS:
        op = BY_NODE[type(d)]
        symbol, prec = op.symbol, op.precedence
        return f"{_operand_text(d.a, prec, False)} {symbol} {_operand_text(d.b, prec, True)}"
    if isinstance(d, (Min, Max)):
        return f"T.{type(d).__name__.lower()}({fmt_dim(d.a)}, {fmt_dim(d.b)})"
    if isinstance(d, Cast):
        return fmt_dim(d.value)
    return "?"


def _operand_text(d: Any, parent: int, right: bool) -> str:
    text = fmt_dim(d)
    prec = BY_NODE[type(d)].precedence if type(d) in _DIM_OPERATORS else ATOM
    return f"({text})" if prec < parent or (right and prec == parent) else text


def fmt_dims(dims: tuple) -> str:
    parts = [fmt_dim(d) for d in dims]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


# ---------------------------------------------------------------- building struct info
def make_tensor(dims: Any, dtype: DataType, ndim: int = -1, vdevice: Any = None) -> TensorStructInfo:
    """A tensor of the given dimensions (a ShapeExpr is built), or of ``ndim`` when dims is None."""
    if dims is None:
        return TensorStructInfo(None, dtype, ndim, vdevice)
    dims = tuple(to_dim(d) for d in dims)
    return TensorStructInfo(ShapeExpr(dims, ShapeStructInfo(dims)), dtype, len(dims), vdevice)


def tensor_of_shape(shape: Any, sinfo: ShapeStructInfo, dtype: DataType,
                    vdevice: Any = None) -> TensorStructInfo:
    """A tensor whose shape is the Relax expression ``shape`` itself (a ShapeExpr or a shape
    variable), as TVM's reshape / broadcast_to / zeros do."""
    return TensorStructInfo(shape, dtype, sinfo.ndim, vdevice)


def unknown_like(s: TensorStructInfo, ndim: int | None = None) -> TensorStructInfo:
    """``s`` with its shape forgotten: only its rank (or ``ndim``) is known."""
    return TensorStructInfo(None, s.dtype, s.ndim if ndim is None else ndim, s.vdevice)


# ---------------------------------------------------------------- dimension arithmetic
def to_dim(v: Any, like: Any = None) -> PrimExpr:
    """A dimension PrimExpr: Python ints become int64 constants (or the type of ``like``)."""
    if isinstance(v, PrimExpr):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise TVMSError(f"a dimension must be an integer expression, got {v!r}")
    dtype = like.dtype if isinstance(like, PrimExpr) and like.dtype.is_integer else INT64
    return IntImm(dtype, v)


def int_of(value: Any) -> int | None:
    if isinstance(value, IntImm):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _pair(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    a = to_dim(a, b)
    b = to_dim(b, a)
    if a.dtype != b.dtype:  # an int32 constant meets an int64 dimension: widen the constant
        if isinstance(a, IntImm):
            a = IntImm(b.dtype, a.value)
        elif isinstance(b, IntImm):
            b = IntImm(a.dtype, b.value)
    return a, b


def dim_add(a: Any, b: Any) -> PrimExpr:
    """``a + b`` folded as TVM's operator+ folds (constants, ``+ 0``), not simplified further."""
    return binary(Add, *_pair(a, b))


def dim_sub(a: Any, b: Any) -> PrimExpr:
    return binary(Sub, *_pair(a, b))


def dim_mul(a: Any, b: Any) -> PrimExpr:
    return binary(Mul, *_pair(a, b))


def dim_floordiv(a: Any, b: Any) -> PrimExpr:
    return binary(FloorDiv, *_pair(a, b))


def dim_ceildiv(a: Any, b: int) -> PrimExpr:
    """``ceildiv(a, b)`` for a positive constant ``b``, simplified: ``(n + 1) // 2``."""
    return simplify_dim(dim_floordiv(dim_add(a, b - 1), b))


def product(dims: tuple) -> PrimExpr:
    out: PrimExpr = IntImm(INT64, 1)
    for d in dims:
        out = dim_mul(out, d)
    return out


def sub_clamped(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a - b`` where ``b`` clamps against ``a`` or 0, folded as TVM's analyzer does for
    non-negative sizes: ``a - min(x, a)`` is ``max(a - x, 0)``; ``a - max(a - 3, 0)`` is
    ``min(3, a)``."""
    if isinstance(b, Min) and (b.b is a or b.a is a):
        r = sub_clamped(a, b.a if b.b is a else b.b)
        return r if non_negative(r) else Max(r, IntImm(a.dtype, 0))
    if isinstance(b, Max) and int_of(b.b) == 0:
        diff = simplify_dim(dim_sub(a, b.a))
        if int_of(diff) is not None:
            return Min(diff, a)
    if prove_equal(a, b):
        return IntImm(a.dtype, 0)
    return simplify_dim(dim_sub(a, b))


def non_negative(e: PrimExpr) -> bool:
    """Known to be >= 0, taking symbolic sizes as non-negative."""
    if isinstance(e, IntImm):
        return e.value >= 0
    if isinstance(e, Var):
        return True
    if isinstance(e, Min):
        return non_negative(e.a) and non_negative(e.b)
    if isinstance(e, Max):
        return non_negative(e.a) or non_negative(e.b)
    return False


def simplify_dim(e: Any) -> Any:
    """Fold an integer dimension expression as TVM folds struct-info sizes (the analyzer's
    ``DIMENSION`` mode): ``m + 2 - 2 - 1 + 1`` becomes ``m``, ``n * 2 * 3 // 2`` becomes ``n * 3``,
    ``(m - 2) // 2 + 1`` becomes ``m // 2``."""
    if not isinstance(e, PrimExpr) or not e.dtype.is_integer or isinstance(e, (IntImm, Var)):
        return e
    return Analyzer(DIMENSION).simplify(e)


def _difference(a: PrimExpr, b: PrimExpr) -> int | None:
    """``a - b`` when it is a constant."""
    a, b = _pair(a, b)
    if not a.dtype.is_integer:
        return None
    d = Analyzer(DIMENSION).canonical(Sub(a, b))
    return d.base if not d.terms else None


def prove_equal(a: Any, b: Any) -> bool:
    a, b = _pair(a, b)
    return a is b or structural_equal(a, b) or _difference(a, b) == 0


def prove_not_equal(a: Any, b: Any) -> bool:
    diff = _difference(*_pair(a, b))
    return diff is not None and diff != 0


# ---------------------------------------------------------------- broadcasting
def broadcast_shapes(info: CallInfo, a: tuple, b: tuple) -> tuple | None:
    """numpy broadcasting of two shapes as TVM does it: a 1 takes the other side, equal sizes
    stay, two different constants are an error, anything else (``n`` against ``2``, ``n`` against
    ``m``) gives None: the shape is unknown."""
    out = []
    for i in range(1, min(len(a), len(b)) + 1):
        x, y = a[-i], b[-i]
        if int_of(x) == 1:
            out.append(y)
        elif int_of(y) == 1:
            out.append(x)
        elif prove_equal(x, y):
            out.append(x)
        elif int_of(x) is not None and int_of(y) is not None:
            raise info.fail(f"shapes {fmt_dims(a)} and {fmt_dims(b)} do not broadcast "
                            f"(dimension {len(a) - i} is {x.value}, against {y.value})")
        else:
            return None
    longer = a if len(a) > len(b) else b
    return tuple(longer[:len(longer) - len(out)]) + tuple(reversed(out))


def binary_dtype(info: CallInfo, a: StructInfo, b: StructInfo) -> DataType:
    """The dtype of an arithmetic binary op: unknown if either is, equal otherwise (a bool operand
    is let through, giving the left dtype, as in TVM)."""
    da, db = a.dtype, b.dtype
    if da == VOID or db == VOID:
        return VOID
    if da != db and not da.is_bool and not db.is_bool:
        raise info.fail(f"data types {da} and {db} do not match ({describe(a)} and {describe(b)})")
    return da


def _operand(info: CallInfo, i: int) -> StructInfo:
    s = info.sinfo[i]
    if not isinstance(s, (TensorStructInfo, PrimStructInfo)):
        raise info.fail(f"argument {arg_name(info, i)!r} must be a tensor or a scalar, "
                        f"got {describe(s)}")
    return s


def infer_broadcast(info: CallInfo, out_dtype: DataType | None = None) -> StructInfo:
    """Elementwise binary ops on tensors or scalars (R.Prim). A scalar counts as shape ``(1,)``."""
    a, b = _operand(info, 0), _operand(info, 1)
    dtype = out_dtype if out_dtype is not None else binary_dtype(info, a, b)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo):
        return PrimStructInfo(dtype)
    ndim_a = 1 if isinstance(a, PrimStructInfo) else a.ndim
    ndim_b = 1 if isinstance(b, PrimStructInfo) else b.ndim
    ndim = -1 if ndim_a < 0 or ndim_b < 0 else max(ndim_a, ndim_b)
    dims_a = (IntImm(INT64, 1),) if isinstance(a, PrimStructInfo) else known_dims(a)
    dims_b = (IntImm(INT64, 1),) if isinstance(b, PrimStructInfo) else known_dims(b)
    vdevice = getattr(a, "vdevice", None) or getattr(b, "vdevice", None)
    if dims_a is not None and dims_b is not None:
        out = broadcast_shapes(info, dims_a, dims_b)
        if out is not None:
            return make_tensor(out, dtype, vdevice=vdevice)
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo) and a.shape is not None \
            and a.shape is b.shape:
        return TensorStructInfo(a.shape, dtype, a.ndim, vdevice)
    return TensorStructInfo(None, dtype, ndim, vdevice)


def known_dims(s: TensorStructInfo) -> tuple | None:
    """The dimensions of a tensor from its ShapeExpr or from its shape variable's struct info."""
    dims = s.dims
    if dims is None and s.shape is not None:
        values = getattr(getattr(s.shape, "struct_info", None), "values", None)
        dims = tuple(values) if values is not None else None
    return dims


def require_float(info: CallInfo, s: TensorStructInfo, what: str = "the input tensor") -> None:
    if s.dtype != VOID and not s.dtype.is_float:
        raise info.fail(f"{what} must have a float dtype, got {s.dtype}")


def infer_unary(info: CallInfo) -> StructInfo:
    return tensor_arg(info, 0)


def infer_unary_float(info: CallInfo) -> StructInfo:
    x = tensor_arg(info, 0)
    require_float(info, x)
    return x


# ---------------------------------------------------------------- axes
def normalize_axis(info: CallInfo, axis: int, ndim: int) -> int:
    return normalize_axes(info, (axis,), ndim)[0]


def normalize_axes(info: CallInfo, axes: Any, ndim: int) -> list[int]:
    """Axes made non-negative; out of range or repeated axes are errors."""
    out: list[int] = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise info.fail(f"axis {axis} is out of range for a tensor of {ndim} dimension"
                            f"{'s' if ndim != 1 else ''} (expected {-ndim} <= axis < {ndim})")
        a = axis % ndim
        if a in out:
            raise info.fail(f"axis {a} is given more than once in {list(axes)}")
        out.append(a)
    return out


def reduce_dims(info: CallInfo, x: TensorStructInfo, axes: Any, keepdims: bool,
                dtype: DataType, one: PrimExpr | None = None) -> TensorStructInfo:
    """The result of reducing ``x`` over ``axes`` (None: all of them)."""
    one = one if one is not None else IntImm(INT64, 1)
    norm = normalize_axes(info, axes, x.ndim) if x.ndim >= 0 and axes is not None else []
    if keepdims:
        ndim = x.ndim
    elif axes is None:
        ndim = 0
    elif x.ndim < 0:
        ndim = -1
    else:
        ndim = x.ndim - len(norm)
    dims = x.dims
    if dims is None:
        if axes is None and keepdims and ndim >= 0:
            return make_tensor([one] * ndim, dtype, vdevice=x.vdevice)
        return make_tensor((), dtype, vdevice=x.vdevice) if ndim == 0 else \
            TensorStructInfo(None, dtype, ndim, x.vdevice)
    out = []
    for i, d in enumerate(dims):
        if axes is not None and i not in norm:
            out.append(d)
        elif keepdims:
            out.append(one)
    return make_tensor(out, dtype, vdevice=x.vdevice)


__all__ = ["INT64", "BOOL", "tensor_arg", "tensor_args", "tuple_of_tensors", "shape_arg", "op_error",
           "as_shape_expr", "prepare_shape_arg", "as_tuple_expr", "describe", "fmt_dim", "fmt_dims",
           "make_tensor", "tensor_of_shape", "unknown_like", "to_dim", "int_of", "dim_add", "dim_sub",
           "dim_mul", "dim_floordiv", "dim_ceildiv", "product", "simplify_dim", "sub_clamped", "non_negative",
           "prove_equal", "prove_not_equal", "broadcast_shapes", "binary_dtype", "infer_broadcast",
           "known_dims", "require_float", "infer_unary", "infer_unary_float", "normalize_axis",
           "normalize_axes", "reduce_dims"]
