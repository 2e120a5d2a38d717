"""The seeds' GPU flows, written as the seeds write them with ``import tvms as tvm``: seed 004's MLP
with DLight's GPU rules, its manual thread binding of every block, and its TE matmul bound to
blocks and threads; seed 000's cuBLAS dispatch and DLight compile. Without a GPU each flow is
compiled for cuda (every kernel through NVRTC) and its kernels run on the reference executor
with GPU semantics, compared with numpy; on a machine with a GPU the same flows run on it. So
does benchmarks/gpu.py's float16 matmul, on tensor cores through dynamic shared memory."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from cuda_support import assert_compiles
from test_seed_flows import MLPModel  # (as written in seed 004)

import tvms as tvm
from tvms import dlight as dl
from tvms import relax, te, tir
from tvms.relax.frontend import nn
from tvms.runtime.cuda_module import ReferenceLauncher
from tvms.runtime.vm import Executable

needs_gpu = pytest.mark.skipif(not tvm.cuda(0).exist, reason="needs a CUDA GPU")
TARGET = "cuda -arch=sm_80"
RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.random(shape, dtype=np.float32)


def exported_mlp() -> tuple[tvm.IRModule, list]:
    mod, param_spec = MLPModel().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    return relax.get_pipeline("zero")(mod), param_spec


def on_reference(ex: Executable) -> relax.VirtualMachine:
    """A VM on the host whose kernels (compiled for cuda) run on the reference executor."""
    return relax.VirtualMachine(Executable(ex.program, ex.kernels().with_launcher(ReferenceLauncher())), tvm.cpu())


def mlp_inputs(param_spec: list) -> tuple[np.ndarray, list, np.ndarray]:
    params = [rand(*info.shape) for _, info in param_spec]
    x = rand(1, 784)
    w0, b0, w1, b1 = params
    return x, params, np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def with_dlight_gpu(mod: tvm.IRModule) -> tvm.IRModule:
    with tvm.target.Target(TARGET):
        return dl.ApplyDefaultSchedule(  # as seed 004 lists them
            dl.gpu.Matmul(),
            dl.gpu.GEMV(),
            dl.gpu.Reduction(),
            dl.gpu.GeneralReduction(),
            dl.gpu.Fallback(),
        )(mod)


def bind_every_block(mod: tvm.IRModule) -> tvm.IRModule:
    """Seed 004's manual binding: each block's first loop to blockIdx.x, its second to threadIdx.x."""
    new_mod = tvm.IRModule()
    for gv, func in mod.functions.items():
        if not isinstance(func, tir.PrimFunc):
            new_mod[gv] = func
            continue
        sch = tir.Schedule(func)
        root = sch.get_block("root")
        for block in sch.get_child_blocks(root):
            loops = sch.get_loops(block)
            if len(loops) >= 1:
                sch.bind(loops[0], "blockIdx.x")
            if len(loops) >= 2:
                sch.bind(loops[1], "threadIdx.x")
        new_mod[gv] = sch.mod["main"]
    return new_mod


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [with_dlight_gpu, bind_every_block], ids=["dlight", "manual-binding"])
def test_seed004_mlp_on_cuda(schedule) -> None:
    mod, param_spec = exported_mlp()
    ex = relax.build(schedule(mod), tvm.target.Target(TARGET))
    source = ex.kernels().imported_modules[0].get_source()
    assert "__global__" in source
    if schedule is with_dlight_gpu:  # (kernels named after their functions, as TVM names them)
        names = re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", source)
        assert "fused_matmul_add_relu_kernel" in names and "transpose_kernel" in names
        assert all(names.count(name) == 2 for name in names)  # (a declaration and the definition)
        assert_compiles(source)  # (the module's source as one unit, as get_source shows it)
    x, params, expected = mlp_inputs(param_spec)
    out = on_reference(ex)["forward"](x, *params)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)


def seed004_te_matmul_schedule(n: int) -> tir.Schedule:
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = te.create_prim_func([A, B, C])
    mod = tvm.IRModule({"main": func})
    sch = tvm.tir.Schedule(mod)
    block = sch.get_block("C", func_name="main")
    loops = sch.get_loops(block)
    i, j = loops[:2]
    io, ii = sch.split(i, factors=[None, 4])
    jo, ji = sch.split(j, factors=[None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(jo, "blockIdx.y")
    sch.bind(ii, "threadIdx.x")
    sch.bind(ji, "threadIdx.y")
    return sch


def test_seed004_te_matmul_bound_to_threads() -> None:
    n = 16
    cuda_mod = tvm.build(seed004_te_matmul_schedule(n).mod, target=tvm.target.Target(TARGET))
    source = cuda_mod.imported_modules[0].get_source()
    assert "__launch_bounds__(16)" in source and "blockIdx.y" in source
    a, b = rand(n, n), rand(n, n)
    c = np.zeros((n, n), "float32")
    cuda_mod.with_launcher(ReferenceLauncher())(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_seed000_cublas_dispatch_then_dlight_for_the_rest() -> None:
    """Seed 000's GPU flow: the matmul + bias + relu offloaded to cuBLAS (partitioned and
    annotated; RunCodegen needs the cuBLAS library), the rest legalized and given DLight's GPU
    schedules, each of which compiles for cuda."""
    import tvms.relax.backend.cuda.cublas as _cublas  # noqa: F401  (registers the patterns, as the seed does)
    from tvms.ir import relax as rx
    from tvms.relax.backend import get_pattern

    mod, _ = MLPModel().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    patterns = [get_pattern("cublas.matmul_transposed_bias_relu")]
    mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=True)(mod)
    offloaded = [k for k in mod if isinstance(mod[k], rx.Function) and mod[k].attrs.get("Codegen") == "cublas"]
    assert len(offloaded) == 1
    rest = with_dlight_gpu(relax.get_pipeline("zero")(mod))
    kernels = tvm.IRModule({k: rest[k] for k in rest if isinstance(rest[k], tir.PrimFunc)})
    assert kernels.functions and all(dl.is_scheduled(kernels[k]) for k in kernels)
    tvm.build(kernels, target=tvm.target.Target(TARGET))  # (every kernel through NVRTC)


FP16_MATMULS = """@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((128, 128), dtype="float16"), b: R.Tensor((128, 128), dtype="float16")) -> R.Tensor((128, 128), dtype="float16"):
        with R.dataflow():
            c = R.matmul(a, b)
            R.output(c)
        return c

    @R.function
    def rows(a: R.Tensor(("m", 128), dtype="float16"), b: R.Tensor((128, 256), dtype="float16")) -> R.Tensor(("m", 256), dtype="float32"):
        m = T.int64()
        with R.dataflow():
            c = R.matmul(a, b, out_dtype="float32")
            R.output(c)
        return c
