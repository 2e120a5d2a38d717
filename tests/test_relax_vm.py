"""The Relax VM on the CPU: ``tvms.compile`` / ``relax.build``, ``VirtualMachine``, memory reuse,
packed functions, targets, and clear errors. Results are checked against numpy and against the
reference executor (``run_relax``)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS_COPY, FIXTURES

import tvms as tvm
from tvms import TVMSError, relax
from tvms.relax.backend import get_patterns_with_prefix
from tvms.lowering.relax import cpu_blas  # noqa: F401  (registers the cpu_blas patterns and codegen)
from tvms.runtime.reference_relax import run_relax
from tvms.ir.vm_program import deserialize, serialize
from tvms.runtime.vm import Executable
from tvms.script import from_source
from tvms.ir.structural import structural_equal

RNG = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-4}


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def mlp_params(hidden: int) -> list[np.ndarray]:
    return [rand(hidden, 784), rand(hidden), rand(10, hidden), rand(10)]


def mlp_numpy(x: np.ndarray, w0: np.ndarray, b0: np.ndarray, w1: np.ndarray, b1: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


@pytest.fixture(scope="module", params=["compiled", "bytecode"])
def corpus_mlp(request) -> tuple:
    mod = from_source((CORPUS_COPY / "mlp_bias_dyn_01_exported.tvms").read_text())
    ex = tvm.compile(mod, target="llvm", exec_mode=request.param)
    assert ("forward" in ex.stats()["native"]) == (request.param == "compiled")
    return mod, ex


@pytest.mark.parametrize("n", [1, 64])
def test_corpus_mlp_dynamic_batch(corpus_mlp: tuple, n: int) -> None:
    mod, ex = corpus_mlp
    assert isinstance(ex, Executable)
    # FuseTransposeMatmul and the zero pipeline ran: only calls of the compiled kernels remain,
    # each layer's weight packing split off (run once per weight set)
    assert sorted(ex.kernels().functions) == ["fused_NT_matmul1_add1_prepacked", "fused_NT_matmul1_add1_weight_prepack",
                                              "fused_NT_matmul_add_relu_prepacked",
                                              "fused_NT_matmul_add_relu_weight_prepack"]
    vm = relax.VirtualMachine(ex, tvm.cpu())
    x, params = rand(n, 784), mlp_params(256)
    out = vm["forward"](tvm.nd.array(x), *params)  # a Tensor and numpy arrays mixed
    assert isinstance(out, tvm.nd.Tensor) and out.shape == (n, 10) and out.dtype == "float32"
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, *params), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.numpy(), run_relax(mod, "forward", x, *params), rtol=1e-3, atol=1e-3)


def test_seed003_fused_module() -> None:
    mod = from_source((FIXTURES / "seeds_relax" / "seed003_mixed_fused.tvms").read_text())
    ex = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    for n in (3, 5):
        x, params = rand(n, 784), mlp_params(128)
        np.testing.assert_allclose(vm["forward"](x, *params).numpy(), mlp_numpy(x, *params),
                                   rtol=1e-3, atol=1e-3)


def test_seed002_mixture_with_environment_functions() -> None:
    # seed 002's MyModuleMixture as written (old R.call_tir("env.relu", ...) syntax): packed
    # functions in destination-passing style, reading their arguments through DLPack
    @tvm.register_func("env.linear", override=True)
    def linear(x, w, b, out) -> None:
        np.matmul(np.from_dlpack(x), np.from_dlpack(w).T, out=np.from_dlpack(out))
        np.add(np.from_dlpack(out), np.from_dlpack(b), out=np.from_dlpack(out))

    @tvm.register_func("env.relu", override=True)
    def relu(x, out) -> None:
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    x, params = rand(1, 784), mlp_params(128)
    bound = relax.transform.BindParams("main", {k: tvm.nd.array(v) for k, v in
                                                zip(("w0", "b0", "w1", "b1"), params)})(
        from_source((FIXTURES / "seeds_relax" / "input" / "seed002_mymodule_mixture.tvms").read_text()))
    vm = relax.VirtualMachine(relax.vm.build(bound, target="llvm"), tvm.cpu())  # (the seed's old name)
    np.testing.assert_allclose(vm["main"](tvm.nd.array(x)).numpy(), mlp_numpy(x, *params), rtol=1e-3, atol=1e-3)
    timing = vm.module.time_evaluator("main", tvm.cpu(), number=3, repeat=2)(tvm.nd.array(x))
    assert len(timing.results) == 2 and 0 < timing.mean < 1


def test_cpu_blas_dispatch_then_vm(corpus_mlp: tuple) -> None:
    mod, _ = corpus_mlp
    patterns = get_patterns_with_prefix("cpu_blas")
    annotated = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
    with pytest.raises(TVMSError, match=r"marked for the 'cpu_blas' backend \(Codegen\); run "
                                        r"relax.transform.RunCodegen\(\) on the module before compiling"):
        tvm.compile(annotated, target="llvm")  # (legalized, it would not run on the library asked for)
    offloaded = relax.transform.RunCodegen()(annotated)
    ex = tvm.compile(offloaded, target="llvm")
    in_pipeline = tvm.transform.Sequential([relax.transform.RunCodegen(), relax.get_pipeline("zero")])
    assert tvm.compile(annotated, target="llvm", relax_pipeline=in_pipeline).as_text() == ex.as_text()
    # both matmul + bias (+ relu) chains went to cpu_blas: the VM calls them as packed functions
    assert "fused_matmul_add_relu" not in ex.kernels().functions
    assert "call packed fused_relax_permute_dims_relax_matmul_relax_add_cpu_blas(" in ex.as_text()
    x, params = rand(4, 784), mlp_params(256)
    out = relax.VirtualMachine(ex, tvm.cpu())["forward"](x, *params)
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, *params), rtol=1e-3, atol=1e-3)


CALL_PACKED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), dtype="float32"), flag: R.Tensor((), dtype="bool")):
        n = T.int64()
        y = R.call_packed("test_vm.double", x, sinfo_args=(R.Tensor((n,), dtype="float32"),))
        if flag:
            z = R.add(y, y)
        else:
            z = R.multiply(y, y)
        t = (z, y)
        w = R.match_cast(t[0], R.Tensor((n,), dtype="float32"))
        return (w, t[1])
'''


def test_call_packed_tuples_if_and_match_cast() -> None:
    tvm.register_func("test_vm.double", lambda x: tvm.nd.array(x.numpy() * 2), override=True)
    mod = from_source(CALL_PACKED)
    vm = relax.VirtualMachine(tvm.compile(mod), tvm.cpu())
    x = rand(6)
    for flag in (True, False):
        w, y = vm["main"](x, np.array(flag))
        expect = 4 * x if flag else 4 * x * x
        np.testing.assert_allclose(w.numpy(), expect, **TOL)
        np.testing.assert_allclose(y.numpy(), 2 * x, **TOL)
        np.testing.assert_allclose(w.numpy(), run_relax(mod, "main", x, np.array(flag))[0], **TOL)


CLOSURE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        @R.function
        def inner(y: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
            z = R.add(x, y)
            return z
        a = inner(x)
        b = inner(a)
        return b
'''


def test_closure_capturing_a_parameter() -> None:
    mod = from_source(CLOSURE)
    x = rand(4)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), 3 * x, **TOL)
    np.testing.assert_allclose(vm["main"](x).numpy(), run_relax(mod, "main", x), **TOL)


def chain_module(length: int) -> str:
    calls = "\n".join(f"            a{i + 1} = R.call_tir(cls.add_one, (a{i},), "
                      f"out_sinfo=R.Tensor((n, 16), dtype=\"float32\"))" for i in range(length))
    return f'''
@I.ir_module
class Module:
    @T.prim_func
    def add_one(p_a: T.handle, p_b: T.handle):
        n = T.int64()
        A = T.match_buffer(p_a, (n, T.int64(16)))
        B = T.match_buffer(p_b, (n, T.int64(16)))
        for i, j in T.grid(n, T.int64(16)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @R.function
    def main(a0: R.Tensor(("n", 16), dtype="float32")) -> R.Tensor(("n", 16), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
{calls}
            R.output(a{length})
        return a{length}
'''


def test_memory_reuse_in_a_chain_of_ten_elementwise_kernels() -> None:
    ex = tvm.compile(from_source(chain_module(10)), target="llvm", exec_mode="bytecode")  # (its pool)
    assert list(ex.kernels().functions) == ["add_one"]
    vm = relax.VirtualMachine(ex, tvm.cpu())
    x = rand(3, 16)
    out = vm["main"](x)
    np.testing.assert_allclose(out.numpy(), x + 10, **TOL)
    # nine intermediates ping-pong between two pooled buffers; the result is its own buffer
    assert vm.memory_stats() == {"pooled": 2, "reused": 7, "unpooled": 1}
    out2 = vm["main"](x)  # a second call reuses the pool: no new intermediate buffer
    assert vm.memory_stats() == {"pooled": 2, "reused": 16, "unpooled": 2}
    # results are never pool buffers: the first result survives the second call
    np.testing.assert_allclose(out.numpy(), x + 10, **TOL)
    assert not np.shares_memory(out.array, out2.array)
    vm["main"](rand(5, 16))  # another batch size: buffers of another size
    assert vm.memory_stats()["pooled"] == 4


INPLACE_TUPLES = """
@I.ir_module
class Module:
    @T.prim_func
    def ex(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
        for i in range(8):
            y[i] = T.exp(x[i])

    @T.prim_func
    def scale_both(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
        for i in range(8):
            a[i] = a[i] * T.float32(2)
            b[i] = b[i] * T.float32(3)

    @T.prim_func
    def scale_and_keep(a: T.Buffer((8,), "float32"), kept: T.Buffer((8,), "float32")):
        for i in range(8):
            kept[i] = a[i]
            a[i] = a[i] * T.float32(4)

    @T.prim_func
    def add(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32"), c: T.Buffer((8,), "float32")):
        for i in range(8):
            c[i] = a[i] + b[i]

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        a = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        b = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        c = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        t = R.call_tir_inplace(cls.scale_both, (a, b), out_sinfo=[R.Tensor((8,), "float32"), R.Tensor((8,), "float32")], inplace_indices=[0, 1])
        u = R.call_tir_inplace(cls.scale_and_keep, (c,), out_sinfo=[R.Tensor((8,), "float32"), R.Tensor((8,), "float32")], inplace_indices=[0, -1])
        z = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        w = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        v = R.call_tir(cls.ex, (x,), out_sinfo=R.Tensor((8,), "float32"))
        t0 = t[0]
        t1 = t[1]
        u0 = u[0]
        s = R.call_tir(cls.add, (t0, t1), out_sinfo=R.Tensor((8,), "float32"))
        s = R.call_tir(cls.add, (s, u0), out_sinfo=R.Tensor((8,), "float32"))
        q = R.call_tir(cls.add, (z, w), out_sinfo=R.Tensor((8,), "float32"))
        q = R.call_tir(cls.add, (q, v), out_sinfo=R.Tensor((8,), "float32"))
        o = R.call_tir(cls.add, (s, q), out_sinfo=R.Tensor((8,), "float32"))
        return o
"""


@pytest.mark.parametrize("mode", ["bytecode", "compiled"])
def test_buffers_an_inplace_call_returns_in_a_tuple_stay_out_of_the_pool(mode: str) -> None:
    """(review) ``R.call_tir_inplace`` writing two inputs ([0, 1]) or one beside a fresh output
    ([0, -1]) returns a tuple holding the written buffers: the pool handed them to z, w, v while
    t[0], t[1], u[0] still pointed at them (4 e^x instead of 12 e^x)."""
    x = np.arange(8, dtype="float32") / 8
    vm = relax.VirtualMachine(tvm.compile(from_source(INPLACE_TUPLES), "llvm", exec_mode=mode), tvm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), 12 * np.exp(x), **TOL)


def test_target_with_num_cores_and_current_target() -> None:
    target = tvm.target.Target("llvm -num-cores=2")
    assert target.kind == "llvm" and target.num_cores == 2 and str(target) == "llvm -num-cores=2"
    assert tvm.target.Target.current() is None
    with target:
        assert tvm.target.Target.current() is target
        ex = tvm.compile(from_source(chain_module(2)))
        lib = tvm.build(from_source(chain_module(1))["add_one"])  # tvms.build reads it too
    assert lib.target == "llvm -num-cores=2"
    assert tvm.target.Target.current() is None
    assert ex.kernels().target == "llvm -num-cores=2"
    assert ex.kernels()["add_one"].compiled.target.threads == 2
    with pytest.raises(TVMSError, match="unknown target kind"):
        tvm.target.Target("llvmx")
    with pytest.raises(TVMSError, match="num-cores"):
        tvm.target.Target("llvm -num-cores=two")


def test_executable_parts_rebuild_the_executable(corpus_mlp: tuple) -> None:
    _, ex = corpus_mlp
    text = ex.as_text()
    assert text.startswith("function forward(") and "call kernel fused_NT_matmul_add_relu" in text
    again = Executable(deserialize(serialize(ex.program)), ex.kernels())
    assert again.as_text() == text
    x, params = rand(2, 784), mlp_params(256)
    first = relax.VirtualMachine(ex, tvm.cpu())["forward"](x, *params).numpy()
    np.testing.assert_array_equal(relax.VirtualMachine(again, tvm.cpu())["forward"](x, *params).numpy(), first)


def test_bad_calls_are_clear_errors(corpus_mlp: tuple) -> None:
    _, ex = corpus_mlp
    vm = relax.VirtualMachine(ex, tvm.cpu())
    x, params = rand(2, 784), mlp_params(256)
    with pytest.raises(TVMSError, match="takes 5 arguments"):
        vm["forward"](x, *params[:3])
    with pytest.raises(TVMSError, match="expected dtype float32, got float64"):
        vm["forward"](x.astype("float64"), *params)
    with pytest.raises(TVMSError, match="dimension 1 should be 784"):
        vm["forward"](rand(2, 783), *params)
    with pytest.raises(TVMSError, match="expected 2 dimensions"):
        vm["forward"](rand(784), *params)
    with pytest.raises(TVMSError, match="expected a tensor, a numpy array"):
        vm["forward"]("x", *params)
    with pytest.raises(TVMSError, match="no Relax function 'main'"):
        vm["main"]
    with pytest.raises(TVMSError, match="not on cuda"):
        relax.VirtualMachine(ex, tvm.cuda())
    with pytest.raises(TVMSError, match="takes an Executable"):
        relax.VirtualMachine(object(), tvm.cpu())
    with pytest.raises(TVMSError, match="no Relax function"):
        relax.build(from_source(chain_module(1))["add_one"])


def test_exported_executable_loads_and_runs(corpus_mlp: tuple, tmp_path) -> None:
    _, ex = corpus_mlp
    path = str(tmp_path / "mlp.so")
    ex.export_library(path)
    loaded = tvm.runtime.load_module(path)
    assert isinstance(loaded, Executable) and loaded.as_text() == ex.as_text()
    assert loaded.stats()["native"] == ex.stats()["native"]  # (the compiled VM's code is in the library)
    assert loaded.stats()["plans"] == ex.stats()["plans"]
    x, params = rand(3, 784), mlp_params(256)
    vm = relax.VirtualMachine(loaded, tvm.cpu())
    np.testing.assert_array_equal(vm["forward"](x, *params).numpy(),
                                  relax.VirtualMachine(ex, tvm.cpu())["forward"](x, *params).numpy())
    with pytest.raises(TVMSError, match="dimension 1 should be 784"):
        vm["forward"](rand(3, 783), *params)


def test_after_call_tir_rewrite_alloc_tensor_and_direct_kernel_calls() -> None:
    mod = relax.transform.CallTIRRewrite()(
        from_source((FIXTURES / "seeds_relax" / "seed003_mixed_fused.tvms").read_text()))
    text = mod.script()
    assert "R.builtin.alloc_tensor" in text and "R.call_tir" not in text
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x, params = rand(2, 784), mlp_params(128)
    np.testing.assert_allclose(vm["forward"](x, *params).numpy(), mlp_numpy(x, *params), rtol=1e-3, atol=1e-3)


LOOPS = '''
@I.ir_module
class Module:
    @R.function
    def count(n: R.Tensor((), dtype="int64"), acc: R.Tensor((), dtype="int64")) -> R.Tensor((), dtype="int64"):
        cls = Module
        c: R.Tensor((), dtype="bool") = R.greater(n, R.const(0, "int64"))
        if c:
            m: R.Tensor((), dtype="int64") = R.subtract(n, R.const(1, "int64"))
            a: R.Tensor((), dtype="int64") = R.add(acc, n)
            r: R.Tensor((), dtype="int64") = cls.count(m, a)
            gv: R.Tensor((), dtype="int64") = r
        else:
            gv: R.Tensor((), dtype="int64") = acc
        return gv

    @R.function
    def total(n: R.Tensor((), dtype="int64")) -> R.Tensor((), dtype="int64"):
        cls = Module
        c: R.Tensor((), dtype="bool") = R.greater(n, R.const(0, "int64"))
        if c:
            m: R.Tensor((), dtype="int64") = R.subtract(n, R.const(1, "int64"))
            r: R.Tensor((), dtype="int64") = cls.total(m)
            gv: R.Tensor((), dtype="int64") = R.add(r, n)
        else:
            gv: R.Tensor((), dtype="int64") = n
        return gv
'''


def test_a_self_tail_call_runs_as_a_loop_of_any_length():
    """``count`` calls itself last (a loop, as ONNX's Loop imports): a jump, so 40000 trips run
    (past the depth the VM follows); ``total`` uses its call's result, so it stays a call."""
    vm = relax.VirtualMachine(tvm.compile(from_source(LOOPS), "llvm"), tvm.cpu())
    count = vm["count"](np.array(40000, "int64"), np.array(0, "int64"))
    assert int(count.numpy()) == 40000 * 40001 // 2
    assert int(vm["total"](np.array(100, "int64")).numpy()) == 5050
    with pytest.raises(TVMSError, match="recursion too deep"):
        vm["total"](np.array(100000, "int64"))


def test_an_output_larger_than_the_memory_is_refused_before_allocating():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), dtype="float32"), s: R.Shape(["n"])) -> R.Tensor(dtype="float32", ndim=2):
        n = T.int64()
        gv: R.Tensor((n, n), dtype="float32") = R.broadcast_to(x, R.shape([n, n]))
        return gv
'''
    vm = relax.VirtualMachine(tvm.compile(from_source(src), "llvm"), tvm.cpu())
    np.testing.assert_array_equal(vm["main"](np.ones(1, "float32"), (3,)).numpy(), np.ones((3, 3), "float32"))
    with pytest.raises(TVMSError, match=r"a tensor of shape \(10000000, 10000000\) and dtype float32 would take "
                                        r"400000000000000 bytes, more than this machine's memory"):
        vm["main"](np.ones(1, "float32"), (10**7,))


def test_a_size_computed_with_if_then_else() -> None:
    """The size TVM gives R.strided_slice's result when the end is symbolic holds a
    T.if_then_else: the VM computes it (it had refused the size expression)."""
    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor(("extent",), dtype="float32")) -> R.Tensor(("T.min(T.max(T.if_then_else(extent < 1, extent * 2 - 1, extent - 1), 0), extent)",), dtype="float32"):
        extent = T.int64()
        output: R.Tensor((T.min(T.max(T.if_then_else(extent < 1, extent * 2 - 1, extent - 1), 0), extent),), dtype="float32") = R.strided_slice(A, (0,), (0,), (extent - 1,), assume_inbound=False)
        return output''')
    for mode in ("compiled", "bytecode"):
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm", exec_mode=mode), tvm.cpu())
        for n in (5, 1):
            a = np.arange(n, dtype="float32")
            np.testing.assert_array_equal(vm["main"](a).numpy(), a[:n - 1])
            np.testing.assert_array_equal(run_relax(mod, "main", a), a[:n - 1])


