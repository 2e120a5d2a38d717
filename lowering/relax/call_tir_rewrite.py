"""``CallTIRRewrite``: destination-passing calls become explicit, as TVM's pass does.

``y = R.call_tir(f, (x,), out_sinfo=T)`` becomes::

    alloc: T = R.builtin.alloc_tensor(R.shape([...]), R.dtype("float32"), 0, R.str("global"))
    cls.f(x, alloc)          # the PrimFunc writes its output in place
    y: T = alloc

(one ``alloc`` per output tensor; a tuple of outputs becomes a tuple of the allocations).
``R.call_dps_packed`` is rewritten the same way, calling the packed function; ``R.call_tir_inplace``
too, its in-place outputs being the inputs they name (only the others are allocated).
"""
from __future__ import annotations

from typing import Any

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.errors import TVMSError
from ...ir.expr import IntImm, Op
from ...ir.module import IRModule
from ...ir.node import Node
from ...ir.relax_op import make_call
from ...ir.struct_info import TensorStructInfo, TupleStructInfo
from ..pass_registry import register_pass
from ..transform import module_pass
from .expr_functor import PyExprMutator

_DPS_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace")


class _Rewriter(PyExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__(mod)
        self.vdevices = tuple(mod.global_infos.get("vdevice", ()))  # (where an output's index points)

    def visit_call_(self, call: rx.Call) -> Node:
        call = super().visit_call_(call)
        if not (isinstance(call.op, Op) and call.op.name in _DPS_OPS):
            return call
        out_sinfo = self.builder_.normalize(call).struct_info
        inputs = call.args[1].fields if isinstance(call.args[1], rx.Tuple) else (call.args[1],)
        indices = call.attrs["inplace_indices"] if call.op.name == "relax.call_tir_inplace" else None
        # (an in-place output is the input it names; the others are allocated, and passed after the inputs)
        outs = [self.allocate(s) if indices is None or indices[k] == -1 else inputs[indices[k]]
                for k, s in enumerate(flat_tensors(out_sinfo))]
        written = [o for k, o in enumerate(outs) if indices is None or indices[k] == -1]
        extra = tuple(call.args[2].values) if len(call.args) > 2 else ()
        if extra:
            raise TVMSError("CallTIRRewrite: R.call_tir with tir_vars is not supported yet")
        # the callee writes into the allocations and returns nothing; a packed function is called
        # through R.call_packed (the form the text can say, as TVM prints its call of one)
        callee, operands = call.args[0], tuple(inputs) + tuple(written)
        if isinstance(callee, rx.ExternFunc):
            self.builder_.emit(make_call("call_packed", (callee, *operands), {}, ()), "_")
        elif isinstance(callee, rx.Var):  # (a function value: its call's struct info is inferred, as parsed)
            self.builder_.emit(rx.Call(callee, operands), "_")
        else:
            self.builder_.emit(rx.Call(callee, operands, struct_info=TupleStructInfo(())), "_")
        index = [0]
        return _rebuild(out_sinfo, outs, index)

    def allocate(self, sinfo: TensorStructInfo) -> rx.Var:
        if not isinstance(sinfo.shape, rx.ShapeExpr) or sinfo.dtype.is_void:
            raise TVMSError("CallTIRRewrite: outputs need a known shape and dtype")
        index, scope = _device_of(self.vdevices, sinfo.vdevice)
        device = rx.PrimValue(IntImm(DataType("int64"), index))
        args = [sinfo.shape, rx.DataTypeImm(sinfo.dtype), device, rx.StringImm(scope)]
        alloc = make_call("builtin.alloc_tensor", args, {}, (sinfo,))
        return self.builder_.emit(alloc, "alloc")


def _device_of(vdevices: tuple, vdevice: Any) -> tuple[int, str]:
    """The device index (the position in the module's vdevice list) and the storage scope of an
    output on ``vdevice``; one without goes to the first vdevice of global scope, as TVM's pass."""
    if vdevice is not None:
        for k, v in enumerate(vdevices):
            if v is vdevice:
                return k, vdevice.memory_scope
        raise TVMSError(f"CallTIRRewrite: an output is on a vdevice that is not in the module's "
                        f"I.module_global_infos ({vdevice.kind}, scope {vdevice.memory_scope!r})")
    return next((k for k, v in enumerate(vdevices) if v.memory_scope == "global"), 0), "global"


def flat_tensors(sinfos: Any) -> list:
    """The tensor struct infos of ``sinfos`` (a struct info or a sequence of them), tuples
    flattened in order."""
    if isinstance(sinfos, (tuple, list)):
        return [t for s in sinfos for t in flat_tensors(s)]
    if isinstance(sinfos, TupleStructInfo):
        return flat_tensors(sinfos.fields)
    if isinstance(sinfos, TensorStructInfo):
        return [sinfos]
    raise TVMSError(f"outputs of destination-passing calls are tensors or tuples of them, not "
                    f"{type(sinfos).__name__}")


def _rebuild(sinfo: Any, outs: list, index: list) -> Any:
    """The call's value: the allocation(s), shaped as the output struct info."""
    if isinstance(sinfo, TupleStructInfo):
        return rx.Tuple(tuple(_rebuild(f, outs, index) for f in sinfo.fields))
    index[0] += 1
    return outs[index[0] - 1]


@module_pass(opt_level=0, name="CallTIRRewrite")
class CallTIRRewrite:
    """``R.call_tir`` / ``R.call_dps_packed`` become an output allocation and a direct call."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        rewriter = _Rewriter(mod)
        for gv, f in mod.functions_items():
            if isinstance(f, rx.Function):
                new = rewriter.visit_expr(f)
                if new is not f:
                    rewriter.builder_.update_func(gv, new)
        return rewriter.builder_.get()


register_pass(factory=CallTIRRewrite)

__all__ = ["CallTIRRewrite", "flat_tensors"]
