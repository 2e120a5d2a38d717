"""PrimFunc: a TensorIR function."""
from __future__ import annotations

from dataclasses import dataclass, field

from .node import EMPTY, FrozenDict, Node, binds, hint
from .stmt import Stmt


@dataclass(frozen=True, slots=True, eq=False)
class PrimFunc(Node):
    """A TensorIR function: parameters (vars), the buffers bound to handle parameters, a body.

    ``s_tir`` records that the function is written in schedulable TensorIR (blocks); TVM 0.27
    prints it as ``@T.prim_func(s_tir=True)``. It only guides printing. ``source_dialect`` is
    the dialect of the text the function was parsed from (see ``IRModule``).
    """

    params: tuple = binds()
    buffer_map: FrozenDict = binds(default=EMPTY)  # param Var -> Buffer
    body: Stmt = field(default=None)  # type: ignore[assignment]
    ret_type: Node | None = None
    attrs: FrozenDict = EMPTY
    s_tir: bool = hint(default=False)
    source_dialect: str | None = hint(default=None, kw_only=True, repr=False)  # (where it came from, as span)

    @property
    def is_private(self) -> bool:
        return "global_symbol" not in self.attrs

    def with_attr(self, key: str, value) -> "PrimFunc":
        attrs = dict(self.attrs)
        attrs[key] = value
        return self.with_changes(attrs=FrozenDict(attrs))  # type: ignore[return-value]
