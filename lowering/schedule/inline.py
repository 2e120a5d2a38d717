"""compute_inline and reverse_compute_inline: fold a one-store block into its consumer or producer.

compute_inline replaces every load of the block's buffer with the stored expression;
reverse_compute_inline makes the producer store the consumer's expression directly. The removed
block's loops go with it, and so does the intermediate buffer's allocation. The blocks that
change get read and write regions inferred afresh.
"""
from __future__ import annotations

from math import prod
from typing import Any, Callable

from ...ir.analysis import infer_block_regions, substitute
from ...ir.arith.analyzer import AFFINE, Analyzer
from ...ir.buffer import Buffer
from ...ir.expr import GE, LT, Add, And, BufferLoad, FloorDiv, FloorMod, IntImm, PrimExpr, Var, const, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore, For
from ...ir.structural import structural_equal
from ...ir.visitor import Mutator, collect
from .errors import ScheduleError
from .layout import linear_terms, mixed_radix
from .tree import blocks_under, remove_block, replace_stmts


def _single_store(block: Block, primitive: str) -> BufferStore:
    if block.init is not None or not isinstance(block.body, BufferStore):
        raise ScheduleError(f"{primitive}: the body of block '{block.name_hint}' must be a single "
                            f"store 'B[i, j, ...] = f(i, j, ...)' without T.init()")
    return block.body


def _distinct_iter_vars(indices: tuple, block: Block, primitive: str) -> list[Var]:
    iter_vars = [iv.var for iv in block.iter_vars]
    if (not all(isinstance(i, Var) and any(i is v for v in iter_vars) for i in indices)
            or len({id(i) for i in indices}) != len(indices) or len(indices) != len(iter_vars)):
        raise ScheduleError(f"{primitive}: block '{block.name_hint}' must access its buffer at its own "
                            f"iterators, each once, e.g. B[vi, vj]")
    return list(indices)


def _iterators_at(indices: tuple, block: Block, values: tuple, primitive: str) -> dict:
    """``block``'s iterators as expressions of ``values``, where it accesses a buffer at
    ``indices`` and the buffer is indexed by ``values``: the value at an iterator's index, or a
    digit of it at a fused index (``C[0, i * 96 + j * 32 + k]`` read at ``(0, v1)``: ``i = v1 // 96``,
    ``j = v1 // 32 % 3``, ``k = v1 % 32``). Constant indices bind nothing; a unit iterator the
    indices leave out is at its only value."""
    own = {id(iv.var): iv for iv in block.iter_vars}
    mapping: dict = {}
    for index, value in zip(indices, values):
        if isinstance(index, IntImm):
            continue
        digits = _mixed_radix(index, own)
        if digits is None or any(v in mapping for v, _, _ in digits):
            break
        if len(digits) == 1:
            mapping[digits[0][0]] = value
            continue
        for n, (var, stride, extent) in enumerate(digits):  # (outermost first)
            digit = value if stride == 1 else FloorDiv(value, const(stride, value.dtype))
            mapping[var] = digit if n == 0 else FloorMod(digit, const(extent, value.dtype))
    else:
        for iv in block.iter_vars:
            if iv.var not in mapping and is_const_int(iv.dom.extent, 1):
                mapping[iv.var] = iv.dom.min
        if all(iv.var in mapping for iv in block.iter_vars):
            return mapping
    raise ScheduleError(f"{primitive}: block '{block.name_hint}' must access its buffer at its own "
                        f"iterators, each once (or fused in mixed radix), e.g. B[vi, vj]")


def _check_constant_indices(indices: tuple, block: Block, producer: Block) -> None:
    """A constant index of the consumer sits where the producer has a unit iterator of that value."""
    domains = {id(iv.var): iv.dom for iv in producer.iter_vars}
    for index, stored_at in zip(indices, producer.body.indices):
        dom = domains[id(stored_at)]
        if isinstance(index, IntImm) and not (is_const_int(dom.min, index.value) and is_const_int(dom.extent, 1)):
            raise ScheduleError(f"reverse_compute_inline: block '{block.name_hint}' reads "
                                f"'{producer.name_hint}''s result at the constant {index.value} where that "
                                f"block iterates")


