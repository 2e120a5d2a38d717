"""Conversions between float32 and the narrow floats (bfloat16, float8/6/4) in LLVM IR.

A narrow float lives as its bits in an integer (i16 for bfloat16, i8 for the others, one element
a byte as ml_dtypes stores it); the lowering computes on them in float32 (LegalizeNarrowFloat,
``ir/narrow_float.py``), so the code generator only converts. The conversions are emitted inline
with integer and float32 operations, on scalars or vectors alike, and give what ml_dtypes'
``astype`` from float32 gives: round to nearest, ties to even (e8m0: as ml_dtypes rounds, see
``_e8m0_code``); a value past the largest finite one becomes inf ("ieee" formats), NaN ("fn",
"fnuz", e8m0) or the largest value (float4/float6, which have neither); NaN keeps its sign where
the format has a signed NaN (float4/float6: a zero of the other sign, as ml_dtypes makes it).
Saturation (ONNX's ``Cast(saturate=1)``) is a clip before the conversion.
"""
from __future__ import annotations

from llvmlite import ir

from ...ir.dtype import FloatFormat
from .llvm_types import I32, lanes_of, with_lanes

FLOAT = ir.FloatType()


def _const(like: ir.Value, typ: ir.Type, value) -> ir.Constant:
    """The constant ``value`` of ``typ`` with as many lanes as ``like``."""
    lanes = lanes_of(like)
    if lanes == 1:
        return ir.Constant(typ, value)
    return ir.Constant(ir.VectorType(typ, lanes), [ir.Constant(typ, value)] * lanes)


def float_to_narrow(b: ir.IRBuilder, x: ir.Value, fmt: FloatFormat, storage: ir.IntType) -> ir.Value:
    """float32 ``x`` (scalar or vector) as the bits of ``fmt``, in ``storage`` integers."""
    def c(n: int) -> ir.Constant:
        return _const(x, I32, n)

    bits = b.bitcast(x, with_lanes(I32, lanes_of(x)))
    negative = b.icmp_signed("<", bits, c(0))
    a = b.and_(bits, c(0x7FFFFFFF))
    is_nan = b.icmp_unsigned(">", a, c(0x7F800000))
    if fmt.kind == "e8m0":
        code = _e8m0_code(b, a, c)
        nan = b.or_(is_nan, b.or_(negative, b.icmp_unsigned("==", a, c(0))))
        return b.trunc(b.select(nan, c(0xFF), code), with_lanes(storage, lanes_of(x)))
    shift = 23 - fmt.mbits
    emin = 1 - fmt.bias  # the smallest normal exponent
    # a normal result: rebias the exponent, round the dropped bits to even (a carry moves to
    # the exponent, and past the largest exponent to the overflow codes tested below)
    rebased = b.sub(a, c((127 - fmt.bias) << 23))
    odd = b.and_(b.lshr(rebased, c(shift)), c(1))
    normal = b.lshr(b.add(b.add(rebased, c((1 << (shift - 1)) - 1)), odd), c(shift))
    code = normal
    if emin > -126:
        # below 2**emin: adding 2**(emin - mbits + 23), whose ulp is the result's smallest step,
        # makes the float adder round x to a multiple of it (to even); the bits past it count
        # steps. (The sum is a normal float and a float32 subnormal rounds to 0 here, so the
        # DAZ/FTZ flags change nothing; bfloat16, whose exponent is float32's, rounds its
        # subnormals on the bits above: through the adder, DAZ would make them zeros.)
        magic = _const(x, FLOAT, 2.0 ** (emin - fmt.mbits + 23))
        summed = b.fadd(b.bitcast(a, x.type), magic)
        tiny = b.sub(b.bitcast(summed, bits.type), b.bitcast(magic, bits.type))
        code = b.select(b.icmp_unsigned("<", a, c((emin + 127) << 23)), tiny, normal)
    top = fmt.ebits + fmt.mbits  # the sign bit's place
    overflow = {"ieee": (0xFF >> (8 - fmt.ebits)) << fmt.mbits, "fn": (1 << top) - 1,
                "fnuz": 1 << top, "none": fmt.max_code}[fmt.kind]
    code = b.select(b.icmp_unsigned(">", code, c(fmt.max_code)), c(overflow), code)
    sign = b.select(negative, c(1 << top), c(0))
    if fmt.kind == "fnuz":  # no negative zero; NaN is the code of -0
        sign = b.select(b.icmp_unsigned("==", code, c(0)), c(0), sign)
        result = b.select(b.icmp_unsigned("<", code, c(1 << top)), b.or_(code, sign), code)
        return b.trunc(b.select(is_nan, c(1 << top), result), with_lanes(storage, lanes_of(x)))
    if fmt.kind == "ieee":  # the quiet NaN (no payload, as ml_dtypes)
        nan = c(overflow | (1 << (fmt.mbits - 1)))
    elif fmt.kind == "fn":
        nan = c((1 << top) - 1)
    else:  # no NaN: a zero of the other sign
        nan, sign = c(0), b.select(is_nan, b.select(negative, c(0), c(1 << top)), sign)
    result = b.or_(b.select(is_nan, nan, code), sign)
    return b.trunc(result, with_lanes(storage, lanes_of(x)))


