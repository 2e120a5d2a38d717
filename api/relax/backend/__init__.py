"""tvms.relax.backend: backend pattern registry, shaped like ``tvm.relax.backend``
(re-exports only). Importing it registers the ``cpu_blas`` backend (patterns and codegen)."""
from ...lowering.relax import cpu_blas  # noqa: F401  (registers its patterns and codegen)
from ...lowering.relax.dispatch import DispatchSampling, DispatchSortScan
from ...lowering.relax.backend import (get_pattern, get_patterns_with_prefix,
                                      has_leaking_intermediate_variables,
                                      make_fused_bias_activation_pattern, make_matmul_pattern,
                                      register_patterns)

__all__ = ["DispatchSampling", "DispatchSortScan", "get_pattern", "get_patterns_with_prefix", "has_leaking_intermediate_variables",
           "make_fused_bias_activation_pattern", "make_matmul_pattern", "register_patterns"]
