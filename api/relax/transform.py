"""tvms.relax.transform: Relax passes, shaped like ``tvm.relax.transform`` (re-exports only)."""
from ..lowering.relax.block_channels import BlockChannels
from ..lowering.relax.call_tir_rewrite import CallTIRRewrite
from ..lowering.relax.fuse_by_pattern import FuseOpsByPattern, FusionPattern, PatternCheckContext
from ..lowering.relax.fuse_ops import FuseOps
from ..lowering.relax.fuse_tir import FuseTIR
from ..lowering.relax.fuse_transpose_matmul import FuseTransposeMatmul
from ..lowering.relax.legalize import LegalizeOps
from ..lowering.relax.lift_transform_params import LiftTransformParams
from ..lowering.relax.pad_conv_groups import PadConvGroups
from ..lowering.tune.relax_integration import MetaScheduleApplyDatabase, MetaScheduleTuneTIR
from ..lowering.relax.op_pattern import AnnotateTIROpPattern
from ..lowering.relax.run_codegen import RunCodegen
from ..lowering.relax.split_layout_rewrite_preproc import SplitLayoutRewritePreproc
from ..lowering.relax.remove_purity_checking import RemovePurityChecking
from ..lowering.relax.winograd import WinogradConv2d
from ..lowering.relax.passes import (BindParams, CanonicalizeBindings, ConvertToDataflow,
                                     DeadCodeElimination, FoldConstant, ToNonDataflow)

__all__ = ["BindParams", "CanonicalizeBindings", "ConvertToDataflow", "DeadCodeElimination",
           "FoldConstant", "LegalizeOps", "ToNonDataflow"]
__all__ += ["AnnotateTIROpPattern", "CallTIRRewrite", "FuseOps", "FuseTIR", "FuseTransposeMatmul"]
__all__ += ["FuseOpsByPattern", "FusionPattern", "PatternCheckContext", "RemovePurityChecking", "RunCodegen"]
__all__ += ["MetaScheduleApplyDatabase", "MetaScheduleTuneTIR"]
__all__ += ["BlockChannels", "LiftTransformParams", "PadConvGroups", "SplitLayoutRewritePreproc", "WinogradConv2d"]
