"""Relax struct info: what is statically known about a value (its kind, shape, dtype).

``R.Tensor((n, 784), dtype="float32")``, ``R.Shape([m, k])``, ``R.Tuple(...)``, ``R.Prim("int64")``,
``R.Object``, and function signatures. Symbolic dimensions are TensorIR variables (``n``), the
same objects that TensorIR functions use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dtype import DataType
from .expr import IntImm, PrimExpr, Var
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

    def __post_init__(self) -> None:
        if isinstance(self.dtype, str):  # PrimStructInfo("int64")
            object.__setattr__(self, "dtype", DataType(self.dtype))


@dataclass(frozen=True, slots=True, eq=False)
class ShapeStructInfo(StructInfo):
    """``R.Shape([m, k])``: a shape; ``values`` is None when only ``ndim`` is known (-1: unknown)."""

    values: tuple | None = None
    ndim: int = -1

    def __post_init__(self) -> None:
        if isinstance(self.values, list) or (self.values is not None and _needs_dims(self.values)):
            object.__setattr__(self, "values", as_dims(self.values))  # ShapeStructInfo([m, 4])
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
        # The convenience spellings of TVM's Python API: TensorStructInfo([1, 784], "float32")
        if isinstance(self.shape, (list, tuple)):
            from .relax import ShapeExpr  # relax imports this module

            object.__setattr__(self, "shape", ShapeExpr(as_dims(self.shape)))
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", VOID if self.dtype in (None, "") else DataType(self.dtype))
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

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(frozen=True, slots=True, eq=False)
class FuncStructInfo(StructInfo):
    """``R.Callable((params...), ret, purity)``; ``params`` None for an opaque signature."""

    params: tuple | None
    ret: StructInfo
    purity: bool = True

    def __post_init__(self) -> None:
        if self.params is not None and not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))


def as_dims(values: Any) -> tuple:
    """Dimensions as PrimExprs: Python ints become int64 constants (Relax sizes are int64)."""
    return tuple(IntImm(_INT64, int(v)) if isinstance(v, int) and not isinstance(v, bool) else v
                 for v in values)


def _needs_dims(values: Any) -> bool:
    return not isinstance(values, tuple) or any(isinstance(v, int) for v in values)


_INT64 = DataType("int64")


def shape_values(shape: Any) -> tuple | None:
    """The PrimExpr dimensions of a tensor's shape field, or None when not statically listed."""
    values = getattr(shape, "values", None)
    return tuple(values) if values is not None else None


def erase_undefined(sinfo: StructInfo, defined: set) -> StructInfo:
    """``sinfo`` without the symbolic sizes whose ids are not in ``defined`` (TVM's
    EraseToWellDefined): ``R.Tensor((m, k))`` becomes ``R.Tensor(ndim=2)`` when m is unknown."""
    from .visitor import collect

    def ok(e: Any) -> bool:
        return all(id(v) in defined for v in collect(e, Var))

    if isinstance(sinfo, TensorStructInfo):
        dims = sinfo.dims
        if dims is not None and not all(ok(d) for d in dims):
            return TensorStructInfo(None, sinfo.dtype, sinfo.ndim, sinfo.vdevice)
        if dims is None and sinfo.shape is not None and id(sinfo.shape) not in defined:
            # shaped by a Relax shape variable that is not visible here
            return TensorStructInfo(None, sinfo.dtype, sinfo.ndim, sinfo.vdevice)
    elif isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None and not all(ok(d) for d in sinfo.values):
            return ShapeStructInfo(None, sinfo.ndim)
    elif isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None and not ok(sinfo.value):
            return PrimStructInfo(sinfo.dtype)
    elif isinstance(sinfo, TupleStructInfo):
        fields = tuple(erase_undefined(f, defined) for f in sinfo.fields)
        if any(a is not b for a, b in zip(fields, sinfo.fields)):
            return TupleStructInfo(fields)
    return sinfo


def defined_sizes(sinfos: Any) -> set:
    """The ids of the symbolic sizes (TensorIR variables) that appear in ``sinfos``.
    (Relax shape variables are defined by being parameters: callers add their ids.)"""
    from .visitor import collect

    return {id(v) for s in sinfos for v in collect(s, Var)}


def definable_sizes(sinfo: Any) -> list:
    """The TensorIR variables a value of struct info ``sinfo`` (or of each in a list) defines:
    those standing alone as a dimension or a scalar's value (TVM's ``DefinableTIRVarsInType``),
    in order of first appearance."""
    found: list = []

    def visit(s: Any) -> None:
        if isinstance(s, TensorStructInfo):
            found.extend(d for d in s.dims or () if isinstance(d, Var))
        elif isinstance(s, ShapeStructInfo):
            found.extend(d for d in s.values or () if isinstance(d, Var))
        elif isinstance(s, PrimStructInfo) and isinstance(s.value, Var):
            found.append(s.value)
        elif isinstance(s, TupleStructInfo):
            for f in s.fields:
                visit(f)
    for s in sinfo if isinstance(sinfo, (list, tuple)) else (sinfo,):
        visit(s)
    seen: set[int] = set()
    return [v for v in found if not (id(v) in seen or seen.add(id(v)))]


