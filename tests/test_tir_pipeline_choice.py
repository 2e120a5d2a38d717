"""The TIR pipeline chosen by TVM 0.27's names: ``tvms.compile(..., tir_pipeline=...)``,
``tvms.build(..., pipeline=...)`` (also ``tvms.tirx.build``) and ``--tir-pipeline`` on the CLI.

``"tirx"`` runs TVM's tirx pipeline: kernels written in the tirx language come out as TVM writes
them (fixtures/tirx_pipeline, made by its generate_with_tvm.py, and the tirx goldens of
fixtures/ptx_dialect), with no barrier the kernel did not write (no ThreadSync), NVRTC compiles
them, and the reference executor computes with them what it computes with the s_tir lowering.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.target import Target
from tvms.lowering.build import compile_key
from tvms.lowering.tir.gpu.pipeline import lower_for_cuda
from tvms.lowering.tir.gpu.tirx_pipeline import lower_for_cuda_tirx
from tvms.lowering.tir.tirx_pipeline import tirx_steps
from tvms.lowering.transform import PassContext
from tvms.runtime.reference import run_prim_func
from tvms.script import from_source

from conftest import FIXTURES
from cuda_support import assert_compiles

GOLDEN = FIXTURES / "tirx_pipeline"
PTX = FIXTURES / "ptx_dialect"
SM90A = {"kind": "cuda", "arch": "sm_90a"}
KERNEL = 'extern "C" __global__'

ADD_ONE = """# from tvm.script import tir as T

@T.prim_func
def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = A[i] + T.float32(1.0)
"""

BLOCKS = """# from tvm.script import tir as T

