"""tvms.relax.transform: Relax passes, shaped like ``tvm.relax.transform`` (re-exports only)."""
from ..lowering.relax.legalize import LegalizeOps
from ..lowering.relax.passes import (BindParams, CanonicalizeBindings, ConvertToDataflow,
                                     DeadCodeElimination, FoldConstant, ToNonDataflow)

__all__ = ["BindParams", "CanonicalizeBindings", "ConvertToDataflow", "DeadCodeElimination",
           "FoldConstant", "LegalizeOps", "ToNonDataflow"]