def _mixed_radix(index: PrimExpr, own: dict) -> list | None:
    """``[(var, stride, extent)]``, outermost first, of an index ``i * 96 + j * 32 + k`` over
    iterators of constant extents whose strides are the products of the inner extents."""
    terms = linear_terms(index)
    if terms is None or any(id(v) not in own for v, _ in terms):
        return None
    if len(terms) == 1:  # (an iterator itself, of any extent)
        return [(terms[0][0], 1, None)] if terms[0][1] == 1 else None
    if any(not isinstance(own[id(v)].dom.extent, IntImm) for v, _ in terms):
        return None
    digits = mixed_radix(terms, lambda v: own[id(v)].dom.extent)
    return None if digits is None else [(v, s, own[id(v)].dom.extent.value) for v, s in digits]


def _digit(index: PrimExpr, own: dict) -> tuple | None:
    """``(var, stride, extent)`` of an index that is one digit of an iterator: ``v // 32``,
    ``v // 16 % 2``, ``v % 32 // 16``, ``v % 16`` (extent None: the top digit)."""
    if isinstance(index, Var):
        return (index, 1, None) if id(index) in own else None
    if isinstance(index, (FloorDiv, FloorMod)) and isinstance(index.b, IntImm) and index.b.value > 0:
        inner, c = _digit(index.a, own), index.b.value
        if inner is None or (inner[2] is not None and inner[2] % c):
            return None
        var, stride, extent = inner
        if isinstance(index, FloorMod):
            return var, stride, c
        return var, stride * c, None if extent is None else extent // c
    return None


