"""LiftTransformParams and SplitLayoutRewritePreproc (tvms.relax.transform): the text TVM 0.27
prints after the pass on its own tests' inputs, byte for byte (tests/fixtures/lift_transform_params,
recorded by generate_with_tvm.py there), the lifted functions computing what the original did
(reference executor), and ``tvms.compile``'s use of them: the weights' transformations run once
per parameter set (runtime/param_cache.py), with results equal to numpy's."""
from __future__ import annotations

import ast
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

import tvms
from tvms import relax
from tvms.ir.errors import TVMSError
from tvms.lowering.pass_registry import get_pass
from tvms.lowering.transform import PassContext, PassError
from tvms.ir.vm_program import Ret, VMFunction, VMProgram, check_lifted, deserialize, serialize
from tvms.runtime.param_cache import CAPACITY, ParamCache
from tvms.runtime.vm import Executable
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

GOLDEN = FIXTURES / "lift_transform_params"
PASSES = {"LiftTransformParams": relax.transform.LiftTransformParams,
          "SplitLayoutRewritePreproc": relax.transform.SplitLayoutRewritePreproc}
# TVM's output that tvms does not reproduce, and why
DIFFERENT = {
    "symbolic_var_in_param_shape": "TVM's printed input renames the lifted variable w1 to w1_1, "
                                   "so the text parsed back names the new parameter w1_1",
}
CASES = sorted(p.name[:-len(".options")] for p in GOLDEN.glob("*.options"))


def _case(name: str) -> tuple:
    options = ast.literal_eval((GOLDEN / f"{name}.options").read_text())
    make = PASSES[options.pop("pass")]
    consume = options.pop("consume_params", False)
    return make(**options), {"relax.lift_transform_params.consume_params": consume}


@pytest.mark.parametrize("name", CASES)
def test_golden_text(name: str) -> None:
    if name in DIFFERENT:
        pytest.skip(DIFFERENT[name])
    pass_, config = _case(name)
    mod = from_source((GOLDEN / f"{name}.input.tvms").read_text())
    error = GOLDEN / f"{name}.error"
    with PassContext(config=config):
        if error.exists():  # TVM rejects it: so does tvms, saying the same
            with pytest.raises(PassError, match="should be the same for all target functions"):
                pass_(mod)
            return
        after = pass_(mod)
    assert after.script(dialect="tvm-0.27") + "\n" == (GOLDEN / f"{name}.expected.tvms").read_text()


@pytest.mark.parametrize("name,shared", [("multiple_functions", False), ("stop_lifting", False),
                                         ("share_transform_across_multiple_functions_has_intersection_of_transforms", True)])
def test_lifted_functions_compute_the_same(name: str, shared: bool) -> None:
    """f(x, *w) == f'(x, *f_transform_params(w)) under the reference executor."""
    before = from_source((GOLDEN / f"{name}.input.tvms").read_text())
    after = relax.transform.LiftTransformParams(shared_transform=shared)(before)
    rng = np.random.default_rng(0)
    for gv, func in before.functions_items():
        if not isinstance(func, relax.Function) or "num_input" not in func.attrs:
            continue
        args = [rng.standard_normal([d.value for d in p.struct_info.shape.values]).astype("float32")
                for p in func.params]
        k = int(func.attrs["num_input"])
        transformed = run_relax(after, "transform_params" if shared else f"{gv.name_hint}_transform_params",
                                tuple(args[k:]))
        got = run_relax(after, gv.name_hint, *args[:k], *transformed)
        np.testing.assert_allclose(got, run_relax(before, gv.name_hint, *args), rtol=1e-5)


