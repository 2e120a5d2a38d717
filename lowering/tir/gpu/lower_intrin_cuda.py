"""LowerIntrin for a cuda target, as TVM 0.27's CUDA intrinsic rules and generic lowering do it.

* math intrinsics become CUDA's functions, ``T.call_pure_extern("float32", "expf", x)``
  (``exp`` for float64, ``hexp`` for float16 and bfloat16; ``round`` is ``nearbyint``; ``__clz``,
  ``__popc`` for 32-bit integers, ``...ll`` for 64-bit ones);
* the warp builtins become CUDA's: ``T.tvm_warp_shuffle_down(mask, v, delta, width, warp)`` is
  ``T.cuda.__shfl_down_sync(mask, v, delta, width)``, ``T.tvm_warp_activemask()`` is
  ``T.cuda.__activemask()``;
* integer ``//`` and ``%`` by a power of two become ``>>`` and ``&``; by another positive divisor
  a truncating division when the dividend is known to be non-negative, or, when its range is
  known, of the dividend shifted into the non-negative range (``(x + 7) / 7 - 1``), else a
  truncating division corrected by the remainder's sign (for int32 and int64 by its sign bit,
  ``rmod >> 31``; for other types by a select); ``floormod(x, y) == 0`` tests ``truncmod``.

No multiply-add is fused (CUDA has no rule for ``tir.fma``; the compiler contracts it).
``sigmoid(x)`` is legalized to ``1 / (1 + exp(0 - x))``, with TVM's ``exp`` of a bfloat16 taken
in float32 (``expf`` between casts); intrinsics without a rule are left as they are (the code
generator refuses them).
"""
from __future__ import annotations

from ....ir.cuda_math import CUDA_MATH, math_name as cuda_math_name, popcount_name
from ....ir.dtype import DataType
from ....ir.expr import (EQ, NE, Add, Broadcast, Call, Cast, Ramp, Div, FloorDiv, FloorMod, IntImm, Let, Max, Mod, Mul,
                         PrimExpr, Select, SizeVar, StringImm, Var, const)
from ....ir.function import PrimFunc
from ....ir.op import get_op
from ....ir.operators import BY_SYMBOL
from ..loop_ranges import LoopRangeMutator

WARP_OPS = {"tir.tvm_warp_shuffle": "tir.cuda.__shfl_sync", "tir.tvm_warp_shuffle_up": "tir.cuda.__shfl_up_sync",
            "tir.tvm_warp_shuffle_down": "tir.cuda.__shfl_down_sync",
            "tir.tvm_warp_shuffle_xor": "tir.cuda.__shfl_xor_sync"}


def _constant(e: PrimExpr) -> int | None:
    """The value of a constant or of a broadcast constant."""
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, IntImm) else None


def _power_of_two(e: PrimExpr) -> int | None:
    c = _constant(e)
    if c is not None and c > 0 and c & (c - 1) == 0:
        return c.bit_length() - 1
    return None


def _like(value: int, e: PrimExpr) -> PrimExpr:
    """``value`` with ``e``'s type (broadcast to its lanes)."""
    scalar = const(value, e.dtype.element_of)
    return scalar if e.dtype.lanes == 1 else Broadcast(scalar, e.dtype.lanes)


def _op(symbol: str, a, b) -> PrimExpr:
    return BY_SYMBOL[symbol].build(a, b)


