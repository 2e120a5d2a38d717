"""Targets are parsed in one place (ir/target.py) and compiled through one table
(lowering/targets.py): the string and dict forms, the errors for a bad target, and the refusal of
a kind without a code generator."""
from __future__ import annotations

import numpy as np
import pytest

import tvms
from tvms import TVMSError
from tvms.ir.registry import get_global_func
from tvms.lowering.codegen.llvm_target import parse_llvm_target
from tvms.lowering.targets import compiled_kinds, target_kind
from tvms.script import from_source
from tvms.target import Target

ADD_ONE = """# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = A[i] + T.float32(1)
"""

RELAX_ADD = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        y = R.add(x, x)
        return y
"""


def test_string_and_dict_forms_give_the_same_target() -> None:
    text = Target("llvm  -mcpu=haswell -mattr=+avx2,+fma   -num-cores=4")
    config = Target({"kind": "llvm", "mcpu": "haswell", "mattr": ["+avx2", "+fma"], "num-cores": 4})
    assert text == config and str(text) == "llvm -mcpu=haswell -mattr=+avx2,+fma -num-cores=4"
    assert (text.kind, text.mcpu, text.mattr, text.num_cores) == ("llvm", "haswell", ("+avx2", "+fma"), 4)
    assert Target(text) == text and hash(Target(str(text))) == hash(text)


def test_keys_and_host() -> None:
    target = Target({"kind": "cuda", "arch": "sm_80", "keys": ["cuda", "gpu"],
                     "host": {"kind": "llvm", "mtriple": "x86_64-pc-linux-gnu"}})
    assert target.keys == ("cuda", "gpu") and target.attrs["arch"] == "sm_80"
    assert str(target.host) == "llvm -mtriple=x86_64-pc-linux-gnu" and "host" not in target.attrs
    assert Target("llvm", host="llvm -mcpu=haswell").host == Target("llvm -mcpu=haswell")
    assert Target("llvm -keys=cpu -opt-level=0").attrs == {"keys": ("cpu",), "opt-level": 0}


@pytest.mark.parametrize("target, message", [
    ("llvmx", "unknown target kind 'llvmx'.*the kinds are llvm, c, cuda"),
    ("", "empty target string"),
    ({"mcpu": "haswell"}, "needs a 'kind' entry"),
    ("llvm -num-cores=two", r"-num-cores=two is not valid \(-num-cores needs a positive integer\)"),
    ("llvm -num-cores=0", "-num-cores needs a positive integer"),
    ({"kind": "llvm", "num-cores": "zero"}, "-num-cores needs a positive integer"),
    ("llvm -mcpux=haswell", "unknown option -mcpux for kind 'llvm'; it takes .*-mcpu"),
    ("cuda -mcpu=haswell", "unknown option -mcpu for kind 'cuda'"),
    ("llvm mcpu=haswell", "must start with '-'"),
    ("llvm -system-lib=maybe", "-system-lib needs true or false"),
    (3, "made from a string or a dict"),
])
def test_a_bad_target_is_a_clear_error(target, message) -> None:
    with pytest.raises(TVMSError, match=message):
        Target(target)


def test_the_llvm_row_reads_the_parsed_target_and_checks_llvm_names() -> None:
    llvm = parse_llvm_target(Target("llvm -mcpu=haswell -mattr=+avx2 -num-cores=3"))
    assert (llvm.mcpu, llvm.mattr, llvm.num_cores) == ("haswell", ("+avx2",), 3)
    assert parse_llvm_target("llvm -mcpu=native").mcpu == ""  # (TVM's name for the host CPU)
    with pytest.raises(TVMSError, match="skylakee"):
        parse_llvm_target("llvm -mcpu=skylakee")
    with pytest.raises(TVMSError, match="takes the target 'llvm'"):
        parse_llvm_target("cuda")


def test_a_kind_without_a_row_is_refused_naming_the_kinds_that_have_one() -> None:
    assert compiled_kinds() == ["cuda", "llvm"] and target_kind(Target("llvm")).kind == "llvm"
    message = "no code generator for target kind 'rocm' .*tvms compiles for: cuda, llvm"
    with pytest.raises(TVMSError, match=message):
        tvms.build(from_source(ADD_ONE), target="rocm")
    with pytest.raises(TVMSError, match=message):
        tvms.compile(from_source(RELAX_ADD), target=Target({"kind": "rocm"}))
    with pytest.raises(TVMSError, match="no code generator for target kind 'c'"):
        tvms.compile(from_source(ADD_ONE), target="c")


def test_build_and_compile_take_every_form_of_the_target() -> None:
    a = np.arange(8, dtype=np.float32)
    for target in ("llvm -num-cores=1", {"kind": "llvm", "num-cores": 1}, Target("llvm -num-cores=1")):
        lib = tvms.build(from_source(ADD_ONE), target=target)
        b = np.zeros(8, np.float32)
        lib["main"](a, b)
        np.testing.assert_array_equal(b, a + 1)
        assert lib.target == "llvm -num-cores=1"
    ex = tvms.compile(from_source(RELAX_ADD), target={"kind": "llvm"})
    out = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"](np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(out.numpy(), np.arange(4, dtype=np.float32) * 2)


def test_the_runtime_registers_what_the_driver_reaches_by_name() -> None:
    """The link steps go through the registry (lowering never imports the runtime)."""
    for name in ("runtime.module.load_llvm", "runtime.vm.executable", "runtime.thread_pool_kind",
                 "runtime.cpu_blas.kernel", "runtime.reference_relax.eval_expr"):
        assert callable(get_global_func(name))
    assert target_kind(Target("llvm")).loader == "runtime.module.load_llvm"


def test_check_target_parses_and_asks_the_row(tmp_path) -> None:
    from tvms.cli import main
    from tvms.lowering.targets import check_target

    assert check_target("llvm -mcpu=haswell") == Target("llvm -mcpu=haswell")
    assert check_target("rocm").kind == "rocm"  # (refused when something is compiled for it)
    with pytest.raises(TVMSError, match="skylakee"):
        check_target("llvm -mcpu=skylakee")
    source = tmp_path / "k.tvms"
    source.write_text(ADD_ONE)
    assert main(["build", str(source), "--target", "llvm -mcpux=haswell", "-o", str(tmp_path / "k.so")]) == 2
