"""The narrow data types (bfloat16, float8/6/4, int4/uint4/int2/uint2) end to end: names,
tensors of ml_dtypes' arrays, and the LLVM code generator's conversions, checked against
ml_dtypes' ``astype`` on every code and on a sweep of float32 inputs (ties, NaN, inf, overflow)."""
from __future__ import annotations

import contextlib
import ctypes
import platform
import subprocess
import sys

import numpy as np
import pytest

import tvms
from tvms.ir.dtype import FLOAT_FORMATS, DataType, float_limits
from tvms.ir.errors import TVMSError
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

ml_dtypes = pytest.importorskip("ml_dtypes")

CONVERT = '''\
from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((N,), "DT"), B: T.Buffer((N,), "float32"), C: T.Buffer((N,), "SRC"),
         D: T.Buffer((N,), "DT")):
    for io in T.serial(N8):
        for ii in T.KIND(8):
            B[io * 8 + ii] = T.Cast("float32", A[io * 8 + ii])
            D[io * 8 + ii] = T.Cast("DT", C[io * 8 + ii])
'''


def _convert(dtype: str, codes: np.ndarray, inputs: np.ndarray, vectorized: bool = False,
             flags: contextlib.AbstractContextManager = contextlib.nullcontext()):
    """(the float32 values of ``codes``, ``inputs`` converted to ``dtype``) by compiled code
    (``vectorized``: 8 lanes at a time) run under ``flags``."""
    n = -(-max(len(codes), len(inputs)) // 8) * 8
    codes, inputs = np.resize(codes, n), np.resize(inputs, n)
    src = CONVERT.replace("DT", dtype).replace("SRC", str(inputs.dtype)).replace("N8", str(n // 8))
    src = src.replace("(N", f"({n}")
    src = src.replace("T.KIND(", "T.vectorized(" if vectorized else "T.serial(")
    f = tvms.build(from_source(src), target="llvm")
    a, c = tvms.nd.array(codes), tvms.nd.array(inputs)
    b, d = tvms.nd.empty((n,), "float32"), tvms.nd.empty((n,), dtype)
    with flags:
        f(a, b, c, d)
    return codes, b.numpy(), inputs, d.numpy()


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)


def _sweep(dtype: np.dtype) -> np.ndarray:
    """float32 inputs: every value of the type, the midpoints between neighbours (ties), values
    around its range, random bit patterns (NaNs with payloads, subnormals, huge values)."""
    rng = np.random.default_rng(7)
    count = 1 << (16 if dtype.itemsize == 2 else 8)
    with np.errstate(invalid="ignore"):
        values = np.arange(count, dtype=np.uint16 if count > 256 else np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)]).astype(np.float64)
    top = float(ml_dtypes.finfo(dtype).max)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38,
                         top * 1.0001, top * 1.5, top * 2], np.float64)
    with np.errstate(all="ignore"):
        return np.concatenate([values, (finite[:-1] + finite[1:]) / 2, specials,
                               rng.standard_normal(4000) * top / 3,
                               rng.integers(0, 2 ** 32, 4000, dtype=np.uint32).view(np.float32)]).astype(np.float32)


@pytest.mark.parametrize("name", sorted(FLOAT_FORMATS))
def test_float_conversions_agree_with_ml_dtypes(name):
    dtype = np.dtype(getattr(ml_dtypes, name))
    bits = {"float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6}.get(name, dtype.itemsize * 8)
    codes = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8).view(dtype)
    codes, decoded, inputs, encoded = _convert(name, codes, _sweep(dtype), vectorized=name == "float8_e4m3fn")
    want = codes.astype(np.float32)
    same = (decoded == want) | (np.isnan(decoded) & np.isnan(want))
    assert same.all(), (_bits(codes)[~same][:8], decoded[~same][:8], want[~same][:8])
    with np.errstate(all="ignore"):
        expected = inputs.astype(dtype)
    wrong = _bits(encoded) != _bits(expected)
    assert not wrong.any(), (inputs[wrong][:8], _bits(encoded)[wrong][:8], _bits(expected)[wrong][:8])


MXCSR = """
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i32 @set_mxcsr(i32 %bits, i32 %keep) {
  %slot = alloca i32
  call void @llvm.x86.sse.stmxcsr(ptr %slot)
  %old = load i32, ptr %slot
  %kept = and i32 %old, %keep
  %new = or i32 %kept, %bits
  store i32 %new, ptr %slot
  call void @llvm.x86.sse.ldmxcsr(ptr %slot)
  ret i32 %old
}
"""


