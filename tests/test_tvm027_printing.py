"""Texts of Apache TVM's own tests as TVM 0.27 prints them (issue 14, point 4), reduced from the
corpus that benchmarks/tvm_tests_corpus.py builds: each prints back byte for byte (in the dialect
tvms detects; a Relax-only text may have no 0.27 spelling) and re-parses structurally equal. fixtures/tvm027_printing/check_with_tvm.py checks that
TVM 0.27 prints every one of them exactly so."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

import tvms
from tvms.ir import structural_equal
from tvms.script import from_source
from tvms.script.formatting import format_script

GOLDENS = sorted((FIXTURES / "tvm027_printing").glob("*.tvms"))
SOURCES = sorted((FIXTURES / "tvm027_printing" / "sources").glob("*.tvms"))


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_a_text_tvm_printed_prints_back_byte_for_byte(path) -> None:
    text = path.read_text()
    node = from_source(text, path.name)
    out = format_script(text, path.name)
    assert out == text
    assert structural_equal(from_source(out, path.name), node)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_a_source_reads_as_tvm_reads_it(source) -> None:
    """What TVM 0.27 makes of these sources, as it prints it (the text of the same name):
    operations on constants fold as TVM's operators fold them (a modulo only of int32 and int64,
    float arithmetic only in 32 and 64 bits, float32 rounded as float32), and a value stored into
    a buffer of another type is cast to it."""
    node = from_source(source.read_text(), source.name)
    assert node.script(dialect="tvm-0.27") + "\n" == (source.parent.parent / source.name).read_text()


def test_a_match_cast_of_a_call_keeps_the_call_and_runs() -> None:
    """``R.match_cast(R.nonzero(c), ...)`` matches the call's result as TVM keeps it (tvms had
    bound the call to a variable of its own first, printing two bindings)."""
    mod = from_source((FIXTURES / "tvm027_printing" / "match_cast_of_a_call.tvms").read_text())
    rng = np.random.default_rng(0)
    tensor, condition = rng.standard_normal((32, 32)).astype("float32"), rng.random(8) < 0.5
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    out = vm["main"](tvms.nd.array(tensor), tvms.nd.array(condition)).numpy()
    np.testing.assert_array_equal(out, tensor[np.nonzero(condition)[0]])


def test_an_iterator_bound_to_a_value_of_another_type_keeps_both_and_builds() -> None:
    func = from_source((FIXTURES / "tvm027_printing" / "axis_binding_type.tvms").read_text())
    realize = func.body.block.body  # (under the implicit root block)
    assert str(realize.block.iter_vars[0].var.dtype) == "int32"
    assert str(realize.iter_values[0].dtype) == "int64"  # not cast, as TVM keeps it
    a, b = tvms.nd.array(np.array(4.0, "float32")), tvms.nd.array(np.array(0.0, "float32"))
    tvms.build(func, target="llvm")(a, b)
    assert b.numpy() == 2.0


def test_a_module_holds_extern_functions() -> None:
    """``ext = R.ExternFunc("sym", R.Callable(...))`` in a module class is a function outside the
    module (TVM prints them after the PrimFuncs, with no blank line after one); the module
    converts to the classic dialect and back."""
    text = (FIXTURES / "tvm027_printing" / "extern_functions.tvms").read_text()
    mod = from_source(text)
    assert mod["ext_b"].global_symbol == "sym_b" and mod["ext_a"].struct_info.purity
    classic = mod.script(dialect="classic")
    assert structural_equal(from_source(classic), mod)
    assert from_source(classic).script(dialect="tvm-0.27") + "\n" == text
    with pytest.raises(tvms.ScriptError, match="the signature of an R.ExternFunc is an R.Callable"):
        from_source(text.replace('R.ExternFunc("sym_b")', 'R.ExternFunc("sym_b", R.Tensor((2,), "float32"))'))


def test_a_local_function_calls_itself() -> None:
    """A nested function that calls itself (TVM's while loop by recursion): its name is bound
    before its body is read, with its signature; it reads back structurally equal (the binding's
    variable is matched first), and it runs (reference executor and VM: x + 10 x)."""
    from tvms.runtime.reference_relax import run_relax

    text = (FIXTURES / "tvm027_printing" / "recursive_local_function.tvms").read_text()
    mod = from_source(text.replace('R.call_pure_packed("test.vm.less", i, R.const(10, "int32"), '
                                   'ty_args=(R.Tensor((), dtype="bool"),))', 'R.less(i, R.const(10, "int32"))'))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(run_relax(mod, "main", x), 11 * x)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy(), 11 * x)


@pytest.mark.parametrize("name", ["scalar_parameter_sizes", "scalar_parameter_arithmetic", "recursive_local_function",
                                  "nested_function_typevars", "extern_functions"])
def test_converts_to_classic_and_back(name: str) -> None:
    text = (FIXTURES / "tvm027_printing" / f"{name}.tvms").read_text()
    mod = from_source(text)
    classic = from_source(mod.script(dialect="classic"))
    assert structural_equal(classic, mod)
    assert classic.script(dialect="tvm-0.27") + "\n" == text


def test_a_scalar_parameter_of_tvm027_is_a_size() -> None:
    """TVM 0.27's ``n: T.int64`` is a size variable too: ``R.Tensor((n,))`` and ``n + 1`` read
    its value (classic: ``n: R.Prim(value="n")``); ``+`` on classic scalars whose value is
    unknown stays an operator call."""
    func = from_source((FIXTURES / "tvm027_printing" / "scalar_parameter_sizes.tvms").read_text())
    n, direct = func.params[:2]
    assert direct.struct_info.dims[0] is n.struct_info.value
    assert 'n: R.Prim(value="n")' in func.script(dialect="classic")
    func = from_source((FIXTURES / "tvm027_printing" / "scalar_parameter_arithmetic.tvms").read_text())
    plus_one = func.body.blocks[0].bindings[0].value.value  # n + 1: TensorIR arithmetic on n's value
    assert plus_one.a is func.params[0].struct_info.value and plus_one.b.value == 1
    relax_add = from_source('@R.function\ndef main(n: R.Prim("int64")):\n    m = n + n\n    return m\n')
    assert relax_add.body.blocks[0].bindings[0].value.op.name == "relax.add"


def test_a_scalar_parameter_binds_its_size_when_run() -> None:
    from tvms.runtime.reference_relax import run_relax

    func = from_source('''# from tvm.script import tirx as T
# from tvm.script import relax as R

@R.function
def main(n: T.int64, x: R.Tensor((n,), dtype="float32")) -> R.Tensor((n,), dtype="float32"):
    y: R.Tensor((n,), dtype="float32") = R.add(x, x)
    return y''')
    mod, x = tvms.IRModule({"main": func}), np.arange(4, dtype="float32")
    np.testing.assert_allclose(run_relax(mod, "main", 4, x), 2 * x)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](4, tvms.nd.array(x)).numpy(), 2 * x)
    with pytest.raises(tvms.TVMSError, match="dimension 0 should be n = 5, got 4"):
        vm["main"](5, tvms.nd.array(x))


def test_python_numbers_in_operations_compute_as_the_compiled_code_does() -> None:
    """``sources/literal_operands.tvms`` (TVM 0.27 widens an int8 operand of ``+ 3`` to int32, a
    float16 one of ``+ 1.5`` to float32, and casts back at the store): the compiled function and
    the reference executor agree, and int8 arithmetic wraps at the store as numpy's does."""
    from tvms.runtime.reference import run_prim_func

    func = from_source((FIXTURES / "tvm027_printing" / "sources" / "literal_operands.tvms").read_text())
    rng = np.random.default_rng(0)
    dtypes = ["int8", "float16", "uint8", "int64", "uint32", "float64", "int32"]
    inputs = [rng.integers(-100, 100, 8).astype(dt) if dt != "uint32" else rng.integers(0, 1000, 8).astype(dt)
              for dt in dtypes]
    inputs[0][:2] = [127, -128]
    compiled = [tvms.nd.array(x) for x in inputs]
    tvms.build(func, target="llvm")(*compiled)
    reference = [x.copy() for x in inputs]
    run_prim_func(func, *reference)
    for got, want in zip(compiled, reference):
        np.testing.assert_array_equal(got.numpy(), want)
    wrap = from_source('@T.prim_func\ndef f(A: T.Buffer((4,), "int8")):\n    for i in range(4):\n'
                       '        A[i] = A[i] + 3\n')
    a = tvms.nd.array(np.array([127, 126, -128, 0], "int8"))
    tvms.build(wrap, target="llvm")(a)
    np.testing.assert_array_equal(a.numpy(), (np.array([127, 126, -128, 0]) + 3).astype("int8"))


def test_a_one_element_parameter_is_a_scalar_outside_s_tir() -> None:
    """TVM 0.27 lays out the parameters of a function not declared s_tir, so it writes a
    one-element one as a scalar, loads and stores (what it printed for this source; TVM itself
    cannot read the load back, tvms can). Found by the fresh-example round-trip property."""
    source = ('# from tvm.script import tirx as T\n\n@T.prim_func\ndef main(A: T.Buffer((1,), "float32"), '
              'B: T.Buffer((4,), "float32")):\n    B[1] = A[0]\n    A[0] = B[2]\n')
    func = from_source(source)
    printed = func.script(dialect="tvm-0.27")
    assert printed.endswith("    B[1] = A\n    A = B[2]")
    assert structural_equal(from_source(printed), func)
    declared = from_source(source.replace("@T.prim_func", "@T.prim_func(s_tir=True)"))
    assert declared.script(dialect="tvm-0.27").endswith("    B[1] = A[0]\n    A[0] = B[2]")
    pointer = from_source(source + '    T.evaluate(T.call_extern("int32", "f", A.data, T.address_of(A[0])))\n')
    printed = pointer.script(dialect="tvm-0.27")  # (its pointer, as TVM writes a scalar's)
    assert printed.endswith('    T.call_extern("int32", "f", A.source.data, T.address_of(A))')
    assert structural_equal(from_source(printed), pointer)


def test_an_int64_scalar_parameter_is_a_size_in_tvm027() -> None:
    """TVM 0.27 prints ``x: R.Prim("int64")`` (the classic dialect's scalar that is no size) as
    ``x: T.int64``, which reads as a size variable: in its IR the two are one, so the text cannot
    keep the difference (the Relax round-trip property leaves such parameters out of its 0.27 IR
    check, for this reason)."""
    classic = from_source('# from tvm.script import relax as R\n\n@R.function\n'
                          'def main(x: R.Prim("int64"), y: R.Tensor(("n",), "float32")) -> R.Prim("int64"):\n'
                          '    return x\n')
    assert classic.params[0].struct_info.value is None
    printed = classic.script(dialect="tvm-0.27")
    assert 'def main(x: T.int64, y: R.Tensor((n,), dtype="float32")) -> T.int64:' in printed
    again = from_source(printed)
    assert again.params[0].struct_info.value is not None and again.script(dialect="tvm-0.27") == printed


def test_a_tensor_map_is_a_pointer_to_a_descriptor_which_a_cuda_kernel_takes_by_value() -> None:
    func = from_source((FIXTURES / "tvm027_printing" / "tensor_map.tvms").read_text())
    assert func.params[1].type_annotation.is_tensor_map
    kernel = from_source('''# from tvm.script import tirx as T

@T.prim_func
def main():
    A_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    with T.launch_thread("blockIdx.x", 1) as v:
        T.address_of(A_map)
''')
    source = tvms.build(kernel, "cuda").imported_modules[0].get_source()
    # (its address as TVM writes it; whole kernels are compared in tests/test_cuda_tensor_map.py)
    assert "(const __grid_constant__ CUtensorMap A_map)" in source
    assert "((unsigned long long)(&(A_map)));" in source