def _split_inverse(indices: tuple, block: Block, producer: Block) -> tuple | None:
    """(the consumer's iterators as expressions of the producer's, the bounds of the producer's
    padding), where the consumer reads at digits of its iterators (a layout that splits them:
    ``C[i // 32, j // 16, i // 16 % 2, 0, i % 16, j % 16]``) and the producer's iterators span those
    digits, the top one rounded up where the producer is padded (then ``i < 127`` is a bound, the
    iterator as the sum of its digits, outermost first); None otherwise."""
    own = {id(iv.var): iv for iv in block.iter_vars}
    params = {id(iv.var): iv for iv in producer.iter_vars}
    stored = producer.body.indices
    digits = [None if isinstance(index, IntImm) else _digit(index, own) for index in indices]
    if all(d is None or (d[1] == 1 and d[2] is None) for d in digits):
        return None
    by_var: dict = {}
    for index, digit, at in zip(indices, digits, stored):
        piv = params.get(id(at))
        if piv is None:
            return None
        if isinstance(index, IntImm):  # (a unit digit: the producer's iterator there is unit too)
            if not (is_const_int(piv.dom.extent, 1) and is_const_int(piv.dom.min, index.value)):
                return None
            continue
        if digit is None:
            return None
        var, stride, extent = digit
        by_var.setdefault(id(var), []).append((stride, extent, piv))
    mapping, bounds = {}, []
    for iv in block.iter_vars:
        parts = sorted(by_var.get(id(iv.var), []), key=lambda d: d[0])
        total = iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else None
        if not parts or total is None or not is_const_int(iv.dom.min, 0):
            return None
        expected, terms = 1, []
        for k, (stride, extent, piv) in enumerate(parts):
            top = extent is None
            span = -(-total // stride) if top else extent
            if stride != expected or (top and k != len(parts) - 1) or not is_const_int(piv.dom.extent, span):
                return None
            terms.append(piv.var if stride == 1 else piv.var * const(stride, piv.var.dtype))
            expected = stride * span
        if expected < total:
            return None
        mapping[iv.var] = _sum(terms)
        if expected > total:
            bounds.append((_sum(terms[::-1]), const(total, iv.var.dtype)))
    return mapping, bounds


def _sum(terms: list) -> PrimExpr:
    value = terms[0]
    for term in terms[1:]:
        value = Add(value, term)
    return value


def _consumer_domain_predicate(consumer: Block, indices: tuple, realize: BlockRealize) -> PrimExpr:
    """The producer's predicate, and-ed with ``binding < extent`` for each producer iterator
    whose domain is larger than what the consumer reads there (a padded producer writing back only
    the rows that exist: ``ax1_0 * 32 + ax1 < n``; a fused index covering 162 of 192 rows)."""
    own = {id(iv.var): iv for iv in consumer.iter_vars}
    at = {id(v): k for k, index in enumerate(indices) if not isinstance(index, IntImm)
          for v, _, _ in _mixed_radix(index, own)}
    # (in the order of the consumer's iterators, each index once)
    positions = list(dict.fromkeys(at[id(iv.var)] for iv in consumer.iter_vars if id(iv.var) in at))
    bindings = _bindings(realize)
    predicate = realize.predicate
    for k in positions:
        index, stored_at, value = indices[k], realize.block.body.indices[k], bindings[k]
        piv = next(iv for iv in realize.block.iter_vars if iv.var is stored_at)
        digits = _mixed_radix(index, own)
        if len(digits) == 1:
            civ = own[id(digits[0][0])]
            low, extent = civ.dom.min, civ.dom.extent
        else:
            low, extent = piv.dom.min, const(prod(e for _, _, e in digits), index.dtype)
        if structural_equal(piv.dom.extent, extent) and structural_equal(piv.dom.min, low):
            continue
        if len(digits) > 1 and not (isinstance(piv.dom.extent, IntImm) and extent.value <= piv.dom.extent.value):
            raise ScheduleError(f"reverse_compute_inline: block '{consumer.name_hint}' reads a fused index "
                                f"beyond '{realize.block.name_hint}''s iterator")
        bound = LT(value, extent if is_const_int(low, 0) else Add(low, extent))
        predicate = bound if is_const_int(predicate, 1) else And(predicate, bound)
    return predicate


def _bindings(realize: BlockRealize) -> list:
    """The values bound to the iterators the producer's store indices are, in index order."""
    by_var = {id(iv.var): value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    return [by_var[id(i)] for i in realize.block.body.indices]


class _InlineLoads(Mutator):
    """Replaces loads of ``buffer`` with ``value`` evaluated at the load's indices (``solve``
    gives the variables of ``value`` at a load's indices)."""

    def __init__(self, buffer: Buffer, solve: Callable[[tuple], dict], value: Any):
        self.buffer, self.solve, self.value = buffer, solve, value

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.buffer:
            return node
        return substitute(self.value, self.solve(node.indices))


def _with_reads(block: Block) -> Block:
    return block.with_changes(reads=infer_block_regions(block)[0])


def _drop_allocation(func: PrimFunc, buffer: Buffer) -> PrimFunc:
    """Remove ``buffer`` from the allocations of the block that owns it, once nothing uses it."""
    for realize in blocks_under(func.body):
        block = realize.block
        if any(b is buffer for b in block.alloc_buffers):
            kept = tuple(b for b in block.alloc_buffers if b is not buffer)
            return replace_stmts(func, {id(block): block.with_changes(alloc_buffers=kept)})
    return func


def _writers(func: PrimFunc, buffer: Buffer) -> list[BlockRealize]:
    return [r for r in blocks_under(func.body) if any(w.buffer is buffer for w in r.block.writes)]


def _readers(func: PrimFunc, buffer: Buffer) -> list[BlockRealize]:
    """The blocks reading ``buffer``: by their read regions, or (an opaque access a region does
    not name) by a load in the body of a block without blocks inside."""
    return [r for r in blocks_under(func.body) if any(x.buffer is buffer for x in r.block.reads)
            or not blocks_under(r.block.body) and any(n.buffer is buffer for n in collect(r.block.body, BufferLoad))]


def _positional(indices: tuple, block: Block) -> Callable[[tuple], dict] | None:
    """TVM's fast path: where the store's indices are the block's iterators in order (a unit
    iterator may stand as the constant 0), each iterator is the reader's index at its position
    (the unit one too: the reader's index there is 0 wherever it reads what the block wrote)."""
    ivs = block.iter_vars
    if len(indices) != len(ivs) or not all(
            index is iv.var or (is_const_int(index, 0) and is_const_int(iv.dom.min, 0) and is_const_int(iv.dom.extent, 1))
            for index, iv in zip(indices, ivs)):
        return None
    return lambda at: {iv.var: value for iv, value in zip(ivs, at)}


def compute_inline(func: PrimFunc, realize: BlockRealize) -> PrimFunc:
    block = realize.block
    store = _single_store(block, "compute_inline")
    # (a constant index, as a reindex stage's T.int64(0), is where every consumer reads too)
    _iterators_at(store.indices, block, store.indices, "compute_inline")
    buffer = store.buffer
    if any(b is buffer for b in func.buffer_map.values()):
        raise ScheduleError(f"compute_inline: block '{block.name_hint}' is an output block: it writes "
                            f"the function parameter '{buffer.name}'")
    if len(_writers(func, buffer)) != 1:
        raise ScheduleError(f"compute_inline: buffer '{buffer.name}' of block '{block.name_hint}' has "
                            f"other writers")
    inliner = _InlineLoads(buffer, _positional(store.indices, block) or
                           (lambda at: _iterators_at(store.indices, block, at, "compute_inline")), store.value)
    table: dict[int, Any] = {}
    for consumer in _readers(func, buffer):
        new = inliner.visit(consumer.block.with_changes(reads=()))
        named = any(x.buffer is buffer for x in consumer.block.reads)  # (else its reads stay opaque)
        table[id(consumer.block)] = _with_reads(new) if named else new.with_changes(reads=consumer.block.reads)
    func = remove_block(replace_stmts(func, table), block.name_hint, "compute_inline")
    if any(n.buffer is buffer for n in collect(func.body, BufferLoad)):
        raise ScheduleError(f"compute_inline: buffer '{buffer.name}' of block '{block.name_hint}' is read "
                            f"where its loads cannot be replaced")
    return _drop_allocation(func, buffer)


def reverse_compute_inline(func: PrimFunc, realize: BlockRealize) -> PrimFunc:
    block = realize.block
    name = block.name_hint
    store = _single_store(block, "reverse_compute_inline")
    produced = [r.buffer for r in block.reads if _writers(func, r.buffer)]
    if len({id(b) for b in produced}) != 1:
        raise ScheduleError(f"reverse_compute_inline: block '{name}' must read exactly one buffer "
                            f"that another block produces, it reads {len(produced)}")
    buffer = produced[0]
    writers = _writers(func, buffer)
    if len(writers) != 1 or len(_readers(func, buffer)) != 1:
        raise ScheduleError(f"reverse_compute_inline: buffer '{buffer.name}' read by block '{name}' "
                            f"must have one producer and no other consumer")
    if any(b is buffer for b in func.buffer_map.values()):
        raise ScheduleError(f"reverse_compute_inline: buffer '{buffer.name}' is a function parameter; "
                            f"the producer's result must stay")
    loads = [n for n in collect(store.value, BufferLoad) if n.buffer is buffer]
    first = loads[0].indices
    if any(len(n.indices) != len(first) or any(a is not b for a, b in zip(n.indices, first)) for n in loads):
        raise ScheduleError(f"reverse_compute_inline: block '{name}' loads '{buffer.name}' at "
                            f"different indices")
    producer = writers[0].block
    if producer.init is None and isinstance(producer.body, For):
        return _into_copy_nest(func, name, block, store, first, writers[0], buffer)
    producer_store = _single_store(producer, "reverse_compute_inline")
    producer_params = _distinct_iter_vars(producer_store.indices, producer, "reverse_compute_inline")
    _check_constant_indices(first, block, producer)
    split = _split_inverse(first, block, producer)
    mapping = split[0] if split is not None else _iterators_at(first, block, tuple(producer_params),
                                                                 "reverse_compute_inline")
    # every load reads what the producer stores at its own indices
    value = _InlineLoads(buffer, lambda at: {}, producer_store.value).visit(substitute(store.value, mapping))
    new_store = BufferStore(store.buffer, value, tuple(substitute(i, mapping) for i in store.indices))
    merged = producer.with_changes(body=new_store, reads=(), writes=())
    reads, writes = infer_block_regions(merged)
    merged = merged.with_changes(reads=reads, writes=writes)
    if split is not None:  # (a padded producer stores only what the consumer covers)
        # (the loops' bindings folded as TVM 0.27 folds them, a unit iterator's 0 put in after:
        # TVM's predicate keeps ``T.Mul(0, 16)``)
        predicate = writers[0].predicate
        pairs = list(zip(producer.iter_vars, writers[0].iter_values))
        loops = {iv.var: value for iv, value in pairs if not isinstance(value, IntImm)}
        units = {iv.var: value for iv, value in pairs if isinstance(value, IntImm)}
        for value, extent in split[1]:
            bound = LT(substitute(Analyzer(AFFINE).simplify(substitute(value, loops)), units), extent)
            predicate = bound if is_const_int(predicate, 1) else And(predicate, bound)
    else:
        predicate = _consumer_domain_predicate(block, first, writers[0])
    func = replace_stmts(func, {id(writers[0]): writers[0].with_changes(block=merged, predicate=predicate)})
    return _drop_allocation(remove_block(func, name, "reverse_compute_inline"), buffer)


def _into_copy_nest(func: PrimFunc, name: str, block: Block, store: BufferStore, first: tuple,
                    realize: BlockRealize, buffer: Buffer) -> PrimFunc:
    """reverse_compute_inline into a producer whose body is a loop nest around one store (the copy
    block of ``read_at``/``write_at``): the consumer, reading at its own iterators, is written at
    the producer's store indices, inside the producer's loops."""
    params = _distinct_iter_vars(first, block, "reverse_compute_inline")
    loops, inner = [], realize.block.body
    while isinstance(inner, For):
        loops.append(inner)
        inner = inner.body
    if not (isinstance(inner, BufferStore) and inner.buffer is buffer):
        raise ScheduleError(f"reverse_compute_inline: the loops of block '{realize.block.name_hint}' must hold "
                            f"one store to '{buffer.name}'")
    mapping = dict(zip(params, inner.indices))
    value = _InlineLoads(buffer, lambda at: {}, inner.value).visit(substitute(store.value, mapping))
    body: Any = BufferStore(store.buffer, value, tuple(substitute(i, mapping) for i in store.indices))
    for loop in reversed(loops):
        body = loop.with_changes(body=body)
    merged = realize.block.with_changes(body=body, reads=(), writes=())
    reads, writes = infer_block_regions(merged)
    merged = merged.with_changes(reads=reads, writes=writes)
    predicate = _copy_domain_predicate(block, mapping, realize, loops)
    func = replace_stmts(func, {id(realize): realize.with_changes(block=merged, predicate=predicate)})
    return _drop_allocation(remove_block(func, name, "reverse_compute_inline"), buffer)


def _copy_domain_predicate(consumer: Block, mapping: dict, realize: BlockRealize, loops: list) -> PrimExpr:
    """The copy block's predicate, and-ed with the consumer's domain at the copy's store indices
    where the copy's ranges do not prove it (a padded copy writing back a 127 x 127 result:
    ``ax0 < 127 and v0 * 64 + v1 * 32 + ax1 < 127``, the block's iterators then replaced by their
    bindings). As in TVM 0.27, the bound names the copy's own loop variables, inside the block
    (TVM prints them as free variables before it; LowerOpaqueBlock puts the guard inside the loops
    that bind them)."""
    ranges = Analyzer()
    for iv in realize.block.iter_vars:
        if isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
            ranges.bind(iv.var, iv.dom.min.value, iv.dom.extent.value)
    for loop in loops:
        if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
            ranges.bind(loop.loop_var, loop.min.value, loop.extent.value)
    bindings = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    predicate = realize.predicate
    for iv in consumer.iter_vars:
        at, low, extent = mapping[iv.var], iv.dom.min, iv.dom.extent
        bounds = [] if isinstance(low, IntImm) and (ranges.bound(at) or (low.value - 1,))[0] >= low.value \
            else [GE(at, low)]
        if not (isinstance(low, IntImm) and isinstance(extent, IntImm)
                and ranges.can_prove_less(at, low.value + extent.value)):
            bounds.append(LT(at, extent if is_const_int(low, 0) else Add(low, extent)))
        for bound in bounds:
            bound = substitute(bound, bindings)
            predicate = bound if is_const_int(predicate, 1) else And(predicate, bound)
    return predicate
