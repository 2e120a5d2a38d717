"""What the default CPU rules need to know about a PrimFunc before they schedule it.

``describe_blocks(sch)`` lists the blocks directly under the root block, in program order, each
as a ``BlockInfo``: its iterators (spatial ``S`` or reduction ``R``, their extents, the loop each
one is bound to when the binding is one loop per iterator), what it reads and writes, and whether
it is injective, elementwise or a reduction. ``inline_cheap_blocks`` folds away the spatial blocks
whose inlining costs no recomputation, which is how every rule starts.
"""
from __future__ import annotations

import random

from dataclasses import dataclass
from typing import Any

from ...ir.buffer import BufferRegion
from ...ir.errors import TVMSError
from ...ir.expr import COMM_REDUCE, DATA_PAR, BufferLoad, Call, IntImm, PrimExpr, Var
from ...ir.op import VECTOR_MATH
from ...ir.stmt import Block, BufferStore
from ...ir.visitor import collect
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ..schedule.tree import find_block
from .base import ScheduleRule

# A parallel loop costs a few microseconds to launch: below this many elements of work (about
# what one core does in that time) a function stays on one thread.
PARALLEL_MIN_WORK = 1 << 15


def const_int(e: Any) -> int | None:
    """The value of a constant integer expression, None for a symbolic one."""
    return e.value if isinstance(e, IntImm) else None


@dataclass(frozen=True)
class IterInfo:
    """One block iterator: ``kind`` "S" (spatial) or "R" (reduction), its extent, and the loop
    bound to it alone (None when the binding mixes loops, as after a fuse)."""

    kind: str
    var: Var
    extent: PrimExpr
    loop: LoopRV | None

    @property
    def const_extent(self) -> int | None:
        return const_int(self.extent)


@dataclass(frozen=True)
class BlockInfo:
    """A block under the root: its handle, iterators (in loop order when trivially bound) and
    the block itself (for its reads, writes and body)."""

    name: str
    rv: BlockRV
    block: Block
    iters: tuple[IterInfo, ...]
    loops: tuple[LoopRV, ...]
    trivial: bool  # each iterator is exactly one loop variable, loops in iterator order

    @property
    def kinds(self) -> str:
        return "".join(it.kind for it in self.iters)

    def is_injective(self) -> bool:
        """Spatial iterators only, each output element written at a place the iterators give
        (a scatter's place read from memory could be written twice: order matters there)."""
        return (self.block.init is None and all(it.kind == "S" for it in self.iters)
                and self.writes_where_iterators_say())

    def writes_where_iterators_say(self) -> bool:
        return not any(collect(r.min, BufferLoad) or collect(r.extent, BufferLoad)
                       for w in self.block.writes for r in w.region)

    def is_reduction(self) -> bool:
        """A reduction ``B[s...] = B[s...] op f(...)`` with its spatial iterators first."""
        kinds = self.kinds
        return (self.block.init is not None and "R" in kinds and set(kinds) <= {"S", "R"}
                and kinds == "S" * kinds.count("S") + "R" * kinds.count("R")
                and isinstance(self.block.body, BufferStore))

    def is_elementwise(self) -> bool:
        """Injective, and every read is at the very indices of the write."""
        if not self.is_injective() or len(self.block.writes) != 1:
            return False
        out = _point(self.block.writes[0])
        return all(_point(r) == out for r in self.block.reads)

    @property
    def spatial(self) -> tuple[IterInfo, ...]:
        return tuple(it for it in self.iters if it.kind == "S")

    @property
    def reduction(self) -> tuple[IterInfo, ...]:
        return tuple(it for it in self.iters if it.kind == "R")

    def write(self) -> BufferRegion:
        if not self.block.writes:  # (T.assume's blocks write nothing: a rule that needs an output declines)
            raise ScheduleError(f"block {self.block.name_hint!r} writes no buffer")
        return self.block.writes[0]

    def is_output(self, sch: Schedule) -> bool:
        params = sch.mod["main"].buffer_map.values()
        return any(w.buffer is b for w in self.block.writes for b in params)


def _point(region: BufferRegion) -> tuple | None:
    """The identities of the variables a one-element region is indexed by (None otherwise)."""
    if any(not isinstance(r.min, Var) or const_int(r.extent) != 1 for r in region.region):
        return None
    return tuple(id(r.min) for r in region.region)