def test_a_size_divides_by_zero_only_where_computed() -> None:
    """A T.if_then_else size computes only the branch its condition chooses (the VM had computed
    both: a ZeroDivisionError for n = 0); a size that does divide by zero is a TVMSError naming it,
    in the VM and in the reference."""
    def module(size: str) -> tvm.IRModule:
        return from_source(f'''# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(s: R.Shape(["n"])):
        n = T.int64()
        gv = R.zeros(R.shape([{size}]), "float32")
        return gv''')
    guarded, unguarded = module("T.if_then_else(n == 0, 1, 12 // n)"), module("12 // n")
    vm = relax.VirtualMachine(tvm.compile(guarded, target="llvm"), tvm.cpu())
    for n, extent in ((3, 4), (0, 1)):
        assert vm["main"]((n,)).numpy().shape == (extent,)
        assert run_relax(guarded, "main", (n,)).shape == (extent,)
    vm = relax.VirtualMachine(tvm.compile(unguarded, target="llvm"), tvm.cpu())
    assert vm["main"]((3,)).numpy().shape == (4,)
    with pytest.raises(TVMSError, match=r"the size \(12 // n\) divides by zero \(n = 0\)"):
        vm["main"]((0,))
    with pytest.raises(TVMSError, match=r"the size 12 // n divides by zero \(n = 0\)"):
        run_relax(unguarded, "main", (0,))