def _e8m0_code(b: ir.IRBuilder, a: ir.Value, c) -> ir.Value:
    """The e8m0 code of the positive float bits ``a`` as ml_dtypes rounds it: to the nearest
    power of two, a tie upward; a subnormal float above 2**-127 to 2**-126 (code 1)."""
    exponent = b.lshr(a, c(23))
    mantissa = b.and_(a, c(0x7FFFFF))
    normal = b.add(exponent, b.zext(b.icmp_unsigned(">=", mantissa, c(0x400000)), a.type))
    sub = b.zext(b.icmp_unsigned(">", mantissa, c(0x400000)), a.type)
    code = b.select(b.icmp_unsigned("==", exponent, c(0)), sub, normal)
    return b.select(b.icmp_unsigned(">", code, c(0xFE)), c(0xFF), code)


def narrow_to_float(b: ir.IRBuilder, v: ir.Value, fmt: FloatFormat) -> ir.Value:
    """The float32 value (exact) of the narrow-float bits ``v`` (scalar or vector integers)."""
    def c(n: int) -> ir.Constant:
        return _const(v, I32, n)

    lanes = lanes_of(v)
    code = b.zext(v, with_lanes(I32, lanes))
    ftype = with_lanes(FLOAT, lanes)
    if (fmt.ebits, fmt.bias) == (8, 127) and fmt.kind == "ieee":  # bfloat16: float's top half
        return b.bitcast(b.shl(code, c(16)), ftype)
    if fmt.kind == "e8m0":  # 2**(code - 127): code 0 is 2**-127, a subnormal float
        value = b.select(b.icmp_unsigned("==", code, c(0)), c(0x400000), b.shl(code, c(23)))
        return b.bitcast(b.select(b.icmp_unsigned("==", code, c(0xFF)), c(0x7FC00000), value), ftype)
    top = fmt.ebits + fmt.mbits
    magnitude = b.and_(code, c((1 << top) - 1))
    sign = b.shl(b.lshr(code, c(top)), c(31))
    shift = 23 - fmt.mbits
    normal = b.add(b.shl(magnitude, c(shift)), c((127 - fmt.bias) << 23))
    # a subnormal: mantissa * 2**(1 - bias - mbits), exact in float32
    scale = 2.0 ** (1 - fmt.bias - fmt.mbits)
    sub = b.fmul(b.uitofp(magnitude, ftype), _const(v, FLOAT, scale))
    value = b.select(b.icmp_unsigned("<", magnitude, c(1 << fmt.mbits)), b.bitcast(sub, with_lanes(I32, lanes)), normal)
    if fmt.kind == "ieee":  # the all-ones exponent: inf, or NaN with the payload
        inf = (0xFF >> (8 - fmt.ebits)) << fmt.mbits
        special = b.or_(c(0x7F800000), b.shl(b.and_(magnitude, c((1 << fmt.mbits) - 1)), c(shift)))
        value = b.select(b.icmp_unsigned(">=", magnitude, c(inf)), special, value)
    elif fmt.kind == "fn":
        value = b.select(b.icmp_unsigned("==", magnitude, c((1 << top) - 1)), c(0x7FC00000), value)
    elif fmt.kind == "fnuz":  # the code of -0 is NaN
        value = b.select(b.icmp_unsigned("==", code, c(1 << top)), c(0x7FC00000), value)
        sign = b.select(b.icmp_unsigned("==", code, c(1 << top)), c(0), sign)
    return b.bitcast(b.or_(value, sign), ftype)
