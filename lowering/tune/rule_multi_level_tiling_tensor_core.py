"""MultiLevelTilingTensorCore (TVM 0.27's): MultiLevelTiling of a matmul whose tiles are
computed by tensor-core intrinsics, in TVM's two flavours, chosen by the group's product
intrinsic.

WMMA (``wmma_sync_*``): for each intrinsic group whose multiply-accumulate the block matches, a
sketch: the operands and the output are reindexed to the intrinsic's index order (``reindex``,
``transform_layout``), the block is tiled by the intrinsic's shape and blockized (annotated
``meta_schedule.auto_tensorize`` for ``RewriteTensorize``), then tiled SSSRRSRS over the 16 x 16
tiles with the warps on ``threadIdx.y``. The accumulator lives in ``wmma.accumulator`` fragments,
laid out per warp and written back through shared memory one row of fragments at a time; the
operands go to shared memory (cooperative fetch) and from there into ``wmma.matrix_a`` /
``wmma.matrix_b`` fragments.

mma.sync (``mma_sync_m16n8k8_*``, tensor_intrin_mma.py): the same tensorization over 16 x 8 x 8
tiles, the spatial tiles sampled partitioned (``sample_partitioned_tile``) so that a warp's tiles
cover whole ``ldmatrix`` slices; ``write_at``/``read_at`` copy blocks (``auto_copy``) stand for
the accumulators' write-out and the operands' swizzled (``permuted_layout``) shared-memory copies,
which the lowering (LowerAutoCopy, InjectPermutedLayout) turns into code; with
``use_software_pipeline`` those copies are asynchronous and two reduction tiles ahead.

Matmuls over loops i, j, k of constant extents are taken, after any batch loops (indexing every
operand first): WMMA keeps a batch whole in the first tile level (fused onto blockIdx.y, as TVM's
TileLoopNest with its two innermost spatial loops tiled), mma.sync leaves batched matmuls alone, as
TVM's does. Extents that are not multiples of the intrinsic's shape are padded up to them
(PadEinsum), as TVM 0.27 does. A product of the intrinsic's types that is not one (a convolution,
symbolic extents) is left to the other rules, the reason logged (to the TuneContext's logger).
The accumulator's layout map is over the sampling variables (``SampledIndexMap``), as TVM's trace
writes it.
"""
from __future__ import annotations

import logging
from typing import Any

from ...ir.errors import TVMSError
from ...ir.expr import COMM_REDUCE, DATA_PAR, Var
from ...ir.stmt import BlockRealize, For
from ..schedule.layout import IndexMap, SampledIndexMap
from ..schedule.tensorize import TensorIntrin
from ..schedule.tree import walk_with_path
from .rule_analysis import TILING_STRUCTURE, const_int, needs_multi_level_tiling, site
from .postproc_rewrite_reduction_block import AUTO_TENSORIZE, AUTO_TENSORIZE_INIT
from .rule_multi_level_tiling import MultiLevelTiling, _State

_GROUP_KEYS = ("init", "load_a", "load_b", "compute", "store")
_LOG = logging.getLogger("tvms.meta_schedule")


def _desc_block(intrin: str) -> tuple[Any, list]:
    """The innermost block of a registered intrinsic's description, and its loop extents."""
    desc = TensorIntrin.get(intrin).desc
    inner = [(node.block, path) for node, path in walk_with_path(desc.body) if isinstance(node, BlockRealize)][-1]
    block, path = inner
    return block, [const_int(p.extent) for p in path if hasattr(p, "loop_var")]


def _index_vars(region: Any) -> list | None:
    """The variables a point access indexes with, or None where an index is not a variable."""
    names = [r.min for r in region.region]
    return names if all(isinstance(v, Var) for v in names) and all(const_int(r.extent) == 1 for r in region.region) \
        else None


class _Mapping:
    """How a block ``C[b.., i, j] += A[b.., .] * B[b.., .]`` maps onto an intrinsic's description:
    each buffer's index order (the batch first, then the intrinsic's), by the block's iterators."""

    def __init__(self, iters: list, orders: dict):
        self.iters, self.orders = iters, orders


