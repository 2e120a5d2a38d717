"""The default CPU matmul rule (lowering/dlight/cpu_matmul.py): which functions it takes, that its
schedules re-parse and compute what numpy and the reference executor compute (odd sizes, batch,
B stored [j, k], a symbolic row count, fused epilogues), and the code the schedule compiles to.
Also the pieces it needed: a split of a loop of symbolic extent (checked against TVM 0.27's
output), a guard that is the same for every lane inside a vectorized loop, ``nsw`` index math."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvms
from tvms.lowering.dlight import ApplyDefaultSchedule
from tvms.lowering.dlight.analysis import vector_lanes
from tvms.lowering.dlight.cpu_matmul import Matmul, Tiling, plan_tiling, register_rows
from tvms.lowering.tir import lower_for_codegen, unswitch_guards
from tvms.runtime.reference import run_prim_func
from tvms.target import Target
from tvms.script import from_source

from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "dlight_matmul"
AVX2 = Target("llvm -mcpu=haswell -mattr=+avx2,+fma")  # 8 fp32 lanes, whatever the host


def matmul_text(m: int | None, n: int, k: int, batch: int = 0, transposed: bool = False,
                dtype: str = "float32", acc: str | None = None) -> str:
    """A plain TensorIR (batch) matmul; ``m=None`` makes the row count a symbolic ``m``."""
    acc = acc or dtype
    lead = [batch] if batch else []
    rows = "m" if m is None else str(m)
    a_shape = (*lead, rows, k)
    b_shape = (*lead, n, k) if transposed else (*lead, k, n)
    c_shape = (*lead, rows, n)
    iters = ["b"] * bool(batch) + ["i", "j", "k"]
    vs = ", ".join(f"v{x}" for x in iters)
    lead_idx = ["vb"] * bool(batch)
    a_idx = ", ".join(lead_idx + ["vi", "vk"])
    b_idx = ", ".join(lead_idx + (["vj", "vk"] if transposed else ["vk", "vj"]))
    c_idx = ", ".join(lead_idx + ["vi", "vj"])

    def cast(x: str) -> str:
        return x if acc == dtype else f"T.Cast(\"{acc}\", {x})"

    def shape(dims: tuple) -> str:
        return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"

    extents = ", ".join(str(e) for e in (*lead, rows, n, k))
    symbolic = m is None
    params = ("a: T.handle, B: T.Buffer({b}, \"{dt}\"), c: T.handle" if symbolic else
              "A: T.Buffer({a}, \"{dt}\"), B: T.Buffer({b}, \"{dt}\"), C: T.Buffer({c}, \"{acc}\")")
    params = params.format(a=shape(a_shape), b=shape(b_shape), c=shape(c_shape), dt=dtype, acc=acc)
    header = (f"    m = T.int32()\n    A = T.match_buffer(a, {shape(a_shape)}, \"{dtype}\")\n"
              f"    C = T.match_buffer(c, {shape(c_shape)}, \"{acc}\")\n") if symbolic else ""
    zero = "T.float32(0)" if acc.startswith("float") else f"T.{acc}(0)"
    return f"""@T.prim_func
def main({params}):
    T.func_attr({{"tir.noalias": True}})
{header}    for {', '.join(iters)} in T.grid({extents}):
        with T.block("C"):
            {vs} = T.axis.remap("{'S' * (len(iters) - 1)}R", [{', '.join(iters)}])
            with T.init():
                C[{c_idx}] = {zero}
            C[{c_idx}] = C[{c_idx}] + {cast(f'A[{a_idx}]')} * {cast(f'B[{b_idx}]')}
