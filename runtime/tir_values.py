"""TensorIR values with numpy: data types, casts with TVM's wraparound, truncating division and
the intrinsics (``T.exp``, ``T.max_value``, ...) that the reference executor calls."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from tvms.ir import cuda_math
from tvms.ir.dtype import ML_DTYPES, DataType, float_limits, ml_dtype
from tvms.ir.errors import TVMSError
from tvms.ir.op import LLVM_INTRINSICS


# ---------------------------------------------------------------- dtypes and values
def numpy_dtype(dtype: DataType | str) -> np.dtype:
    """The numpy dtype of a TensorIR scalar type (vector types: of their element)."""
    dt = DataType(dtype).element_of
    if dt.is_bool:
        return np.dtype(np.bool_)
    if dt.code == "float" and dt.bits in (16, 32, 64):
        return np.dtype(f"float{dt.bits}")
    if dt.is_int and dt.bits in (8, 16, 32, 64):
        return np.dtype(f"int{dt.bits}")
    if dt.is_uint and dt.bits in (8, 16, 32, 64):
        return np.dtype(f"uint{dt.bits}")
    if dt.is_handle or dt.is_string:  # (a string tensor: an object array of str)
        return np.dtype(object)
    if dt.name in ML_DTYPES:  # (numpy computes on them in float32, rounding each result)
        return ml_dtype(dt)
    raise TVMSError(f"the reference executor cannot represent the data type {dt}")


def wrap_int(value: int, dtype: DataType) -> int:
    """``value`` wrapped to the width of the integer type ``dtype`` (two's complement)."""
    bits = dtype.bits
    if dtype.is_bool:
        return bool(value)
    value = int(value) & ((1 << bits) - 1)
    if dtype.is_int and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def cast_value(value: Any, dtype: DataType) -> Any:
    """``value`` as a value of ``dtype``: Python int / bool for integers, numpy scalar for floats,
    numpy arrays for vectors."""
    if dtype.lanes > 1 or isinstance(value, np.ndarray):
        arr = np.asarray(value)
        if dtype.is_integer and arr.dtype.kind == "f":
            arr = np.trunc(arr)
        with np.errstate(over="ignore"):  # (floats out of range: inf, as below)
            return arr.astype(numpy_dtype(dtype))
    if dtype.is_bool:
        return bool(value)
    if dtype.is_integer:
        if isinstance(value, (float, np.floating)):
            if not math.isfinite(value):  # undefined in C; what numpy's cast gives, as astype
                with np.errstate(invalid="ignore"):
                    return int(np.array(value).astype(numpy_dtype(dtype)))
            value = math.trunc(float(value))
        return wrap_int(int(value), dtype)
    if dtype.is_float:
        with np.errstate(over="ignore"):  # out of range: inf, as the conversion rounds it
            return numpy_dtype(dtype).type(value)
    return value


def trunc_div(a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        q = np.abs(a) // np.abs(b)
        return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def trunc_mod(a: Any, b: Any) -> Any:
    return a - trunc_div(a, b) * b


# ---------------------------------------------------------------- intrinsics
def _float_fn(f: Callable) -> Callable:
    def apply(dtype: DataType, *args: Any) -> Any:
        return cast_value(f(*args), dtype)
    return apply


def _erf(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.vectorize(math.erf)(x)
    return math.erf(float(x))


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _round(x: Any) -> Any:
    return np.rint(x)  # TVM's round is round-half-to-even (llvm.nearbyint)


def _limit(which: str) -> Callable:
    def apply(dtype: DataType) -> Any:
        if dtype.is_float:
            return cast_value(float_limits(dtype)[which == "max"], dtype)
        info = np.iinfo(numpy_dtype(dtype)) if dtype.bits >= 8 else None
        low, high = (info.min, info.max) if info else \
            ((0, (1 << dtype.bits) - 1) if dtype.is_uint else (-(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1))
        return cast_value(high if which == "max" else low, dtype)
    return apply


def _reinterpret(dtype: DataType, x: Any) -> Any:
    # the argument's dtype is not known here; numpy scalars and arrays carry theirs
    return np.asarray(x).view(numpy_dtype(dtype))[()] if dtype.is_float else \
        int(np.asarray(x).view(numpy_dtype(dtype))[()])


def reinterpret_bits(dtype: DataType, source: DataType, x: Any) -> Any:
    """``T.reinterpret(dtype, x)`` of an ``x`` of type ``source``: its bits as ``dtype`` (an
    integer arrives as a Python number of any size: its bits are the type's, wrapped)."""
    if source.bits * source.lanes != dtype.bits * dtype.lanes:
        raise TVMSError(f"T.reinterpret from {source} to {dtype} changes the number of bits")
    if source.bits < 8 or dtype.bits < 8:
        raise TVMSError(f"T.reinterpret from {source} to {dtype}: the reference executor does not reinterpret "
                        f"elements narrower than a byte")
    element = source.element_of
    values = np.asarray(x).reshape(-1)
    if element.is_float:
        raw = values.astype(numpy_dtype(element))
    else:
        raw = np.array([int(v) & ((1 << element.bits) - 1) for v in values], f"uint{element.bits}")
    value = raw.view(numpy_dtype(dtype.element_of))
    if dtype.lanes > 1:
        return value
    return value[0] if dtype.is_float else int(value[0])


def _shift_count(b: Any) -> Any:
    """A shift's count. A negative one is undefined (C's rule, which the compiled code follows): a
    scalar's is refused; in a vector the lane is given a value (0) and goes on, as the compiled
    code's does, since the executor computes both sides of a lane-wise select."""
    if isinstance(b, np.ndarray) and b.ndim:
        return np.where(b < 0, 0, b)
    if b < 0:
        raise TVMSError(f"a shift by a negative count ({b}): undefined, as in C")
    return b


def count_leading_zeros(bits: int, x: Any) -> Any:
    """``T.clz``: the zero bits above the highest one of ``x`` as a ``bits``-wide integer."""
    if isinstance(x, np.ndarray):
        return np.array([count_leading_zeros(bits, int(v)) for v in x], dtype=np.int32)
    return bits - (int(x) & ((1 << bits) - 1)).bit_length()


def _no_op(dtype: DataType, *args: Any) -> Any:
    return 0


def _fixed_point(x: Any, y: Any, q: Any, left: Any, right: Any, shift_left: Any) -> Any:
    """TVM's fixed-point multiplication in int64: ``((x << left) * y + 2**(q+right-1)) >> (q+right)``."""
    x, y = np.asarray(x, np.int64), np.asarray(y, np.int64)
    x = np.where(shift_left, x << np.asarray(left, np.int64), x)
    total = np.asarray(right, np.int64) + np.asarray(q, np.int64)
    with np.errstate(over="ignore"):
        return (x * y + (np.int64(1) << (total - 1))) >> total


def _constant(value: Any, what: str) -> int:
    values = np.unique(np.asarray(value))
    if values.size != 1:
        raise TVMSError(f"T.q_multiply_shift needs a constant {what}")
    return int(values[0])


def _q_multiply_shift(dtype: DataType, x: Any, y: Any, q: Any, s: Any) -> Any:
    """``x * y * 2**(s - q)`` rounded, for int32 ``x`` and a fixed-point multiplier ``y`` with
    ``q`` fractional bits (TVM's legalization, src/target/intrin_rule.cc)."""
    if _constant(y, "multiplier") == 1 << 30:  # a power of two: a plain shift
        exp = _constant(s, "shift") - 1
        x = np.asarray(x, np.int64)
        if exp > 0:
            return cast_value(x << exp, dtype)
        if exp == 0:
            raise TVMSError("T.q_multiply_shift by 2**30 with shift 1 shifts by -1 (undefined in TVM)")
        return cast_value((cast_value(x + (1 << (-exp - 1)), dtype)) >> -exp, dtype)
    s = np.asarray(s, np.int64)
    left, right = np.where(s > 0, s, 0), np.where(s > 0, 0, -s)
    return cast_value(_fixed_point(x, y, q, left, right, left != 0), dtype)


def _q_multiply_shift_per_axis(dtype: DataType, x: Any, y: Any, left: Any, right: Any, q: Any,
                               shift_left: Any, shift_right: Any) -> Any:
    return cast_value(_fixed_point(x, y, q, left, right, shift_left), dtype)


def _dp4a(dtype: DataType, a: Any, b: Any, acc: Any = 0) -> Any:
    """The dot product of two int8x4 (or uint8x4) vectors, plus the accumulator."""
    return cast_value(int(np.dot(np.asarray(a, np.int64), np.asarray(b, np.int64))) + int(acc), dtype)


# name -> f(dtype, *evaluated args). if_then_else is compiled lazily, separately.
INTRINSICS: dict[str, Callable] = {
    "tir.exp": _float_fn(np.exp), "tir.exp2": _float_fn(np.exp2), "tir.exp10": _float_fn(lambda x: 10 ** x),
    "tir.log": _float_fn(np.log), "tir.log2": _float_fn(np.log2), "tir.log10": _float_fn(np.log10),
    "tir.log1p": _float_fn(np.log1p), "tir.expm1": _float_fn(np.expm1),
    "tir.sqrt": _float_fn(np.sqrt), "tir.rsqrt": _float_fn(lambda x: 1 / np.sqrt(x)),
    "tir.sin": _float_fn(np.sin), "tir.cos": _float_fn(np.cos), "tir.tan": _float_fn(np.tan),
    "tir.sinh": _float_fn(np.sinh), "tir.cosh": _float_fn(np.cosh), "tir.tanh": _float_fn(np.tanh),
    "tir.asin": _float_fn(np.arcsin), "tir.acos": _float_fn(np.arccos), "tir.atan": _float_fn(np.arctan),
    "tir.asinh": _float_fn(np.arcsinh), "tir.acosh": _float_fn(np.arccosh), "tir.atanh": _float_fn(np.arctanh),
    "tir.erf": _float_fn(_erf), "tir.sigmoid": _float_fn(_sigmoid),
    "tir.fabs": _float_fn(np.abs), "tir.floor": _float_fn(np.floor), "tir.ceil": _float_fn(np.ceil),
    "tir.round": _float_fn(_round), "tir.nearbyint": _float_fn(_round), "tir.trunc": _float_fn(np.trunc),
    "tir.pow": _float_fn(np.power), "tir.fmod": _float_fn(np.fmod), "tir.atan2": _float_fn(np.arctan2),
    "tir.hypot": _float_fn(np.hypot), "tir.copysign": _float_fn(np.copysign),
    "tir.nextafter": _float_fn(np.nextafter),
    "tir.isnan": lambda dt, x: cast_value(np.isnan(x), dt),
    "tir.isinf": lambda dt, x: cast_value(np.isinf(x), dt),
    "tir.isfinite": lambda dt, x: cast_value(np.isfinite(x), dt),
    "tir.likely": lambda dt, x: x, "tir.tvm_thread_invariant": lambda dt, x: x,
    "tir.assume": lambda dt, x: True,
    "tir.max_value": _limit("max"), "tir.min_value": _limit("min"),
    "tir.infinity": lambda dt: cast_value(np.inf, dt),
    "tir.reinterpret": _reinterpret,
    "tir.bitwise_and": lambda dt, a, b: a & b, "tir.bitwise_or": lambda dt, a, b: a | b,
    "tir.bitwise_xor": lambda dt, a, b: a ^ b, "tir.bitwise_not": lambda dt, a: cast_value(~a, dt),
    "tir.shift_left": lambda dt, a, b: cast_value(a << _shift_count(b), dt),
    "tir.shift_right": lambda dt, a, b: a >> _shift_count(b),
    "tir.undef": lambda dt: cast_value(0, dt),  # (any value is right: the reference picks 0)
    "tir.isnullptr": lambda dt, x: x is None or isinstance(x, int) and x == 0,  # (a handle's value)
    "tir.popcount": lambda dt, a: bin(wrap_int(a, DataType(f"uint{dt.bits}"))).count("1"),
    "tir.fma": lambda dt, a, b, c: cast_value(a * b + c, dt),
    "tir.dp4a": _dp4a,
    "tir.vectorcombine": lambda dt, a, b: cast_value(np.concatenate([np.atleast_1d(a), np.atleast_1d(b)]), dt),
    "tir.get_active_lane_mask": lambda dt, base, limit: np.arange(dt.lanes) + base < limit,
    "tir.ignore_loop_partition": lambda dt, x: x,
    "tir.q_multiply_shift": _q_multiply_shift,
    "tir.q_multiply_shift_per_axis": _q_multiply_shift_per_axis,
    "tir.tvm_storage_sync": _no_op,  # (outside a GPU launch: one thread; inside, a barrier)
    "tir.start_profile_intrinsic": _no_op, "tir.end_profile_intrinsic": _no_op,
    # (the emulation copies synchronously: every cp.async group is complete when committed)
    "tir.ptx.cp_async_commit_group": _no_op, "tir.ptx.cp_async_wait_group": _no_op,
}


def _float_bits(x: Any) -> int:
    return int(np.float32(x).view(np.uint32))


def _bits_float(bits: Any) -> np.float32:
    return np.uint32(int(bits) & 0xFFFFFFFF).view(np.float32)


# T.cuda.*'s intrinsics of plain values: a float2 travels as a uint64, x in its low half (as CUDA
# lays it out); the fence and the sleep change nothing a single-stream executor can observe
INTRINSICS.update({
    "tir.cuda.make_float2": lambda dt, x, y: np.uint64(_float_bits(x) | _float_bits(y) << 32),
    "tir.cuda.float2_x": lambda dt, packed: _bits_float(int(packed)),
    "tir.cuda.float2_y": lambda dt, packed: _bits_float(int(packed) >> 32),
    "tir.cuda.float_as_uint": lambda dt, x: np.uint32(_float_bits(x)),
    "tir.cuda.uint_as_float": lambda dt, bits: _bits_float(bits),
    "tir.cuda.fdividef": lambda dt, x, y: cast_value(np.float32(x) / np.float32(y), dt),
    "tir.cuda.ffs_u32": lambda dt, x: np.int32((int(x) & -int(x)).bit_length()),  # (1 + lowest set bit, 0 for 0)
    "tir.cuda.half2float": lambda dt, x: np.float32(x), "tir.cuda.bfloat162float": lambda dt, x: np.float32(x),
    "tir.cuda.thread_fence": _no_op, "tir.cuda.nano_sleep": _no_op,
    "tir.cuda.cta_sync": _no_op, "tir.cuda.warp_sync": _no_op,  # (outside a GPU launch: one thread)
})


def _llvm_intrin(dtype: DataType, name: str, *args: Any) -> Any:
    """``T.call_llvm_pure_intrin(dtype, "llvm.exp", x)``, as LowerIntrin produces it."""
    if name == "llvm.fmuladd":
        return cast_value(args[0] * args[1] + args[2], dtype)
    tir_name = next((tir for tir, llvm in LLVM_INTRINSICS.items() if llvm == name), None)
    if tir_name is None:
        raise TVMSError(f"the reference executor does not implement the LLVM intrinsic {name!r}")
    return INTRINSICS[tir_name](dtype, *args)


INTRINSICS["tir.call_llvm_pure_intrin"] = INTRINSICS["tir.call_llvm_intrin"] = _llvm_intrin


def _cuda_extern(dtype: DataType, name: str, *args: Any) -> Any:
    """``T.call_pure_extern(dtype, "expf", x)``: CUDA's math function, as LowerIntrin writes a math
    intrinsic for a cuda target (``hexp``, ``rsqrtf``, ``__clz``, fast math's ``__expf``, ...)."""
    intrinsic = cuda_math.intrinsic_of(name)
    if intrinsic is None:
        raise TVMSError(f"the reference executor does not implement the extern function {name!r} "
                        f"(T.call_pure_extern runs CUDA's math functions only)")
    if intrinsic == "clz":  # (the width is the function's: __clz of 32 bits, __clzll of 64)
        return cast_value(count_leading_zeros(64 if name.endswith("ll") else 32, *args), dtype)
    return INTRINSICS[f"tir.{intrinsic}"](dtype, *args)


INTRINSICS["tir.call_pure_extern"] = _cuda_extern
