"""Conversions to and from float16 in compiled code, bit for bit against numpy's ``astype``.

LLVM leaves some of them to compiler-rt's ``__truncdfhf2`` / ``__truncsfhf2`` / ``__extendhfsf2``
(double -> half everywhere, float <-> half without F16C), which the JIT cannot resolve: the
process crashed calling address 0. ``lowering/codegen/llvm_half.py`` defines them in IR.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.lowering.codegen.llvm_target import parse_llvm_target, require_llvm, target_machine
from tvms.runtime.llvm_jit import load_kernel, undefined_symbols
from tvms.script import from_source

FLOATS = ("float64", "float32", "float16")
TARGETS = ("llvm", "llvm -mcpu=x86-64")  # the host (F16C here) and a CPU without F16C
LANES = 8


def _values() -> np.ndarray:
    """Special values and a dense sample, as float64 (each source type takes them rounded)."""
    h = 2.0 ** -24  # the smallest half subnormal
    one_ulp = 2.0 ** -10
    special = [0.0, h, h / 2, h / 2 * (1 + 2 ** -30), h / 2 * (1 - 2 ** -30), 1.5 * h, 2.5 * h,
               2.0 ** -14, 2.0 ** -14 * (1 - 2 ** -11), 2.0 ** -14 - h / 2, 5e-324, 1e-300, 1e-40,
               1.0, 1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp / 2 + 2 ** -40,  # ties, and
               1 + one_ulp / 2 - 2 ** -40, 1 + one_ulp / 2 + 2 ** -30,  # near ties (double rounding)
               65504.0, 65519.99, 65520.0, 65520.01, 65536.0, 1e10, 3.4028234663852886e38, 1e300,
               np.inf, np.nan]
    special += [-v for v in special]
    rng = np.random.default_rng(7)
    dense = np.concatenate([rng.uniform(-70000, 70000, 1000), rng.standard_normal(1000) * 1e-5,
                            np.ldexp(rng.uniform(1, 2, 1000), rng.integers(-30, 18, 1000)) *
                            rng.choice([-1, 1], 1000)])
    values = np.concatenate([special, dense])
    return np.concatenate([values, np.zeros(-len(values) % LANES)])


def _sources(dtype: str) -> np.ndarray:
    """The inputs of type ``dtype``: the sample rounded to it, and for the narrower types every
    float16 bit pattern and random float32 bit patterns (NaNs with payloads included)."""
    with np.errstate(over="ignore"):
        values = _values().astype(dtype)
    if dtype == "float16":
        values = np.concatenate([values, np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)])
    if dtype == "float32":
        bits = np.random.default_rng(8).integers(0, 1 << 32, 8192, dtype=np.uint64).astype(np.uint32)
        values = np.concatenate([values, bits.view(np.float32)])
    return values


def _kernel(src: str, dst: str, n: int, vector: bool):
    loops = (f"for i0 in range({n // LANES}):\n        for i1 in T.vectorized({LANES}):" if vector else
             f"for i0 in range(1):\n        for i1 in range({n}):")
    return from_source(f'''
@T.prim_func
def main(A: T.Buffer(({n},), "{src}"), B: T.Buffer(({n},), "{dst}")):
    {loops}
            B[i0 * {LANES if vector else n} + i1] = T.Cast("{dst}", A[i0 * {LANES if vector else n} + i1])
''')


def _assert_same_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal bit for bit, but a NaN only as a NaN of the same sign (its payload's quiet bit is
    the hardware's: numpy keeps a signaling NaN signaling)."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), what
    assert np.array_equal(np.signbit(got), np.signbit(want)), what
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.itemsize]
    wrong = np.flatnonzero(got.view(bits)[~nan] != want.view(bits)[~nan])
    assert wrong.size == 0, f"{what}: {wrong.size} differ, first {got[~nan][wrong[:3]]} != {want[~nan][wrong[:3]]}"


@pytest.mark.parametrize("target", TARGETS)
def test_every_float_conversion_equals_numpy_bit_for_bit(target):
    for src in FLOATS:
        a = _sources(src)
        for dst in FLOATS:
            if src == dst:
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                want = a.astype(dst)
            for vector in (False, True):
                b = np.zeros(len(a), dst)
                tvms.build(_kernel(src, dst, len(a), vector), target=target)(a, b)
                _assert_same_floats(b, want, f"{src} -> {dst}, {'vector' if vector else 'scalar'}, {target}")


def test_half_arithmetic_without_f16c():
    # (LLVM computes half in float, converting with the libcalls where F16C is missing)
    f = from_source('''
@T.prim_func
def main(A: T.Buffer((64,), "float16"), B: T.Buffer((64,), "float16")):
    for i in range(64):
        B[i] = A[i] * A[i] + T.float16(0.5)
''')
    a = np.random.default_rng(9).standard_normal(64).astype(np.float16)
    b = np.zeros(64, np.float16)
    tvms.build(f, target="llvm -mcpu=x86-64")(a, b)
    np.testing.assert_array_equal(b, a * a + np.float16(0.5))  # (each operation rounded to half)


def test_half_conversions_in_an_exported_library(tmp_path):
    a = _sources("float64")
    f = _kernel("float64", "float16", len(a), True)
    tvms.build(f, target="llvm -mcpu=x86-64").export_library(str(tmp_path / "h.so"))
    b = np.zeros(len(a), np.float16)
    tvms.runtime.load_module(str(tmp_path / "h.so"))["main"](a, b)
    with np.errstate(over="ignore"):
        _assert_same_floats(b, a.astype(np.float16), "exported float64 -> float16")


def test_code_calling_an_undefined_function_is_refused_at_load():
    binding = require_llvm()
    module = binding.parse_assembly("declare void @tvms_no_such_function()\n"
                                    "define void @f() {\n  call void @tvms_no_such_function()\n  ret void\n}")
    target = parse_llvm_target("llvm")
    code = target_machine(target).emit_object(module)
    assert undefined_symbols(binding.ObjectFileRef.from_data(code)) == ["tvms_no_such_function"]
    artifact = types.SimpleNamespace(object_code=code, thread_pool=None, target=target, symbol="f")
    with pytest.raises(TVMSError, match="it needs tvms_no_such_function, which this process does not define"):
        load_kernel(artifact)