"""


def scheduled(text: str, target: Target = AVX2):
    sch = Matmul().apply(from_source(text), target, False)
    assert sch is not None, "the rule declined a matmul"
    return sch.mod["main"]


def expected(a: np.ndarray, b: np.ndarray, transposed: bool) -> np.ndarray:
    return a @ (np.swapaxes(b, -1, -2) if transposed else b)


def check_reprints(func) -> str:
    text = func.script()
    assert from_source(text).script() == text
    return text


def run_both(func, a: np.ndarray, b: np.ndarray, out_shape: tuple, dtype: str = "float32") -> tuple:
    """The built kernel's result and the reference executor's, for the same inputs."""
    built, ref = np.zeros(out_shape, dtype), np.zeros(out_shape, dtype)
    tvms.build(func, target="llvm")(a, b, built)
    run_prim_func(func, a, b, ref)
    return built, ref


# ---------------------------------------------------------------- correctness on drawn shapes

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(2, 70), n=st.integers(2, 70), k=st.integers(1, 70), batch=st.sampled_from([0, 0, 3]),
       transposed=st.booleans())
def test_drawn_shapes_equal_numpy_and_the_reference(m, n, k, batch, transposed):
    func = scheduled(matmul_text(m, n, k, batch, transposed))
    check_reprints(func)
    rng = np.random.default_rng(m * 10000 + n * 100 + k)
    lead = (batch,) if batch else ()
    a = rng.standard_normal((*lead, m, k), dtype=np.float32)
    b = rng.standard_normal((*lead, n, k) if transposed else (*lead, k, n), dtype=np.float32)
    built, ref = run_both(func, a, b, (*lead, m, n))
    np.testing.assert_allclose(built, expected(a, b, transposed), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(built, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k", [(128, 64, 1024), (96, 48, 600), (67, 32, 300)])
def test_packed_and_k_sliced_shapes(m, n, k):
    """Shapes that pack B and slice k (K above 512 with a divisor in [128, 512])."""
    func = scheduled(matmul_text(m, n, k))
    text = check_reprints(func)
    assert "B_global" in text
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    tvms.build(func, target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_odd_sizes_equal_numpy():
    """Sizes the tiles do not divide: tail rows (guarded rows of a zero-padded packed A), tail
    columns (B and C padded to whole column tiles), one row or column short of a power of two."""
    rng = np.random.default_rng(11)
    for m, n, k in [(7, 7, 7), (63, 63, 63), (1000, 1000, 1000), (1023, 1023, 1023), (2, 1000, 1)]:
        func = scheduled(matmul_text(m, n, k), Target("llvm"))
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        c = np.zeros((m, n), np.float32)
        tvms.build(func, target="llvm")(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


def test_register_tile_and_blocks_follow_the_target():
    """12 x 2 zmm accumulators with AVX-512, 6 x 2 ymm with AVX2; A packed per row panel into
    register-tile order, the tile in a local buffer; blocks of the output cut along the columns
    when the row panels alone would leave a thread idle."""
    avx512 = Target("llvm -mattr=+avx512f,+avx2")
    assert (register_rows(avx512), register_rows(AVX2), register_rows(avx512, symbolic=True)) == (12, 6, 6)
    text = scheduled(matmul_text(120, 64, 64), avx512).script()
    assert "A_global = T.alloc_buffer((10, 64, 12))" in text and 'scope="local"' in text
    assert "T.unroll(12)" in text and "T.vectorized(32)" in text
    assert plan_tiling(96, 1024, 1024, 16, 12, 2, 4) == Tiling(mr=12, nr=32, panel_tiles=8, chunks=2)
    assert plan_tiling(1024, 1024, 1024, 16, 12, 2, 4).chunks == 2  # 11 row panels: 22 blocks
    assert plan_tiling(1152, 1024, 1024, 16, 12, 2, 4).chunks == 1  # 12 row panels
    assert plan_tiling(None, 256, 784, 8, 6, 2, 4).chunks == 8  # symbolic rows: a batch may be one panel


MARK = 'T.block_attr({"meta_schedule.layout_rewrite_preproc": T.bool(True)})'


def test_packing_of_a_weight_is_marked_for_lift():
    """B is a parameter only the packing reads: the packing is a block at the top of the
    function marked as TVM's RewriteLayout marks it, and the function still computes A @ B."""
    func = scheduled(matmul_text(24, 48, 40))
    text = check_reprints(func)
    assert text.count(MARK) == 1
    packing = text.index('with T.block("B_global")')
    assert packing < text.index(MARK) < text.index("T.parallel(", packing + 1) < text.index('T.block("C_update")')
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((24, 40), dtype=np.float32), rng.standard_normal((40, 48), dtype=np.float32)
    built, ref = run_both(func, a, b, (24, 48))
    np.testing.assert_allclose(built, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)
    padded = check_reprints(scheduled(matmul_text(64, 40, 80)))  # (the zero-padding copy is the packing)
    assert padded.count(MARK) == 1 and 'T.block("B_pad")' in padded


B_ALSO_READ = """@T.prim_func
def main(A: T.Buffer((64, 80), "float32"), B: T.Buffer((80, 96), "float32"), C: T.Buffer((64, 96), "float32"), D: T.Buffer((80, 96), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(64, 96, 80):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(80, 96):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = B[vi, vj] * T.float32(2)
"""


