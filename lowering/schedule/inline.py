"""compute_inline and reverse_compute_inline: fold a one-store block into its consumer or producer.

compute_inline replaces every load of the block's buffer with the stored expression;
reverse_compute_inline makes the producer store the consumer's expression directly. The removed
block's loops go with it, and so does the intermediate buffer's allocation. The blocks that
change get read and write regions inferred afresh.
"""
from __future__ import annotations

from typing import Any

from ...ir.analysis import infer_block_regions, substitute
from ...ir.buffer import Buffer
from ...ir.expr import BufferLoad, IntImm, Var, is_const_int
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, BufferStore
from ...ir.visitor import Mutator, collect
from .errors import ScheduleError
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


class _InlineLoads(Mutator):
    """Replaces loads of ``buffer`` with ``value`` evaluated at the load's indices."""

    def __init__(self, buffer: Buffer, params: list[Var], value: Any):
        self.buffer, self.params, self.value = buffer, params, value

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.buffer:
            return node
        return substitute(self.value, dict(zip(self.params, node.indices)))


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


def _inlined_params(store: BufferStore, block: Block) -> tuple[list[Var], Any]:
    """The store's indices as the parameters of its value, and the value: besides its own
    iterators, each once, a store may index a dimension with a constant, and an iterator of one
    value may index none (NormalizePrimFunc drops such iterators; the value reads that
    iterator's only value instead), as TVM's inliner accepts."""
    own = {id(iv.var): iv for iv in block.iter_vars}
    named = [i for i in store.indices if isinstance(i, Var)]
    unnamed = [iv for iv in block.iter_vars if not any(iv.var is v for v in named)]
    if (any(not isinstance(i, (Var, IntImm)) or isinstance(i, Var) and id(i) not in own for i in store.indices)
            or len({id(v) for v in named}) != len(named)
            or any(not (is_const_int(iv.dom.extent, 1) and isinstance(iv.dom.min, IntImm)) for iv in unnamed)):
        raise ScheduleError(f"compute_inline: block '{block.name_hint}' must store at its own iterators, "
                            f"each once (or a constant where an iterator has one value), e.g. B[vi, vj]")
    params = [i if isinstance(i, Var) else Var(f"ph_{k}", i.dtype) for k, i in enumerate(store.indices)]
    return params, substitute(store.value, {iv.var: iv.dom.min for iv in unnamed})


def compute_inline(func: PrimFunc, realize: BlockRealize) -> PrimFunc:
    block = realize.block
    store = _single_store(block, "compute_inline")
    params, value = _inlined_params(store, block)
    buffer = store.buffer
    if any(b is buffer for b in func.buffer_map.values()):
        raise ScheduleError(f"compute_inline: block '{block.name_hint}' is an output block: it writes "
                            f"the function parameter '{buffer.name}'")
    if len(_writers(func, buffer)) != 1:
        raise ScheduleError(f"compute_inline: buffer '{buffer.name}' of block '{block.name_hint}' has "
                            f"other writers")
    inliner = _InlineLoads(buffer, params, value)
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
    params = _distinct_iter_vars(first, block, "reverse_compute_inline")
    producer = writers[0].block
    producer_store = _single_store(producer, "reverse_compute_inline")
    producer_params = _distinct_iter_vars(producer_store.indices, producer, "reverse_compute_inline")
    mapping = dict(zip(params, producer_params))
    value = _InlineLoads(buffer, producer_params, producer_store.value).visit(substitute(store.value, mapping))
    new_store = BufferStore(store.buffer, value, tuple(substitute(i, mapping) for i in store.indices))
    merged = producer.with_changes(body=new_store, reads=(), writes=())
    reads, writes = infer_block_regions(merged)
    func = replace_stmts(func, {id(producer): merged.with_changes(reads=reads, writes=writes)})
    return _drop_allocation(remove_block(func, name, "reverse_compute_inline"), buffer)
