"""MergeSharedMemoryAllocations against TVM 0.27: the inputs of TVM's own tests of the pass (and
two more), TVM's results byte for byte (fixtures/merge_shared_memory, generate_with_tvm.py), and
the pass in the cuda pipeline, on to CUDA C that NVRTC compiles and the reference executor runs."""
from __future__ import annotations

import pytest

from tvms.ir.errors import TVMSError
from tvms.ir.structural import structural_equal
from tvms.ir.target import Target
from tvms.lowering.tir import gpu
from tvms.lowering.tir.gpu import MergeSharedMemoryAllocations, merge_shared_memory_allocations
from tvms.lowering.tir.gpu.split_host_device import dynamic_shared_bytes
from tvms.script import from_source
from tvms.transform import PassContext

from conftest import FIXTURES

GOLDEN = FIXTURES / "merge_shared_memory"
DIALECT = "tvm-0.27"
CASES = sorted(p.name[:-len("_before.tvms")] for p in GOLDEN.glob("*_before.tvms"))


def merged(case: str, **config) -> str:
    with PassContext(config=config):
        return MergeSharedMemoryAllocations()(from_source((GOLDEN / f"{case}_before.tvms").read_text())).script(
            dialect=DIALECT)


# DLight's tensor-core matmul (../cuda_codegen/cases.py) as TVM's pipeline hands it to the pass:
# tensor-core loads take the tiles by tvm_access_ptr, stores are vectors. Compared structurally:
# TVM's text names the views by where it prints them (x_reindex_shared_dyn_1 before is
# x_reindex_shared_dyn after), and declares the fragments before their allocations, which does
# not read back as one buffer
STRUCTURAL = {"dlight_matmul_f16"}


def test_merged_as_tvm_merges() -> None:
    assert len(CASES) == 14
    for case in sorted(STRUCTURAL):
        ours = merge_shared_memory_allocations(from_source((GOLDEN / f"{case}_before.tvms").read_text())["main"])
        assert structural_equal(ours, from_source((GOLDEN / f"{case}_after.tvms").read_text())["main"]), case
    for case in sorted(set(CASES) - STRUCTURAL):
        want = (GOLDEN / f"{case}_after.tvms").read_text()
        got = merged(case, **({"tirx.merge_static_smem": True} if case.startswith("static_") else {}))
        # (async_copy, access_ptr: the calls take the data of views A_sh and B_sh of one
        # allocation, one data Var in tvms; each prints by the view the pass put there, as TVM's)
        assert got == want, case


def test_static_shared_memory_is_merged_only_when_asked() -> None:
    """Without tirx.merge_static_smem, static shared memory stays as it was (TVM's result; for
    static_dlight_*, DLight's conv2d and matmul at the stage the cuda pipeline hands the pass, the
    input itself); with it, merged as TVM merges it (test_merged_as_tvm_merges)."""
    for case in sorted(c for c in CASES if c.startswith("static_")):
        default = GOLDEN / f"{case}_default.tvms"
        assert merged(case) == (default if default.exists() else GOLDEN / f"{case}_before.tvms").read_text()


def test_what_it_cannot_plan_is_a_clear_error() -> None:
    text = (GOLDEN / "simple_alloc_no_reuse_before.tvms").read_text()
    symbolic = from_source(text.replace("def main():", "def main(n: T.int32):")
                           .replace('A_sh = T.alloc_buffer((128,)', 'A_sh = T.alloc_buffer((n,)'))["main"]
    with pytest.raises(TVMSError, match=r"buffer 'A_sh' in scope 'shared.dyn' has the symbolic shape"):
        merge_shared_memory_allocations(symbolic)
    two_d = from_source(text.replace('B_sh = T.alloc_buffer((128,)', 'B_sh = T.alloc_buffer((2, 64)')
                        .replace("B_sh[threadIdx_x]", "B_sh[0, threadIdx_x]"))["main"]
    with pytest.raises(TVMSError, match=r"buffer 'B_sh' has shape .*after FlattenBuffer"):
        merge_shared_memory_allocations(two_d)
    # (and a typed view its bytes do not make, in the script)
    uneven = (GOLDEN / "simple_alloc_reuse_after.tvms").read_text().replace("(512,)", "(510,)")
    with pytest.raises(TVMSError, match=r":11:16: error: buf_dyn_shmem.view\('float32'\): the last dimension "
                                        r"and offset of a uint8 buffer must be constants that float32 elements"):
        from_source(uneven)


