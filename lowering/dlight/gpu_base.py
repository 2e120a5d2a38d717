"""What the GPU rules share beyond gpu_utils.py (the rule base, target limits, block
inlining): the normal form the reduction family and the GEMV rules start from (``normalize_prim_func``, TVM's
NormalizePrimFunc, with TVM's whole reduction-block test), the dominant read of a block as a sum
of iterator splits, and the threads a reduction gets.

``normalize_prim_func(sch)`` gives every leaf block fresh loops ``ax0, ax1, ...`` that run its
iterators (``v0, v1, ...``) one to one, drops its unit iterators (a block with no spatial
iterator left gets a leading unit one) and describes it as a ``GPUBlockInfo``: iterator kinds
``S``/``R``/``O``, their extents and loops, and whether it is a reduction block as TVM defines
one. The rules decide on that description, so their decisions are TVM's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.arith import Analyzer
from ...ir.buffer import BufferRegion
from ...ir.expr import (COMM_REDUCE, DATA_PAR, Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var,
                        const, is_const_int)
from ...ir.stmt import Block, BlockRealize, BufferStore
from ...ir.visitor import collect
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ..schedule.layout import IndexMap
from .gpu_utils import (GPU_KINDS, GPURule, _leaf_blocks, max_threads_per_block, target_kind, try_inline,
                        try_inline_contiguous_spatial)


def suggest_threads_per_block(target: Any, extents: list, max_threads_for_dynamic_loop: int = 32) -> list[int]:
    """Threads for each loop of ``extents`` (IntImm or symbolic): powers of two, a constant
    extent taking at most itself, the threads left over going to the first symbolic one."""
    threads = {"cuda": 1024, "rocm": 256, "metal": 256, "opencl": 256}.get(target_kind(target), 64)
    results: list = []
    dynamic = []

    def take(limit: int) -> int:
        nonlocal threads
        extent = 1
        while extent * 2 <= limit and extent * 2 <= threads:
            extent *= 2
        threads //= extent
        return extent

    for i, e in enumerate(extents):
        if isinstance(e, IntImm):
            results.append(take(e.value))
        else:
            results.append(None)
            dynamic.append(i)
    for i in dynamic:
        results[i] = take(max_threads_for_dynamic_loop)
    if dynamic:
        results[dynamic[0]] *= threads
    return results


@dataclass(frozen=True)
class GPUIterInfo:
    kind: str  # "S" spatial, "R" reduction, "O" other
    var: Var
    dom: PrimExpr
    loop_rv: LoopRV

    def dom_is(self, value: int) -> bool:
        return is_const_int(self.dom, value)


@dataclass(frozen=True)
class GPUBlockInfo:
    name: str
    iters: tuple[GPUIterInfo, ...]
    rv: BlockRV
    reduction_block: bool

    def dom_kind(self) -> str:
        return "".join(i.kind for i in self.iters)

    def is_injective(self) -> bool:
        return all(k == "S" for k in self.dom_kind())

    def is_reduction(self) -> bool:
        return self.reduction_block


def realize_of(sch: Schedule, rv: BlockRV) -> BlockRealize:
    block = sch.get(rv)
    return next(r for r in collect(sch.mod["main"].body, BlockRealize) if r.block is block)


def _kind(iter_type: str) -> str:
    return {DATA_PAR: "S", COMM_REDUCE: "R"}.get(iter_type, "O")


def normalize_prim_func(sch: Schedule) -> list[GPUBlockInfo] | None:
    """The leaf blocks in the normal form (see the module's docstring), or None when a block
    sits in loops it is not bound to one to one, or a loop does not start at 0."""
    try:
        root = sch.get_block("root")
    except ScheduleError:
        return None
    leaves = _leaf_blocks(sch, root)
    for rv in leaves:
        loops = [sch.get(lp) for lp in sch.get_loops(rv)]
        binds = realize_of(sch, rv).iter_values
        if loops and (len(loops) != len(binds) or any(
                b is not lp.loop_var or not is_const_int(lp.min, 0) for lp, b in zip(loops, binds))):
            return None
    infos = []
    for rv in leaves:
        block = sch.get(rv)
        inputs = [Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars]
        kept = [(v, iv) for v, iv in zip(inputs, block.iter_vars) if not is_const_int(iv.dom.extent, 1)]
        outputs: list[PrimExpr] = [v for v, _ in kept]
        if not any(iv.iter_type == DATA_PAR for _, iv in kept):
            outputs.insert(0, const(0, "int64"))
        try:
            sch.transform_block_layout(rv, IndexMap(inputs, outputs))
        except ScheduleError:
            pass  # (left as it is, as TVM leaves a block it cannot transform)
        infos.append(describe(sch, rv, is_reduction_block(sch, rv, root)))
    return infos


def describe(sch: Schedule, rv: BlockRV, reduction_block: bool) -> GPUBlockInfo:
    """The block as it is now: its iterators' kinds and extents, paired with its loops."""
    block = sch.get(rv)
    iters = tuple(GPUIterInfo(_kind(iv.iter_type), iv.var, iv.dom.extent, loop)
                  for loop, iv in zip(sch.get_loops(rv), block.iter_vars))
    return GPUBlockInfo(block.name_hint, iters, rv, reduction_block)


def is_reduction_block(sch: Schedule, rv: BlockRV, scope: BlockRV) -> bool:
    """TVM's definition: an init, affine bindings, only spatial and reduction iterators, the only
    writer of its outputs in the scope, and no reduction iterator indexing an output."""
    block = sch.get(rv)
    if block.init is None:
        return False
    loop_vars = {id(sch.get(lp).loop_var) for lp in sch.get_loops(rv)}
    if any(not isinstance(v, IntImm) and not (isinstance(v, Var) and id(v) in loop_vars)
           for v in realize_of(sch, rv).iter_values):
        return False  # (bindings are loop variables after normalization; others are not judged)
    if any(iv.iter_type not in (DATA_PAR, COMM_REDUCE) for iv in block.iter_vars):
        return False
    siblings = [sch.get(b) for b in sch.get_child_blocks(scope)]
    for w in block.writes:
        writers = [b for b in siblings if any(x.buffer is w.buffer for x in b.writes)]
        if len(writers) > 1:
            return False
    reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.iter_type == COMM_REDUCE}
    written = {id(w.buffer) for w in block.writes}
    indices = [r.min for w in block.writes for r in w.region]
    indices += [i for s in collect(block.body, BufferStore) if id(s.buffer) in written for i in s.indices]
    return not any(id(v) in reduce_vars for e in indices for v in collect(e, Var))


