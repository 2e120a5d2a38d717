"""Relax: the graph-level IR. Expressions, bindings, blocks and functions.

Every Relax expression carries ``struct_info`` (filled in by the builder or the parser). Relax
variables, like TensorIR ones, have identity; ``DataflowVar`` is a variable local to a dataflow
block.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dtype import DataType
from .expr import PrimExpr
from .module import GlobalVar
from .node import EMPTY, FrozenDict, Node, binds, hint
from .struct_info import ObjectStructInfo, StructInfo


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


@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(RelaxExpr):
    tuple_value: RelaxExpr = field()
    index: int = 0
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class ShapeExpr(RelaxExpr):
    """``R.shape([m, k])``: a shape value made of TensorIR expressions."""

    values: tuple = ()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class PrimValue(RelaxExpr):
    """A TensorIR scalar used as a Relax value: ``R.prim_value(1)``."""

    value: PrimExpr = field()
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


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


@dataclass(frozen=True, slots=True, eq=False)
class DataflowBlock(BindingBlock):
    """``with R.dataflow():``: side-effect free bindings; only ``R.output`` vars leave it."""


@dataclass(frozen=True, slots=True, eq=False)
class SeqExpr(RelaxExpr):
    blocks: tuple = ()
    body: RelaxExpr = field(default=None)  # type: ignore[assignment]
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)


@dataclass(frozen=True, slots=True, eq=False)
class Function(RelaxExpr):
    """A Relax function. Symbolic sizes in parameter struct info are bound by the parameters."""

    params: tuple = binds()
    body: RelaxExpr = field(default=None)  # type: ignore[assignment]
    ret_struct_info: StructInfo = field(default_factory=ObjectStructInfo)
    is_pure: bool = True
    attrs: FrozenDict = EMPTY
    struct_info: StructInfo = field(default_factory=ObjectStructInfo)

    @property
    def is_private(self) -> bool:
        return "global_symbol" not in self.attrs


__all__ = ["RelaxExpr", "Var", "DataflowVar", "Constant", "Tuple", "TupleGetItem", "ShapeExpr",
           "PrimValue", "StringImm", "DataTypeImm", "ExternFunc", "Call", "If", "VarBinding",
           "MatchCast", "BindingBlock", "DataflowBlock", "SeqExpr", "Function", "GlobalVar"]