def own_sizes(params: Any) -> list:
    """The size variables that scalar parameters are (``n: R.Prim(value="n")``, TVM 0.27's
    ``n: T.int64``): a parameter's value named as the parameter."""
    return [p.struct_info.value for p in params if isinstance(p.struct_info, PrimStructInfo)
            and isinstance(p.struct_info.value, Var) and p.struct_info.value.name == p.name]


def static_dims(sinfo: StructInfo) -> tuple[int, ...] | None:
    """Concrete integer dimensions when all are constants."""
    dims = sinfo.dims if isinstance(sinfo, TensorStructInfo) else None
    if dims is None or not all(isinstance(d, IntImm) for d in dims):
        return None
    return tuple(d.value for d in dims)


def call_result(func: FuncStructInfo, args: tuple) -> StructInfo:
    """The struct info of calling ``func`` on arguments of struct info ``args``: the callee's
    symbolic sizes are replaced by the caller's (matched through the parameters), and sizes
    that cannot be matched are forgotten, as TVM derives a call's type."""
    from .analysis import substitute

    mapping: dict = {}

    def match(param: StructInfo, arg: StructInfo) -> None:
        if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
            pd, ad = param.dims, arg.dims
            if pd is not None and ad is not None and len(pd) == len(ad):
                for p, a in zip(pd, ad):
                    if isinstance(p, Var) and p not in mapping:
                        mapping[p] = a
        elif isinstance(param, ShapeStructInfo) and isinstance(arg, ShapeStructInfo):
            if param.values is not None and arg.values is not None:
                for p, a in zip(param.values, arg.values):
                    if isinstance(p, Var) and p not in mapping:
                        mapping[p] = a
        elif isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
            for p, a in zip(param.fields, arg.fields):
                match(p, a)

    for p, a in zip(func.params or (), args):
        match(p, a)
    ret = simplified_sizes(substitute(func.ret, mapping)) if mapping else func.ret
    caller_sizes = defined_sizes(args)
    return erase_undefined(ret, caller_sizes)


def simplified_sizes(sinfo: StructInfo) -> StructInfo:
    """``sinfo`` with its compound sizes simplified (``(n + 2 - 1) // 2`` is ``(n + 1) // 2``),
    as TVM simplifies the sizes it substitutes into a call's result."""
    from .arith import simplify_index

    def simplify(e: Any) -> Any:
        return e if isinstance(e, (IntImm, Var)) or not isinstance(e, PrimExpr) else simplify_index(e)

    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None:
        dims = tuple(simplify(d) for d in sinfo.dims)
        if any(a is not b for a, b in zip(dims, sinfo.dims)):
            return TensorStructInfo(dims, sinfo.dtype, sinfo.ndim, sinfo.vdevice)
    elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        values = tuple(simplify(d) for d in sinfo.values)
        if any(a is not b for a, b in zip(values, sinfo.values)):
            return ShapeStructInfo(values, sinfo.ndim)
    elif isinstance(sinfo, TupleStructInfo):
        fields = tuple(simplified_sizes(f) for f in sinfo.fields)
        if any(a is not b for a, b in zip(fields, sinfo.fields)):
            return TupleStructInfo(fields)
    return sinfo


def join_struct_info(a: StructInfo, b: StructInfo) -> StructInfo:
    """What both branches of an if are known to give (TVM's least common ancestor): equal struct
    info stays; tensors keep what they share (shape, dtype, rank), scalars their dtype, shapes their
    rank, tuples of one length join field by field; anything else is an object."""
    from .structural import structural_equal  # (structural imports this module)

    if structural_equal(a, b, map_free_vars=False):
        return a
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else VOID
        if a.shape is not None and b.shape is not None and structural_equal(a.shape, b.shape, map_free_vars=False):
            return TensorStructInfo(a.shape, dtype)
        return TensorStructInfo(None, dtype, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo) and a.dtype == b.dtype:
        return PrimStructInfo(a.dtype)
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        return ShapeStructInfo(ndim=a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo) and len(a.fields) == len(b.fields):
        return TupleStructInfo(tuple(join_struct_info(x, y) for x, y in zip(a.fields, b.fields)))
    return ObjectStructInfo()