def iter_vars_in_region(block: Block, region: BufferRegion) -> set[int] | None:
    """The block iterators (by id) a one-element-per-dimension access uses; None when the access
    spans more than one element in some dimension."""
    if any(not is_const_int(r.extent, 1) for r in region.region):
        return None
    own = {id(iv.var) for iv in block.iter_vars}
    return {id(v) for r in region.region for v in collect(r.min, Var) if id(v) in own}


def detect_dominant_read(block: Block) -> PrimExpr | None:
    """The flat offset of the read that uses the most block iterators (the first such one);
    None when a read spans a range (TVM's rules fail there)."""
    best, most = None, -1
    for region in block.reads:
        used = iter_vars_in_region(block, region)
        if used is None:
            return None
        if len(used) > most:
            best, most = region, len(used)
    if best is None:
        return None
    offset: PrimExpr = const(0, best.buffer.shape[0].dtype) if best.buffer.shape else const(0, "int32")
    for k, (r, extent) in enumerate(zip(best.region, best.buffer.shape)):
        offset = r.min if k == 0 else offset * extent + r.min
    return offset


@dataclass(frozen=True)
class IterSplit:
    """``(source // lower_factor) % extent * scale``: one term of an iterator sum."""

    source: Var
    lower_factor: int
    extent: PrimExpr
    scale: tuple  # its factors (IntImm or symbolic)

    @property
    def const_scale(self) -> int:
        out = 1
        for f in self.scale:
            out *= f.value if isinstance(f, IntImm) else 1
        return out


