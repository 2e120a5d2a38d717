"""tvms.relax: the face of the Relax layer, shaped like ``tvm.relax`` (re-exports only).

::

    from tvms import relax
    x = relax.Var("x", relax.TensorStructInfo([1, 784], "float32"))
    w = relax.Var("w", relax.TensorStructInfo([256, 784], "float32"))
    func = relax.Function([x, w], relax.op.matmul(x, relax.op.permute_dims(w)))
"""
from ..ir.module import GlobalVar
from ..ir.relax import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm,
                         ExternFunc, Function, If, MatchCast, PrimValue, SeqExpr, ShapeExpr, StringImm,
                         Tuple, TupleGetItem, Var, VarBinding)
from ..ir.relax import RelaxExpr as Expr
from ..ir.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                               StructInfo, TensorStructInfo, TupleStructInfo)
from ..script.block_builder import BlockBuilder, const
from ..script.relax_op_api import call_dps_packed, call_packed, call_py_func, call_tir
from ..runtime.py_funcs import register_py_func
from ..lowering.relax.pipeline import get_pipeline
from . import analysis, backend, dpl, frontend, op, transform
from .vm import VirtualMachine, build  # noqa: E402  (the Relax VM; also as relax.vm)

__all__ = ["BindingBlock", "BlockBuilder", "Call", "Constant", "DataTypeImm", "DataflowBlock",
           "DataflowVar", "Expr", "ExternFunc", "FuncStructInfo", "Function", "GlobalVar", "If",
           "MatchCast", "ObjectStructInfo", "PrimStructInfo", "PrimValue", "SeqExpr", "ShapeExpr",
           "ShapeStructInfo", "StringImm", "StructInfo", "TensorStructInfo", "Tuple", "TupleGetItem",
           "TupleStructInfo", "Var", "VarBinding", "call_dps_packed", "call_packed", "call_py_func", "call_tir", "const",
           "frontend", "get_pipeline", "op", "transform"]
__all__ += ["analysis", "backend", "dpl", "VirtualMachine", "build", "register_py_func", "vm"]
