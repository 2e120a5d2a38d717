"""The compiled VM (``exec_mode="compiled"``, ``lowering/codegen/llvm_vm.py`` +
``runtime/vm_native.py``): its static memory plan (intermediates share storage, reserved once
per VM when ``tir_var_upper_bound`` bounds them), outputs that later calls never overwrite,
results as the interpreter returns them, arguments it does not take served by the interpreter
with its messages, and the functions it leaves to the interpreter named with the reason."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_relax_vm import chain_module

import tvms
from tvms import TVMSError, relax
from tvms.runtime.vm_native import NativeFunction, object_layout
from tvms.script import from_source

RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def bounded_chain(length: int, bound: int) -> str:
    return chain_module(length).replace(
        "        n = T.int64()\n        cls = Module",
        f'        n = T.int64()\n        R.func_attr({{"tir_var_upper_bound": {{"n": {bound}}}}})\n        cls = Module')


def test_intermediates_share_storage_and_outputs_are_fresh() -> None:
    ex = tvms.compile(from_source(chain_module(10)), target="llvm")
    assert ex.stats()["native"] == ["main"] and ex.stats()["interpreted"] == {}
    plan = ex.native["main"].plan
    # nine intermediates (registers 1..9) alternate between two tokens; the result (10) is an output
    assert [t.tensors for t in plan.tokens] == [(1, 3, 5, 7, 9), (2, 4, 6, 8)]
    assert plan.outputs == (10,) and all(t.bound is None for t in plan.tokens)  # (n is unbounded)
    assert ex.stats()["plans"]["main"][0] == "storage 0: %1, %3, %5, %7, %9; ((4 * n) * 16) bytes, allocated per call"
    vm = relax.VirtualMachine(ex, tvms.cpu())
    x = rand(3, 16)
    first = vm["main"](x)
    second = vm["main"](tvms.nd.array(x + 1))
    np.testing.assert_allclose(first.numpy(), x + 10, rtol=1e-6)  # not overwritten by the second call
    np.testing.assert_allclose(second.numpy(), x + 11, rtol=1e-6)
    assert not np.shares_memory(first.array, second.array)
    assert first.array.ctypes.data % 64 == 0 and isinstance(first, tvms.nd.Tensor)
    for n in (5, 1, 5):  # the output's size follows the batch
        y = rand(n, 16)
        np.testing.assert_allclose(vm["main"](y).numpy(), y + 10, rtol=1e-6)
    assert vm.native_stats() == {"main": {"reserved": 0, "fallbacks": 0}}


def test_upper_bound_reserves_storage_once_per_vm() -> None:
    ex = tvms.compile(from_source(bounded_chain(4, 8)), target="llvm")
    plan = ex.native["main"].plan
    # three intermediates in two tokens of 8 x 16 float32, reserved per VM; the result apart
    assert [(t.tensors, t.bound) for t in plan.tokens] == [((1, 3), 512), ((2,), 512)]
    assert ex.native["main"].storage_bytes == 1024
    vm = relax.VirtualMachine(ex, tvms.cpu())
    for n in (8, 2):
        x = rand(n, 16)
        np.testing.assert_allclose(vm["main"](x).numpy(), x + 4, rtol=1e-6)
    assert vm.native_stats() == {"main": {"reserved": 1024, "fallbacks": 0}}
    x = rand(9, 16)  # above the bound: the native code declines, the interpreter runs it
    np.testing.assert_allclose(vm["main"](x).numpy(), x + 4, rtol=1e-6)
    assert vm.native_stats()["main"]["fallbacks"] == 1
    native = vm._native["main"]  # (storage shared with another function must be big enough)
    with pytest.raises(TVMSError, match="the shared storage has 512 bytes, the function reserves 1024"):
        NativeFunction(ex.native["main"], object_layout(), ex.kernels(), vm.constants, native.fallback,
                       None, None, native.storage[:512])


def test_bad_arguments_get_the_interpreters_messages() -> None:
    vm = relax.VirtualMachine(tvms.compile(from_source(chain_module(2)), target="llvm"), tvms.cpu())
    main = vm["main"]
    with pytest.raises(TVMSError, match="argument 'a0': expected dtype float32, got float64"):
        main(np.zeros((2, 16)))
    with pytest.raises(TVMSError, match=r"argument 'a0': dimension 1 should be 16, got 15"):
        main(rand(2, 15))
    with pytest.raises(TVMSError, match="argument 'a0': expected 2 dimensions"):
        main(rand(16))
    with pytest.raises(TVMSError, match=r"main takes 1 arguments \(a0\), got 2"):
        main(rand(2, 16), rand(2, 16))
    # a strided array is not an error: the interpreter copies it
    x = rand(4, 32)[:, ::2]
    np.testing.assert_allclose(main(x).numpy(), x + 2, rtol=1e-6)
    assert vm.native_stats()["main"]["fallbacks"] == 5
    # nor a read-only one the kernels only read: the native code takes it as it is
    x = rand(4, 16)
    x.flags.writeable = False
    np.testing.assert_allclose(main(x).numpy(), x + 2, rtol=1e-6)
    assert vm.native_stats()["main"]["fallbacks"] == 5 and not x.flags.writeable


TUPLE_RESULT = """
@I.ir_module
class Module:
    @T.prim_func
    def add_one(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                B[vi] = A[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
            z = R.call_tir(cls.add_one, (y,), out_sinfo=R.Tensor((4,), dtype="float32"))
            out = (z, x, (y,))
            R.output(out)
        return out
"""


@pytest.mark.parametrize("exec_mode", ["compiled", "bytecode"])
def test_tuple_results_as_the_interpreter_returns_them(exec_mode: str) -> None:
    ex = tvms.compile(from_source(TUPLE_RESULT), target="llvm", exec_mode=exec_mode)
    assert ex.stats()["native"] == (["main"] if exec_mode == "compiled" else [])
    vm = relax.VirtualMachine(ex, tvms.cpu())
    x = tvms.nd.array(np.arange(4, dtype="float32"))
    z, same, (y,) = vm["main"](x)
    np.testing.assert_array_equal(z.numpy(), x.numpy() + 2)
    np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)
    assert np.shares_memory(same.array, x.array)  # a returned parameter is the argument itself


def test_functions_the_native_code_does_not_take_are_interpreted_and_named() -> None:
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        y = R.call_pure_packed("test.vm_native.double", x, sinfo_args=R.Tensor((4,), dtype="float32"))
        return y
""")
    tvms.register_func("test.vm_native.double", lambda a: a.numpy() * 2, override=True)
    ex = tvms.compile(mod, target="llvm")
    assert ex.stats()["native"] == []
    assert ex.stats()["interpreted"] == {"main": "it calls a packed function (test.vm_native.double)"}
    x = rand(4)
    np.testing.assert_allclose(relax.VirtualMachine(ex, tvms.cpu())["main"](x).numpy(), 2 * x)
    bytecode = tvms.compile(from_source(chain_module(1)), target="llvm", exec_mode="bytecode")
    assert bytecode.stats()["interpreted"] == {"main": 'exec_mode="bytecode"'}
    with pytest.raises(TVMSError, match="exec_mode must be one of 'bytecode', 'compiled'"):
        tvms.compile(mod, target="llvm", exec_mode="jit")


PARALLEL = """
@I.ir_module
class Module:
    @T.prim_func
    def double(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
        for i in T.parallel(T.int64(8)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(8), i)
                B[vi] = A[vi] * T.float32(2)

    @R.function
    def main(x: R.Tensor((8,), dtype="float32")) -> R.Tensor((8,), dtype="float32"):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((8,), dtype="float32"))
            R.output(y)
        return y
"""


def test_parallel_kernels_get_the_thread_count_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    ex = relax.build(from_source(PARALLEL), "llvm -num-cores=2", default_schedule=False, exec_mode="compiled")
    kernel = ex.kernels()["double"].compiled
    assert ex.stats()["native"] == ["main"] and kernel.num_threads_address  # (a parallel loop)
    threads = ctypes.c_int32.from_address(kernel.num_threads_address)
    main = relax.VirtualMachine(ex, tvms.cpu())["main"]
    x = rand(8)
    for env, expected in (("3", 3), (None, 2), ("zero", 2)):  # (TVM_NUM_THREADS, else -num-cores)
        if env is None:
            monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("TVM_NUM_THREADS", env)
        threads.value = 0
        np.testing.assert_allclose(main(x).numpy(), 2 * x)
        assert threads.value == expected


def test_plan_best_fit_growth_and_upper_bounds() -> None:
    from tvms.ir.vm_program import Call, Imm, Reg, Ret, Size, VMFunction
    from tvms.lowering.relax.vm_memory_plan import plan_storage, upper_bound

    def alloc(dst: int, *dims) -> Call:
        return Call(dst, "builtin", "vm.builtin.alloc_tensor", (Imm("float32"), Imm(True), *map(Size, dims)))

    def kernel(*regs: int) -> Call:
        return Call(None, "kernel", "k", tuple(map(Reg, regs)))

    n = ("slot", 0)
    code = (alloc(1, 100), kernel(0, 1),          # %1: 400 bytes
            alloc(2, 50), kernel(1, 2),           # %2: 200 bytes, while %1 lives
            alloc(3, 200), kernel(2, 3),          # %1 is dead: %3 (800 bytes) grows its token
            alloc(4, n, 8), kernel(3, 4),         # n * 32 bytes, bounded by n <= 16: %2's token
            alloc(5, ("sub", n, 1)), kernel(4, 5),  # unbounded (n - 1): its own token, per call
            alloc(6, 10), kernel(5, 6), Ret(6))
    f = VMFunction("f", ("x",), 7, ("n",), code, upper_bounds=((0, 16),))
    plan = plan_storage(f)
    # unbounded sizes never share a token reserved per VM (its bytes are fixed when the VM starts)
    assert [(t.tensors, t.bound) for t in plan.tokens] == [((1, 3), 800), ((2, 4), 512), ((5,), None)]
    assert plan.tokens[0].size == 800 and plan.tokens[1].size == ("max", 200, ("mul", ("mul", 4, n), 8))
    assert plan.outputs == (6,)
    assert upper_bound(("floordiv", ("mul", n, 4), 3), {0: 16}) == 21
    assert upper_bound(("min", n, ("slot", 1)), {0: 16}) == 16
    assert upper_bound(("sub", n, 1), {0: 16}) is None and upper_bound(n, {}) is None


IN_PLACE = """
@I.ir_module
class Module:
    @T.prim_func
    def inc(A: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            with T.block("A"):
                vi = T.axis.spatial(T.int64(4), i)
                A[vi] = A[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), w: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Module
        y = R.call_tir_inplace(cls.inc, (x,), inplace_indices=[0], out_sinfo=R.Tensor((4,), dtype="float32"))
        z = R.add(y, w)
        return z
"""


@pytest.mark.parametrize("exec_mode", ["compiled", "bytecode"])
def test_read_only_arguments_and_a_kernel_writing_a_parameter(exec_mode: str) -> None:
    ex = tvms.compile(from_source(IN_PLACE), target="llvm", exec_mode=exec_mode)
    assert ex.stats()["native"] == (["main"] if exec_mode == "compiled" else [])
    vm = relax.VirtualMachine(ex, tvms.cpu())
    w = np.full(4, 10, "float32")
    w.flags.writeable = False  # (only read: the native code takes it as it is)
    x = np.zeros(4, "float32")
    np.testing.assert_array_equal(vm["main"](x, w).numpy(), np.full(4, 11))
    np.testing.assert_array_equal(x, np.ones(4))  # the kernel wrote the argument itself
    x.flags.writeable = False  # written by a kernel: the interpreter runs it on a copy
    np.testing.assert_array_equal(vm["main"](x, w).numpy(), np.full(4, 12))
    np.testing.assert_array_equal(x, np.ones(4))
    if exec_mode == "compiled":
        assert vm.native_stats()["main"]["fallbacks"] == 1


UNPROVEN = """
@I.ir_module
class Module:
    @T.prim_func
    def add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        C = T.match_buffer(c, (n,))
        for i in range(n):
            with T.block("C"):
                vi = T.axis.spatial(n, i)
                C[vi] = A[vi] + B[vi]

    @R.function
    def main(x: R.Tensor(("m",), dtype="float32"), y: R.Tensor(("k",), dtype="float32")) -> R.Tensor(("m",), dtype="float32"):
        m = T.int64()
        cls = Module
        gv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((m,), dtype="float32"))
        return gv
"""


def test_a_checked_kernel_call_checks_natively() -> None:
    ex = tvms.compile(from_source(UNPROVEN), target="llvm", default_schedule=False)
    assert ex.stats()["native"] == ["main"] and [i.checked for i in ex.program.function("main").code
                                                 if getattr(i, "kind", None) == "kernel"] == [True]
    vm = relax.VirtualMachine(ex, tvms.cpu())
    x, y = rand(3), rand(3)
    np.testing.assert_allclose(vm["main"](x, y).numpy(), x + y, rtol=1e-6)
    assert vm.native_stats()["main"]["fallbacks"] == 0
    with pytest.raises(TVMSError, match="dimension 0: expected extent 3, got 4"):
        vm["main"](x, rand(4))  # (m != k: the native code declines, the kernel's check says why)
    assert vm.native_stats()["main"]["fallbacks"] == 1


def test_a_crafted_library_description_is_refused_not_run(tmp_path) -> None:
    """A library's description of its native functions is data from a user's file: a ``result``
    holding code, an index out of range or a ``ctx_size`` its fields do not give is refused
    (a TVMSError naming the library), never evaluated."""
    import json
    import re

    from tvms.runtime.library_file import TRAILER_SIZE, append_trailer, verify_library

    good = tmp_path / "chain.so"
    tvms.compile(from_source(chain_module(2)), target="llvm").export_library(str(good))
    raw = verify_library(str(good))
    metadata, image = json.loads(raw), good.read_bytes()[:-TRAILER_SIZE - len(raw)]
    marker = tmp_path / "ran"
    evil = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    for k, (field, value, message) in enumerate((
            ("result", {"tuple": ["out", evil]}, "expected an integer"),
            ("result", {"tuple": [evil, 0]}, "a result leaf is not"),
            ("result", {"tuple": [{"tuple": ["param", 7]}]}, "the result's param 7 is out of range"),
            ("result", {"tuple": ["const", 9]}, "does not fit the program"),
            ("outputs", [["float32", [evil], 17]], "expected an integer"),
            ("outputs", [["object", [4], 17]], "not a dtype of numbers"),
            ("ctx_size", metadata["native_vm"][0]["ctx_size"] + 1, "its fields take"),
            ("kernels", "add", "kernels is not a list"))):
        crafted = json.loads(json.dumps(metadata))
        crafted["native_vm"][0][field] = value
        path = tmp_path / f"crafted{k}.so"
        path.write_bytes(image)
        append_trailer(str(path), json.dumps(crafted).encode())
        with pytest.raises(TVMSError, match=f"{re.escape(str(path))}.*{message}"):
            relax.VirtualMachine(tvms.runtime.load_module(str(path)), tvms.cpu())["main"](rand(2, 16))
    assert not marker.exists()
    vm = relax.VirtualMachine(tvms.runtime.load_module(str(good)), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x := rand(2, 16)).numpy(), x + 2, rtol=1e-6)