@T.prim_func
def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("add"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1.0)
"""


def _load(case: str):
    path = GOLDEN / f"{case}.tvms"
    return from_source(path.read_text(), path.name)


def _cuda(func, pipeline: str) -> str:
    source = tvms.build(func, target=SM90A, pipeline=pipeline).imported_modules[0].get_source()
    return source[source.index(KERNEL):]


# ---------------------------------------------------------------- the option and its errors


@pytest.mark.parametrize("name", ["nope", "S_TIR", ""])
def test_an_unknown_pipeline_is_refused_naming_the_candidates(name: str) -> None:
    message = rf"unknown TIR pipeline '{name}'; the candidates are 'default', 's_tir', 'tirx'"
    with pytest.raises(TVMSError, match=message):
        tvms.compile(from_source(ADD_ONE), "llvm", tir_pipeline=name)
    with pytest.raises(TVMSError, match=message):
        tvms.build(from_source(ADD_ONE), "llvm", pipeline=name)


def test_a_pass_object_is_refused_as_tvms_tirx_build_refuses_it() -> None:
    from tvms.lowering.tir import StmtSimplify

    with pytest.raises(TVMSError, match=r"tir_pipeline takes a pipeline's name .* not a FunctionPass \(TVM 0.27.s tirx.build takes names only\)"):
        tvms.compile(from_source(ADD_ONE), "llvm", tir_pipeline=StmtSimplify())


def test_tirx_build_is_the_build_with_a_pipeline() -> None:
    import tvms.tirx

    assert tvms.tirx.build is tvms.build
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    tvms.tirx.build(from_source(ADD_ONE), "llvm", pipeline="tirx")["main"](a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_the_tirx_pipeline_refuses_blocks_as_tvm_does() -> None:
    for target in ("llvm", SM90A):
        with pytest.raises(TVMSError, match=r"the tirx TIR pipeline lowers tirx kernels, which have no blocks; "
                                            r"add_one has the block 'add'"):
            tvms.compile(from_source(BLOCKS), target, tir_pipeline="tirx", default_schedule=False)


def test_the_compile_cache_tells_the_pipelines_apart() -> None:
    func = from_source(ADD_ONE)
    keys = {compile_key(func, Target("llvm"), "zero", tir_pipeline=p) for p in ("s_tir", "tirx")}
    assert len(keys) == 2
    tirx = tvms.compile(func, "llvm", tir_pipeline="tirx", default_schedule=False)
    assert tvms.compile(func, "llvm", default_schedule=False) is not tirx
    assert tvms.compile(func, "llvm", tir_pipeline="tirx", default_schedule=False) is tirx
    assert tvms.compile(func, "llvm", tir_pipeline="default", default_schedule=False) is \
        tvms.compile(func, "llvm", tir_pipeline="s_tir", default_schedule=False)


def test_the_tirx_pipeline_runs_tvms_passes_in_tvms_order() -> None:
    names = [name for name, _ in tirx_steps()]
    assert names == ["tirx.LowerTIRx", "s_tir.UnifyThreadBinding", "tirx.StmtSimplify", "tirx.LowerTIRxOpaque",
                     "tirx.FlattenBuffer", "tirx.NarrowDataType", "tirx.VectorizeLoop", "tirx.UnrollLoop",
                     "tirx.StmtSimplify", "tirx.CommonSubexprElim"]
    with PassContext(config={"tir.disable_cse_tir": True}):  # (TVM's key for this pipeline)
        assert "tirx.CommonSubexprElim" not in [name for name, _ in tirx_steps()]


def test_llvm_computes_the_same_with_either_pipeline() -> None:
    a = np.arange(8, dtype="float32")
    results = []
    for pipeline in ("s_tir", "tirx"):
        b = np.zeros(8, "float32")
        tvms.compile(from_source(ADD_ONE), "llvm", tir_pipeline=pipeline, default_schedule=False)["main"](a, b)
        results.append(b)
    np.testing.assert_array_equal(results[0], a + 1)
    np.testing.assert_array_equal(results[1], a + 1)


def test_the_cli_takes_the_pipeline_by_name(tmp_path, capsys) -> None:
    from tvms.cli import main

    source = tmp_path / "add_one.tvms"
    source.write_text(ADD_ONE)
    assert main(["run", str(source), "--random-inputs", "--tir-pipeline", "tirx"]) == 0
    assert main(["build", str(source), "--tir-pipeline", "tirx", "-o", str(tmp_path / "a.so")]) == 0
    assert main(["build", str(source), "--tir-pipeline", "nope", "-o", str(tmp_path / "b.so")]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "a.so"), "--random-inputs", "--tir-pipeline", "tirx"]) == 2
    assert "--tir-pipeline applies only to a .tvms module" in capsys.readouterr().err


def test_a_copy_between_two_views_of_one_allocation_is_kept() -> None:
    """The tirx StmtSimplify drops a store of an element to itself; B views A one element on, so
    A[i] = B[i] is a copy (it had been dropped: the loop vanished), as TVM keeps it."""
    text = """# from tvm.script import tirx as T

@T.prim_func
def main(A: T.Buffer((8,), "float32")):
    B = T.decl_buffer((7,), "float32", data=A.data, elem_offset=1)
    for i in range(7):
        A[i] = B[i]
"""
    for pipeline in ("s_tir", "tirx"):
        a = np.arange(8, dtype="float32")
        tvms.build(from_source(text), target="llvm", pipeline=pipeline)(a)
        np.testing.assert_array_equal(a, [1, 2, 3, 4, 5, 6, 7, 7])


def test_a_shift_in_a_branch_not_taken_is_not_folded() -> None:
    """Unrolled, ``1 << i`` under ``i < 31`` holds ``1 << 32`` in a branch that is dropped: the
    tirx simplifier folds only shifts within the type's width (it had refused the kernel)."""
    text = """# from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((64,), "int32")):
    for i in T.unroll(40):
        if i < 31:
            A[i] = T.shift_left(1, i)
"""
    for pipeline in ("s_tir", "tirx"):
        a = np.zeros(64, "int32")
        tvms.build(from_source(text), "llvm", pipeline=pipeline)(a)
        np.testing.assert_array_equal(a[:31], 1 << np.arange(31))
        assert not a[31:].any()