def test_a_scalar_weight_that_sizes_another_computes_the_same_on_the_reference_and_the_vm() -> None:
    """TVM 0.27's lifting of ``extent: T.int64`` (a weight that is a size variable, shaping the
    weight after it): the transform reads it back first (``extent: T.int64 = model_params[0]``),
    then the tensor with a match_cast to its size, which fails on a tensor of another size."""
    name = "lift_transform_with_primitive_param_used_by_model_tensor"
    before = from_source((GOLDEN / f"{name}.input.tvms").read_text())
    after = relax.transform.LiftTransformParams()(before)
    expected = (GOLDEN / f"{name}.expected.tvms").read_text()  # (TVM's text reads back and prints as it is)
    assert from_source(expected).script(dialect="tvm-0.27") + "\n" == expected
    classic = after.script(dialect="classic")  # (the size read back: extent: R.Prim(value="extent") = R.match_cast)
    assert 'extent: R.Prim(value="extent") = R.match_cast(model_params[0], R.Prim(value="extent"))' in classic
    assert from_source(classic).script(dialect="tvm-0.27") + "\n" == expected
    x, w = np.arange(5, dtype="float32"), np.linspace(1, 2, 5).astype("float32")
    want = x + w * w
    np.testing.assert_allclose(run_relax(before, "main", x, 5, w), want)
    transformed = run_relax(after, "main_transform_params", (5, w))
    np.testing.assert_allclose(run_relax(after, "main", x, *transformed), want)
    vm = relax.VirtualMachine(tvms.compile(after, target="llvm"), tvms.cpu())
    extent, weight = vm["main_transform_params"]((5, tvms.nd.array(w)))
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x), extent, weight).numpy(), want)
    for run in (lambda: run_relax(after, "main_transform_params", (4, w)),
                lambda: vm["main_transform_params"]((4, tvms.nd.array(w)))):
        with pytest.raises(TVMSError, match="match_cast of 'weight': dimension 0 should be extent = 4, got 5"):
            run()


def test_shared_transform_names_missing_function() -> None:
    mod = from_source((GOLDEN / "multiple_functions.input.tvms").read_text())
    with pytest.raises(PassError, match="no function 'nope'"):
        relax.transform.LiftTransformParams(shared_transform=["func1", "nope"])(mod)
    with pytest.raises(PassError, match="func3 must be a Relax function with the num_input"):
        relax.transform.LiftTransformParams(shared_transform=["func1", "func3"])(mod)


# --------------------------------------------------------------------------- tvms.compile


sys.path.insert(0, str(ROOT / "benchmarks"))
from seed_mlp import MLP  # noqa: E402

SHAPES = [(1, 784), (128, 784), (128,), (10, 128), (10,)]


def _mlp(num_input: bool) -> tvms.IRModule:
    """The seed's MLP as its flow lowers it (zero pipeline + default schedules): the weight
    transposes are kernels of their own."""
    mod = from_source(MLP)
    if num_input:
        mod = tvms.IRModule({"main": mod["main"].with_attr("num_input", 1)})
    with tvms.target.Target("llvm"):
        return tvms.transform.Sequential([relax.get_pipeline("zero"),
                                          tvms.dlight.ApplyDefaultSchedule(*tvms.dlight.cpu.default_rules())])(mod)


def _kernels(f) -> list:
    """The kernels a VM program's function calls, in order."""
    return [i.func for i in f.code if getattr(i, "kind", None) == "kernel"]


def _numpy_mlp(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


@pytest.fixture(scope="module")
def mlp_vms():
    """VMs of the seed MLP compiled without and with num_input (the second lifts the transposes)."""
    return [relax.VirtualMachine(tvms.compile(_mlp(k), target="llvm"), tvms.cpu()) for k in (False, True)]


def _weights(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in SHAPES]


def test_compile_lifts_the_weight_transposes(mlp_vms) -> None:
    plain, lifted = mlp_vms
    assert plain.executable.function_names == ["main"]
    assert sorted(lifted.executable.function_names) == ["main", "main_lifted", "main_transform_params"]
    assert lifted.param_cache.lifted == {"main": ("main_lifted", "main_transform_params", 1, 4)}
    program = {f.name: f for f in lifted.executable.program.functions}
    assert [k for k in _kernels(program["main_transform_params"]) if "transpose" in k] == ["transpose", "transpose1"]
    assert not [k for k in _kernels(program["main_lifted"]) if "transpose" in k]  # (off the per-call path)
    assert program["main"].params == program["main_lifted"].params[:1] + ("w0", "b0", "w1", "b1")
    args = _weights(0)
    want = _numpy_mlp(*args)
    for vm in mlp_vms:
        np.testing.assert_allclose(vm["main"](*args).numpy(), want, rtol=1e-4, atol=1e-4)
    # an executable made of the program alone (as one from a library of an older tvms, which kept
    # no lifted functions) knows nothing of the lifting: its main is the original function,
    # transposes included
    again = Executable(deserialize(serialize(lifted.executable.program)), lifted.executable.kernels())
    reloaded = relax.VirtualMachine(again, tvms.cpu())
    assert reloaded.param_cache.lifted == {}
    np.testing.assert_allclose(reloaded["main"](*args).numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_bytecode_build_says_why_its_lifted_call_is_not_native() -> None:
    ex = tvms.compile(_mlp(True), target="llvm", exec_mode="bytecode")
    assert ex.stats()["lifted"] == {"main": 'exec_mode="bytecode"'}


def test_two_threads_first_lookup_of_a_function_get_one_callable(mlp_vms) -> None:
    # (two callables would each have native code, and the cache feeds its entry to one only:
    # the other would go on with weights transformed from old values)
    vm = relax.VirtualMachine(mlp_vms[1].executable, tvms.cpu())
    make, made = vm._callable, []

    def slow(name):  # (both threads miss the first lookup)
        made.append(name)
        time.sleep(0.2)
        return make(name)
    vm._callable = slow
    got = [None, None]
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, vm["main"])) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1] and made.count("main") == 1


