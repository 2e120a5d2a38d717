"""What "from-target" means: the schedule rules, postprocessors and mutator probabilities of each
target kind, as TVM 0.27's defaults (``ScheduleRule::DefaultLLVM`` and its siblings).

A table keyed by target kind, so another backend adds its row (the CUDA issue adds "cuda") without
touching the engine. Mutators are named by class name: the search strategy looks them up.
"""
from __future__ import annotations

from typing import Callable

from ...ir.errors import TVMSError
from .postproc import Postproc
from .postproc_disallow_dynamic_loop import DisallowDynamicLoop
from .postproc_rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .postproc_rewrite_reduction_block import RewriteReductionBlock
from .rule_add_rfactor import AddRFactor
from .rule_apply_custom import ApplyCustomRule
from .rule_auto_inline import AutoInline, InlineConstantScalars
from .rule_multi_level_tiling import MultiLevelTiling, ReuseType
from .rule_parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .rule_random_compute_location import RandomComputeLocation
from .schedule_rule import ScheduleRule


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


# kind -> (rules, postprocs, {mutator class name: probability})
DEFAULTS: dict[str, tuple[Callable[[], list], Callable[[], list], Callable[[], dict]]] = {
    "llvm": (_llvm_rules, _llvm_postprocs,
             lambda: {"MutateTileSize": 0.9, "MutateComputeLocation": 0.05, "MutateUnroll": 0.03,
                      "MutateParallel": 0.02}),
}


def _row(kind: str) -> tuple:
    if kind not in DEFAULTS:
        raise TVMSError(f"no default tuning space for target kind {kind!r} (known: {', '.join(sorted(DEFAULTS))})")
    return DEFAULTS[kind]


def default_rules(kind: str) -> list[ScheduleRule]:
    return _row(kind)[0]()


def default_postprocs(kind: str) -> list[Postproc]:
    return _row(kind)[1]()


def default_mutator_probs(kind: str) -> dict[str, float]:
    return _row(kind)[2]()
