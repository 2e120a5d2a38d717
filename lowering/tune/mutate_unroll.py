"""MutateUnroll: draw another maximal unroll depth for a block annotated with one.

The depth is a ``sample_categorical`` whose result a ``meta_schedule.unroll_explicit`` (or
``_implicit``) annotation reads; the mutator picks one of the other candidates by their
probabilities.
"""
from __future__ import annotations

import random

from ..schedule.trace import Trace
from .mutator import Mutator, annotations_of, pick_other_categorical, rng_or_new

UNROLL_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


class MutateUnroll(Mutator):
    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        rng = rng_or_new(rng)
        sampled = {id(inst.outputs[0]): inst for inst in trace.insts
                   if inst.kind == "SampleCategorical" and inst in trace.decisions}
        annotations = [inst for inst in annotations_of(trace, UNROLL_KEYS) if id(inst.inputs[1]) in sampled]
        if not annotations:
            return None
        annotation = annotations[rng.randrange(len(annotations))]
        return pick_other_categorical(trace, sampled[id(annotation.inputs[1])], rng)
