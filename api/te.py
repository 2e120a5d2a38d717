"""``tvms.te``: the tensor-expression DSL, as ``tvm.te`` spells it (re-exports ``tvms.lowering.te``)."""
from .lowering.te import (Axis, ComputeOp, Operation, PlaceholderOp, Reduce, Tensor, all, any,  # noqa: F401
                          compute, const, create_prim_func, if_then_else, max, max_value, min,
                          min_value, placeholder, reduce_axis, sum, var)
from .lowering.te import __all__  # noqa: F401
