"""CrossThreadReduction: on the GPU, reduce with the threads of a block: the reduction loops fused
and split so that the inner part is bound to threadIdx.x (TVM's rule of the same name)."""
from __future__ import annotations

from typing import Any

from ...ir.errors import TVMSError
from ...ir.expr import DATA_PAR
from ...ir.stmt import Block, For
from .rule_add_rfactor import reorder_and_fuse_reduction_loops
from .rule_analysis import loop_iter_type, needs_multi_level_tiling, needs_rfactor, site
from .rule_auto_bind import thread_rank
from .schedule_rule import ScheduleRule


class CrossThreadReduction(ScheduleRule):
    """``CrossThreadReduction(thread_extents)``: for a reduction block with little spatial
    parallelism, a branch where its reduction runs across ``threadIdx.x`` (the thread count sampled
    from ``thread_extents``), computed in shared memory at its consumer when the consumer's loops
    allow; the schedule as it was stays as the second branch. Targets without
    ``max_threads_per_block`` and ``thread_warp_size`` get no branch."""

    def __init__(self, thread_extents: list) -> None:
        if any(int(n) <= 0 for n in thread_extents):
            raise TVMSError("CrossThreadReduction: the candidates of thread extent must be positive")
        self.thread_extents = [int(n) for n in thread_extents]
        self.max_threads_per_block = self.warp_size = -1

    def _initialize_with_tune_context(self, context: Any) -> None:
        attrs = context.target.attrs if getattr(context, "target", None) is not None else {}
        self.max_threads_per_block = attrs.get("max_threads_per_block", -1)
        self.warp_size = attrs.get("thread_warp_size", -1)

    def apply(self, sch: Any, block: Any) -> list:
        if -1 in (self.max_threads_per_block, self.warp_size):
            return [sch]
        _, realize, path = site(sch, block)
        if not needs_rfactor(realize, path, self.max_threads_per_block):
            return [sch]
        branch = sch.copy()
        branch.seed(sch.fork_seed())
        target = _compute_target(branch, block)
        n = len(self.thread_extents)
        threads = branch.sample_categorical(self.thread_extents, [1.0 / n] * n)
        if target is not None:
            loop, consumer, innermost = target
            if not any(thread_rank(branch.get(rv)) == 1 for rv in branch.get_loops(consumer)):
                outer, inner = branch.split(innermost, [None, threads])
                branch.bind(inner, "threadIdx.x")
                loop = outer if innermost is loop else loop
            else:
                threads = _thread_extent_in_trace(branch)
            branch.compute_at(block, loop, preserve_unit_loops=True)
            branch.set_scope(block, 0, "shared")
        fused, _ = reorder_and_fuse_reduction_loops(branch, block)
        _, inner = branch.split(fused, [None, threads])
        branch.bind(inner, "threadIdx.x")
        return [branch, sch]


def _compute_target(sch: Any, block: Any) -> tuple | None:
    """(loop of the first consumer to compute the block at, the consumer, the consumer's innermost
    loop), or None when the block stays where it is (TVM's GetComputeTargetLoopAndBlock)."""
    if len(sch.get(block).writes) != 1:
        return None
    consumers = sch.get_consumers(block)
    if not consumers:
        return None
    _, first, first_path = site(sch, consumers[0])
    if needs_multi_level_tiling(first, first_path):
        return None
    lca = None  # the consumers' lowest common ancestor; one consumer is its own
    if len(consumers) > 1:
        paths = [tuple(p for p in site(sch, c)[2] if isinstance(p, (Block, For))) for c in consumers]  # (srefs)
        common = paths[0]
        for other in paths[1:]:
            common = common[:next((i for i, (a, b) in enumerate(zip(common, other)) if a is not b),
                                  min(len(common), len(other)))]
        lca = common[-1] if common else None
        if not isinstance(lca, For):
            return None
    target_loops = sch.get_loops(consumers[0])
    block_loops = sch.get_loops(block)
    position = min(len(block_loops), len(target_loops)) - 1
    for i in range(min(len(block_loops), len(target_loops))):
        if loop_iter_type(sch.get(block_loops[i])) != DATA_PAR:
            position = i - 1
            break
        if lca is not None and sch.get(target_loops[i]) is lca:
            position = i
            break
    if position < 0:
        return None
    return target_loops[position], consumers[0], target_loops[-1]


def _thread_extent_in_trace(sch: Any) -> Any:
    """The factor that split off the loop the trace bound to threadIdx.x."""
    insts = sch.trace.insts
    for inst in insts:
        if inst.kind == "Bind" and inst.attrs[0] == "threadIdx.x":
            for split in insts:
                if split.kind == "Split" and inst.inputs[0] in split.outputs:
                    factor = split.inputs[1 + split.outputs.index(inst.inputs[0])]
                    if factor is None:
                        raise TVMSError("the extent of threadIdx.x is inferred by its split, which "
                                        "CrossThreadReduction cannot read")
                    return factor
    raise TVMSError('unable to get the extent of "threadIdx.x" from the trace')
