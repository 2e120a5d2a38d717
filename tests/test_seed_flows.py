"""The seeds' CPU flows end to end, written as the seeds write them with ``import tvms as tvm``:
seed 004's MLP deployment, TE examples and matmul build; seed 002's MyModule build, schedules,
random search and parameter-bound mixture module; seed 003's legalized, fused and rewritten
MLP (its ReluToGelu pass from examples/relu_to_gelu.py). Every result is compared with numpy."""
from __future__ import annotations

from math import erf

import numpy as np
import pytest
from conftest import FIXTURES, load_example

import tvms as tvm
from tvms import IRModule, relax, te
from tvms.relax.frontend import nn
from tvms.script import tir as T

RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.random(shape, dtype=np.float32)


def mlp_numpy(x: np.ndarray, w0: np.ndarray, b0: np.ndarray, w1: np.ndarray, b1: np.ndarray,
              act=lambda h: np.maximum(h, 0)) -> np.ndarray:
    return act(x @ w0.T + b0) @ w1.T + b1


def assert_mlp(out: tvm.nd.Tensor, x: np.ndarray, params: list, **kw) -> None:
    params = [p.numpy() if isinstance(p, tvm.nd.Tensor) else p for p in params]
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, *params, **kw), rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------------------------- seed 004

class MLPModel(nn.Module):  # as written in seed 004
    def __init__(self):
        super(MLPModel, self).__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


def test_seed004_mlp_cpu_deployment() -> None:
    mod, param_spec = MLPModel().export_tvm(
        spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}
    )
    mod = relax.get_pipeline("zero")(mod)
    target = tvm.target.Target("llvm")
    device = tvm.cpu()
    ex = relax.build(mod, target)
    vm = relax.VirtualMachine(ex, device)
    params = []
    for _, param_info in param_spec:
        param_np = np.random.rand(*param_info.shape).astype("float32")
        params.append(tvm.nd.array(param_np, device=device))
    data = np.random.rand(1, 784).astype("float32")
    tvm_data = tvm.nd.array(data, device=device)
    out = vm["forward"](tvm_data, *params)
    assert out.shape == (1, 10)
    assert_mlp(out, data, params)


def relax_expression_mlp() -> relax.Function:
    """Seed 004's MLP built from Relax expressions."""
    x = relax.Var("x", relax.TensorStructInfo([1, 784], "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo([256, 784], "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo([256], "float32"))
    w2 = relax.Var("w2", relax.TensorStructInfo([10, 256], "float32"))
    b2 = relax.Var("b2", relax.TensorStructInfo([10], "float32"))
    hidden = relax.op.add(relax.op.matmul(x, relax.op.permute_dims(w1)), b1)
    hidden = relax.op.nn.relu(hidden)
    output = relax.op.add(relax.op.matmul(hidden, relax.op.permute_dims(w2)), b2)
    return relax.Function([x, w1, b1, w2, b2], output,
                          ret_struct_info=relax.TensorStructInfo([1, 10], "float32"))


def run_relax_expression_mlp(mod: IRModule) -> None:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x, params = rand(1, 784), [rand(256, 784), rand(256), rand(10, 256), rand(10)]
    assert_mlp(vm["main"](x, *params), x, params)


def test_seed004_relax_expression_mlp_runs_as_a_public_function() -> None:
    # the seed only shows this module; as a public function it also compiles and runs
    run_relax_expression_mlp(tvm.IRModule.from_expr(relax_expression_mlp().with_attr("global_symbol", "main")))


def test_seed004_relax_expression_mlp_from_expr_compiles() -> None:
    run_relax_expression_mlp(tvm.IRModule.from_expr(relax_expression_mlp()))


def test_seed004_te_add_one() -> None:
    n = 10
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    func = te.create_prim_func([A, B])
    mod = tvm.build(func, target="llvm")
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.arange(n).astype("float32"), dev)
    b = tvm.nd.array(np.zeros(n, dtype="float32"), dev)
    mod(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(n, dtype="float32") + 1)


def test_seed004_te_matmul_split_on_cpu() -> None:
    # the seed binds the split loops to CUDA threads; on the CPU the split schedule runs as loops
    n = 16
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
    cpu_mod = tvm.build(sch.mod, target="llvm")
    a_np, b_np = rand(n, n), rand(n, n)
    a, b = tvm.nd.array(a_np), tvm.nd.array(b_np)
    c = tvm.nd.array(np.zeros((n, n), "float32"))
    cpu_mod(a, b, c)
    np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-5)


