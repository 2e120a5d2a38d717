"""tvms.relax.dpl: the Relax dataflow pattern language, shaped like ``tvm.relax.dpl``
(re-exports only)."""
from ..lowering.relax.dpl import (AndPattern, AttrPattern, CallPattern, ConstantPattern, DFPattern,
                                  DataflowVarPattern, DataTypePattern, ExprPattern,
                                  ExternFuncPattern, GlobalVarPattern, NotPattern, OrPattern,
                                  PrimArrPattern, ShapePattern, TupleGetItemPattern, TuplePattern,
                                  UnorderedTuplePattern, VarPattern, WildcardPattern, has_attr,
                                  has_dtype, is_call_dps_packed, is_call_packed, is_call_tir,
                                  is_const, is_dfv, is_expr, is_gv, is_op, is_shape, is_tuple,
                                  is_tuple_get_item, is_var, reject, rewrite_call, wildcard)

__all__ = ["AndPattern", "AttrPattern", "CallPattern", "ConstantPattern", "DFPattern",
           "DataTypePattern", "DataflowVarPattern", "ExprPattern", "ExternFuncPattern",
           "GlobalVarPattern", "NotPattern", "OrPattern", "PrimArrPattern", "ShapePattern",
           "TupleGetItemPattern", "TuplePattern", "UnorderedTuplePattern", "VarPattern",
           "WildcardPattern", "has_attr", "has_dtype", "is_call_dps_packed", "is_call_packed",
           "is_call_tir", "is_const", "is_dfv", "is_expr", "is_gv", "is_op", "is_shape", "is_tuple",
           "is_tuple_get_item", "is_var", "reject", "rewrite_call", "wildcard"]
