"""Mutators: small random changes to the sampling decisions of a trace (TVM's ``Mutator``).

A mutator reads a trace, changes one decision (a tiling, an unroll depth, a parallel extent, a
compute location) and returns the new trace with its post-processing cut off, or None when the
trace holds nothing it can change. Evolutionary search replays the result on the task's module;
every decision a mutator writes is one the sampler could have made, so the replay succeeds.
"""
from __future__ import annotations

import random
from typing import Any

from ...ir.errors import TVMSError
from ..schedule.trace import Instruction, Trace


class Mutator:
    """``apply(trace, rng=None) -> Trace | None``; subclasses override ``apply`` (and
    ``_initialize_with_tune_context`` when they need the task's module or target)."""

    def _initialize_with_tune_context(self, context: Any) -> None:
        """Read what the mutator needs of the task (nothing, for most)."""

    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        raise NotImplementedError

    def clone(self) -> "Mutator":
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @staticmethod
    def create(kind: str) -> dict:
        """The default mutators of a target kind with their probabilities (TVM's defaults, as the
        kind's row of ``default_space`` registers them)."""
        from .space_generator import default_part

        probs = default_part(kind, "mutator_probs")
        if not probs:
            raise TVMSError(f"no default mutators for target kind {kind!r}")
        return {as_mutator(name): p for name, p in probs.items()}


def as_mutator(mutator: "Mutator | str") -> Mutator:
    """A mutator, or a new one of the class named (with TVM's default arguments)."""
    if isinstance(mutator, Mutator):
        return mutator
    from .mutate_compute_location import MutateComputeLocation
    from .mutate_parallel import MutateParallel
    from .mutate_thread_binding import MutateThreadBinding
    from .mutate_tile_size import MutateTileSize
    from .mutate_unroll import MutateUnroll

    classes = {cls.__name__: cls for cls in (MutateTileSize, MutateComputeLocation, MutateUnroll, MutateParallel,
                                             MutateThreadBinding)}
    if mutator not in classes:
        raise TVMSError(f"unknown mutator {mutator!r}; known: {', '.join(classes)}")
    return classes[mutator]()


PyMutator = Mutator  # TVM's name for a mutator written in Python; here every mutator is one


def rng_or_new(rng: random.Random | None) -> random.Random:
    return rng if rng is not None else random.Random()


def annotations_of(trace: Trace, keys: tuple) -> list[Instruction]:
    """The ``Annotate`` instructions of ``trace`` (before its post-processing) with one of ``keys``."""
    return [inst for inst in trace.insts[:_postproc_start(trace)]
            if inst.kind == "Annotate" and inst.attrs and inst.attrs[0] in keys]


def _postproc_start(trace: Trace) -> int:
    return next((i for i, inst in enumerate(trace.insts) if inst.kind == "EnterPostproc"), len(trace.insts))


def pick_other_categorical(trace: Trace, inst: Instruction, rng: random.Random) -> Trace | None:
    """``trace`` with the categorical sample ``inst`` drawn again among its other candidates, by
    their probabilities (None when no other candidate has any)."""
    probs = list(inst.attrs[1])
    old = trace.get_decision(inst)
    others = [i for i in range(len(probs)) if i != old and probs[i] > 0]
    if not others:
        return None
    choice = rng.choices(others, weights=[probs[i] for i in others])[0]
    return trace.with_decision(inst, choice, remove_postproc=True)
