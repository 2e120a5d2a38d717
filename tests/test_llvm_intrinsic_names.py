"""``T.call_llvm_intrin`` by name on the llvm target: a name LLVM does not know as an intrinsic of
the call's types is refused when the function is built (it had built, and failed only when the
library was loaded: "needs llvm.getpid.i32, which this process does not define"); real ones,
overloaded or not, as written or with type suffixes, build and run."""
from __future__ import annotations

import platform

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.cli import main  # noqa: E402
from tvms.ir.errors import ScriptError, TVMSError  # noqa: E402
from tvms.script import from_source  # noqa: E402

GETPID = '''# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.remap("S", [i])
            A[vi] = T.call_llvm_intrin("int32", "llvm.getpid")
'''
REFUSAL = "T.call_llvm_intrin: LLVM {} has no intrinsic 'llvm.getpid' of no arguments returning int32"


def _llvm_version() -> str:
    import llvmlite.binding as llvm

    return ".".join(map(str, llvm.llvm_version_info))


def _call(result: str, symbol: str, args: str, dtype: str, name: str = "main") -> str:
    return f'''
@T.prim_func
def {name}(A: T.Buffer((4,), "{dtype}"), C: T.Buffer((4,), "{result.split("x")[0]}")):
    C[0] = T.call_llvm_pure_intrin("{result}", "{symbol}"{", " if args else ""}{args})
'''


def test_a_name_that_is_no_intrinsic_is_refused_by_build_at_its_statement():
    """The statement inside a block keeps its position through lowering (FlattenBuffer and
    StmtSimplify had dropped it), so the refusal points at the call's line."""
    with pytest.raises(ScriptError) as caught:
        tvms.build(from_source(GETPID, "getpid.tvms"))
    text = str(caught.value)
    assert text.startswith("getpid.tvms:8:13: error: " + REFUSAL.format(_llvm_version()))
    assert "which nothing defines" in text
    assert '8 |             A[vi] = T.call_llvm_intrin("int32", "llvm.getpid")' in text


def test_a_name_that_is_no_intrinsic_is_refused_by_compile_and_the_command_line(tmp_path, capsys):
    module = from_source('''# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def pid(A: T.Buffer((4,), "int32")):
        for i in range(4):
            A[i] = T.call_llvm_intrin("int32", "llvm.getpid")

    @R.function
    def main(x: R.Tensor((4,), "int32")) -> R.Tensor((4,), "int32"):
        cls = Module
        y = R.call_tir(cls.pid, (), out_sinfo=R.Tensor((4,), "int32"))
        return y
''')
    with pytest.raises(TVMSError, match=REFUSAL.format(_llvm_version())):
        tvms.compile(module, "llvm")
    source = tmp_path / "getpid.tvms"
    source.write_text(GETPID)
    assert main(["build", str(source), "-o", str(tmp_path / "getpid.so")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{source}:8:13: error: " + REFUSAL.format(_llvm_version()))
    assert not (tmp_path / "getpid.so").exists()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 intrinsics")
def test_an_unknown_name_of_the_hosts_architecture_is_refused_too():
    with pytest.raises(ScriptError, match=r"has no intrinsic 'llvm.x86.no.such.thing' of int32 returning int32"):
        tvms.build(from_source(_call("int32", "llvm.x86.no.such.thing", "A[0]", "int32")))


def test_a_kernel_cached_on_disk_before_the_check_is_refused_too(monkeypatch, tmp_path):
    """An object cached by an older tvms (which stored such code) is checked when it is read."""
    from tvms.lowering.codegen import compile as codegen, object_cache
    from tvms.lowering.codegen.llvm import codegen_llvm
    from tvms.lowering.codegen.llvm_target import optimize, parse_llvm_target, target_machine
    from tvms.lowering.targets import _llvm_lower

    monkeypatch.setenv("TVMS_CACHE_DIR", str(tmp_path))
    func = _llvm_lower(from_source(_call("int32", "llvm.getpid", "", "int32", "cached_pid")),
                       tvms.target.Target("llvm"))
    target = parse_llvm_target("llvm")
    text = codegen_llvm(func, "cached_pid")
    module = optimize(text, target)
    object_cache.store(object_cache.disk_key(codegen.content_key(func, target), "cached_pid"),
                       object_cache.CachedKernel(text, str(module), target_machine(target).emit_object(module)))
    with pytest.raises(TVMSError, match="has no intrinsic 'llvm.getpid'"):
        codegen.compile_prim_func(func, target, "cached_pid")


@pytest.mark.parametrize("result, symbol, args, dtype, expected", [
    ("float32", "llvm.sqrt", "A[1]", "float32", 3.0),
    ("float32", "llvm.sqrt.f32", "A[1]", "float32", 3.0),
    ("float32", "llvm.sqrt.f64", "A[1]", "float32", 3.0),  # (LLVM names it by the float it takes)
    ("float32", "llvm.fma", "A[0], A[1], A[2]", "float32", 4.0 * 9.0 + 2.0),
    ("float32", "llvm.fma.f32", "A[0], A[1], A[2]", "float32", 4.0 * 9.0 + 2.0),
    ("int32", "llvm.ctpop", "A[3]", "int32", 3),
    ("int32", "llvm.ctpop.i32", "A[3]", "int32", 3),
    ("int32", "llvm.smax", "A[0], A[1]", "int32", 9),
    ("int32", "llvm.fptosi.sat", "A[3]", "float32", 7),  # (overloaded on two types)
])
def test_real_intrinsics_build_and_run(result, symbol, args, dtype, expected):
    a = np.array([4, 9, 2, 7.5 if dtype == "float32" else 0b1011], dtype)
    c = np.zeros(4, result)
    tvms.build(from_source(_call(result, symbol, args, dtype)))(a, c)
    assert c[0] == expected


def test_an_intrinsic_that_is_not_overloaded_keeps_its_name():
    """``llvm.readcyclecounter`` takes no type suffix: it had been called as
    llvm.readcyclecounter.i64, which is no intrinsic, and failed when loaded."""
    c = np.zeros(4, "int64")
    tvms.build(from_source(_call("int64", "llvm.readcyclecounter", "", "int32")))(np.zeros(4, "int32"), c)
    assert c[0] > 0


def test_an_overloaded_intrinsic_of_vectors_is_named_by_its_lanes():
    func = from_source('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in T.vectorized(8):
        C[i] = T.call_llvm_pure_intrin("float32", "llvm.sqrt.f32", A[i])
''')
    a = np.arange(8, dtype="float32") ** 2
    c = np.zeros(8, "float32")
    tvms.build(func)(a, c)
    np.testing.assert_array_equal(c, np.arange(8, dtype="float32"))
