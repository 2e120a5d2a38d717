"""MutateTileSize: move a factor from one tile of a ``sample_perfect_tile`` decision to another.

The product of the tiles stays the loop's extent, and the innermost tile stays within the
sampler's ``max_innermost_factor``, so the new tiling is one the sampler could have drawn. On GPU
spaces it also re-draws the vector width sampled for cooperative fetching (as TVM's does).
"""
from __future__ import annotations

import random
from functools import lru_cache
from math import prod

from ..schedule.trace import Trace
from .mutator import Mutator, annotations_of, pick_other_categorical, rng_or_new

COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"


@lru_cache(maxsize=None)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n``, smallest first."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def move_factor(tiles: list[int], max_innermost: int, rng: random.Random) -> list[int] | None:
    """``tiles`` with a divisor (> 1) of one tile moved into another; None when the only moves
    would break the innermost limit."""
    n = len(tiles)
    while True:
        x = rng.randrange(n)
        if tiles[x] <= 1:
            continue
        y = rng.randrange(n - 1)
        y += y >= x
        factors = divisors(tiles[x])
        if y != n - 1:
            factor = factors[rng.randrange(1, len(factors))]
        else:  # into the innermost tile: keep it within the limit
            fitting = [f for f in factors[1:] if f * tiles[y] <= max_innermost] if max_innermost > 0 else factors[1:]
            if not fitting:
                if n <= 2:
                    return None
                continue  # another pair may work
            factor = fitting[rng.randrange(len(fitting))]
        moved = list(tiles)
        moved[x] //= factor
        moved[y] *= factor
        return moved


class MutateTileSize(Mutator):
    """Re-tile one sampled tiling (or, on GPU spaces, re-draw one cooperative-fetch width)."""

    def apply(self, trace: Trace, rng: random.Random | None = None) -> Trace | None:
        rng = rng_or_new(rng)
        tilings = [inst for inst in trace.insts if inst.kind == "SamplePerfectTile" and inst in trace.decisions
                   and len(trace.decisions[inst]) >= 2 and prod(trace.decisions[inst]) >= 2]
        fetched = {id(inst.inputs[1]) for inst in annotations_of(trace, (COOPERATIVE_FETCH,))}
        widths = [inst for inst in trace.insts if inst.kind == "SampleCategorical" and inst in trace.decisions
                  and id(inst.outputs[0]) in fetched and len(inst.attrs[1]) > 1]
        if not tilings and not widths:
            return None
        k = rng.randrange(len(tilings) + len(widths))
        if k >= len(tilings):
            return pick_other_categorical(trace, widths[k - len(tilings)], rng)
        inst = tilings[k]
        tiles = move_factor([int(t) for t in trace.decisions[inst]], int(inst.attrs[1]), rng)
        return None if tiles is None else trace.with_decision(inst, tiles, remove_postproc=True)
