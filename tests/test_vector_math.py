"""The code generator's vector exp, log, tanh, erf and sigmoid (``llvm_vector_math``): their error
in ULPs against numpy's float64 functions over the whole float32 range, special values included,
with and without FMA; float16 through float32; float64 left to libm."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.lowering.codegen.llvm_vector_math import VECTOR_MATH  # noqa: E402
from tvms.script import from_source  # noqa: E402

HEADER = "# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n"
NAMES = ("exp", "log", "tanh", "erf", "sigmoid")
# the bounds the module's docstring states, in float32 ULPs
MAX_ULPS = {"exp": 1.0, "log": 1.0, "tanh": 1.5, "erf": 1.0, "sigmoid": 2.5}
# 0, -0, the smallest subnormal, FLT_MIN, FLT_MAX, exp's overflow and underflow thresholds (to
# inf, out of the normal range, to 0), the tanh and erf branch points, inf, -inf, nan
EDGES = [0.0, -0.0, 1.4e-45, -1.4e-45, 1.1754944e-38, -1.1754944e-38, 3.4028235e38, -3.4028235e38,
         88.72283, 88.72284, 88.7229, -87.33654, -103.97208, -103.9721, -104.0, 0.625, -0.625, 1.0, -1.0,
         np.inf, -np.inf, np.nan]


def kernel(dtype: str, lanes: int = 16) -> str:
    """``B[k, i] = T.<NAMES[k]>(A[i])`` for each function, in a vectorized loop."""
    stores = "".join(f"                B[{k}, i_0 * {lanes} + i_1] = T.{name}(A[i_0 * {lanes} + i_1])\n"
                     for k, name in enumerate(NAMES))
    return HEADER + f"""
    @T.prim_func
    def main(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "{dtype}")
        B = T.match_buffer(b, ({len(NAMES)}, n), "{dtype}")
        for i_0 in range(n // {lanes}):
            for i_1 in T.vectorized({lanes}):
{stores}"""


def run(dtype: str, x: np.ndarray, target: str = "llvm") -> np.ndarray:
    x = np.concatenate([x, np.zeros(-len(x) % 16, x.dtype)])
    out = np.zeros((len(NAMES), len(x)), x.dtype)
    tvms.build(from_source(kernel(dtype))["main"], target=target)(x, out)
    return out


def reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):  # (signalling nan patterns)
        x = x.astype(np.float64)
        if name == "erf":
            return np.vectorize(math.erf, otypes=[np.float64])(x)
        if name == "sigmoid":
            return 1 / (1 + np.exp(-x))
        return getattr(np, name)(x)


def ulp_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ULPs of float32 at ``want``; a special value (inf, nan, or a result that
    overflows float32) counts 0 where ``got`` is the float32 rounding of ``want``, else inf."""
    with np.errstate(over="ignore"):
        rounded = want.astype(np.float32)
    _, exponent = np.frexp(np.abs(want))
    ulp = np.ldexp(1.0, np.maximum(exponent - 1, -126) - 23)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - want) / ulp
    special = ~np.isfinite(rounded) | ~np.isfinite(got)
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    return np.where(special, np.where(same, 0.0, np.inf), err)


def float32_samples(step: int) -> np.ndarray:
    """The edge cases and every ``step``-th float32 bit pattern (both signs, subnormals to nan)."""
    patterns = np.arange(0, 2 ** 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([np.array(EDGES, np.float32), patterns])


@pytest.mark.parametrize("target, step", [("llvm", 4099), ("llvm -mcpu=x86-64", 65521)],
                         ids=["host", "generic-no-fma"])
def test_ulp_error_within_the_documented_bounds(target, step):
    x = float32_samples(step)
    out = run("float32", x, target)[:, :len(x)]
    for k, name in enumerate(NAMES):
        err = ulp_errors(out[k], reference(name, x))
        worst = int(np.argmax(err))
        assert err[worst] <= MAX_ULPS[name], f"{name}({x[worst]!r}) = {out[k][worst]!r}: {err[worst]} ULP"


def test_special_values_are_those_of_c():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 100.0, -200.0], np.float32)
    out = run("float32", x)[:, :len(x)]
    expected = {
        "exp": [1, 1, np.inf, 0, np.nan, math.exp(-1), np.inf, 0],
        "log": [-np.inf, -np.inf, np.inf, np.nan, np.nan, np.nan, math.log(100), np.nan],
        "tanh": [0, -0.0, 1, -1, np.nan, math.tanh(-1), 1, -1],
        "erf": [0, -0.0, 1, -1, np.nan, math.erf(-1), 1, -1],
        "sigmoid": [0.5, 0.5, 1, 0, np.nan, 1 / (1 + math.e), 1, 0],
    }
    for k, name in enumerate(NAMES):
        np.testing.assert_allclose(out[k], np.array(expected[name], np.float32), rtol=3e-7, err_msg=name)
        if name in ("tanh", "erf"):  # odd functions keep the sign of zero
            assert np.signbit(out[k][1]) and not np.signbit(out[k][0])


def test_float16_is_computed_in_float32():
    x = np.linspace(-12, 12, 4001).astype(np.float16)
    out = run("float16", x)[:, :len(x)]
    for k, name in enumerate(NAMES):
        want = reference(name, x.astype(np.float32))
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(out[k].astype(np.float64), want.astype(np.float16).astype(np.float64),
                                       rtol=2 ** -10, atol=2 ** -24, err_msg=name)


def test_float64_vectors_keep_libm_accuracy():
    x = np.linspace(-20, 20, 1024)
    out = run("float64", x)
    for k, name in enumerate(NAMES):
        np.testing.assert_allclose(out[k], reference(name, x), rtol=1e-14, atol=0, err_msg=name)
    assert VECTOR_MATH == set(NAMES)
