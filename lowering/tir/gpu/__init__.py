"""GPU TIR lowering: TVM 0.27's passes for a cuda target, each by its TVM name, and
``lower_for_cuda`` (pipeline.py) running TVM's s_tir pipeline for cuda up to the kernels the CUDA
code generator takes."""
from __future__ import annotations

from .annotate_entry_func import AnnotateEntryFunc, annotate_entry_func
from .common_subexpr_elim import CommonSubexprElim, common_subexpr_elim
from .inject_double_buffer import InjectDoubleBuffer, inject_double_buffer
from .inject_permuted_layout import InjectPermutedLayout, inject_permuted_layout
from .inject_ptx_async_copy import InjectPTXAsyncCopy, inject_ptx_async_copy
from .inject_software_pipeline import InjectSoftwarePipeline, inject_software_pipeline
from .inject_virtual_thread import InjectVirtualThread, inject_virtual_thread
from .lower_async_dma import LowerAsyncDMA, lower_async_dma
from .lower_auto_copy import LowerAutoCopy, lower_auto_copy
from .lower_cross_thread_reduction import LowerCrossThreadReduction, lower_cross_thread_reduction
from .lower_thread_allreduce import LowerThreadAllreduce, lower_thread_allreduce
from .lower_tirx import LowerTIRx, lower_tirx
from .lower_warp_memory import LowerWarpMemory, lower_warp_memory
from .manifest_shared_memory_local_stage import ManifestSharedMemoryLocalStage, manifest_shared_memory_local_stage
from .merge_shared_memory_allocations import MergeSharedMemoryAllocations, merge_shared_memory_allocations
from .narrow_data_type import NarrowDataType, narrow_data_type
from .pipeline import cuda_target_attr, finalize_kernels, lower_for_cuda, split_for_cuda
from .split_host_device import SplitHostDevice, split_host_device
from .storage_rewrite import StorageRewrite, storage_rewrite
from .thread_binding import LiftThreadBinding, UnifyThreadBinding, lift_thread_binding, unify_thread_binding
from .thread_sync import ThreadSync, thread_sync
from .transform_mma_buffer_layout import TransformMmaBufferLayout, transform_mma_buffer_layout
from ..lower_tirx_opaque import LowerTIRxOpaque, lower_tirx_opaque

__all__ = [
    "AnnotateEntryFunc", "CommonSubexprElim", "InjectDoubleBuffer", "InjectPTXAsyncCopy", "InjectPermutedLayout", "InjectSoftwarePipeline", "InjectVirtualThread", "LiftThreadBinding", "LowerAsyncDMA", "LowerAutoCopy", "LowerCrossThreadReduction",
    "LowerThreadAllreduce", "LowerTIRx", "LowerTIRxOpaque", "LowerWarpMemory", "ManifestSharedMemoryLocalStage", "MergeSharedMemoryAllocations", "NarrowDataType",
    "SplitHostDevice", "StorageRewrite", "ThreadSync", "TransformMmaBufferLayout", "UnifyThreadBinding", "annotate_entry_func", "common_subexpr_elim", "cuda_target_attr",
    "finalize_kernels", "inject_double_buffer", "inject_permuted_layout", "inject_ptx_async_copy", "inject_software_pipeline", "inject_virtual_thread", "lift_thread_binding", "lower_async_dma", "lower_auto_copy", "lower_cross_thread_reduction", "lower_for_cuda", "lower_thread_allreduce", "lower_tirx", "lower_tirx_opaque",
    "lower_warp_memory", "manifest_shared_memory_local_stage", "merge_shared_memory_allocations", "narrow_data_type", "split_for_cuda", "split_host_device", "storage_rewrite", "thread_sync", "transform_mma_buffer_layout", "unify_thread_binding",
]
