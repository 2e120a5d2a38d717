"""TensorIR intrinsics (``T.exp``, ``T.sqrt``, ``T.isnan``, ...) as LLVM intrinsics or libm calls.

``emit_intrinsic(builder, module, call, args)`` returns the value of ``call`` whose arguments are
already generated. Intrinsics LLVM knows (``llvm.exp``, ``llvm.sqrt``, ...) work on vectors too;
libm functions (``tanhf``) are called lane by lane on vectors, except ``exp``, ``log``, ``tanh``,
``erf`` and ``sigmoid`` of float32 and float16 vectors, which ``llvm_vector_math`` expands into
vector arithmetic (LLVM would scalarize its own ``llvm.exp`` of a vector into libm calls too).
"""
from __future__ import annotations

import functools
import math
from typing import Callable

from llvmlite import ir

from ...ir.dtype import DataType, float_limits
from ...ir.errors import TVMSError
from . import llvm_types as T
from .llvm_intrinsic_check import refuse_foreign_intrinsic, target_prefix
from .llvm_vector_math import vector_math

# TensorIR name -> LLVM intrinsic (overloaded on the float type, vectors included)
LLVM_MATH = {
    "exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2", "log10": "log10",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "fabs": "fabs", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "round": "roundeven", "nearbyint": "nearbyint", "pow": "pow",
    "copysign": "copysign", "fma": "fmuladd",
}
# TensorIR name -> the libm function (the float32 variant adds "f")
LIBM = {name: name for name in ("tan sinh cosh tanh asin acos atan asinh acosh atanh erf log1p expm1 "
                                "atan2 hypot nextafter").split()}


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):  # (an opaque pointer: a vector of handles is v4p0)
        return f"p{t.addrspace}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]


def declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    """The function ``name`` of ``module``, declared on first use."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def call_llvm_intrinsic(builder: ir.IRBuilder, base: str, args: list, extra: list = ()) -> ir.Value:
    """``llvm.<base>.<type>(args..., extra...)`` overloaded on the first argument's type."""
    t = args[0].type
    fn = declare(builder.module, f"llvm.{base}.{_suffix(t)}", t, [a.type for a in (*args, *extra)])
    return builder.call(fn, [*args, *extra])


def _per_lane(builder: ir.IRBuilder, args: list, scalar: Callable) -> ir.Value:
    """Apply ``scalar`` to each lane of vector ``args`` and gather the results into a vector."""
    lanes = T.lanes_of(args[0])
    if lanes == 1:
        return scalar(args)
    out = ir.Constant(args[0].type, ir.Undefined)
    for lane in range(lanes):
        index = ir.Constant(T.I32, lane)
        value = scalar([builder.extract_element(a, index) for a in args])
        out = builder.insert_element(out, value, index)
    return out


def _libm(builder: ir.IRBuilder, name: str, args: list) -> ir.Value:
    def scalar(xs: list) -> ir.Value:
        t = xs[0].type
        if isinstance(t, ir.HalfType):  # no half-precision libm: compute in float
            wide = [builder.fpext(x, ir.FloatType()) for x in xs]
            return builder.fptrunc(scalar(wide), t)
        symbol = name + ("f" if isinstance(t, ir.FloatType) else "")
        return builder.call(declare(builder.module, symbol, t, [t] * len(xs)), xs)
    return _per_lane(builder, args, scalar)


def _float_const(like: ir.Value, value: float) -> ir.Value:
    element = T.element_type(like)
    c = ir.Constant(element, value)
    lanes = T.lanes_of(like)
    return c if lanes == 1 else ir.Constant(like.type, [c] * lanes)


def _is_inf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.fcmp_ordered("==", call_llvm_intrinsic(builder, "fabs", [x]), _float_const(x, math.inf))


def _limit(dtype: DataType, which: str) -> ir.Constant:
    if dtype.is_float:
        low, high = float_limits(dtype)
        return T.constant(dtype, high if which == "max" else low)
    if dtype.is_uint or dtype.is_bool:
        return T.constant(dtype, ((1 << dtype.bits) - 1) if which == "max" else 0)
    half = 1 << (dtype.bits - 1)
    return T.constant(dtype, half - 1 if which == "max" else -half)


