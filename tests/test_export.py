"""``Module.export_library`` / ``tvms.runtime.load_module``: a shipped library runs on its own."""
from __future__ import annotations

import base64
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.ir.vm_program import deserialize  # noqa: E402
from tvms.runtime.export import read_metadata  # noqa: E402
from tvms.script import from_source  # noqa: E402

from conftest import CORPUS_COPY  # noqa: E402

FIXTURE_MATMUL = CORPUS_COPY / "lower_matmul_sched_cpu_03_FlattenBuffer.tvms"

# two functions in one library, both with parallel loops (each keeps its own thread count)
TWO_KERNELS = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def scale_add(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32"), C: T.Buffer((1000,), "float32")):
        for i_0 in T.parallel(125):
            for i_1 in T.vectorized(8):
                C[i_0 * 8 + i_1] = A[i_0 * 8 + i_1] * T.float32(2.0) + B[i_0 * 8 + i_1]

    @T.prim_func
    def relu(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n * 2,), "float32")
        for i in T.parallel(n):
            B[i] = T.max(A[i], T.float32(0.0))
            B[i + n] = T.exp(A[i])
"""


@pytest.fixture(scope="module")
def two_kernels_lib(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lib") / "kernels.so"
    tvms.build(from_source(TWO_KERNELS), target="llvm -num-cores=2").export_library(str(path))
    return path


def _matmul_inputs() -> tuple:
    rng = np.random.default_rng(0)
    return rng.random((128, 128), dtype=np.float32), rng.random((128, 128), dtype=np.float32)


def test_loaded_library_in_a_fresh_process_gives_the_same_numbers(tmp_path):
    func = from_source(FIXTURE_MATMUL.read_text())["main"]  # parallel + vectorized loops
    lib = tvms.build(func)
    a, b = _matmul_inputs()
    expected = np.zeros((128, 128), np.float32)
    lib(a, b, expected)
    np.testing.assert_allclose(expected, a @ b, rtol=1e-4)
    shipped = tmp_path / "ship"
    shipped.mkdir()
    lib.export_library(str(shipped / "matmul.so"))
    np.save(shipped / "a.npy", a)
    np.save(shipped / "b.npy", b)
    # the child sees only the library and the inputs: no source, no build
    script = textwrap.dedent("""
        import sys, numpy as np, tvms
        lib = tvms.runtime.load_module("matmul.so")
        c = np.zeros((128, 128), np.float32)
        lib["main"](np.load("a.npy"), np.load("b.npy"), c)
        from tvms.lowering.codegen import compile as codegen
        assert not codegen._CACHE, "the child compiled something"
        np.save("c.npy", c)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=shipped, capture_output=True, text=True,
                          env={**os.environ, "TVM_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(shipped / "c.npy"), expected)


def test_two_parallel_kernels_from_one_library(two_kernels_lib, monkeypatch):
    lib = tvms.runtime.load_module(str(two_kernels_lib))
    assert sorted(lib.functions) == ["relu", "scale_add"]
    rng = np.random.default_rng(3)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    c = np.zeros(1000, np.float32)
    lib["scale_add"](a, b, c)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)
    for threads in ("1", "3"):
        monkeypatch.setenv("TVM_NUM_THREADS", threads)
        x = np.linspace(-2, 2, 7, dtype=np.float32)  # symbolic n = 7, bound from the argument
        y = np.zeros(14, np.float32)
        lib["relu"](x, y)
        np.testing.assert_allclose(y, np.concatenate([np.maximum(x, 0), np.exp(x)]), rtol=1e-6)


def test_loaded_functions_check_their_arguments(two_kernels_lib):
    lib = tvms.runtime.load_module(str(two_kernels_lib))
    x = np.zeros(7, np.float32)
    with pytest.raises(TVMSError, match=r"relu argument 1 \(B\): dimension 0: expected extent 14, got 7"):
        lib["relu"](x, np.zeros(7, np.float32))
    with pytest.raises(TVMSError, match=r"expected dtype float32, got float64"):
        lib["relu"](x.astype(np.float64), np.zeros(14, np.float32))
    with pytest.raises(TVMSError, match=r"takes 3 arguments \(A, B, C\), got 1"):
        lib["scale_add"](x)
    with pytest.raises(TVMSError, match="no function 'main'"):
        lib["main"]
    with pytest.raises(TVMSError, match="machine code only"):
        lib.get_source("asm")


