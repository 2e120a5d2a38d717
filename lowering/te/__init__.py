"""tvms.lowering.te: the tensor-expression DSL (``te.compute``) and ``te.create_prim_func``,
which turns a TE graph into a schedulable TensorIR PrimFunc. Relax legalization builds on it."""
from .create_prim_func import create_prim_func
from .tensor import (Axis, ComputeOp, MultiReduce, Operation, PlaceholderOp, Reduce, Tensor, all, any,
                     comm_reducer, compute, const, if_then_else, max, max_value, min, min_value,
                     placeholder, prod, reduce_axis, sum, var)

__all__ = ["Axis", "ComputeOp", "MultiReduce", "Operation", "PlaceholderOp", "Reduce", "Tensor", "all",
           "any", "comm_reducer", "compute", "const", "create_prim_func", "if_then_else", "max",
           "max_value", "min", "min_value", "placeholder", "prod", "reduce_axis", "sum", "var"]
