"""The VM's instruction set (``ir/vm_program.py``) and its compiler (``lowering/relax/vm_codegen.py``):
programs survive serialization, the text shows them, damaged or foreign bytes are refused with
a TVMSError, unsupported constructs are refused at compile time, the runtime VM imports neither
the reference executor nor the script layer, and a wrong program is caught by comparing the VM
with the reference executor."""
from __future__ import annotations

import ast
import re
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tvms
from conftest import FIXTURES
from tvms import TVMSError, relax
from tvms.ir.vm_program import (MAGIC, VERSION, Call, Goto, Imm, Reg, Ret, VMFunction, VMProgram, deserialize,
                                serialize)
from tvms.lowering.relax.vm_codegen import compile_vm
from tvms.runtime.reference_relax import run_relax
from tvms.runtime.vm import Executable
from tvms.script import from_source

ROOT = Path(__file__).resolve().parent.parent
MLP_TEXT = (ROOT / "examples" / "mlp.tvms").read_text()

CHAIN = '''
@I.ir_module
class Module:
    @T.prim_func
    def add_one(p_a: T.handle, p_b: T.handle):
        n = T.int64()
        A = T.match_buffer(p_a, (n,))
        B = T.match_buffer(p_b, (n,))
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n",), dtype="float32"), flag: R.Tensor((), dtype="bool")) -> R.Tensor(("n",), dtype="float32"):
        n = T.int64()
        cls = Module
        a = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((n,), dtype="float32"))
        b = R.call_tir(cls.add_one, (a,), out_sinfo=R.Tensor((n,), dtype="float32"))
        if flag:
            c = R.call_tir(cls.add_one, (b,), out_sinfo=R.Tensor((n,), dtype="float32"))
        else:
            c = R.add(b, R.const(10.0, "float32"))
        return c
'''


@pytest.fixture(scope="module")
def chain() -> tuple:
    mod = from_source(CHAIN)
    return mod, tvms.compile(mod, target="llvm", relax_pipeline=None)


def test_a_program_survives_serialization(chain: tuple) -> None:
    _, ex = chain
    program = ex.program
    data = serialize(program)
    assert data.startswith(MAGIC)
    again = deserialize(data)
    assert again.functions == program.functions
    assert len(again.constants) == 1 and again.constants[0].dtype == np.float32
    np.testing.assert_array_equal(again.constants[0], program.constants[0])
    assert again.as_text() == program.as_text()
    assert serialize(again) == data


def test_the_text_shows_checks_allocations_kernels_and_jumps(chain: tuple) -> None:
    text = chain[1].as_text()
    lines = [re.sub(r"^ +\d+: ", "", line).strip() for line in text.splitlines()]
    assert lines[0] == "function main(x, flag)  # registers: 7, heap: [n]"
    assert "call builtin vm.builtin.match_shape(%0, 'tensor', \"argument 'x'\", ('n = ',), ((0, 0),), size(n))" in lines
    assert "%2 = call builtin vm.builtin.alloc_tensor('float32', True, size(n))" in lines
    assert "call kernel add_one(%0, %2)  # unchecked" in lines
    assert "call builtin vm.builtin.release(%2)" in lines
    ifs = [line for line in lines if line.startswith("if not %")]
    gotos = [line for line in lines if line.startswith("goto ")]
    assert len(ifs) == 1 and len(gotos) == 1
    assert lines[9:13] == ["if not %1 goto +5", "%5 = call builtin vm.builtin.alloc_tensor('float32', False, size(n))",
                           "call kernel add_one(%3, %5)  # unchecked", "%4 = call builtin vm.builtin.copy(%5)"]
    assert lines[13:15] == ["goto +4", "%6 = call builtin vm.builtin.relax_op('relax.add', FrozenDict({}), %3, c0)"]
    assert lines[-2:] == ["constants", "c0: float32 ()"]


def test_the_vm_runs_both_branches_as_the_reference_does(chain: tuple) -> None:
    mod, ex = chain
    vm = relax.VirtualMachine(ex, tvms.cpu())
    x = np.arange(5, dtype="float32")
    for flag in (True, False):
        got = vm["main"](x, np.array(flag)).numpy()
        np.testing.assert_array_equal(got, run_relax(mod, "main", x, np.array(flag)))
    np.testing.assert_array_equal(vm["main"](x, np.array(False)).numpy(), x + 12)


def test_foreign_and_damaged_bytes_are_refused(chain: tuple) -> None:
    data = serialize(chain[1].program)
    with pytest.raises(TVMSError, match="wrong magic"):
        deserialize(b"NOTAVM!!" + data[8:])
    with pytest.raises(TVMSError, match="wrong magic"):
        deserialize(b"")
    with pytest.raises(TVMSError, match=f"version 99; this tvms reads version {VERSION}"):
        deserialize(MAGIC + struct.pack("<I", 99) + data[len(MAGIC) + 4:])
    with pytest.raises(TVMSError, match="header is cut short"):
        deserialize(data[:40])
    with pytest.raises(TVMSError, match="malformed VM program"):
        header_size = struct.unpack("<Q", data[len(MAGIC) + 4:len(MAGIC) + 12])[0]
        start = len(MAGIC) + 12
        deserialize(data[:start] + b"{" * header_size + data[start + header_size:])
    with pytest.raises(TVMSError, match="constant's bytes do not match"):
        deserialize(data[:-2])  # (the constants' bytes cut short)


