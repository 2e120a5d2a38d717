"""AutoBind: give a GPU block that no rule bound a blockIdx.x / threadIdx.x pair of loops; the
binding itself is shared with the postprocessor RewriteUnboundBlock (TVM's thread_bind.cc)."""
from __future__ import annotations

from typing import Any, Callable

from ...ir.errors import TVMSError
from ...ir.expr import DATA_PAR
from ...ir.global_info import KIND_DEFAULTS
from ...ir.stmt import SERIAL
from ..schedule.tree import enclosing_loops
from .rule_analysis import const_int, has_been_multi_level_tiled, is_root, loop_iter_type, site
from .schedule_rule import ScheduleRule

_INT64_MAX = (1 << 63) - 1


def thread_rank(loop: Any) -> int | None:
    """0 for a blockIdx loop, 1 for a threadIdx one, None otherwise (vthread included)."""
    tag = loop.thread_binding.thread_tag if loop.thread_binding is not None else ""
    return 0 if tag.startswith("blockIdx") else 1 if tag.startswith("threadIdx") else None


def factor_sampler(sch: Any, thread_extents: list) -> Callable[[int], Any]:
    """A thread count for a loop of at most ``max_extent``: sampled among ``thread_extents`` that
    fit (the one that fits, or ``max_extent`` when none does)."""
    def sample(max_extent: int) -> Any:
        fitting = [n for n in thread_extents if n <= max_extent]
        if not fitting:
            return max_extent
        if len(fitting) == 1:
            return fitting[0]
        return sch.sample_categorical(fitting, [1.0 / len(fitting)] * len(fitting))
    return sample


def bind_spatial_loop(sch: Any, loop: Any, max_threadblocks: int, max_threads_per_block: int,
                      get_factor: Callable[[int], Any]) -> None:
    extent = const_int(sch.get(loop).extent)
    extent = _INT64_MAX if extent is None else extent
    if extent <= max_threadblocks * max_threads_per_block:
        outer, inner = sch.split(loop, [None, get_factor(min(extent, max_threads_per_block))])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    else:
        rest, blocks, threads = sch.split(loop, [None, max_threadblocks, max_threads_per_block])
        sch.reorder(blocks, threads, rest)
        sch.bind(blocks, "blockIdx.x")
        sch.bind(threads, "threadIdx.x")


def bind_block_thread_idx(sch: Any, block: Any, max_threadblocks: int, max_threads_per_block: int,
                          get_factor: Callable[[int], Any]) -> None:
    """Fuse the block's outer spatial loops (up to the first one that is not a plain serial loop
    over one statement) and bind them to blockIdx.x x threadIdx.x; a block that already has a
    threadIdx loop gets only blockIdx.x."""
    _, realize, path = site(sch, block)
    if is_root(path) or has_been_multi_level_tiled(realize.block):
        return
    loops = enclosing_loops(path)
    n = len(loops)
    i_block = next((i for i, loop in enumerate(loops) if thread_rank(loop) == 0), -1)
    i_thread = next((i for i, loop in enumerate(loops) if thread_rank(loop) == 1), -1)
    i_multi_child, i_spatial = n, -1
    for i, loop in enumerate(loops):
        if loop.kind != SERIAL:
            i_multi_child = min(i_multi_child, i)
        if hasattr(loop.body, "seq") and len(loop.body.seq) != 1:
            i_multi_child = min(i_multi_child, i + 1)
        if loop_iter_type(loop) == DATA_PAR and i_spatial == i - 1:
            i_spatial = i
    if i_block != -1 and i_thread != -1:
        return
    if i_block != -1:
        raise TVMSError(f"block '{realize.block.name_hint}' has a blockIdx loop but no threadIdx loop")
    loop_rvs = sch.get_loops(block)
    if i_spatial == -1:  # no spatial loop outside: a unit loop to bind
        loop_rvs.insert(0, sch.add_unit_loop(loop_rvs[0] if loop_rvs else block))
        i_spatial, i_multi_child = 0, i_multi_child + 1
        i_thread = i_thread + 1 if i_thread != -1 else -1
    if i_thread != -1:
        sch.bind(sch.fuse(*sch.get_loops(block)[:min(i_multi_child, i_thread, i_spatial + 1)]), "blockIdx.x")
        return
    fused = sch.fuse(*loop_rvs[:min(i_multi_child, i_spatial + 1)])
    bind_spatial_loop(sch, fused, max_threadblocks, max_threads_per_block, get_factor)


class AutoBind(ScheduleRule):
    """``AutoBind(max_threadblocks=256, thread_extents=None, max_threads_per_block=-1)``: binds the
    outer spatial loops of each block that MultiLevelTiling left alone, the thread count sampled
    from ``thread_extents`` (TVM's default 32 ... 1024)."""

    def __init__(self, max_threadblocks: int = 256, thread_extents: "list | None" = None,
                 max_threads_per_block: int = -1) -> None:
        self.max_threadblocks = max_threadblocks
        self.thread_extents = list(thread_extents or [32, 64, 128, 256, 512, 1024])
        self.max_threads_per_block = max_threads_per_block

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.max_threads_per_block = target_max_threads(context)

    def apply(self, sch: Any, block: Any) -> list:
        bind_block_thread_idx(sch, block, self.max_threadblocks, self.max_threads_per_block,
                              factor_sampler(sch, self.thread_extents))
        return [sch]


def target_limit(context: Any, name: str, who: str) -> int:
    """The tuning target's limit ``name``, which ``who`` needs: as in TVM, the target must say it,
    or its kind fill it in (``thread_warp_size`` 32 for cuda)."""
    target = getattr(context, "target", None)
    attrs = target.attrs if target is not None else {}
    value = attrs.get(name, KIND_DEFAULTS.get(getattr(target, "kind", None), {}).get(name))
    if value is None:
        raise TVMSError(f'{who}: "{name}" is not defined in the target {target} (e.g. "cuda -{name}=...")')
    return int(value)


def target_max_threads(context: Any) -> int:
    return target_limit(context, "max_threads_per_block", "binding GPU threads")