def test_a_comparison_of_wrapping_unsigned_bytes_is_kept_as_written() -> None:
    """``x + 100 < 50`` in uint8 wraps (True for x >= 156): the tirx simplifier had moved the
    constant across (``x < -50``), true for every x; TVM 0.27 keeps a uint8 comparison as written."""
    text = """# from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((4,), "uint8"), B: T.Buffer((8,), "int32")):
    x = A[0]
    B[2] = T.Select(x + T.uint8(100) < T.uint8(50), 1, 0)
    if x + T.uint8(100) < T.uint8(50):
        B[3] = 1
"""
    for pipeline in ("s_tir", "tirx"):
        kernel = tvms.build(from_source(text), target="llvm", pipeline=pipeline)
        for x in (10, 155, 156, 200):
            b = np.zeros(8, "int32")
            kernel(np.array([x, 0, 0, 0], "uint8"), b)
            assert list(b[2:4]) == [int((x + 100) % 256 < 50)] * 2, (pipeline, x)


def test_a_wrapping_unsigned_call_argument_is_kept_as_written() -> None:
    """``x * 2 // 2`` in uint8 wraps (72 for x = 200): the tirx simplifier had brought the argument
    of ``T.if_then_else`` to the canonical form, ``x``; TVM 0.27 keeps it as written."""
    text = """# from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((4,), "uint8"), C: T.Buffer((4,), "uint8"), n: T.int32):
    x = A[0]
    C[0] = T.if_then_else(n > 0, (x * T.uint8(2)) // T.uint8(2), T.uint8(0))
    C[1] = (x * T.uint8(2)) // T.uint8(2)
"""
    for pipeline in ("s_tir", "tirx"):
        c = np.zeros(4, "uint8")
        tvms.build(from_source(text), target="llvm", pipeline=pipeline)(np.array([200, 0, 0, 0], "uint8"), c, 1)
        assert list(c[:2]) == [72, 72], pipeline


def test_a_cast_of_a_constant_beyond_the_float_literals_stays_a_cast() -> None:
    """70000 is beyond float16's literals (65504): the tirx simplifier had folded the cast into a
    float16 constant, which is refused without a position; it stays the C compiler's conversion."""
    text = """# from tvm.script import tirx as T

@T.prim_func
def k(A: T.Buffer((4,), "float16")):
    T.attr({"tirx.device_entry": T.bool(True)})
    bx = T.cta_id([4])
    tx = T.thread_id([128])
    if tx == 0:
        A[bx] = T.Cast("float16", 70000) + T.Cast("float16", 3)
"""
    for pipeline in ("s_tir", "tirx"):
        source = tvms.build(from_source(text), target=SM90A, pipeline=pipeline).imported_modules[0].get_source()
        assert "((half)70000)" in source, pipeline
    assert "((half)70000) + __float2half_rn(0x1.8p+1f" in source  # (one within them still folds)


@pytest.mark.parametrize("module", ["tvms.lowering.tir.tirx_pipeline", "tvms.lowering.tir.gpu.tirx_pipeline",
                                    "tvms.lowering.tir.gpu"])
def test_each_pipeline_module_imports_first_in_a_fresh_process(module: str) -> None:
    """(The llvm tirx pipeline imports GPU passes, whose package exports tirx passes: a fresh
    ``tvms build --tir-pipeline tirx`` had died of the import cycle.)"""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_fresh_command_line_builds_with_the_tirx_pipeline(tmp_path) -> None:
    source = tmp_path / "add_one.tvms"
    source.write_text(ADD_ONE)
    done = subprocess.run([sys.executable, "-m", "tvms", "build", str(source), "--tir-pipeline", "tirx", "-o",
                           str(tmp_path / "a.so")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.so").is_file()


# ---------------------------------------------------------------- CUDA: what TVM writes


@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN.glob("*.tvms")))
def test_a_kernel_is_written_as_tvms_tirx_pipeline_writes_it(case: str) -> None:
    assert _cuda(_load(case), "tirx") == (GOLDEN / f"{case}.cu").read_text()


def test_a_tma_kernel_is_written_as_tvm_writes_it_under_tirx() -> None:
    func = from_source((PTX / "hopper_tma_unicast_1d.tvms").read_text())
    golden = (PTX / "hopper_tma_unicast_1d.cu").read_text()
    assert _cuda(func, "tirx") == golden[golden.index(KERNEL):]