def _strided_slice_module(stride: str, inbound: bool) -> tvm.IRModule:
    """main(A, B): A (10 x 6) sliced on axis 0 from b to e by ``stride``, sizes of B's shape."""
    return from_source(f'''# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((10, 6), dtype="float32"), B: R.Shape(["b", "e", "s"])):
        b = T.int64()
        e = T.int64()
        s = T.int64()
        gv = R.strided_slice(A, (0,), (b,), (e,), ({stride},), assume_inbound={inbound})
        return gv''')


@pytest.mark.parametrize("stride, inbound", [("s", False), ("s", True), ("s - 3", False)])
def test_strided_slice_by_a_stride_known_when_it_runs(stride: str, inbound: bool) -> None:
    """A symbolic stride divides the slice's length as TVM's GetLength divides it (the inferred
    length had been ``e - b`` whatever the stride, and every run with another stride failed its
    shape check): a size stride counts up, as TVM's analyzer takes sizes; an expression of
    unknown sign (``s - 3``) takes either way when it runs. In bounds, the text is TVM 0.27's."""
    mod = _strided_slice_module(stride, inbound)
    if inbound:  # (TVM 0.27's inference of this call)
        assert "R.Tensor(((e + s - b - 1) // s, 6)" in mod.script()
    assert structural_equal(from_source(mod.script()), mod)  # (a size of either way prints back)
    a = np.arange(60, dtype="float32").reshape(10, 6)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    cases = [(1, 7, 2), (0, 10, 1), (2, 9, 3), (0, 10, 4)] + ([] if inbound else [(-3, 10, 1), (-1, 20, 2)])
    if stride == "s - 3":
        cases = [(1, 7, 5), (7, 1, 1), (9, 0, 0), (-1, -11, 0), (0, 10, 4)]
    for b, e, s in cases:
        want = a[b:e:eval(stride)]
        np.testing.assert_array_equal(run_relax(mod, "main", a, (b, e, s)), want)
        np.testing.assert_array_equal(vm["main"](a, (b, e, s)).numpy(), want)


