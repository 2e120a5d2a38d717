"""CUDA's device math functions and the TensorIR intrinsics they compute.

LowerIntrin (a cuda target) writes a math intrinsic as a call of CUDA's function,
``T.call_pure_extern("float32", "expf", x)``: ``expf`` for float32, ``exp`` for float64, ``hexp``
for float16 and bfloat16 (``round`` is ``nearbyint``, ``hrint`` in half precision; ``fabs`` of a
half is ``__habs``), ``__clz``/``__clzll`` and ``__popc``/``__popcll`` for 32- and 64-bit
integers. TVM's fast-math lowering writes CUDA's approximate intrinsics (``__expf``, ``__logf``,
...). ``math_name`` gives the first direction (the lowering's), ``intrinsic_of`` the second (for
the reference executor, which runs a lowered kernel).
"""
from __future__ import annotations

from .dtype import DataType

CUDA_MATH = {"floor", "ceil", "trunc", "fabs", "round", "nearbyint", "exp", "exp2", "exp10", "erf", "log",
             "log2", "log10", "tan", "cos", "cosh", "sin", "sinh", "atan", "tanh", "sqrt", "rsqrt", "pow",
             "fmod"}
# CUDA's approximate single-precision intrinsics (``__expf``), what TVM's fast math writes
FAST_MATH = ("exp", "exp10", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "pow")


def math_name(dtype: DataType, name: str) -> str | None:
    """CUDA's function for math intrinsic ``name`` on ``dtype`` (TVM's CUDAMath), or None."""
    if dtype.is_float and dtype.bits in (32, 64):
        base = "nearbyint" if name == "round" else name
        return base + "f" if dtype.bits == 32 else base
    if dtype.is_float and dtype.bits == 16:  # (float16 and bfloat16)
        return {"fabs": "__habs", "round": "hrint"}.get(name, "h" + name)
    if (dtype.is_int or dtype.is_uint) and dtype.bits in (32, 64) and name == "clz":  # (no integer fabs...)
        return f"__{name}" + ("ll" if dtype.bits == 64 else "")
    return None


def popcount_name(dtype: DataType) -> str | None:
    return {32: "__popc", 64: "__popcll"}.get(dtype.bits) if dtype.is_uint else None


def _inverse() -> dict:
    found: dict = {}
    for dtype in ("float16", "float32", "float64"):
        for name in sorted(CUDA_MATH):
            found.setdefault(math_name(DataType(dtype), name), name)
    for dtype in ("int32", "int64"):
        found[math_name(DataType(dtype), "clz")] = "clz"
    for dtype in ("uint32", "uint64"):
        found[popcount_name(DataType(dtype))] = "popcount"
    found.update({f"__{name}f": name for name in FAST_MATH})
    return found


_INTRINSIC_OF = _inverse()


def intrinsic_of(extern: str) -> str | None:
    """The intrinsic (``"exp"``, ``"clz"``, ...) CUDA's function ``extern`` computes, or None."""
    return _INTRINSIC_OF.get(extern)
