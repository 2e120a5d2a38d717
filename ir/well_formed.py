"""The well-formedness checks of a PrimFunc: rules a program can break as it is written, checked
before it is compiled, at the position of the offending node. TVM's parser reads such programs
(its own passes print constant indices past a buffer's end: InjectSoftwarePipeline on a nested
pipeline), and so does tvms's: its text prints back.

Memory: every access that may run stays inside its buffer as far as constants tell (code under
a loop or block iterator of extent 0 never runs: the legalized code of an operator on an empty
tensor is such code).
  - A constant index (or the constant lanes of a vector index ``A[0:8]``) lies in ``[0, extent)``
    of its axis wherever that extent is a constant: ``B[4]`` of a 4-element buffer, ``B[-1]`` and
    ``B[100000000]`` are refused, in loads and stores, in blocks and in plain loops.
  - A ``T.match_buffer`` region with constant bounds lies inside its source buffer.
  - A buffer with an axis of extent 0 has no element to read: a load from it is refused.

Iteration kinds: a block with ``T.init()`` is a reduction. ``T.init()`` runs once for each value
of the block's spatial iterators, when its reduction iterators are at their start; so for every
store, in the block's body, into a buffer that the init writes:
  - each spatial iterator (of extent other than 1) appears in the indices: otherwise each of its
    values initializes the same element again, discarding what was accumulated (a matmul's ``k``
    declared ``"S"`` in ``T.axis.remap("SSS", ...)`` computes only its last product);
  - no reduction iterator appears in the indices: otherwise the elements its other values select
    are never initialized (the condition TVM's schedule checks of a reduction block).
Iterators count through the variables bound to them (lets, the bindings of nested blocks), and
a store into a block's ``T.match_buffer`` through the region it views (``BB[()]`` of
``BB = T.match_buffer(B[i], ())`` indexes ``B`` with ``i``).
A block with ``T.init()`` and no reduction iterator is not refused: its init then runs at every
iteration, which TVM's LowerInitBlock gives a meaning too.
"""
from __future__ import annotations

from typing import Any

from .buffer import Buffer, MatchBufferRegion
from .errors import ScriptError, Span
from .expr import COMM_REDUCE, DATA_PAR, Add, BufferLoad, IntImm, Mul, Ramp, Sub, Var
from .function import PrimFunc
from .node import Node, walk_fields
from .arith import simplify
from .stmt import Block, BlockRealize, BufferStore, For, LetStmt
from .visitor import collect


def verify_well_formed(func: PrimFunc) -> None:
    """Raise a ``ScriptError`` for the first rule above that ``func`` breaks, at the position of
    the offending node (or of the nearest statement around it that has one; a function built
    in Python has none: the message then names the function)."""
    try:
        _walk(func)
    except ScriptError as e:
        name = func.attrs.get("global_symbol")
        if e.span is not None or not isinstance(name, str):
            raise
        raise ScriptError(f"{name}: {e.message}", None, e.note) from None


def _walk(func: PrimFunc) -> None:
    # (iterative: the walk follows the program's nesting, which may be deep)
    stack: list = [(func.body, func.span, False)]
    while stack:
        node, span, dead = stack.pop()
        if isinstance(node, (tuple, list)):
            stack.extend((n, span, dead) for n in reversed(node))
            continue
        if not isinstance(node, Node) or isinstance(node, Buffer):
            continue  # (a buffer's own fields hold no accesses)
        span = node.span or span
        if isinstance(node, (BufferLoad, BufferStore)):
            if not dead:
                _check_access(node, span)
        elif isinstance(node, MatchBufferRegion):
            _check_region(node, span)
        elif isinstance(node, Block):
            check_block_iterators(node, span)
        elif isinstance(node, For):
            dead = dead or _never_runs(node.extent)
        elif isinstance(node, BlockRealize):
            dead = dead or any(_never_runs(iv.dom.extent) for iv in node.block.iter_vars)
        fields = walk_fields(type(node))
        for k in range(len(fields) - 1, -1, -1):  # reversed: the first field is checked first
            value = getattr(node, fields[k][0])
            if isinstance(value, (Node, tuple, list)):
                stack.append((value, span, dead))


def _never_runs(extent: Any) -> bool:
    return isinstance(extent, IntImm) and extent.value <= 0


