"""RewriteParallelVectorizeUnroll: turn the root block's ``meta_schedule.parallel`` /
``vectorize`` / ``unroll_*`` marks into parallel, vectorized and unrolled loops of each block."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...ir.analysis import substitute
from ...ir.arith.analyzer import Analyzer
from ...ir.expr import DATA_PAR, Add, IntImm, Mul, Var
from ...ir.function import PrimFunc
from ...ir.stmt import THREAD_BINDING, BlockRealize, For, SeqStmt
from ..schedule.errors import ScheduleError
from ..schedule.tree import enclosing_loops
from .postproc import Postproc
from .rule_analysis import const_int, is_spatial, loop_iter_type, site
from .rule_parallel_vectorize_unroll import PARALLEL, UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE

_MARKS = (PARALLEL, VECTORIZE, UNROLL_EXPLICIT, UNROLL_IMPLICIT)


@dataclass(frozen=True)
class _Plan:
    """What the marks ask (-1: not asked) and how many outer / inner loops get it."""

    max_parallel_extent: int = -1
    max_vectorize_extent: int = -1
    unroll_explicit: int = -1
    unroll_implicit: int = -1
    num_parallel_loops: int = -1
    num_vectorize_loops: int = -1


def _stride(e: Any, var: Var) -> int:
    """The coefficient of ``var`` in a sum of products by constants (0: it does not appear so);
    e.g. 6 for ``x`` in ``(x * 2 + 1) * 3 + 1``, as TVM's StrideExtractor reads it."""
    if e is var:
        return 1
    if isinstance(e, Mul):
        for scale, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(scale, IntImm) and (inner := _stride(other, var)):
                return inner * scale.value
        return 0
    if isinstance(e, Add):
        found = [s for s in (_stride(e.a, var), _stride(e.b, var)) if s]
        return min(found) if found else 0
    return 0


def _single(body: Any) -> bool:
    return not isinstance(body, SeqStmt) or len(body.seq) == 1


def _free(loop: For) -> bool:
    """No thread binding and no annotation: a loop the rewrite may take."""
    return loop.kind != THREAD_BINDING and not loop.annotations


def _max_fusible(realize: BlockRealize, loops: list[For]) -> int:
    """How many innermost loops walk every buffer the block touches contiguously (they can be
    fused into one vector loop)."""
    binding = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    analyzer = Analyzer()
    best = None
    for access in realize.block.reads + realize.block.writes:
        indices = [analyzer.simplify(substitute(rng.min, binding)) for rng in access.region]
        strides = []
        for loop in loops:
            stride, buffer_stride = 0, 1
            for index, dim in zip(reversed(indices), reversed(access.buffer.shape)):
                coef = _stride(index, loop.loop_var)
                if coef:
                    stride = coef * buffer_stride
                    break
                if const_int(dim) is None:
                    return 0
                buffer_stride *= const_int(dim)
            strides.append(stride)
        fusible, previous = 0, -1
        for i in range(len(strides) - 1, -1, -1):
            if strides[i] == 0:
                fusible += 1
            elif previous == -1:
                if strides[i] != 1 and fusible != 0:
                    break
                fusible, previous = fusible + 1, i
            elif (extent := const_int(loops[previous].extent)) is not None and strides[i] == strides[previous] * extent:
                fusible, previous = fusible + 1, i
            else:
                break
        best = fusible if best is None else min(best, fusible)
    return len(loops) * 2 if best is None else best  # (no access: nothing limits it)


