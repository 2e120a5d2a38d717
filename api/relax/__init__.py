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
from ..ir.lazy import lazy_names as _lazy_names
from ..ir.registry import add_layer_loader as _add_layer_loader

# the passes, the pipeline and the VM load on first use (they import the lowering layer, the
# runtime); the passes register their names as they load (``tvms opt -p LegalizeOps``)
__getattr__, __dir__, _load_all = _lazy_names(__name__, globals(), {
    **{name: (f".{name}", None) for name in ("analysis", "backend", "dpl", "frontend", "op", "transform", "vm")},
    "VirtualMachine": (".vm", "VirtualMachine"), "build": (".vm", "build"),
    "get_pipeline": ("..lowering.relax.pipeline", "get_pipeline"),
    "register_py_func": ("..runtime.py_funcs", "register_py_func")})

__all__ = ["BindingBlock", "BlockBuilder", "Call", "Constant", "DataTypeImm", "DataflowBlock",
           "DataflowVar", "Expr", "ExternFunc", "FuncStructInfo", "Function", "GlobalVar", "If",
           "MatchCast", "ObjectStructInfo", "PrimStructInfo", "PrimValue", "SeqExpr", "ShapeExpr",
           "ShapeStructInfo", "StringImm", "StructInfo", "TensorStructInfo", "Tuple", "TupleGetItem",
           "TupleStructInfo", "Var", "VarBinding", "call_dps_packed", "call_packed", "call_py_func", "call_tir", "const",
           "frontend", "get_pipeline", "op", "transform"]
__all__ += ["analysis", "backend", "dpl", "VirtualMachine", "build", "register_py_func", "vm"]
_add_layer_loader(_load_all)
