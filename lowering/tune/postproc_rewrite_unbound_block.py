"""RewriteUnboundBlock: bind the GPU threads of every block that is not under both a blockIdx
and a threadIdx loop yet, with as many threads as the target allows."""
from __future__ import annotations

from typing import Any

from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, For
from ..schedule.tree import walk_with_path
from .postproc import Postproc
from .rule_auto_bind import bind_block_thread_idx, target_max_threads, thread_rank


def _unbound_blocks(func: PrimFunc) -> list[str]:
    """The blocks directly in the root's scope without both a blockIdx and a threadIdx loop
    around them, in pre-order."""
    found = []
    for node, path in walk_with_path(func.body.block.body, (func.body, func.body.block)):
        if not isinstance(node, BlockRealize) or sum(isinstance(p, Block) for p in path) != 1:
            continue
        if not {0, 1} <= {thread_rank(p) for p in path if isinstance(p, For)}:
            found.append(node.block.name_hint)
    return found


class RewriteUnboundBlock(Postproc):
    def __init__(self, max_threadblocks: int = 256) -> None:
        self.max_threadblocks = max_threadblocks
        self.max_threads_per_block = -1

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.max_threads_per_block = target_max_threads(context)

    def apply(self, sch: Any) -> bool:
        mod = sch.mod
        todo = [(fname, name) for fname in mod if isinstance(mod[fname], PrimFunc)
                for name in _unbound_blocks(mod[fname])]
        for fname, name in todo:
            bind_block_thread_idx(sch, sch.get_sblock(name, func_name=fname), self.max_threadblocks,
                                  self.max_threads_per_block, lambda extent: min(self.max_threads_per_block, extent))
        return True