def _match(block: Any, compute: str) -> _Mapping | str | None:
    """How the block maps onto the intrinsic; None where it is no product of the intrinsic's
    types, and why not where it is one that the rule cannot tile."""
    if len(block.reads) != 2 or len(block.writes) != 1:
        return None
    desc, _ = _desc_block(compute)
    d_c, d_a, d_b = desc.reads  # (C, A, B: the description reads the accumulator first)
    regions = [block.writes[0], block.reads[0], block.reads[1]]
    for region, want in zip(regions, (d_c, d_a, d_b)):
        if str(region.buffer.dtype) != str(want.buffer.dtype):
            return None
    kinds = [iv.iter_type for iv in block.iter_vars]
    if len(kinds) < 3 or kinds[-1] != COMM_REDUCE or any(k != DATA_PAR for k in kinds[:-1]) \
            or len(desc.iter_vars) != 3:
        return (f"its iterators are {''.join('S' if k == DATA_PAR else 'R' for k in kinds)}, not the i, j, k (SSR) "
                f"of a matmul, batched or not: convolutions are not taken")
    ours = [iv.var for iv in block.iter_vars]
    batch, ijk = ours[:-3], ours[-3:]
    theirs = [iv.var for iv in desc.iter_vars]
    orders = {}
    for name, region, want in zip("CAB", regions, (d_c, d_a, d_b)):
        got, wanted = _index_vars(region), _index_vars(want)
        if got is None or wanted is None or len(got) != len(batch) + 2:
            return None
        if any(g is not b for g, b in zip(got, batch)):
            return "its operands do not index the batch first"
        if {id(v) for v in got[len(batch):]} != {id(ijk[theirs.index(v)]) for v in wanted}:
            return None
        orders[name] = batch + [ijk[theirs.index(v)] for v in wanted]
    if any(const_int(iv.dom.extent) is None for iv in block.iter_vars):
        return "its extents are not all constant (PadEinsum pads constant ones only)"
    return _Mapping(ours, orders)


def _is_mma(group: dict) -> bool:
    return str(group["compute"]).startswith("mma_sync")