def test_tir_var_upper_bound_must_map_names_to_integers() -> None:
    """``"tir_var_upper_bound": {"n": [4]}`` (a list, where TVM takes an integer) is a clear error
    of the compiler (a TypeError had escaped it); ``{"n": 4}`` compiles and runs."""
    text = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, "n"), dtype="float32")) -> R.Tensor((2, "n"), dtype="float32"):
        R.func_attr({"tir_var_upper_bound": {"n": [4]}})
        y: R.Tensor((2, "n"), dtype="float32") = R.add(x, x)
        return y'''
    with pytest.raises(TVMSError, match=r"main: tir_var_upper_bound of 'n' must be an integer, got \(4,\)"):
        tvm.compile(from_source(text), target="llvm")
    vm = relax.VirtualMachine(tvm.compile(from_source(text.replace("[4]", "4")), target="llvm"), tvm.cpu())
    x = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(vm["main"](x).numpy(), x + x)


def test_call_tir_dyn_of_a_packed_function_by_name() -> None:
    """R.vm.call_tir_dyn(R.str("f"), (x, out, R.shape([m, n]))) calls the packed function f with
    the tensors and the sizes, in the VM and in the reference (an AttributeError had escaped the
    VM compiler)."""
    seen = []

    @tvm.register_func("test_vm.double_into", override=True)
    def double_into(x, out, m, n) -> None:
        seen.append((m, n))
        np.multiply(np.from_dlpack(x), 2, out=np.from_dlpack(out))

    mod = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor(("m", "n"), dtype="float32")) -> R.Tensor(("m", "n"), dtype="float32"):
        m = T.int64()
        n = T.int64()
        out: R.Tensor((m, n), dtype="float32") = R.builtin.alloc_tensor(R.shape([m, n]), R.dtype("float32"), R.prim_value(0), R.str("global"))
        R.vm.call_tir_dyn(R.str("test_vm.double_into"), (x, out, R.shape([m, n])))
        return out''')
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(vm["main"](x).numpy(), 2 * x)
    assert seen == [(2, 3)]
    # (the reference calls it as the VM does: it had looked the string up among the module's functions)
    np.testing.assert_array_equal(run_relax(mod, "main", x), 2 * x)
    assert seen == [(2, 3), (2, 3)]


