"""Random variables: the handles a schedule hands out for blocks, loops and sampled integers.

A handle is only an identity; the schedule that made it maps it to the current block (by name),
loop (by loop variable) or integer, so handles survive the rewrites of later primitives.
"""
from __future__ import annotations


class _RandomVariable:
    __slots__ = ()
    prefix = "?"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({id(self):#x})"


class BlockRV(_RandomVariable):
    """A block of the schedule's module."""

    __slots__ = ()
    prefix = "b"


class LoopRV(_RandomVariable):
    """A loop of the schedule's module."""

    __slots__ = ()
    prefix = "l"


class ExprRV(_RandomVariable):
    """An integer that a sampling instruction chose (``sch.get(rv)`` reads it)."""

    __slots__ = ()
    prefix = "v"


RV_TYPES = (BlockRV, LoopRV, ExprRV)