"""


@pytest.mark.slow
def test_fp16_matmuls_on_tensor_cores_through_dynamic_shared_memory() -> None:
    """benchmarks/gpu.py's float16 DLight row, smaller (``main``), and a float16 matmul into
    float32 of symbolic rows (``rows``, run on 40: padded): R.matmul through tvm.compile for sm_80
    (legalized, DLight's default GPU rules) gets the WMMA schedule, its tiles in dynamic shared
    memory; the host launches each kernel with the bytes it allocates (72 KiB each, as TVM's lowering
    of this schedule: a device grants it on the driver's opt-in), which the reference launcher checks, and the VM
    computes what numpy computes (``main`` in float16 sums of 16 products at a time)."""
    ex = tvm.compile(tvm.script.from_source(FP16_MATMULS), target=TARGET)
    source = ex.kernels().imported_modules[0].get_source()
    # (4 mma_sync per kernel, as in TVM's source of this schedule, fixtures/cuda_codegen/dlight_matmul_f16.cu:
    # the k loop software-pipelined at two levels, each with its epilogue)
    assert source.count("nvcuda::wmma::mma_sync(") == 8 and source.count("extern __shared__") == 2
    launches = []

    class Recording(ReferenceLauncher):
        def launch(self, kernel, values, dims) -> None:
            launches.append((kernel, values, dims))
            super().launch(kernel, values, dims)

    vm = relax.VirtualMachine(Executable(ex.program, ex.kernels().with_launcher(Recording())), tvm.cpu())
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype(np.float16) for _ in range(2))
    np.testing.assert_allclose(vm["main"](a, b).numpy(), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=5e-2)
    a, b = rng.standard_normal((40, 128)).astype(np.float16), rng.standard_normal((128, 256)).astype(np.float16)
    np.testing.assert_allclose(vm["rows"](a, b).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    # (A and B tiles of 128 x 72 float16, double-buffered by the software pipeline: 2 x 2 x 18432
    # bytes; the write-back, float16 or float32, reuses their bytes)
    assert [dims.shared_bytes for _, _, dims in launches] == [73728, 73728]
    kernel, values, dims = launches[0]
    with pytest.raises(tvm.TVMSError, match="launches it with 0 bytes of dynamic shared memory, the kernel allocates 73728"):
        ReferenceLauncher().launch(kernel, values, dataclasses.replace(dims, shared_bytes=0))


@needs_gpu
def test_seed004_flows_on_the_gpu() -> None:
    target, device = tvm.target.Target("cuda"), tvm.cuda()
    mod, param_spec = exported_mlp()
    ex = relax.build(with_dlight_gpu(mod), target)
    vm = relax.VirtualMachine(ex, device)
    x, params, expected = mlp_inputs(param_spec)
    out = vm["forward"](tvm.nd.array(x, device=device), *(tvm.nd.array(p, device=device) for p in params))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)
    n = 16
    cuda_mod = tvm.build(seed004_te_matmul_schedule(n).mod, target=target)
    a_np, b_np = np.ones((n, n), "float32"), np.ones((n, n), "float32")
    a, b, c = (tvm.nd.array(v, device=device) for v in (a_np, b_np, b_np))
    cuda_mod(a, b, c)
    np.testing.assert_allclose(c.numpy(), a_np @ b_np)


@needs_gpu
@pytest.mark.skipif(tvm.get_global_func("relax.ext.cublas", True) is None, reason="needs the cuBLAS library")
def test_seed000_flow_with_cublas_on_the_gpu() -> None:
    """Seed 000 end to end on the GPU: matmul + bias + relu offloaded to cuBLAS (partitioned,
    then RunCodegen), the rest legalized with DLight's schedules, compiled for the GPU present
    and run against numpy."""
    import tvms.relax.backend.cuda.cublas as _cublas  # noqa: F401  (registers the patterns)
    from tvms.relax.backend import get_pattern

    mod, param_spec = MLPModel().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    mod = relax.transform.FuseOpsByPattern([get_pattern("cublas.matmul_transposed_bias_relu")],
                                           bind_constants=False, annotate_codegen=True)(mod)
    mod = relax.transform.RunCodegen()(mod)
    assert "cublas" in mod.script()
    device = tvm.cuda()
    with tvm.target.Target.from_device(device):
        mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                      dl.gpu.GeneralReduction(), dl.gpu.Fallback())(relax.get_pipeline("zero")(mod))
    vm = relax.VirtualMachine(relax.build(mod, tvm.target.Target.from_device(device)), device)
    x, params, expected = mlp_inputs(param_spec)
    out = vm["forward"](tvm.nd.array(x, device=device), *(tvm.nd.array(p, device=device) for p in params))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)


LARGE_MATMULS = """@I.ir_module
class Module:
    @R.function
    def f32(a: R.Tensor((2048, 512), dtype="float32"), b: R.Tensor((512, 2048), dtype="float32")) -> R.Tensor((2048, 2048), dtype="float32"):
        with R.dataflow():
            c = R.matmul(a, b)
            R.output(c)
        return c

    @R.function
    def f16(a: R.Tensor((2048, 256), dtype="float16"), b: R.Tensor((256, 2048), dtype="float16")) -> R.Tensor((2048, 2048), dtype="float16"):
        with R.dataflow():
            c = R.matmul(a, b)
            R.output(c)
        return c
"""


@needs_gpu
def test_large_matmuls_on_the_gpu() -> None:
    """tvms's plans for large matmuls (lowering/dlight/gpu_matmul_large.py: float32 in 64 x 128
    tiles, float16 in 64 x 64 warp tiles with B staged as stored) on the GPU present, against
    numpy, on small integers (exact sums in both types)."""
    device = tvm.cuda()
    ex = tvm.compile(tvm.script.from_source(LARGE_MATMULS), target=tvm.target.Target.from_device(device))
    source = ex.kernels().imported_modules[0].get_source()
    if float(device.compute_version) >= 7.0:  # (the plans taken: 128 threads for float32, 8 warps for float16)
        assert "__launch_bounds__(256)" in source and "__launch_bounds__(128)" in source
        assert "matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major>" in source
    vm = relax.VirtualMachine(ex, device)
    rng = np.random.default_rng(0)
    for name, dtype, k, high in (("f32", "float32", 512, 4), ("f16", "float16", 256, 3)):
        a = rng.integers(1 - high, high, (2048, k)).astype(dtype)
        b = rng.integers(1 - high, high, (k, 2048)).astype(dtype)
        out = vm[name](tvm.nd.array(a, device=device), tvm.nd.array(b, device=device)).numpy()
        np.testing.assert_array_equal(out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), err_msg=name)