def test_a_malformed_program_is_refused_cleanly() -> None:
    def refused(function: VMFunction, match: str) -> None:
        with pytest.raises(TVMSError, match=match):
            deserialize(serialize(VMProgram((function,))))

    ret = VMFunction("f", ("x",), 1, (), (Call(0, "builtin", "vm.builtin.copy", (Reg(0),)),
                                             Ret(0)))
    assert deserialize(serialize(VMProgram((ret,)))).functions == (ret,)
    refused(replace(ret, code=(Call(3, "builtin", "vm.builtin.copy", (Reg(0),)), Ret(0))),
            "f: instruction 0: register out of range")
    refused(replace(ret, code=(Call(0, "function", "nowhere", ()), Ret(0))), "no function 'nowhere'")
    refused(replace(ret, code=(Call(0, "builtin", "vm.builtin.copy", (Reg(0),)),)),
            "does not end in ret or goto")
    refused(replace(ret, code=(Goto(5), Ret(0))), "a jump out of the code")
    with pytest.raises(TVMSError, match="cannot be stored in a VM program"):
        serialize(VMProgram((replace(ret, code=(Call(0, "builtin", "vm.builtin.copy", (Imm(object()),)),
                                                      Ret(0))),)))


def test_a_wrong_program_is_caught_by_the_reference(chain: tuple) -> None:
    # the second kernel call reads the parameter instead of the first call's output: one
    # add_one is skipped, and the comparison with the reference executor sees it
    mod, ex = chain
    main = ex.program.function("main")
    kernels = [k for k, inst in enumerate(main.code) if isinstance(inst, Call) and inst.kind == "kernel"]
    second = main.code[kernels[1]]
    wrong = replace(second, args=(Reg(0), *second.args[1:]))
    code = main.code[:kernels[1]] + (wrong,) + main.code[kernels[1] + 1:]
    mutated = VMProgram((replace(main, code=code),), ex.program.constants)
    vm = relax.VirtualMachine(Executable(mutated, ex.kernels()), tvms.cpu())
    x, flag = np.arange(5, dtype="float32"), np.array(True)
    reference = run_relax(mod, "main", x, flag)
    assert not np.allclose(vm["main"](x, flag).numpy(), reference)
    right = relax.VirtualMachine(ex, tvms.cpu())["main"](x, flag).numpy()
    np.testing.assert_array_equal(right, reference)


PRIM_AS_VALUE = '''
@I.ir_module
class Module:
    @T.prim_func
    def fill(a: T.Buffer((4,), "float32")):
        for i in range(4):
            a[i] = T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")):
        cls = Module
        f = cls.fill
        return f
'''


def test_what_the_compiler_does_not_take_is_refused_at_compile_time() -> None:
    with pytest.raises(TVMSError, match="'fill' is used as a value; the VM takes Relax functions"):
        compile_vm(from_source(PRIM_AS_VALUE))


def test_closures_are_lifted_with_what_they_capture() -> None:
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
        n = T.int64()
        @R.function
        def inner(y: R.Tensor((n,), dtype="float32")) -> R.Tensor((n,), dtype="float32"):
            z = R.add(x, y)
            return z
        a = inner(x)
        b = inner(a)
        return b
''')
    program = compile_vm(mod)
    assert [(f.name, f.params, f.closure) for f in program.functions] == [
        ("main.inner", ("x", "(captured sizes)", "y"), True), ("main", ("x",), False)]
    ex = tvms.compile(mod, target="llvm", relax_pipeline=None)
    assert ex.function_names == ["main"]
    vm = relax.VirtualMachine(ex, tvms.cpu())
    x = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(vm["main"](x).numpy(), run_relax(mod, "main", x))
    np.testing.assert_array_equal(vm["main"](x).numpy(), 3 * x)


def test_the_runtime_vm_imports_no_reference_executor_and_no_script_layer() -> None:
    for name in ("vm.py", "vm_builtins.py", "vm_memory.py"):
        tree = ast.parse((ROOT / "runtime" / name).read_text())
        imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not [m for m in imported if "reference" in m or m.startswith(("tvms.script", "..script"))], name


STORAGE = (FIXTURES / "runtime" / "vm_storage.tvms").read_text()  # (two tensors in one R.vm.alloc_storage)


def test_vm_lowered_storage_operators_are_vm_builtins() -> None:
    # the tensors are views of one storage, as TVM's memory planning means them
    mod = from_source(STORAGE)
    ex = tvms.compile(mod, target="llvm", relax_pipeline=None)
    text = ex.as_text()
    assert "call builtin vm.builtin.alloc_storage('uint8', size(32))" in text
    assert "call builtin vm.builtin.alloc_tensor_in_storage('float32', %2, size(16), size(4))" in text
    x = np.arange(4, dtype="float32")
    got = relax.VirtualMachine(ex, tvms.cpu())["main"](x).numpy()
    np.testing.assert_array_equal(got, run_relax(mod, "main", x))
    np.testing.assert_array_equal(got, x + 2)
    too_small = from_source(STORAGE.replace("R.shape([32])", "R.shape([24])"))
    vm = relax.VirtualMachine(tvms.compile(too_small, target="llvm", relax_pipeline=None), tvms.cpu())
    with pytest.raises(TVMSError, match=r"a tensor of shape \(4,\) at offset 16 does not fit its storage"):
        vm["main"](x)


def test_every_corpus_module_compiles_to_a_program_that_survives_serialization() -> None:
    from conftest import CORPUS_COPY

    compiled = 0
    for path in sorted(CORPUS_COPY.glob("*.tvms")):
        mod = from_source(path.read_text())
        if not any(isinstance(mod[k], relax.Function) for k in mod):
            continue
        if "metadata[" in path.read_text():  # (constants shown as references only: no data)
            with pytest.raises(TVMSError, match="a constant without data"):
                compile_vm(mod)
            continue
        program = compile_vm(mod)
        again = deserialize(serialize(program))
        assert again.functions == program.functions and again.as_text() == program.as_text(), path.name
        compiled += 1
    assert compiled >= 20
