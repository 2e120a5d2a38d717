"""LowerAutoCopy's padding of shared memory (TVM 0.27's AutoPadder, memhammer_lower_auto_copy.cc).

After the copies are rewritten, each access to a shared buffer in them is read as one warp would
make it: the loops outside the warp's threads at their first value, the thread indices over the
part of the warp they span (x first). Each index is summarized as a sum of ``extent`` values
stepped by ``scale`` (``tx * 4`` with tx < 16: 16 values 4 apart), which lists the values the
warp touches per dimension. Then, from the next-to-last dimension out, the row stride gets the
padding (up to a quarter of the row, by steps of the least padding the accesses need: a
vectorized access or a tensor-core tile) whose 32 banks of 4 bytes see the fewest hits of one
bank; the buffer takes those strides. The summary follows TVM's exactly, quirks included (a sum
keeps only the terms that chain into the first), so that the padding is TVM's.
"""
from __future__ import annotations

from ....ir.analysis import substitute
from ....ir.arith.analyzer import Analyzer
from ....ir.arith.operators import binary
from ....ir.expr import Add, BufferLoad, Call, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, const
from ....ir.stmt import THREAD_BINDING, VECTORIZED, Block, BlockRealize, BufferStore, Evaluate, For, Stmt
from ....ir.visitor import Visitor, children
from ...schedule.cache import BufferSwap
from ...scopes import SHARED, storage_rank

MAX_PAD_FACTOR = 0.25


