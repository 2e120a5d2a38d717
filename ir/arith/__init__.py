"""Integer arithmetic on TIR expressions, in one place.

- ``operators``: expressions built as TVM's Python operators build them (conversions, constant
  folding with wrap-around);
- ``split_sum``: the one canonical form, a sum of split terms ``x // lower % upper * scale``;
- ``analyzer``: the rules that bring an expression to that form, knowing variable ranges, in the
  modes that reproduce TVM's behaviours (schedule bindings, canonical simplifier, struct-info
  sizes, affine fold);
- ``conditions``: comparisons, ``and``/``or``/``not`` and selections, decided by the ranges or
  written in the normal form of TVM's ``Analyzer.simplify`` (the analyzer's ``simplify`` of them);
- ``iter_map``: whether block bindings are a one-to-one affine map of the loop variables.
"""
from .analyzer import (AFFINE, CANONICAL, DIMENSION, SCHEDULE, Analyzer, canonical, canonical_ge_zero,
                       divisible, simplify, simplify_index)
from .bitwise import INTRINSICS as BITWISE_INTRINSICS, bitwise_binary, bitwise_builder, bitwise_not
from .iter_map import FusedKey, affine_pieces, is_bijective_affine
from .operators import (CmpOp, Mod, binary, builds_as_written, cast, fold_identity, index_typed,
                        logical_not, match_types, negate, to_expr, truediv)
from .split_sum import SplitTerm, Sum, expr_key

__all__ = ["Analyzer", "SCHEDULE", "CANONICAL", "DIMENSION", "AFFINE", "SplitTerm", "Sum", "expr_key",
           "simplify_index", "simplify", "canonical", "canonical_ge_zero", "divisible",
           "FusedKey", "affine_pieces", "is_bijective_affine",
           "BITWISE_INTRINSICS", "bitwise_binary", "bitwise_builder", "bitwise_not",
           "CmpOp", "Mod", "binary", "builds_as_written", "cast", "fold_identity", "index_typed",
           "logical_not", "match_types", "negate", "to_expr", "truediv"]