def _program(**params) -> VMProgram:
    """A program of functions with these parameters (their code never runs)."""
    return VMProgram(tuple(VMFunction(name, tuple(p), len(p), (), (Ret(0),)) for name, p in params.items()))


def test_a_transform_takes_one_parameter() -> None:
    program = _program(f=("x", "w"), f_lifted=("x", "v"), t=("a", "b"))
    with pytest.raises(TVMSError, match="does not fit the program .*their numbers of parameters differ"):
        check_lifted({"f": ("f_lifted", "t", 1, 1)}, {}, {}, program)
    check_lifted({"f": ("f_lifted", "t", 1, 1)}, {}, {}, _program(f=("x", "w"), f_lifted=("x", "v"), t=("ws",)))


@pytest.mark.parametrize("returned, message", [
    ((np.zeros(1), np.zeros(1)), "t returned 2 transformed weights; f_lifted takes 1 after its 1 inputs"),
    (np.zeros(1), "t returned ndarray, not a tuple of transformed weights"),
])
def test_the_lifted_form_takes_what_the_transform_returns(returned, message) -> None:
    # (an Executable made from its parts: what the transform returns is known only once it ran)
    program = _program(f=("x", "w"), f_lifted=("x", "v"), t=("ws",))
    vm = SimpleNamespace(executable=SimpleNamespace(program=program), invoke=lambda name, weights: returned)
    cache = ParamCache(vm, {"f": ("f_lifted", "t", 1, 1)})
    with pytest.raises(TVMSError, match=message):
        cache.arguments("f", (np.zeros(1), np.zeros(1)))


