"""What a script's text may call by name. tvms's own plumbing is registered as global functions
too (loaders, codegen backends, kernel factories); ``R.call_packed``, ``R.ExternFunc`` and a host
function's ``T.call_packed`` reach only functions meant for programs: the user's, and tvms's
runtime library (``tvms.random.*``, ``runtime.cuTensorMapEncodeTiled``). On the llvm target,
``T.call_extern`` names only C math functions, since code there is linked into this process, where
``system`` or ``PyRun_SimpleString`` would run what the data says; the PassContext option
``tvms.extern_functions`` lets more through."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.registry import get_script_func, register_func, remove_global_func
from tvms.lowering.pass_config import parse_pass_configs
from tvms.runtime.reference import run_prim_func
from tvms.runtime.reference_relax import run_relax
from tvms.script import from_source

INTERNAL = "runtime.module.load_llvm"  # (registered whenever tvms is imported)

# tvms's own functions a program may call by name; any other function tvms registers must be
# registered internal=True (a new one fails the test below until it is put in one class or the other)
FOR_PROGRAMS = {
    "relax.run.assert_op", "relax.run.nonzero", "relax.run.print", "relax.run.shape_to_tensor", "relax.run.unique",
    "runtime.cuTensorMapEncodeTiled", "tvms.image.decode", "tvms.onnx.specialized_node",
    "tvms.optional.get_element", "tvms.optional.has_element", "tvms.random.multinomial", "tvms.random.normal",
    "tvms.random.uniform", "tvms.sequence.erase", "tvms.sequence.insert", "tvms.sequence.length",
    "tvms.sequence.position", "tvms.string.concat", "tvms.string.equal", "tvms.string.lookup",
    "tvms.string.normalize", "tvms.string.regex_full_match", "tvms.string.split", "vm.builtin.call_py_func",
}


def test_every_function_tvms_registers_is_internal_or_meant_for_programs() -> None:
    """In a fresh process with every layer loaded (the cuBLAS backend's module too)."""
    script = ("import json, tvms, tvms.relax.backend.cuda.cublas\n"
              "from tvms.ir.registry import _INTERNAL, list_global_func_names\n"
              "names = list_global_func_names()\n"
              "print(json.dumps([[n for n in names if n not in _INTERNAL], sorted(_INTERNAL)]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    callable_names, internal = json.loads(done.stdout)
    assert set(callable_names) <= FOR_PROGRAMS, set(callable_names) - FOR_PROGRAMS
    assert {"runtime.module.load_llvm", "runtime.vm.executable", "relax.ext.cpu_blas"} <= set(internal)


RELAX = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        y = R.call_packed("{name}", x, sinfo_args=(R.Tensor((3,), dtype="float32"),))
        return y
'''

EXTERN_FUNC = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        gv: R.Callable = R.ExternFunc("{name}")
        y = R.call_dps_packed(gv, (x,), out_sinfo=R.Tensor((3,), dtype="float32"))
        return y
'''


def _run_both_ways(text: str, x: np.ndarray) -> list:
    """The module run by the reference and by the VM (llvm)."""
    mod = from_source(text)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return [run_relax(mod, "main", x), vm["main"](tvms.nd.array(x)).numpy()]


@pytest.mark.parametrize("template", [RELAX, EXTERN_FUNC], ids=["call_packed", "extern_func"])
def test_a_relax_script_cannot_call_tvms_internal_functions(template) -> None:
    mod = from_source(template.format(name=INTERNAL))
    x = np.ones(3, "float32")
    with pytest.raises(TVMSError, match=f"the global function '{INTERNAL}' is internal to tvms"):
        run_relax(mod, "main", x)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    with pytest.raises(TVMSError, match=f"the global function '{INTERNAL}' is internal to tvms"):
        vm["main"](tvms.nd.array(x))


def test_a_relax_script_calls_the_users_functions_and_tvms_runtime_library() -> None:
    tvms.register_func("test.reach.twice", lambda x: tvms.nd.array(x.numpy() * 2), override=True)
    tvms.register_func("test.reach.plus_one", lambda x, out: out.copyfrom(x.numpy() + 1), override=True)
    try:
        x = np.arange(3, dtype="float32")
        for out in _run_both_ways(RELAX.format(name="test.reach.twice"), x):
            np.testing.assert_array_equal(out, x * 2)
        for out in _run_both_ways(EXTERN_FUNC.format(name="test.reach.plus_one"), x):
            np.testing.assert_array_equal(out, x + 1)
    finally:
        remove_global_func("test.reach.twice")
        remove_global_func("test.reach.plus_one")
    assert get_script_func("tvms.random.uniform") is tvms.get_global_func("tvms.random.uniform")
    assert get_script_func("runtime.cuTensorMapEncodeTiled") is not None


def test_an_internal_name_the_user_registers_anew_is_the_users() -> None:
    """A user's override of an internal name replaces tvms's function; the script then calls it."""
    original = tvms.get_global_func(INTERNAL)
    tvms.register_func(INTERNAL, lambda x: tvms.nd.array(x.numpy() + 5), override=True)
    try:
        x = np.zeros(3, "float32")
        np.testing.assert_array_equal(run_relax(from_source(RELAX.format(name=INTERNAL)), "main", x), x + 5)
    finally:
        register_func(INTERNAL, original, override=True, internal=True)
    with pytest.raises(TVMSError, match="internal to tvms"):
        get_script_func(INTERNAL)


HOST_CALL = '''# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((16, 16), "float16", align=16), B: T.Buffer((1,), "int32")):
    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.call_packed("{name}", A_map, "float16", 2, A.data, 16, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0)
    with T.attr({{"tirx.device_entry": T.bool(True)}}):
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(1, thread="threadIdx.x"):
                B[0] = 1
'''


def test_a_host_function_calls_only_functions_meant_for_programs() -> None:
    """T.call_packed of tvms's own plumbing is refused, by the CUDA host function and by the
    executor run whole alike, and nothing is launched; the tensor-map encoder is callable."""
    from tvms.runtime.cuda_module import ReferenceLauncher

    a, b = np.zeros((16, 16), "float16"), np.zeros(1, "int32")
    text = HOST_CALL.format(name="runtime.vm.executable")
    with pytest.raises(TVMSError, match="the global function 'runtime.vm.executable' is internal to tvms"):
        tvms.build(from_source(text), target="cuda").with_launcher(ReferenceLauncher())["main"](a, b)
    with pytest.raises(TVMSError, match="the global function 'runtime.vm.executable' is internal to tvms"):
        run_prim_func(from_source(text), a, b)
    assert b[0] == 0
    run_prim_func(from_source(HOST_CALL.format(name="runtime.cuTensorMapEncodeTiled")), a, b)
    assert b[0] == 1


EXTERN = '''# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "float32"), S: T.Buffer((8,), "int8")):
    for i in range(4):
        A[i] = T.Cast("float32", T.call_extern("int32", "{name}", S.data))
'''


@pytest.mark.parametrize("name", ["system", "PyRun_SimpleString", "unlink", "dlopen", "fork"])
def test_call_extern_of_a_process_function_is_refused_on_llvm(name) -> None:
    with pytest.raises(TVMSError, match=rf"T.call_extern\('{name}'\): the llvm target calls only C math library "
                                        r"functions .* PassContext option tvms.extern_functions names them"):
        tvms.build(from_source(EXTERN.format(name=name)), target="llvm")


def test_call_extern_of_c_math_functions_builds_and_runs() -> None:
    text = EXTERN.replace('T.Cast("float32", T.call_extern("int32", "{name}", S.data))',
                          'T.call_extern("float32", "{name}", A[i])')
    for name, reference in [("expf", np.exp), ("cbrtf", np.cbrt), ("tanhf", np.tanh),
                            ("erfcf", np.vectorize(math.erfc))]:
        a = np.linspace(0.1, 2, 4).astype("float32")
        expected = reference(a)
        tvms.build(from_source(text.format(name=name)), target="llvm")(a, np.zeros(8, "int8"))
        np.testing.assert_allclose(a, expected, rtol=1e-6)


def test_the_pass_context_lets_named_functions_through() -> None:
    """The user's own code (not the script) may name more functions: libc's strlen here, which
    counts the bytes of S up to its first zero."""
    s = np.frombuffer(b"tvms\0\0\0\0", "int8").copy()
    a = np.zeros(4, "float32")
    for value in (["strlen"], "abs, strlen"):
        with tvms.transform.PassContext(config={"tvms.extern_functions": value}):
            lib = tvms.build(from_source(EXTERN.format(name="strlen")), target="llvm")
        a[:] = 0
        lib(a, s)
        np.testing.assert_array_equal(a, [4, 4, 4, 4])
    with tvms.transform.PassContext(config={"tvms.extern_functions": [3]}):
        with pytest.raises(TVMSError, match="tvms.extern_functions: expected a list of function names, got \\[3\\]"):
            tvms.build(from_source(EXTERN.format(name="strlen")), target="llvm")
    with tvms.transform.PassContext(config={"tvms.extern_functions": ["strlen"]}):
        with pytest.raises(TVMSError, match=r"T.call_extern\('system'\)"):
            tvms.build(from_source(EXTERN.format(name="system")), target="llvm")


def test_the_command_line_names_functions_with_pass_config() -> None:
    assert parse_pass_configs(["tvms.extern_functions=usleep, my_fn"]) == {"tvms.extern_functions": ["usleep", "my_fn"]}
    with pytest.raises(TVMSError, match="expected names separated by commas"):
        parse_pass_configs(["tvms.extern_functions= , "])


def test_call_pure_extern_is_refused_by_its_own_name() -> None:
    text = EXTERN.replace('T.call_extern("int32"', 'T.call_pure_extern("int32"').format(name="system")
    with pytest.raises(TVMSError, match=r"T.call_pure_extern\('system'\): the llvm target calls only"):
        tvms.build(from_source(text), target="llvm")


def test_a_pass_context_of_another_thread_lets_nothing_through() -> None:
    """PassContexts are per thread, as in TVM: a trusted thread's allowance is not a build's of
    another thread (it was: the entered contexts were one list for the process)."""
    import threading

    inside, finish = threading.Event(), threading.Event()

    def trusted() -> None:
        with tvms.transform.PassContext(config={"tvms.extern_functions": ["getpid"]}):
            inside.set()
            finish.wait(30)

    thread = threading.Thread(target=trusted)
    thread.start()
    try:
        assert inside.wait(30)
        with pytest.raises(TVMSError, match=r"T.call_extern\('getpid'\)"):
            tvms.build(from_source(EXTERN.format(name="getpid")), target="llvm")
    finally:
        finish.set()
        thread.join()


OFFLOADED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def fused_relax_matmul_cpu_blas(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        R.func_attr({{"Codegen": "cpu_blas", "global_symbol": "{symbol}"}})
        # from tvm.script import relax as R

        @R.function
        def local_func(x_1: R.Tensor((2, 3), dtype="float32"), w_1: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
            R.func_attr({{"Composite": "cpu_blas.matmul"}})
            with R.dataflow():
                gv: R.Tensor((2, 4), dtype="float32") = R.matmul(x_1, w_1, out_dtype="void")
                R.output(gv)
            return gv

        output: R.Tensor((2, 4), dtype="float32") = local_func(x, w)
        return output

    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        cls = Module
        with R.dataflow():
            gv: R.Tensor((2, 4), dtype="float32") = cls.fused_relax_matmul_cpu_blas(x, w)
            R.output(gv)
        return gv
'''


def test_an_offloaded_function_cannot_take_the_name_of_a_registered_one() -> None:
    """RunCodegen registers what a backend builds under the function's global_symbol: a name that
    is already a global function (tvms's loader, or the user's) is refused, not replaced; its own
    earlier symbols are registered again."""
    loader = tvms.get_global_func(INTERNAL)
    tvms.register_func("test.reach.users", lambda: None, override=True)
    try:
        for taken in (INTERNAL, "test.reach.users"):
            with pytest.raises(TVMSError, match=f"RunCodegen: the offloaded function's symbol '{taken}' is the "
                                                 f"name of a global function already registered"):
                tvms.relax.transform.RunCodegen()(from_source(OFFLOADED.format(symbol=taken)))
        assert tvms.get_global_func(INTERNAL) is loader
        x, w = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
        for _ in range(2):
            mod = tvms.relax.transform.RunCodegen()(from_source(OFFLOADED.format(symbol="test_reach_matmul")))
            np.testing.assert_array_equal(run_relax(mod, "main", x, w), x @ w)
    finally:
        remove_global_func("test.reach.users")


BIASED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        with R.dataflow():
            y: R.Tensor((2, 4), dtype="float32") = R.matmul(x, w)
            z: R.Tensor((2, 4), dtype="float32") = R.add(y, R.const(BIAS, "float32"))
            R.output(z)
        return z
'''


def test_two_modules_offloading_one_symbol_each_call_their_own() -> None:
    """Two modules alike but for a constant offload a function of one symbol: each executable
    (and the reference on each module) calls its own, with its own constant (the second's had
    replaced the first's by name, and compile's cache, keyed on the text, which does not show
    the constant, had returned the first executable for the second)."""
    from tvms.relax.backend import get_patterns_with_prefix

    x, w = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
    modules = []
    for bias in (1, 100):
        mod = from_source(BIASED.replace("BIAS", str(bias)))
        mod = tvms.relax.transform.FuseOpsByPattern(get_patterns_with_prefix("cpu_blas"), annotate_codegen=True)(mod)
        modules.append((bias, tvms.relax.transform.RunCodegen()(mod)))
    executables = [(bias, mod, tvms.compile(mod, target="llvm")) for bias, mod in modules]
    assert "call_dps_packed" in modules[0][1].script()
    for bias, mod, ex in executables:
        np.testing.assert_array_equal(tvms.relax.VirtualMachine(ex, tvms.cpu())["main"](x, w).numpy(), x @ w + bias)
        np.testing.assert_array_equal(run_relax(mod, "main", x, w), x @ w + bias)


def test_a_module_reaches_its_own_offloaded_function_through_a_value_too() -> None:
    """R.ExternFunc bound to a variable (the VM's get_packed) finds the module's own function as
    a call by name does; an executable holding offloaded functions is not exported (their code
    lives in this process), with the symbols named."""
    from tvms.relax.backend import get_patterns_with_prefix

    x, w = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
    offloaded = []
    for bias in (1, 100):
        mod = from_source(BIASED.replace("BIAS", str(bias)))
        mod = tvms.relax.transform.FuseOpsByPattern(get_patterns_with_prefix("cpu_blas"), annotate_codegen=True)(mod)
        offloaded.append(tvms.relax.transform.RunCodegen()(mod))
    symbol = "fused_relax_matmul_relax_add_cpu_blas"
    call = f'R.call_dps_packed("{symbol}", (x, w), out_sinfo=R.Tensor((2, 4), dtype="float32"))'
    text = BIASED.split("    @R.function")[0] + f"""    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        f: R.Callable = R.ExternFunc("{symbol}")
        y = R.call_dps_packed(f, (x, w), out_sinfo=R.Tensor((2, 4), dtype="float32"))
        return y
"""
    by_value = from_source(text).with_attrs(dict(offloaded[0].attrs))
    assert call not in by_value.script()
    ex = tvms.compile(by_value, target="llvm")
    np.testing.assert_array_equal(tvms.relax.VirtualMachine(ex, tvms.cpu())["main"](x, w).numpy(), x @ w + 1)
    np.testing.assert_array_equal(run_relax(by_value, "main", x, w), x @ w + 1)
    with pytest.raises(TVMSError, match=f"export_library: the functions {symbol} were offloaded"):
        ex.export_library("/nonexistent/never-written.so")