def _is_const(e: Any, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def _shape_text(buffer: Buffer) -> str:
    dims = [str(d.value) if isinstance(d, IntImm) else getattr(d, "name", "?") for d in buffer.shape]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def _constant_span(index: Any) -> tuple[int, int] | None:
    """The least and greatest value of a constant index (a vector's lanes too, and arithmetic of
    constants such as ``T.Mul(4, 3)``, as the machine computes it), else None."""
    if isinstance(index, (Add, Sub, Mul)):
        index = simplify(index)
    if isinstance(index, IntImm):
        return index.value, index.value
    if isinstance(index, Ramp) and isinstance(index.base, IntImm) and isinstance(index.stride, IntImm) \
            and isinstance(index.lanes, int):  # (a scalable vector's end is known on the machine only)
        last = index.base.value + index.stride.value * (index.lanes - 1)
        return min(index.base.value, last), max(index.base.value, last)
    return None


def _check_indices(buffer: Buffer, indices: tuple, span: Span | None) -> None:
    for axis, (index, extent) in enumerate(zip(indices, buffer.shape)):
        bounds = _constant_span(index) if isinstance(extent, IntImm) else None
        if bounds is None:
            continue
        lo, hi = bounds
        if lo < 0 or hi >= extent.value:
            bad = lo if lo < 0 else hi
            raise ScriptError(f"index {bad} is out of bounds for axis {axis} of buffer "
                              f"{buffer.name!r} of shape {_shape_text(buffer)}", span)


def _check_access(access: BufferLoad | BufferStore, span: Span | None) -> None:
    buffer = access.buffer
    if isinstance(access, BufferLoad) and any(_is_const(d, 0) for d in buffer.shape):
        raise ScriptError(f"buffer {buffer.name!r} of shape {_shape_text(buffer)} has no elements; "
                          f"it cannot be read", span)
    _check_indices(buffer, access.indices, span)


def _check_region(match: MatchBufferRegion, span: Span | None) -> None:
    source = match.source
    for axis, (rng, extent) in enumerate(zip(source.region, source.buffer.shape)):
        if isinstance(rng.min, IntImm) and isinstance(rng.extent, IntImm) and isinstance(extent, IntImm):
            lo, hi = rng.min.value, rng.min.value + rng.extent.value
            if lo < 0 or hi > extent.value:
                raise ScriptError(f"T.match_buffer: the region {lo}:{hi} of axis {axis} is outside "
                                  f"buffer {source.buffer.name!r} of shape {_shape_text(source.buffer)}",
                                  span)


def check_block_iterators(block: Block, span: Span | None = None) -> None:
    """Raise a ``ScriptError`` if ``block``'s iteration kinds contradict its ``T.init()`` (the
    rules above), at the position of the iterator (or ``span``)."""
    if block.init is None:
        return
    outputs = {s.buffer for s in collect(block.init, BufferStore)}
    kinds = [iv for iv in block.iter_vars if iv.iter_type in (DATA_PAR, COMM_REDUCE)]
    if not outputs or not kinds:
        return
    # the block's iterators each variable of its body depends on
    depends: dict = {iv.var: frozenset((iv.var,)) for iv in kinds}

    def uses(exprs: Any) -> frozenset:
        found: frozenset = frozenset()
        for v in collect(exprs, Var):
            found |= depends.get(v, frozenset())
        return found

    views = {m.buffer: m.source.region for m in block.match_buffers}  # (BB = T.match_buffer(B[i], ()))
    for node in collect(block.body, (LetStmt, BlockRealize, BufferStore)):  # (pre-order)
        if isinstance(node, LetStmt):
            depends[node.var] = uses(node.value)
        elif isinstance(node, BlockRealize):
            for iv, value in zip(node.block.iter_vars, node.iter_values):
                depends[iv.var] = uses(value)
        elif node.buffer in outputs:
            used = uses(node.indices) | uses([r.min for r in views.get(node.buffer, ())])
            _check_store_indices(block, kinds, node, used, span)


def _check_store_indices(block: Block, kinds: list, store: BufferStore, used: frozenset,
                         span: Span | None) -> None:
    name = store.buffer.name
    for iv in kinds:
        where = iv.span or span
        if iv.iter_type == DATA_PAR and iv.var not in used and not _is_const(iv.dom.extent, 1):
            raise ScriptError(
                f"block {block.name_hint!r}: iterator {iv.var.name!r} is declared spatial but does "
                f"not index {name!r}, which the block's T.init() initializes",
                where, note="T.init() runs again for each value of a spatial iterator; declare it a "
                            "reduction iterator ('R' in T.axis.remap, or T.axis.reduce)")
        if iv.iter_type == COMM_REDUCE and iv.var in used:
            raise ScriptError(
                f"block {block.name_hint!r}: reduction iterator {iv.var.name!r} indexes {name!r}, "
                f"which the block's T.init() initializes",
                where, note="T.init() runs only where the reduction iterators start, so the other "
                            "elements would not be initialized; declare it spatial ('S' in "
                            "T.axis.remap, or T.axis.spatial)")