class MultiLevelTilingTensorCore(MultiLevelTiling):
    """``MultiLevelTilingTensorCore(intrin_groups, structure, tile_binds, max_innermost_factor,
    vector_load_lens, reuse_read, reuse_write, use_software_pipeline=False)``: ``intrin_groups``
    are dicts of the init, load_a, load_b, compute and store intrinsics' names
    (``get_wmma_intrin_group``, ``get_mma_m16n8k8_intrin_group``)."""

    def __init__(self, intrin_groups: list, structure: str, tile_binds: "list | None" = None,
                 max_innermost_factor: "int | None" = None, vector_load_lens: "list | None" = None,
                 reuse_read: Any = None, reuse_write: Any = None, use_software_pipeline: bool = False) -> None:
        if "threadIdx.x" in (tile_binds or []):
            raise TVMSError("MultiLevelTilingTensorCore: a tile cannot be bound to threadIdx.x (a warp's lanes)")
        super().__init__(structure, tile_binds, max_innermost_factor, vector_load_lens, reuse_read, reuse_write)
        self.intrin_groups = []
        for group in intrin_groups:
            missing = [key for key in _GROUP_KEYS if key not in group]
            if missing:
                raise TVMSError(f"MultiLevelTilingTensorCore: the intrinsic group names no {', '.join(missing)}")
            for key in _GROUP_KEYS:
                TensorIntrin.get(group[key])  # (an unknown name is refused here)
            if not str(group["compute"]).startswith(("wmma", "mma_sync")):
                raise TVMSError(f"MultiLevelTilingTensorCore: a group computes with a WMMA (wmma_*) or an mma.sync "
                                f"(mma_sync_*) intrinsic, got {group['compute']!r}")
            self.intrin_groups.append(dict(group))
        if any(not _is_mma(group) for group in self.intrin_groups):
            if self.reuse_write.req != "must" or not self.reuse_write.scope.startswith("shared"):
                raise TVMSError("MultiLevelTilingTensorCore: the write reuse must be 'must' in shared memory")
            if "threadIdx.y" not in self.tile_binds:
                raise TVMSError("MultiLevelTilingTensorCore: one tile must be bound to threadIdx.y (the warps)")
        self.use_software_pipeline = bool(use_software_pipeline)
        self.stages = []
        self.logger = _LOG

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        self.stages = []  # (the WMMA sketches pipeline by their own annotations)
        logger = getattr(context, "logger", None)
        self.logger = logger if isinstance(logger, logging.Logger) else _LOG

    def apply(self, sch: Any, block: Any) -> list:
        _, realize, path = site(sch, block)
        if not needs_multi_level_tiling(realize, path):
            return [sch]
        results, reasons = [], []
        for group in self.intrin_groups:
            mapping = _match(realize.block, group["compute"])
            if not isinstance(mapping, _Mapping):
                reasons += [mapping] if mapping else []
                continue
            new = sch.copy()
            new.annotate(block, TILING_STRUCTURE, self.structure)
            state = _State(new, block)
            reindexed_store = self._tensorize_compute(state, mapping, group)
            if _is_mma(group):
                found = self._mma_sketches(state, group, reindexed_store)
                results += found
                reasons += [] if found else ["its mma.sync tiling takes the i, j, k loops of a 2-D matmul only"]
                continue
            (state,) = self._tile_loop_nest(state, inner_spatial=2)  # (a batch stays whole, in the first tile)
            self._output_layout(state, group)
            (state,) = self._add_write_reuse(state)
            self._write_back_fragments(state, group, reindexed_store)
            (state,) = self._add_read_reuse(state)
            self._load_fragments(state, group)
            self._add_software_pipeline(state)
            results.append(state.sch)
        if not results and reasons:  # (a product of tensor-core types left to the other rules: say why)
            self.logger.info("MultiLevelTilingTensorCore leaves block %r untiled: %s", realize.block.name_hint,
                             "; ".join(dict.fromkeys(reasons)))
        return results or [sch]

    def _tensorize_compute(self, state: _State, mapping: _Mapping, group: dict) -> Any:
        """Reindex the operands and the output into the intrinsic's index order, tile the block by
        the intrinsic and blockize it (TVM's TransformWithTensorIntrin); the output's reindex
        stage."""
        sch, block = state.sch, state.block
        stores = sch.reindex(block, ("write", 0))
        loads = [sch.reindex(block, ("read", i)) for i in (0, 1)]
        names = {id(v): v.name for v in mapping.iters}

        def sub_map(buffer: str, region: Any) -> IndexMap:
            src = [Var(names[id(r.min)], r.min.dtype) for r in region.region]
            by_name = {v.name: v for v in src}
            return IndexMap(src, [by_name[v.name] for v in mapping.orders[buffer]])

        b = sch.get(block)
        maps = {"A": sub_map("A", b.reads[0]), "B": sub_map("B", b.reads[1]), "C": sub_map("C", b.writes[0])}
        sch.transform_layout(block, ("read", 0), maps["A"], assume_injective_transform=True)
        sch.transform_layout(block, ("read", 1), maps["B"], assume_injective_transform=True)
        sch.transform_layout(block, ("write", 0), maps["C"], assume_injective_transform=True)
        for stage, buffer in zip([stores, *loads], "CAB"):
            sch.transform_block_layout(stage, maps[buffer])
        iters = [Var(v.name, v.dtype) for v in mapping.iters]
        sch.transform_block_layout(block, IndexMap(iters, list(iters)))
        extents = _desc_block(group["compute"])[1]
        self._pad(sch, block, extents, [stores, *loads])
        inner = self._tile_with_intrin(sch, block, extents)
        state.block = sch.blockize(inner)
        sch.annotate(state.block, AUTO_TENSORIZE, group["compute"])
        sch.annotate(state.block, AUTO_TENSORIZE_INIT, group["init"])
        sch.annotate(state.block, "warp_execution", 1)
        return stores

    @staticmethod
    def _pad(sch: Any, block: Any, extents: list, stages: list) -> None:
        """Where an extent of the block is no multiple of the intrinsic's, pad the block up to the
        multiples (PadEinsum) and inline the reindex ``stages`` (the block's producers and consumer
        before) into the pad blocks that now stand between them and the block, as TVM's
        TileWithTensorIntrin does when padding is allowed."""
        iter_vars = sch.get(block).iter_vars
        # (an iterator already a multiple of the intrinsic's extent, or a batch, is padded by 1)
        padding = [1] * (len(iter_vars) - len(extents)) + [
            e if const_int(iv.dom.extent) % e else 1 for iv, e in zip(iter_vars[-len(extents):], extents)]
        if padding == [1] * len(iter_vars):
            return
        before = {sch.get(stage).name_hint for stage in stages}
        sch.pad_einsum(block, padding)
        inlined = []
        for producer in sch.get_producers(block):
            if sch.get(producer).name_hint not in before:  # (a pad block: its reindex stage goes into it)
                inlined += sch.get_producers(producer)
        for consumer in sch.get_consumers(block):
            if sch.get(consumer).name_hint not in before:  # (the pad block's copy-back goes into the write-back)
                sch.get_consumers(consumer)  # (unused, but in TVM's trace: it looks for the copy-back's consumer)
                inlined.append(consumer)
        for stage in inlined:
            sch.compute_inline(stage)

    @staticmethod
    def _tile_with_intrin(sch: Any, block: Any, extents: list) -> Any:
        """Split the block's last loops by the intrinsic's extents, the intrinsic's loops innermost
        (TVM's TileWithTensorIntrin); the outermost of those loops."""
        loops = sch.get_loops(block)[-len(extents):]
        inner = [sch.split(loop, [None, extent])[1] for loop, extent in zip(loops[::-1], extents[::-1])][::-1]
        outer = sch.get_loops(block)[-2 * len(extents)::2]
        sch.reorder(*outer[1:], *inner)
        return inner[0]

    def _output_layout(self, state: _State, group: dict) -> None:
        """The accumulator laid out [warp_m, warp_n, frag_m, frag_n, 16, 16]: the fragments of a warp
        together, each fragment's elements together."""
        sch = state.sch
        warp = self.tile_binds.index("threadIdx.y")
        inner = self.s_indices[warp + 1:]
        rvs: list = []

        def fragments(axis: int) -> Any:
            product = None
            for index in inner:
                rvs.append((Var(f"f{len(rvs)}", "int32"), state.factors[index][axis]))
                product = rvs[-1][0] if product is None else product * rvs[-1][0]
            return product

        frag_m, frag_n = fragments(-2), fragments(-1)
        m, n = _desc_block(group["init"])[1]
        *batch, i0, i1 = [Var(f"i{d}", "int32") for d in range(len(state.sch.get(state.block).writes[0].region))]
        layout = SampledIndexMap([*batch, i0, i1], [*batch, i0 // m // frag_m, i1 // n // frag_n, i0 // m % frag_m,
                                                    i1 // n % frag_n, i0 % m, i1 % n], rvs)
        sch.transform_layout(state.block, ("write", 0), layout, assume_injective_transform=True)

    def _write_back_fragments(self, state: _State, group: dict, reindexed_store: Any) -> None:
        """The accumulator fragments, one row of them at a time, stored by their warps into the
        shared write cache (TVM's AddWriteReuseTensorCore)."""
        sch = state.sch
        fragment = sch.cache_write(state.block, 0, "wmma.accumulator")
        i0, j0, i1, j1 = sch.get_loops(state.write_cache)[-6:-2]
        sch.reorder(i1, i0, j0, j1)
        sch.compute_at(fragment, i1, preserve_unit_loops=True)
        i0, j0 = sch.get_loops(fragment)[-6:-4]
        sch.bind(sch.fuse(i0, j0), "threadIdx.y")
        sch.reverse_compute_inline(reindexed_store)
        store = sch.blockize(sch.get_loops(fragment)[-2])
        sch.annotate(store, AUTO_TENSORIZE, group["store"])
        sch.fuse(*sch.get_loops(state.write_cache)[-5:])
        self._annotate_cooperative_fetch(sch, state.write_cache)

    def _load_fragments(self, state: _State, group: dict) -> None:
        """The operands' fragments loaded from the shared caches at the inner reduction tile, and
        the reindex stages inlined into those caches (TVM's AddReadReuseTensorCore). An mma.sync
        load is marked for the swizzled shared-memory layout (``permuted_layout``: ``s2l_A``/``B``)."""
        sch = state.sch
        loop = state.tiles[self.r_indices[1]][-1]
        mma = _is_mma(group)
        for index, operand in enumerate("AB"):
            scope = f"m16n8k8.matrix{operand}" if mma else f"wmma.matrix_{operand.lower()}"
            intrin = group[f"load_{operand.lower()}"]
            fragment = sch.cache_read(state.block, index, scope)
            sch.compute_at(fragment, loop, preserve_unit_loops=True)
            inner = self._tile_with_intrin(sch, fragment, _desc_block(intrin)[1])
            load = sch.blockize(inner)
            sch.annotate(load, AUTO_TENSORIZE, intrin)
            if mma:
                sch.annotate(load, "permuted_layout", f"s2l_{operand}")
        for cache in state.read_caches:
            (producer,) = sch.get_producers(cache)
            sch.compute_inline(producer)
            dtype = str(sch.get(cache).writes[0].buffer.dtype)
            if dtype in ("float16", "int8"):
                sch.storage_align(cache, 0, -2, 32, 8 if dtype == "float16" else 16)

    def _add_software_pipeline(self, state: _State, mma: bool = False) -> None:
        """With ``use_software_pipeline``: both reduction tiles pipelined, the fragments one step
        ahead of the products. WMMA: the operands staged through registers, double buffered, the
        outer tile interleaved with the inner pipeline. mma.sync: the copies to shared memory
        asynchronous (16-byte vectors, ``cp.async``), two tiles ahead."""
        if not self.use_software_pipeline or len(self.r_indices) < 2:
            return
        sch = state.sch
        length = 1
        for index in self.r_indices:
            for tile in state.tiles[index]:
                length *= const_int(sch.get(tile).extent)
        if length <= 1:
            return
        for cache in state.read_caches:
            if mma:
                sch.annotate(cache, "vector_bytes", 16)
            else:
                sch.annotate(cache, "tirx.manifest_shared_memory_local_stage", 1)
                sch.annotate(cache, "double_buffer_scope", 0)
        inner, outer = state.tiles[self.r_indices[1]][-1], state.tiles[self.r_indices[0]][-1]
        sch.annotate(inner, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(inner, "software_pipeline_order", [0, 1, 2])
        if mma:
            sch.annotate(outer, "software_pipeline_async_stages", [0])
            sch.annotate(outer, "software_pipeline_stage", [0, 0, 1, 2, 2])
            sch.annotate(outer, "software_pipeline_order", [0, 1, 3, 2, 4])
        else:
            sch.annotate(outer, "software_pipeline_stage", [0, 0, 0, 0, 0, 1, 1])
            sch.annotate(outer, "software_pipeline_order", [0, 3, 1, 4, 5, 2, 6])

    # ------------------------------------------------------------------ the mma.sync sketch
    def _mma_sketches(self, state: _State, group: dict, reindexed_store: Any) -> list:
        """TVM's mma.sync sketch (an empty list where the tensorized block has more loops than
        i, j, k): the spatial tiles sampled partitioned (the inner ones a whole ldmatrix slice),
        the accumulators in ``m16n8k8.matrixC`` fragments per warp tile (``write_at``) copied
        out by the lowering, the operands read into swizzled shared memory per outer reduction
        tile (``read_at``, ``permuted_layout`` ``g2s_A``/``B``) and from there into fragments."""
        sch = state.sch
        if sum(isinstance(node, For) for node in site(sch, state.block)[2]) != 3:  # (TVM's takes i, j, k only)
            return []
        (state,) = self._tile_loop_nest(state, sample_tiles=self._sample_partitioned)
        sch.write_at(state.tiles[2][-1], state.block, 0, "m16n8k8.matrixC")
        sch.reverse_compute_inline(reindexed_store)
        if self.reuse_read.req == "no":
            return [sch]
        sketches = []
        for level in self.reuse_read.levels:
            new = state.copy()
            loop = new.tiles[level - 1][-1]
            b = new.sch.get(new.block)
            for i, read in enumerate(b.reads):
                if any(read.buffer is write.buffer for write in b.writes):
                    continue
                cache = new.sch.read_at(loop, new.block, i, self.reuse_read.scope)
                new.sch.annotate(cache, "permuted_layout", f"g2s_{'AB'[i]}")
                new.read_caches.append(cache)
            self._load_fragments(new, group)
            self._add_software_pipeline(new, mma=True)
            sketches.append(new.sch)
        return sketches

    def _sample_partitioned(self, sch: Any, loop: Any, n: int, position: int, iter_type: int) -> list:
        """An mma.sync sketch's spatial tiles: the last two (of five) a multiple of one ldmatrix
        slice in tiles (A's 32 rows: 2 tiles of 16; B's 32 columns: 4 of 8)."""
        if iter_type != DATA_PAR:
            return self._sample_tiles(sch, loop, n, position, iter_type)
        return sch.sample_partitioned_tile(loop, n=n, partition_pos=3, innerpart_factor=2 if position == 0 else 4)


__all__ = ["AUTO_TENSORIZE", "AUTO_TENSORIZE_INIT", "MultiLevelTilingTensorCore"]
