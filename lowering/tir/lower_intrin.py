"""LowerIntrin for CPU (LLVM) targets: math intrinsics with an LLVM counterpart become
``T.call_llvm_pure_intrin(dtype, "llvm.<name>", args...)``.

``T.exp(x)`` becomes ``T.call_llvm_pure_intrin("float32x16", "llvm.exp", x)`` as TVM prints it,
and a float ``c + a * b`` (or ``a * b + c``) becomes one ``llvm.fmuladd(a, b, c)``.
Intrinsics without an LLVM intrinsic (``tanh``, ``erf``, ``sigmoid``, ...) stay as they are;
the code generator calls libm for them (or, on float32 vectors, expands them as it expands
``llvm.exp`` and ``llvm.log``: codegen/llvm_vector_math.py). A function whose target is cuda is lowered by CUDA's
rules instead (gpu/lower_intrin_cuda.py).
"""
from __future__ import annotations

from ...ir.expr import Add, Call, Mul, Op, PrimExpr, StringImm
from ...ir.function import PrimFunc
from ...ir.op import LLVM_INTRINSICS, get_op
from ...ir.visitor import Mutator
from .legalize_fixed_point import LEGALIZE
from .tir_pass import define_tir_pass

def _llvm_call(call_dtype, llvm_name: str, args: tuple) -> Call:
    return Call(call_dtype, get_op("tir.call_llvm_pure_intrin"), (StringImm(llvm_name), *args))


class _IntrinLowerer(Mutator):
    def visit_Add(self, add: Add) -> PrimExpr:
        add = self.generic_visit(add)
        if not add.dtype.is_float:
            return add
        if isinstance(add.b, Mul):  # TVM looks at the right operand first
            return _llvm_call(add.dtype, LLVM_INTRINSICS["tir.fma"], (add.b.a, add.b.b, add.a))
        if isinstance(add.a, Mul):
            return _llvm_call(add.dtype, LLVM_INTRINSICS["tir.fma"], (add.a.a, add.a.b, add.b))
        return add

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        legalize = LEGALIZE.get(call.op.name) if isinstance(call.op, Op) else None
        if legalize is not None:  # (fixed-point multiplication: integer arithmetic)
            return self.visit(legalize(call))
        if not isinstance(call.op, Op) or not call.dtype.is_float:
            return call
        llvm_name = LLVM_INTRINSICS.get(call.op.name)
        if llvm_name is None:
            return call
        return _llvm_call(call.dtype, llvm_name, call.args)


def lower_intrin(func: PrimFunc) -> PrimFunc:
    """``func`` with math intrinsics as LLVM intrinsic calls (as CUDA's for a cuda kernel)."""
    target = func.attrs.get("target")
    if getattr(target, "kind", None) == "cuda":
        from .gpu.lower_intrin_cuda import lower_cuda_intrin  # (gpu/ loads when a cuda kernel needs it)

        return lower_cuda_intrin(func)
    return func.with_changes(body=_IntrinLowerer().visit(func.body))


LowerIntrin = define_tir_pass("LowerIntrin", lower_intrin)

__all__ = ["LowerIntrin", "lower_intrin", "LLVM_INTRINSICS"]
