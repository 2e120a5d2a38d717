"""LowerAutoCopy's coalescing rules (TVM 0.27's memhammer_coalesce.cc).

CoalescedAccess (a copy between global and shared memory): the copy's loops fused into one, split
into a serial loop, one loop per thread index of the kernel (z, y, x) and a vectorized loop of
``vector_bytes`` (a bound where the split overshoots), so consecutive threads touch consecutive
elements. InverseMapping (shared to global): the loops re-made over the written region, in its
order, so that the global side is the one walked contiguously; the write's indices must be a
permutation of the loop variables (TVM inverts any bijective affine map; tvms refuses the others),
and the read's those variables in loop order (which TVM assumes without checking).
"""
from __future__ import annotations

from ....ir.arith.analyzer import Analyzer
from ....ir.arith.operators import binary
from ....ir.errors import TVMSError
from ....ir.expr import Add, BufferLoad, FloorDiv, FloorMod, IntImm, IterVar, LT, Mul, Sub, THREAD_INDEX, Var, const
from ....ir.analysis import substitute
from ....ir.stmt import SERIAL, THREAD_BINDING, VECTORIZED, BufferStore, For, IfThenElse, Stmt
from ...scopes import GLOBAL, SHARED
from .auto_copy_rule import ConstraintSet, OutputSet, copies_between, nest_of, with_suffix

THREAD_TAGS = ("threadIdx.z", "threadIdx.y", "threadIdx.x")  # (the split's order, outermost first)


def fuse_nest_loops(stmt: Stmt, constraints: ConstraintSet) -> For:
    """The perfect loop nest ``stmt`` as one serial loop ``<outer>_<inner>..._fused``."""
    loops, _ = nest_of(stmt, "coalescing", constraints, guarded=True)
    body = loops[-1].body
    fused = with_suffix(loops[0].loop_var, "".join("_" + loop.loop_var.name for loop in loops[1:]) + "_fused")
    mapping, rest = {}, fused
    for loop in reversed(loops):
        mapping[loop.loop_var] = binary(FloorMod, rest, loop.extent)
        rest = binary(FloorDiv, rest, loop.extent)
    extent = const(1)
    for loop in loops:
        extent = binary(Mul, extent, loop.extent)
    return For(fused, const(0), extent, SERIAL, substitute(body, mapping))


def split_bind_vectorize(loop: For, constraints: ConstraintSet) -> For:
    """``loop`` split into serial, thread-bound (threadIdx.z, .y, .x as the kernel has them) and
    vectorized loops; the body bounded where the split covers more than the loop."""
    if not isinstance(loop.extent, IntImm):
        raise TVMSError(f"LowerAutoCopy (coalescing): block {constraints.block!r} copies a symbolic extent")
    extent = loop.extent.value
    vector_len = max(1, constraints.vector_bytes * 8 // constraints.data_bits)
    tags = [tag for tag in THREAD_TAGS if tag in constraints.thread_extent]
    threads = 1
    for tag in tags:
        threads *= constraints.thread_extent[tag]
    factors = [-(-extent // (threads * vector_len)), *(constraints.thread_extent[tag] for tag in tags), vector_len]
    new_vars = [with_suffix(loop.loop_var, f"_{i}") for i in range(len(factors))]
    analyzer = Analyzer()
    value = const(0, loop.loop_var.dtype)
    for var, factor in zip(new_vars, factors):
        analyzer.bind(var, 0, factor)
        value = binary(Add, binary(Mul, value, factor), var)
    body = substitute(loop.body, {loop.loop_var: value})
    if not analyzer.can_prove_less(value, extent):
        body = IfThenElse(binary(LT, value, loop.extent), body)
    body = For(new_vars[-1], const(0), const(vector_len), VECTORIZED, body)
    for var, factor, tag in reversed(list(zip(new_vars[1:-1], factors[1:-1], tags))):
        body = For(var, const(0), const(factor), THREAD_BINDING, body,
                   thread_binding=IterVar(None, Var(tag), THREAD_INDEX, tag))
    return For(new_vars[0], const(0), const(factors[0]), SERIAL, body)


def coalesce(stmt: Stmt, constraints: ConstraintSet) -> For:
    return split_bind_vectorize(fuse_nest_loops(stmt, constraints), constraints)


def coalesced_access(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if copies_between(constraints, GLOBAL, SHARED) or copies_between(constraints, SHARED, GLOBAL):
        return coalesce(stmt, constraints)
    return stmt


def inverse_mapping(stmt: Stmt, constraints: ConstraintSet, output: OutputSet) -> Stmt:
    if not copies_between(constraints, SHARED, GLOBAL):
        return stmt
    loops, store = nest_of(stmt, "inverse mapping", constraints)
    write, read = constraints.write_region, constraints.read_region
    if store.buffer is not write.buffer or len(store.indices) != len(write.region):
        raise TVMSError(f"LowerAutoCopy (inverse mapping): block {constraints.block!r} must store to its written region")
    analyzer = Analyzer()
    pattern = [e for e in (analyzer.simplify(binary(Sub, index, r.min)) for index, r in zip(store.indices, write.region))
               if not (isinstance(e, IntImm) and e.value == 0)]
    loop_vars = [loop.loop_var for loop in loops]
    # the j-th non-zero written index names the loop that walks the j-th output variable
    if sorted(map(id, pattern)) != sorted(map(id, loop_vars)):
        raise TVMSError(f"LowerAutoCopy (inverse mapping): block {constraints.block!r} writes indices that are not a "
                        "permutation of its loops (tvms inverts no other map)")
    load = store.value
    walked = [] if not isinstance(load, BufferLoad) or load.buffer is not read.buffer else \
        [analyzer.simplify(binary(Sub, index, r.min)) for index, r in zip(load.indices, read.region) if not _is_one(r.extent)]
    if len(walked) != len(loop_vars) or any(a is not b for a, b in zip(walked, loop_vars)):
        # (TVM reads the source at the inverse of the loops in their order, assuming so)
        raise TVMSError(f"LowerAutoCopy (inverse mapping): block {constraints.block!r} must read its source "
                        "at its loops' variables, in their order")
    inverse = {var: loop_vars[pattern.index(var)] for var in loop_vars}
    write_index, new_vars, extents, renamed = [], [], [], {}
    j = 0
    for r in write.region:
        if _is_one(r.extent):
            write_index.append(r.min)
        else:
            var = with_suffix(loop_vars[j], "_inverse")
            new_vars.append(var)
            extents.append(r.extent)
            renamed[loop_vars[j]] = var
            write_index.append(binary(Add, r.min, var))
            j += 1
    read_index, j = [], 0
    for r in read.region:
        if _is_one(r.extent):
            read_index.append(r.min)
        else:
            read_index.append(binary(Add, r.min, substitute(inverse[loop_vars[j]], renamed)))
            j += 1
    result: Stmt = BufferStore(write.buffer, BufferLoad(read.buffer, tuple(read_index)), tuple(write_index))
    # each loop walks the extent of the dimension it writes (TVM takes the region's i-th extent for
    # the i-th loop, wrong where a size-1 dimension comes first)
    for var, extent in reversed(list(zip(new_vars, extents))):
        result = For(var, const(0), extent, SERIAL, result)
    return result


def _is_one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


__all__ = ["coalesced_access", "inverse_mapping", "coalesce", "fuse_nest_loops", "split_bind_vectorize"]
