"""``Fallback``: the GPU schedule of last resort (TVM's ``dl.gpu.Fallback``).

Everything that inlines is inlined; then each block left gets its spatial loops fused and split
into ``blockIdx.x`` x ``threadIdx.x`` (the target's most threads per block), its reduction loops
kept serial inside each thread, their initialisation split off.
"""
from __future__ import annotations

from typing import Any

from ...ir import stmt as S
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ..schedule import Schedule
from .gpu_base import GPURule, max_threads_per_block, normalize_prim_func, try_inline


class Fallback(GPURule):
    name = "Fallback"

    def apply(self, func: PrimFunc, target: Any, tunable: bool) -> Schedule | None:
        if not isinstance(func, PrimFunc) or not self.is_target_available(target):
            return None
        threads = max_threads_per_block(target)
        sch = Schedule(func)
        infos = normalize_prim_func(sch)
        if infos is None:
            return None
        reductions = []
        for info in try_inline(sch, infos):
            block = info.rv
            loops = sch.get_loops(block)
            if any(sch.get(lp).thread_binding is not None for lp in loops):
                continue
            if not loops and _launches_threads(sch.get(block).body):
                continue  # (a block launching its own threads, as an opaque sort kernel does)
            by_kind: dict[str, list] = {"S": [], "R": [], "O": []}
            for loop, kind in zip(loops, info.dom_kind()):
                by_kind[kind].append(loop)
            if not by_kind["S"]:
                by_kind["S"].append(sch.add_unit_loop(block))
            sch.reorder(*by_kind["S"], *by_kind["R"], *by_kind["O"])
            bx, tx = sch.split(sch.fuse(*by_kind["S"]), factors=[None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            if by_kind["R"]:
                reductions.append((block, by_kind["R"][0]))
        for block, loop in reductions:
            sch.decompose_reduction(block, loop)
        return sch


def _launches_threads(stmt: S.Stmt) -> bool:
    return (any(a.attr_key in ("thread_extent", "virtual_thread") for a in collect(stmt, S.AttrStmt))
            or any(f.kind == S.THREAD_BINDING for f in collect(stmt, S.For)))


__all__ = ["Fallback"]
