"""cuBLAS dispatch (seed 000's "CublasDispatch"): the ``cublas.*`` patterns and
``partition_for_cublas`` (tvms.relax.backend.cuda.cublas), the codegen ``relax.ext.cublas`` and
its runtime (runtime/cublas.py).

Goldens: tests/fixtures/cublas, printed by TVM 0.27 from the same inputs (generate.py there;
RunCodegen's with a stand-in codegen, since TVM's wheel has no CUDA). The packed functions are
run here with the host reference (``host_gemm``: the cuBLASLt plan, with numpy in place of the
GEMM, on flat buffers read through the plan's column-major layouts), so leading dimensions,
transposes and batch strides are checked without a GPU; the cuBLASLt calls themselves run only
where cuBLAS and a CUDA device are present.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import FIXTURES
from test_dispatch import counting_offloaded_calls

import tvms as tvm
from tvms import TVMSError, relax
from tvms.ir import registry
from tvms.lowering.relax import backend as backend_registry
from tvms.lowering.relax import backend_cuda_cublas as cublas_backend
from tvms.relax.backend.cuda.cublas import partition_for_cublas
from tvms.runtime import cublas as cublas_runtime
from tvms.runtime.cublas import GemmPlan, Operand, device_operand, host_gemm, plan_gemm
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

GOLDEN = FIXTURES / "cublas"
MODULES = ("seed000", "zoo")


def load(name: str) -> tvm.IRModule:
    folder = FIXTURES / "dispatch" if name == "seed000" else GOLDEN  # the seed's MLP is shared
    return from_source((folder / f"{name}.input.tvms").read_text())


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.tvms").read_text()


@pytest.fixture
def cublas_on_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """``relax.ext.cublas`` with the host reference in place of cuBLASLt."""
    monkeypatch.setitem(registry._FUNCTIONS, "runtime.cublas.gemm",
                        lambda call: cublas_runtime.gemm_function(call, host_gemm,
                                                                  cublas_runtime.host_operand))
    monkeypatch.delitem(registry._FUNCTIONS, "relax.ext.cublas", raising=False)
    assert cublas_backend.enable_codegen()
    yield
    registry._FUNCTIONS.pop("relax.ext.cublas", None)


def random_args(func: relax.Function, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    args = []
    for p in func.params:
        shape = [int(getattr(d, "value", 3)) for d in p.struct_info.dims]
        dtype = str(p.struct_info.dtype)
        integer = dtype.startswith("int")
        args.append((rng.integers(-8, 8, shape) if integer else rng.standard_normal(shape))
                    .astype(dtype))
    return args


def run_each_function(before: tvm.IRModule, after: tvm.IRModule) -> None:
    """Every function of ``before`` gives the same numbers in ``after`` (cuBLAS's tanh GELU
    and the half-precision sums stay within the tolerance)."""
    for gv, func in before.functions_items():
        args = random_args(func)
        want, got = run_relax(before, gv.name_hint, *args), run_relax(after, gv.name_hint, *args)
        for w, g in zip(want if isinstance(want, tuple) else (want,),
                        got if isinstance(got, tuple) else (got,)):
            tol = 2e-2 if w.dtype == np.float16 else 2e-3
            np.testing.assert_allclose(np.asarray(g, "float64"), np.asarray(w, "float64"),
                                       rtol=tol, atol=tol, err_msg=gv.name_hint)


# --------------------------------------------------------------------------- patterns


def test_patterns_are_tvms_in_tvms_priority() -> None:
    names = [p.name for p in relax.backend.get_patterns_with_prefix("cublas")]
    assert names == (GOLDEN / "patterns.txt").read_text().split()
    assert relax.backend.get_pattern("cublas.matmul_transposed_bias_relu").backend == "cublas"


@pytest.mark.parametrize("name", MODULES + ("fp8",))
def test_partition_for_cublas_prints_as_tvm(name: str) -> None:
    """TVM's check on every case of the zoo: batched sides, dtypes, int8 alignment, a bias
    matrix, a leaking intermediate, symbolic batches and a symbolic reduction axis."""
    assert partition_for_cublas(load(name)).script(dialect="tvm-0.27") == \
        golden(f"{name}.partition")


def test_tvms_declines_what_cublas_would_multiply_wrongly(cublas_on_host: None) -> None:
    """A vector operand, and a permute_dims that is not a transpose of the last two axes
    (TVM 0.27 offloads both; its runtime would read the operands wrongly): the vector matmul
    stays, the permuted operand is computed before a plain ``cublas.matmul``."""
    head = (GOLDEN / "zoo.input.tvms").read_text().split("    @R.function")[0]
    mod = from_source(head + '''    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), w: R.Tensor((4, 3), dtype="float32"), y: R.Tensor((2, 3, 4), dtype="float32"), v: R.Tensor((4, 2, 5), dtype="float32")) -> R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((2, 3, 5), dtype="float32")):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.matmul(x, w, out_dtype=None)
            vt: R.Tensor((2, 4, 5), dtype="float32") = R.permute_dims(v, axes=[1, 0, 2])
            b: R.Tensor((2, 3, 5), dtype="float32") = R.matmul(y, vt, out_dtype=None)
            gv = (a, b)
            R.output(gv)
        return gv''')
    fused = partition_for_cublas(mod)
    assert [gv.name_hint for gv, f in fused.functions_items() if "Codegen" in f.attrs] == \
        ["fused_relax_matmul_cublas"]
    assert "cublas.matmul\"" in fused.script() and "R.matmul(x, w" in fused.script()
    run_each_function(mod, relax.transform.RunCodegen()(fused))


# --------------------------------------------------------------------------- codegen


@pytest.mark.parametrize("name", MODULES)
def test_run_codegen_prints_as_tvm_and_keeps_numbers(name: str, cublas_on_host: None) -> None:
    before = load(name)
    after = relax.transform.RunCodegen()(partition_for_cublas(before))
    assert after.script(dialect="tvm-0.27") == golden(f"{name}.partition.RunCodegen")
    modules = after.attrs["external_mods"]
    assert all(len(m.functions) == 1 and m.backend == "cublas" for m in modules)  # one each
    run_each_function(before, after)


def test_dequantize_takes_its_scale_as_alpha(cublas_on_host: None) -> None:
    """``dequantize(matmul)`` with its scale bound in the group (as TVM's tests partition it):
    the scale becomes cuBLAS's alpha. Partitioned with constants as inputs, the scale is
    unknown when the call is planned: a clear error."""
    before = load("dequantize")
    fused = partition_for_cublas(before, bind_constants=True)
    assert fused.script(dialect="tvm-0.27") == golden("dequantize.partition_bound")
    after = relax.transform.RunCodegen()(fused)
    assert after.script(dialect="tvm-0.27") == golden("dequantize.partition_bound.RunCodegen")
    run_each_function(before, after)
    with pytest.raises(TVMSError, match="bind_constants=True"):
        relax.transform.RunCodegen()(partition_for_cublas(before))


def test_seed000_cublas_dispatch(cublas_on_host: None) -> None:
    """The seed's CublasDispatch pass, then its MLP against numpy."""

    @tvm.transform.module_pass(opt_level=0, name="CublasDispatch")
    class CublasDispatch:
        def transform_module(self, mod: tvm.IRModule, _ctx: object) -> tvm.IRModule:
            if not tvm.get_global_func("relax.ext.cublas", True):
                raise Exception("CUBLAS is not enabled.")
            patterns = [relax.backend.get_pattern("cublas.matmul_transposed_bias_relu")]
            mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
            assert mod.script(dialect="tvm-0.27") == golden("seed000.dispatch")
            return relax.transform.RunCodegen()(mod)

    mod = CublasDispatch()(load("seed000"))
    assert mod.script(dialect="tvm-0.27") == golden("seed000.dispatch.RunCodegen")
    x, w1, b1, w2 = random_args(mod["forward"], 3)
    np.testing.assert_allclose(run_relax(mod, "forward", x, w1, b1, w2),
                               np.maximum(x @ w1.T + b1, 0) @ w2.T, rtol=1e-4, atol=1e-5)


def test_gemm_calls_name_the_operands() -> None:
    fused = partition_for_cublas(load("zoo"))
    linear = cublas_backend.gemm_call(
        fused["fused_relax_permute_dims_relax_matmul_relax_add_cublas"])
    assert (linear.lhs, linear.rhs, linear.bias, linear.transposed_rhs, linear.epilogue) == \
        (1, 0, 2, True, "bias")  # called as (w, x, b)
    gelu = cublas_backend.gemm_call(fused["fused_relax_matmul_relax_add_relax_nn_gelu_cublas"])
    assert (gelu.lhs, gelu.rhs, gelu.bias, gelu.transposed_rhs, gelu.epilogue) == \
        (0, 1, 2, False, "gelu_bias")


def test_fp8_scales_are_passed_as_pointers(cublas_on_host: None) -> None:
    fused = partition_for_cublas(load("fp8"))
    after = relax.transform.RunCodegen()(fused)
    assert after.script(dialect="tvm-0.27") == golden("fp8.partition.RunCodegen")
    call = cublas_backend.gemm_call(
        next(f for _, f in fused.functions_items() if "Codegen" in f.attrs))
    assert (call.lhs, call.rhs, call.scale_a, call.scale_b, call.transposed_rhs, call.epilogue) == \
        (1, 0, 2, 3, True, "default")  # called as (y, x, scaleA, scaleB)


def test_without_cublas_there_is_no_codegen_and_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(registry._FUNCTIONS, "relax.ext.cublas", raising=False)
    monkeypatch.delitem(registry._FUNCTIONS, "runtime.cublas.gemm", raising=False)
    monkeypatch.setattr(backend_registry, "_UNAVAILABLE", {})
    assert not cublas_backend.enable_codegen(
        "the cuBLAS library was not found: pip install tvms[cublas]")
    assert tvm.get_global_func("relax.ext.cublas", True) is None
    with pytest.raises(TVMSError, match=r"backend 'cublas': the cuBLAS library was not found"):
        relax.transform.RunCodegen()(partition_for_cublas(load("seed000")))
    if cublas_runtime.LIBRARY is None:
        assert "pip install tvms[cublas]" in cublas_runtime.REASON


# --------------------------------------------------------------------------- the GEMM plan


def host(array: np.ndarray) -> Operand:
    return cublas_runtime.host_operand(np.ascontiguousarray(array))


@pytest.mark.parametrize("lhs,rhs,transposed", [
    ((3, 4), (4, 5), False), ((3, 4), (5, 4), True),           # one GEMM
    ((2, 3, 4), (4, 5), False), ((2, 2, 3, 4), (5, 4), True),  # left batches fold into rows
    ((2, 3, 4), (2, 4, 5), False), ((2, 3, 4), (2, 5, 4), True),  # strided batches
    ((2, 3, 4), (1, 4, 5), False),                             # one right matrix
    ((1, 2, 3, 4), (2, 5, 4), True),                           # batches of other ranks
])
def test_host_plan_matches_numpy(lhs: tuple, rhs: tuple, transposed: bool) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(lhs).astype("float32"), rng.standard_normal(rhs).astype("float32")
    bias = rng.standard_normal(rhs[-2] if transposed else rhs[-1]).astype("float32")
    want = a @ (np.swapaxes(b, -1, -2) if transposed else b) + bias
    out = np.zeros(want.shape, "float32")
    plan = plan_gemm(a.shape, b.shape, out.shape, transposed)
    host_gemm(plan, host(a), host(b), host(out), host(bias), None, None, "relu_bias", 1.0)
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_plan_is_tvms_layout() -> None:
    """``out (N, M) = lhs (N, K) @ rhs^T`` with rhs (M, K): cuBLAS's A is rhs (k x m stored,
    transposed, ld k), B is lhs (k x n, ld k), C is m x n (ld m); batches stride m*k, k*n, m*n."""
    assert plan_gemm((3, 4), (5, 4), (3, 5), True) == GemmPlan(5, 3, 4, True, 4, 5, 4, 4, 5)
    assert plan_gemm((2, 3, 4), (4, 5), (2, 3, 5), False) == GemmPlan(5, 6, 4, False, 5, 4, 5, 4, 5)
    assert plan_gemm((2, 3, 4), (2, 4, 5), (2, 3, 5), False) == \
        GemmPlan(5, 3, 4, False, 5, 4, 5, 4, 5, batch=2, stride_a=20, stride_b=12, stride_c=15)
    for lhs, rhs, out, what in [((3, 4), (3, 5), (3, 5), "reduction lengths"),
                                ((3, 4), (2, 4, 5), (2, 3, 5), "batches"),
                                ((1, 2, 3, 4), (2, 1, 4, 5), (2, 2, 3, 5), "output"),
                                ((3, 4), (4, 5), (3, 6), "output")]:
        with pytest.raises(TVMSError, match=what):
            plan_gemm(lhs, rhs, out, False)


def test_packed_function_dequantize_int8_and_gelu() -> None:
    rng = np.random.default_rng(1)
    call = cublas_backend.GemmCall("f", 2, lhs=1, rhs=0, transposed_rhs=True, alpha=0.5)
    x, w = rng.integers(-8, 8, (3, 8)).astype("int8"), rng.integers(-8, 8, (4, 8)).astype("int8")
    out = np.zeros((3, 4), "int32")
    cublas_runtime.gemm_function(call, host_gemm, cublas_runtime.host_operand)(w, x, out)
    exact = x.astype("int32") @ w.T.astype("int32")
    np.testing.assert_array_equal(out, exact)  # IGEMM: alpha is 1
    out = np.zeros((3, 4), "float16")  # dequantized: alpha is the scale
    cublas_runtime.gemm_function(call, host_gemm, cublas_runtime.host_operand)(
        w.astype("float16"), x.astype("float16"), out)
    np.testing.assert_array_equal(out, (exact * 0.5).astype("float16"))
    scaled = cublas_backend.GemmCall("s", 4, lhs=1, rhs=0, scale_a=2, scale_b=3,
                                     transposed_rhs=True)
    scales = np.array([0.5], "float32"), np.array([3.0], "float32")
    cublas_runtime.gemm_function(scaled, host_gemm, cublas_runtime.host_operand)(
        w.astype("float16"), x.astype("float16"), *scales, out)
    np.testing.assert_array_equal(out, (exact * 1.5).astype("float16"))  # fp8's per-tensor scales
    call = cublas_backend.GemmCall("g", 3, lhs=0, rhs=1, bias=2, epilogue="gelu_bias")
    a, b, c = (rng.standard_normal(s).astype("float32") for s in ((3, 4), (4, 5), (5,)))
    out = np.zeros((3, 5), "float32")
    cublas_runtime.gemm_function(call, host_gemm, cublas_runtime.host_operand)(a, b, c, out)
    h = a @ b + c
    tanh_gelu = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    np.testing.assert_allclose(out, tanh_gelu, rtol=1e-5, atol=1e-6)
    with pytest.raises(TVMSError, match="takes 3 inputs and 1 output"):
        cublas_runtime.gemm_function(call, host_gemm, cublas_runtime.host_operand)(a, b, out)


class FakeDeviceTensor:
    """The minimal device tensor cuBLAS reads: ``__cuda_array_interface__``."""

    def __init__(self, pointer: int, shape: tuple, typestr: str = "<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape,
                                         "typestr": typestr, "strides": strides, "version": 3}


def test_device_operands_are_read_from_the_cuda_array_interface() -> None:
    assert device_operand(FakeDeviceTensor(4096, (3, 4), "<f2")) == Operand(4096, (3, 4), "float16")
    assert device_operand(FakeDeviceTensor(8, (2, 3), strides=(12, 4))).shape == (2, 3)
    bf16 = FakeDeviceTensor(8, (2, 3), "<V2")
    bf16.dtype = "bfloat16"  # as a tvms tensor names it
    assert device_operand(bf16).dtype == "bfloat16"
    with pytest.raises(TVMSError, match="row-major"):
        device_operand(FakeDeviceTensor(8, (2, 3), strides=(4, 8)))
    with pytest.raises(TVMSError, match="device tensors; got a ndarray"):
        device_operand(np.zeros((2, 2), "float32"))


# --------------------------------------------------------------------------- cuBLASLt itself

needs_cublas = pytest.mark.skipif(cublas_runtime.LIBRARY is None, reason="cuBLAS is not installed")


def _get(getter, obj, attr: int, ctype):
    import ctypes

    value, written = ctype(), ctypes.c_size_t()
    assert getter(obj, attr, ctypes.byref(value), ctypes.sizeof(value), ctypes.byref(written)) == 0
    return value.value


@needs_cublas
def test_cublaslt_descriptors_hold_the_plan() -> None:
    """The descriptors cuBLASLt is given (made without a GPU), read back from the library."""
    import ctypes

    lib, rt = cublas_runtime.LIBRARY, cublas_runtime
    plan = plan_gemm((2, 3, 4), (2, 5, 4), (2, 3, 5), True)
    d = rt.Descriptors(plan, "float16", "float16", "relu_bias", bias=0x1000)
    try:
        desc = lib.cublasLtMatmulDescGetAttribute
        assert _get(desc, d.desc, rt.DESC_TRANSA, ctypes.c_int32) == 1
        assert _get(desc, d.desc, rt.DESC_TRANSB, ctypes.c_int32) == 0
        assert _get(desc, d.desc, rt.DESC_EPILOGUE, ctypes.c_uint32) == rt.EPILOGUES["relu_bias"]
        assert _get(desc, d.desc, rt.DESC_BIAS_POINTER, ctypes.c_void_p) == 0x1000
        layout = lib.cublasLtMatrixLayoutGetAttribute
        fields = ((rt.LAYOUT_ROWS, ctypes.c_uint64), (rt.LAYOUT_COLS, ctypes.c_uint64),
                  (rt.LAYOUT_LD, ctypes.c_int64), (rt.LAYOUT_BATCH_COUNT, ctypes.c_int32),
                  (rt.LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64))
        got = [tuple(_get(layout, m, attr, ctype) for attr, ctype in fields) for m in d.layouts]
        assert got == [(4, 5, 4, 2, 20), (4, 3, 4, 2, 12), (5, 3, 5, 2, 15)]
        assert _get(layout, d.layouts[0], rt.LAYOUT_TYPE, ctypes.c_uint32) == 2  # CUDA_R_16F
    finally:
        d.close()
    assert tvm.get_global_func("relax.ext.cublas", True) is not None


@needs_cublas
def test_without_a_device_the_call_is_a_clear_error() -> None:
    if _cuda_device():
        pytest.skip("a CUDA device is present")
    call = cublas_backend.GemmCall("f", 2, lhs=0, rhs=1)
    args = [FakeDeviceTensor(256 * i, s) for i, s in enumerate(((3, 4), (4, 5), (3, 5)), 1)]
    # (the driver says so first where it is missing; else cuBLASLt finds no device)
    with pytest.raises(TVMSError, match="cannot use cuda:0: |cublasLtCreate .is a CUDA device present"):
        tvm.get_global_func("runtime.cublas.gemm")(call)(*args)


def _cuda_device() -> bool:
    try:
        from cuda.bindings import driver

        err, = driver.cuInit(0)[:1]
        return err == driver.CUresult.CUDA_SUCCESS and driver.cuDeviceGetCount()[1] > 0
    except Exception:  # no driver library: cuda-python raises while loading it
        return False


@pytest.mark.skipif(cublas_runtime.LIBRARY is None or not _cuda_device(),
                    reason="needs cuBLAS and a CUDA device")
def test_cublaslt_on_the_device_matches_the_host_reference() -> None:
    from cuda.bindings import driver

    class DeviceArray:
        def __init__(self, array: np.ndarray) -> None:
            self.host = np.ascontiguousarray(array)
            self.pointer = int(driver.cuMemAlloc(max(self.host.nbytes, 1))[1])
            driver.cuMemcpyHtoD(self.pointer, self.host.ctypes.data, self.host.nbytes)
            self.__cuda_array_interface__ = {
                "data": (self.pointer, False), "shape": self.host.shape,
                "typestr": self.host.dtype.str, "strides": None, "version": 3}

        def numpy(self) -> np.ndarray:
            driver.cuCtxSynchronize()
            driver.cuMemcpyDtoH(self.host.ctypes.data, self.pointer, self.host.nbytes)
            return self.host

    device = driver.cuDeviceGet(0)[1]
    context = driver.cuDevicePrimaryCtxRetain(device)[1]
    driver.cuCtxSetCurrent(context)
    rng = np.random.default_rng(0)
    call = cublas_backend.GemmCall("f", 3, lhs=1, rhs=0, bias=2, transposed_rhs=True,
                                   epilogue="relu_bias")
    w, x, b = (rng.standard_normal(s).astype("float32") for s in ((2, 5, 4), (2, 3, 4), (5,)))
    want = np.zeros((2, 3, 5), "float32")
    cublas_runtime.gemm_function(call, host_gemm, cublas_runtime.host_operand)(w, x, b, want)
    args = [DeviceArray(a) for a in (w, x, b, np.zeros((2, 3, 5), "float32"))]
    tvm.get_global_func("runtime.cublas.gemm")(call)(*args)
    np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-4, atol=1e-4)


def test_compiled_seed_calls_the_packed_functions(cublas_on_host: None) -> None:
    """The VM calls RunCodegen's functions by name (``f(*inputs, out)``; the module's own, which
    its external modules hold), as it will on CUDA with device tensors."""
    mod = relax.transform.RunCodegen()(partition_for_cublas(load("seed000")))
    calls: list = []
    vm = relax.VirtualMachine(tvm.compile(counting_offloaded_calls(mod, calls), target="llvm"), tvm.cpu())
    x, w1, b1, w2 = random_args(mod["forward"], 5)
    got = vm["forward"](*[tvm.nd.array(a) for a in (x, w1, b1, w2)]).numpy()
    np.testing.assert_allclose(got, np.maximum(x @ w1.T + b1, 0) @ w2.T, rtol=1e-4, atol=1e-5)
    assert sorted(calls) == sorted(s for m in mod.attrs["external_mods"] for s in m.functions)
