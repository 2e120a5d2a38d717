"""RewriteTensorize: tensorize each block MultiLevelTilingTensorCore (and RewriteReductionBlock,
for the init) marked ``meta_schedule.auto_tensorize`` with the intrinsic it names, innermost
blocks first; the mark goes away either way (an empty name is only cleared)."""
from __future__ import annotations

from typing import Any

from ...ir.function import PrimFunc
from ...ir.stmt import BlockRealize
from ..schedule.errors import ScheduleError
from ..schedule.tree import walk_with_path
from .postproc import Postproc
from .postproc_rewrite_reduction_block import AUTO_TENSORIZE


class RewriteTensorize(Postproc):
    """``RewriteTensorize(vectorize_init_loop=False)``: as TVM's, a block that does not match its
    intrinsic stays as it is (the sample is still valid, only slower)."""

    def __init__(self, vectorize_init_loop: bool = False) -> None:
        self.vectorize_init_loop = bool(vectorize_init_loop)

    def apply(self, sch: Any) -> bool:
        jobs = []
        mod = sch.mod
        for fname in mod:
            func = mod[fname]
            if not isinstance(func, PrimFunc):
                continue
            marked = [(node.block.name_hint, node.block.annotations[AUTO_TENSORIZE])
                      for node, _ in walk_with_path(func.body) if isinstance(node, BlockRealize)
                      and AUTO_TENSORIZE in node.block.annotations]
            jobs.extend((fname, name, intrin) for name, intrin in reversed(marked))  # (inner blocks first)
        for fname, name, intrin in jobs:
            block = sch.get_sblock(name, func_name=fname)
            sch.unannotate(block, AUTO_TENSORIZE)
            if intrin:
                try:
                    sch.tensorize(block, str(intrin))
                except ScheduleError:
                    pass
            elif self.vectorize_init_loop and "init" in name:
                (child,) = sch.get_child_blocks(block)
                (loop,) = sch.get_loops(child)
                sch.vectorize(loop)
        return True
