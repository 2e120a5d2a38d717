"""The Relax VM's compiled programs (``lowering/relax/vm_codegen.py``), the cheaper kernel calls
of ``runtime/module.py``, the content-addressed compile cache and the on-disk kernel cache:
results equal the reference executor and a VM of the program read back from its serialized
form, kernels the compiler proved safe run without checks, pooled buffers never corrupt
returned results, errors name the parameter, an unchanged module compiles to the same
Executable, and kernel object code survives a new process while a damaged entry is rebuilt."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, reject

from program_strategies import Program, assert_same_values, dataflow_programs
from test_pass_properties import SETTINGS
from test_pass_properties import _run as run_reference
import tvms
from tvms import TVMSError, relax
from tvms.relax import get_pipeline
from tvms.runtime.reference_relax import run_relax
from tvms.ir.vm_program import Call, deserialize, serialize
from tvms.lowering.build import compile_key
from tvms.lowering.transform import PassContext
from tvms.runtime.vm import Executable
from tvms.script import from_source

MLP_TEXT = (Path(__file__).resolve().parent.parent / "examples" / "mlp.tvms").read_text()
RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def mlp_args(batch: int) -> list[np.ndarray]:
    return [rand(batch, 784), rand(256, 784), rand(256), rand(10, 256), rand(10)]


def mlp_numpy(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def program_stats(vm: relax.VirtualMachine, name: str) -> dict:
    """What the compiler made of ``name``: kernel calls with and without checks, Relax operators
    left to their numpy references, and whether the result is checked at run time."""
    calls = [i for i in vm.executable.program.function(name).code if isinstance(i, Call)]
    kernels = [i for i in calls if i.kind == "kernel"]
    return {"checked_kernels": sum(i.checked for i in kernels),
            "unchecked_kernels": sum(not i.checked for i in kernels),
            "operators": sum(i.func == "vm.builtin.relax_op" for i in calls),
            "result_checked": any(i.kind == "builtin" and "'the result'" in repr(i.args) for i in calls)}


def reloaded_result(vm: relax.VirtualMachine, name: str, *args: np.ndarray):
    """``name`` run by a new VM of the program read back from its serialized form."""
    ex = vm.executable
    again = Executable(deserialize(serialize(ex.program)), ex.kernels())
    return _as_numpy(relax.VirtualMachine(again, tvms.cpu())[name](*args))


@pytest.fixture(scope="module", params=["compiled", "bytecode"])
def mlp_vm(request) -> relax.VirtualMachine:
    # (the zero pipeline's four kernels, transposes included: default schedules are not the point)
    ex = tvms.compile(from_source(MLP_TEXT), target="llvm", default_schedule=False, exec_mode=request.param)
    assert ("forward" in ex.stats()["native"]) == (request.param == "compiled")
    return relax.VirtualMachine(ex, tvms.cpu())


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_mlp_equals_reference_and_reloaded_program(mlp_vm: relax.VirtualMachine, batch: int) -> None:
    args = mlp_args(batch)
    out = mlp_vm["forward"](*args)
    np.testing.assert_allclose(out.numpy(), mlp_numpy(*args), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.numpy(), run_relax(from_source(MLP_TEXT), "forward", *args), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(out.numpy(), reloaded_result(mlp_vm, "forward", *args))
    # every kernel runs without re-checks, and the result's struct info is proven by the compiler
    assert program_stats(mlp_vm, "forward") == {"checked_kernels": 0, "unchecked_kernels": 4,
                                                "operators": 0, "result_checked": False}


def test_returned_tensors_survive_later_calls(mlp_vm: relax.VirtualMachine) -> None:
    first_args, second_args = mlp_args(2), mlp_args(2)
    first = mlp_vm["forward"](*first_args)
    kept = first.numpy().copy()
    second = mlp_vm["forward"](*second_args)
    np.testing.assert_array_equal(first.numpy(), kept)  # the pool never hands out a result
    assert not np.shares_memory(first.array, second.array)
    np.testing.assert_allclose(second.numpy(), mlp_numpy(*second_args), rtol=1e-3, atol=1e-3)


def test_call_tir_rewrite_allocations_are_pooled() -> None:
    lowered = get_pipeline("zero")(from_source(MLP_TEXT))
    rewritten = relax.transform.CallTIRRewrite()(lowered)
    vm = relax.VirtualMachine(tvms.compile(rewritten, target="llvm", exec_mode="bytecode"), tvms.cpu())
    args = mlp_args(3)
    out = vm["forward"](*args)
    np.testing.assert_allclose(out.numpy(), mlp_numpy(*args), rtol=1e-3, atol=1e-3)
    stats = program_stats(vm, "forward")
    assert stats["operators"] == 0 and stats["unchecked_kernels"] == 4
    # the three R.builtin.alloc_tensor intermediates (of three sizes) come from the pool and
    # serve the next call again; the result is allocated apart, at each call
    assert vm.memory_stats() == {"pooled": 3, "reused": 0, "unpooled": 1}
    again = vm["forward"](*mlp_args(3))
    assert vm.memory_stats() == {"pooled": 3, "reused": 3, "unpooled": 2}
    np.testing.assert_allclose(out.numpy(), mlp_numpy(*args), rtol=1e-3, atol=1e-3)
    assert not np.shares_memory(out.array, again.array)


def test_bad_arguments_name_the_parameter(mlp_vm: relax.VirtualMachine) -> None:
    x, w1, b1, w2, b2 = mlp_args(2)
    forward = mlp_vm["forward"]
    with pytest.raises(TVMSError, match=r"forward takes 5 arguments \(x, fc1_weight"):
        forward(x, w1, b1, w2)
    with pytest.raises(TVMSError, match="argument 'fc1_bias': expected dtype float32, got float64"):
        forward(x, w1, b1.astype("float64"), w2, b2)
    with pytest.raises(TVMSError, match="argument 'fc2_weight': dimension 1 should be 256, got 255"):
        forward(x, w1, b1, w2[:, :255], b2)
    with pytest.raises(TVMSError, match="argument 'x': expected 2 dimensions"):
        forward(x[0], w1, b1, w2, b2)
    # a non-contiguous or read-only argument is not an error: the VM takes a copy
    read_only = w2.copy()
    read_only.flags.writeable = False
    np.testing.assert_allclose(forward(x, w1.T.copy().T, b1, read_only, b2).numpy(),
                               mlp_numpy(x, w1, b1, w2, b2), rtol=1e-3, atol=1e-3)


def test_kernel_calls_check_what_the_caller_passes(mlp_vm: relax.VirtualMachine) -> None:
    transpose = mlp_vm.executable.kernels()["transpose"]
    w, out = rand(256, 784), np.empty((784, 256), "float32")
    transpose(w, out)
    np.testing.assert_array_equal(out, w.T)
    with pytest.raises(TVMSError, match=r"transpose argument 1 \(T_transpose\): dimension 0: expected extent 784, got 783"):
        transpose(w, np.empty((783, 256), "float32"))
    with pytest.raises(TVMSError, match=r"transpose argument 0 \(fc1_weight\): expected dtype float32, got float64"):
        transpose(w.astype("float64"), out)
    with pytest.raises(TVMSError, match="C-contiguous"):
        transpose(w, np.empty((256, 784), "float32").T)
    with pytest.raises(TVMSError, match="takes 2 arguments"):
        transpose(w)
    fused = mlp_vm.executable.kernels()["fused_matmul_add_relu"]
    with pytest.raises(TVMSError, match=r"argument 3 \(compute_intermediate\): dimension 0: expected extent 2, got 3"):
        fused(rand(2, 784), out, rand(256), np.empty((3, 256), "float32"))


MISMATCHED = '''
@I.ir_module
class Module:
    @T.prim_func
    def fill(a: T.Buffer((T.int64(8),), "float32")):
        for i in range(T.int64(8)):
            a[i] = T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Module
        gv = R.call_tir(cls.fill, (), out_sinfo=R.Tensor((4,), dtype="float32"))
        return gv
'''


def test_an_unproven_kernel_call_keeps_its_checks() -> None:
    # the output's struct info disagrees with the kernel's buffer: the VM cannot prove the call
    # safe, so the kernel's own check refuses it instead of writing past the buffer
    vm = relax.VirtualMachine(tvms.compile(from_source(MISMATCHED), target="llvm"), tvms.cpu())
    with pytest.raises(TVMSError, match="dimension 0: expected extent 8, got 4"):
        vm["main"](rand(4))
    assert program_stats(vm, "main")["checked_kernels"] == 1
    assert vm.executable.stats()["interpreted"] == {  # (the compiled VM sees it cannot run it)
        "main": "fill's buffer a never fits its argument (the kernel's check refuses every call)"}


TWO_OUTPUTS_AND_SIZES = '''
@I.ir_module
class Module:
    @T.prim_func
    def add_size(a: T.handle, b: T.handle, c: T.handle, m: T.int64):
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        C = T.match_buffer(c, (n,))
        for i in range(n):
            B[i] = A[i] + T.Cast("float32", m)
            C[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tuple(R.Tensor(("n",), dtype="float32"), R.Tensor(("n",), dtype="float32")):
        n = T.int64()
        cls = Module
        with R.dataflow():
            pair = R.call_tir(cls.add_size, (x,), out_sinfo=[R.Tensor((n,), dtype="float32"), R.Tensor((n,), dtype="float32")], tir_vars=R.shape([n + 1]))
            first = pair[0]
            second = pair[1]
            both = R.call_tir(cls.add_size, (first,), out_sinfo=[R.Tensor((n,), dtype="float32"), R.Tensor((n,), dtype="float32")], tir_vars=R.shape([n]))
            out = (both[0], second)
            R.output(out)
        return out
'''


def test_two_outputs_tuple_items_and_size_arguments() -> None:
    mod = from_source(TWO_OUTPUTS_AND_SIZES)
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    x = np.arange(3, dtype="float32")
    got = vm["main"](x)
    assert [t.numpy().tolist() for t in got] == [[7.0, 8.0, 9.0], [0.0, 2.0, 4.0]]  # x + 4 + 3, 2x
    assert_same_values(tuple(t.numpy() for t in got), run_relax(mod, "main", x), rtol=0, atol=0)
    stats = program_stats(vm, "main")
    assert stats["operators"] == 0 and stats["unchecked_kernels"] == 2


MIXED = '''
@I.ir_module
class Module:
    @T.prim_func
    def add_one(a: T.Buffer((3, 4), "float32"), b: T.Buffer((3, 4), "float32")):
        for i, j in T.grid(3, 4):
            b[i, j] = a[i, j] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4, 3), dtype="float32"), c: R.Tensor((), dtype="float32")) -> R.Tensor((3, 4), dtype="float32"):
        cls = Module
        y = R.permute_dims(x)
        s = R.sum(c)
        z = R.call_tir(cls.add_one, (y,), out_sinfo=R.Tensor((3, 4), dtype="float32"))
        gv = R.add(z, s)
        return gv
'''


def test_operators_left_in_the_module_feed_kernels() -> None:
    # R.permute_dims runs as numpy (a strided view) and R.sum gives a 0-d value: the kernel
    # after them keeps its checks and gets contiguous copies
    vm = relax.VirtualMachine(tvms.compile(from_source(MIXED), target="llvm", relax_pipeline=None), tvms.cpu())
    x, c = rand(4, 3), np.array(2.0, "float32")
    np.testing.assert_allclose(vm["main"](x, c).numpy(), x.T + 3, rtol=1e-6)
    stats = program_stats(vm, "main")
    assert stats["operators"] == 3 and stats["checked_kernels"] == 1


def _as_numpy(value):
    if isinstance(value, tuple):
        return tuple(_as_numpy(v) for v in value)
    return value.numpy() if isinstance(value, tvms.nd.Tensor) else value


@pytest.mark.parametrize("rewrite", [False, True], ids=["call_tir", "CallTIRRewrite"])
@SETTINGS
@given(program=dataflow_programs(max_bindings=5))
def test_drawn_programs_fast_path_equals_reference(rewrite: bool, program: Program) -> None:
    try:
        lowered = get_pipeline("zero")(program.mod)
        want = run_reference(lowered, program)
    except (TVMSError, ValueError):
        reject()  # (a program that fails by itself, or that the zero pipeline cannot lower)
    if rewrite:
        lowered = relax.transform.CallTIRRewrite()(lowered)
    vm = relax.VirtualMachine(tvms.compile(lowered, target="llvm"), tvms.cpu())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = _as_numpy(vm[program.entry](*program.args))
        again = _as_numpy(vm[program.entry](*program.args))  # (pooled buffers reused)
        reloaded = reloaded_result(vm, program.entry, *program.args)
    assert_same_values(got, want)
    assert_same_values(again, got, rtol=0, atol=0)
    assert_same_values(got, reloaded, rtol=0, atol=0)


def test_unchanged_module_compiles_to_the_same_executable() -> None:
    first = tvms.compile(from_source(MLP_TEXT), target="llvm")
    again = tvms.compile(from_source(MLP_TEXT), target="llvm")  # parsed afresh: same text
    assert isinstance(first, Executable) and again is first
    changed = tvms.compile(from_source(MLP_TEXT.replace("R.nn.relu", "R.nn.silu")), target="llvm")
    assert changed is not first
    other_target = tvms.compile(from_source(MLP_TEXT), target="llvm -num-cores=1")
    assert other_target is not first and other_target.kernels().target == "llvm -num-cores=1"
    unpiped = tvms.compile(get_pipeline("zero")(from_source(MLP_TEXT)), target="llvm", relax_pipeline=None)
    assert unpiped is not first
    # two VMs of one cached executable keep their own buffers
    vm1, vm2 = (relax.VirtualMachine(first, tvms.cpu()) for _ in range(2))
    args = mlp_args(2)
    np.testing.assert_array_equal(vm1["forward"](*args).numpy(), vm2["forward"](*args).numpy())
    assert vm1.pool is not vm2.pool


def test_compile_key_sees_constants_and_options() -> None:
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))

    def module_adding(value: float):
        builder = relax.BlockBuilder()
        with builder.function("main", [x]):
            out = builder.emit(relax.op.add(x, relax.const(np.full((2,), value, "float32"))))
            builder.emit_func_output(out)
        return builder.get()

    one, two = module_adding(1.0), module_adding(2.0)
    assert one.script() == two.script()  # (the text alone shows only metadata references)
    assert compile_key(one, "llvm", "zero") != compile_key(two, "llvm", "zero")
    assert compile_key(one, "llvm", "zero") == compile_key(module_adding(1.0), "llvm", "zero")
    assert compile_key(one, "llvm", None) != compile_key(one, "llvm", "zero")
    assert compile_key(one, "llvm", get_pipeline("zero")) is None  # (a pass object: not keyed)
    # further options of compile extend the key
    assert compile_key(one, "llvm", "zero", default_schedule=True) != compile_key(one, "llvm", "zero")
    assert compile_key(one, "llvm", "zero", default_schedule=False) != \
        compile_key(one, "llvm", "zero", default_schedule=True)
    # and so does the PassContext: what it disables or requires, its opt_level and its config
    plain = compile_key(one, "llvm", "zero")
    for ctx in (PassContext(disabled_pass=["FoldConstant"]), PassContext(required_pass=["FoldConstant"]),
                PassContext(opt_level=3), PassContext(config={"relax.BlockChannels.enable": False})):
        with ctx:
            assert compile_key(one, "llvm", "zero") != plain
    with PassContext():
        assert compile_key(one, "llvm", "zero") == plain
    vm = relax.VirtualMachine(tvms.compile(two, target="llvm"), tvms.cpu())
    np.testing.assert_array_equal(vm["main"](np.zeros(2, "float32")).numpy(), [2.0, 2.0])


PLUS_ONE = '''
@T.prim_func
def main(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    for i in range(8):
        b[i] = a[i] + T.float32(1)
'''

CHILD = '''
import json, sys
import numpy as np
import tvms
from tvms.lowering.codegen import object_cache
from tvms.script import from_source
lib = tvms.build(from_source(sys.argv[1]), target="llvm")
a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
lib(a, b)
print(json.dumps({"stats": object_cache.STATS, "out": b.tolist()}))
'''


def _child_build(cache: Path) -> dict:
    """Build PLUS_ONE in a new process with the kernel cache in ``cache``; its cache counters."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CHILD, PLUS_ONE], capture_output=True, text=True,
                          env={**os.environ, "TVMS_CACHE_DIR": str(cache)}, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["out"] == [float(i + 1) for i in range(8)]
    return result["stats"]