def test_packing_of_b_read_elsewhere_is_not_marked():
    sch = Matmul().apply(from_source(B_ALSO_READ), AVX2, False)
    assert sch is None or "layout_rewrite_preproc" not in sch.mod["main"].script()


def test_symbolic_rows():
    func = scheduled(matmul_text(None, 40, 33))
    check_reprints(func)
    lib = tvms.build(func, target="llvm")
    rng = np.random.default_rng(2)
    b = rng.standard_normal((33, 40), dtype=np.float32)
    for m in (1, 5, 64, 67, 1000, 1023):
        a = rng.standard_normal((m, 33), dtype=np.float32)
        c = np.zeros((m, 40), np.float32)
        lib(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ref = np.zeros((5, 40), np.float32)
    run_prim_func(func, a[:5], b, ref)
    np.testing.assert_allclose(ref, a[:5] @ b, rtol=1e-4, atol=1e-4)


def test_symbolic_rows_split_the_columns_between_the_threads(monkeypatch):
    """A symbolic row count (a batch, often one row panel) is cut into column chunks too, so the
    threads share a single panel (the seed MLP at batch 64 ran on one thread). k is deep enough
    for two tasks."""
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    rng = np.random.default_rng(3)
    for target, k in ((AVX2, 1000), (Target("llvm"), 2000)):
        func = scheduled(matmul_text(None, 56, k), target)
        chunks = re.search(r"T\.parallel\(\(m \+ \d+\) // \d+ \* (\d+)\)", check_reprints(func))
        assert chunks and int(chunks.group(1)) >= 2
        lib = tvms.build(func, target=str(target))
        b = rng.standard_normal((k, 56), dtype=np.float32)
        for m in (1, 7, 64, 150):
            a = rng.standard_normal((m, k), dtype=np.float32)
            c = np.zeros((m, 56), np.float32)
            lib(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


def test_int8_inputs_with_int32_accumulator():
    func = scheduled(matmul_text(19, 24, 13, dtype="int8", acc="int32"))
    check_reprints(func)
    rng = np.random.default_rng(3)
    a = rng.integers(-100, 100, (19, 13), dtype=np.int8)
    b = rng.integers(-100, 100, (13, 24), dtype=np.int8)
    built, ref = run_both(func, a, b, (19, 24), "int32")
    np.testing.assert_array_equal(built, a.astype(np.int32) @ b.astype(np.int32))
    np.testing.assert_array_equal(ref, built)


# ---------------------------------------------------------------- what the rule declines

ADD = """@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]
"""

ROW_SUM = """@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64,), "float32")):
    for i, k in T.grid(64, 64):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
"""

SQUARE_SUM = """@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * A[vk, vj] * A[vi, vj]
"""


@pytest.mark.parametrize("text", [ADD, ROW_SUM, SQUARE_SUM, matmul_text(1, 64, 64), matmul_text(64, 1, 64)],
                         ids=["add", "row-sum", "not-a-product-of-two", "gemv-1xK-KxN", "matrix-vector"])
def test_declines_what_is_not_a_matmul(text):
    assert Matmul().apply(from_source(text), AVX2, False) is None


def test_declines_an_already_tiled_matmul():
    sch = tvms.tir.Schedule(from_source(matmul_text(64, 64, 64)))
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 8])
    assert Matmul().apply(sch.mod["main"], AVX2, False) is None


def test_vector_width_follows_the_target():
    assert vector_lanes(Target("llvm -mattr=+avx512f,+avx2"), 32) == 16
    assert vector_lanes(Target("llvm -mattr=+avx2,-avx512f"), 32) == 8
    assert vector_lanes(Target("llvm -mattr=+sse4.2"), 32) == 4
    # a named CPU without -mattr: as LLVM compiles for it (a guess of 256 bits before)
    assert [vector_lanes(Target(f"llvm -mcpu={cpu}"), 32) for cpu in ("sapphirerapids", "znver4")] == [16, 16]
    assert [vector_lanes(Target(f"llvm -mcpu={cpu}"), 16) for cpu in ("haswell", "x86-64")] == [16, 8]
    text = scheduled(matmul_text(64, 64, 64), Target("llvm -mattr=+avx512f,+avx2")).script()
    assert "T.vectorized(32)" in text  # two 16-lane vectors per row of the register tile


# ---------------------------------------------------------------- fused epilogues (the MLP)