def _integer_pow(builder: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    """``x ** y`` of integers, wrapping as numpy's does: square and multiply over the bits of
    ``y`` (no loop: a select per bit). A negative exponent gives what truncating the real power
    gives: 1 for x = 1, +-1 for x = -1, else 0 (a zero base included)."""
    def c(n: int) -> ir.Value:
        return T.broadcast(builder, ir.Constant(T.element_type(x), n), T.lanes_of(x))

    result, power = c(1), x
    for k in range(T.element_type(y).width - (1 if signed else 0)):
        bit = builder.icmp_unsigned("!=", builder.and_(y, c(1 << k)), c(0))
        result = builder.select(bit, builder.mul(result, power), result)
        power = builder.mul(power, power)
    if not signed:
        return result
    odd = builder.icmp_unsigned("!=", builder.and_(y, c(1)), c(0))
    minus_one = builder.select(odd, c(-1), c(1))
    fraction = builder.select(builder.icmp_signed("==", x, c(1)), c(1),
                              builder.select(builder.icmp_signed("==", x, c(-1)), minus_one, c(0)))
    return builder.select(builder.icmp_signed("<", y, c(0)), fraction, result)


def emit_intrinsic(builder: ir.IRBuilder, call, args: list) -> ir.Value:
    """The value of the TensorIR ``call`` of an ``Op`` whose arguments are ``args``."""
    name = call.op.name.split(".", 1)[-1]
    dtype = call.dtype
    arg_types = [a.dtype.element_of for a in call.args]
    vector = vector_math(builder, name, args[0]) if len(args) == 1 and args[0] is not None else None
    if vector is not None:
        return vector
    if name in LLVM_MATH and all(t.is_float for t in arg_types):
        return call_llvm_intrinsic(builder, LLVM_MATH[name], T.unify(builder, *args))
    if name in LIBM and all(t.is_float for t in arg_types):
        return _libm(builder, LIBM[name], T.unify(builder, *args))
    if name == "pow" and all(t.is_integer for t in arg_types):
        return _integer_pow(builder, *T.unify(builder, *args), arg_types[0].is_int)
    if name == "fabs" and arg_types[0].is_int:
        return call_llvm_intrinsic(builder, "abs", args, [ir.Constant(T.I1, 0)])
    if name == "fmod":
        return builder.frem(*T.unify(builder, *args))
    if name == "rsqrt":
        return builder.fdiv(_float_const(args[0], 1.0), call_llvm_intrinsic(builder, "sqrt", args))
    if name == "sigmoid":  # 1 / (1 + exp(-x))
        e = call_llvm_intrinsic(builder, "exp", [builder.fneg(args[0])])
        return builder.fdiv(_float_const(e, 1.0), builder.fadd(_float_const(e, 1.0), e))
    if name == "isnan":
        return builder.fcmp_unordered("uno", args[0], args[0])
    if name == "isinf":
        return _is_inf(builder, args[0])
    if name == "isfinite":  # ordered and not infinite
        return builder.and_(builder.fcmp_ordered("ord", args[0], args[0]),
                            builder.not_(_is_inf(builder, args[0])))
    if name == "undef":  # an arbitrary value: LLVM's own undef
        return ir.Constant(T.scalar_type(dtype), ir.Undefined)
    if name == "isnullptr":  # a handle compared with the null pointer
        return builder.icmp_unsigned("==", args[0], ir.Constant(args[0].type, None))
    if name in ("likely", "tvm_likely", "tvm_thread_invariant", "ignore_loop_partition"):
        return args[0]
    if name == "vectorcombine":  # the lanes of the first vector, then those of the second
        lanes = T.lanes_of(args[0]) + T.lanes_of(args[1])
        return builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(T.I32, lanes), list(range(lanes))))
    if name == "get_active_lane_mask":  # lane k is on while base + k < limit
        base, limit = (T.broadcast(builder, a, dtype.lanes) for a in args)
        steps = ir.Constant(base.type, [ir.Constant(T.element_type(base), k) for k in range(dtype.lanes)])
        return builder.icmp_signed("<", builder.add(base, steps), limit)
    if name == "dp4a":
        return _dp4a(builder, arg_types, args)
    if name == "assume":
        return ir.Constant(T.I1, 1)
    if name in ("max_value", "min_value"):
        return _limit(dtype, name[:3])
    if name == "infinity":
        return T.constant(dtype, math.inf)
    if name == "reinterpret":
        return _reinterpret(builder, args[0], arg_types[0], dtype)
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        op = {"bitwise_and": builder.and_, "bitwise_or": builder.or_, "bitwise_xor": builder.xor}[name]
        return op(*T.unify(builder, *args))
    if name == "bitwise_not":
        return builder.not_(args[0])
    if name == "shift_left":
        return builder.shl(*T.unify(builder, *args))
    if name == "shift_right":
        a, b = T.unify(builder, *args)
        return builder.lshr(a, b) if arg_types[0].is_uint else builder.ashr(a, b)
    if name == "popcount":
        return call_llvm_intrinsic(builder, "ctpop", args)
    if name == "clz":  # (counted in the argument's width, returned as the call's int32)
        zeros = call_llvm_intrinsic(builder, "ctlz", args, [ir.Constant(T.I1, 0)])
        return T.cast(builder, zeros, call.args[0].dtype, dtype)
    if name in ("call_extern", "call_pure_extern"):
        return _call_extern(builder, call, args)
    if name in ("call_llvm_intrin", "call_llvm_pure_intrin"):
        return _call_llvm_intrin(builder, call, args)
    raise TVMSError(f"the llvm target does not implement the intrinsic T.{name} "
                    f"on {', '.join(map(str, arg_types)) or 'no arguments'}")