def test_time_evaluator_of_a_loaded_library(two_kernels_lib):
    lib = tvms.runtime.load_module(str(two_kernels_lib))
    args = (np.ones(1000, np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32))
    result = lib.time_evaluator("scale_add", tvms.cpu(), number=3, repeat=2)(*args)
    assert len(result.results) == 2 and 0 < result.min <= result.mean
    np.testing.assert_array_equal(args[2], np.full(1000, 3, np.float32))


def test_metadata_names_functions_signatures_and_target(two_kernels_lib):
    metadata, _ = read_metadata(str(two_kernels_lib))
    assert metadata["target"] == "llvm -num-cores=2"
    assert metadata["vm_program"] is None
    by_name = {f["name"]: f for f in metadata["functions"]}
    relu = by_name["relu"]
    assert relu["params"] == [{"name": "A", "dtype": "float32", "shape": ["n"]},
                              {"name": "B", "dtype": "float32", "shape": ["n * 2"]}]
    assert relu["slots"] == ["A", "B", "n"] and relu["outputs"] == [1]
    assert relu["symbol"] == "tvms_relu" and relu["num_threads_symbol"] == "tvms_relu__num_threads"
    assert by_name["scale_add"]["params"][2] == {"name": "C", "dtype": "float32", "shape": [1000]}
    assert by_name["scale_add"]["outputs"] == [2]
    # the signature is data (the runtime never parses TVMScript): sizes as expression lists
    b = relu["signature"]["params"][1]["buffer"]
    assert b["name"] == "B" and b["dtype"] == "float32"
    assert b["shape"] == [["mul", ["var", "n", "int32"], ["int", 2, "int32"]]]