def is_base_of(base: StructInfo, derived: StructInfo) -> bool:
    """Whether every value ``derived`` describes is also described by ``base`` (TVM's IsBaseOf):
    ``R.Tensor(ndim=2)`` is a base of ``R.Tensor((n, 4))``; sizes are compared once simplified,
    so ``(n + 2 - 1) // 2`` and ``(n + 1) // 2`` are the same size."""
    if base is derived or isinstance(base, ObjectStructInfo):
        return True
    if isinstance(base, TensorStructInfo) and isinstance(derived, TensorStructInfo):
        if not base.dtype.is_void and base.dtype != derived.dtype:
            return False
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        if base.vdevice is not None and not _same_vdevice(base.vdevice, derived.vdevice):
            return False  # (a tensor placed on a vdevice is more than one placed anywhere)
        if base.dims is None and base.shape is not None:  # shaped by a shape variable: that one
            return derived.shape is base.shape
        return base.dims is None or (derived.dims is not None and _same_sizes(base.dims, derived.dims))
    if isinstance(base, ShapeStructInfo) and isinstance(derived, ShapeStructInfo):
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        return base.values is None or (derived.values is not None and _same_sizes(base.values, derived.values))
    if isinstance(base, PrimStructInfo) and isinstance(derived, PrimStructInfo):
        return base.dtype == derived.dtype and (
            base.value is None or (derived.value is not None and _same_sizes((base.value,), (derived.value,))))
    if isinstance(base, TupleStructInfo) and isinstance(derived, TupleStructInfo):
        return len(base.fields) == len(derived.fields) and all(
            is_base_of(b, d) for b, d in zip(base.fields, derived.fields))
    return False


def _same_vdevice(a: Any, b: Any) -> bool:
    return b is not None and (a.target, a.vdevice_id, a.memory_scope) == (b.target, b.vdevice_id, b.memory_scope)


def _same_sizes(a: tuple, b: tuple) -> bool:
    from .arith import expr_key, simplify_index

    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if x.dtype != y.dtype or expr_key(simplify_index(x)) != expr_key(simplify_index(y)):
            return False
    return True


def conflict(annotated: StructInfo, inferred: StructInfo) -> str | None:
    """Why no value can fit both struct infos (TVM's BaseCheck says "fail at level 0"), in words,
    or None when some value may fit both: an unknown dtype, rank or shape, or symbolic sizes
    that may be equal, are no conflict; a different kind, a known dtype, rank or constant size
    that differs is. ``conflict(R.Tensor((1, 10)), R.Tensor((1, 20)))`` is "extent 10 vs 20 in
    dimension 1" (the annotated one first)."""
    if isinstance(annotated, ObjectStructInfo) or isinstance(inferred, ObjectStructInfo):
        return None
    if type(annotated) is not type(inferred):
        return f"{_kind(annotated)} vs {_kind(inferred)}"
    if isinstance(annotated, TensorStructInfo):
        if not annotated.dtype.is_void and not inferred.dtype.is_void and annotated.dtype != inferred.dtype:
            return f"dtype {annotated.dtype} vs {inferred.dtype}"
        return _rank_or_size_conflict(annotated.ndim, inferred.ndim, annotated.dims, inferred.dims)
    if isinstance(annotated, ShapeStructInfo):
        return _rank_or_size_conflict(annotated.ndim, inferred.ndim, annotated.values, inferred.values)
    if isinstance(annotated, PrimStructInfo):
        if annotated.dtype != inferred.dtype:
            return f"dtype {annotated.dtype} vs {inferred.dtype}"
        a, b = annotated.value, inferred.value
        if isinstance(a, IntImm) and isinstance(b, IntImm) and a.value != b.value:
            return f"value {a.value} vs {b.value}"
        return None
    if isinstance(annotated, TupleStructInfo):
        if len(annotated.fields) != len(inferred.fields):
            return f"{len(annotated.fields)} vs {len(inferred.fields)} fields"
        for k, (a, b) in enumerate(zip(annotated.fields, inferred.fields)):
            reason = conflict(a, b)
            if reason is not None:
                return f"field {k}: {reason}"
    return None


def _kind(sinfo: StructInfo) -> str:
    return {TensorStructInfo: "a tensor", ShapeStructInfo: "a shape", PrimStructInfo: "a scalar",
            TupleStructInfo: "a tuple", FuncStructInfo: "a function"}.get(type(sinfo), type(sinfo).__name__)


def _rank_or_size_conflict(ndim_a: int, ndim_b: int, dims_a: tuple | None, dims_b: tuple | None) -> str | None:
    if ndim_a != -1 and ndim_b != -1 and ndim_a != ndim_b:
        return f"{ndim_a} vs {ndim_b} dimensions"
    for axis, (a, b) in enumerate(zip(dims_a or (), dims_b or ())):
        if isinstance(a, IntImm) and isinstance(b, IntImm) and a.value != b.value:
            return f"extent {a.value} vs {b.value} in dimension {axis}"
    return None