SYMBOLIC_RESHAPE = '''# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32"), S: R.Shape(["a", "b"])):
        a = T.int64()
        b = T.int64()
        y = R.reshape(x, R.shape([a, b]))
        return y
'''


@pytest.mark.parametrize("shape", [(4, 3), (1, 2), (3, 2)])
def test_a_reshape_to_sizes_known_when_it_runs_checks_the_element_count(shape: tuple) -> None:
    """The legalized kernel had wrapped its indices around the smaller input (or left the larger
    output unwritten): a reshape whose element counts are not provably equal is left to the
    run-time reshape, which checks them, as the reference does."""
    mod = from_source(SYMBOLIC_RESHAPE)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    x = np.arange(6, dtype="float32").reshape(2, 3)
    if np.prod(shape) == 6:
        np.testing.assert_array_equal(vm["main"](x, shape).numpy(), x.reshape(shape))
        return
    for run in (lambda: vm["main"](x, shape), lambda: run_relax(mod, "main", x, shape)):
        with pytest.raises(TVMSError, match=r"R.reshape: a tensor of shape \(2, 3\) \(6 elements\) cannot take"):
            run()


def test_a_stride_of_zero_known_when_it_runs_is_refused() -> None:
    """numpy's ValueError ("slice step cannot be zero") had escaped the VM and the reference."""
    mod = _strided_slice_module("s", False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    a = np.arange(60, dtype="float32").reshape(10, 6)
    np.testing.assert_array_equal(vm["main"](a, (1, 9, 3)).numpy(), a[1:9:3])
    for run in (lambda: vm["main"](a, (1, 9, 0)), lambda: run_relax(mod, "main", a, (1, 9, 0))):
        with pytest.raises(TVMSError, match="R.strided_slice: a stride of 0 on axis 0"):
            run()