def test_the_pthread_thread_pool_works_from_a_library(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMS_THREAD_POOL", "pthread")
    lib = tvms.build(from_source(TWO_KERNELS))
    assert "pthread_create" in lib.get_source("ll")
    lib.export_library(str(tmp_path / "pthread.so"))
    loaded = tvms.runtime.load_module(str(tmp_path / "pthread.so"))
    x = np.linspace(-1, 1, 33, dtype=np.float32)
    y = np.zeros(66, np.float32)
    loaded["relu"](x, y)
    np.testing.assert_allclose(y[:33], np.maximum(x, 0))


def test_missing_c_compiler_is_a_clear_error_and_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.so"
    path.write_bytes(b"old")
    lib = tvms.build(from_source(TWO_KERNELS))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(TVMSError, match=r"needs a C compiler .*'cc' was not found on PATH"):
        lib.export_library(str(path))
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["model.so"]


def test_export_replaces_atomically_without_leftovers(tmp_path):
    path = tmp_path / "model.so"
    path.write_bytes(b"old")
    tvms.build(from_source(TWO_KERNELS)).export_library(str(path))
    assert path.read_bytes()[:4] == b"\x7fELF"
    assert [p.name for p in tmp_path.iterdir()] == ["model.so"]


def test_a_loaded_library_cannot_be_exported_again(two_kernels_lib, tmp_path):
    lib = tvms.runtime.load_module(str(two_kernels_lib))
    with pytest.raises(TVMSError, match="cannot be exported again"):
        lib.export_library(str(tmp_path / "again.so"))


MLP = Path(__file__).parent.parent / "examples" / "mlp.tvms"  # the corpus MLP, batch n symbolic


def test_relax_executable_ships_its_program_and_kernels(tmp_path):
    from tvms.runtime.reference_relax import run_relax

    mod = from_source(MLP.read_text())
    ex = tvms.compile(mod, target="llvm")
    ex.export_library(str(tmp_path / "mlp.so"))
    metadata, _ = read_metadata(str(tmp_path / "mlp.so"))
    assert deserialize(base64.b64decode(metadata["vm_program"])).as_text() == ex.as_text()
    assert sorted(f["name"] for f in metadata["functions"]) == sorted(ex.kernels().functions)
    rng = np.random.default_rng(5)
    shapes = [(3, 784), (256, 784), (256,), (10, 256), (10,)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for k, arr in enumerate(inputs):
        np.save(tmp_path / f"in{k}.npy", arr)
    script = textwrap.dedent("""
        import numpy as np, tvms
        ex = tvms.runtime.load_module("mlp.so")
        assert type(ex).__name__ == "Executable", ex
        vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
        out = vm["forward"](*[np.load(f"in{k}.npy") for k in range(5)])
        np.save("out.npy", out.numpy())
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = run_relax(mod, "forward", *inputs)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-4, atol=1e-3)


# two private kernels, with one body when factor and addend are 1 (as ConcatInPlace makes for two
# concatenations alike): a private function prints no name, so its text cannot tell the two apart
TWIN_KERNELS = """# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def {first}(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32({addend})

    @T.prim_func(private=True)
    def {second}(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32({factor})

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        y = R.call_tir(cls.{first}, (x,), out_sinfo=R.Tensor((8,), "float32"))
        z = R.call_tir(cls.{second}, (y,), out_sinfo=R.Tensor((8,), "float32"))
        return z
"""


def _exported_and_run(mod, path: Path) -> np.ndarray:
    tvms.compile(mod, target="llvm").export_library(str(path))
    vm = tvms.relax.VirtualMachine(tvms.runtime.load_module(str(path)), tvms.cpu())
    return vm["main"](np.arange(8, dtype=np.float32)).numpy()


def test_two_kernels_with_one_body_link_into_one_library(tmp_path):
    # (the second body made equal to the first: adds one)
    text = TWIN_KERNELS.format(first="add_one", second="add_one_again", addend=1.0, factor=1.0)
    mod = from_source(text.replace("A[vi] * T.float32(1.0)", "A[vi] + T.float32(1.0)"))
    np.testing.assert_array_equal(_exported_and_run(mod, tmp_path / "twins.so"), np.arange(8) + 2)


def test_a_kernel_compiled_before_under_another_name_keeps_its_symbol(tmp_path):
    # g adds 5 in the first module and doubles in the second, whose f adds 5: f has the body g
    # had, yet must define its own symbol (g's code is the second module's g); 5: a body no
    # other test compiles in this process, where the cache would give it another's symbol
    tvms.compile(from_source(TWIN_KERNELS.format(first="g", second="h", addend=5.0, factor=3.0)), target="llvm")
    mod = from_source(TWIN_KERNELS.format(first="f", second="g", addend=5.0, factor=2.0))
    np.testing.assert_array_equal(_exported_and_run(mod, tmp_path / "second.so"), (np.arange(8) + 5) * 2)


def test_a_kernel_named_like_a_vm_function_leaves_it_native(tmp_path):
    # a kernel's symbol is tvms_ and its name: vm_main's once was main's native code's too, and
    # export dropped main's (the loaded executable interpreted it)
    text = TWIN_KERNELS.format(first="vm_main", second="double", addend=1.0, factor=2.0)
    np.testing.assert_array_equal(_exported_and_run(from_source(text), tmp_path / "vm.so"), (np.arange(8) + 1) * 2)
    assert tvms.runtime.load_module(str(tmp_path / "vm.so")).stats()["native"] == ["main"]


def test_kernel_names_that_make_one_symbol_link_apart(tmp_path):
    from tvms.ir.module import IRModule

    # (tvms_ and the name, "." made "_": both tvms_a_b)
    add, double = (from_source(TWIN_KERNELS.format(first="f", second="g", addend=1.0, factor=2.0))[k] for k in "fg")
    tvms.build(IRModule({"a.b": add, "a_b": double})).export_library(str(tmp_path / "ab.so"))
    lib = tvms.runtime.load_module(str(tmp_path / "ab.so"))
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    lib["a.b"](x, y)
    np.testing.assert_array_equal(y, x + 1)
    lib["a_b"](x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_relax_function_names_that_make_one_symbol_link_apart(tmp_path):
    from tvms.ir.module import IRModule

    # (tvmsvm_ and the name, "." made "_": both tvmsvm_a_b, and the link failed)
    add_only = """
    @R.function
    def add_only(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        y = R.call_tir(cls.f, (x,), out_sinfo=R.Tensor((8,), "float32"))
        return y
"""
    mod = from_source(TWIN_KERNELS.format(first="f", second="g", addend=1.0, factor=2.0) + add_only)
    renamed = IRModule({"f": mod["f"], "g": mod["g"], "a.b": mod["main"], "a_b": mod["add_only"]})
    tvms.compile(renamed, target="llvm").export_library(str(tmp_path / "ab.so"))
    ex = tvms.runtime.load_module(str(tmp_path / "ab.so"))
    assert ex.stats()["native"] == ["a.b", "a_b"]
    vm, x = tvms.relax.VirtualMachine(ex, tvms.cpu()), np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(vm["a.b"](x).numpy(), (x + 1) * 2)
    np.testing.assert_array_equal(vm["a_b"](x).numpy(), x + 1)


# n is A's and C's size and a parameter after them
SIZE_PARAMETER = """# from tvm.script import tir as T

@T.prim_func
def main(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.block("c"):
            vi = T.axis.spatial(n, i)
            C[vi] = A[vi] * T.float32(2) + T.float32(1)
"""


def test_a_scalar_parameter_that_is_a_buffer_size_loads(tmp_path):
    # loading once made A's n apart from the parameter n ("the signature of main ... does not
    # match its slots")
    tvms.build(from_source(SIZE_PARAMETER)).export_library(str(tmp_path / "n.so"))
    lib = tvms.runtime.load_module(str(tmp_path / "n.so"))
    for n in (0, 1, 77, 1000):
        a, c = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
        lib(a, c, n)
        np.testing.assert_array_equal(c, a * 2 + 1)


def test_a_size_parameter_other_than_the_arrays_extent_is_an_error(tmp_path):
    # (the arrays' extent once replaced the n passed, unsaid)
    built = tvms.build(from_source(SIZE_PARAMETER))
    built.export_library(str(tmp_path / "n.so"))
    for module in (built, tvms.runtime.load_module(str(tmp_path / "n.so"))):
        with pytest.raises(TVMSError, match=r"argument 2 \(n\): 5 is not the extent 3"):
            module(np.zeros(3, np.float32), np.zeros(3, np.float32), 5)


# --------------------------------------------------------------------------- lifted weights


@pytest.fixture(scope="module")
def lifted_mlp(tmp_path_factory) -> tuple:
    """The MLP compiled (its weight transposes lifted: ``forward_lifted``), its library, and inputs."""
    ex = tvms.compile(from_source(MLP.read_text()), target="llvm")
    path = tmp_path_factory.mktemp("lifted") / "mlp.so"
    ex.export_library(str(path))
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in [(3, 784), (256, 784), (256,), (10, 256), (10,)]]
    return ex, path, inputs


def _calls_of(ex, inputs: list, times: int = 3) -> tuple:
    """The results of ``times`` calls of forward with the same weights, and the VM that made them."""
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    return [vm["forward"](*inputs).numpy() for _ in range(times)], vm


def test_a_lifted_functions_call_with_cached_weights_is_native_after_load(lifted_mlp):
    # the library once kept only forward as written: loaded, each call transposed the weights
    # again (no lifting, no native code of the call with cached weights)
    ex, path, inputs = lifted_mlp
    loaded = tvms.runtime.load_module(str(path))
    assert loaded.lifted_params == ex.lifted_params == {"forward": ("forward_lifted", "forward_transform_params", 1, 4)}
    assert loaded.stats()["lifted"] == ex.stats()["lifted"] == {"forward": "native"}
    assert loaded.lifted_native["forward"].address  # (its code is the library's)
    want, _ = _calls_of(ex, inputs)
    got, vm = _calls_of(loaded, inputs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert vm.param_cache.transforms == 1  # the weights transformed once, by the first call ...
    assert vm._native["forward"].artifact is loaded.lifted_native["forward"]
    assert vm.native_stats()["forward"]["fallbacks"] == 1  # ... the later ones one native call each


def _with_metadata(path: Path, to: Path, change) -> Path:
    """A copy of the library at ``path`` whose metadata ``change`` (a function of the JSON) rewrote."""
    import json

    from tvms.runtime.library_file import TRAILER_SIZE, append_trailer, verify_library

    raw = verify_library(str(path))
    metadata = json.loads(raw)
    change(metadata)
    to.write_bytes(path.read_bytes()[:-TRAILER_SIZE - len(raw)])
    append_trailer(str(to), json.dumps(metadata).encode())
    return to


def test_a_library_without_its_lifted_functions_runs_them_as_written(lifted_mlp, tmp_path):
    # (as an older tvms wrote it: no "lifted_vm"; forward runs natively, weights transposed at each call)
    ex, path, inputs = lifted_mlp
    old = tvms.runtime.load_module(str(_with_metadata(path, tmp_path / "old.so", lambda m: m.pop("lifted_vm"))))
    assert old.lifted_params == {} and old.stats()["lifted"] == {} and "forward" in old.stats()["native"]
    want, _ = _calls_of(ex, inputs, 1)
    got, vm = _calls_of(old, inputs, 1)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert vm.param_cache.transforms == 0 and vm._native["forward"].artifact.name == "forward"


def _set(field: str, value):
    def change(metadata: dict) -> None:
        entry = metadata["lifted_vm"][0]
        if field in entry:
            entry[field] = value
        else:
            entry["native"][field] = value
    return change


_LOOP = "does not fit the program .*its lifted form and its transform must be two other functions, neither lifted"
_UNSHARED = "does not fit the program .*does not share the kernels, constants, outputs and storage of forward_lifted's"


@pytest.mark.parametrize("change, message", [
    (_set("num_weights", 3), "the lifted function forward in .* does not fit the program"),
    (_set("transform", "nowhere"), "the lifted function forward in .* does not fit the program"),
    (_set("num_input", "1"), "lifted function description in .* is malformed: expected an integer"),
    (lambda m: m["lifted_vm"][0].pop("lifted"), "lifted function description in .* is malformed: not a lifted"),
    (_set("result", {"tuple": ["param", 2]}), "the lifted function forward in .* does not fit the program"),
    (lambda m: m["lifted_vm"][0]["native"].update(ctx_size=m["lifted_vm"][0]["native"]["ctx_size"] - 3),
     "native code description in .* is malformed: ctx_size is .* its fields take"),
    # names pointing back (the VM followed them until a RecursionError, or for ever)
    (lambda m: (_set("lifted", "forward")(m), _set("name", "forward")(m)), _LOOP),
    (lambda m: m["lifted_vm"].append(dict(m["lifted_vm"][0], name="forward_lifted", lifted="forward", native=None)),
     _LOOP),
    (lambda m: m["lifted_vm"].append({"name": "forward_transform_params", "lifted": "forward_lifted", "native": None,
                                      "transform": "forward_transform_params", "num_input": 0, "num_weights": 1}),
     _LOOP),
    # the call's native code and its lifted form's must agree (the call runs in its storage: a crash)
    (_set("storage_bytes", 1 << 20), _UNSHARED),
    (lambda m: m["lifted_vm"][0]["native"]["kernels"].reverse(), _UNSHARED),
    (lambda m: m["lifted_vm"][0]["native"]["outputs"][0][1].__setitem__(0, 3000), _UNSHARED),
    (lambda m: m.update(native_vm=[d for d in m["native_vm"] if d["name"] != "forward_lifted"]),
     "its call has native code, forward_lifted has none"),
    # symbols: dlsym finds any name of the library and of what it links
    (_set("symbol", "abort"), "names the symbol 'abort', not one of its own"),
    (lambda m: m["native_vm"][0].update(symbol=m["lifted_vm"][0]["native"]["symbol"]),
     "names the symbol 'tvmsvmcall_forward_lifted', not one of its own .*'tvmsvm_'"),
    (lambda m: m["functions"][0].update(symbol="tvmsvm_forward"), "names the symbol 'tvmsvm_forward'"),
    (lambda m: m["functions"][0].update(num_threads_symbol="abort"), "the thread-count global of .* is named 'abort'"),
], ids=["weights", "transform", "num_input", "field", "result", "ctx", "self", "mutual", "transform_lifted",
        "storage", "kernels", "outputs", "no_plain", "abort", "call_as_plain", "kernel_symbol", "threads_symbol"])
def test_a_crafted_lifted_function_description_is_refused(lifted_mlp, tmp_path, change, message):
    # (param 2: a transformed weight, which the call reads from the cache, not from its arguments)
    crafted = _with_metadata(lifted_mlp[1], tmp_path / "crafted.so", change)
    with pytest.raises(TVMSError, match=message):
        tvms.runtime.load_module(str(crafted))


def test_a_lifted_function_description_of_a_newer_tvms_loads(lifted_mlp, tmp_path):
    # (a field this tvms does not know is ignored, as in a native function's description)
    ex, path, inputs = lifted_mlp
    newer = _with_metadata(path, tmp_path / "newer.so", lambda m: m["lifted_vm"][0].update(weights_dtypes=["f4"]))
    loaded = tvms.runtime.load_module(str(newer))
    assert loaded.lifted_params == ex.lifted_params and loaded.stats()["lifted"] == {"forward": "native"}


def test_a_symbol_of_a_linked_library_is_refused(tmp_path):
    # dlsym finds tvmsvm_elsewhere through top.so's dependency; its address is not top.so's
    from tvms.runtime.export import KERNEL_PREFIX, VM_PREFIX, symbol_address

    (tmp_path / "dep.c").write_text("int tvmsvm_elsewhere(void) { return 0; }\n")
    (tmp_path / "top.c").write_text("int tvms_here(void) { return 1; }\n")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libdep.so"), str(tmp_path / "dep.c")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "top.so"), str(tmp_path / "top.c"),
                    f"-L{tmp_path}", "-Wl,--no-as-needed", "-ldep", f"-Wl,-rpath,{tmp_path}"], check=True)
    top = str(tmp_path / "top.so")
    lib = ctypes.CDLL(top)
    assert symbol_address(lib, "tvms_here", KERNEL_PREFIX, top)
    assert getattr(lib, "tvmsvm_elsewhere")  # (the lookup itself finds it)
    with pytest.raises(TVMSError, match="'tvmsvm_elsewhere' is not defined in .*top.so but in .*libdep.so"):
        symbol_address(lib, "tvmsvm_elsewhere", VM_PREFIX, top)


def test_a_library_renamed_after_it_was_loaded_loads_again(lifted_mlp, tmp_path):
    # (the loader reuses the object it loaded under its first path: a symbol's object is named so)
    ex, path, inputs = lifted_mlp
    first, second = tmp_path / "first.so", tmp_path / "second.so"
    shutil.copy(path, first)
    tvms.runtime.load_module(str(first))
    os.replace(first, second)
    loaded = tvms.runtime.load_module(str(second))
    assert loaded.stats()["lifted"] == {"forward": "native"}


def test_a_vm_functions_native_code_of_the_old_symbol_form_runs_interpreted(lifted_mlp, tmp_path):
    # libraries exported before the tvmsvm_ prefix name it tvms_vm_<name>, a kernel's form too
    ex, path, inputs = lifted_mlp

    def old_form(metadata: dict) -> None:
        for d in metadata["native_vm"]:
            d["symbol"] = "tvms_vm_" + d["symbol"][len("tvmsvm_"):]
        del metadata["lifted_vm"]

    loaded = tvms.runtime.load_module(str(_with_metadata(path, tmp_path / "old.so", old_form)))
    assert not loaded.native
    want = tvms.relax.VirtualMachine(ex, tvms.cpu())["forward"](*inputs).numpy()
    np.testing.assert_allclose(tvms.relax.VirtualMachine(loaded, tvms.cpu())["forward"](*inputs).numpy(), want,
                               rtol=1e-6)


ADD_CONSTANT = """
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[i] + T.float32({c})
"""


def test_a_library_exported_again_to_the_same_path_loads_its_new_code(tmp_path):
    # (the dynamic loader hands back the object it opened first under a path: the old code)
    path = str(tmp_path / "add.so")
    results = []
    for c in (1, 2):
        tvms.build(from_source(ADD_CONSTANT.format(c=c)), target="llvm").export_library(path)
        out = np.zeros(4, np.float32)
        tvms.runtime.load_module(path)["main"](np.zeros(4, np.float32), out)
        results.append(out[0])
    assert results == [1, 2]