@T.prim_func(private=True)
def matmul(a: T.handle, b: T.handle, c: T.handle) -> None:  # seed 004's meta-schedule input
    A = T.match_buffer(a, (128, 128), "float32")
    B = T.match_buffer(b, (128, 128), "float32")
    C = T.match_buffer(c, (128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def test_seed004_matmul_build_and_time_without_tuning() -> None:
    target = tvm.target.Target("llvm -num-cores=4")
    with tvm.transform.PassContext(opt_level=3):
        rt = tvm.build(matmul, target=target)
    a_np = np.random.uniform(size=(128, 128)).astype(np.float32)
    b_np = np.random.uniform(size=(128, 128)).astype(np.float32)
    c_np = a_np.dot(b_np.transpose())
    dev = tvm.cpu()
    a = tvm.nd.array(a_np, device=dev)
    b = tvm.nd.array(b_np, device=dev)
    c = tvm.nd.array(np.zeros((128, 128), dtype="float32"), device=dev)
    f_timer = rt.time_evaluator("main", dev, number=10)
    assert f_timer(a, b, c).mean > 0
    np.testing.assert_allclose(c.numpy(), c_np, rtol=1e-5)


# ----------------------------------------------------------------------------- seed 002

@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def main(
        A: T.Buffer[(128, 128), "float32"],
        B: T.Buffer[(128, 128), "float32"],
        C: T.Buffer[(128, 128), "float32"],
    ):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def schedule_mm(sch: tvm.tir.Schedule, jfactor=4):
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_0, j_1 = sch.split(loop=j, factors=[None, jfactor])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def stochastic_schedule_mm(sch: tvm.tir.Schedule):
    block_C = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block=block_C)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


@pytest.fixture(scope="module")
def mm_data() -> tuple:
    dtype = "float32"
    a_np = np.random.rand(128, 128).astype(dtype)
    b_np = np.random.rand(128, 128).astype(dtype)
    c_mm = a_np @ b_np
    a_nd = tvm.nd.array(a_np)
    b_nd = tvm.nd.array(b_np)
    c_nd = tvm.nd.empty((128, 128), dtype="float32")
    return a_nd, b_nd, c_nd, c_mm


def timed_matmul(lib, mm_data: tuple) -> float:
    """Seed 002's timing of a built matmul; the product it leaves in C must be right."""
    a_nd, b_nd, c_nd, c_mm = mm_data
    c_nd.copyfrom(np.zeros((128, 128), "float32"))
    f_timer = lib.time_evaluator("main", tvm.cpu())
    mean = f_timer(a_nd, b_nd, c_nd).mean
    np.testing.assert_allclose(c_nd.numpy(), c_mm, rtol=1e-5)
    return mean


def test_seed002_mymodule_build_and_time_evaluator(mm_data: tuple) -> None:
    lib = tvm.build(MyModule, target="llvm")
    assert timed_matmul(lib, mm_data) > 0


def test_seed002_schedule_mm_build_and_time_evaluator(mm_data: tuple) -> None:
    sch = tvm.tir.Schedule(MyModule)
    sch = schedule_mm(sch)
    lib = tvm.build(sch.mod, target="llvm")
    assert timed_matmul(lib, mm_data) > 0


def test_seed002_random_search(mm_data: tuple) -> None:
    def random_search(mod: tvm.IRModule, num_trials=3):
        best_result = None
        best_sch = None
        for i in range(num_trials):
            sch = stochastic_schedule_mm(tvm.tir.Schedule(mod))
            lib = tvm.build(sch.mod, target="llvm")
            result = timed_matmul(lib, mm_data)
            if best_result is None or result < best_result:
                best_result = result
                best_sch = sch
        return best_sch

    sch = random_search(MyModule)
    assert "sample_perfect_tile" in str(sch.trace)
    assert timed_matmul(tvm.build(sch.mod, target="llvm"), mm_data) > 0


def test_seed002_mixture_with_a_replaced_linear0() -> None:
    # seed 002 replaces linear0 with its tuned version; here a hand-scheduled one stands in for
    # meta_schedule's result, put back the seed's way (get_global_var + update_func)
    @tvm.register_func("env.linear", override=True)
    def numpy_linear(x, w, b, out):
        np.add(np.from_dlpack(x) @ np.from_dlpack(w).T, np.from_dlpack(b), out=np.from_dlpack(out))

    @tvm.register_func("env.relu", override=True)
    def numpy_relu(x, out):
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    MyModuleMixture = tvm.script.from_source(
        (FIXTURES / "seeds_relax" / "input" / "seed002_mymodule_mixture.tvms").read_text())
    x, params = rand(1, 784), [rand(128, 784), rand(128), rand(10, 128), rand(10)]
    nd_params = {k: tvm.nd.array(v) for k, v in zip(("w0", "b0", "w1", "b1"), params)}
    data_nd = tvm.nd.array(x)

    mod_linear = tvm.IRModule.from_expr(MyModuleMixture["linear0"].with_attr("global_symbol", "main"))
    sch = tvm.tir.Schedule(mod_linear)
    block_Y = sch.get_block("Y", "main")
    i, j, k = sch.get_loops(block=block_Y)
    j_0, j_1 = sch.split(loop=j, factors=[None, 16])
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_Y, k)

    MyModuleWithParams2 = relax.transform.BindParams("main", nd_params)(MyModuleMixture)
    new_func = sch.mod["main"].with_attr("global_symbol", "linear0")
    gv = MyModuleWithParams2.get_global_var("linear0")
    MyModuleWithParams2.update_func(gv, new_func)
    assert MyModuleWithParams2["linear0"] is new_func

    ex = relax.vm.build(MyModuleWithParams2, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    nd_res = vm["main"](data_nd)
    assert_mlp(nd_res, x, params)
    assert np.argmax(nd_res.numpy(), axis=1)[0] == np.argmax(mlp_numpy(x, *params), axis=1)[0]
    ftimer = vm.module.time_evaluator("main", tvm.cpu(), number=50)
    assert ftimer(data_nd).mean > 0


def test_seed002_mixture_written_in_python_with_R() -> None:
    """Seed 002's mixture module as a Python class (with today's spelling of its annotations)."""
    from tvms.script import ir as I, relax as R, tir as T

    @tvm.register_func("env.relu", override=True)
    def numpy_relu(x, out):
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    @I.ir_module
    class MyModuleMixture:
        @T.prim_func
        def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                    B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
            T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
            Y = T.alloc_buffer((1, 128), "float32")
            for i, j, k in T.grid(1, 128, 784):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
            for i, j in T.grid(1, 128):
                with T.block("Z"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Z[vi, vj] = Y[vi, vj] + B[vj]

        @R.function
        def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"),
                 b0: R.Tensor((128,), "float32")):
            cls = MyModuleMixture
            with R.dataflow():
                lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32"))
                out = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((1, 128), "float32"))
                R.output(out)
            return out

    x, w0, b0 = rand(1, 784), rand(128, 784), rand(128)
    vm = relax.VirtualMachine(relax.build(MyModuleMixture, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.nd.array(x), tvm.nd.array(w0), tvm.nd.array(b0)).numpy()
    np.testing.assert_allclose(got, np.maximum(x @ w0.T + b0, 0), rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- seed 003

class NNModule(nn.Module):  # as written in seed 003
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


@pytest.fixture(scope="module")
def origin_mod() -> IRModule:
    origin_mod, params = NNModule().export_tvm(
        {"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}}
    )
    return origin_mod


def run_mlp(mod: IRModule, n: int, **kw) -> None:
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
    x, params = rand(n, 784), [rand(128, 784), rand(128), rand(10, 128), rand(10)]
    assert_mlp(vm["forward"](x, *params), x, params, **kw)


@pytest.mark.parametrize("n", [1, 5])
def test_seed003_fused_module_on_cpu(origin_mod: IRModule, n: int) -> None:
    mod = tvm.relax.transform.LegalizeOps()(origin_mod)
    mod = tvm.ir.transform.Sequential(
        [
            tvm.relax.transform.AnnotateTIROpPattern(),
            tvm.relax.transform.FuseOps(),
            tvm.relax.transform.FuseTIR(),
        ]
    )(mod)
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == [
        "forward", "fused_matmul1_add1", "fused_matmul_add_relu", "transpose", "transpose1"]
    run_mlp(mod, n)


def test_seed003_relu_to_gelu_module_on_cpu(origin_mod: IRModule) -> None:
    ReluToGelu = load_example("relu_to_gelu.py").ReluToGelu  # seed 003's pass, word for word
    mod = ReluToGelu()(origin_mod)
    gelu = np.vectorize(lambda h: 0.5 * h * (1 + erf(h / np.sqrt(2))), otypes=[np.float32])
    run_mlp(relax.get_pipeline("zero")(mod), 3, act=gelu)