def innermost_index_var(region: BufferRegion) -> Var | None:
    """The variable a region's last index is, when it is a plain variable: the iterator along
    which the access is contiguous."""
    if not region.region:
        return None
    last = region.region[-1].min
    return last if isinstance(last, Var) else None


def root_blocks(sch: Schedule) -> list[BlockRV]:
    """The blocks directly under the root block, in program order."""
    return sch.get_child_blocks(sch.get_block("root"))


def describe_block(sch: Schedule, rv: BlockRV) -> BlockInfo:
    block = sch.get(rv)
    realize_values = _binding(sch, block.name_hint)
    loops = tuple(sch.get_loops(rv))
    loop_vars = [sch.get(loop).loop_var for loop in loops]
    by_var = {id(v): loop for v, loop in zip(loop_vars, loops)}
    iters = []
    for iv, value in zip(block.iter_vars, realize_values):
        kind = {DATA_PAR: "S", COMM_REDUCE: "R"}.get(iv.iter_type, "O")
        loop = by_var.get(id(value)) if isinstance(value, Var) else None
        iters.append(IterInfo(kind, iv.var, iv.dom.extent, loop))
    trivial = (len(loops) == len(iters) and all(isinstance(v, Var) for v in realize_values)
               and [id(v) for v in realize_values] == [id(v) for v in loop_vars])
    return BlockInfo(block.name_hint, rv, block, tuple(iters), loops, trivial)


def _binding(sch: Schedule, name: str) -> tuple:
    """The values a block's iterators are bound to (its realize holds them, not the block)."""
    return find_block(sch.mod["main"], name)[0].iter_values


def describe_blocks(sch: Schedule) -> list[BlockInfo]:
    return [describe_block(sch, rv) for rv in root_blocks(sch)]


def has_nested_blocks(sch: Schedule) -> bool:
    """Whether some block holds blocks of its own (the rules only handle flat functions)."""
    return any(sch.get_child_blocks(rv) for rv in root_blocks(sch))


def _reads_of(info: BlockInfo, buffer: Any) -> list[BufferLoad]:
    return [load for load in collect(info.block.body, BufferLoad) if load.buffer is buffer]


def inlining_is_free(producer: BlockInfo, consumers: list[BlockInfo]) -> bool:
    """Inlining recomputes nothing when one consumer reads the produced buffer at indices that
    use every one of its iterators; a value without calls (a cast, an add) is cheap anyway."""
    store = producer.block.body
    if not isinstance(store, BufferStore):
        return False
    if not collect(store.value, Call):
        return True
    if len(consumers) > 1:  # each consumer would compute the exp (or log, ...) again
        return False
    for consumer in consumers:
        for load in _reads_of(consumer, store.buffer):
            used = {id(v) for index in load.indices for v in collect(index, Var)}
            if any(id(it.var) not in used for it in consumer.iters):
                return False
    return True


def inline_cheap_blocks(sch: Schedule) -> list[BlockInfo]:
    """Inline (into consumers, else into the producer) every spatial block that is not an output
    and whose inlining is free; returns the blocks left, described afresh."""
    changed = True
    while changed:
        changed = False
        infos = describe_blocks(sch)
        for info in infos:
            if not info.block.writes or not info.is_injective() or info.is_output(sch):
                continue  # (a block that writes nothing, T.assume's, has nothing to inline)
            buffer = info.write().buffer
            consumers = [c for c in infos if c is not info and any(r.buffer is buffer for r in c.block.reads)]
            if not consumers or not inlining_is_free(info, consumers):
                continue
            try:
                sch.compute_inline(info.rv)
            except ScheduleError:
                continue
            changed = True
            break
        if not changed:
            changed = _reverse_inline_one(sch, infos)
    return describe_blocks(sch)


# The last function flat_schedule was asked for, with its result (the rules of one
# ApplyDefaultSchedule, and a tuner's sketches, ask for the same function in turn)
_last_flat: tuple = (None, None)


def flat_schedule(func: Any) -> tuple[Schedule, list[BlockInfo]] | None:
    """A schedule of ``func`` with its cheap blocks inlined, and the blocks left: where every rule
    starts. None when a block holds blocks of its own (the rules schedule flat functions). Each
    call gets a schedule of its own; the inlining is done once for a function asked for twice in
    a row (ShuffleNet's crops: 80 inlinings by 6 rules, 4.9 of 6.3 s of its default schedules)."""
    global _last_flat
    seen, found = _last_flat
    if seen is not func:
        sch = Schedule(func)
        found = None if has_nested_blocks(sch) else (sch, inline_cheap_blocks(sch))
        _last_flat = (func, found)
    if found is None:
        return None
    sch = found[0].copy()
    sch.seed(random.randrange(1 << 31))  # (a fresh generator, as a new schedule has)
    return sch, list(found[1])


