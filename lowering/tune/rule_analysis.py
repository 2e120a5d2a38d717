"""What the schedule rules and postprocessors ask of a block or loop before they touch it.

These are TVM's analyses of the same names (``NeedsMultiLevelTiling``, ``IsWriteCache``,
``AnalyzeReadWritePattern``, ``GetLoopIterType``, ...), read off tvms's immutable IR: a block is
found with its ancestors (``site``) instead of an sref tree.
"""
from __future__ import annotations

from typing import Any

from ...ir.buffer import BufferRegion
from ...ir.expr import COMM_REDUCE, DATA_PAR, OPAQUE, Add, Call, IntImm, Select, Sub, Var
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, For, IfThenElse
from ...ir.visitor import walk
from ..schedule.loop_kinds import loop_iter_type  # noqa: F401 (the rules import it from here)
from ..schedule.random_vars import BlockRV
from ..schedule.tree import blocks_under, enclosing_loops

TILING_STRUCTURE = "meta_schedule.tiling_structure"


def site(sch: Any, block_rv: BlockRV) -> tuple[str, BlockRealize, tuple]:
    """(function name, block realize, ancestors outermost first) of a block handle."""
    return sch._block(block_rv)


def has_block(sch: Any, block_rv: BlockRV) -> bool:
    """Whether the handle still names a block (an inlined block's handle does not)."""
    try:
        site(sch, block_rv)
    except Exception:  # noqa: BLE001 - a ScheduleError of any kind: the block is gone
        return False
    return True


def is_root(path: tuple) -> bool:
    return not any(isinstance(p, Block) for p in path)


def under_root_only(path: tuple) -> bool:
    """The block's scope is the function's root block (no block between them)."""
    return sum(isinstance(p, Block) for p in path) == 1


def is_spatial(block: Block) -> bool:
    return all(iv.iter_type == DATA_PAR for iv in block.iter_vars)


def is_spatial_prim_func(func: PrimFunc) -> bool:
    return all(is_spatial(r.block) for r in blocks_under(func.body))


def has_been_multi_level_tiled(block: Block) -> bool:
    return TILING_STRUCTURE in block.annotations


def is_trivial_binding(realize: BlockRealize, path: tuple) -> bool:
    """Each block iterator is bound to exactly its own loop, in order."""
    loops = enclosing_loops(path)
    return len(loops) == len(realize.iter_values) and all(
        value is loop.loop_var for value, loop in zip(realize.iter_values, loops))


def const_int(e: Any) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _var_with_shift(e: Any) -> Var | None:
    """The variable of ``v``, ``v + c``, ``c + v`` or ``v - c`` (TVM's AnalyzeVarWithShift)."""
    if isinstance(e, Var):
        return e
    if isinstance(e, (Add, Sub)):
        if isinstance(e.a, Var) and isinstance(e.b, IntImm):
            return e.a
        if isinstance(e, Add) and isinstance(e.b, Var) and isinstance(e.a, IntImm):
            return e.b
    return None


def read_write_pattern(read: BufferRegion, write: BufferRegion) -> tuple[bool, bool] | None:
    """(injective, ordered) of the map from the read's indices to the write's, or None when the
    read indices are not write indices shifted by constants (TVM's AnalyzeReadWritePattern)."""
    positions: dict[int, int] = {}
    for i, rng in enumerate(write.region):
        if const_int(rng.extent) is None or not isinstance(rng.min, Var):
            return None
        positions[id(rng.min)] = i
    mapped = []
    for rng in read.region:
        if const_int(rng.extent) is None:
            return None
        if const_int(rng.min) is not None:
            continue
        var = _var_with_shift(rng.min)
        if var is None or id(var) not in positions:
            return None
        mapped.append(positions[id(var)])
    ordered = all(a <= b for a, b in zip(mapped, mapped[1:]))
    injective = len(set(mapped)) == len(mapped)
    return injective, ordered


def is_write_cache(block: Block) -> bool:
    """One write, and every read maps onto it injectively and in order (a copy-like block)."""
    if len(block.writes) != 1:
        return False
    return all((p := read_write_pattern(r, block.writes[0])) is not None and all(p) for r in block.reads)


def has_if_then_else(realize: BlockRealize) -> bool:
    for node in walk(realize):
        if isinstance(node, BlockRealize) and const_int(node.predicate) != 1:
            return True
        if isinstance(node, (IfThenElse, Select)) or is_call(node, "tir.if_then_else"):
            return True
    return False


def is_call(node: Any, op_name: str) -> bool:
    return isinstance(node, Call) and getattr(node.op, "name", None) == op_name


def has_op(realize: BlockRealize, op_names: list[str]) -> bool:
    return any(is_call(node, name) for node in walk(realize) for name in op_names)


def needs_multi_level_tiling(realize: BlockRealize, path: tuple) -> bool:
    """A reduction-like block whose reads leave some spatial iterator unused: tiling it gives
    data reuse (TVM's NeedsMultiLevelTiling)."""
    block = realize.block
    if (has_been_multi_level_tiled(block) or len(block.writes) != 1 or not block.reads
            or is_spatial(block) or not is_trivial_binding(realize, path)):
        return False
    write_buffer = block.writes[0].buffer
    spatial = [iv.var for iv in block.iter_vars
               if iv.iter_type == DATA_PAR and not (const_int(iv.dom.min) == 0 and const_int(iv.dom.extent) == 1)]
    unused, seen = 0, set()
    for region in block.reads:
        if id(region.buffer) in seen:
            return False
        seen.add(id(region.buffer))
        if region.buffer is write_buffer:
            continue
        if any(const_int(r.extent) is None for r in region.region):
            return False
        used = {id(n) for r in region.region for n in walk(r.min) if isinstance(n, Var)}
        unused += sum(id(v) not in used for v in spatial)
    return unused >= 1


def space_and_reduction_length(loops: list[For]) -> tuple[int, int] | None:
    space, reduce = 1, 1
    for loop in loops:
        kind, extent = loop_iter_type(loop), const_int(loop.extent)
        if extent is None or kind == OPAQUE:
            return None
        if kind == DATA_PAR:
            space *= extent
        else:
            reduce *= extent
    return space, reduce


def needs_rfactor(realize: BlockRealize, path: tuple, max_parallel_extent: int) -> bool:
    """A reduction block (perfectly nested, trivially bound) whose spatial loops give too little
    parallelism, so splitting its reduction (rfactor) is worth trying
    (TVM's NeedsRFactorOrCrossThreadReduction)."""
    block = realize.block
    if (not block.writes or block.init is None or not is_trivial_binding(realize, path)
            or has_been_multi_level_tiled(block)):
        return False
    loops = enclosing_loops(path)
    kinds = [loop_iter_type(loop) for loop in loops]
    if OPAQUE in kinds or COMM_REDUCE not in kinds:
        return False
    for outer, inner in zip(loops, loops[1:] + [realize]):
        if outer.body is not inner:
            return False
    lengths = space_and_reduction_length(loops)
    if lengths is None:
        return False
    space, reduce = lengths
    if needs_multi_level_tiling(realize, path):
        return not (space >= reduce or space > max_parallel_extent)
    return reduce > 1
