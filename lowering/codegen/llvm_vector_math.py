"""``exp``, ``log``, ``tanh``, ``erf`` and ``sigmoid`` of float32 vectors as LLVM IR: range reduction
and a polynomial, lane-parallel, instead of one libm call per lane.

LLVM has no vector ``expf`` of its own (``llvm.exp.v16f32`` becomes sixteen ``expf`` calls), so a
vectorized loop over ``T.exp`` would spill and call; these expansions are plain vector arithmetic,
integer bit tricks and selects, right on any x86-64 (FMA is used where the target has it: the
multiply-adds carry LLVM's ``contract`` flag). float16 vectors are widened to float32, computed and
rounded back. Scalars (and float64) keep libm (``llvm_intrinsics``).

How each is computed (the polynomial coefficients are near-minimax in relative error over the
reduced range, rounded to float32: ``tools/fit_vector_math.py`` fits and prints them):

* ``exp(x) = 2^n * e^r``, ``n = round(x / ln 2)`` by the 1.5 * 2^23 rounding trick, ``r = x - n ln 2``
  with ln 2 in two parts (exact first product), ``|r| <= ln2 / 2``; ``e^r = 1 + r + r^2 P(r)``, P of
  degree 4. ``2^n`` is applied as two factors ``2^(n//2) * 2^(n - n//2)``, so results in the
  subnormal range are rounded once. x is clamped to [-104, 89]: past those the result is 0 or inf.
* ``log(x) = k ln 2 + log1p(f)``, x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) taken from
  the bits (subnormal x is scaled by 2^23 first); ``log1p(f) = f - f^2/2 + f^3 P(f)``, P of degree 7.
* ``tanh(x) = x + x^3 P(x^2)`` (P of degree 5) for ``|x| < 0.625``, else ``sign(x) (1 - 2 / (e^{2|x|} + 1))``.
* ``erf(x) = x + x P(x^2)`` (P of degree 6) for ``|x| < 1``, else ``sign(x) (1 - e^{-x^2} Q(t))`` with
  ``t = 1 / (1 + 2|x|)``, Q of degree 7 fitted to ``erfc(a) e^{a^2}`` on [1, 4].
* ``sigmoid(x)``: with ``e = e^{-|x|}`` (never overflows), ``1 / (1 + e)`` for x >= 0 and
  ``e / (1 + e)`` below, so tiny results keep their precision.

Accuracy: the largest error in units in the last place of the float32 result, against the float64
function of the same float32 input, over every float32 of magnitude in [2^-2, 2^7) (both signs:
the branch points, exp's range reduction, overflow and underflow) and every 4099th bit pattern
elsewhere with the edge cases 0, -0, the smallest subnormal, FLT_MIN, FLT_MAX, the overflow and
underflow thresholds, inf, -inf and nan; on the host (AVX-512 with FMA) and on ``-mcpu=x86-64``
(no FMA). ``tests/test_vector_math.py`` asserts the bounds: over a binade of large errors of each
function in its default run, all of [2^-2, 2^7) as a slow test, the worst points as fixed inputs:

    function   bound      largest error measured (at x)
    exp        1.02 ULP   1.014 with FMA (37.77864; 1.009 at -27.379135), 0.989 without (-27.378984)
    log        1 ULP      0.861 with FMA (1.3982602), 0.860 without (0.6989353)
    tanh       1.5 ULP    1.332 (0.6310442, just past the polynomial's range), with and without FMA
    erf        1.35 ULP   1.038 with FMA (1.0048386), 1.319 without (0.996785, the polynomial's end)
    sigmoid    2.5 ULP    2.402 (-4.1572938: exp's error carried into e / (1 + e)), with and without

Special values are those of C: exp(inf) = inf, exp(-inf) = 0, log(0) = log(-0) = -inf,
log(x < 0) = nan, log(inf) = inf, tanh(+-inf) = +-1, erf(+-inf) = +-1, sigmoid(inf) = 1,
sigmoid(-inf) = 0, -0 stays -0 where the function is odd, and nan gives nan.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...ir.op import VECTOR_MATH
from . import llvm_types as T

_EXP_P = (0.4999999403953552, 0.1666652113199234, 0.04166838899254799, 0.008368710055947304,
          0.0013814611593261361)
_LOG_P = (0.3333333134651184, -0.2500081956386566, 0.20001226663589478, -0.16623356938362122,
          0.14201760292053223, -0.13160189986228943, 0.12761563062667847, -0.07634460180997849)
_TANH_P = (-0.3333333134651184, 0.1333320587873459, -0.05394676327705383, 0.021700704470276833,
           -0.008177399635314941, 0.0021429627668112516)
_ERF_P = (0.12837916612625122, -0.3761262595653534, 0.1128358542919159, -0.026853814721107483,
          0.00518833240494132, -0.0008010232704691589, 7.853980787331238e-05)
_ERFC_Q = (-1.6781394151621498e-05, 1.1298866271972656, 1.081497073173523, -0.383951872587204,
           -12.461261749267578, 37.42293930053711, -48.71144485473633, 25.55289649963379)
_LN2_HI, _LN2_LO = 0.693145751953125, 1.4286068202862268e-06  # ln 2 = hi + lo, hi of 16 bits
_LOG2E = 1.4426950408889634
_ROUND = 12582912.0  # 1.5 * 2^23: adding it leaves round(x) in the low mantissa bits
_SQRT_HALF_BITS = 0x3F3504F3  # float32 sqrt(1/2)
_TANH_SMALL, _ERF_SMALL = 0.625, 1.0


def vector_math(builder: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value | None:
    """``name`` (one of ``VECTOR_MATH``) of the float32 or float16 vector ``x``; None when ``x``
    is of another type (a scalar, float64), which the caller leaves to libm."""
    element = T.element_type(x)
    if name not in VECTOR_MATH or T.lanes_of(x) == 1 or not isinstance(element, (ir.FloatType, ir.HalfType)):
        return None
    if isinstance(element, ir.HalfType):
        wide = builder.fpext(x, ir.VectorType(ir.FloatType(), T.lanes_of(x)))
        return builder.fptrunc(vector_math(builder, name, wide), x.type)
    return getattr(_Vec(builder, T.lanes_of(x)), name)(x)


class _Vec:
    """Emits float32 vector arithmetic of ``lanes`` lanes."""

    def __init__(self, builder: ir.IRBuilder, lanes: int) -> None:
        self.b = builder
        self.ftype = ir.VectorType(ir.FloatType(), lanes)
        self.itype = ir.VectorType(T.I32, lanes)

    def f(self, value: float) -> ir.Constant:
        return ir.Constant(self.ftype, [ir.Constant(ir.FloatType(), float(np.float32(value)))] * self.ftype.count)

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.itype, [ir.Constant(T.I32, value)] * self.itype.count)

    def mul(self, a, b): return self.b.fmul(a, b, flags=("contract",))
    def add(self, a, b): return self.b.fadd(a, b, flags=("contract",))
    def sub(self, a, b): return self.b.fsub(a, b, flags=("contract",))

    def mul_add(self, a, b, c):
        """a * b + c, one fused multiply-add where the target has it."""
        return self.add(self.mul(a, b), c)

    def poly(self, x, coefficients) -> ir.Value:
        """sum(c_k x^k) by Horner's rule."""
        acc = self.f(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.mul_add(acc, x, self.f(c))
        return acc

    def less(self, a, b): return self.b.fcmp_ordered("<", a, b)

    def fabs(self, x): return self.float_of(self.b.and_(self.bits(x), self.i(0x7FFFFFFF)))

    def with_sign_of(self, magnitude, x) -> ir.Value:
        """``magnitude`` (not negative: its sign bit clear) with the sign of ``x``."""
        sign = self.b.and_(self.bits(x), self.i(-0x80000000))
        return self.float_of(self.b.or_(self.bits(magnitude), sign))

    def bits(self, x): return self.b.bitcast(x, self.itype)
    def float_of(self, n): return self.b.bitcast(n, self.ftype)

    def pow2(self, n) -> ir.Value:
        """2^n of int32 lanes n in [-126, 127], built from the exponent bits."""
        return self.float_of(self.b.shl(self.b.add(n, self.i(127)), self.i(23)))

    # ------------------------------------------------------------ the functions
    def exp(self, x) -> ir.Value:
        b = self.b
        x = b.select(self.less(x, self.f(-104.0)), self.f(-104.0), x)  # (nan passes both clamps)
        x = b.select(self.less(self.f(89.0), x), self.f(89.0), x)
        t = self.mul_add(x, self.f(_LOG2E), self.f(_ROUND))
        nf = self.sub(t, self.f(_ROUND))
        n = b.sub(self.bits(t), self.bits(self.f(_ROUND)))
        r = self.sub(x, self.mul(nf, self.f(_LN2_HI)))
        r = self.sub(r, self.mul(nf, self.f(_LN2_LO)))
        p = self.add(self.mul_add(self.mul(r, r), self.poly(r, _EXP_P), r), self.f(1.0))
        half = b.ashr(n, self.i(1))  # n in [-150, 128]: both factors are normal floats
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(b.sub(n, half)))

    def log(self, x) -> ir.Value:
        b = self.b
        tiny = self.less(x, self.f(2.0 ** -126))  # subnormals: scaled into the normal range first
        scaled = b.select(tiny, self.mul(x, self.f(2.0 ** 23)), x)
        shifted = b.sub(self.bits(scaled), self.i(_SQRT_HALF_BITS))
        k = b.add(b.ashr(shifted, self.i(23)), b.select(tiny, self.i(-23), self.i(0)))
        f = self.sub(self.float_of(b.add(b.and_(shifted, self.i(0x7FFFFF)), self.i(_SQRT_HALF_BITS))), self.f(1.0))
        kf = b.sitofp(k, self.ftype)
        f2 = self.mul(f, f)
        y = self.mul_add(self.mul(f2, f), self.poly(f, _LOG_P), self.mul(kf, self.f(_LN2_LO)))
        y = self.sub(y, self.mul(f2, self.f(0.5)))
        result = self.mul_add(kf, self.f(_LN2_HI), self.add(f, y))
        result = b.select(self.less(x, self.f(0.0)), self.f(np.nan), result)
        result = b.select(b.fcmp_ordered("==", x, self.f(0.0)), self.f(-np.inf), result)
        result = b.select(b.fcmp_ordered("==", x, self.f(np.inf)), x, result)
        return b.select(b.fcmp_unordered("uno", x, x), x, result)

    def tanh(self, x) -> ir.Value:  # (odd: computed at |x|, the sign put back last, -0 kept)
        a = self.fabs(x)
        a2 = self.mul(a, a)
        small = self.mul_add(self.mul(a, a2), self.poly(a2, _TANH_P), a)
        e = self.exp(self.mul(a, self.f(2.0)))
        large = self.sub(self.f(1.0), self.b.fdiv(self.f(2.0), self.add(e, self.f(1.0))))
        return self.with_sign_of(self.b.select(self.less(a, self.f(_TANH_SMALL)), small, large), x)

    def erf(self, x) -> ir.Value:
        a = self.fabs(x)
        small = self.mul_add(a, self.poly(self.mul(a, a), _ERF_P), a)
        t = self.b.fdiv(self.f(1.0), self.mul_add(a, self.f(2.0), self.f(1.0)))
        tail = self.mul(self.exp(self.b.fneg(self.mul(a, a))), self.poly(t, _ERFC_Q))  # erfc(|x|)
        large = self.sub(self.f(1.0), tail)
        return self.with_sign_of(self.b.select(self.less(a, self.f(_ERF_SMALL)), small, large), x)

    def sigmoid(self, x) -> ir.Value:
        e = self.exp(self.b.fneg(self.fabs(x)))
        numerator = self.b.select(self.less(x, self.f(0.0)), e, self.f(1.0))
        return self.b.fdiv(numerator, self.add(e, self.f(1.0)))


__all__ = ["VECTOR_MATH", "vector_math"]
