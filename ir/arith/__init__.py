"""Integer arithmetic on TIR expressions, in one place.

- ``operators``: expressions built as TVM's Python operators build them (conversions, constant
  folding with wrap-around);
- ``analyzer``: the canonical form (sums of split terms) with known variable ranges, and its modes;
- ``iter_map``: whether block bindings are a one-to-one affine map of the loop variables.
"""
from .analyzer import (AFFINE, CANONICAL, DIMENSION, SCHEDULE, Analyzer, SplitTerm, Sum, canonical,
                       canonical_ge_zero, divisible, simplify, simplify_index)
from .iter_map import FusedKey, affine_pieces, is_bijective_affine
from .operators import (BINARY_OPERATORS, CmpOp, Mod, binary, cast, fold_identity, logical_not,
                        match_types, negate, to_expr, truediv)

__all__ = ["Analyzer", "SCHEDULE", "CANONICAL", "DIMENSION", "AFFINE", "SplitTerm", "Sum", "simplify_index", "simplify", "canonical",
           "canonical_ge_zero", "divisible", "FusedKey", "affine_pieces", "is_bijective_affine",
           "BINARY_OPERATORS", "CmpOp", "Mod", "binary", "cast", "fold_identity", "logical_not",
           "match_types", "negate", "to_expr", "truediv"]
