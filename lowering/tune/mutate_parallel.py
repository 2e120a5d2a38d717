"""MutateParallel: change how many outer loops a ``meta_schedule.parallel`` annotation fuses.

The annotation on a scope block carries the largest parallel extent allowed; the post-processor
then fuses, under each child block, the outer spatial loops whose product first reaches it. The
mutator replays the trace, lists the extents at which that choice changes (the prefix products
of the outer spatial loops, up to ``num_cores * max_jobs_per_core``), and writes one that makes a
different choice into the annotation.
"""
from __future__ import annotations

import random
from bisect import bisect_right
from typing import Any

from ...ir.errors import TVMSError
from ...ir.expr import DATA_PAR, IntImm
from ...ir.visitor import walk
from ..schedule.schedule import Schedule
from ..schedule.trace import Instruction, Trace
from ..schedule.tree import child_blocks, enclosing_loops, find_block, walk_with_path
from .mutator import Mutator, annotations_of, rng_or_new

PARALLEL_KEY = "meta_schedule.parallel"


def outer_spatial_products(scope: Any, limit: int) -> list[list[int]]:
    """For each child block of the ``scope`` realize: the running products of its outermost
    constant spatial loops (outermost first), stopping once one reaches ``limit``."""
    children = {id(r) for r in child_blocks(scope)}
    result = []
    for realize, path in walk_with_path(scope.block.body):
        if id(realize) not in children:
            continue
        reduction_vars = {id(v) for iv, value in zip(realize.block.iter_vars, realize.iter_values)
                          if iv.iter_type != DATA_PAR for v in walk(value)}
        products, running = [], 1
        for loop in enclosing_loops(path):
            if not isinstance(loop.extent, IntImm) or id(loop.loop_var) in reduction_vars:
                break
            running *= loop.extent.value
            products.append(running)
            if running >= limit:
                break
        if products:
            result.append(products)
    return result


def fused_loops(products: list[list[int]], limit: int) -> tuple[int, ...]:
    """How many outer loops each block fuses for a parallel extent of ``limit`` (TVM's rule: the
    loops whose product stays within it, and one more while there is one)."""
    plan = []
    for prods in products:
        i = bisect_right(prods, limit)
        if i > 0 and prods[i - 1] == limit:
            i -= 1
        plan.append(i + (i != len(prods)))
    return tuple(plan)


class MutateParallel(Mutator):
    """``MutateParallel(max_jobs_per_core)``: the largest extent tried is the target's cores
    times ``max_jobs_per_core``."""

    def __init__(self, max_jobs_per_core: int = 16) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.mod = None
        self.max_parallel_extent = 0

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.mod = context.mod
        self.max_parallel_extent = context.target.threads * self.max_jobs_per_core

    def __repr__(self) -> str:
        return f"MutateParallel(max_jobs_per_core={self.max_jobs_per_core})"

    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        if self.mod is None:
            raise TVMSError("MutateParallel needs the task's module: initialize it with a TuneContext")
        rng = rng_or_new(rng)
        annotations = [inst for inst in annotations_of(trace, (PARALLEL_KEY,)) if isinstance(inst.inputs[1], int)]
        if not annotations:
            return None
        annotation = annotations[rng.randrange(len(annotations))]
        getter = next((inst for inst in trace.insts if inst.kind == "GetSBlock"
                       and inst.outputs[0] is annotation.inputs[0]), None)
        if getter is None:
            return None
        sch = Schedule(self.mod, seed=rng.randrange(1 << 31))
        trace.apply_to_schedule(sch, remove_postproc=True)
        name, func_name = getter.attrs[0], getter.attrs[1] or sch.func_working_on
        found = find_block(sch.mod[func_name], name)
        if found is None:
            return None
        products = outer_spatial_products(found[0], self.max_parallel_extent)
        plans: dict[tuple, int] = {}
        for prods in products:
            for limit in prods:
                if limit <= self.max_parallel_extent:
                    plans[fused_loops(products, limit)] = limit
        plans.pop(fused_loops(products, annotation.inputs[1]), None)
        if not plans:
            return None
        limit = plans[sorted(plans)[rng.randrange(len(plans))]]
        changed = Instruction("Annotate", [annotation.inputs[0], limit], list(annotation.attrs),
                              list(annotation.outputs))
        insts = [changed if inst is annotation else inst for inst in trace._kept(remove_postproc=True)]
        decisions = {inst: d for inst, d in trace.decisions.items() if inst in insts}
        return Trace(insts, decisions, trace.dialect)
