"""Hand schedules of an fp32 N x N x N matmul as flattened loop-level TVMScript text (the form of
``../shared/corpus/lower_matmul_sched_cpu_03_FlattenBuffer.tvms``), shared by ``matmul_cpu.py``
and by ``matmul_cpu_tvm.py``, which builds the same text with Apache TVM. No imports: both
Pythons read it.
"""
from __future__ import annotations

HEADER = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
        A_1 = A.view({nn})
        B_1 = B.view({nn})
        C_1 = C.view({nn})
        for i_0 in T.parallel({n_ti}):
"""
C_TILE = "C_1[i_0 * {row_tile} + {i} * {n} + j_0 * {tj} + {j}]"
UPDATE = (C_TILE.format(i="i_1", j="j_1", row_tile="{row_tile}", n="{n}", tj="{tj}") + " = "
          + C_TILE.format(i="i_1", j="j_1", row_tile="{row_tile}", n="{n}", tj="{tj}")
          + " + A_1[i_0 * {row_tile} + i_1 * {n} + k] * B_1[k * {n} + j_0 * {tj} + j_1]")
INIT = C_TILE.format(i="i_1_init", j="j_1_init", row_tile="{row_tile}", n="{n}", tj="{tj}") + " = T.float32(0.0)"

# the corpus file's loops: rows of the tile innermost but one, for every k
CORPUS_STYLE = HEADER + f"""            for j_0 in range({{n_tj}}):
                for i_1_init in range({{ti}}):
                    for j_1_init in T.vectorized({{tj}}):
                        {INIT}
                for k, i_1 in T.grid({{n}}, {{ti}}):
                    for j_1 in T.vectorized({{tj}}):
                        {UPDATE}
"""

# the same with the tile's rows unrolled inside k: ti x tj accumulators in vector registers
REGISTER_TILED = HEADER + f"""            for j_0 in range({{n_tj}}):
                for i_1_init in T.unroll({{ti}}):
                    for j_1_init in T.vectorized({{tj}}):
                        {INIT}
                for k in range({{n}}):
                    for i_1 in T.unroll({{ti}}):
                        for j_1 in T.vectorized({{tj}}):
                            {UPDATE}
"""

# and with k split by 256 outside the column tiles, so a block of B stays in cache
K_TILED = HEADER + f"""            for i_1_init, j_init in T.grid({{ti}}, {{n}}):
                C_1[i_0 * {{row_tile}} + i_1_init * {{n}} + j_init] = T.float32(0.0)
            for k_0 in range({{n}} // 256):
                for j_0 in range({{n_tj}}):
                    for k_1 in range(256):
                        for i_1 in T.unroll({{ti}}):
                            for j_1 in T.vectorized({{tj}}):
                                {UPDATE.replace("+ k]", "+ (k_0 * 256 + k_1)]").replace("B_1[k *", "B_1[(k_0 * 256 + k_1) *")}
"""

SCHEDULES = {"corpus (32x8 tile)": (CORPUS_STYLE, 32, 8), "register-tiled (4x16 tile)": (REGISTER_TILED, 4, 16),
             "k-tiled (4x16 tile, k by 256)": (K_TILED, 4, 16)}




def schedule_text(template: str, n: int, ti: int, tj: int) -> str:
    """The TVMScript of a schedule template for N x N x N with a ti x tj tile."""
    return template.format(n=n, nn=n * n, ti=ti, tj=tj, n_ti=n // ti, n_tj=n // tj, row_tile=ti * n)


def hand_schedule_limit(ti: int, tj: int) -> int:
    """The largest N a hand schedule is timed at: beyond, one call takes seconds (the corpus's
    tile of 32 x 8 already at N = 1024) and tells nothing new."""
    return 512 if (ti, tj) == (32, 8) else 1024


def fits(template: str, n: int, ti: int, tj: int) -> bool:
    """Whether N is a multiple of the schedule's tiles."""
    return not (n % max(ti, tj) or (template is K_TILED and n % 256))