def _reinterpret(builder: ir.IRBuilder, value: ir.Value, source: DataType, dtype: DataType) -> ir.Value:
    """The bits of ``value`` as ``dtype``: as many bits in all, the lanes may differ (four int8
    lanes as one int32, as AMD's sdot4 takes them); a call the vectorizer widened keeps the
    lanes of its argument."""
    lanes = T.lanes_of(value)
    if dtype.bits * dtype.lanes != source.bits * lanes:
        if dtype.bits != source.bits:
            raise TVMSError(f"T.reinterpret of {source.with_lanes(lanes)} as {dtype}: the sizes differ "
                            f"({source.bits * lanes} and {dtype.bits * dtype.lanes} bits)")
        dtype = dtype.with_lanes(lanes)
    return builder.bitcast(value, T.with_lanes(T.scalar_type(dtype), dtype.lanes))


def _dp4a(builder: ir.IRBuilder, arg_types: list, args: list) -> ir.Value:
    """The four products of the widened lanes, summed, plus the accumulator (0 without one)."""
    widen = builder.zext if arg_types[0].is_uint else builder.sext
    wide = ir.VectorType(T.I32, 4)
    a, b = (widen(v, wide) for v in args[:2])
    product = builder.mul(a, b)
    total = args[2] if len(args) > 2 else ir.Constant(T.I32, 0)
    for k in range(4):
        total = builder.add(total, builder.extract_element(product, ir.Constant(T.I32, k)))
    return total


def _call_extern(builder: ir.IRBuilder, call, args: list) -> ir.Value:
    """``T.call_extern("float32", "expf", x)``: a call of a C function of the process."""
    symbol = getattr(call.args[0], "value", None)
    if not isinstance(symbol, str):
        raise TVMSError("T.call_extern needs the function name (a string) as its first argument")
    values = args[1:]
    fn = declare(builder.module, symbol, T.scalar_type(call.dtype), [v.type for v in values])
    return builder.call(fn, values)


def _call_llvm_intrin(builder: ir.IRBuilder, call, args: list) -> ir.Value:
    """``T.call_llvm_pure_intrin("float32x8", "llvm.fmuladd", a, b, c)``, as TVM's LowerIntrin
    writes it: an LLVM intrinsic by name, named as LLVM names it for the call's types (an
    overloaded one by its types; target-specific ones, ``llvm.x86.*``, as written)."""
    symbol = getattr(call.args[0], "value", None)
    if not isinstance(symbol, str) or not symbol.startswith("llvm."):
        raise TVMSError(f"T.{call.op.name.split('.', 1)[-1]} needs the LLVM intrinsic's name "
                        f"(\"llvm.fmuladd\") as its first argument")
    refuse_foreign_intrinsic(symbol)
    values = args[1:]
    if values and all(a.dtype.element_of == call.dtype.element_of for a in call.args[1:]):
        values = T.unify(builder, *values)
    if symbol in ("llvm.exp", "llvm.log") and len(values) == 1:  # (LowerIntrin's T.exp, T.log)
        vector = vector_math(builder, symbol[len("llvm."):], values[0])
        if vector is not None:
            return vector
    # inside a vectorized loop the arguments may be vectors while the call still reads scalar; a
    # vector call says its lanes (SSE2's pmaddwd makes 4 int32 lanes of 8 int16 ones)
    lanes = call.dtype.lanes if call.dtype.lanes > 1 else max([1] + [T.lanes_of(v) for v in values])
    ret = T.with_lanes(T.scalar_type(call.dtype), lanes)
    arg_types = [v.type for v in values]
    name = symbol if target_prefix(symbol) else _intrinsic_name(symbol, str(ret), tuple(map(str, arg_types)))
    return builder.call(declare(builder.module, name, ret, arg_types), values)


@functools.lru_cache(maxsize=256)
def _intrinsic_name(symbol: str, ret: str, args: tuple) -> str:
    """The name LLVM gives the target-independent intrinsic ``symbol`` returning ``ret`` of
    ``args`` (LLVM's type names: ``float``, ``<4 x i32>``). LLVM names an overloaded one by its
    types (``llvm.sqrt.f32``, of ``llvm.sqrt`` and of ``llvm.sqrt.f64`` written for a float); it
    leaves as written one that is not overloaded (``llvm.readcyclecounter``) and a name that is
    no intrinsic of these types, which the object code then shows (``refuse_unknown_intrinsics``)."""
    from .llvm_target import require_llvm

    try:
        module = require_llvm().parse_assembly(f'declare {ret} @"{symbol}"({", ".join(args)})')
    except RuntimeError:  # (a name LLVM cannot read: the module's own parse reports it)
        return symbol
    return next(iter(module.functions)).name
