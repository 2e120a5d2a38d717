"""The float16 conversions LLVM leaves to compiler-rt, defined in IR so code never needs them.

LLVM lowers ``fptrunc double -> half`` (on every x86 CPU), and ``float <-> half`` (without F16C,
also half arithmetic, which it does in float) to calls of ``__truncdfhf2``, ``__truncsfhf2`` and
``__extendhfsf2``. Neither the JIT (``runtime/llvm_jit.py``) nor ``export_library``'s shared
objects link compiler-rt, so ``support_module()`` defines them, with integer and float32
operations only, and ``llvm_target.optimize`` links it into every module that uses half. They are
internal and kept by ``llvm.compiler.used``: each object resolves the calls to its own copy, and
no symbol is exported. Where F16C exists LLVM still uses its instructions for float <-> half.
"""
from __future__ import annotations

import functools

from llvmlite import ir

from .llvm_intrinsics import call_llvm_intrinsic
from .llvm_types import I32

I16 = ir.IntType(16)
HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def _i32(n: int) -> ir.Constant:
    return ir.Constant(I32, n)


def _define(module: ir.Module, name: str, ret: ir.Type, arg: ir.Type):
    fn = ir.Function(module, ir.FunctionType(ret, [arg]), name)
    fn.linkage = "internal"
    return fn, ir.IRBuilder(fn.append_basic_block()), fn.args[0]


def _float_to_half(module: ir.Module) -> ir.Function:
    """``float -> half`` rounded to nearest, ties to even; a NaN stays a NaN (quieted, its top
    payload bits kept, as F16C's ``vcvtps2ph`` does)."""
    fn, b, x = _define(module, "__truncsfhf2", HALF, FLOAT)
    bits = b.bitcast(x, I32)
    sign = b.and_(b.trunc(b.lshr(bits, _i32(16)), I16), ir.Constant(I16, 0x8000))
    a = b.and_(bits, _i32(0x7FFFFFFF))
    # NaN, or at least 65520 (rounds to inf: 65504 is the largest half, its last bit odd)
    nan = b.or_(_i32(0x7E00), b.and_(b.lshr(a, _i32(13)), _i32(0x3FF)))
    huge = b.select(b.icmp_unsigned(">", a, _i32(0x7F800000)), nan, _i32(0x7C00))
    # a normal half: rebias the exponent (127 -> 15), round the 13 dropped bits to even
    odd = b.and_(b.lshr(a, _i32(13)), _i32(1))
    normal = b.lshr(b.add(b.add(a, _i32(0xFFF - (112 << 23))), odd), _i32(13))
    # below 2**-14 (a subnormal half or zero): in x + 0.5 the float adder rounds x to a multiple of
    # 2**-24 (the ulp of 0.5), to even; the sum's bits past 0.5's count the half's units
    magic = ir.Constant(FLOAT, 0.5)
    summed = b.fadd(b.bitcast(a, FLOAT), magic)
    sub = b.sub(b.bitcast(summed, I32), b.bitcast(magic, I32))
    result = b.select(b.icmp_unsigned("<", a, _i32(113 << 23)), sub,
                      b.select(b.icmp_unsigned(">=", a, _i32(0x477FF000)), huge, normal))
    b.ret(b.bitcast(b.or_(b.trunc(result, I16), sign), HALF))
    return fn


def _half_to_float(module: ir.Module) -> ir.Function:
    """``half -> float``, exact (a NaN keeps its payload)."""
    fn, b, x = _define(module, "__extendhfsf2", FLOAT, HALF)
    h = b.zext(b.bitcast(x, I16), I32)
    rest = b.shl(b.and_(h, _i32(0x7FFF)), _i32(13))  # exponent and mantissa at float's places
    exponent = b.and_(rest, _i32(0x7C00 << 13))
    rebiased = b.add(rest, _i32(112 << 23))
    special = b.add(rebiased, _i32(112 << 23))  # inf/NaN: exponent 31 -> 255
    # zero or subnormal: m * 2**-24 as float, (2**-14 + m * 2**-24) - 2**-14 exactly
    renorm = b.fsub(b.bitcast(b.add(rebiased, _i32(1 << 23)), FLOAT), ir.Constant(FLOAT, 2.0 ** -14))
    result = b.select(b.icmp_unsigned("==", exponent, _i32(0x7C00 << 13)), special,
                      b.select(b.icmp_unsigned("==", exponent, _i32(0)), b.bitcast(renorm, I32), rebiased))
    b.ret(b.bitcast(b.or_(result, b.shl(b.and_(h, _i32(0x8000)), _i32(16))), FLOAT))
    return fn


