"""MultiLevelTiling: tile a reduction block's loops into levels (TVM's "SSRSRS" on CPU) and
optionally keep its output in a write cache computed at one of the levels."""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, NamedTuple

from ...ir.errors import TVMSError
from ...ir.expr import COMM_REDUCE, DATA_PAR
from ...ir.stmt import For, SeqStmt
from .rule_analysis import TILING_STRUCTURE, const_int, is_write_cache, needs_multi_level_tiling, site
from .schedule_rule import ScheduleRule
from .space_generator import sm_number


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
    factors: list = field(default_factory=list)  # the sampled factors, by tile as ``tiles``
    read_caches: list = field(default_factory=list)

    def copy(self) -> "_State":
        return _State(self.sch.copy(), self.block, [list(t) for t in self.tiles], self.write_cache,
                      [list(f) for f in self.factors], list(self.read_caches))


class MultiLevelTiling(ScheduleRule):
    """``MultiLevelTiling(structure, tile_binds=None, max_innermost_factor=None,
    vector_load_lens=None, reuse_read=None, reuse_write=None, filter_fn=None)``.

    Each spatial loop is split into as many tiles as ``structure`` has S's, each reduction loop
    into as many as it has R's (factors from ``sample_perfect_tile``), and the tiles are reordered
    level by level; with ``tile_binds`` (the GPU's form) the first levels are fused and bound to
    those thread axes. A "may" write reuse branches into the schedule without a cache and one with a
    cache written back at each of ``levels``, a "must" one always caches. A read reuse ("must")
    caches each input at its level, fused for cooperative fetching with a vector length sampled
    from ``vector_load_lens``. On a target of compute capability 8.0 or more the reduction tiles
    are also tried as software pipelines of 4 and 5 stages.
    """

    def __init__(self, structure: str, tile_binds: "list | None" = None, max_innermost_factor: "int | None" = None,
                 vector_load_lens: "list | None" = None, reuse_read: "dict | None" = None,
                 reuse_write: "dict | None" = None, filter_fn: Any = None) -> None:
        if not structure or set(structure) - {"S", "R"}:
            raise TVMSError(f"invalid tiling structure {structure!r}: a string of S and R")
        self.structure = structure
        self.tile_binds = list(tile_binds or [])
        self.vector_load_lens = [int(n) for n in vector_load_lens or []]
        self.reuse_read = ReuseType.of(reuse_read)
        if self.reuse_read.req == "may":
            raise TVMSError("MultiLevelTiling: a read reuse is 'no' or 'must', not 'may'")
        self.max_innermost_factor = -1 if max_innermost_factor is None else int(max_innermost_factor)
        self.reuse_write = ReuseType.of(reuse_write)
        self.filter_fn = filter_fn
        self.s_indices = [i for i, c in enumerate(structure) if c == "S"]
        self.r_indices = [i for i, c in enumerate(structure) if c == "R"]
        self.thread_warp_size = self.max_threads_per_block = -1
        self.stages: list[int] = []

    def _initialize_with_tune_context(self, context: Any) -> None:
        target = getattr(context, "target", None)
        if target is None:
            raise TVMSError("MultiLevelTiling needs a TuneContext with a target")
        if "max_threads_per_block" in target.attrs:
            self.max_threads_per_block = target.attrs["max_threads_per_block"]
            self.thread_warp_size = target.attrs.get("thread_warp_size", -1)
        sm = sm_number(target)
        if sm is not None and sm >= 80:  # (GPUs with async copies)
            self.stages = [4, 5]

    def apply(self, sch: Any, block: Any) -> list:
        _, realize, path = site(sch, block)
        wanted = self.filter_fn(sch, block) if self.filter_fn is not None else False
        if not (wanted or needs_multi_level_tiling(realize, path)):
            return [sch]
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        states = [_State(sch, block)]
        for step in (self._tile_loop_nest, self._add_write_reuse, self._add_read_reuse, self._add_async_pipeline):
            states = [after for state in states for after in step(state)]
        return [state.sch for state in states]

    def _tile_loop_nest(self, state: _State, inner_spatial: int = -1, sample_tiles: Any = None) -> list[_State]:
        """Tile the block's loops; with ``inner_spatial`` >= 0 only that many innermost spatial
        loops are tiled, the outer ones (a batch) joining the first tile level untiled.
        ``sample_tiles`` (as ``_sample_tiles``, the default) samples a loop's factors."""
        sample_tiles = sample_tiles or self._sample_tiles
        sch, block = state.sch, state.block
        loops = sch.get_loops(block)
        iter_types = [iv.iter_type for iv in sch.get(block).iter_vars]
        extents = [const_int(sch.get(loop).extent) for loop, kind in zip(loops, iter_types) if kind == DATA_PAR]
        n_skipped = 0 if inner_spatial < 0 else len(extents) - inner_spatial
        extents = extents[n_skipped:]
        spatial = -1 if None in extents else prod(extents)  # (-1: not known)
        tiles: list[list] = [[] for _ in self.structure]
        factors: list[list] = [[] for _ in self.structure]
        skipped: list = []
        for position, (loop, iter_type) in enumerate(zip(loops, iter_types)):
            if iter_type == DATA_PAR and len(skipped) < n_skipped:
                skipped.append(loop)
                continue
            if iter_type == DATA_PAR:
                indices = self.s_indices
            elif iter_type == COMM_REDUCE:
                indices = self.r_indices
            else:
                continue
            if len(indices) == 1:
                tiles[indices[0]].append(loop)
                continue
            sampled = sample_tiles(sch, loop, len(indices), position, iter_type)
            for index, split, factor in zip(indices, sch.split(loop, sampled), sampled):
                tiles[index].append(split)
                factors[index].append(factor)
        sch.reorder(*[loop for tile in tiles for loop in tile])
        if skipped and self.tile_binds:
            tiles[0][:0] = skipped
        for i, thread_axis in enumerate(self.tile_binds[:len(tiles)]):
            fused = sch.fuse(*tiles[i])
            sch.bind(fused, thread_axis)
            tiles[i] = [fused]
        state.tiles, state.factors = tiles, factors
        if self.thread_warp_size != -1:
            low = self.thread_warp_size if spatial > 2 * self.thread_warp_size else 1
            sch.annotate(block, "meta_schedule.thread_extent_low_inclusive", low)
            sch.annotate(block, "meta_schedule.thread_extent_high_inclusive", self.max_threads_per_block)
        return [state]

    def _sample_tiles(self, sch: Any, loop: Any, n: int, position: int, iter_type: int) -> list:
        """The ``n`` factors of the loop at ``position``."""
        return sch.sample_perfect_tile(loop, n=n, max_innermost_factor=self.max_innermost_factor)

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

    def _add_read_reuse(self, state: _State) -> list[_State]:
        config = self.reuse_read
        if config.req == "no":
            return [state]
        results = []
        for level in config.levels:
            new = state.copy()
            sch, block = new.sch, new.block
            loop = state.tiles[level - 1][-1]
            b = sch.get(block)
            for i, read in enumerate(b.reads):
                if read.buffer is b.writes[0].buffer:
                    continue
                cache = sch.cache_read(block, i, config.scope, [block])
                new.read_caches.append(cache)
                sch.compute_at(cache, loop, preserve_unit_loops=True)
                sch.fuse(*sch.get_loops(cache)[-len(read.buffer.shape):])
                self._annotate_cooperative_fetch(sch, cache)
            results.append(new)
        return results

    def _annotate_cooperative_fetch(self, sch: Any, cache: Any) -> None:
        """A vector length for fetching the cache cooperatively, sampled from the lengths its
        element type allows (float32 up to 4, float16 1 or even up to 8, int8 up to 16)."""
        dtype = str(sch.get(cache).writes[0].buffer.dtype)
        allowed = {"float32": lambda n: n <= 4, "float16": lambda n: (n == 1 or n % 2 == 0) and n <= 8,
                   "int8": lambda n: n <= 16}.get(dtype, lambda n: True)
        lens = [n for n in self.vector_load_lens if allowed(n)]
        if lens:
            length = sch.sample_categorical(lens, [1.0 / len(lens)] * len(lens))
            sch.annotate(cache, "meta_schedule.cooperative_fetch", length)

    def _add_async_pipeline(self, state: _State) -> list[_State]:
        """On sm_80 and later: the outer reduction tiles as a software pipeline (two cache reads
        and the computation) of each stage count, beside the schedule as it is."""
        if not self.r_indices or not self.stages:
            return [state]
        body = state.sch.get(state.tiles[self.r_indices[0]][-1]).body
        if not isinstance(body, SeqStmt) or len(body.seq) != 3 or not all(isinstance(s, For) for s in body.seq):
            return [state]
        results = [state]
        for stage in self.stages:
            new = state.copy()
            fused = new.sch.fuse(*new.tiles[self.r_indices[0]])
            new.sch.annotate(fused, "software_pipeline_stage", [0, 0, stage - 2])
            new.sch.annotate(fused, "software_pipeline_order", [0, 1, 2])
            new.sch.annotate(fused, "software_pipeline_async_stages", [0])
            results.append(new)
        return results

    @staticmethod
    def _cache_at(state: _State, cache: Any, level: int) -> _State:
        new = state.copy()
        new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
        new.write_cache = cache
        return new
