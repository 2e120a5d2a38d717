"""ConvertBlocksToOpaque: blocks lose their iterators; their bodies use the bound values.

``vi = T.axis.spatial(128, i_0 * 32 + i_1)`` disappears and every ``vi`` in the block (body,
init, reads/writes, match_buffer sources) becomes ``i_0 * 32 + i_1``, unsimplified, as TVM prints.
"""
from __future__ import annotations

import dataclasses

from ...ir import arith
from ...ir.expr import Var
from ...ir.function import PrimFunc
from ...ir.stmt import BlockRealize
from ...ir.visitor import Mutator
from .tir_pass import define_tir_pass


class _Opaquer(Mutator):
    def __init__(self) -> None:
        self.bound: dict = {}  # block iterator -> the value it is bound to

    def visit_Var(self, v: Var) -> object:
        return self.bound.get(v, v)

    def visit_BlockRealize(self, realize: BlockRealize) -> BlockRealize:
        values = tuple(self.visit(v) for v in realize.iter_values)
        for iv, value in zip(realize.block.iter_vars, values):
            # (TVMScript may bind an iterator to a value of another integer type)
            self.bound[iv.var] = value if value.dtype == iv.var.dtype else arith.cast(iv.var.dtype, value)
        block = dataclasses.replace(realize.block, iter_vars=())
        block = self.generic_visit(block)
        return BlockRealize((), self.visit(realize.predicate), block)


def convert_blocks_to_opaque(func: PrimFunc) -> PrimFunc:
    """``func`` with every block's iterators replaced by their bindings."""
    return func.with_changes(body=_Opaquer().visit(func.body))


ConvertBlocksToOpaque = define_tir_pass("ConvertBlocksToOpaque", convert_blocks_to_opaque)

__all__ = ["ConvertBlocksToOpaque", "convert_blocks_to_opaque"]
