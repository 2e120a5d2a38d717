"""What LowerAutoCopy's rewrite rules share (TVM 0.27's memhammer_rewrite_rule.h): the constraints
of one ``auto_copy`` block, what a rule gives back besides the new body, and the helpers that take a
perfect loop nest apart and put it back together."""
from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.buffer import BufferRegion
from ....ir.errors import TVMSError
from ....ir.expr import BufferLoad, IntImm, Var, is_const_int
from ....ir.stmt import BufferStore, For, IfThenElse, Stmt
from ....ir.structural import structural_equal
from ....ir.visitor import walk
from ...scopes import storage_rank


def copies_between(constraints: "ConstraintSet", source: int, target: int) -> bool:
    return (storage_rank(constraints.read_region.buffer.scope) == source
            and storage_rank(constraints.write_region.buffer.scope) == target)


@dataclass
class ConstraintSet:
    """One ``auto_copy`` block's copy: the kernel's thread extents by tag, the loops around the
    block, its read and write regions, the copied element's bits and its annotations."""

    thread_extent: dict
    outer_loops: tuple
    read_region: BufferRegion
    write_region: BufferRegion
    data_bits: int
    annotations: dict
    block: str = ""  # (its name, for the refusals)

    @property
    def local_stage(self) -> bool:
        return annotation_int(self.annotations.get("local_stage", 0)) == 1

    @property
    def vector_bytes(self) -> int:
        return annotation_int(self.annotations.get("vector_bytes", 1))


def annotation_int(value) -> int:
    """An annotation's value (``True``, ``16``, ``T.bool(True)``) as an int; 0 for None."""
    return int(value.value if isinstance(value, IntImm) else value or 0)


@dataclass
class OutputSet:
    """What a rule adds besides its body: buffers the block allocates, and the least padding
    (a multiple of which the padder may add) of some shared buffers."""

    alloc_buffers: list = field(default_factory=list)
    padding_min: dict = field(default_factory=dict)


def loop_nest(stmt: Stmt) -> tuple[list, Stmt]:
    """The loops of the perfect nest ``stmt`` starts (outermost first) and the body inside them."""
    loops = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def wrap(loops, body: Stmt) -> Stmt:
    """``body`` inside copies of ``loops`` (outermost first)."""
    for loop in reversed(loops):
        body = loop.with_changes(body=body)
    return body


def with_suffix(var: Var, suffix: str) -> Var:
    return Var(var.name + suffix, var.dtype)


def nest_of(stmt: Stmt, rule: str, constraints: ConstraintSet, least: int = 1,
            guarded: bool = False) -> tuple[list, BufferStore]:
    """``loop_nest`` of a copy a rule rewrites and its store, refused unless it is ``least``
    loops or more around one store (``guarded``: or around an ``if`` holding one store, for the
    rules that keep the bound or whose tiles may overshoot it)."""
    loops, body = loop_nest(stmt)
    if guarded and isinstance(body, IfThenElse) and body.else_case is None:
        body = body.then_case
    elif isinstance(body, IfThenElse):
        raise TVMSError(f"LowerAutoCopy ({rule}): block {constraints.block!r} copies under a bound, which this rule "
                        "would drop")
    if not isinstance(body, BufferStore) or len(loops) < least:
        raise TVMSError(f"LowerAutoCopy ({rule}): block {constraints.block!r} must be a nest of {least} loops or "
                        "more around one store")
    from_zero(loops, constraints.block)
    return loops, body


def from_zero(loops, block: str) -> None:
    """Refuse ``loops`` unless each starts at 0 (the rules re-make them from their extents; TVM
    drops a loop's start)."""
    for loop in loops:
        if not is_const_int(loop.min, 0):
            raise TVMSError(f"LowerAutoCopy: block {block!r} copies under loop {loop.loop_var.name!r}, which does not "
                            "start at 0")


def accumulator_load(stmt, scopes: tuple, block: str) -> BufferLoad:
    """The accumulator load of the copy ``stmt`` (a load of a scope in ``scopes``): the rules move
    the accumulator tile by tile, so every such load must read one buffer at the same indices
    (TVM takes one of them for all, so that ``C[i, j] + C[j, i]`` would read ``2 * C[i, j]``)."""
    loads = [n for n in walk(stmt) if isinstance(n, BufferLoad) and n.buffer.scope in scopes]
    if not loads or any(load.buffer is not loads[0].buffer or not structural_equal(load.indices, loads[0].indices)
                        for load in loads):
        raise TVMSError(f"LowerAutoCopy: block {block!r} must read one {' or '.join(scopes)} buffer, at one index")
    return loads[0]


__all__ = ["ConstraintSet", "OutputSet", "annotation_int", "copies_between", "accumulator_load", "loop_nest", "wrap",
           "with_suffix", "nest_of", "from_zero"]