class _Patterns:
    """TVM's PatternCollector: one stack of (extent, scale) lists, shared by the indices of one
    access, whose failure is shared too."""

    def __init__(self, ranges: dict) -> None:
        self.ranges = ranges
        self.stack: list = []
        self.ok = True

    def visit(self, e) -> None:
        if not self.ok:
            return
        if isinstance(e, Var):
            extent = self.ranges.get(e)
            if extent is None:  # (TVM fails looking it up)
                self.ok = False
                return
            self.stack.append([(extent, 1)] if extent > 1 else [])
            return
        if isinstance(e, (Add, FloorDiv, FloorMod, Mul)):
            self.visit(e.a)
            self.visit(e.b)
            if not self.ok:
                return
            if isinstance(e, Add):
                if len(self.stack) < 2:
                    self.ok = False
                    return
                right, left = self.stack.pop(), self.stack.pop()
                self.stack.append(_merged(left + right))
                return
            if not isinstance(e.b, IntImm) or not self.stack:
                self.ok = False
                return
            inner, c = self.stack.pop(), e.b.value
            if isinstance(e, Mul):
                self.stack.append([(extent, scale * c) for extent, scale in inner])
            elif isinstance(e, FloorDiv):
                self.stack.append(self._divided(inner, c))
            else:
                self.stack.append(self._modded(inner, c))
            return
        for child in e.indices if isinstance(e, BufferLoad) else children(e):  # (operands, nothing popped)
            self.visit(child)

    def _divided(self, inner: list, c: int) -> list:
        result = []
        for extent, scale in inner:
            if scale >= c:
                if scale % c:
                    self.ok = False
                result.append((extent, scale // c))
            elif scale * extent > c:
                if (scale * extent) % c:
                    self.ok = False
                result.append((extent * scale // c, 1))
        return result

    def _modded(self, inner: list, c: int) -> list:
        result = []
        for extent, scale in inner:
            if scale < c:
                if c % scale:
                    self.ok = False
                result.append((min(c // scale, extent), scale))
        return result

    def iteration_space(self, indices) -> list:
        """Per index, the values it takes over the warp (empty where it is not summarized)."""
        spaces = []
        for index in indices:
            self.visit(index)
            if self.ok and len(self.stack) == 1:
                patterns = self.stack.pop()
                count = 1
                for extent, _ in patterns:
                    count *= extent
                space = []
                for thread in range(count):
                    value, n = 0, thread
                    for extent, scale in reversed(patterns):
                        value += n % extent * scale
                        n //= extent
                    space.append(value)
                spaces.append(space)
            else:
                spaces.append([])
        return spaces


def _merged(patterns: list) -> list:
    """TVM's merge of a sum's terms: a term whose span ends at the last kept term's scale joins
    it; the others are dropped."""
    if not patterns:
        return []
    result = [patterns[0]]
    for extent, scale in patterns:
        last_extent, last_scale = result[-1]
        if extent * scale == last_scale:
            result[-1] = (last_extent * extent, scale)
    return result


class AutoPadder:
    """The padding state of one function: the accesses seen per shared buffer, their least
    paddings, and the padded buffers by their originals."""

    def __init__(self) -> None:
        self.spaces: dict = {}  # buffer -> per access, per dimension, the values the warp touches
        self.padding_min: dict = {}
        self.padded: dict = {}

    def least(self, buffer, padding: int) -> None:
        self.padding_min[buffer] = max(padding, self.padding_min.get(buffer, 1))

    def analyze(self, stmt: Stmt, outer_loops, thread_extent: dict) -> None:
        """Record the shared accesses of the rewritten copy ``stmt`` as a warp makes them."""
        warp, threads = {}, 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            extent = thread_extent.get(tag, 1)
            if threads * extent >= 32:
                warp[tag] = 32 // threads
                break
            warp[tag] = extent
            threads *= extent
        _Accesses(self, {loop.loop_var: loop.min for loop in outer_loops}, warp).visit(stmt)

    def pad(self, buffers) -> tuple:
        """``buffers`` with the shared ones that were accessed given padded strides."""
        return tuple(self._padded(b) if storage_rank(b.scope) == SHARED and self.spaces.get(b)
                     and all(isinstance(e, IntImm) for e in b.shape) else b for b in buffers)  # (no symbolic rows)

    def _padded(self, buffer):
        spaces = self.spaces[buffer]
        n, bits = len(buffer.shape), buffer.dtype.bits
        period = 32 * 32 // bits
        low = [space[n - 1] for space in spaces]
        stride, strides = 1, []
        step = self.padding_min.get(buffer, 1)
        for k in range(n - 2, -1, -1):
            row = stride * buffer.shape[k + 1].value
            best, best_pad = None, -1
            for pad in range(0, min(int(MAX_PAD_FACTOR * row), period) + 1, step):
                padded = (row + pad) % period
                conflict = 0
                for space, lows in zip(spaces, low):
                    banks = [0] * 32
                    for v1 in space[k]:
                        for v2 in lows:
                            banks[(v1 * padded + v2) * bits // 32 % 32] += 1
                    conflict = max(conflict, *banks)
                if best is None or conflict < best:
                    best, best_pad = conflict, pad
            padded = (row + best_pad) % period
            low = [[(v1 * padded + v2) * bits % period for v1 in space[k] for v2 in lows] if space[k] else lows
                   for space, lows in zip(spaces, low)]
            stride = row + best_pad
            strides.append(stride)
        new = buffer.with_changes(strides=tuple(const(s) for s in reversed(strides)) + (const(1),))
        self.padded[buffer] = new
        return new

    def rewrite(self, stmt: Stmt) -> Stmt:
        """``stmt`` with every use of a padded buffer moved to the padded one."""
        return BufferSwap(self.padded).visit(stmt) if self.padded else stmt


class _Accesses(Visitor):
    """TVM's IterSpaceAnalyzer: the shared accesses of a copy as the first warp makes them."""

    def __init__(self, padder: AutoPadder, first: dict, warp: dict) -> None:
        self.padder, self.first, self.warp = padder, dict(first), warp
        self.ranges: dict = {}
        self.vector = None  # (the vectorized loop's variable and extent)

    def visit_For(self, loop: For) -> None:
        if loop.kind == THREAD_BINDING:
            self.ranges[loop.loop_var] = self.warp.get(loop.thread_binding.thread_tag, 1)
        else:
            self.first[loop.loop_var] = loop.min
        if loop.kind == VECTORIZED and isinstance(loop.extent, IntImm):
            self.vector = (loop.loop_var, loop.extent.value)
        self.generic_visit(loop)
        if loop.kind == VECTORIZED:
            self.vector = None
        self.first.pop(loop.loop_var, None)

    def _record(self, buffer, indices, last) -> None:
        if storage_rank(buffer.scope) != SHARED:
            return
        analyzer = Analyzer()
        at_first = [analyzer.simplify(substitute(e, self.first)) for e in indices]
        space = _Patterns(self.ranges).iteration_space(at_first)
        if space:
            self.padder.spaces.setdefault(buffer, []).append(space)
        if self.vector is not None and self._contiguous(at_first[-1] if last is None else last):
            self.padder.least(buffer, self.vector[1])

    def _contiguous(self, e) -> bool:
        """Whether ``e`` may step by one with the vectorized loop (not disproved, as TVM asks)."""
        var = self.vector[0]
        step = binary(Sub, substitute(e, {var: const(1, var.dtype)}), substitute(e, {var: const(0, var.dtype)}))
        step = Analyzer().simplify(substitute(step, self.first))
        return not (isinstance(step, IntImm) and step.value != 1)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self._record(store.buffer, store.indices, store.indices[-1] if store.indices else None)
        self.generic_visit(store)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self._record(load.buffer, load.indices, None)
        self.generic_visit(load)

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        self.visit_Block(realize.block)

    def visit_Block(self, block: Block) -> None:
        """A tensor-core load or store: the shared tile it matches, walked whole (the block's
        body is not visited otherwise, as in TVM)."""
        body = block.body
        if not (isinstance(body, Evaluate) and isinstance(body.value, Call)
                and getattr(body.value.op, "name", "") in ("tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync")):
            return
        for match in block.match_buffers:
            source = match.source
            if storage_rank(source.buffer.scope) != SHARED or not all(isinstance(r.extent, IntImm)
                                                                     for r in source.region):
                continue
            indices = []
            for i, r in enumerate(source.region):
                var = Var(f"region{i}")
                self.ranges[var] = r.extent.value
                indices.append(binary(Add, r.min, var))
            analyzer = Analyzer()
            at_first = [analyzer.simplify(substitute(e, self.first)) for e in indices]
            space = _Patterns(self.ranges).iteration_space(at_first)
            if space:
                self.padder.spaces.setdefault(source.buffer, []).append(space)


__all__ = ["AutoPadder"]