def test_cache_reuses_same_weights_and_not_changed_ones(mlp_vms) -> None:
    vm = mlp_vms[1]
    cache = vm.param_cache
    cache.clear()
    x, *weights = _weights(1)
    runs = cache.transforms
    for _ in range(3):
        np.testing.assert_allclose(vm["main"](x, *weights).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
    assert cache.transforms == runs + 1  # the same arrays: transformed once
    x2 = _weights(2)[0]  # a new input, the same weights: still cached
    np.testing.assert_allclose(vm["main"](x2, *weights).numpy(), _numpy_mlp(x2, *weights), rtol=1e-4, atol=1e-4)
    assert cache.transforms == runs + 1
    # a cached weight cannot be written in place behind the cache's back (numpy's own error) ...
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        weights[0][0, 0] = 5.0
    # ... and made writable again, its writes are seen
    weights[0].flags.writeable = True
    weights[0] *= 2
    np.testing.assert_allclose(vm["main"](x, *weights).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
    assert cache.transforms == runs + 2
    # the same values in other arrays are another parameter set; it takes the cache's one place
    copies = [w.copy() for w in weights]
    vm["main"](x, *copies)
    assert cache.transforms == runs + 3 and all(w.flags.writeable for w in weights)
    assert not any(w.flags.writeable for w in copies)
    cache.clear()
    assert all(w.flags.writeable for w in weights + copies)


def test_cache_keys_tensors_views_and_keeps_few_sets(mlp_vms) -> None:
    vm = mlp_vms[1]
    cache = vm.param_cache
    cache.clear()
    x, *weights = _weights(3)
    tensors = [tvms.nd.array(w) for w in weights]
    runs = cache.transforms
    vm["main"](x, *tensors)
    np.testing.assert_allclose(vm["main"](x, *tensors).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
    assert cache.transforms == runs + 1
    # TVM's way to update a weight works: it ends the cache's hold, the next call transforms again
    tensors[1].copyfrom(np.ones(128, "float32"))
    np.testing.assert_allclose(vm["main"](x, *tensors).numpy(), _numpy_mlp(x, weights[0], np.ones(128, "float32"),
                                                                         *weights[2:]), rtol=1e-4, atol=1e-4)
    assert cache.transforms == runs + 2
    tensors[0].copyfrom(weights[0])  # (a weight of the cached set: the same)
    assert cache.transforms == runs + 2 and tensors[0].array.flags.writeable
    vm["main"](x, *tensors)
    assert cache.transforms == runs + 3 and not tensors[0].array.flags.writeable
    read_only = tvms.nd.array(weights[1])  # (read-only for its owner: copyfrom does not change that)
    read_only.array.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        read_only.copyfrom(weights[1])
    # a weight that views a bigger array: writing into that array is refused too
    big = np.zeros((2, 128, 784), "float32")
    big[1] = weights[0]
    vm["main"](x, big[1], *weights[1:])
    with pytest.raises(ValueError, match="read-only"):
        big[1, 0, 0] = 1.0
    # the oldest sets leave the cache, their arrays writable again (but for one the others share)
    shared = weights[1].copy()
    sets = [[shared if i == 1 else w.copy() for i, w in enumerate(weights)] for _ in range(CAPACITY + 1)]
    for s in sets:
        vm["main"](x, *s)
    assert all(w.flags.writeable for w in sets[0] if w is not shared)
    assert not sets[-1][0].flags.writeable and not shared.flags.writeable
    cache.clear()
    assert big.flags.writeable and shared.flags.writeable and all(t.array.flags.writeable for t in tensors)


def test_a_call_with_the_cached_weights_is_one_native_call(mlp_vms) -> None:
    """The call with the last parameter set's weights runs natively (the cache's path counts as
    a fallback of ``main``); a new set, weights made writable again and ``clear()`` go through
    the cache, so no stale result comes back."""
    vm = mlp_vms[1]
    assert "main_lifted" in vm.executable.stats()["native"]
    assert vm.executable.lifted_native["main"].name == "main_lifted"
    cache = vm.param_cache
    cache.clear()
    x, *weights = _weights(5)
    for w in weights:  # (read-only before the cache saw them: clear() leaves them so)
        w.flags.writeable = False
    runs = cache.transforms

    def check(through_cache: int, transforms: int) -> None:
        before = vm.native_stats().get("main", {"fallbacks": 0})["fallbacks"]
        np.testing.assert_allclose(vm["main"](x, *weights).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
        assert vm.native_stats()["main"]["fallbacks"] - before == through_cache
        assert cache.transforms == runs + transforms

    check(1, 1)  # a new set: transformed
    for _ in range(3):
        check(0, 1)  # the same: native, nothing transformed
    # (a weight made writable, written and read-only again between two calls is a hole the cache
    # does not see; after clear() it is a new set)
    cache.clear()
    weights[2].flags.writeable = True
    weights[2][0, 0] += 1
    weights[2].flags.writeable = False
    check(1, 2)
    check(0, 2)
    weights[0].flags.writeable = True  # made writable again (and written): transformed again
    weights[0][0, 0] += 1
    check(1, 3)
    check(0, 3)
    copies = [w.copy() for w in weights]  # another set, then the first one again (transformed again:
    vm["main"](x, *copies)                 # the cache keeps one set)
    check(1, 5)
    cache.clear()
    stats = vm.native_stats()  # (the lifted call runs in its lifted form's storage: one reserved)
    assert stats["main"]["reserved"] == stats["main_lifted"]["reserved"] > 0
    assert vm._native["main"].storage is vm._native["main_lifted"].storage


def test_weights_the_cache_cannot_key_run_the_original_function(mlp_vms, monkeypatch) -> None:
    """(As device tensors on a GPU VM:) no transform at each call, the original ``main`` runs."""
    import tvms.runtime.param_cache as param_cache

    def uncachable(value, arrays):
        raise param_cache._Uncachable

    monkeypatch.setattr(param_cache, "_frozen", uncachable)
    vm = mlp_vms[1]
    vm.param_cache.clear()
    x, *weights = _weights(6)
    runs, calls = vm.param_cache.transforms, []
    monkeypatch.setattr(vm, "call", lambda name, values: calls.append(name) or type(vm).call(vm, name, values))
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x, *weights).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
    assert vm.param_cache.transforms == runs and calls == ["main", "main"]
    assert all(w.flags.writeable for w in weights)


def test_bad_arguments_are_named_as_the_caller_knows_them(mlp_vms) -> None:
    x, *weights = _weights(4)
    with pytest.raises(TVMSError, match=r"main takes 5 arguments \(x, w0, b0, w1, b1\), got 4"):
        mlp_vms[1]["main"](x, *weights[:3])
    with pytest.raises(TVMSError, match="argument 'b0': expected dtype float32, got float64"):
        mlp_vms[1]["main"](x, weights[0], weights[1].astype("float64"), *weights[2:])


def test_bind_params_and_fold_constant_give_the_same() -> None:
    """The other way to transform weights once: bound as constants, folded at compile time."""
    x, *weights = _weights(5)
    mod = from_source(MLP)
    bound = relax.transform.BindParams("main", dict(zip(["w0", "b0", "w1", "b1"], weights)))(mod)
    folded = relax.transform.FoldConstant()(bound)
    assert "permute_dims" not in folded.script() and "permute_dims" in bound.script()
    vm = relax.VirtualMachine(tvms.compile(folded, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)
    # bound, then compiled as it is: the zero pipeline's FoldConstant runs the legalized
    # transposes (call_tir on constants) at compile time, as TVM's does
    vm = relax.VirtualMachine(tvms.compile(bound, target="llvm", default_schedule=False), tvms.cpu())
    main = next(f for f in vm.executable.program.functions if f.name == "main")
    assert not [k for k in _kernels(main) if "transpose" in k]
    np.testing.assert_allclose(vm["main"](x).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-4)


def test_fold_constant_runs_call_tir_with_several_outputs() -> None:
    """TVM's test_fold_tuple_output: a kernel of two outputs on a constant becomes a tuple of two."""
    mod = from_source(SPLIT)
    c0 = np.arange(16, dtype="float32").reshape(4, 4)
    after = relax.transform.FoldConstant()(relax.transform.BindParams("main", {"c0": c0})(mod))
    value = after["main"].body.blocks[0].bindings[0].value
    assert isinstance(value, relax.Tuple)
    np.testing.assert_array_equal(value.fields[0].data, c0[:2])
    np.testing.assert_array_equal(value.fields[1].data, c0[2:])
    unbound = relax.transform.FoldConstant()(mod)  # (a parameter is no constant: nothing to run)
    assert unbound.script() == mod.script()


SPLIT = """
@I.ir_module
class Module:
    @T.prim_func
    def split(A: T.Buffer((4, 4), "float32"), B: T.Buffer((2, 4), "float32"), C: T.Buffer((2, 4), "float32")):
        for i, j in T.grid(2, 4):
            with T.block("upper"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(2, 4):
            with T.block("lower"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi + 2, vj]

    @R.function
    def main(c0: R.Tensor((4, 4), "float32")):
        cls = Module
        lv0 = R.call_tir(cls.split, (c0,), out_sinfo=[R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")])
        return lv0
"""


FOLD_TWICE_AND_GPU = SPLIT.replace("""        return lv0
""", """        lv1 = R.call_tir(cls.split, (c0,), out_sinfo=[R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")])
        lv2 = R.call_tir(cls.gpu_copy, (c0,), out_sinfo=R.Tensor((4, 4), "float32"))
        return (lv0, lv1, lv2)
""").replace("""    @R.function""", """    @T.prim_func
    def gpu_copy(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        for i in T.thread_binding(4, thread="threadIdx.x"):
            for j in range(4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]

    @R.function""")


def test_fold_constant_builds_a_kernel_once_and_leaves_what_the_host_cannot_run(monkeypatch) -> None:
    """``split`` called twice on a constant is built once; ``gpu_copy`` (bound to GPU threads)
    does not build for the host: its call stays, no error."""
    import tvms.lowering.build as driver

    builds = []
    build = driver.build
    monkeypatch.setattr(driver, "build", lambda mod, target: builds.append(list(mod.functions)) or build(mod, target))
    mod = from_source(FOLD_TWICE_AND_GPU)
    c0 = np.arange(16, dtype="float32").reshape(4, 4)
    after = relax.transform.FoldConstant()(relax.transform.BindParams("main", {"c0": c0})(mod))
    values = [b.value for b in after["main"].body.blocks[0].bindings]
    assert [type(v).__name__ for v in values] == ["Tuple", "Tuple", "Call"]
    np.testing.assert_array_equal(values[1].fields[1].data, c0[2:])
    assert len(builds) == 2  # (split once, gpu_copy tried once)


PACKED = """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add_packed(X: T.Buffer((8, 8), "float32"), W: T.Buffer((8, 8), "float32"), Out: T.Buffer((8, 8), "float32")):
        W_rewrite = T.alloc_buffer((2, 2, 4, 4))
        for i, j in T.grid(8, 8):
            with T.block("W_rewrite"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(W[vi, vj])
                T.writes(W_rewrite[vi // 4, vj // 4, vi % 4, vj % 4])
                T.block_attr({"meta_schedule.layout_rewrite_preproc": T.bool(True)})
                W_rewrite[vi // 4, vj // 4, vi % 4, vj % 4] = W[vi, vj] * T.float32(2)
        for i0, j0, i1, j1 in T.grid(2, 2, 4, 4):
            with T.block("Out"):
                vi = T.axis.spatial(8, i0 * 4 + i1)
                vj = T.axis.spatial(8, j0 * 4 + j1)
                T.reads(X[vi, vj], W_rewrite[vi // 4, vj // 4, vi % 4, vj % 4])
                T.writes(Out[vi, vj])
                Out[vi, vj] = X[vi, vj] + W_rewrite[vi // 4, vj // 4, vi % 4, vj % 4]

    @R.function
    def main(x: R.Tensor((8, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((8, 8), "float32"):
        R.func_attr({"num_input": 1})
        cls = Module
        with R.dataflow():
            gv = R.call_tir(cls.add_packed, (x, w), out_sinfo=R.Tensor((8, 8), "float32"))
            R.output(gv)
        return gv
"""


def test_compile_splits_and_lifts_marked_packing() -> None:
    """A kernel that packs its weight in a marked block: the packing runs once per weight."""
    vm = relax.VirtualMachine(tvms.compile(from_source(PACKED), target="llvm"), tvms.cpu())
    program = {f.name: f for f in vm.executable.program.functions}
    assert _kernels(program["main_transform_params"]) == ["add_packed_weight_prepack"]
    assert _kernels(program["main_lifted"]) == ["add_packed_prepacked"]
    rng = np.random.default_rng(6)
    x, w = (rng.standard_normal((8, 8)).astype("float32") for _ in range(2))
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x, w).numpy(), x + 2 * w, rtol=1e-6)
    assert vm.param_cache.transforms == 1


def test_a_public_kernels_parts_are_public_under_their_own_names() -> None:
    """SplitLayoutRewritePreproc of a public kernel gives its two parts their own global_symbol,
    as TVM 0.27 does (add_packed_weight_prepack, add_packed_prepacked), so the module builds (a
    copied symbol made two functions export one) and computes as before."""
    public = from_source(PACKED.replace("@T.prim_func(private=True)", "@T.prim_func"))
    split = get_pass("SplitLayoutRewritePreproc")(public)
    assert {name: split[name].attrs.get("global_symbol") for name in split if name != "main"} == {
        "add_packed": "add_packed", "add_packed_weight_prepack": "add_packed_weight_prepack",
        "add_packed_prepacked": "add_packed_prepacked"}
    vm = relax.VirtualMachine(tvms.compile(public, target="llvm"), tvms.cpu())
    x, w = np.ones((8, 8), "float32"), np.full((8, 8), 3, "float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), x + 2 * w, rtol=1e-6)


OWN_NAMES = PACKED.replace("""    @R.function
    def main(""", """    @T.prim_func
    def add_packed_weight_prepack(X: T.Buffer((8, 8), "float32"), Out: T.Buffer((8, 8), "float32")):
        for i, j in T.grid(8, 8):
            with T.block("neg"):
                vi, vj = T.axis.remap("SS", [i, j])
                Out[vi, vj] = T.float32(0) - X[vi, vj]

    @R.function
    def main_lifted(x: R.Tensor((8, 8), "float32")) -> R.Tensor((8, 8), "float32"):
        cls = Module
        gv = R.call_tir(cls.add_packed_weight_prepack, (x,), out_sinfo=R.Tensor((8, 8), "float32"))
        return gv

    @R.function
    def main(""")


def test_names_the_module_has_are_not_taken_over() -> None:
    """The module has a ``main_lifted`` and an ``add_packed_weight_prepack`` of its own: the split
    and the lifting pick other names, and the user's functions stay what they were."""
    vm = relax.VirtualMachine(tvms.compile(from_source(OWN_NAMES), target="llvm"), tvms.cpu())
    assert vm.param_cache.lifted == {"main": ("main_lifted_1", "main_transform_params", 1, 1)}
    program = {f.name: f for f in vm.executable.program.functions}
    assert _kernels(program["main_transform_params"]) == ["add_packed_weight_prepack_1"]
    rng = np.random.default_rng(7)
    x, w = (rng.standard_normal((8, 8)).astype("float32") for _ in range(2))
    np.testing.assert_allclose(vm["main"](x, w).numpy(), x + 2 * w, rtol=1e-6)
    np.testing.assert_allclose(vm["main_lifted"](x).numpy(), -x, rtol=1e-6)


def test_compile_leaves_whole_what_the_pass_cannot_split() -> None:
    """Marked blocks in a form the split does not take: the pass says so, tvms.compile runs the
    kernel whole (packing at every call) rather than failing."""
    marked = PACKED.replace("T.writes(Out[vi, vj])",
                            "T.writes(Out[vi, vj])\n                T.block_attr({\"meta_schedule.layout_rewrite_preproc\": T.bool(True)})")
    mod = from_source(marked)
    with pytest.raises(PassError, match="'Out' of add_packed must read one buffer and write one"):
        relax.transform.SplitLayoutRewritePreproc()(mod)
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    assert vm.executable.function_names == ["main"]
    x, w = np.ones((8, 8), "float32"), np.full((8, 8), 3, "float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), x + 2 * w)


def test_compile_lifts_the_matmul_rules_packing_once_marked() -> None:
    """The default schedules of the MLP at batch 64 pack each weight into panels at every call;
    marked as the Matmul rule is to mark them (issue 17's interface), the packing runs once."""
    from lift_params import mark_packing

    text = MLP.replace("(1, 784)", "(64, 784)").replace("(1, 10)", "(64, 10)")
    mod = from_source(text)
    marked = mark_packing(tvms.IRModule({"main": mod["main"].with_attr("num_input", 1)}))
    vm = relax.VirtualMachine(tvms.compile(marked, target="llvm"), tvms.cpu())
    program = {f.name: f for f in vm.executable.program.functions}
    prepacks = _kernels(program["main_transform_params"])
    assert prepacks and all(k.endswith("_weight_prepack") for k in prepacks)
    assert all(k.endswith("_prepacked") for k in _kernels(program["main_lifted"]))
    rng = np.random.default_rng(7)
    x, *weights = [rng.standard_normal((64, 784)).astype("float32")] + _weights(7)[1:]
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x, *weights).numpy(), _numpy_mlp(x, *weights), rtol=1e-4, atol=1e-2)
    assert vm.param_cache.transforms == 1


TUPLE_WEIGHT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), "float32"), ws: R.Tuple(R.Tensor((2, 2), "float32"), R.Tensor((2, 2), "float32"))) -> R.Tensor((2, 2), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w0 = ws[0]
            w0t = R.permute_dims(w0)
            y = R.add(R.matmul(x, w0t), ws[1])
            R.output(y)
        return y
"""


def test_a_list_of_weights_is_keyed_by_what_it_holds() -> None:
    """A tuple weight given as a list: the same list object holding another array is another set."""
    vm = relax.VirtualMachine(tvms.compile(from_source(TUPLE_WEIGHT), target="llvm", default_schedule=False),
                              tvms.cpu())
    x, a, b, c = (np.random.default_rng(k).standard_normal((2, 2)).astype("float32") for k in range(4))
    ws = [a, b]
    np.testing.assert_allclose(vm["main"](x, ws).numpy(), x @ a.T + b, rtol=1e-5)
    np.testing.assert_allclose(vm["main"](x, ws).numpy(), x @ a.T + b, rtol=1e-5)
    assert vm.param_cache.transforms == 1
    ws[0] = c
    np.testing.assert_allclose(vm["main"](x, ws).numpy(), x @ c.T + b, rtol=1e-5)
    assert vm.param_cache.transforms == 2
    np.testing.assert_allclose(vm["main"](x, (c, b)).numpy(), x @ c.T + b, rtol=1e-5)
    assert vm.param_cache.transforms == 2  # (a tuple of the same arrays: the same set)


WRITES_WEIGHT = """
@I.ir_module
class Module:
    @T.prim_func
    def inc(w: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.block("inc"):
                vi, vj = T.axis.remap("SS", [i, j])
                w[vi, vj] = w[vi, vj] + T.float32(1)

    @T.prim_func
    def bump(w: T.Buffer((4, 4), "float32"), y: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.block("bump"):
                vi, vj = T.axis.remap("SS", [i, j])
                w[vi, vj] = w[vi, vj] + T.float32(1)
                y[vi, vj] = w[vi, vj] * T.float32(2)

    @R.function
    def main(x: R.Tensor((1, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"num_input": 1})
        cls = Module
        with R.dataflow():
            t = R.multiply(w, w)
            s = R.matmul(x, t)
            R.output(s)
        y = R.call_tir_inplace(cls.inc, (w,), out_sinfo=R.Tensor((4, 4), "float32"), inplace_indices=[0])
        z = R.call_tir(cls.bump, (w,), out_sinfo=R.Tensor((4, 4), "float32"))
        v = R.add(s, y)
        out = R.add(v, z)
        return out
"""


def test_a_function_writing_a_weight_in_place_is_not_lifted() -> None:
    """``inc`` writes ``w`` in place (R.call_tir_inplace) and ``bump`` writes its input: lifted,
    ``w * w`` would be computed once (stale) and the writes go to a private copy;
    so ``main`` stays whole and computes what it does without num_input."""
    mod = from_source(WRITES_WEIGHT)
    plain = tvms.IRModule({"main": mod["main"].without_attr("num_input"), "inc": mod["inc"], "bump": mod["bump"]})
    x = np.arange(4, dtype="float32").reshape(1, 4)
    for mode in ("bytecode", "compiled"):
        vms = [relax.VirtualMachine(tvms.compile(m, target="llvm", exec_mode=mode), tvms.cpu()) for m in (mod, plain)]
        assert vms[0].param_cache.lifted == {}
        w, w_plain = np.eye(4, dtype="float32"), np.eye(4, dtype="float32")
        for call in (1, 2, 3):  # (inc, then bump: w grows by 2 a call)
            np.testing.assert_allclose(vms[0]["main"](x, w).numpy(), vms[1]["main"](x, w_plain).numpy())
            np.testing.assert_allclose(w, np.eye(4) + 2 * call)


CONCAT_OF_A_WEIGHTS_PART = """
@R.function
def main(x: R.Tensor((1, 4, 5, 5), "float32"), w: R.Tensor((3, 4, 1, 1), "float32"),
         k: R.Tensor((1, 2, 5, 5), "float32"), w2: R.Tensor((2, 2, 1, 1), "float32")) -> R.Tensor((1, 5, 5, 5), "float32"):
    R.func_attr({"num_input": 1})
    with R.dataflow():
        a = R.nn.relu(R.nn.conv2d(k, w2))
        b = R.nn.relu(R.nn.conv2d(x, w))
        c = R.concat((a, b), axis=1)
        R.output(c)
    return c
"""


@pytest.mark.parametrize("mode", ["compiled", "bytecode"])
def test_a_value_written_in_place_at_each_call_is_not_lifted(mode: str) -> None:
    """(review) ConcatInPlace makes ``a`` (weights only) the tensor ``b``'s kernel then writes
    into in place: lifted, ``a`` was computed once and cached, and each call wrote into (and
    returned) the cached tensor, so the second call overwrote the first call's result."""
    rng = np.random.default_rng(0)
    w, k, w2 = (rng.standard_normal(s).astype("float32") for s in ((3, 4, 1, 1), (1, 2, 5, 5), (2, 2, 1, 1)))
    a = np.maximum(np.einsum("nchw,fc->nfhw", k, w2[:, :, 0, 0]), 0)

    def want(x: np.ndarray) -> np.ndarray:
        return np.concatenate([a, np.maximum(np.einsum("nchw,fc->nfhw", x, w[:, :, 0, 0]), 0)], 1)

    vm = relax.VirtualMachine(tvms.compile(tvms.IRModule({"main": from_source(CONCAT_OF_A_WEIGHTS_PART)}), "llvm",
                                           exec_mode=mode), tvms.cpu())
    x1, x2 = (rng.standard_normal((1, 4, 5, 5)).astype("float32") for _ in range(2))
    first = vm["main"](x1, w, k, w2)
    np.testing.assert_allclose(vm["main"](x2, w, k, w2).numpy(), want(x2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(first.numpy(), want(x1), rtol=1e-5, atol=1e-5)


WRITES_A_LIFTABLE_VALUE = """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def double(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            b[i] = a[i] * T.float32(2)

    @T.prim_func(private=True)
    def add_into(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            b[i] = b[i] + a[i]

    @R.function
    def main(x: R.Tensor((4,), "float32"), w: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        cls = Module
        with R.dataflow():
            a = R.call_tir(cls.double, (w,), out_sinfo=R.Tensor((4,), "float32"))
            a2 = a
            b = R.call_tir_inplace(cls.add_into, (ADDED, a2), out_sinfo=R.Tensor((4,), "float32"), inplace_indices=[1])
            R.output(b)
        return b
"""


def test_what_an_in_place_call_writes_is_lifted_only_with_it() -> None:
    """``a`` (through its alias ``a2``) is written in place: with ``x`` added at each call it stays
    in ``main``; with ``w`` added the writing call is lifted too, and the whole chain with it."""
    for shared in (False, True):
        kept = relax.transform.LiftTransformParams(shared_transform=shared)(
            from_source(WRITES_A_LIFTABLE_VALUE.replace("ADDED", "x")))
        assert [b.var.name for b in kept["main"].body.blocks[-1].bindings] == ["a", "b"]
    lifted = relax.transform.LiftTransformParams()(from_source(WRITES_A_LIFTABLE_VALUE.replace("ADDED", "w")))
    assert not lifted["main"].body.blocks and "add_into" in lifted["main_transform_params"].script()