class _CudaIntrinLowerer(LoopRangeMutator):
    def _min(self, e: PrimExpr) -> int | None:
        """A lower bound of ``e``, or None."""
        if isinstance(e, IntImm):
            return e.value
        if isinstance(e, Broadcast):
            return self._min(e.value)
        if isinstance(e, Ramp):
            base, stride = self._min(e.base), _constant(e.stride)
            return None if base is None or stride is None else base + min(0, stride * (e.lanes - 1))
        if isinstance(e, SizeVar):
            return 0
        if isinstance(e, Call) and getattr(e.op, "name", "") in ("tir.bitwise_and", "tir.shift_right"):
            # (what the power-of-two divisions became: non-negative when their operand is)
            low = self._min(e.args[0])
            right = self._min(e.args[1])
            if e.op.name == "tir.bitwise_and" and right is not None and right >= 0:
                return 0
            return 0 if low is not None and low >= 0 and right is not None and right >= 0 else None
        if isinstance(e, Var):
            bound = self.analyzer.bound(e)
            return None if bound is None else bound[0]
        if isinstance(e, (Add, Mul, FloorDiv, FloorMod, Div, Mod)):
            a, b = self._min(e.a), self._min(e.b)
            if a is None or b is None:
                return None
            if isinstance(e, Add):
                return a + b
            if isinstance(e, Mul):
                return a * b if a >= 0 and b >= 0 else None
            return 0 if a >= 0 and b > 0 else None
        bound = self.analyzer.bound(e)
        return None if bound is None else bound[0]

    def _nonneg(self, e: PrimExpr) -> bool:
        low = self._min(e)
        return low is not None and low >= 0

    def visit_Call(self, call: Call) -> PrimExpr:
        call = self.generic_visit(call)
        name = getattr(call.op, "name", "")
        if name in WARP_OPS:  # (the warp size argument goes: CUDA's takes the width only)
            return Call(call.dtype, get_op(WARP_OPS[name]), call.args[:4])
        if name == "tir.tvm_warp_activemask":
            return Call(call.dtype, get_op("tir.cuda.__activemask"), call.args)
        short = name[4:] if name.startswith("tir.") else ""
        if short == "sigmoid":  # (TVM's default legalization, then exp by CUDA's rule)
            one, neg = _like(1.0, call), _like(0.0, call) - call.args[0]
            if call.dtype.code == "bfloat":  # (TVM's exp of a bfloat16 runs in float32)
                wide = DataType("float32").with_lanes(call.dtype.lanes)
                exp = Cast(call.dtype, self.visit_Call(Call(wide, get_op("tir.exp"), (Cast(wide, neg),))))
            else:
                exp = self.visit_Call(Call(call.dtype, get_op("tir.exp"), (neg,)))
            return one / (one + exp)
        if short in CUDA_MATH:
            extern = cuda_math_name(call.dtype, short)
        elif short == "clz":
            extern = cuda_math_name(call.args[0].dtype, short)
        elif short == "popcount":
            extern = popcount_name(call.dtype)
        else:
            return call
        if extern is None:
            return call
        return Call(call.dtype, get_op("tir.call_pure_extern"), (StringImm(extern), *call.args))

    def _shift(self, a: PrimExpr, b: PrimExpr) -> int | None:
        """The least c with ``a + b * c >= 0`` over the range of ``a`` (``b`` a constant > 0),
        when neither that sum nor ``b * c`` overflows ``a``'s type (TVM's shift coefficient)."""
        bound = self.analyzer.bound(a)
        if not isinstance(b, IntImm) or b.value <= 0 or bound is None or bound[0] >= 0:
            return None
        lo, hi = bound
        top = 2 ** (a.dtype.bits - (1 if a.dtype.is_int else 0)) - 1
        if b.value - 1 > top + lo:
            return None
        shift = (b.value - 1 - lo) // b.value
        if shift > top // b.value or hi > top - b.value * shift:
            return None
        return shift

    def _floor(self, e: FloorDiv | FloorMod, divide: bool) -> PrimExpr:
        e = self.generic_visit(e)
        a, b, dt = e.a, e.b, e.dtype
        shift = _power_of_two(b)
        if shift is not None:
            return _op(">>", a, _like(shift, e)) if divide else _op("&", a, _like((1 << shift) - 1, e))
        zero = _like(0, e)
        if not self._nonneg(b):  # the divisor's sign is unknown: round by both signs
            rmod, rdiv = Var("rmod", dt), Var("rdiv", dt)
            same_sign = _op("or", _op("and", b >= zero, rmod >= zero), _op("and", b < zero, rmod <= zero))
            if divide:
                return Let(rmod, Mod(a, b), Let(rdiv, Div(a, b), Select(same_sign, rdiv, rdiv - _like(1, e))))
            return Let(rmod, Mod(a, b), Select(same_sign, rmod, rmod + b))
        if self._nonneg(a):
            return (Div if divide else Mod)(a, b)
        shift = self._shift(a, b)
        if shift is not None:  # (a + b * shift is non-negative: truncation is floor there)
            moved = a + _like(b.value * shift, e)
            return Div(moved, b) - _like(shift, e) if divide else Mod(moved, b)
        rmod = Mod(a, b)
        if dt.is_int and dt.bits in (32, 64):  # (rmod >> 31: -1 where the remainder is negative)
            sign = _op(">>", rmod, _like(dt.bits - 1, e))
            return Div(a, b) + sign if divide else rmod + _op("&", b, sign)
        if divide:
            return Select(rmod >= zero, Div(a, b), Div(a, b) - _like(1, e))
        return Select(rmod >= zero, rmod, rmod + b)

    def visit_FloorDiv(self, e: FloorDiv) -> PrimExpr:
        return self._floor(e, divide=True)

    def visit_FloorMod(self, e: FloorMod) -> PrimExpr:
        return self._floor(e, divide=False)

    def _mod_test(self, e, op_class) -> PrimExpr:
        """``x % y == 0`` (or ``!=``) tests the truncated remainder: the same zero."""
        if isinstance(e.a, FloorMod) and isinstance(e.b, IntImm) and e.b.value == 0:
            return op_class(Mod(self.visit(e.a.a), self.visit(e.a.b)), e.b)
        return self.generic_visit(e)

    def visit_EQ(self, e: EQ) -> PrimExpr:
        return self._mod_test(e, EQ)

    def visit_NE(self, e: NE) -> PrimExpr:
        return self._mod_test(e, NE)

    def visit_Max(self, e: Max) -> PrimExpr:
        if (isinstance(e.a, FloorDiv) and isinstance(e.b, IntImm) and e.b.value >= 0
                and self._nonneg(e.a.b)):
            return Max(self.visit(Div(e.a.a, e.a.b)), e.b)
        return self.generic_visit(e)


def lower_cuda_intrin(func: PrimFunc) -> PrimFunc:
    """``func`` (a cuda kernel) with its intrinsics and integer divisions as CUDA spells them."""
    body = _CudaIntrinLowerer().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


__all__ = ["cuda_math_name", "lower_cuda_intrin"]