class _NotAffine(Exception):
    pass


def iter_sum(expr: PrimExpr, doms: dict[int, PrimExpr], any_base: bool = False) -> list[IterSplit] | None:
    """``expr`` as a sum of splits of the iterators ``doms`` (id of a var -> its extent), in TVM's
    normalized order (larger constant scale first, then more symbolic factors); None when it is
    not affine in them, or (unless ``any_base``) has a non-zero base. Unit iterators count as 0."""
    try:
        splits, base = _terms(expr, doms)
    except _NotAffine:
        return None
    if (not any_base and any(not is_const_int(b, 0) for b in base)
            or len({id(s.source) for s in splits}) != len(splits)):
        return None
    order = sorted(range(len(splits)), key=lambda k: (-splits[k].const_scale,
                                                      -sum(not isinstance(f, IntImm) for f in splits[k].scale)))
    return [splits[k] for k in order]


def _uses(e: PrimExpr, doms: dict) -> bool:
    return any(id(v) in doms for v in collect(e, Var))


def _terms(e: PrimExpr, doms: dict) -> tuple[list[IterSplit], list[PrimExpr]]:
    if isinstance(e, Var) and id(e) in doms:
        return ([], []) if is_const_int(doms[id(e)], 1) else ([IterSplit(e, 1, doms[id(e)], ())], [])
    if not _uses(e, doms):
        return [], [e]
    if isinstance(e, (Add, Sub)):
        (sa, ba), (sb, bb) = _terms(e.a, doms), _terms(e.b, doms)
        if isinstance(e, Sub) and (sb or any(not is_const_int(b, 0) for b in bb)):
            raise _NotAffine
        return sa + sb, ba + bb
    if isinstance(e, Mul):
        scaled, factor = (e.a, e.b) if not _uses(e.b, doms) else (e.b, e.a)
        if _uses(factor, doms):
            raise _NotAffine
        splits, base = _terms(scaled, doms)
        scaled = [IterSplit(s.source, s.lower_factor, s.extent, s.scale + (factor,)) for s in splits]
        return scaled, [b * factor for b in base]
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        splits, base = _terms(e.a, doms)
        if len(splits) != 1 or splits[0].scale or base:
            raise _NotAffine
        s, c = splits[0], e.b
        if isinstance(e, FloorMod):
            return [IterSplit(s.source, s.lower_factor, c, ())], []
        extent = Analyzer().simplify(FloorDiv(s.extent + (c.value - 1), c))  # (the quotient's range)
        return [IterSplit(s.source, s.lower_factor * c.value, extent, ())], []
    raise _NotAffine


def is_broadcast_epilogue(sch: Schedule, block: BlockRV, epilogue: BlockRV) -> bool:
    """Whether the epilogue reads what ``block`` wrote with fewer iterators than it has."""
    written = {id(w.buffer) for w in sch.get(block).writes}
    epi = sch.get(epilogue)
    for region in epi.reads:
        if id(region.buffer) in written:
            used = iter_vars_in_region(epi, region)
            if used is None or len(used) < len(epi.iter_vars):
                return True
    return False


__all__ = ["GPUBlockInfo", "GPUIterInfo", "GPURule", "GPU_KINDS", "IterSplit", "describe", "detect_dominant_read",
           "is_broadcast_epilogue", "is_reduction_block", "iter_sum", "max_threads_per_block",
           "normalize_prim_func", "realize_of", "suggest_threads_per_block", "target_kind", "try_inline",
           "try_inline_contiguous_spatial"]
