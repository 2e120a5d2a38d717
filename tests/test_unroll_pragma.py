"""The tuning space's unroll decisions reach the compiled code.

RewriteParallelVectorizeUnroll turns a ``meta_schedule.unroll_explicit`` / ``unroll_implicit``
mark into the loop pragmas ``pragma_auto_unroll_max_step`` / ``pragma_unroll_explicit``;
UnrollLoop (goldens from TVM 0.27 in test_tir_lowering: ``matmul_unroll_*``) then unrolls the
small loops under them, explicitly or by asking LLVM (``llvm.loop`` metadata).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from conftest import FIXTURES  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.ir.stmt import UNROLLED, For  # noqa: E402
from tvms.ir.visitor import walk  # noqa: E402
from tvms.lowering.codegen.llvm import codegen_llvm  # noqa: E402
from tvms.lowering.tir import lower_for_codegen  # noqa: E402
from tvms.lowering.transform import PassContext  # noqa: E402
from tvms.lowering.tune.postproc_rewrite_parallel_vectorize_unroll import (  # noqa: E402
    RewriteParallelVectorizeUnroll)
from tvms.lowering.tir.unroll_loop import UnrollLoop  # noqa: E402
from tvms.script import from_source  # noqa: E402
from tvms.tir import Schedule  # noqa: E402

MATMUL = """
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def tuned_matmul(mark: str | None, max_step: int) -> Schedule:
    """A register-tiled matmul as the llvm space samples it, with the root block's unroll mark."""
    sch = Schedule(from_source(MATMUL))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.decompose_reduction(block, k0)
    if mark is not None:
        sch.annotate(sch.get_block("root"), mark, max_step)
        assert RewriteParallelVectorizeUnroll().apply(sch)
    return sch


def loops(func) -> list:
    return [n for n in walk(func.body) if isinstance(n, For)]


def test_unroll_marks_change_the_compiled_code_and_keep_the_numbers() -> None:
    plain = lower_for_codegen(tuned_matmul(None, 0).mod["main"])
    explicit = lower_for_codegen(tuned_matmul("meta_schedule.unroll_explicit", 64).mod["main"])
    implicit = lower_for_codegen(tuned_matmul("meta_schedule.unroll_implicit", 64).mod["main"])
    # i1, k1, j1 (64 steps) and the init tile (16) are copied; i0, j0, k0 stay loops
    assert len(loops(plain)) == 8 and len(loops(explicit)) == 3
    assert "pragma_" not in tvms.IRModule({"main": explicit}).script()
    # implicit: the same five loops become T.unroll loops, which LLVM is asked to unroll fully
    assert [f.kind for f in loops(implicit)].count(UNROLLED) == 5
    ir_plain, ir_explicit, ir_implicit = (codegen_llvm(f) for f in (plain, explicit, implicit))
    assert ir_plain.count("phi ") == 8 and ir_explicit.count("phi ") == 3
    assert "llvm.loop.unroll" not in ir_plain + ir_explicit
    assert ir_implicit.count('!"llvm.loop.unroll.full"') == 1 and ir_implicit.count("!llvm.loop !") == 5

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64, 64)).astype("float32")
    for mark in ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit"):
        c = np.zeros((64, 64), "float32")
        tvms.build(tuned_matmul(mark, 64).mod, target="llvm")["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_small_max_step_unrolls_only_the_innermost_tiles() -> None:
    """Max step 16: the 4x4 init tile (16 steps), j1 (4) and k1 (4 x 4) unroll; i1 would make 64
    steps, so it stays a loop (and so do the loops around it)."""
    func = lower_for_codegen(tuned_matmul("meta_schedule.unroll_explicit", 16).mod["main"])
    assert [f.loop_var.name for f in loops(func)] == ["i_0", "j_0", "k_0", "i_1"]


def test_pass_context_config_sets_the_thresholds() -> None:
    """``tirx.UnrollLoop``'s auto_max_step 64 unrolls what the pragma of 64 does."""
    plain = tvms.IRModule({"main": lower_for_codegen(tuned_matmul(None, 0).mod["main"])})
    with PassContext(config={"tirx.UnrollLoop": {"auto_max_step": 64}}):
        assert [f.loop_var.name for f in loops(UnrollLoop()(plain)["main"])] == ["i_0", "j_0", "k_0"]
    with pytest.raises(TVMSError, match="unknown option"):
        with PassContext(config={"tirx.UnrollLoop": {"max_step": 64}}):
            UnrollLoop()(plain)
    with pytest.raises(TVMSError, match="auto_max_step takes an integer, not '64'"):
        with PassContext(config={"tirx.UnrollLoop": {"auto_max_step": "64"}}):
            UnrollLoop()(plain)
    # the build pipeline's UnrollLoop reads it too (as TVM's does)
    with PassContext(config={"tirx.UnrollLoop": {"auto_max_step": 64}}):
        built = lower_for_codegen(tuned_matmul(None, 0).mod["main"])
    assert [f.loop_var.name for f in loops(built)] == ["i_0", "j_0", "k_0"]


def test_unroll_loop_alone_matches_tvm() -> None:
    """TVM 0.27's UnrollLoop output byte for byte: a T.unroll loop around a loop and a let (each
    copy holds both), and a pragma under which a call counts as a step like a store (counting
    stores only, the outer loop would unroll too); with ``unroll_local_access``, the loops whose
    variable indexes a local buffer."""
    for name, config in (("unroll_pragma", {}), ("unroll_local", {"unroll_local_access": True})):
        before = from_source((FIXTURES / "tir_lowering" / f"{name}_before.tvms").read_text())
        with PassContext(config={"tirx.UnrollLoop": config}):
            after = UnrollLoop()(before)
        assert after.script(dialect="tvm-0.27") == \
            (FIXTURES / "tir_lowering" / f"{name}_UnrollLoop.tvms").read_text()


@pytest.mark.parametrize("body", [
    "for i in T.unroll(n):\n        A[i] = A[i] + T.float32(1)",  # (loop-level code: straight to LLVM)
    "for i in T.unroll(n):\n        with T.block('b'):\n            vi = T.axis.spatial(n, i)\n"
    "            A[vi] = A[vi] + T.float32(1)",  # (through the pipeline's UnrollLoop)
])
def test_an_unroll_of_unknown_extent_is_refused_as_tvm_refuses_it(body):
    """TVM's UnrollLoop refuses it ("Cannot unroll non-constant loop"); before, LLVM printed three
    "loop not unrolled" warnings at <unknown>:0:0 and built a plain loop. The error shows the
    loop's line, with a caret."""
    func = from_source(f"@T.prim_func\ndef main(A: T.Buffer((64,), \"float32\"), n: T.int32):\n    {body}\n",
                       "unroll.tvms")
    with pytest.raises(TVMSError, match="cannot unroll the loop over i: its extent is not a constant") as err:
        tvms.build(func, target="llvm")
    assert str(err.value).startswith("unroll.tvms:3:9: error:")
    assert "\n3 |     for i in T.unroll(n):\n" in str(err.value)
