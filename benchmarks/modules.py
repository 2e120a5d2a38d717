"""Generated TensorIR modules for the parse/print benchmark, in Apache TVM 0.27's dialect.

Each workload is one function template, copied verbatim from a file that TVM 0.27 printed
(../shared/corpus), repeated under distinct names until the module has the requested number
of lines. The text is kept here, not read from ../shared, so the benchmark runs on a bare
clone. The generated module is exactly what TVM 0.27 prints for it: the header, then the
functions sorted by name (hence zero-padded names) and separated by one blank line, with no
final newline.
"""
from __future__ import annotations

import dataclasses

HEADER = """\
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
"""

# The templates below are the function part of each corpus file (after "class Module:"),
# byte for byte; "def main(" is renamed per copy.

# (a) block-style matmul: T.sblock, T.axis.remap, T.init (corpus: sched_matmul_00_base.tvms)
MATMUL = '''\
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        # with T.sblock("root"):
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]'''

# (b) conv2d with a padding block, from te.create_prim_func (corpus: te_conv2d_nchw.tvms)
CONV2D = '''\
    @T.prim_func(s_tir=True)
    def main(data: T.Buffer((1, 8, 16, 16), "float32"), kernel: T.Buffer((16, 8, 3, 3), "float32"), conv2d_nchw: T.Buffer((1, 16, 16, 16), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        pad_temp = T.sblock_alloc_buffer((1, 8, 18, 18))
        for i0, i1, i2, i3 in T.grid(1, 8, 18, 18):
            with T.sblock("pad_temp"):
                v_i0, v_i1, v_i2, v_i3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
                T.reads(data[v_i0, v_i1, v_i2 - 1, v_i3 - 1])
                T.writes(pad_temp[v_i0, v_i1, v_i2, v_i3])
                pad_temp[v_i0, v_i1, v_i2, v_i3] = T.if_then_else(1 <= v_i2 and v_i2 < 17 and 1 <= v_i3 and v_i3 < 17, data[v_i0, v_i1, v_i2 - 1, v_i3 - 1], T.float32(0.0))
        for nn, ff, yy, xx, rc, ry, rx in T.grid(1, 16, 16, 16, 8, 3, 3):
            with T.sblock("conv2d_nchw"):
                v_nn, v_ff, v_yy, v_xx, v_rc, v_ry, v_rx = T.axis.remap("SSSSRRR", [nn, ff, yy, xx, rc, ry, rx])
                T.reads(pad_temp[v_nn, v_rc, v_yy + v_ry, v_xx + v_rx], kernel[v_ff, v_rc, v_ry, v_rx])
                T.writes(conv2d_nchw[v_nn, v_ff, v_yy, v_xx])
                with T.init():
                    conv2d_nchw[v_nn, v_ff, v_yy, v_xx] = T.float32(0.0)
                conv2d_nchw[v_nn, v_ff, v_yy, v_xx] = conv2d_nchw[v_nn, v_ff, v_yy, v_xx] + pad_temp[v_nn, v_rc, v_yy + v_ry, v_xx + v_rx] * kernel[v_ff, v_rc, v_ry, v_rx]'''

# (c) scheduled matmul: parallel/vectorized tiles, split init (corpus: lower_matmul_sched_cpu_00_input.tvms)
TILED = '''\
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"target": T.target({"host": {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-pc-linux-gnu", "tag": ""}, "keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-pc-linux-gnu", "tag": ""})})
        # with T.sblock("root"):
        for i_0 in T.parallel(4):
            for j_0 in range(16):
                for i_1_init in range(32):
                    for j_1_init in T.vectorized(8):
                        with T.sblock("C_init"):
                            vi = T.axis.spatial(128, i_0 * 32 + i_1_init)
                            vj = T.axis.spatial(128, j_0 * 8 + j_1_init)
                            T.reads()
                            T.writes(C[vi, vj])
                            C[vi, vj] = T.float32(0.0)
                for k, i_1 in T.grid(128, 32):
                    for j_1 in T.vectorized(8):
                        with T.sblock("C_update"):
                            vi = T.axis.spatial(128, i_0 * 32 + i_1)
                            vj = T.axis.spatial(128, j_0 * 8 + j_1)
                            vk = T.axis.reduce(128, k)
                            T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                            T.writes(C[vi, vj])
                            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]'''