def _reverse_inline_one(sch: Schedule, infos: list[BlockInfo]) -> bool:
    """Fold one elementwise output block (a cast, a relu) into the spatial block producing it."""
    for info in infos:
        if not (info.is_elementwise() and info.is_output(sch)):
            continue
        producers = [p for p in infos if p is not info and p.is_injective()
                     and any(w.buffer is r.buffer for w in p.block.writes for r in info.block.reads)]
        if len(producers) != 1:
            continue
        try:
            sch.reverse_compute_inline(info.rv)
        except ScheduleError:
            continue
        return True
    return False


# Math the CPU does in vector registers. Other calls (sin, atan2, ...) become one libm call per
# lane, and every call spills the vector registers: such blocks run faster as scalar loops.
VECTOR_NATIVE_CALLS = frozenset(f"tir.{name}" for name in (
    "sqrt rsqrt fabs floor ceil round trunc nearbyint fma copysign if_then_else likely "
    "reinterpret bitwise_and bitwise_or bitwise_xor bitwise_not shift_left shift_right").split())


def vectorizes_well(info: BlockInfo) -> bool:
    """Whether the block's computation has only operations with a vector instruction (exp, log,
    tanh, erf and sigmoid of float32 / float16 have the code generator's vector expansions)."""
    def native(call: Call) -> bool:
        name = getattr(call.op, "name", "")
        if name in VECTOR_NATIVE_CALLS:
            return True
        dtype = call.dtype.element_of
        return name.startswith("tir.") and name[4:] in VECTOR_MATH and dtype.code == "float" and dtype.bits in (16, 32)
    return all(native(call) for call in collect(info.block.body, Call))


def vector_lanes(target: Any, dtype: Any) -> int:
    """How many ``dtype`` elements (or elements of that many bits) a vector register of the
    target holds: 512-bit with avx512f, 256-bit with avx2, else 128-bit. The features are the
    target's ``-mattr``, or the host's for a plain ``llvm``; for a named CPU, the width LLVM
    gives it with those features (``named_cpu_vector_bits``); 256-bit for a target that is not
    an llvm one (or without llvmlite)."""
    bits = int(dtype) if isinstance(dtype, int) else int(getattr(dtype, "bits", 32))
    return max(1, (vector_bits(target) or 256) // max(8, bits))


def vector_bits(target: Any) -> int | None:
    """The target's vector register width in bits (see ``vector_lanes``), None when unknown."""
    from ..codegen.llvm_target import named_cpu_vector_bits, parse_llvm_target

    try:
        llvm_target = parse_llvm_target(str(target))
        if llvm_target.mcpu:
            return named_cpu_vector_bits(llvm_target.mcpu, ",".join(llvm_target.mattr))
        features = llvm_target.features
    except TVMSError:  # (not an llvm target, or no llvmlite)
        return None
    enabled = {f.lstrip("+") for f in features.split(",") if not f.startswith("-")}
    return 512 if "avx512f" in enabled else 256 if "avx2" in enabled else 128


def num_threads(target: Any) -> int:
    """The threads parallel loops will run on (what the code generator will use)."""
    from ..codegen.llvm_target import parse_llvm_target

    try:
        return parse_llvm_target(target).threads
    except TVMSError:  # not an llvm target: one thread is the safe guess for sizing chunks
        return 1


class CPURule(ScheduleRule):
    """A rule for CPU targets (``llvm``, ``c``): ApplyDefaultSchedule skips it for others."""

    def is_target_available(self, target: Any) -> bool:
        return str(target).split(" ", 1)[0] in ("llvm", "c")


def buffer_dtype(info: BlockInfo) -> Any:
    return info.write().buffer.dtype


__all__ = ["BlockInfo", "CPURule", "IterInfo", "PARALLEL_MIN_WORK", "buffer_dtype", "const_int", "describe_block",
           "describe_blocks", "flat_schedule", "has_nested_blocks", "inline_cheap_blocks", "inlining_is_free",
           "innermost_index_var", "num_threads", "root_blocks", "vector_lanes", "vectorizes_well"]
