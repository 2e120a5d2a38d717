"""MutateThreadBinding: draw another thread count for a loop bound to ``threadIdx.x`` whose
split factor was sampled (``v = sample_categorical(...)``, ``split(l, [None, v])``, ``bind(inner,
"threadIdx.x")``: what AutoBind and CrossThreadReduction write), among the other candidates by
their probabilities."""
from __future__ import annotations

import random

from ..schedule.trace import Trace
from .mutator import Mutator, pick_other_categorical, rng_or_new


class MutateThreadBinding(Mutator):
    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        rng = rng_or_new(rng)
        sampled: dict = {}  # id(the sampled value) -> its SampleCategorical
        split_by: dict = {}  # id(the inner loop of a split by a sampled factor) -> that sample
        candidates = []
        for inst in trace.insts:
            if inst.kind == "SampleCategorical" and inst in trace.decisions:
                sampled[id(inst.outputs[0])] = inst
            elif inst.kind == "Split" and len(inst.inputs) == 3 and inst.inputs[1] is None \
                    and id(inst.inputs[2]) in sampled:
                split_by[id(inst.outputs[1])] = sampled[id(inst.inputs[2])]
            elif inst.kind == "Bind" and inst.attrs[0] == "threadIdx.x" and id(inst.inputs[0]) in split_by:
                candidates.append(split_by[id(inst.inputs[0])])
        if not candidates:
            return None
        return pick_other_categorical(trace, candidates[rng.randrange(len(candidates))], rng)
