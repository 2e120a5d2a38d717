"""MultiLevelTiling: tile a reduction block's loops into levels (TVM's "SSRSRS" on CPU) and
optionally keep its output in a write cache computed at one of the levels."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...ir.errors import TVMSError
from ...ir.expr import COMM_REDUCE, DATA_PAR
from .rule_analysis import TILING_STRUCTURE, is_write_cache, needs_multi_level_tiling, site
from .schedule_rule import ScheduleRule


class ReuseType(NamedTuple):
    """``ReuseType(req, levels, scope)`` as TVM's: whether a tiled block gets a cache (``req``:
    "no", "may" -- one branch with and one without -- or "must"), the tiling levels it is
    computed at (1-based), and its storage scope."""

    req: str
    levels: list
    scope: str

    def as_dict(self) -> dict:
        return {"req": self.req, "levels": self.levels, "scope": self.scope}

    @staticmethod
    def of(config: "ReuseType | dict | None") -> "ReuseType":
        if config is None:
            return ReuseType("no", [], "global")
        if isinstance(config, dict):
            if set(config) != {"req", "levels", "scope"}:
                raise TVMSError(f"a reuse config has exactly the keys req, levels and scope, got {sorted(config)}")
            config = ReuseType(config["req"], config["levels"], config["scope"])
        if config.req not in ("no", "may", "must"):
            raise TVMSError(f"unknown reuse type {config.req!r} (no, may or must)")
        return ReuseType(config.req, [int(level) for level in config.levels], str(config.scope))


@dataclass
class _State:
    """One partly tiled schedule: the block, its loops by tiling level, its write cache."""

    sch: Any
    block: Any
    tiles: list = field(default_factory=list)
    write_cache: Any = None

    def copy(self) -> "_State":
        return _State(self.sch.copy(), self.block, [list(t) for t in self.tiles], self.write_cache)


class MultiLevelTiling(ScheduleRule):
    """``MultiLevelTiling(structure, tile_binds=None, max_innermost_factor=None,
    vector_load_lens=None, reuse_read=None, reuse_write=None, filter_fn=None)``.

    Each spatial loop is split into as many tiles as ``structure`` has S's, each reduction loop
    into as many as it has R's (factors from ``sample_perfect_tile``), and the tiles are reordered
    level by level. A "may" write reuse branches into the schedule without a cache and one with a
    cache written back at each of ``levels``. Read reuse and thread binding (the GPU's form) are
    not built yet and are refused.
    """

    def __init__(self, structure: str, tile_binds: "list | None" = None, max_innermost_factor: "int | None" = None,
                 vector_load_lens: "list | None" = None, reuse_read: "dict | None" = None,
                 reuse_write: "dict | None" = None, filter_fn: Any = None) -> None:
        if not structure or set(structure) - {"S", "R"}:
            raise TVMSError(f"invalid tiling structure {structure!r}: a string of S and R")
        if tile_binds or vector_load_lens or reuse_read:
            raise TVMSError("MultiLevelTiling: tile_binds, vector_load_lens and reuse_read (the GPU "
                            "space) are not supported yet")
        self.structure = structure
        self.max_innermost_factor = -1 if max_innermost_factor is None else int(max_innermost_factor)
        self.reuse_write = ReuseType.of(reuse_write)
        self.filter_fn = filter_fn
        self.s_indices = [i for i, c in enumerate(structure) if c == "S"]
        self.r_indices = [i for i, c in enumerate(structure) if c == "R"]

    def apply(self, sch: Any, block: Any) -> list:
        _, realize, path = site(sch, block)
        wanted = self.filter_fn(sch, block) if self.filter_fn is not None else False
        if not (wanted or needs_multi_level_tiling(realize, path)):
            return [sch]
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        states = [_State(sch, block)]
        for step in (self._tile_loop_nest, self._add_write_reuse):
            states = [after for state in states for after in step(state)]
        return [state.sch for state in states]

    def _tile_loop_nest(self, state: _State) -> list[_State]:
        sch, block = state.sch, state.block
        loops = sch.get_loops(block)
        iter_types = [iv.iter_type for iv in sch.get(block).iter_vars]
        tiles: list[list] = [[] for _ in self.structure]
        for loop, iter_type in zip(loops, iter_types):
            if iter_type == DATA_PAR:
                indices = self.s_indices
            elif iter_type == COMM_REDUCE:
                indices = self.r_indices
            else:
                continue
            if len(indices) == 1:
                tiles[indices[0]].append(loop)
                continue
            factors = sch.sample_perfect_tile(loop, n=len(indices), max_innermost_factor=self.max_innermost_factor)
            for index, split in zip(indices, sch.split(loop, factors)):
                tiles[index].append(split)
        sch.reorder(*[loop for tile in tiles for loop in tile])
        state.tiles = tiles
        return [state]

    def _add_write_reuse(self, state: _State) -> list[_State]:
        config = self.reuse_write
        if config.req == "no":
            return [state]
        levels, req = list(config.levels), config.req
        annotated = state.sch.get(state.block).annotations.get("meta_schedule.write_cache_level")
        if annotated is not None:
            req, levels = "must", [int(v) for v in annotated]
        results: list[_State] = []
        if req == "may":
            consumers = state.sch.get_consumers(state.block)
            if len(consumers) == 1 and is_write_cache(state.sch.get(consumers[0])):
                # the one consumer already is a copy: move it in, or leave it where it is
                results = [self._cache_at(state, consumers[0], level) for level in levels]
                state.write_cache = consumers[0]
                return results + [state]
            results.append(state.copy())
        state.write_cache = state.sch.cache_write(state.block, 0, config.scope)
        return results + [self._cache_at(state, state.write_cache, level) for level in levels]

    @staticmethod
    def _cache_at(state: _State, cache: Any, level: int) -> _State:
        new = state.copy()
        new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
        new.write_cache = cache
        return new
