"""TIR lowering: the passes that turn scheduled TensorIR into loop-level code for a CPU code
generator, each a named, registered pass as in TVM 0.27, and ``lower_for_codegen`` running them;
gpu/ holds the passes of TVM's cuda pipeline and ``lower_for_cuda``, which load on first use (a
CPU build does not need them)."""
from __future__ import annotations

from ...ir.lazy import lazy_names
from ...ir.registry import add_layer_loader
from .canonicalize_loop import CanonicalizeLoop, canonicalize_loop
from .compact_buffer_allocation import CompactBufferAllocation, compact_buffer_allocation
from .convert_blocks_to_opaque import ConvertBlocksToOpaque, convert_blocks_to_opaque
from .flatten_buffer import FlattenBuffer, flatten_buffer
from .lower_init_block import LowerInitBlock, lower_init_block
from .lower_intrin import LowerIntrin, lower_intrin
from .lower_match_buffer import LowerMatchBuffer, lower_match_buffer
from .lower_opaque_block import LowerOpaqueBlock, lower_opaque_block
from .pipeline import CPU_PIPELINE, check_lowered, lower_for_codegen
from .plan_buffer_allocation import PlanAndUpdateBufferAllocationLocation, plan_buffer_allocation
from .stmt_simplify import StmtSimplify, stmt_simplify
from .unroll_loop import UnrollLoop, unroll_loop
from .unswitch_guards import UnswitchGuards, unswitch_guards
from .vectorize_loop import VectorizeLoop, vectorize_loop


# gpu/'s names (its ``__all__``: tests/test_lazy_import.py keeps the two equal), known before it loads
GPU_NAMES = (
    "AnnotateEntryFunc", "CommonSubexprElim", "InjectDoubleBuffer", "InjectPTXAsyncCopy", "InjectPermutedLayout", "InjectSoftwarePipeline",
    "InjectVirtualThread",
    "LiftThreadBinding", "LowerAsyncDMA", "LowerAutoCopy", "LowerCrossThreadReduction", "LowerThreadAllreduce", "LowerTIRx", "LowerTIRxOpaque", "LowerWarpMemory",
    "ManifestSharedMemoryLocalStage", "MergeSharedMemoryAllocations", "NarrowDataType",
    "SplitHostDevice", "StorageRewrite", "ThreadSync", "TransformMmaBufferLayout", "UnifyThreadBinding", "annotate_entry_func",
    "common_subexpr_elim", "cuda_target_attr", "finalize_kernels", "inject_double_buffer", "inject_permuted_layout", "inject_ptx_async_copy",
    "inject_software_pipeline",
    "inject_virtual_thread", "lift_thread_binding", "lower_async_dma", "lower_auto_copy", "lower_cross_thread_reduction", "lower_for_cuda",
    "lower_thread_allreduce", "lower_tirx", "lower_tirx_opaque", "lower_warp_memory", "manifest_shared_memory_local_stage", "merge_shared_memory_allocations", "narrow_data_type", "split_for_cuda", "split_host_device",
    "storage_rewrite", "thread_sync", "transform_mma_buffer_layout", "unify_thread_binding",
)
__getattr__, __dir__, _load_gpu = lazy_names(__name__, globals(), {name: (".gpu", name) for name in GPU_NAMES})
add_layer_loader(_load_gpu)  # (gpu/'s passes register by name)

__all__ = [
    "AnnotateEntryFunc", "CommonSubexprElim", "InjectDoubleBuffer", "InjectPTXAsyncCopy", "InjectPermutedLayout", "InjectSoftwarePipeline",
    "InjectVirtualThread",
    "LiftThreadBinding", "LowerAsyncDMA", "LowerAutoCopy", "LowerCrossThreadReduction", "LowerThreadAllreduce", "LowerTIRx", "LowerTIRxOpaque", "LowerWarpMemory",
    "ManifestSharedMemoryLocalStage", "MergeSharedMemoryAllocations", "NarrowDataType", "SplitHostDevice", "StorageRewrite", "ThreadSync",
    "TransformMmaBufferLayout", "UnifyThreadBinding", "lower_for_cuda",
    "CanonicalizeLoop", "canonicalize_loop", "CompactBufferAllocation", "ConvertBlocksToOpaque",
    "FlattenBuffer", "LowerInitBlock",
    "LowerIntrin", "LowerMatchBuffer", "LowerOpaqueBlock", "PlanAndUpdateBufferAllocationLocation",
    "StmtSimplify", "UnrollLoop", "UnswitchGuards", "VectorizeLoop", "CPU_PIPELINE", "check_lowered",
    "lower_for_codegen", "compact_buffer_allocation", "convert_blocks_to_opaque", "flatten_buffer",
    "lower_init_block", "lower_intrin", "lower_match_buffer", "lower_opaque_block",
    "plan_buffer_allocation", "stmt_simplify", "unroll_loop", "unswitch_guards", "vectorize_loop",
]