@pytest.mark.parametrize("case", ["shared_reverse", "scope_ids_reverse"])
def test_tirx_adds_no_barrier_the_kernel_did_not_write(case: str) -> None:
    tirx, s_tir = _cuda(_load(case), "tirx"), _cuda(_load(case), "s_tir")
    assert tirx.count("tvm_builtin_cuda_cta_sync();") == 1 and "__syncthreads" not in tirx
    assert s_tir.count("__syncthreads();") == 1  # (s_tir's ThreadSync adds its own after the kernel's)


@pytest.mark.parametrize("case", ["shared_reverse", "scope_ids_reverse"])
def test_nvrtc_compiles_the_tirx_kernels(case: str) -> None:
    assert_compiles(tvms.build(_load(case), target=SM90A, pipeline="tirx").imported_modules[0].get_source(),
                    archs=("sm_90a",))


@pytest.mark.parametrize("case", ["shared_reverse", "scope_ids_reverse"])
def test_the_reference_executor_computes_the_same_with_either_pipeline(case: str) -> None:
    func = _load(case).with_attr("global_symbol", "main")  # (the reference executor runs "main")
    shape = func.buffer_map[func.params[0]].shape
    a = np.random.default_rng(0).standard_normal([d.value for d in shape]).astype("float32")
    outputs = []
    for lower in (lower_for_cuda, lower_for_cuda_tirx):
        b = np.zeros_like(a)
        run_prim_func(lower(func, Target(SM90A)), a, b)
        outputs.append(b)
    if case == "shared_reverse":
        expected = (2 * a)[::-1]
    else:  # (each thread adds its own index, warp * 32 + lane; the block then reads it reversed)
        expected = (a + np.arange(64, dtype="float32"))[:, ::-1]
    np.testing.assert_array_equal(outputs[0], expected)
    np.testing.assert_array_equal(outputs[1], expected)


@pytest.mark.parametrize("case", ["branch_knows_its_condition", "warp_of_2d_threads", "narrow_rows_of_threads",
                                  "cast_of_constant", "warp_roles_by_quotient", "loaded_offset_last",
                                  "decided_selections"])
def test_what_the_tirx_simplifier_rewrites_computes_what_the_kernel_says(case: str) -> None:
    """The goldens of the tirx simplifier's rules (a branch's condition known within it, quotients
    of two-dimensional thread ids, folded casts, loaded offsets last) compute what the kernel as
    written computes: the reference executor runs the unlowered function and its tirx lowering on
    the same inputs (not the s_tir lowering, which shares FlattenBuffer and the like with it)."""
    func = _load(case).with_attr("global_symbol", "main")
    shapes = [([d.value for d in func.buffer_map[p].shape], func.buffer_map[p].dtype.name) for p in func.params]
    inputs = [(np.arange(np.prod(shape)) % 97 - 7).reshape(shape).astype(dtype) for shape, dtype in shapes]
    outputs = []
    for kernel in (func, lower_for_cuda_tirx(func, Target(SM90A))):
        buffers = [a.copy() for a in inputs]
        run_prim_func(kernel, *buffers)
        outputs.append(buffers)
    for written, lowered in zip(*outputs):
        # (NaN where both read shared memory no thread wrote: the executor's poison, equal here)
        np.testing.assert_array_equal(lowered, written)
    assert any((b != a).any() for a, b in zip(inputs, outputs[0]))  # (the kernel wrote something)


UNSIMPLIFIED: set = set()  # (the PTX goldens tvms's tirx pipeline does not write as TVM does)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(p.stem for p in PTX.glob("*.tvms") if p.stem not in UNSIMPLIFIED))
def test_the_ptx_dialects_kernels_are_written_as_tvms_tirx_pipeline_writes_them(case: str) -> None:
    target = {"kind": "cuda", "arch": "sm_90a" if case.startswith("hopper") else "sm_100a"}
    source = tvms.build(from_source((PTX / f"{case}.tvms").read_text()), target=target, pipeline="tirx")
    ours, golden = source.imported_modules[0].get_source(), (PTX / f"{case}.cu").read_text()
    assert ours[ours.index('extern "C"'):] == golden[golden.index('extern "C"'):]