def test_a_matmul_through_dynamic_shared_memory_compiles_and_computes() -> None:
    """16x16 tiles of A and B staged in shared.dyn (gpu_lowering's matmul_dyn_nocse, whose every
    stage is TVM's): tvms.compile renders TVM's CUDA C (one uchar array the tiles view), NVRTC
    compiles it to a cubin (sm_80; the static variant below, sm_90), and the reference
    executor runs the launch as numpy computes it."""
    import numpy as np

    import tvms
    from tvms.runtime.cuda_module import ReferenceLauncher

    func = from_source((FIXTURES / "gpu_lowering" / "matmul_dyn_nocse_00_input.tvms").read_text())["main"]
    with PassContext(config={"tirx.disable_cse_tir": True}):
        lib = tvms.compile(func, target="cuda -arch=sm_80")
    assert lib.get_source() == (GOLDEN / "matmul_dyn.cu").read_text()
    assert lib.artifacts["main"].binary.startswith(b"\x7fELF")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    lib.with_launcher(ReferenceLauncher())["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_static_shared_memory_merged_in_the_pipeline_when_asked() -> None:
    """The same matmul with its tiles in static shared memory, under tirx.merge_static_smem:
    TVM's SplitHostDevice stage and CUDA C (one `__shared__` uchar array), compiled by NVRTC."""
    import tvms

    static = from_source((FIXTURES / "gpu_lowering" / "matmul_dyn_nocse_00_input.tvms").read_text()
                         .replace('"shared.dyn"', '"shared"'))["main"]
    with PassContext(config={"tirx.disable_cse_tir": True, "tirx.merge_static_smem": True}):
        split = gpu.split_for_cuda(static, Target("cuda"))
        lib = tvms.compile(static, target="cuda -arch=sm_90")
    assert split.script(dialect=DIALECT) == (GOLDEN / "static_matmul_split.tvms").read_text()
    assert lib.get_source() == (GOLDEN / "static_matmul.cu").read_text()
    assert lib.artifacts["main"].binary.startswith(b"\x7fELF")


def test_views_live_together_keep_apart() -> None:
    """TVM's kernel whose two buffers are accessed only through views (A_view, B_view), both live
    at the last statement: merged, they keep apart (C = 1 + 2), and run race-free on the reference
    executor."""
    import numpy as np

    from tvms.runtime.reference import run_prim_func

    before = from_source((GOLDEN / "decl_buffer_alias_extends_allocation_lifetime_before.tvms").read_text())["main"]
    c = np.zeros(128, np.float32)
    run_prim_func(merge_shared_memory_allocations(before), c)
    np.testing.assert_array_equal(c, np.full(128, 3, np.float32))


# X is live while W dies and W2 reuses W's entry; X2 then reuses X's, and Z joins both entries
JOINED = '''
# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(C: T.Buffer((32,), "float32")):
    threadIdx_x = T.launch_thread("threadIdx.x", 32)
    X = T.alloc_buffer((256,), scope="shared.dyn")
    W = T.alloc_buffer((32,), scope="shared.dyn")
    W2 = T.alloc_buffer((32,), scope="shared.dyn")
    X2 = T.alloc_buffer((128,), scope="shared.dyn")
    Z = T.alloc_buffer((512,), scope="shared.dyn")
    X[threadIdx_x + 128] = T.float32(1.0)
    W[threadIdx_x] = T.float32(2.0)
    W2[threadIdx_x] = W[threadIdx_x]
    X2[threadIdx_x] = X[threadIdx_x + 128] + W2[threadIdx_x]
    Z[threadIdx_x] = X2[threadIdx_x]
    C[threadIdx_x] = Z[threadIdx_x]
'''


def test_joined_entries_keep_their_bytes(monkeypatch) -> None:
    """A deliberate departure from TVM 0.27: joining the freed entries [X, X2] and [W, W2] for Z,
    TVM zips their layers and places X2 then W2 from byte 0, so W2 (TVM's W2[threadIdx_x + 128])
    lands on X's bytes 512-640 while X is live, and C gets 4 where it should get 3. tvms places
    each joined entry at its own offset (W and W2 after X), and C is 3."""
    import importlib

    import numpy as np

    from tvms.runtime.reference import run_prim_func

    msma = importlib.import_module("tvms.lowering.tir.gpu.merge_shared_memory_allocations")

    merged = merge_shared_memory_allocations(from_source(JOINED))
    text = merged.script(dialect=DIALECT)  # (TVM's text, but for W2's offset: W2[threadIdx_x + 128] there)
    assert ('buf_dyn_shmem = T.alloc_buffer((2048,), "uint8", scope="shared.dyn")\n    Z = buf_dyn_shmem.view("float32")'
            in text)
    assert "W2[threadIdx_x + 256] = W[threadIdx_x + 256]\n    X2[threadIdx_x] = X[threadIdx_x + 128] + W2[threadIdx_x + 256]" in text
    c = np.zeros(32, np.float32)
    run_prim_func(merged, c)
    np.testing.assert_array_equal(c, np.full(32, 3, np.float32))
    # the check after planning: TVM's offsets (W2 at byte 512) are refused
    planned = msma._Plan._offsets

    def tvm_offsets(plan):
        offsets, size = planned(plan)
        offsets[next(d for d in offsets if plan.allocs[d].name == "W2")] = 512
        return offsets, size

    monkeypatch.setattr(msma._Plan, "_offsets", tvm_offsets)
    with pytest.raises(TVMSError, match=r"buffers 'W2' \(bytes 512-640\) and 'X' \(bytes 0-1024\) are live at "
                                        r"the same time"):
        merge_shared_memory_allocations(from_source(JOINED))


def test_an_unused_allocation_is_dropped() -> None:
    """A shared.dyn buffer never touched is dropped, as TVM 0.27 drops it (its result is then
    simple_alloc_reuse's), and the kernel gets one dynamic shared memory allocation to launch with."""
    text = (GOLDEN / "simple_alloc_reuse_before.tvms").read_text().replace(
        '        B_sh = T.alloc_buffer((128,), scope="shared.dyn")\n',
        '        B_sh = T.alloc_buffer((128,), scope="shared.dyn")\n        U_sh = T.alloc_buffer((64,), scope="shared.dyn")\n')
    assert "U_sh" in text
    with PassContext():
        module = MergeSharedMemoryAllocations()(from_source(text))
    assert module.script(dialect=DIALECT) == (GOLDEN / "simple_alloc_reuse_after.tvms").read_text()
    assert dynamic_shared_bytes(module["main"].body, "main").value == 512
