"""LowerInitBlock: a reduction block's ``T.init()`` becomes an ``if`` at the top of its body.

The init runs when every reduction iterator sits at the start of its domain, so
``with T.init(): C[vi] = 0`` turns into ``if vk == 0: C[vi] = 0`` before the update.
"""
from __future__ import annotations

import dataclasses
from functools import reduce

from ...ir.expr import COMM_REDUCE, EQ, And
from ...ir.function import PrimFunc
from ...ir.stmt import Block, IfThenElse, seq
from ...ir.visitor import Mutator
from .tir_pass import define_tir_pass


class _InitLowerer(Mutator):
    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if block.init is None:
            return block
        at_start = [EQ(iv.var, iv.dom.min) for iv in block.iter_vars if iv.iter_type == COMM_REDUCE]
        if not at_start:  # no reduction iterator: the init runs every time
            return dataclasses.replace(block, init=None, body=seq([block.init, block.body]))
        guard = IfThenElse(reduce(And, at_start), block.init)
        return dataclasses.replace(block, init=None, body=seq([guard, block.body]))


def lower_init_block(func: PrimFunc) -> PrimFunc:
    """``func`` with every block's init folded into its body."""
    return func.with_changes(body=_InitLowerer().visit(func.body))


LowerInitBlock = define_tir_pass("LowerInitBlock", lower_init_block)

__all__ = ["LowerInitBlock", "lower_init_block"]
