"""RewriteCooperativeFetch: the caches MultiLevelTiling marked ``meta_schedule.cooperative_fetch``
are fetched by all the threads of the block: their fused loop is split by the thread extents the
trace bound (threadIdx.x, and threadIdx.y when bound) and by the sampled vector length."""
from __future__ import annotations

from typing import Any

from ...ir.expr import BufferLoad, Call, Cast
from ...ir.stmt import BufferStore
from ...ir.visitor import walk
from .postproc import Postproc
from .rule_analysis import const_int

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
WARP_EXECUTION = "warp_execution"
_EIGHT_BYTE_CALLS = ("tir.q_multiply_shift", "tir.q_multiply_shift_per_axis")


def _max_dtype_bytes(block: Any) -> int:
    """The widest element the block stores, loads or casts to, in bytes."""
    widest = 1
    for node in walk(block.body):
        if isinstance(node, BufferStore):
            widest = max(widest, node.value.dtype.bits * node.value.dtype.lanes // 8)
        elif isinstance(node, (BufferLoad, Cast)):
            widest = max(widest, node.dtype.bits * node.dtype.lanes // 8)
        elif isinstance(node, Call) and getattr(node.op, "name", None) in _EIGHT_BYTE_CALLS:
            widest = max(widest, 8)
    return widest


class RewriteCooperativeFetch(Postproc):
    def __init__(self) -> None:
        self.thread_warp_size = -1

    def _initialize_with_tune_context(self, context: Any) -> None:
        target = getattr(context, "target", None)
        self.thread_warp_size = target.attrs.get("thread_warp_size", -1) if target is not None else -1

    def apply(self, sch: Any) -> bool:
        extent_x = extent_y = -1
        tasks = []
        for inst in sch.trace.insts:
            if inst.kind == "Bind" and inst.attrs[0] in ("threadIdx.x", "threadIdx.y"):
                extent = const_int(sch.get(inst.inputs[0]).extent)
                if inst.attrs[0] == "threadIdx.x":
                    extent_x = extent
                else:
                    extent_y = extent
            elif inst.kind == "Annotate" and inst.attrs[0] == WARP_EXECUTION:
                extent_x = self.thread_warp_size
            elif inst.kind == "Annotate" and inst.attrs[0] == COOPERATIVE_FETCH:
                tasks.append((inst.inputs[0], sch.get(inst.inputs[1]), extent_x, extent_y))
        for block, lane, x, y in tasks:
            _fetch_cooperatively(sch, block, lane, x, y)
        return True


def _fetch_cooperatively(sch: Any, block: Any, lane: int, x: int, y: int) -> None:
    sch.unannotate(block, COOPERATIVE_FETCH)
    fused = sch.get_loops(block)[-1]
    extent = const_int(sch.get(fused).extent)
    if extent is None:
        return
    if extent % lane or _max_dtype_bytes(sch.get(block)) > 4:
        lane = 1
    factors = [None] + ([y] if y != -1 else []) + [x] + ([lane] if lane > 1 else [])
    loops = sch.split(fused, factors)
    if lane > 1:
        sch.vectorize(loops[-1])
        loops = loops[:-1]
    sch.bind(loops[-1], "threadIdx.x")
    if y != -1:
        sch.bind(loops[-2], "threadIdx.y")