def test_kernel_object_code_survives_a_new_process_and_a_corrupt_entry_is_rebuilt(tmp_path: Path) -> None:
    assert _child_build(tmp_path) == {"hits": 0, "misses": 1, "writes": 1, "corrupt": 0}
    entries = list((tmp_path / "kernels").glob("*.bin"))
    assert len(entries) == 1
    assert _child_build(tmp_path) == {"hits": 1, "misses": 0, "writes": 0, "corrupt": 0}
    data = bytearray(entries[0].read_bytes())
    data[-10] ^= 0xFF  # a flipped byte in the object code: the checksum no longer matches
    entries[0].write_bytes(bytes(data))
    assert _child_build(tmp_path) == {"hits": 0, "misses": 0, "writes": 1, "corrupt": 1}
    assert _child_build(tmp_path) == {"hits": 1, "misses": 0, "writes": 0, "corrupt": 0}
    entries[0].write_bytes(b"TVMSOBJ1\n")  # cut short (as a crashed writer without the rename would)
    assert _child_build(tmp_path)["corrupt"] == 1
    assert not list((tmp_path / "kernels").glob(".*.tmp"))  # no temporary file left behind


def test_the_disk_cache_keeps_under_its_size_by_dropping_the_least_recently_used(tmp_path: Path) -> None:
    import os

    from tvms.lowering.codegen.object_cache import prune

    for age, name in enumerate(["old", "middle", "new"]):
        entry = tmp_path / f"{name}.bin"
        entry.write_bytes(b"x" * 1000)
        os.utime(entry, (1_000_000 + age, 1_000_000 + age))
    prune(tmp_path, 3000)  # (within the limit: nothing goes)
    assert len(list(tmp_path.glob("*.bin"))) == 3
    prune(tmp_path, 2500)  # over it: the oldest go until the folder holds at most 2000 bytes
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == ["middle.bin", "new.bin"]