def _adjust(plan: _Plan, realize: BlockRealize, loops: list[For]) -> _Plan:
    """TVM's AdjustParallelVectorize: the outer loops to fuse and parallelize and the inner ones
    to fuse and vectorize, within the marks' extents."""
    if plan.max_parallel_extent == -1 and plan.max_vectorize_extent == -1:
        return plan
    n = len(loops)
    kinds = [loop_iter_type(loop) for loop in loops]
    max_fusible = _max_fusible(realize, loops)
    rewritable = sum(_free(loop) and kind == DATA_PAR and _single(loop.body) and const_int(loop.extent) is not None
                     for loop, kind in zip(loops, kinds))
    num_parallel, num_vectorize = plan.num_parallel_loops, plan.num_vectorize_loops
    if plan.max_parallel_extent != -1:
        num_parallel, product = 0, 1
        for loop, kind in zip(loops, kinds):
            extent = const_int(loop.extent)
            if kind != DATA_PAR or not _free(loop) or extent is None:
                break
            num_parallel, product = num_parallel + 1, product * extent
            if product > plan.max_parallel_extent or not _single(loop.body):
                break
        num_parallel = -1 if product == 1 else num_parallel
    if plan.max_vectorize_extent != -1:
        num_vectorize, product = 0, 1
        for loop, kind in reversed(list(zip(loops, kinds))):
            extent = const_int(loop.extent)
            if (kind != DATA_PAR or num_vectorize >= max_fusible or not _free(loop) or not _single(loop.body)
                    or extent is None):
                break
            product *= extent
            if product > plan.max_vectorize_extent:
                break
            num_vectorize += 1
        num_vectorize = -1 if product == 1 else num_vectorize
    if num_parallel != -1 and num_vectorize != -1:
        if rewritable == n and max_fusible == n:
            num_parallel = num_vectorize = n
        else:
            num_parallel = min(num_parallel, n - num_vectorize)
    return replace(plan, num_parallel_loops=num_parallel, num_vectorize_loops=num_vectorize)


def _annotated_root(sch: Any) -> tuple[Any, _Plan] | None:
    """The first function's root block carrying marks, with the marks read and removed."""
    mod = sch.mod
    for fname in mod:
        func = mod[fname]
        if not isinstance(func, PrimFunc) or not isinstance(func.body, BlockRealize):
            continue
        annotations = func.body.block.annotations
        found = [key for key in _MARKS if key in annotations]
        if not found:
            continue
        root = sch.get_sblock(func.body.block.name_hint, func_name=fname)
        values = {key: annotations[key] for key in found}
        for key in found:
            sch.unannotate(root, key)
        fields = ("max_parallel_extent", "max_vectorize_extent", "unroll_explicit", "unroll_implicit")
        return root, _Plan(**{f: int(values[k]) for f, k in zip(fields, _MARKS) if isinstance(values.get(k), int)})
    return None


class RewriteParallelVectorizeUnroll(Postproc):
    def apply(self, sch: Any) -> bool:
        while (found := _annotated_root(sch)) is not None:
            root, root_plan = found
            for block in sch.get_child_blocks(root):
                loop_rvs = sch.get_loops(block)
                if not loop_rvs:
                    continue
                _, realize, path = site(sch, block)
                plan = _adjust(root_plan, realize, enclosing_loops(path))  # (the loops of loop_rvs)
                try:
                    _rewrite(sch, block, loop_rvs, plan)
                except ScheduleError:
                    return False
        return True


def _rewrite(sch: Any, block: Any, loop_rvs: list, plan: _Plan) -> None:
    n = len(loop_rvs)
    if plan.num_parallel_loops == n and plan.num_vectorize_loops == n:
        outer, inner = sch.split(sch.fuse(*loop_rvs), [None, plan.max_vectorize_extent])
        sch.parallel(outer)
        sch.vectorize(inner)
        loop_rvs = [outer] * (n - 1) + [inner]
    else:
        if plan.num_parallel_loops > 0:
            fused = sch.fuse(*loop_rvs[:plan.num_parallel_loops])
            sch.parallel(fused)
            loop_rvs = [fused] * plan.num_parallel_loops + loop_rvs[plan.num_parallel_loops:]
        if plan.num_vectorize_loops > 0:
            fused = sch.fuse(*loop_rvs[n - plan.num_vectorize_loops:])
            sch.vectorize(fused)
            loop_rvs = loop_rvs[:n - plan.num_vectorize_loops] + [fused] * plan.num_vectorize_loops
    if plan.unroll_explicit != -1 or plan.unroll_implicit != -1:
        max_step = plan.unroll_explicit + plan.unroll_implicit + 1
        if max_step > 0 and not is_spatial(sch.get(block)):
            sch.annotate(loop_rvs[0], "pragma_auto_unroll_max_step", max_step)
            sch.annotate(loop_rvs[0], "pragma_unroll_explicit", int(plan.unroll_explicit != -1))
