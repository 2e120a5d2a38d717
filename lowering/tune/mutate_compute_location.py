"""MutateComputeLocation: move a block that ``sample_compute_location`` placed to another place.

The trace is replayed on the task's module; at each ``sample_compute_location`` the places the
block can go at that point are collected, numbered as the sampler numbers them (inlined -2, the
root -1, a loop's position among its first consumer's loops), and one instruction's decision is
changed to another of them.
"""
from __future__ import annotations

import random
from typing import Any

from ...ir.errors import TVMSError
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace
from .mutator import Mutator, rng_or_new


class MutateComputeLocation(Mutator):
    def __init__(self) -> None:
        self.mod = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.mod = context.mod

    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        if self.mod is None:
            raise TVMSError("MutateComputeLocation needs the task's module: initialize it with a TuneContext")
        rng = rng_or_new(rng)
        sch = Schedule(self.mod, seed=rng.randrange(1 << 31))
        candidates = []  # (instruction, the other places)

        def collect(inst: Any, inputs: list, attrs: list, decision: Any) -> Any:
            if inst.kind == "SampleComputeLocation":
                others = [p for p in sch.compute_location_places(inputs[0]) if p != decision]
                if others:
                    candidates.append((inst, others))
            return decision

        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=collect)
        except TVMSError:
            return None  # a trace that does not replay on this module has nothing to move
        if not candidates:
            return None
        inst, others = candidates[rng.randrange(len(candidates))]
        return trace.with_decision(inst, others[rng.randrange(len(others))], remove_postproc=True)
