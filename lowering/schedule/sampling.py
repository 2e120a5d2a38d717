"""Samplers: perfect tilings of a loop extent and weighted choices, from a seeded generator."""
from __future__ import annotations

import random
from functools import lru_cache
from math import prod

from .errors import ScheduleError


@lru_cache(maxsize=256)  # (a search samples the same few loops thousands of times)
def perfect_tiles(extent: int, n: int, max_innermost_factor: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered ``n``-tuple of positive factors whose product is ``extent``
    (with the innermost at most ``max_innermost_factor`` when that is positive)."""
    def tilings(rest: int, slots: int) -> list[tuple[int, ...]]:
        if slots == 1:
            return [(rest,)]
        return [(d,) + tail for d in range(1, rest + 1) if rest % d == 0
                for tail in tilings(rest // d, slots - 1)]

    found = tilings(extent, n)
    return tuple(t for t in found if max_innermost_factor <= 0 or t[-1] <= max_innermost_factor)


def sample_perfect_tile(rng: random.Random, extent: int, n: int, max_innermost_factor: int,
                        decision: list | None, loop_name: str) -> list[int]:
    if n < 1:
        raise ScheduleError(f"sample_perfect_tile: n must be at least 1, got {n}")
    if decision is not None:
        decision = [int(d) for d in decision]
        if len(decision) != n or prod(decision) != extent or min(decision) < 1:
            raise ScheduleError(f"sample_perfect_tile: the decision {decision} is not a tiling of "
                                f"loop '{loop_name}' (extent {extent}) into {n} factors")
        return decision
    choices = perfect_tiles(extent, n, max_innermost_factor)
    if not choices:
        raise ScheduleError(f"sample_perfect_tile: loop '{loop_name}' (extent {extent}) has no "
                            f"tiling with an innermost factor of at most {max_innermost_factor}")
    return list(rng.choice(choices))


def sample_partitioned_tile(rng: random.Random, extent: int, n: int, partition_pos: int, innerpart_factor: int,
                            decision: list | None, loop_name: str) -> list[int]:
    """A perfect tiling whose factors from ``partition_pos`` on multiply to a multiple of
    ``innerpart_factor`` (TVM's ``SamplePartitionedTile``)."""
    if n < 2 or not 0 <= partition_pos < n or innerpart_factor < 1:
        raise ScheduleError(f"sample_partitioned_tile: need n >= 2, 0 <= partition_pos < n and "
                            f"innerpart_factor >= 1, got n={n}, partition_pos={partition_pos}, "
                            f"innerpart_factor={innerpart_factor}")
    choices = [t for t in perfect_tiles(extent, n, 0) if prod(t[partition_pos:]) % innerpart_factor == 0]
    if decision is not None:
        decision = [int(d) for d in decision]
        if tuple(decision) not in choices:
            raise ScheduleError(f"sample_partitioned_tile: the decision {decision} is not a tiling of loop "
                                f"'{loop_name}' (extent {extent}) into {n} factors whose product from "
                                f"position {partition_pos} on is a multiple of {innerpart_factor}")
        return decision
    if not choices:
        raise ScheduleError(f"sample_partitioned_tile: loop '{loop_name}' (extent {extent}) is not a "
                            f"multiple of the inner part's factor {innerpart_factor}")
    return list(rng.choice(choices))


def sample_categorical(rng: random.Random, candidates: list, probs: list, decision: int | None) -> int:
    """The index of the chosen candidate."""
    if len(candidates) != len(probs) or not candidates:
        raise ScheduleError(f"sample_categorical: {len(candidates)} candidates but {len(probs)} "
                            f"probabilities")
    if decision is not None:
        if not isinstance(decision, int) or not 0 <= decision < len(candidates):
            raise ScheduleError(f"sample_categorical: the decision {decision!r} is not an index of "
                                f"the {len(candidates)} candidates")
        return decision
    if any(p < 0 for p in probs) or sum(probs) <= 0:
        raise ScheduleError(f"sample_categorical: the probabilities {probs} must be non-negative "
                            f"with a positive sum")
    return rng.choices(range(len(candidates)), weights=probs)[0]