# (d) GPU-lowered row sum after LowerThreadAllreduce: launch_thread, warp shuffles, T.attr
#     (corpus: lower_reduce_gpu_11_LowerThreadAllreduce.tvms; TVM 0.27 itself does not round-trip it)
GPU = '''\
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((128, 256), "float32"), B: T.Buffer((128,), "float32")):
        T.func_attr({"target": T.target({"arch": "sm_50", "host": {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-pc-linux-gnu", "tag": ""}, "keys": ["cuda", "gpu"], "kind": "cuda", "max_num_threads": 1024, "tag": "", "thread_warp_size": 32}), "tirx.is_entry_func": True})
        A_1 = A.view(32768)
        B_1 = T.decl_buffer((128,), data=B.data)
        with T.launch_thread("blockIdx.x", 128) as blockIdx_x:
            in_thread_B = T.alloc_local((1,))
            red_result = T.alloc_shared((1,), annotations={"tirx.volatile": True})
            with T.launch_thread("threadIdx.x", 64) as threadIdx_x:
                in_thread_B[0] = T.float32(0.0)
                for k_0 in range(4):
                    in_thread_B[0] = in_thread_B[0] + A_1[blockIdx_x * 256 + k_0 * 64 + threadIdx_x]
                with T.attr(T.comm_reducer(lambda x0, y0: x0 + y0, [T.float32(0.0)]), "reduce_scope", 0):
                    red_buf_staging = T.alloc_shared((2,))
                    t0 = T.alloc_local((1,))
                    mask = T.alloc_local((1,), "uint32")
                    red_buf0 = T.alloc_local((1,))
                    t0_1 = T.alloc_local((1,))
                    mask_1 = T.alloc_local((1,), "uint32")
                    red_buf0_1 = T.alloc_local((1,))
                    red_buf0[0] = in_thread_B[0]
                    mask[0] = T.tvm_warp_activemask()
                    t0[0] = T.tvm_warp_shuffle_down(mask[0], red_buf0[0], 16, 32, 32)
                    red_buf0[0] = red_buf0[0] + t0[0]
                    t0[0] = T.tvm_warp_shuffle_down(mask[0], red_buf0[0], 8, 32, 32)
                    red_buf0[0] = red_buf0[0] + t0[0]
                    t0[0] = T.tvm_warp_shuffle_down(mask[0], red_buf0[0], 4, 32, 32)
                    red_buf0[0] = red_buf0[0] + t0[0]
                    t0[0] = T.tvm_warp_shuffle_down(mask[0], red_buf0[0], 2, 32, 32)
                    red_buf0[0] = red_buf0[0] + t0[0]
                    t0[0] = T.tvm_warp_shuffle_down(mask[0], red_buf0[0], 1, 32, 32)
                    red_buf0[0] = red_buf0[0] + t0[0]
                    if threadIdx_x % 32 == 0:
                        red_buf_staging[threadIdx_x // 32] = red_buf0[0]
                    T.tvm_storage_sync("shared")
                    if threadIdx_x < 2:
                        red_buf0_1[0] = red_buf_staging[threadIdx_x]
                    mask_1[0] = T.tvm_warp_activemask()
                    t0_1[0] = T.tvm_warp_shuffle_down(mask_1[0], red_buf0_1[0], 1, 32, 32)
                    red_buf0_1[0] = red_buf0_1[0] + t0_1[0]
                    if threadIdx_x == 0:
                        red_result[0] = red_buf0_1[0]
                    T.tvm_storage_sync("shared")
                if threadIdx_x == 0:
                    B_1[blockIdx_x] = red_result[0]'''


# name: (template, description, whether TVM 0.27 prints its own parse of it back unchanged,
# as the corpus manifest's tvm_roundtrip records)
TEMPLATES = {
    "matmul": (MATMUL, "block-style matmul (T.sblock, T.axis.remap, T.init)", True),
    "conv2d": (CONV2D, "conv2d NCHW with a padding block", True),
    "tiled": (TILED, "scheduled CPU matmul (parallel, vectorized tiles)", True),
    "gpu": (GPU, "GPU-lowered reduction (launch_thread, warp shuffles)", False),
}


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    text: str
    functions: int
    tvm_roundtrips: bool = True

    @property
    def lines(self) -> int:
        return len(self.text.splitlines())


def module_text(template: str, copies: int) -> str:
    """``copies`` renamed copies of one function template as an IRModule's TVMScript."""
    assert template.count("def main(") == 1, "a template defines exactly one function, main"
    width = max(3, len(str(copies - 1)))  # zero-padded, so name order is numeric order
    functions = [template.replace("def main(", f"def main{i:0{width}d}(")
                 for i in range(copies)]
    return HEADER + "\n\n".join(functions)


def workloads(target_lines: int) -> list[Workload]:
    """One module per template, each about ``target_lines`` lines long (at least one copy)."""
    result = []
    for name, (template, description, tvm_roundtrips) in TEMPLATES.items():
        per_copy = len(template.splitlines()) + 1  # + the blank line between functions
        copies = max(1, round(target_lines / per_copy))
        result.append(Workload(name, description, module_text(template, copies), copies,
                               tvm_roundtrips))
    return result
