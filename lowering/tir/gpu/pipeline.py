"""The cuda TIR pipeline: a scheduled PrimFunc in, the host function and its kernels out.

``lower_for_cuda(func, target)`` runs TVM 0.27's s_tir pipeline for a cuda target
(``tvm.s_tir.pipeline.default_s_tir_pipeline``, as ``tvm.compile`` runs it) with the passes tvms
has, then, on the kernels, the device passes ``tvm.compile`` runs before the CUDA code
generator (``finalize_device_passes``: LowerWarpMemory, StmtSimplify, LowerIntrin). The result
is printed as TVM prints its SplitHostDevice stage: kernels ``<symbol>_kernel`` (``calling_conv``
2, ``tirx.kernel_launch_params``, ``T.launch_thread``), then the host function, whose body ends in
``T.call_ffi_kernel(name, args..., extents..., launch_params=[...])``. The host is left at that
stage (MakePackedAPI's packed calling convention is the runtime's business in tvms); the
kernels are as the code generator takes them.

CommonSubexprElim runs unless the current PassContext's config sets ``tirx.disable_cse_tir``;
where it sets ``tirx.use_async_copy``, LowerAsyncDMA runs after StorageRewrite and
InjectPTXAsyncCopy before MergeSharedMemoryAllocations (as in TVM: a loop copying a contiguous run
in a commit group becomes ``T.dma_copy``, which no CUDA code generator takes). TVM's passes that tvms does not run (``SKIPPED``) change nothing on schedules without
their features, except these differences: tvms's StorageRewrite does not let allocations share memory; tvms's StmtSimplify simplifies
buffer indices only, and less than TVM's (``(f * 256 + t) // 128`` stays). A reduction of several
buffers at once (argmax) bound to threads is refused (tvms's LowerCrossThreadReduction does
single-buffer sums, products, minima and maxima). LowerAutoCopy (``lower_auto_copy.py``) makes the
``auto_copy`` blocks of a tuning candidate (an mma.sync candidate's ``read_at``/``write_at``
copies) into coalesced, vectorized copies, so such a candidate lowers from its scheduled form.
"""
from __future__ import annotations

from typing import Callable

from ....ir.errors import TVMSError
from ....ir.function import PrimFunc
from ....ir.module import IRModule, Target as TargetAttr
from ....ir.node import FrozenDict
from ....ir.target import Target
from ..canonicalize_loop import canonicalize_loop
from ..compact_buffer_allocation import compact_buffer_allocation
from ..convert_blocks_to_opaque import convert_blocks_to_opaque
from ..flatten_buffer import flatten_buffer
from ..lower_init_block import lower_init_block
from ..lower_match_buffer import lower_match_buffer
from ..lower_opaque_block import lower_opaque_block
from ..plan_buffer_allocation import plan_buffer_allocation
from ..stmt_simplify import stmt_simplify
from ..unroll_loop import unroll_loop_in_context
from ..vectorize_loop import vectorize_loop
from ...transform import PassContext
from .annotate_entry_func import annotate_entry_func
from .common_subexpr_elim import common_subexpr_elim
from .infer_fragment import infer_fragment
from .inject_double_buffer import inject_double_buffer
from .inject_permuted_layout import inject_permuted_layout
from .inject_ptx_async_copy import inject_ptx_async_copy
from .inject_software_pipeline import inject_software_pipeline
from .inject_virtual_thread import inject_virtual_thread
from .lower_async_dma import lower_async_dma
from .lower_auto_copy import lower_auto_copy
from .lower_cross_thread_reduction import lower_cross_thread_reduction
from .lower_intrin_cuda import lower_cuda_intrin
from .lower_thread_allreduce import lower_thread_allreduce
from .lower_tirx import lower_tirx
from .lower_warp_memory import lower_warp_memory
from .manifest_shared_memory_local_stage import manifest_shared_memory_local_stage
from .merge_shared_memory_allocations import merge_shared_memory_allocations
from .narrow_data_type import narrow_data_type
from .remove_negative_waits import remove_negative_waits
from .split_host_device import split_host_device
from .storage_rewrite import storage_rewrite
from .thread_binding import lift_thread_binding, unify_thread_binding
from .thread_sync import thread_sync
from .transform_mma_buffer_layout import transform_mma_buffer_layout
from .verify_memory import verify_memory

def vectorize_with_scalar_guards(func: PrimFunc) -> PrimFunc:
    return vectorize_loop(func, scalar_guards=True)  # (C has no vector condition for a guarded load)


# TVM's s_tir pipeline up to AnnotateEntryFunc, the passes tvms has (per PrimFunc)
BEFORE_ENTRY = (lower_tirx, canonicalize_loop, lower_cross_thread_reduction, lower_init_block, plan_buffer_allocation, convert_blocks_to_opaque,
                lift_thread_binding, manifest_shared_memory_local_stage, compact_buffer_allocation, lower_auto_copy,
                unify_thread_binding,
                lower_match_buffer, stmt_simplify, inject_permuted_layout, inject_software_pipeline,
                transform_mma_buffer_layout, lower_opaque_block, flatten_buffer, narrow_data_type, vectorize_with_scalar_guards,
                inject_virtual_thread, inject_double_buffer,
                storage_rewrite, unroll_loop_in_context, stmt_simplify, remove_negative_waits)
