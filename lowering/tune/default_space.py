"""What "from-target" means: the schedule rules, postprocessors and mutator probabilities of each
target kind, as TVM 0.27's defaults (``ScheduleRule::DefaultLLVM`` and its siblings).

Each target kind registers its row with ``space_generator.register_defaults`` ("llvm" and
"cuda" here), so a backend joins without touching the engine. Mutators are named by class name: the search strategy looks them up.
"""
from __future__ import annotations

from ..schedule.tensor_intrin_cuda import get_wmma_intrin_group
from ..schedule.tensor_intrin_mma import get_mma_m16n8k8_intrin_group
from .postproc import Postproc
from .postproc_disallow_dynamic_loop import DisallowDynamicLoop
from .postproc_rewrite_cooperative_fetch import RewriteCooperativeFetch
from .postproc_rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .postproc_rewrite_reduction_block import RewriteReductionBlock
from .postproc_rewrite_tensorize import RewriteTensorize
from .postproc_rewrite_unbound_block import RewriteUnboundBlock
from .postproc_verify_gpu_code import VerifyGPUCode
from .rule_add_rfactor import AddRFactor
from .rule_apply_custom import ApplyCustomRule
from .rule_auto_bind import AutoBind
from .rule_auto_inline import AutoInline, InlineConstantScalars
from .rule_cross_thread_reduction import CrossThreadReduction
from .rule_multi_level_tiling import MultiLevelTiling, ReuseType
from .rule_multi_level_tiling_tensor_core import MultiLevelTilingTensorCore
from .rule_parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .rule_random_compute_location import RandomComputeLocation
from .schedule_rule import ScheduleRule
from .space_generator import register_defaults


def _llvm_rules() -> list[ScheduleRule]:
    return [
        ApplyCustomRule(),
        InlineConstantScalars(),
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=True,
                   require_injective=True, require_ordered=True, disallow_op=["tir.exp"]),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTiling("SSRSRS", max_innermost_factor=64,
                         reuse_write=ReuseType(req="may", levels=[1, 2], scope="global")),
        ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64,
                                   unroll_max_steps=[0, 16, 64, 512], unroll_explicit=True),
        RandomComputeLocation(),
    ]


def _llvm_postprocs() -> list[Postproc]:
    # TVM's list ends with RewriteLayout, which only acts on functions marked layout_free_buffers;
    # tvms does not have it yet (no default-lowered function carries that mark)
    return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


register_defaults("llvm", sch_rules=_llvm_rules, postprocs=_llvm_postprocs,
                  mutator_probs=lambda: {"MutateTileSize": 0.9, "MutateComputeLocation": 0.05,
                                         "MutateUnroll": 0.03, "MutateParallel": 0.02})


def _cuda_rules() -> list[ScheduleRule]:
    return [
        ApplyCustomRule(),
        MultiLevelTiling("SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"], max_innermost_factor=64,
                         vector_load_lens=[1, 2, 3, 4, 8, 16], reuse_read=ReuseType(req="must", levels=[4], scope="shared"),
                         reuse_write=ReuseType(req="must", levels=[3], scope="local")),
        InlineConstantScalars(),
        AutoInline(into_producer=True, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=False,
                   require_injective=False, require_ordered=False, disallow_op=[]),
        CrossThreadReduction(thread_extents=[4, 8, 16, 32, 64, 128, 256, 512]),
        ParallelizeVectorizeUnroll(max_jobs_per_core=-1, max_vectorize_extent=-1,
                                   unroll_max_steps=[0, 16, 32, 64, 128, 256, 512, 1024], unroll_explicit=True),
        AutoBind(max_threadblocks=256, thread_extents=[32, 64, 128, 256, 512, 1024]),
    ]


def _cuda_postprocs() -> list[Postproc]:
    return [DisallowDynamicLoop(), RewriteCooperativeFetch(), RewriteUnboundBlock(max_threadblocks=256),
            RewriteParallelVectorizeUnroll(), RewriteReductionBlock(), VerifyGPUCode()]


_CUDA_MUTATORS = {"MutateTileSize": 0.9, "MutateUnroll": 0.08, "MutateThreadBinding": 0.02}
register_defaults("cuda", sch_rules=_cuda_rules, postprocs=_cuda_postprocs, mutator_probs=lambda: dict(_CUDA_MUTATORS))


def _cuda_tensorcore_rules() -> list[ScheduleRule]:
    """TVM's "cuda-tensorcore" space: WMMA tiling (fp16 into fp32 or fp16, int8 into int32; B as
    [k, n] or [n, k]), then mma.sync tiling (fp16 into fp16 or fp32, m16n8k8, no shared write-back,
    software pipelined with asynchronous copies), then the cuda rules."""
    groups = [get_wmma_intrin_group("shared.dyn", "shared.dyn", a, c, trans_b)
              for a, c in (("float16", "float32"), ("float16", "float16"), ("int8", "int32"))
              for trans_b in (False, True)]
    common = {"structure": "SSSRRSRS", "tile_binds": ["blockIdx.y", "blockIdx.x", "threadIdx.y"],
              "max_innermost_factor": 4, "vector_load_lens": [1, 2, 3, 4, 8, 16],
              "reuse_read": ReuseType(req="must", levels=[4], scope="shared.dyn")}
    wmma = MultiLevelTilingTensorCore(groups, **common, reuse_write=ReuseType(req="must", levels=[2], scope="shared.dyn"))
    mma = MultiLevelTilingTensorCore([get_mma_m16n8k8_intrin_group(c) for c in ("float16", "float32")], **common,
                                     reuse_write=ReuseType(req="no", levels=[2], scope="shared.dyn"),
                                     use_software_pipeline=True)
    return [ApplyCustomRule(), wmma, mma, *_cuda_rules()[1:]]


# (a space named as TVM names it, not a target kind: PostOrderApply(sch_rules="cuda-tensorcore", ...))
register_defaults("cuda-tensorcore", sch_rules=_cuda_tensorcore_rules,
                  postprocs=lambda: [*_cuda_postprocs(), RewriteTensorize(vectorize_init_loop=False)],
                  mutator_probs=lambda: dict(_CUDA_MUTATORS))