def test_mlp_zero_pipeline_kernels_are_scheduled_and_correct():
    mod = tvms.relax.get_pipeline("zero")(from_source((ROOT / "examples" / "mlp.tvms").read_text()))
    with tvms.target.Target("llvm"):
        out = ApplyDefaultSchedule(Matmul())(mod)
    rng = np.random.default_rng(4)
    w1, b1 = rng.standard_normal((784, 256), dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    w2, b2 = rng.standard_normal((256, 10), dtype=np.float32), rng.standard_normal(10, dtype=np.float32)
    kernels = {"fused_matmul_add_relu": (w1, b1, lambda y: np.maximum(y, 0)),
               "fused_matmul1_add1": (w2, b2, lambda y: y)}
    for name, (w, bias, act) in kernels.items():
        func = out[name]
        text = check_reprints(func)
        assert "T.parallel" in text and f"T.unroll(T.int64({register_rows(Target('llvm'), symbolic=True)}))" in text, name
        lib = tvms.build(func, target="llvm")
        for n in (1, 7, 64):
            x = rng.standard_normal((n, w.shape[0]), dtype=np.float32)
            y = np.zeros((n, w.shape[1]), np.float32)
            lib(x, w, bias, y)
            np.testing.assert_allclose(y, act(x @ w + bias), rtol=1e-4, atol=1e-3)
        ref = np.zeros((7, w.shape[1]), np.float32)
        run_prim_func(func, x[:7], w, bias, ref)
        np.testing.assert_allclose(ref, act(x[:7] @ w + bias), rtol=1e-4, atol=1e-3)


def test_prologue_transpose_is_inlined_into_a_packed_read():
    text = """@T.prim_func
def main(A: T.Buffer((48, 40), "float32"), W: T.Buffer((32, 40), "float32"), C: T.Buffer((48, 32), "float32")):
    T.func_attr({"tir.noalias": True})
    WT = T.alloc_buffer((40, 32))
    for i, j in T.grid(40, 32):
        with T.block("WT"):
            vi, vj = T.axis.remap("SS", [i, j])
            WT[vi, vj] = W[vj, vi]
    for i, j, k in T.grid(48, 32, 40):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * WT[vk, vj]
"""
    func = scheduled(text)
    printed = check_reprints(func)
    assert 'T.block("WT")' not in printed and "W_global" in printed
    rng = np.random.default_rng(5)
    a, w = rng.standard_normal((48, 40), dtype=np.float32), rng.standard_normal((32, 40), dtype=np.float32)
    built, ref = run_both(func, a, w, (48, 32))
    np.testing.assert_allclose(built, a @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the pieces underneath

def test_split_of_a_symbolic_loop_prints_what_tvm_prints():
    mod = from_source((FIXTURES / "symbolic_split_input.tvms").read_text())
    sch = tvms.tir.Schedule(mod)
    i, j = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(i, [None, 4])
    sch.reorder(j, inner)  # the outer loop of symbolic extent stays in place
    assert sch.mod.script(dialect="tvm-0.27") == (FIXTURES / "symbolic_split_reorder.tvms").read_text()


def test_split_of_a_symbolic_loop_needs_one_free_factor():
    sch = tvms.tir.Schedule(from_source((FIXTURES / "symbolic_split_input.tvms").read_text()))
    i, _ = sch.get_loops(sch.get_sblock("C"))
    with pytest.raises(tvms.tir.ScheduleError, match="symbolic extent"):
        sch.split(i, [2, 4])


def test_row_guard_inside_a_vectorized_loop_stays_vector_code():
    lowered = lower_for_codegen(scheduled(matmul_text(37, 32, 8)))
    text = lowered.script()
    assert "T.vectorized" not in text and "T.Ramp" in text and "if " in text


def test_register_tile_is_fma_chain_in_ymm_registers():
    """The hot loop: broadcasts of A, vector loads of packed B, FMAs into ymm accumulators that
    never touch memory (96 is not a power of two: the row offsets need ``nsw`` to be told apart)."""
    func = scheduled(matmul_text(96, 96, 96))
    asm = tvms.build(func, target=str(AVX2))["main"].compiled.assembly()
    fmas = [line for line in asm.splitlines() if "vfmadd" in line]
    assert len(fmas) >= 8 and all("%ymm" in line for line in fmas)
    assert not [line for line in fmas if "(" in line]  # no accumulator read from memory
    assert "vbroadcastss" in asm


GUARDED_ROWS = """@T.prim_func
def main(A: T.Buffer((64,), "float32"), n: T.int32):
    for i in range(4):
        for k in range(8):
            if i * 2 < n:
                A[i * 16 + k] = A[i * 16 + k] + T.float32(1.0)
            if i * 2 + 1 < n:
                A[i * 16 + 8 + k] = A[i * 16 + 8 + k] + T.float32(2.0)
            if k < n:
                A[k] = A[k] * T.float32(1.0)
"""


def test_unswitch_guards_tests_invariant_guards_once_per_loop():
    func = from_source(GUARDED_ROWS.replace("            if k < n:\n                A[k] = A[k] * T.float32(1.0)\n", ""))
    out = unswitch_guards(func)
    text = out.script()
    assert "        if i * 2 < n and i * 2 + 1 < n:\n            for k in range(8):\n" \
           "                A[i * 16 + k] = A[i * 16 + k] + T.float32(1.0)\n" in text
    assert text.count("for k in range(8)") == 2  # the full tile's loop and the guarded one
    assert "        else:\n            if i * 2 < n or i * 2 + 1 < n:\n" in text  # nothing past the end
    for n in range(-1, 10):
        before, after = np.zeros(64, np.float32), np.zeros(64, np.float32)
        run_prim_func(func, before, n)
        run_prim_func(out, after, n)
        np.testing.assert_array_equal(before, after)


def test_unswitch_guards_leaves_a_guard_that_changes_in_the_loop():
    func = from_source(GUARDED_ROWS)  # `k < n` uses the loop variable: nothing moves
    assert unswitch_guards(func).script() == func.script()


def test_matmul_benchmark_quick_run_prints_its_rows():
    done = subprocess.run([sys.executable, "matmul_cpu.py", "--n", "64", "--repeat", "1", "--threads", "1",
                           "--no-tvm"], cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 thread(s): measured FMA peak" in done.stdout
    for row in ("numpy (BLAS)", "tvms default rule (dlight Matmul)", "tvms register-tiled (4x16 tile)"):
        assert re.search(rf"^{re.escape(row)} +64 +[0-9.]+ +[0-9.]+ ", done.stdout, re.M), row


def test_symbolic_loop_moved_inwards_by_the_reorder():
    # (the loop of symbolic extent moves inwards, which TVM's reorder allows: its binding stays affine)
    text = matmul_text(None, 16, 8).replace("for i, j, k in T.grid(m, 16, 8):", "for k, j, i in T.grid(8, 16, m):")
    func = scheduled(text)
    check_reprints(func)
    rng = np.random.default_rng(8)
    for m in (1, 13):
        a, b = rng.standard_normal((m, 8)).astype("float32"), rng.standard_normal((8, 16)).astype("float32")
        for result in run_both(func, a, b, (m, 16)):
            np.testing.assert_allclose(result, a @ b, rtol=1e-5, atol=1e-5)


def test_loops_in_another_order_than_the_iterators():
    text = matmul_text(20, 24, 12).replace("for i, j, k in T.grid(20, 24, 12):", "for k, j, i in T.grid(12, 24, 20):")
    func = scheduled(text)
    check_reprints(func)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((20, 12), dtype=np.float32), rng.standard_normal((12, 24), dtype=np.float32)
    built, ref = run_both(func, a, b, (20, 24))
    np.testing.assert_allclose(built, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ref, built, rtol=1e-4, atol=1e-4)


def test_linear_layer_over_a_batch_dispatches_on_the_row_count():
    """NT_matmul (FuseTransposeMatmul) over a symbolic batch: the weight packed once at the top
    (marked, so that LiftTransformParams runs it once per weight), then register tiles of
    several rows from TILED_MIN_ROWS rows on and of one row below (a batch of one), both reading
    the packed weight."""
    from tvms.lowering.dlight.cpu_matmul import TILED_MIN_ROWS
    from tvms.lowering.relax.fuse_transpose_matmul import FuseTransposeMatmul

    mod = from_source((ROOT / "examples" / "mlp.tvms").read_text())
    mod = tvms.relax.get_pipeline("zero")(FuseTransposeMatmul()(mod))
    with tvms.target.Target("llvm"):
        func = ApplyDefaultSchedule(Matmul())(mod)["fused_NT_matmul_add_relu"]
    text = check_reprints(func)
    assert f"if n >= T.int64({TILED_MIN_ROWS}):" in text and text.count(MARK) == 1
    assert text.index(MARK) < text.index("if n >=") and "fc1_weight[" not in text[text.index("if n >="):]
    lib = tvms.build(func, target="llvm")
    rng = np.random.default_rng(5)
    w, bias = rng.standard_normal((256, 784), dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    for n in (1, TILED_MIN_ROWS, 15, 16, 64):
        x = rng.standard_normal((n, 784), dtype=np.float32)
        y = np.zeros((n, 256), np.float32)
        lib(x, w, bias, y)
        np.testing.assert_allclose(y, np.maximum(x @ w.T + bias, 0), rtol=1e-4, atol=1e-3)


GUARDED_TAIL = """@T.prim_func
def main(A: T.Buffer((20,), "float32"), B: T.Buffer((20,), "float32")):
    for i in range(2):
        for j in T.vectorized(16):
            if i * 16 + j < 20:
                B[i * 16 + j] = A[i * 16 + j] * T.float32(2)
"""


@pytest.mark.parametrize("target,mask", [(str(AVX2), "vmaskmovps"), ("llvm -mattr=+avx512f,+avx2", "{%k")],
                         ids=["avx2", "avx512"])
def test_guarded_vector_store_is_masked(target, mask):
    """A store whose guard varies by lane (a tile's last columns) is a masked vector store, its
    contiguous loads masked loads: lanes past the guard neither read nor write memory."""
    lib = tvms.build(from_source(GUARDED_TAIL), target=target)
    asm = lib.get_source("asm")
    assert mask in asm
    a, b = np.arange(20, dtype=np.float32), np.full(20, -1, np.float32)
    lib(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    tail = scheduled(matmul_text(30, 40, 16))  # (column tiles of 16 on AVX2: 40 = 2 x 16 + 8)
    assert "vmaskmovps" in tvms.build(tail, target=str(AVX2)).get_source("asm")


PADDING = """@T.prim_func
def main(A: T.Buffer((3, 20), "float32"), B: T.Buffer((5, 32), "float32")):
    for i in range(5):
        for j in T.vectorized(32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.if_then_else(1 <= vi and vi < 4 and vj < 20, A[vi - 1, vj] + A[vi - 1, 0], T.float32(0))
"""


def test_guarded_vector_loads_read_only_their_lanes():
    """``T.if_then_else`` with a condition that varies by lane (zero padding): each side's loads
    are masked to its lanes (the rows outside A are not read at all), a uniform address too (one
    scalar load, made only when some lane is in the guard)."""
    for target in (str(AVX2), "llvm -mattr=+avx512f,+avx2"):
        lib = tvms.build(from_source(PADDING), target=target)
        ll = lib.get_source("ll")
        assert "llvm.masked.load.v32f32" in ll and "llvm.masked.gather" not in ll
        assert "llvm.masked.load.v1f32" in ll and "llvm.vector.reduce.or.v32i1" in ll
        a, b = np.arange(60, dtype=np.float32).reshape(3, 20), np.full((5, 32), -1, np.float32)
        lib(a, b)
        expected = np.zeros((5, 32), np.float32)
        expected[1:4, :20] = a + a[:, :1]
        np.testing.assert_array_equal(b, expected)


@pytest.mark.slow
def test_compile_lifts_the_marked_packing_of_the_weights():
    """tvms.compile of the MLP at batch 64 with num_input: the rule's marked packings of the two
    weights are split out (SplitLayoutRewritePreproc) and run once per weight set
    (LiftTransformParams), the kernels per call reading the packed panels."""
    text = (ROOT / "examples" / "mlp.tvms").read_text().replace('("n", 784)', "(64, 784)").replace(
        '("n", 10)', "(64, 10)").replace("        n = T.int64()\n", "")
    vm = tvms.relax.VirtualMachine(tvms.compile(from_source(text), target="llvm"), tvms.cpu())
    program = {f.name: f for f in vm.executable.program.functions}
    kernels = {name: [i.func for i in program[name].code if getattr(i, "kind", None) == "kernel"]
               for name in ("forward_transform_params", "forward_lifted")}
    assert kernels["forward_transform_params"] == ["fused_NT_matmul_add_relu_weight_prepack",
                                                   "fused_NT_matmul1_add1_weight_prepack"]
    assert all(k.endswith("_prepacked") for k in kernels["forward_lifted"])
    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 784), dtype=np.float32)
    w1, b1 = rng.standard_normal((256, 784), dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    w2, b2 = rng.standard_normal((10, 256), dtype=np.float32), rng.standard_normal(10, dtype=np.float32)
    for _ in range(2):
        y = vm["forward"](x, w1, b1, w2, b2).numpy()
        np.testing.assert_allclose(y, np.maximum(x @ w1.T + b1, 0) @ w2.T + b2, rtol=1e-4, atol=1e-2)
    assert vm.param_cache.transforms == 1