@contextlib.contextmanager
def _denormals_are_zero():
    """This thread's SSE control register with DAZ and FTZ set (as a library compiled with
    -ffast-math sets them), restored after."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(MXCSR), machine)
    engine.finalize_object()
    set_mxcsr = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)(
        engine.get_function_address("set_mxcsr"))
    old = set_mxcsr(0x8040, 0xFFFFFFFF)  # (DAZ: bit 6, FTZ: bit 15)
    try:
        yield
    finally:
        set_mxcsr(old, 0)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the MXCSR register is x86's")
def test_bfloat16_rounds_subnormals_on_their_bits_whatever_daz_and_ftz():
    """float32 subnormals (ties, both signs) and float64 values below 2**-126 to bfloat16, scalar
    and vector code, run with DAZ and FTZ set: ml_dtypes' bits (through the float adder, or the
    float64 -> float32 rounding to odd, the flags made them zeros)."""
    rng = np.random.default_rng(11)
    bits = np.concatenate([rng.integers(1, 1 << 23, 500), [1, 0x7FFF, 0x8000, 0x8001, 0x18000, 0x7FFFFF]])
    bits = (bits | (rng.integers(0, 2, len(bits)) << 31)).astype(np.uint32)
    doubles = rng.random(300) * 2.0 ** -126 * rng.choice([-1, 1], 300)
    codes = np.zeros(1, ml_dtypes.bfloat16)
    for inputs in (bits.view(np.float32), doubles):
        want = _bits(inputs.astype(ml_dtypes.bfloat16))
        assert (want != want & 0x8000).sum() > 0.9 * len(want)  # (subnormal bfloat16s, not zeros)
        for vectorized in (False, True):
            encoded = _convert("bfloat16", codes, inputs, vectorized, _denormals_are_zero())[3]
            np.testing.assert_array_equal(_bits(encoded)[:len(inputs)], want)


def test_float64_and_float16_conversions_round_once():
    """A double is rounded to float to odd first: the result is the double's correct rounding
    (a double just past a float8 tie would round to the tie in float, then to even, as
    ml_dtypes' astype from float64 does)."""
    e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
    tie = 1.0 + 2.0 ** -4  # halfway between 1 and 1.125
    doubles = np.array([tie + 2.0 ** -40, tie - 2.0 ** -40, tie, 1e300, -1e-300, np.nan], np.float64)
    *_, inputs, encoded = _convert("float8_e4m3fn", np.zeros(1, e4m3), doubles)
    got = encoded.astype(np.float64)
    assert list(got[:3]) == [1.125, 1.0, 1.0] and np.isnan(got[3]) and got[4] == -0.0 and np.isnan(got[5])
    halves = np.array([tie, 1.2, -300.0, np.inf, 65504.0], np.float16)
    *_, inputs, encoded = _convert("float8_e5m2", np.zeros(1, ml_dtypes.float8_e5m2), halves)
    assert (_bits(encoded) == _bits(inputs.astype(ml_dtypes.float8_e5m2))).all()


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn"])
def test_vectorized_casts_from_float64_and_int32(name):
    """8-lane casts from float64 and int32 (rounded to float32 to odd first, a vector of
    ``llvm.fabs``) equal the scalar ones, and ml_dtypes' where the input is exact in float32."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    doubles = np.concatenate([_sweep(dtype)[::7], [1.0625 + 2.0 ** -40, 1.0625 - 2.0 ** -40, 1e300]])
    ints = np.concatenate([np.arange(-300, 300), [2 ** 24 + 1, -(2 ** 31), 2 ** 31 - 1, 12345679]])
    for inputs in (doubles.astype(np.float64), ints.astype(np.int32)):
        *_, inputs, vector = _convert(name, np.zeros(8, dtype), inputs, vectorized=True)
        *_, scalar = _convert(name, np.zeros(8, dtype), inputs)
        assert (_bits(vector) == _bits(scalar)).all()
        with np.errstate(all="ignore"):
            exact = inputs.astype(np.float32).astype(inputs.dtype) == inputs
            want = inputs.astype(np.float32).astype(dtype)
        assert (_bits(vector) == _bits(want))[exact].all()


NARROW_CONSTANTS = '''\
from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((8,), "bfloat16"), B: T.Buffer((8,), "float8_e4m3fn")):
    for i in range(8):
        A[i] = A[i] * T.bfloat16(3.0)
        B[i] = T.float8_e4m3fn(-0.3)
'''


def test_constants_are_encoded_without_ml_dtypes():
    """A narrow-float constant's bits equal ml_dtypes' rounding for every format, and compiling
    one needs no ml_dtypes (``T.bfloat16(3.0)`` used to raise without it)."""
    from tvms.lowering.codegen.llvm_types import constant

    for name in sorted(FLOAT_FORMATS):
        dtype = np.dtype(getattr(ml_dtypes, name))
        values = _sweep(dtype)[::17 if dtype.itemsize == 2 else 1]
        got = np.array([constant(DataType(name), float(v)).constant for v in values])
        with np.errstate(all="ignore"):
            want = _bits(values.astype(dtype))
        assert (got == want).all(), (name, values[got != want][:8], got[got != want][:8], want[got != want][:8])
    code = f"""import sys
sys.modules["ml_dtypes"] = None  # (the code generator's steps; loading the kernel is the runtime's)
from tvms.ir.target import as_target
from tvms.lowering.build import codegen, lower_prim_func
from tvms.lowering.targets import target_kind
from tvms.script import from_source
target = as_target("llvm")
row = target_kind(target)
ll = codegen({{"main": lower_prim_func(from_source({NARROW_CONSTANTS!r}), row, target)}}, row, target)["main"].llvm_ir
print("i16 16448" in ll, "i8 170" in ll)"""  # (3.0 is 0x4040; -0.3 rounds to 0xaa)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["True", "True"], out.stderr


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_narrow_integers_convert_and_wrap_as_ml_dtypes(name):
    """One element a byte (int4 -1 is 0x0f); float to int4 truncates, then wraps."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    bits = int(name[-1])
    codes = np.arange(1 << bits, dtype=np.uint8).view(dtype)
    inputs = np.arange(-20, 20, 0.75, dtype=np.float32)
    codes, decoded, inputs, encoded = _convert(name, codes, inputs)
    assert (decoded == codes.astype(np.float32)).all()
    assert (encoded.view(np.uint8) == inputs.astype(dtype).view(np.uint8)).all()


def test_names_and_limits():
    assert DataType("int2").bits == 2 and DataType("uint2x4").lanes == 4
    assert DataType("bfloat16").is_narrow_float and DataType("float8_e4m3fnx8").is_narrow_float
    assert not DataType("float16").is_narrow_float and not DataType("int4").is_narrow_float
    for name in FLOAT_FORMATS:
        info = ml_dtypes.finfo(getattr(ml_dtypes, name))
        assert float_limits(name) == (float(info.min), float(info.max)), name
    with pytest.raises(TVMSError, match="int has 1, 2, 4, 8"):
        DataType("int3")


def test_tensors_of_ml_dtypes():
    for name in ("bfloat16", "float8_e4m3fn", "float4_e2m1fn", "int4", "uint2"):
        data = np.arange(-3, 3).astype(getattr(ml_dtypes, name))
        t = tvms.nd.array(data)
        assert t.dtype == name and t.numpy().dtype == data.dtype
        assert (_bits(t.numpy()) == _bits(data)).all()
        assert tvms.nd.empty((2, 3), name).numpy().dtype == data.dtype


def test_importing_tvms_does_not_import_ml_dtypes():
    code = "import sys, tvms, tvms.relax; print('ml_dtypes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


BF16_ARITH = '''\
from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "bfloat16"), B: T.Buffer((64,), "bfloat16"), C: T.Buffer((64,), "bfloat16"),
         M: T.Buffer((1,), "bfloat16")):
    for i in T.vectorized(64):
        C[i] = T.exp(A[i]) * B[i] + A[i] / B[i]
    M[0] = T.max_value("bfloat16")
'''


def test_bfloat16_arithmetic_is_computed_in_float32():
    """The whole expression in float32 (operands exact), rounded to bfloat16 once at the store."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(64).astype(ml_dtypes.bfloat16)
    b = (rng.random(64) + 0.5).astype(ml_dtypes.bfloat16)
    f = tvms.build(from_source(BF16_ARITH), target="llvm")
    c, m = tvms.nd.empty((64,), "bfloat16"), tvms.nd.empty((1,), "bfloat16")
    f(tvms.nd.array(a), tvms.nd.array(b), c, m)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    want = (np.exp(fa) * fb + fa / fb).astype(ml_dtypes.bfloat16)
    ulps = np.abs(_bits(c.numpy()).astype(np.int32) - _bits(want).astype(np.int32))
    assert ulps.max() <= 1  # (exp's last float32 bit may differ from numpy's)
    assert float(m.numpy()[0]) == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    # the reference executor computes as the compiled code does
    ref_c, ref_m = np.zeros(64, ml_dtypes.bfloat16), np.zeros(1, ml_dtypes.bfloat16)
    run_prim_func(from_source(BF16_ARITH), a, b, ref_c, ref_m)
    assert np.abs(_bits(ref_c).astype(np.int32) - _bits(want).astype(np.int32)).max() <= 1
    assert _bits(ref_m) == _bits(m.numpy())


INT_POW = '''\
from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((16,), "DT"), B: T.Buffer((16,), "DT"), C: T.Buffer((16,), "DT")):
    for i in range(16):
        C[i] = T.pow(A[i], B[i])
'''


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_integer_pow_wraps_as_numpy(dtype):
    a = np.array([0, 1, -1, 2, 3, -3, 7, 10, 2, -2, 5, 1, -1, 0, 3, 2][:16]).astype(dtype)
    b = np.array([0, 5, 3, 10, 4, 3, 9, 12, 31, 7, 0, -4, -3, 2, 40, 62]).astype(dtype)
    if np.dtype(dtype).kind == "u":
        a, b = a % 8, b % 16
    f = tvms.build(from_source(INT_POW.replace("DT", dtype)), target="llvm")
    c = tvms.nd.empty((16,), dtype)
    f(tvms.nd.array(a), tvms.nd.array(b), c)
    negative = b < 0
    with np.errstate(all="ignore"):
        want = np.power(a, np.where(negative, 0, b))
    want = np.where(negative, np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 1, -1, 1), 0)), want)
    assert (c.numpy() == want.astype(dtype)).all()


def test_metadata_constants_of_narrow_types_round_trip():
    """A model's bfloat16 or int4 weights in a printed module's metadata section read back."""
    from tvms.script.metadata import decode_entry, encode_array

    for name in ("bfloat16", "int4", "float8_e5m2"):
        data = np.arange(-3, 3).reshape(2, 3).astype(getattr(ml_dtypes, name))
        back = decode_entry({"dtype": name, "shape": [2, 3], "data": encode_array(data)})
        assert back.dtype == data.dtype and (_bits(back) == _bits(data)).all()


def _run_onnx(node, inputs: dict, out_type: int, opset: int):
    """The one output of the single-node model ``node`` on ``inputs`` (from_onnx -> compile -> VM)."""
    from onnx import helper

    from tvms.relax.frontend.onnx import from_onnx

    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                      for k, v in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], out_type, None)])
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return vm["main"](*[tvms.nd.array(v) for v in inputs.values()]).numpy()


def test_onnx_cast_to_e8m0_rounds_as_onnx_reference():
    """Each round_mode, with and without saturate, on normal, subnormal, huge and special values."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.numpy_helper import to_float8e8m0

    x = np.array([0.0, 1e-40, 3e-39, 0.124, 0.25, 0.375, 0.3751, 1.1, 1.5, 3.0, 6.0, -2.5, 1e38, 3.3e38,
                  np.inf, np.nan], np.float32)
    for mode in ("up", "down", "nearest"):
        for saturate in (0, 1):
            node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode=mode,
                                    saturate=saturate)
            got = _run_onnx(node, {"x": x}, TensorProto.FLOAT8E8M0, 25)
            want = to_float8e8m0(x, saturate=bool(saturate), round_mode=mode)
            assert (_bits(got) == _bits(want)).all(), (mode, saturate, _bits(got), _bits(want))


def test_onnx_bitcast_between_sizes():
    """To a narrower type the last dimension grows by the size ratio, to a wider one it goes."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = np.array([[1.5, -2.0], [np.inf, 3.25]], np.float32)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.UINT16)
    got = _run_onnx(node, {"x": x}, TensorProto.UINT16, 26)
    assert got.shape == (2, 2, 2) and (got == x.view(np.uint16).reshape(2, 2, 2)).all()
    halves = x.view(np.uint16).reshape(2, 2, 2)
    node = helper.make_node("BitCast", ["h"], ["y"], to=TensorProto.FLOAT)
    assert (_run_onnx(node, {"h": halves}, TensorProto.FLOAT, 26) == x).all()
