"""RewriteReductionBlock: split each reduction block's init out (decompose_reduction) above its
first reduction loop, as code generation wants."""
from __future__ import annotations

from typing import Any

from ...ir.expr import COMM_REDUCE, DATA_PAR
from ...ir.function import PrimFunc
from ...ir.stmt import BlockRealize, For
from ..schedule.loop_transform import uses_var
from ..schedule.tree import enclosing_loops, walk_with_path
from .postproc import Postproc
from .rule_analysis import loop_iter_type

AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
AUTO_TENSORIZE_INIT = "meta_schedule.auto_tensorize_init"
_THREAD_PREFIXES = ("threadIdx", "blockIdx")


def _reduction_blocks(func: PrimFunc) -> list[tuple[str, int]]:
    """(name, decompose point) of each block with an init whose reduction iterators are not
    bound to GPU threads, in pre-order; the point is the first loop that is not data parallel."""
    found = []
    for node, path in walk_with_path(func.body):
        if not isinstance(node, BlockRealize) or node.block.init is None:
            continue
        threads = {id(p.loop_var) for p in path if isinstance(p, For) and p.thread_binding is not None
                   and p.thread_binding.thread_tag.startswith(_THREAD_PREFIXES)}
        if any(iv.iter_type == COMM_REDUCE and uses_var(value, threads)
               for iv, value in zip(node.block.iter_vars, node.iter_values)):
            continue
        point = next((i for i, loop in enumerate(enclosing_loops(path)) if loop_iter_type(loop) != DATA_PAR), -1)
        if point != -1:
            found.append((node.block.name_hint, point))
    return found


class RewriteReductionBlock(Postproc):
    def apply(self, sch: Any) -> bool:
        while True:
            mod = sch.mod
            todo = [(fname, name, point) for fname in mod if isinstance(mod[fname], PrimFunc)
                    for name, point in _reduction_blocks(mod[fname])]
            if not todo:
                return True
            for fname, name, point in todo:
                block = sch.get_sblock(name, func_name=fname)
                init = sch.decompose_reduction(block, sch.get_loops(block)[point])
                annotations = sch.get(block).annotations
                if AUTO_TENSORIZE in annotations:
                    # the init's tensor intrinsic goes to the init block (empty: none), for RewriteTensorize
                    sch.unannotate(init, AUTO_TENSORIZE)
                    init_intrin = annotations.get(AUTO_TENSORIZE_INIT)
                    sch.annotate(init, AUTO_TENSORIZE, "" if init_intrin is None else init_intrin)
                    if init_intrin is not None:
                        sch.unannotate(block, AUTO_TENSORIZE_INIT)
                        sch.unannotate(init, AUTO_TENSORIZE_INIT)