# after it, per PrimFunc: the barriers for each memory scope, the fragments' shapes, the
# cross-thread reductions, then each kernel's dynamic shared memory as one allocation
BEFORE_SPLIT = (lambda f: thread_sync(f, "shared"), lambda f: thread_sync(f, "shared.dyn"),
                lambda f: thread_sync(f, "warp"), infer_fragment, lower_thread_allreduce,
                merge_shared_memory_allocations)
DEVICE = (lower_warp_memory, stmt_simplify, lower_cuda_intrin)  # (LowerIntrin on a cuda kernel)
SKIPPED = ("AnnotateIrregularLoop",
           "BF16ComputeLegalize", "LoopPartition",
           # (RemoveNoOp: the part a pipeline needs, its negative waits, is remove_negative_waits)
           "HoistIfThenElse", "RenormalizeSplitPattern", "RemoveNoOp", "RewriteUnsafeSelect",
           "FP8ComputeLegalize",
           "MakePackedAPI", "FP8StorageLegalize", "BF16StorageLegalize")

DEFAULT_HOST = {"keys": ("cpu",), "kind": "llvm", "mtriple": "x86_64-pc-linux-gnu", "tag": ""}


def cuda_target_attr(target: Target) -> TargetAttr:
    """``target`` as a PrimFunc's ``target`` attribute, with TVM's defaults for cuda (``sm_50``,
    1024 threads, warps of 32) and an llvm host."""
    if target.kind != "cuda":
        raise TVMSError(f"lower_for_cuda: the target must be cuda, not {target.kind}")
    config = {"arch": "sm_50", "keys": ("cuda", "gpu"), "kind": "cuda", "max_num_threads": 1024,
              "tag": "", "thread_warp_size": 32, **target.attrs}
    host = dict(DEFAULT_HOST)
    if target.host is not None:
        host.update(kind=target.host.kind, **{k: v for k, v in target.host.attrs.items()})
    config["host"] = FrozenDict(sorted(host.items()))
    return TargetAttr(FrozenDict(sorted(config.items())))


def _each_prim_func(mod: IRModule, steps) -> IRModule:
    result = mod.copy()
    for gv, func in mod.functions_items():
        if isinstance(func, PrimFunc):
            for step in steps:
                func = step(func)
            result[gv] = func
    return result


def bind_cuda_target(func: PrimFunc, target: Target) -> PrimFunc:
    """``func`` bound to ``target`` (TVM's BindTarget; a function already bound to cuda keeps its
    target)."""
    if not isinstance(func, PrimFunc):
        raise TVMSError(f"lower_for_cuda: expected a PrimFunc, got {type(func).__name__}")
    bound = cuda_target_attr(target)  # (refuses a target that is not cuda)
    existing = func.attrs.get("target")
    if not (isinstance(existing, TargetAttr) and existing.kind == "cuda" and "host" in existing.config):
        func = func.with_attr("target", bound)
    return func


def split_for_cuda(func: PrimFunc, target: Target, start: Callable | None = None) -> IRModule:
    """TVM's s_tir pipeline on ``func`` up to SplitHostDevice: the host function and its kernels
    as that stage prints them (before the device passes). ``start``, one of ``BEFORE_ENTRY``'s
    passes, resumes the pipeline there (on a function already lowered up to it, by TVM say)."""
    func = bind_cuda_target(func, target)
    symbol = str(func.attrs.get("global_symbol", "main"))
    config = PassContext.current().config
    steps = BEFORE_ENTRY
    if config.get("tirx.use_async_copy", False):  # (TVM's option: DMA copies, then cp.async below)
        after = steps.index(storage_rewrite) + 1
        steps = steps[:after] + (lower_async_dma,) + steps[after:]
    if not config.get("tirx.disable_cse_tir", False):  # (TVM's option)
        steps += (common_subexpr_elim,)
    if start is not None:
        if start not in steps:
            names = dict.fromkeys(getattr(s, "__name__", repr(s)) for s in steps)
            raise TVMSError(f"split_for_cuda: start={getattr(start, '__name__', repr(start))} is none of the "
                            f"pipeline's passes before SplitHostDevice: {', '.join(names)}")
        steps = steps[steps.index(start):]
    mod = _each_prim_func(IRModule({symbol: func}), (*steps, verify_memory))
    late = BEFORE_SPLIT
    if config.get("tirx.use_async_copy", False):
        merge = late.index(merge_shared_memory_allocations)  # (the copies go in before the merge)
        late = late[:merge] + (inject_ptx_async_copy,) + late[merge:]
    mod = _each_prim_func(annotate_entry_func(mod), late)
    return split_host_device(mod)


def finalize_kernels(mod: IRModule) -> IRModule:
    """``mod`` with TVM's device passes run on its kernels (``calling_conv`` 2)."""
    result = mod.copy()
    for gv, kernel in mod.functions_items():
        if isinstance(kernel, PrimFunc) and kernel.attrs.get("calling_conv") == 2:
            for step in DEVICE:
                kernel = step(kernel)
            result[gv] = kernel
    return result


def lower_for_cuda(func: PrimFunc, target: Target) -> IRModule:
    """The host function and the device kernels of ``func`` scheduled for cuda (see the module
    docstring)."""
    return finalize_kernels(split_for_cuda(func, target))


__all__ = ["bind_cuda_target", "lower_for_cuda", "split_for_cuda", "finalize_kernels", "cuda_target_attr",
           "SKIPPED"]