def round_to_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """double ``x`` (scalar or vector) as float rounded to odd (toward zero, the last bit set when
    inexact): a second rounding to a format of at most 11 bits is then the correct rounding of
    ``x`` (float's 24 bits >= 2 * 11 + 2). A NaN stays a NaN."""
    lanes = x.type.count if isinstance(x.type, ir.VectorType) else 1

    def typed(t: ir.Type) -> ir.Type:
        return t if lanes == 1 else ir.VectorType(t, lanes)

    def one(n: int) -> ir.Constant:
        return ir.Constant(I32, n) if lanes == 1 else ir.Constant(typed(I32), [ir.Constant(I32, n)] * lanes)

    def double(v: float) -> ir.Constant:
        return ir.Constant(DOUBLE, v) if lanes == 1 else ir.Constant(typed(DOUBLE), [ir.Constant(DOUBLE, v)] * lanes)

    nearest = b.fptrunc(x, typed(FLOAT))
    back = b.fpext(nearest, typed(DOUBLE))
    magnitudes = [call_llvm_intrinsic(b, "fabs", [v]) for v in (back, x)]  # (vectors too)
    away = b.fcmp_ordered(">", *magnitudes)  # rounded away from zero
    bits = b.bitcast(nearest, typed(I32))
    toward_zero = b.select(away, b.sub(bits, one(1)), bits)
    inexact = b.zext(b.fcmp_ordered("!=", back, x), typed(I32))
    # below 2**-126 the float is subnormal, which the FTZ/DAZ flags would flush to zero: its bits
    # count steps of 2**-149, |x| * 2**149 (exact) truncated, odd when inexact. (A subnormal
    # double, which DAZ reads as 0, gives 0 instead of 1: both round to zero in any narrower type.)
    scaled = b.fmul(magnitudes[1], double(2.0 ** 149))
    steps = b.fptoui(scaled, typed(I32))
    tiny = b.or_(steps, b.zext(b.fcmp_ordered("!=", b.uitofp(steps, typed(DOUBLE)), scaled), typed(I32)))
    sign = b.and_(bits, one(0x80000000))  # (a flushed float keeps its sign)
    result = b.select(b.fcmp_ordered("<", magnitudes[1], double(2.0 ** -126)), b.or_(tiny, sign),
                      b.or_(toward_zero, inexact))
    return b.bitcast(result, typed(FLOAT))


def _double_to_half(module: ir.Module) -> ir.Function:
    """``double -> half`` correctly rounded: to float rounded to odd, then to half."""
    fn, b, x = _define(module, "__truncdfhf2", HALF, DOUBLE)
    b.ret(b.fptrunc(round_to_odd(b, x), HALF))  # (F16C's instruction, else __truncsfhf2 above)
    return fn


@functools.lru_cache(maxsize=1)
def support_module() -> str:
    """The LLVM IR text of the module defining the conversions (link it in before optimizing)."""
    module = ir.Module(name="tvms_half")
    functions = [_float_to_half(module), _half_to_float(module), _double_to_half(module)]
    # (LLVM calls them only while generating code: keep them through optimization)
    used = ir.GlobalVariable(module, ir.ArrayType(ir.PointerType(), len(functions)), "llvm.compiler.used")
    used.linkage, used.section = "appending", "llvm.metadata"
    used.initializer = ir.Constant(used.value_type, functions)
    return str(module)
