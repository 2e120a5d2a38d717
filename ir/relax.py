"""Relax: the graph-level IR. Expressions, bindings, blocks and functions.

Every Relax expression carries ``struct_info`` (filled in by the builder or the parser). Relax
variables, like TensorIR ones, have identity; ``DataflowVar`` is a variable local to a dataflow
block.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtype import DataType
from .expr import IntImm, PrimExpr
from .module import GlobalVar
from .node import EMPTY, FrozenDict, Node, binds, hint
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          StructInfo, TensorStructInfo, TupleStructInfo, as_dims, defined_sizes, erase_undefined,
                          is_base_of)

# The __post_init__ hooks below accept the spellings of TVM's Python API (lists for tuples,
# ints for sizes, a bare body for a function) and fill in struct info that follows from the
# fields, as TVM's constructors do; nodes built field by field pass through unchanged.


def _set(node: Any, name: str, value: Any) -> None:
    object.__setattr__(node, name, value)


def _unknown(sinfo: Any) -> bool:
    return type(sinfo) is ObjectStructInfo


@dataclass(frozen=True, slots=True, eq=False)
class RelaxExpr(Node):
    """A Relax expression."""


@dataclass(frozen=True, slots=True, eq=False)
class Var(RelaxExpr):
    """A Relax variable; identity decides which variable it is."""

    name: str = hint()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __repr__(self) -> str:
        return f"relax.Var({self.name!r})"


@dataclass(frozen=True, slots=True, eq=False)
class DataflowVar(Var):
    """A variable that lives only inside its dataflow block."""


@dataclass(frozen=True, slots=True, eq=False)
class Constant(RelaxExpr):
    """A tensor constant; ``data`` is a numpy array."""

    data: Any = hint()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)
    digest: str = ""  # content hash: two constants are structurally equal when their data are


@dataclass(frozen=True, slots=True, eq=False)
class Tuple(RelaxExpr):
    fields: tuple = ()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            _set(self, "fields", tuple(self.fields))
        if _unknown(self.struct_info) and all(isinstance(f, RelaxExpr) for f in self.fields):
            _set(self, "struct_info", TupleStructInfo(tuple(f.struct_info for f in self.fields)))


@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(RelaxExpr):
    tuple_value: RelaxExpr = field()
    index: int = 0
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        sinfo = getattr(self.tuple_value, "struct_info", None)
        if _unknown(self.struct_info) and isinstance(sinfo, TupleStructInfo) \
                and 0 <= self.index < len(sinfo.fields):
            _set(self, "struct_info", sinfo.fields[self.index])


@dataclass(frozen=True, slots=True, eq=False)
class ShapeExpr(RelaxExpr):
    """``R.shape([m, k])``: a shape value made of TensorIR expressions."""

    values: tuple = ()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or any(isinstance(v, int) for v in self.values):
            _set(self, "values", as_dims(self.values))  # ShapeExpr([n, 4])
        if _unknown(self.struct_info):
            _set(self, "struct_info", ShapeStructInfo(self.values))


@dataclass(frozen=True, slots=True, eq=False)
class PrimValue(RelaxExpr):
    """A TensorIR scalar used as a Relax value: ``R.prim_value(1)``."""

    value: PrimExpr = field()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        if isinstance(self.value, int) and not isinstance(self.value, bool):
            _set(self, "value", as_dims((self.value,))[0])  # PrimValue(1) is an int64, as in TVM
        if _unknown(self.struct_info) and isinstance(self.value, PrimExpr):
            _set(self, "struct_info", PrimStructInfo(self.value.dtype, self.value))


@dataclass(frozen=True, slots=True, eq=False)
class StringImm(RelaxExpr):
    value: str = ""
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class DataTypeImm(RelaxExpr):
    value: DataType = DataType("void")
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class ExternFunc(RelaxExpr):
    """A function outside the module, by its global symbol (a packed function)."""

    global_symbol: str = ""
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class Call(RelaxExpr):
    """``op(args, **attrs)``. ``op`` is an Op (``relax.add``), a GlobalVar, a Var or an
    ExternFunc; ``sinfo_args`` carry struct info some ops need (``out_sinfo`` of call_tir)."""

    op: Node = field()
    args: tuple = ()
    attrs: FrozenDict = EMPTY
    sinfo_args: tuple = ()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            _set(self, "args", tuple(self.args))
        if not isinstance(self.sinfo_args, tuple):
            _set(self, "sinfo_args", tuple(self.sinfo_args))
        if not isinstance(self.attrs, FrozenDict):
            _set(self, "attrs", FrozenDict(self.attrs or {}))


@dataclass(frozen=True, slots=True, eq=False)
class If(RelaxExpr):
    cond: RelaxExpr = field()
    true_branch: RelaxExpr = field()
    false_branch: RelaxExpr = field()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class VarBinding(Node):
    """``var = value``."""

    value: RelaxExpr = field()
    var: Var = binds()


@dataclass(frozen=True, slots=True, eq=False)
class MatchCast(Node):
    """``var = R.match_cast(value, struct_info)``: checks the value and binds new symbolic
    variables that appear in ``struct_info`` for the first time."""

    value: RelaxExpr = field()
    struct_info: StructInfo = binds()
    var: Var = binds()


@dataclass(frozen=True, slots=True, eq=False)
class BindingBlock(Node):
    bindings: tuple = ()

    def __post_init__(self) -> None:
        if not isinstance(self.bindings, tuple):
            _set(self, "bindings", tuple(self.bindings))


@dataclass(frozen=True, slots=True, eq=False)
class DataflowBlock(BindingBlock):
    """``with R.dataflow():``: side-effect free bindings; only ``R.output`` vars leave it."""


@dataclass(frozen=True, slots=True, eq=False)
class SeqExpr(RelaxExpr):
    blocks: tuple = ()
    body: RelaxExpr = field(default=None)  # type: ignore[assignment]
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    def __post_init__(self) -> None:
        if not isinstance(self.blocks, tuple):
            _set(self, "blocks", tuple(self.blocks))
        if _unknown(self.struct_info) and isinstance(self.body, RelaxExpr):
            _set(self, "struct_info", self.body.struct_info)


@dataclass(frozen=True, slots=True, eq=False)
class Function(RelaxExpr):
    """A Relax function. Symbolic sizes in parameter struct info are bound by the parameters.

    As in TVM, ``Function(params, body)`` wraps a bare body in a SeqExpr without blocks (it
    prints as ``return R.add(...)``), takes ``ret_struct_info`` from the body when not given
    (forgetting symbolic sizes the parameters do not define), and computes its own
    ``FuncStructInfo``. ``source_dialect`` is the dialect of the text the function was parsed
    from (see ``IRModule``).
    """

    params: tuple = binds()
    body: RelaxExpr = field(default=None)  # type: ignore[assignment]
    ret_struct_info: StructInfo = None  # type: ignore[assignment]  # None: the body's
    is_pure: bool = True
    attrs: FrozenDict = EMPTY
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)
    source_dialect: str | None = hint(default=None, kw_only=True, repr=False)  # (where it came from, as span)

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple):
            _set(self, "params", tuple(self.params))
        if isinstance(self.body, RelaxExpr) and not isinstance(self.body, SeqExpr):
            _set(self, "body", SeqExpr((), self.body, self.body.struct_info))
        # the return struct info is the body's (without sizes the parameters do not define) when
        # not given, and also when the one given is coarser (TVM lets the body refine it)
        body = getattr(self.body, "struct_info", None)
        if self.ret_struct_info is None or (body is not None and not isinstance(body, ObjectStructInfo)
                                            and self.ret_struct_info is not body):
            body = erase_undefined(body or ObjectStructInfo(),
                                   defined_sizes([p.struct_info for p in self.params]))
            if self.ret_struct_info is None or is_base_of(self.ret_struct_info, body):
                _set(self, "ret_struct_info", body)
        if not isinstance(self.attrs, FrozenDict):
            _set(self, "attrs", FrozenDict(self.attrs or {}))
        if _unknown(self.struct_info):
            _set(self, "struct_info", FuncStructInfo(tuple(p.struct_info for p in self.params),
                                                     self.ret_struct_info, self.is_pure))

    def with_attr(self, key: str, value: Any) -> "Function":
        attrs = dict(self.attrs)
        attrs[key] = value
        return self.with_changes(attrs=FrozenDict(attrs))  # type: ignore[return-value]

    def without_attr(self, key: str) -> "Function":
        attrs = FrozenDict({k: v for k, v in self.attrs.items() if k != key})
        return self.with_changes(attrs=attrs)  # type: ignore[return-value]

    @property
    def is_private(self) -> bool:
        return "global_symbol" not in self.attrs


# --------------------------------------------------------------------------- shared by the builders


def make_constant(data: np.ndarray, span: Any = None) -> Constant:
    """A Constant of a numpy array, with its struct info and a digest of its bytes."""
    data = np.asarray(data, order="C")  # (ascontiguousarray would make a scalar 1-d)
    dims = tuple(IntImm(DataType("int64"), d) for d in data.shape)
    strings = data.dtype == object  # (a string tensor: its text, not its pointers, is its content)
    dtype = DataType("string" if strings else str(data.dtype))
    sinfo = TensorStructInfo(ShapeExpr(dims, ShapeStructInfo(dims)), dtype, len(dims))
    content = repr(data.tolist()).encode() if strings else data.tobytes()
    digest = hashlib.sha1(str(dtype).encode() + repr(data.shape).encode() + content).hexdigest()
    return Constant(data, sinfo, digest, span=span)


def merge_blocks(blocks: list) -> list:
    """Empty blocks dropped; adjacent blocks of the same kind merged (TVM's NormalizeBlocks)."""
    out: list = []
    for b in blocks:
        if not b.bindings:
            continue
        if out and type(out[-1]) is type(b):
            out[-1] = type(b)(out[-1].bindings + b.bindings)
        else:
            out.append(b)
    return out


__all__ = ["RelaxExpr", "Var", "DataflowVar", "Constant", "Tuple", "TupleGetItem", "ShapeExpr",
           "PrimValue", "StringImm", "DataTypeImm", "ExternFunc", "Call", "If", "VarBinding",
           "MatchCast", "BindingBlock", "DataflowBlock", "SeqExpr", "Function", "GlobalVar",
           "make_constant", "merge_blocks"]
